# Two commands on a fresh Debian machine: `make demo` and `make test`. Both install what they need.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.zk2kraft-installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PYTHON ?= python3

.PHONY: demo test deps system-deps kafka-jars zookeeper-jars lint bench clean

# The demo fetches Kafka's jars itself (one line with the size, first time only), so that a machine without
# Java or Maven Central gets its one-line answer naming `zk2kraft demo --simulated`.
demo: system-deps $(STAMP)
	$(VENV)/bin/zk2kraft demo

# Besides the whole suite on Debian's ZooKeeper, the core migration tests (marked zk_matrix) run against
# each ZooKeeper release from 3.5 to 3.9 (README "ZooKeeper versions"); ZK2KRAFT_ZK_MATRIX narrows it.
# Two pytest-xdist workers take whole files (a file's module fixtures, e.g. one real Kafka cluster, stay
# in one process; each worker starts its own session ZooKeeper); ZK2KRAFT_TEST_WORKERS=0 runs serially.
test: deps zookeeper-jars
	ZK2KRAFT_ZK_MATRIX=$${ZK2KRAFT_ZK_MATRIX-all} $(VENV)/bin/pytest -n $${ZK2KRAFT_TEST_WORKERS-2} --dist loadfile

lint: deps
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

deps: system-deps $(STAMP) kafka-jars

# Kafka 3.9's own jars (real brokers and controllers in the tests and the demo), fetched once from Maven
# Central into ~/.cache/zk2kraft; a fetch that fails stops here with one line (the tests never skip for it).
kafka-jars: $(STAMP)
	@$(PY) -m zk_fixtures.kafka_dist kafka >/dev/null

# ZooKeeper's own release jars of each line 3.5-3.9 (zk_fixtures.kafka_dist.ZOOKEEPER_VERSIONS), fetched once like
# Kafka's; a fetch that fails stops `make test` with one line.
zookeeper-jars: $(STAMP)
	@$(PY) -m zk_fixtures.kafka_dist zookeeper >/dev/null

# Debian's ZooKeeper (the real server tests and the demo run), a JDK (ZooKeeper, Spark, Kafka, and javac for
# the Java oracle of tests/test_zk_codec.py), kcat (a test), maven (fetches Kafka's jars), openssl (test certificates).
system-deps:
	@if [ ! -f /usr/share/java/zookeeper.jar ] && [ -z "$$ZK_HOME" ] || ! command -v javac >/dev/null || ! command -v kcat >/dev/null || ! command -v mvn >/dev/null || ! command -v openssl >/dev/null; then \
		echo "installing Debian's zookeeper, a headless JDK, kcat, maven and openssl"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq zookeeper default-jdk-headless kcat maven openssl >/dev/null; \
	fi

# setup.py builds migrator/kraft/_speedups.c in place: a changed C file reinstalls (and recompiles).
$(STAMP): pyproject.toml setup.py migrator/kraft/_speedups.c
	@"$(PYTHON)" -c 'import sys; assert sys.version_info >= (3, 11), "zk2kraft needs Python >= 3.11"'
	test -x $(PY) || "$(PYTHON)" -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

bench: deps
	$(PY) bench/zk_read.py
	$(PY) bench/log_codec.py

clean:
	rm -rf $(VENV) .zk2kraft build *.egg-info migrator/kraft/_speedups.*.so
