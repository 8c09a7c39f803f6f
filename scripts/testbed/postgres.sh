#!/usr/bin/env bash
# Install Debian's PostgreSQL server (for the JDBC connectors' tests) if it is missing; the
# Debian service is not started: each test starts its own server in a temporary directory
# (tests/harness/postgres.rs).
set -euo pipefail
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && command -v psql >/dev/null; then exit 0; fi
start=$(date +%s)
"$(dirname "$0")/apt-install.sh" postgresql
service postgresql stop >/dev/null 2>&1 || true
echo "installed PostgreSQL in $(( $(date +%s) - start )) s"
