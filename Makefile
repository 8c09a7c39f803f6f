# Ferry: `make run` starts a local three-node cluster; `make test` runs everything CI runs.
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: all build lint test unit e2e run bench jepsen console clean

all: build

build:
	$(CARGO) build --workspace --all-targets --locked

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

# Unit tests (pure state machine, storage suite, config, validation, the console's parsing), then
# the end-to-end tests that start real ferryd processes, one cluster at a time.
test: lint build unit e2e

# A one-off build (CI's fresh clone) gains nothing from incremental state but its disk use.
test: export CARGO_INCREMENTAL = 0

unit:
	$(CARGO) test --workspace --exclude ferry-tests --locked
	# The web console's pure parts (node's own test runner: no npm packages needed).
	node --test console/test/*.test.mjs

e2e: build
	./scripts/testbed/kafka.sh
	./scripts/testbed/python.sh
	./scripts/testbed/hdfs.sh
	./scripts/testbed/postgres.sh
	./scripts/testbed/prometheus.sh
	./scripts/testbed/chromium.sh
	./scripts/testbed/gdb.sh
	# One real single-broker Kafka for the whole run; each test empties it first (tests/harness).
	$(CURDIR)/target/debug/ferry-kafka -- $(CARGO) test -p ferry-tests --locked -- --test-threads=1 --nocapture

run:
	./scripts/testbed/kafka.sh
	$(CARGO) build -p ferry-server -p ferry-cli -p ferry-tests --bins --locked
	./scripts/run-local.sh

bench:
	./scripts/testbed/kafka.sh
	./scripts/testbed/kcat.sh
	./scripts/testbed/hdfs.sh
	./scripts/testbed/postgres.sh
	$(CARGO) build --release --workspace --locked
	# The broker with a full JIT and a larger heap than the tests' (see tests/harness/brokers.rs).
	FERRY_KAFKA_JVM_OPTS="-Xms1g -Xmx1g -XX:+UseG1GC" FERRY_BIN_DIR=$(CURDIR)/target/release $(CURDIR)/target/release/ferry-bench

# The fault suite's matrix: every nemesis x every sink x three seeds, one scenario at a time
# (see docs/reliability.md). Narrow it with ARGS, e.g. ARGS="--nemesis pause --seed 7 --duration 20".
ARGS ?= --nemesis all --sink all --seed 1,2,3 --duration 40
jepsen:
	./scripts/testbed/kafka.sh
	./scripts/testbed/hdfs.sh
	./scripts/testbed/postgres.sh
	./scripts/testbed/gdb.sh
	$(CARGO) build --workspace --bins --locked
	FERRY_BIN_DIR=$(CURDIR)/target/debug $(CURDIR)/target/debug/ferry-jepsen $(ARGS)
	# Disks that lie, in a release build too (debug builds check more of openraft's invariants).
	$(CARGO) build --release --workspace --bins --locked
	FERRY_BIN_DIR=$(CURDIR)/target/release $(CURDIR)/target/release/ferry-jepsen --nemesis wipe,rollback --sink all --seed 1,2,3 --duration 40

# The web console (console/, npm packages pinned by its package-lock.json), built into
# crates/ferry-server/console/, which ferryd embeds and git keeps: cargo never runs npm. Run it
# after changing console/; `make test` fails while the built files are older than the sources.
console:
	cd console && npm ci --no-audit --no-fund && npm run build

clean:
	$(CARGO) clean
	rm -rf .run
