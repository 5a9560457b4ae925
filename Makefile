# hubwire: developer entry points. `make` (or `make help`) lists them.
#
# Everything Rust lives in one cargo workspace rooted at rust/ (it also
# takes in examples/rust and bench/rust). With CI=true, cargo runs with
# --locked, so a stale rust/Cargo.lock fails instead of being rewritten,
# and without incremental compilation.

.DEFAULT_GOAL := help
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:

CARGO ?= cargo
RUST_DIR := rust
LOCKED := $(if $(filter true 1 yes,$(CI)),--locked,)
# A CI run builds once from a clean clone: incremental state (gigabytes
# under target/debug/incremental) would never be reused.
ifneq ($(filter true 1 yes,$(CI)),)
export CARGO_INCREMENTAL := 0
endif
# Where `cargo build` puts binaries (absolute, for `make run`).
# (A relative CARGO_TARGET_DIR is relative to rust/, where cargo runs.)
TARGET_DIR := $(abspath $(if $(CARGO_TARGET_DIR),$(if $(filter /%,$(CARGO_TARGET_DIR)),,$(RUST_DIR)/)$(CARGO_TARGET_DIR),$(RUST_DIR)/target))
BIN := $(TARGET_DIR)/debug

.PHONY: help deps build test conformance run bench fmt lint clean check-cargo test-rust test-demo test-imports

# Each part of the project outside the Rust workspace (an SDK, the bench
# suite) keeps its targets in mk/<part>.mk and adds itself to these lists:
#   DEPS_STEPS   targets `make deps` runs after the Rust dependencies
#   TEST_STEPS   targets `make test` runs, in order; each prints a closing
#                line "<name>: N passed, N failed" (see scripts/test-summary.awk)
#   BENCH_STEPS  targets `make bench` runs
#   CONFORMANCE_STEPS  targets `make conformance` runs after the Rust testee's
#                run: one per SDK, each running the suite against its testee
DEPS_STEPS :=
TEST_STEPS := test-rust conformance test-demo test-imports
BENCH_STEPS :=
CONFORMANCE_STEPS :=
include $(sort $(wildcard mk/*.mk))

help: ## Show this list of targets (the default)
	@echo "Usage: make <target>   (CARGO=$(CARGO); CI=true adds --locked)"
	@echo
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z_-]+:.*## / { printf "  %-12s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

check-cargo:
	@if ! command -v $(CARGO) >/dev/null 2>&1; then \
	  echo "error: '$(CARGO)' was not found on PATH." >&2; \
	  echo "hubwire needs a Rust toolchain (rustc >= 1.89, with cargo, rustfmt and clippy)." >&2; \
	  echo "Install it with rustup (see https://rustup.rs), open a new shell (or 'source ~/.cargo/env')," >&2; \
	  echo "then run 'make deps' again. If cargo lives elsewhere, pass it: make deps CARGO=/path/to/cargo" >&2; \
	  exit 1; \
	fi

deps: check-cargo ## Check the toolchains and fetch every dependency (idempotent)
	cd $(RUST_DIR) && $(CARGO) fetch $(LOCKED)
	@for step in $(DEPS_STEPS); do $(MAKE) --no-print-directory $$step || exit 1; done

build: check-cargo ## Build every crate in the workspace (debug)
	cd $(RUST_DIR) && $(CARGO) build --workspace $(LOCKED)

test: deps ## Run every test (every step of TEST_STEPS, even after one fails) and total them
	@mkdir -p $(TARGET_DIR)
	@set -o pipefail; { \
	  failed=""; \
	  for step in $(TEST_STEPS); do \
	    echo "== make $$step"; \
	    $(MAKE) --no-print-directory $$step 2>&1 || failed="$$failed $$step"; \
	  done; \
	  if [ -n "$$failed" ]; then echo "steps that failed:$$failed"; exit 1; fi; \
	} | tee $(TARGET_DIR)/test.log
	@awk -f scripts/test-summary.awk $(TARGET_DIR)/test.log

test-rust: check-cargo ## Run the Rust tests: unit, vectors, behaviour suite, bad input, hub, examples
	cd $(RUST_DIR) && $(CARGO) test --workspace $(LOCKED)

conformance: build ## Run the conformance suite: every language as client and provider, every transport (Rust in both wait modes, then CONFORMANCE_STEPS)
	@failed=""; \
	echo "== conformance rust, wait mode efficient"; \
	HUBWIRE_WAIT=efficient $(BIN)/hubwire-conformance --root $(CURDIR) --lang rust --testee $(BIN)/hubwire-testee || failed="$$failed rust-efficient"; \
	echo "== conformance rust, wait mode low-latency"; \
	HUBWIRE_WAIT=low-latency $(BIN)/hubwire-conformance --root $(CURDIR) --lang rust --testee $(BIN)/hubwire-testee || failed="$$failed rust-low-latency"; \
	for step in $(CONFORMANCE_STEPS); do \
	  echo "== make $$step"; $(MAKE) --no-print-directory $$step || failed="$$failed $$step"; \
	done; \
	if [ -n "$$failed" ]; then echo "conformance runs that failed:$$failed"; exit 1; fi

run: build build-ts ## Build, start the hub on the example providers, call them via the CLI and HTTP, show status, stop; then a quick bench
	scripts/run-demo.sh $(BIN)
	@echo; echo "== hubwire bench --quick  (the whole suite with short measurements; make bench for the full one)"
	@$(MAKE) --no-print-directory bench-quick

test-demo: build build-ts ## Run `make run` on a copy of its config (a port the hub picks, own socket) and check it ends cleanly
	@dir=$$(mktemp -d "$${TMPDIR:-/tmp}/hubwire-demo.XXXXXX"); \
	sed -e "s/127.0.0.1:7471/127.0.0.1:0/" -e 's|^dir = "\.\."|dir = "$(CURDIR)"|' examples/hubwire.toml > "$$dir/hubwire.toml"; \
	if HUBWIRE_DEMO_CONFIG="$$dir/hubwire.toml" scripts/run-demo.sh $(BIN) > "$$dir/out.txt" 2>&1; then \
	  grep -q '"text":"6 words in 2 messages"' "$$dir/out.txt" && grep -q 'liftoff' "$$dir/out.txt" \
	    && grep -q '"text":"rolled 3d6: ' "$$dir/out.txt" && grep -q '"text":"rolled 1d20: ' "$$dir/out.txt" \
	    && grep -q 'go client: fortune -> fortune about go: ' "$$dir/out.txt" \
	    && grep -q '"text":"ellohay ubhay"' "$$dir/out.txt" \
	    && echo "demo: 1 passed, 0 failed" || { cat "$$dir/out.txt"; echo "demo: 0 passed, 1 failed"; rm -rf "$$dir"; exit 1; }; \
	else cat "$$dir/out.txt"; echo "demo: 0 passed, 1 failed"; rm -rf "$$dir"; exit 1; fi; rm -rf "$$dir"

bench: check-cargo ## Run every benchmark: the suite of bench/ (see mk/bench.mk), then the other BENCH_STEPS
	@for step in $(BENCH_STEPS); do $(MAKE) --no-print-directory $$step || exit 1; done

fmt: check-cargo ## Format all Rust code in place
	cd $(RUST_DIR) && $(CARGO) fmt --all

lint: check-cargo test-imports ## Check formatting, run clippy and rustdoc (no broken doc links) over the workspace, and check the import graphs for circles
	cd $(RUST_DIR) && $(CARGO) fmt --all --check
	cd $(RUST_DIR) && $(CARGO) clippy --workspace --all-targets $(LOCKED)
	cd $(RUST_DIR) && RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps $(LOCKED)

test-imports: ## Check that the runtime, the TS SDK and the bench import nothing in a circle (scripts/imports.py)
	python3 scripts/imports.py --check

clean: check-cargo ## Remove build outputs (rust/target)
	cd $(RUST_DIR) && $(CARGO) clean
