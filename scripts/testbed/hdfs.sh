#!/usr/bin/env bash
# The jars of two real HDFS releases, and a Java 17 to run them; made once. The tests start
# their own NameNode and DataNode from these (tests/harness/hdfs.rs):
# - Hadoop 3 (the release pinned in scripts/testbed/hadoop3/pom.xml) from Maven Central, in
#   target/hdfs3/libs;
# - Hadoop 2.7.3, taken from the pyspark 2.4.8 source package on PyPI, in target/hdfs/jars.
set -euo pipefail
cd "$(dirname "$0")/../.."
pom=scripts/testbed/hadoop3/pom.xml
version=$(sed -n 's|.*<hadoop.version>\(.*\)</hadoop.version>.*|\1|p' "$pom")
mkdir -p target/hdfs3
scripts/testbed/maven-libs.sh "$pom" target/hdfs3/libs "Apache Hadoop $version"

out=target/hdfs
jars="$out/jars"
if [ -f "$jars/.complete" ] && command -v java >/dev/null; then exit 0; fi
start=$(date +%s)

if ! command -v java >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
    echo "installed Java 17 in $(( $(date +%s) - start )) s"
fi

mkdir -p "$out"
if [ ! -x "$out/venv/bin/pip" ]; then
    python3 -m venv "$out/venv"
    "$out/venv/bin/pip" install --quiet setuptools wheel
fi
if [ ! -f "$out/dl/pyspark-2.4.8.tar.gz" ]; then
    "$out/venv/bin/pip" download --quiet --no-deps --no-build-isolation pyspark==2.4.8 -d "$out/dl"
fi
rm -rf "$out/unpacked" "$jars"
mkdir -p "$out/unpacked" "$jars"
tar -xzf "$out/dl/pyspark-2.4.8.tar.gz" -C "$out/unpacked" --wildcards 'pyspark-2.4.8/deps/jars/*'
# Only what a NameNode, a DataNode and FsShell load: Spark's other jars would shadow them.
wanted='^(hadoop-(common|hdfs|auth|annotations)-2\.7\.3|guava-14|protobuf-java-2\.5|commons-[a-z0-9]+-|log4j-1\.2|slf4j-api|slf4j-log4j12|htrace-core|jetty-6|jetty-util-6|netty-3|netty-all-4|javax\.servlet-api|javax\.ws\.rs-api|xmlenc|jackson-(core|mapper)-asl|jsr305|xercesImpl|leveldbjni-all)'
for jar in "$out"/unpacked/pyspark-2.4.8/deps/jars/*.jar; do
    if basename "$jar" | grep -Eq "$wanted"; then mv "$jar" "$jars/"; fi
done
rm -rf "$out/unpacked"
rm -rf "$out/dl" "$out/venv"   # ~220 MB, not needed once the jars are out
touch "$jars/.complete"
echo "HDFS jars ready ($(ls "$jars" | wc -l) jars) in $(( $(date +%s) - start )) s"
