#!/usr/bin/env bash
# Install Debian's Prometheus server (for the metrics test that scrapes a cluster) if it is
# missing; the Debian service is not started: the test starts its own server in a temporary
# directory (tests/harness/prometheus.rs).
set -euo pipefail
if command -v prometheus >/dev/null; then exit 0; fi
start=$(date +%s)
"$(dirname "$0")/apt-install.sh" --no-install-recommends prometheus
service prometheus stop >/dev/null 2>&1 || true
echo "installed Prometheus in $(( $(date +%s) - start )) s"
