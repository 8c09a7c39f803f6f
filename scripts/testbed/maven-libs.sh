#!/usr/bin/env bash
# maven-libs.sh POM DIR WHAT: copy the jars POM depends on (with theirs) from Maven Central
# into DIR, installing Java 17 and Maven if they are missing. Quick when DIR already holds the
# jars of this very POM (a stamp of its hash). Used by kafka.sh and hdfs.sh.
set -euo pipefail
pom=$1
libs=$2
what=$3
stamp="$libs/.fetched-$(sha256sum "$pom" | cut -c1-16)"
if [ -f "$stamp" ] && command -v java >/dev/null 2>&1; then exit 0; fi
start=$(date +%s)
missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
if [ ${#missing[@]} -gt 0 ]; then
  "$(dirname "$0")/apt-install.sh" "${missing[@]}"
fi
rm -rf "$libs"
mkdir -p "$libs"
log="$libs.fetch.log"
if ! mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies -DoutputDirectory="$PWD/$libs" >"$log" 2>&1; then
  cat "$log" >&2
  echo "maven-libs.sh: cannot fetch $what's jars from Maven Central (see above)" >&2
  exit 1
fi
touch "$stamp"
echo "fetched $what ($(ls "$libs"/*.jar | wc -l) jars, $(du -sh "$libs" | cut -f1)) in $(( $(date +%s) - start )) s"
