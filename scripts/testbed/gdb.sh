#!/usr/bin/env bash
# Install gdb if it is missing: a ferryd's watchdog writes every thread's stack with it when the
# node freezes or does not stop in time, and the tests read those stacks (tests/raft_safety.rs).
set -euo pipefail
if command -v gdb >/dev/null; then exit 0; fi
start=$(date +%s)
"$(dirname "$0")/apt-install.sh" --no-install-recommends gdb
echo "installed gdb in $(( $(date +%s) - start )) s"
