# The TypeScript SDK (ts/): npm dependencies, build, tests (node --test on
# the built JS, including a real headless Chromium and, over a WebSocket,
# the real hub), and the conformance
# suite with the TS testee as client and as provider.

TS_DIR := ts
NPM ?= npm
CHROMIUM ?= /usr/bin/chromium
TS_TESTEE := node $(CURDIR)/$(TS_DIR)/dist/conformance/testee.js

.PHONY: deps-ts build-ts test-ts conformance-ts

deps-ts: ## Install the TypeScript SDK's npm packages (npm ci; ws for the WebSocket tests on Node 20), Chromium for its browser tests and openssl for its TLS tests' certificates
	@if [ ! -x "$(CHROMIUM)" ]; then \
	  echo "== installing Debian's chromium (for the browser test)"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	fi
	@if ! command -v openssl >/dev/null; then \
	  echo "== installing Debian's openssl (certificates for the TLS tests)"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y openssl; \
	fi
	@if [ ! -f $(TS_DIR)/node_modules/.package-lock.json ] || [ $(TS_DIR)/package-lock.json -nt $(TS_DIR)/node_modules/.package-lock.json ]; then \
	  cd $(TS_DIR) && $(NPM) ci --no-audit --no-fund; \
	fi

build-ts: deps-ts ## Build the TypeScript SDK (tsc: strict, type tests included) into ts/dist
	cd $(TS_DIR) && npx tsc -p tsconfig.json

test-ts: build-ts deps-nats ## Test the TypeScript SDK: vectors, behaviour on every transport (NATS too, on a real nats-server), typed API, headless Chromium, WebSocket to a real hub
	@# The WebSocket tests run the real hub and its Rust test provider; the
	@# NATS tests call the Rust testee over NATS and are called by it.
	cd $(RUST_DIR) && $(CARGO) build -p hubwire-hub -p hubwire-testee $(LOCKED)
	@cd $(TS_DIR) && log=dist/test-results.tap; \
	status=0; CHROMIUM=$(CHROMIUM) HUBWIRE_BIN=$(BIN) node --test --test-concurrency=1 \
	  --test-reporter=spec --test-reporter-destination=stdout \
	  --test-reporter=tap --test-reporter-destination=$$log dist/test/*.test.js || status=$$?; \
	passed=$$(awk '/^# pass /{print $$3}' $$log); failed=$$(awk '/^# fail /{print $$3}' $$log); \
	echo "ts: $${passed:-0} passed, $${failed:-0} failed"; \
	if [ -z "$$passed" ]; then exit 1; fi; exit $$status

conformance-ts: build-ts ## Run the conformance suite against the TypeScript SDK, as client and provider (child, unix, tcp, nats)
	cd $(RUST_DIR) && $(CARGO) build -p hubwire-conformance $(LOCKED)
	$(BIN)/hubwire-conformance --root $(CURDIR) --lang ts --testee "$(TS_TESTEE)"

DEPS_STEPS += deps-ts
TEST_STEPS += test-ts
CONFORMANCE_STEPS += conformance-ts
