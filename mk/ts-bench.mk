# The TypeScript bench (ts/bench/): studies 000, 001 and 002
# (docs/studies.md) reproduced with hubwire beside their baselines, measured
# in the same run. Plain ESM .mjs files, no build step of their own; they
# load the SDK through its package entry, so the SDK is built first
# (build-ts, in mk/ts.mk, which also installs Chromium and the npm
# packages the bench uses: playwright-core, zod). See ts/bench/README.md.

BENCH_STEPS += bench-ts
TEST_STEPS += test-ts-bench

.PHONY: bench-ts test-ts-bench

bench-ts: build-ts ## Run the TypeScript bench (studies 000-002 with hubwire, ~12 min); writes bench/results/ts-bench.json and ts/bench/README.md
	CHROMIUM=$(CHROMIUM) node ts/bench/run.mjs

test-ts-bench: build-ts ## Smoke-test the TypeScript bench: every study with tiny counts, the hubwire rows checked (< 1 min)
	CHROMIUM=$(CHROMIUM) node ts/bench/test.mjs
