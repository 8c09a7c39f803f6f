#!/usr/bin/env bash
# Fetch the jars of the Apache Kafka release pinned in scripts/testbed/pom.xml (the broker in
# KRaft mode, Kafka's tools, Kafka Connect with the FileStream connectors, JsonConverter and
# the transforms) from Maven Central into target/kafka/libs, installing Java 17 and Maven if
# they are missing; and Prometheus's JMX exporter agent (scripts/testbed/jmx-exporter.pom.xml)
# into target/kafka/agent. Quick when the jars of those releases are there already.
set -euo pipefail
cd "$(dirname "$0")/../.."
pom=scripts/testbed/pom.xml
version=$(sed -n 's|.*<kafka.version>\(.*\)</kafka.version>.*|\1|p' "$pom")
mkdir -p target/kafka
scripts/testbed/maven-libs.sh "$pom" target/kafka/libs "Apache Kafka $version"
exec scripts/testbed/maven-libs.sh scripts/testbed/jmx-exporter.pom.xml target/kafka/agent "the JMX exporter agent"
