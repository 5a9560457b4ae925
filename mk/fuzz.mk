# Fuzzing the decoders that read what a peer sends (rust/hubwire-fuzz, a
# workspace member that runs on stable Rust): the frame decoder, HELLO and
# the payload codecs. `make test` runs a short pass (test-fuzz: a debug
# build, FUZZ_QUICK inputs per target, a few seconds); `make fuzz` is the
# long run (an optimised build with overflow checks, FUZZ_ITERATIONS
# inputs per target). A failing input is saved as a line of hex under
# rust/target/fuzz-failures/ and printed; see TESTING.md.

FUZZ_QUICK ?= 100000
FUZZ_ITERATIONS ?= 10000000
FUZZ_SEED ?= $(shell date +%s)
FUZZ_ARGS ?=

TEST_STEPS += test-fuzz
.PHONY: test-fuzz fuzz

test-fuzz: check-cargo ## A short fuzz pass over the frame decoder, HELLO and payload codecs (part of make test)
	cd $(RUST_DIR) && $(CARGO) build -p hubwire-fuzz $(LOCKED)
	cd $(RUST_DIR) && $(BIN)/hubwire-fuzz --iterations $(FUZZ_QUICK) --seed 1 $(FUZZ_ARGS)

fuzz: check-cargo ## The long fuzz run: FUZZ_ITERATIONS (10 M) inputs per target, seed FUZZ_SEED (default: the time)
	cd $(RUST_DIR) && $(CARGO) build --profile fuzz -p hubwire-fuzz $(LOCKED)
	cd $(RUST_DIR) && $(TARGET_DIR)/fuzz/hubwire-fuzz --iterations $(FUZZ_ITERATIONS) --seed $(FUZZ_SEED) $(FUZZ_ARGS)
