#!/usr/bin/env bash
# Install Debian's Chromium if it is missing: the headless browser the web console's test
# drives with Playwright (tests/console.rs; Playwright downloads no browser of its own).
set -euo pipefail
if [ -x /usr/lib/chromium/chromium ] || command -v chromium >/dev/null; then exit 0; fi
start=$(date +%s)
"$(dirname "$0")/apt-install.sh" --no-install-recommends chromium
echo "installed Chromium in $(( $(date +%s) - start )) s"
