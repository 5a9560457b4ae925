# NATS (spec/PROTOCOL.md §13): the tests and the bench start real
# nats-server processes (rust/hubwire-tests/src/nats_server.rs), so
# `make deps` installs Debian's nats-server when it is missing. It lands
# in /usr/sbin, which the helper looks in even when it is not on PATH.

.PHONY: deps-nats

deps-nats: ## Install nats-server (Debian package) for the NATS tests and bench rows
	@if ! command -v nats-server >/dev/null && [ ! -x /usr/sbin/nats-server ]; then \
	  echo "== installing Debian's nats-server (NATS tests and bench)"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y nats-server; \
	fi

DEPS_STEPS += deps-nats
