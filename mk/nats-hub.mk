# Hubs over NATS (docs/hub.md "Joining a NATS cluster", docs/scale.md).
# `make test` runs the hub's NATS tests with the rest of the Rust tests
# (tests/nats_hubs.rs, nats_failover.rs, and nats_scale.rs at 4 hubs × 5
# replicas); these targets run the long versions and print the figures
# docs/scale.md quotes.

.PHONY: test-nats-scale test-nats-failover test-nats-memory

test-nats-scale: check-cargo deps-nats ## 20 hubs × 10 provider replicas on a 3-node NATS cluster: routing, list/status, failover; hub RSS and CPU per replica
	cd $(RUST_DIR) && HUBWIRE_SCALE_HUBS=20 HUBWIRE_SCALE_PER_HUB=10 $(CARGO) test $(LOCKED) -p hubwire-hub --test nats_scale -- --nocapture

test-nats-failover: check-cargo deps-nats ## kill -9 of a provider, a hub and a NATS node under load; prints the measured failover times
	cd $(RUST_DIR) && $(CARGO) test $(LOCKED) -p hubwire-hub --test nats_failover -- --nocapture


test-nats-memory: check-cargo deps-nats ## a server stream of 200 MiB over NATS to a slow consumer: prints the RSS growth (bounded by the credit window)
	cd $(RUST_DIR) && $(CARGO) test $(LOCKED) -p hubwire-tests --test nats_memory -- --nocapture
