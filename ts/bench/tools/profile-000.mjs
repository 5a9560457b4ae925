#!/usr/bin/env node
// Runs one variant of study 000 alone, for profiling:
//
//   node --cpu-prof --cpu-prof-dir=/tmp/prof ts/bench/tools/profile-000.mjs \
//        --variant hubwire [--calls 20000] [--parallel]
//   node ts/bench/tools/cpuprofile-top.mjs /tmp/prof/<file>.cpuprofile
//
// --cpu-prof writes one profile per thread: the main thread's (the caller)
// and the worker's (the provider). With --browser FILE the variant runs in
// headless Chromium instead, and the page's main thread is profiled to FILE.
import { parseArgs } from 'node:util';
import { run000Node } from '../000/node.mjs';
import { run000Browser } from '../000/browser.mjs';

const { values } = parseArgs({
  options: {
    variant: { type: 'string', default: 'hubwire' },
    calls: { type: 'string', default: '20000' },
    parallel: { type: 'boolean', default: false },
    browser: { type: 'string' },
  },
});
const n = Number(values.calls);
const plan = values.parallel
  ? { seqCalls: 1, parCalls: n, inFlight: 1000, warmup: 1000, rounds: 1, variants: [values.variant] }
  : { seqCalls: n, parCalls: 1, inFlight: 1, warmup: 1000, rounds: 1, variants: [values.variant] };
const r = values.browser ? (await run000Browser(plan, { profile: values.browser })).results[values.variant] : (await run000Node(plan))[values.variant];
const x = values.parallel ? r.parallel : r.sequential;
process.stdout.write(`${values.variant}: ${x.calls} calls, ${x.usPerCall.toFixed(2)} µs per call, CPU ${x.cpu.mainUsPerCall?.toFixed(2)} + ${x.cpu.peerUsPerCall?.toFixed(2)} µs\n`);
