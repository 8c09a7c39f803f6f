#!/usr/bin/env bash
# Install Debian's PostgreSQL server (for the JDBC connectors' tests) if it is missing; the
# Debian service is not started: each test starts its own server in a temporary directory
# (tests/harness/postgres.rs).
set -euo pipefail
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && command -v psql >/dev/null; then exit 0; fi
start=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
apt-get install -y postgresql >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y postgresql >/dev/null; }
service postgresql stop >/dev/null 2>&1 || true
echo "installed PostgreSQL in $(( $(date +%s) - start )) s"
