#!/usr/bin/env bash
# Install Debian's kcat (the raw-consume baseline of `make bench`) if it is missing.
set -euo pipefail
if command -v kcat >/dev/null 2>&1; then exit 0; fi
start=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
apt-get install -y kcat >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y kcat >/dev/null; }
echo "installed kcat in $(( $(date +%s) - start )) s"
