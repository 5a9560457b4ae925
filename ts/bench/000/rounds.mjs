// The measurement plan of study 000, the same in Node and in the browser
// page: every variant in alternating rounds, sequential calls then calls in
// parallel, each after a warm-up on a fresh channel to the worker.
import { VARIANTS, makeClient } from './variants.mjs';
import { sequential, parallel } from './loop.mjs';
import { totalOf } from '../lib/totals.mjs';

/**
 * Runs study 000 in one environment. `plan`: { rounds, seqCalls, parCalls,
 * inFlight, warmup, variants? (ids) } — call counts are per variant over all
 * rounds. `env`: { openChannel(variant, hubwire) → { port, sab? } served by
 * the worker (sab: a SharedArrayBuffer from hubwire.sharedmemory.buffer(),
 * for variants that need one), loadHubwire() → the SDK module, measure(body) → body's result plus `cpu`,
 * progress(text) }. Returns `{ [variant]: { label, sequential, parallel, provider } }`,
 * where `provider` is `{ sent, served }` for hubwire variants (calls the
 * client made, calls the provider answered).
 */
export async function runRounds(plan, env) {
  const variants = VARIANTS.filter((v) => !plan.variants || plan.variants.includes(v.id));
  const perVariant = Object.fromEntries(variants.map((v) => [v.id, { seq: [], par: [], sent: 0, served: 0 }]));
  for (let round = 1; round <= plan.rounds; round++) {
    for (const v of variants) {
      env.progress(`round ${round}/${plan.rounds}, ${v.id}`);
      const hubwire = v.id.startsWith('hubwire') ? await env.loadHubwire() : null;
      const channel = await env.openChannel(v, hubwire);
      const client = await makeClient(v.id, channel, hubwire);
      try {
        await sequential(client.call, plan.warmup);
        const seq = Math.ceil(plan.seqCalls / plan.rounds);
        const par = Math.ceil(plan.parCalls / plan.rounds);
        perVariant[v.id].seq.push(await env.measure(() => sequential(client.call, seq)));
        perVariant[v.id].par.push(await env.measure(() => parallel(client.call, par, plan.inFlight)));
        // hubwire's provider counts the calls it answered: proof that they went through it.
        if (client.served) {
          perVariant[v.id].sent += plan.warmup + seq + par;
          perVariant[v.id].served += await client.served();
        }
      } finally {
        await client.close();
        channel.port.close();
      }
    }
  }
  return Object.fromEntries(
    variants.map((v) => {
      const p = perVariant[v.id];
      const checked = p.sent ? { sent: p.sent, served: p.served } : null;
      return [v.id, { label: v.label, sequential: totalOf(p.seq), parallel: totalOf(p.par), provider: checked }];
    }),
  );
}
