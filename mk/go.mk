# The Go SDK (go/, module hubwire.dev/go) and its bench (go/bench, a module
# of its own so the SDK keeps one dependency): modules, vet and race tests,
# the conformance suite with the Go testee as client and provider in both
# wait modes, the example chat command and client of `make run`, and the
# study-003 bench. See go/README.md.

GO ?= go
GO_DIR := go
GO_TESTEE := $(CURDIR)/$(GO_DIR)/bin/hubwire-testee

DEPS_STEPS += deps-go
TEST_STEPS += test-go
CONFORMANCE_STEPS += conformance-go
BENCH_STEPS += bench-go

.PHONY: deps-go build-go test-go conformance-go bench-go test-go-bench

deps-go: ## Fetch the Go SDK's modules and its bench's (go mod download; pinned by go.sum)
	@command -v $(GO) >/dev/null 2>&1 || { echo "error: '$(GO)' not found: the Go SDK (go/) needs Go >= 1.26" >&2; exit 1; }
	cd $(GO_DIR) && $(GO) mod download
	cd $(GO_DIR)/bench && $(GO) mod download

# The example chat command and client go beside the Rust binaries, where
# `make run` puts its PATH (examples/hubwire.toml execs hubwire-go-chat).
build-go: deps-go ## Build the Go testee (go/bin) and the example chat command and client ($(BIN))
	cd $(GO_DIR) && $(GO) build -o bin/hubwire-testee ./cmd/hubwire-testee
	@mkdir -p $(BIN)
	cd $(GO_DIR) && $(GO) build -o $(BIN)/hubwire-go-chat ./examples/chat && $(GO) build -o $(BIN)/hubwire-go-client ./examples/client

run: build-go
test-demo: build-go

test-go: deps-go ## Test the Go SDK: go vet, then go test -race (vectors, behaviour on every transport and wait mode, bad input, examples)
	@mkdir -p $(TARGET_DIR)
	cd $(GO_DIR) && $(GO) vet ./... && cd bench && $(GO) vet ./...
	@cd $(GO_DIR) && log=$(TARGET_DIR)/go-test.log; status=0; \
	$(GO) test -race -count=1 -v ./... > $$log 2>&1 || status=$$?; \
	{ grep -aE '^(ok|FAIL|panic)|^\s*--- FAIL|_test\.go:[0-9]+:' $$log || true; } | tail -40; \
	passed=$$(grep -acE '^\s*--- PASS' $$log || true); failed=$$(grep -acE '^\s*--- FAIL' $$log || true); \
	if [ $$status -ne 0 ] && [ "$$failed" = 0 ]; then failed=1; fi; \
	echo "go: $$passed passed, $$failed failed"; exit $$status

conformance-go: build-go ## Run the conformance suite against the Go SDK, as client and provider (child, unix, tcp), in both wait modes
	cd $(RUST_DIR) && $(CARGO) build -p hubwire-conformance $(LOCKED)
	@failed=""; \
	for wait in efficient low-latency; do \
	  echo "== conformance go, wait mode $$wait"; \
	  HUBWIRE_WAIT=$$wait $(BIN)/hubwire-conformance --root $(CURDIR) --lang go --testee "$(GO_TESTEE)" || failed="$$failed go-$$wait"; \
	done; \
	if [ -n "$$failed" ]; then echo "conformance runs that failed:$$failed"; exit 1; fi

bench-go: build-go ## Run the Go bench (go/bench: study 003's variants beside hubwire from Go, ~10 min) and rewrite go/bench/README.md's results
	cd $(RUST_DIR) && $(CARGO) build --release -p hubwire-hub $(LOCKED)
	cd $(GO_DIR)/bench && HUBWIRE_BIN=$(TARGET_DIR)/release/hubwire $(GO) run ./cmd/report -readme README.md
