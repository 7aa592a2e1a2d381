# dq — developer entry points. `make demo` and `make test` are the two commands a fresh machine
# needs (see README). Every target shares one cargo target directory outside the checkout so CI
# on the same machine builds incrementally.

SHELL := /bin/bash
export CARGO_TARGET_DIR ?= /var/tmp/dq-target
export DUCKDB_EXTENSION_DIR ?= $(CURDIR)/.extensions
export DQ_VENV ?= $(CURDIR)/.venv
CARGO ?= cargo
DEMO_DIR ?= $(CURDIR)/.local/demo
DEMO_VEHICLES ?= 12
DEMO_DAYS ?= 2

.PHONY: help extensions venv build fmt lint test test-only fuzz-build demo bench-decode clean-demo

help:
	@echo "make demo          seed a local lake with a small fleet and show what was written"
	@echo "make test          fmt + clippy + every test (file and PostgreSQL catalogs, moto S3)"
	@echo "make extensions    provision the pinned DuckDB 1.5.4 extensions into $(DUCKDB_EXTENSION_DIR)"
	@echo "make venv          create the Python venv with moto (S3 + DynamoDB API for tests)"
	@echo "make bench-decode  decode throughput benchmark, results in BENCHMARKS.md"

extensions:
	@scripts/extensions.sh "$(DUCKDB_EXTENSION_DIR)"

venv:
	@scripts/venv.sh

build:
	$(CARGO) build --workspace --all-targets

fmt:
	$(CARGO) fmt --all --check

lint: fmt
	$(CARGO) clippy --workspace --all-targets -- -D warnings

test-only: extensions venv
	$(CARGO) test --workspace --no-fail-fast

# The decoder fuzz target must keep building (running it needs nightly: shared/decode/fuzz/README.md).
fuzz-build:
	$(CARGO) build --manifest-path shared/decode/fuzz/Cargo.toml

test: extensions venv lint test-only fuzz-build

# Starts from an empty lake each time so the output is reproducible. A low blob threshold makes
# the larger vendor payloads take din's blob path too.
demo: extensions
	$(CARGO) build -p dqctl
	rm -rf "$(DEMO_DIR)"
	$(CARGO_TARGET_DIR)/debug/dqctl seed \
	  --catalog "ducklake:$(DEMO_DIR)/catalog.ducklake" --data-path "$(DEMO_DIR)/data" \
	  --blob-dir "$(DEMO_DIR)/blobs" --threshold 1536 \
	  --vehicles $(DEMO_VEHICLES) --days $(DEMO_DAYS) --seed 7
	@echo "demo lake: $(DEMO_DIR) (catalog.ducklake, data/, blobs/)"

clean-demo:
	rm -rf "$(DEMO_DIR)"

bench-decode:
	$(CARGO) bench -p dq-decode --bench decode
