#!/usr/bin/env bash
# Install Debian's Prometheus server (for the metrics test that scrapes a cluster) if it is
# missing; the Debian service is not started: the test starts its own server in a temporary
# directory (tests/harness/prometheus.rs).
set -euo pipefail
if command -v prometheus >/dev/null; then exit 0; fi
start=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends prometheus >/dev/null 2>&1 \
  || { apt-get update >/dev/null && apt-get install -y --no-install-recommends prometheus >/dev/null; }
service prometheus stop >/dev/null 2>&1 || true
echo "installed Prometheus in $(( $(date +%s) - start )) s"
