#!/usr/bin/env bash
# Install Debian packages (apt-get's arguments: packages and options) from the package lists the
# machine has, else after updating them (a fresh machine's lists may be stale or empty); quiet
# unless the second try fails too. Used by the other testbed scripts.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get install -y "$@" >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y "$@" >/dev/null; }
