# The misbehaviour suite (rust/hubwire-hardening, a workspace member): a
# real hub (debug build) put to hostile clients, floods, broken frames,
# misbehaving providers, hostile configs and HTTP requests, with two
# background clients timing calls throughout. One table row per case and a
# closing "hardening: N passed, N failed". See docs/security.md and
# TESTING.md. Not in TEST_STEPS (yet): it takes about a minute and a half
# and opens up to 10,000 loopback connections. HARDENING_ARGS passes
# options, e.g. HARDENING_ARGS="--case http --strict-latency".

HARDENING_ARGS ?=

.PHONY: test-hardening

test-hardening: check-cargo ## Run the misbehaviour suite against a real hub (docs/security.md; ~2 min once built)
	cd $(RUST_DIR) && $(CARGO) build -p hubwire-hub -p hubwire-hardening $(LOCKED)
	$(BIN)/hubwire-hardening --bin $(BIN) $(HARDENING_ARGS)
