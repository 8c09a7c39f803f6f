#!/usr/bin/env bash
# Fetch the jars of the Apache Kafka release pinned in scripts/testbed/pom.xml (the broker in
# KRaft mode, Kafka's tools, Kafka Connect with the FileStream connectors, JsonConverter and
# the transforms) from Maven Central into target/kafka/libs, installing Java 17 and Maven if
# they are missing. Quick when the jars of that release are there already.
set -euo pipefail
cd "$(dirname "$0")/../.."
pom=scripts/testbed/pom.xml
version=$(sed -n 's|.*<kafka.version>\(.*\)</kafka.version>.*|\1|p' "$pom")
mkdir -p target/kafka
exec scripts/testbed/maven-libs.sh "$pom" target/kafka/libs "Apache Kafka $version"
