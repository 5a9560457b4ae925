# The misbehaviour suite (rust/hubwire-hardening, a workspace member): a
# real hub (debug build) put to hostile clients, floods, broken frames,
# misbehaving providers, hostile configs and HTTP requests, with two
# background clients timing calls throughout. One table row per case and a
# closing "hardening: N passed, N failed". See docs/security.md and
# TESTING.md. Part of `make test` (TEST_STEPS): about a minute once built,
# and it opens up to 10,000 loopback connections (from 127.0.0.2). The
# uid-65534 cases need root and pass as skipped otherwise.
# HARDENING_ARGS passes options, e.g.
# HARDENING_ARGS="--case http --strict-latency".

HARDENING_ARGS ?=

TEST_STEPS += test-hardening

.PHONY: test-hardening

test-hardening: check-cargo ## Run the misbehaviour suite against a real hub (docs/security.md; about a minute once built; part of make test)
	cd $(RUST_DIR) && $(CARGO) build -p hubwire-hub -p hubwire-hardening $(LOCKED)
	$(BIN)/hubwire-hardening --bin $(BIN) $(HARDENING_ARGS)
