# NATS (spec/PROTOCOL.md §13): the tests and the bench start real
# nats-server processes (rust/hubwire-tests/src/nats_server.rs), so
# `make deps` installs Debian's nats-server when it is missing. It lands
# in /usr/sbin, which the helper looks in even when it is not on PATH.

.PHONY: deps-nats deps-natscli

# The official `nats` command line, for the test that checks what
# `nats micro ls|info|stats` show of hubwire replicas
# (rust/hubwire-hub/tests/nats_cli.rs). Debian does not package it, so it
# is built from the Go module proxy at a pinned version into
# $(TARGET_DIR)/tools, where the test looks (~1.5 min, once).
NATSCLI_VERSION := v0.5.0
NATS_CLI := $(TARGET_DIR)/tools/nats

deps-nats: ## Install nats-server (Debian package) for the NATS tests and bench rows
	@if ! command -v nats-server >/dev/null && [ ! -x /usr/sbin/nats-server ]; then \
	  echo "== installing Debian's nats-server (NATS tests and bench)"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y nats-server; \
	fi

deps-natscli: ## Build the official nats CLI (natscli, pinned) into $(TARGET_DIR)/tools for the NATS tests
	@if [ ! -x $(NATS_CLI) ]; then \
	  command -v $(GO) >/dev/null 2>&1 || { echo "error: '$(GO)' not found: building the nats CLI for the NATS tests needs Go >= 1.26" >&2; exit 1; }; \
	  echo "== building the nats CLI $(NATSCLI_VERSION) (github.com/nats-io/natscli) into $(TARGET_DIR)/tools"; \
	  mkdir -p $(TARGET_DIR)/tools && GOBIN=$(TARGET_DIR)/tools $(GO) install github.com/nats-io/natscli/nats@$(NATSCLI_VERSION); \
	fi

DEPS_STEPS += deps-nats deps-natscli
