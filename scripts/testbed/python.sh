#!/usr/bin/env bash
# A Python with the independent readers the tests check Ferry's output with, in target/pyenv;
# made once, from PyPI: confluent-kafka (topics, the dead letter queue), fastavro (Avro files),
# pyarrow (Parquet files); and tools written for Kafka Connect's REST API, run against Ferry:
# kafka-connect-py (`kc`) and kafka-connect-healthcheck; and Playwright, which drives Debian's
# Chromium (scripts/testbed/chromium.sh) through the web console (its driver is in the wheel:
# no browser is downloaded).
set -euo pipefail
cd "$(dirname "$0")/../.."
env=target/pyenv
if [ -x "$env/bin/python" ] && "$env/bin/python" -c "import confluent_kafka, fastavro, pyarrow, kafka_connect, kafka_connect_healthcheck, playwright" 2>/dev/null; then exit 0; fi
start=$(date +%s)
[ -x "$env/bin/python" ] || python3 -m venv "$env"
"$env/bin/pip" install --quiet "confluent-kafka==2.16.1" "fastavro==1.13.1" "pyarrow==26.0.1" \
  "kafka-connect-py==1.0.0" "kafka-connect-healthcheck==0.3.0" \
  "playwright==1.65.2"
echo "installed confluent-kafka, fastavro, pyarrow, kafka-connect-py, kafka-connect-healthcheck and playwright in $(( $(date +%s) - start )) s"
