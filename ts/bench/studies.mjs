// The three studies (000, 001, 002 of docs/studies.md): what each measures,
// its call counts (full and --quick), and how to run and report it.
import { run000Node } from './000/node.mjs';
import { run000Browser } from './000/browser.mjs';
import { report000 } from './000/report.mjs';
import { run001 } from './001/study.mjs';
import { report001 } from './001/report.mjs';
import { run002 } from './002/study.mjs';
import { report002 } from './002/report.mjs';

/** By study id: `{ title, plan(options), run(plan, options) → { results, markdown, targets } }`. */
export const STUDIES = {
  '000': {
    title: 'RPC over a MessageChannel: ids in a Map (A), a channel per request (B), hubwire',
    plan: ({ quick }) =>
      quick
        ? { seqCalls: 10_000, parCalls: 20_000, inFlight: 1000, warmup: 1000, rounds: 2 }
        : { seqCalls: 100_000, parCalls: 100_000, inFlight: 1000, warmup: 2000, rounds: 4 },
    async run(plan, { browser }) {
      const runs = [{ env: `Node ${process.version}`, results: await run000Node(plan) }];
      if (browser) {
        const b = await run000Browser(plan);
        runs.push({ env: b.browser, results: b.results });
      }
      return { results: runs, ...report000(runs, plan) };
    },
  },
  '001': {
    title: 'worker thread vs child process echo at five message sizes, with hubwire',
    plan: ({ quick, secs }) => ({
      secs: secs ?? (quick ? 0.5 : Number(process.env.RUN_SECS ?? 10)),
      warmupSecs: quick ? 0.1 : 0.5,
    }),
    async run(plan) {
      const results = { secs: plan.secs, ...(await run001(plan)) };
      return { results, ...report001(results) };
    },
  },
  '002': {
    title: "the cost of hubwire's typed layer (Standard Schema validation on and off)",
    plan: ({ quick }) => (quick ? { calls: 5_000, rounds: 2, warmup: 500 } : { calls: 50_000, rounds: 4, warmup: 1000 }),
    async run(plan) {
      const results = await run002(plan);
      return { results, ...report002(results, plan) };
    },
  },
};
