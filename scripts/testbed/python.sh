#!/usr/bin/env bash
# A Python with the independent readers the tests check Ferry's output with, in target/pyenv;
# made once, from PyPI: confluent-kafka (topics, the dead letter queue), fastavro (Avro files),
# pyarrow (Parquet files).
set -euo pipefail
cd "$(dirname "$0")/../.."
env=target/pyenv
if [ -x "$env/bin/python" ] && "$env/bin/python" -c "import confluent_kafka, fastavro, pyarrow" 2>/dev/null; then exit 0; fi
start=$(date +%s)
[ -x "$env/bin/python" ] || python3 -m venv "$env"
"$env/bin/pip" install --quiet "confluent-kafka==2.16.1" "fastavro==1.13.1" "pyarrow==26.0.1"
echo "installed confluent-kafka, fastavro and pyarrow in $(( $(date +%s) - start )) s"
