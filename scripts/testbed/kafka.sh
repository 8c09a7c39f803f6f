#!/usr/bin/env bash
# Fetch the jars of the Apache Kafka release pinned in scripts/testbed/pom.xml (the broker in
# KRaft mode, Kafka's tools, Kafka Connect with the FileStream connectors, JsonConverter and
# the transforms) from Maven Central into target/kafka/libs, installing Java 17 and Maven if
# they are missing. Quick when the jars of that release are there already.
set -euo pipefail
cd "$(dirname "$0")/../.."
pom=scripts/testbed/pom.xml
libs=target/kafka/libs
version=$(sed -n 's|.*<kafka.version>\(.*\)</kafka.version>.*|\1|p' "$pom")
stamp="$libs/.fetched-$(sha256sum "$pom" | cut -c1-16)"
if [ -f "$stamp" ]; then exit 0; fi
start=$(date +%s)
missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y "${missing[@]}" >/dev/null 2>&1 \
    || { apt-get update >/dev/null && apt-get install -y "${missing[@]}" >/dev/null; }
fi
rm -rf "$libs"
mkdir -p "$libs"
if ! mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies -DoutputDirectory="$PWD/$libs" >target/kafka/fetch.log 2>&1; then
  cat target/kafka/fetch.log >&2
  echo "kafka.sh: cannot fetch Apache Kafka $version's jars from Maven Central (see above)" >&2
  exit 1
fi
touch "$stamp"
echo "fetched Apache Kafka $version ($(ls "$libs"/*.jar | wc -l) jars, $(du -sh "$libs" | cut -f1)) in $(( $(date +%s) - start )) s"
