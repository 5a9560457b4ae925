# The benchmark suite (bench/): the Rust runner `hubwire-bench` (crate
# hubwire-bench in bench/rust, a workspace member) and the grpc-go baseline
# (bench/go, a Go program). See bench/README.md.

GO ?= go
BENCH_GO_DIR := bench/go
BENCH_SMOKE_OUT := $(TARGET_DIR)/bench-smoke

DEPS_STEPS += bench-deps
TEST_STEPS += test-bench
BENCH_STEPS += bench-suite

.PHONY: bench-deps test-bench bench-suite bench-quick

bench-deps: ## Fetch the grpc-go baseline's modules (pinned by go.sum) and build it (bench/go/bin/grpcbench)
	@command -v $(GO) >/dev/null 2>&1 || { echo "error: '$(GO)' not found: the grpc-go baseline (bench/go) needs Go >= 1.26" >&2; exit 1; }
	cd $(BENCH_GO_DIR) && $(GO) mod download && $(GO) build -mod=readonly -o bin/grpcbench .

test-bench: check-cargo bench-deps ## Smoke-test the suite: every scenario row runs (debug build, tiny budgets) with positive figures
	cd $(RUST_DIR) && $(CARGO) build -p hubwire-bench -p hubwire-hub $(LOCKED)
	@mkdir -p $(BENCH_SMOKE_OUT)
	@$(BIN)/hubwire-bench --smoke --out $(BENCH_SMOKE_OUT) > $(BENCH_SMOKE_OUT)/run.log 2>&1 || tail -20 $(BENCH_SMOKE_OUT)/run.log
	$(BIN)/hubwire-bench --check $(BENCH_SMOKE_OUT)/results.json

bench-suite: check-cargo bench-deps ## Run the full benchmark suite (release build, ~10 min) and rewrite bench/README.md's results
	cd $(RUST_DIR) && $(CARGO) build --release -p hubwire-bench -p hubwire-hub $(LOCKED)
	$(TARGET_DIR)/release/hubwire-bench --readme bench/README.md

bench-quick: check-cargo bench-deps ## The whole suite with short measurements (release build; under a minute once built)
	cd $(RUST_DIR) && $(CARGO) build --release -p hubwire-bench -p hubwire-hub $(LOCKED)
	$(TARGET_DIR)/release/hubwire-bench --quick
