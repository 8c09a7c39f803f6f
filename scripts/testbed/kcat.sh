#!/usr/bin/env bash
# Install Debian's kcat (the raw-consume baseline of `make bench`) if it is missing.
set -euo pipefail
if command -v kcat >/dev/null 2>&1; then exit 0; fi
start=$(date +%s)
"$(dirname "$0")/apt-install.sh" kcat
echo "installed kcat in $(( $(date +%s) - start )) s"
