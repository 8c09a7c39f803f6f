#!/usr/bin/env bash
# A Python with confluent-kafka (the independent client the tests read the dead letter queue
# with), in target/pyenv; made once, from PyPI.
set -euo pipefail
cd "$(dirname "$0")/../.."
env=target/pyenv
if [ -x "$env/bin/python" ] && "$env/bin/python" -c "import confluent_kafka" 2>/dev/null; then exit 0; fi
start=$(date +%s)
python3 -m venv "$env"
"$env/bin/pip" install --quiet "confluent-kafka==2.16.1"
echo "installed confluent-kafka in $(( $(date +%s) - start )) s"
