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

.PHONY: help extensions venv bench-venv build fmt lint test test-only fuzz-build demo bench bench-decode bench-materializer bench-shards bench-query bench-listing chaos reliability clean-demo

help:
	@echo "make demo          seed a local lake, decode it, serve GraphQL (dq :8080, telemetry :8081, fetch :8082) + FetchService (prints curls)"
	@echo "make test          fmt + clippy + every test (file and PostgreSQL catalogs, moto S3)"
	@echo "make extensions    provision the pinned DuckDB 1.5.4 extensions into $(DUCKDB_EXTENSION_DIR)"
	@echo "make venv          create the Python venv with moto (S3 + DynamoDB API for tests)"
	@echo "make bench-decode  decode throughput benchmark, results in BENCHMARKS.md"
	@echo "make validate      sam validate --lint of template.yaml + tests/template/check_build.py, check_template.py, check_settings.py (offline; aws-sam-cli from the venv)"
	@echo "make layer         zip the DuckDB extensions as a Lambda layer (/opt/duckdb/extensions)"
	@echo "make lambda        release build of every function with cargo-lambda, zipped, size-checked"
	@echo "make sam-build     sam build --config-env \$$SAM_CONFIG_ENV (dev): the make lambda binaries + the layer into .aws-sam/build"
	@echo "make invoke-test   every events/*.json through its function under the Lambda Runtime API emulator"
	@echo "make playground-check  GraphiQL at / in headless chromium: run a query, screenshot it (PLAYGROUND_SCREENSHOT, default beside the build)"
	@echo "make bench-materializer  materializer events/s beside the engine floor (1M events, file + PostgreSQL)"
	@echo "make bench-shards  materializer events/s with 1 and 2 shards draining one PostgreSQL lake at once"
	@echo "make bench-query   query latency, cold and warm: signals, signalsLatest, FetchService, segments, dailyActivity (200 vehicles x 30 days, file + PostgreSQL)"
	@echo "make bench-listing the direct reads' file listing refreshed after one commit on a catalog with 100,000 data files (PostgreSQL + file)"
	@echo "make bench         every case in one run per catalog (200 vehicles x 30 days, PostgreSQL then file) beside the DuckDB floor and ClickHouse (chDB); BENCHMARKS.md + BENCHMARKS.json"
	@echo "make chaos         long chaos run: SIGKILL the materializer 200 times while din writes (PostgreSQL), 200 times mid-drain (file catalog)"
	@echo "make reliability   fault, hostile-input, secrets and load tests (long variants); writes RELIABILITY.md"

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

test: extensions venv lint test-only invoke-test validate fuzz-build playground-check

# Starts from an empty lake each time so the output is reproducible (scripts/demo.sh): seed,
# decode until caught up, then serve FetchService and GraphQL (one port per dialect: PORT,
# PORT_TELEMETRY, PORT_FETCH). Always `--workspace`: building a
# subset changes dependency feature unification and would rebuild DuckDB.
demo: extensions
	$(CARGO) build --workspace --bins --features dq-fn-graphql/dev
	DEMO_DIR="$(DEMO_DIR)" DEMO_VEHICLES=$(DEMO_VEHICLES) DEMO_DAYS=$(DEMO_DAYS) scripts/demo.sh

clean-demo:
	rm -rf "$(DEMO_DIR)"

# GraphiQL as a person uses it: Debian's chromium, headless, opens `/` of the graphql binary on a
# freshly seeded lake, types and runs a query and finds the lake's answer in the result pane
# (tests/playground/check.mjs). Its screenshot goes beside the build, so `make test` leaves the
# checkout as it found it; `make playground-check PLAYGROUND_SCREENSHOT=docs/playground.png`
# refreshes the one kept in docs. Driver: playwright-core pinned by
# tests/playground/package-lock.json, never a downloaded browser.
.PHONY: playground-check
PLAYGROUND_SCREENSHOT ?= $(CARGO_TARGET_DIR)/playground.png
PLAYGROUND_NPM = tests/playground/node_modules/.package-lock.json
$(PLAYGROUND_NPM): tests/playground/package.json tests/playground/package-lock.json
	@command -v node >/dev/null || { echo "playground-check: needs Node.js >= 20"; exit 1; }
	cd tests/playground && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --prefer-offline
	@touch $@

playground-check: extensions build $(PLAYGROUND_NPM)
	@test -x /usr/bin/chromium || { echo "playground-check: needs Debian's chromium: apt-get install -y chromium"; exit 1; }
	timeout --kill-after=10 300 node tests/playground/check.mjs --bin-dir "$(CARGO_TARGET_DIR)/debug" --screenshot "$(PLAYGROUND_SCREENSHOT)"

BENCH = DQ_BENCH_COMMIT=$$(git rev-parse --short HEAD 2>/dev/null || echo unknown) $(CARGO_TARGET_DIR)/debug/dq-bench

bench-decode:
	$(CARGO) build --workspace --bins
	$(BENCH) decode

bench-materializer: extensions venv
	$(CARGO) build --workspace --bins
	$(BENCH) materializer

bench-shards: extensions venv
	$(CARGO) build --workspace --bins
	$(BENCH) shards

bench-query: extensions
	$(CARGO) build --workspace --bins
	$(BENCH) query

# chDB for `make bench`, hash-pinned (scripts/bench-tools.lock), in its own venv.
bench-venv:
	@scripts/bench-venv.sh

bench-listing: extensions
	$(CARGO) build --workspace --bins
	$(BENCH) listing

bench: extensions bench-venv
	$(CARGO) build --workspace --bins
	$(BENCH) all --catalog postgres
	$(BENCH) all --catalog file
	$(BENCH) listing

# The long variant of the chaos test that `make test` runs with 25 kills.
chaos: extensions venv
	DQ_CHAOS_KILLS=200 DQ_SHARD_CHAOS_KILLS=50 $(CARGO) test --workspace --no-fail-fast sigkill_at_random_points -- --nocapture

# The reliability tests with their figures (short variants of the same tests run in `make test`).
RELIABILITY_DIR ?= $(CURDIR)/.local/reliability
reliability: extensions venv
	rm -rf "$(RELIABILITY_DIR)"
	DQ_RELIABILITY_DIR="$(RELIABILITY_DIR)" DQ_LOAD_SECONDS=30 DQ_LOAD_CLIENTS=16 \
		DQ_CHAOS_KILLS=200 DQ_SHARD_CHAOS_KILLS=25 \
		$(CARGO) test --workspace --no-fail-fast -- faults:: hostile:: load:: rejected_tokens chaos::
	python3 scripts/reliability-report.py "$(RELIABILITY_DIR)" RELIABILITY.md "$$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

# ---- AWS SAM deployment (docs/deploy.md) ----
LAMBDA_DIR ?= $(CURDIR)/.local/lambda
# The release build gets its own target directory: it never waits on the debug build's lock.
LAMBDA_TARGET_DIR ?= /var/tmp/dq-target-lambda
export LAMBDA_DIR LAMBDA_TARGET_DIR
.PHONY: deploy-tools validate layer lambda lambda-size invoke-test

# aws-sam-cli and cargo-lambda, hash-pinned (scripts/deploy-tools.lock), into the project venv.
deploy-tools:
	@scripts/deploy-tools.sh

# Offline: cfn-lint over the SAM-transformed template, no AWS account or credentials needed;
# then the operational properties asserted on the aws-sam-translator output (tests/template).
validate: deploy-tools
	AWS_DEFAULT_REGION=us-east-1 SAM_CLI_TELEMETRY=0 $(DQ_VENV)/bin/sam validate --lint --template template.yaml
	python3 tests/crates/check_graph.py
	$(DQ_VENV)/bin/python tests/template/check_build.py
	AWS_DEFAULT_REGION=us-east-1 $(DQ_VENV)/bin/python tests/template/check_template.py
	AWS_DEFAULT_REGION=us-east-1 $(DQ_VENV)/bin/python tests/template/check_settings.py

layer: extensions
	@scripts/layer.sh "$(DUCKDB_EXTENSION_DIR)" "$(LAMBDA_DIR)"

lambda: deploy-tools layer
	@scripts/lambda.sh

# `sam build` (BuildMethod makefile in template.yaml) runs `make build-<LogicalId>` per function;
# each copies its binary from the one scripts/lambda.sh build of that `sam build`
# (deploy/sam-artifact.sh), so SAM deploys what `make lambda` builds. SAM must run the targets in
# this checkout, not in a copy of it (samconfig.toml: build_in_source = true).
SAM_BIN_MaterializerFunction := materializer
SAM_BIN_MaintenanceFunction := materializer
SAM_BIN_GraphqlFunction := graphql
SAM_BIN_TelemetryGraphqlFunction := graphql
SAM_BIN_FetchGraphqlFunction := graphql
SAM_BIN_FetchFunction := fetch
SAM_FUNCTIONS := MaterializerFunction MaintenanceFunction GraphqlFunction TelemetryGraphqlFunction FetchGraphqlFunction FetchFunction
SAM_MAKEFILE_DIR := $(patsubst %/,%,$(dir $(abspath $(firstword $(MAKEFILE_LIST)))))
SAM_CONFIG_ENV ?= dev
.PHONY: sam-build $(addprefix build-,$(SAM_FUNCTIONS))

$(addprefix build-,$(SAM_FUNCTIONS)): build-%:
	@if [[ "$(CURDIR)" != "$(SAM_MAKEFILE_DIR)" ]]; then \
		echo "build-$*: running in a copy ($(CURDIR)); run sam build with --build-in-source (samconfig.toml sets it)" >&2; exit 1; fi
	@deploy/sam-artifact.sh $(SAM_BIN_$*) "$(ARTIFACTS_DIR)"

# The layer tree must exist before SAM packages it; cargo-lambda comes from the venv.
sam-build: deploy-tools layer
	PATH="$(DQ_VENV)/bin:$$PATH" SAM_CLI_TELEMETRY=0 $(DQ_VENV)/bin/sam build --config-env $(SAM_CONFIG_ENV)

# Fails when a function zip plus the layer exceeds Lambda's 250 MB unzipped limit.
lambda-size:
	@python3 scripts/lambda-size.py --lambda-dir "$(LAMBDA_DIR)"

# The debug binaries of `make build` (the same feature set as `cargo test --workspace`); the
# venv's python signs the development tokens that `__DEV_TOKEN__` in an event stands for.
invoke-test: extensions deploy-tools build
	$(DQ_VENV)/bin/python tests/invoke/invoke.py --bin-dir "$(CARGO_TARGET_DIR)/debug"
