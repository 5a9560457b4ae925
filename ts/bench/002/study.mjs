// Study 002: what hubwire's typed layer costs (Standard Schema validators,
// zod here, switched on and off) over a raw hubwire call and over a
// hand-written call, per call, on the same transport: a worker thread's
// MessagePort and the in-memory pair.
import { once } from 'node:events';
import { Worker, MessageChannel } from 'node:worker_threads';
import { methodAClient } from '../000/methods.mjs';
import { handlers, inputs, isAnswer, declarations, provider, STYLES } from './api.mjs';
import { withCpu } from '../lib/measure.mjs';
import { totalOf } from '../lib/totals.mjs';
import { loadHubwire } from '../lib/hubwire.mjs';
import { progress } from '../lib/progress.mjs';

/** The approaches in table order; `hand` differs by transport. */
export const APPROACHES = [
  { id: 'hand', label: { worker: 'hand-written (method A of study 000)', memory: 'hand-written (direct call, no transport)' } },
  { id: 'raw', label: 'hubwire raw call (conn.call, no typed layer)' },
  { id: 'loose', label: 'hubwire typed, validation off' },
  { id: 'typed', label: 'hubwire typed, validation on (zod)' },
];
export const METHODS = { getUser: 'query', createUser: 'mutation' };

const dialAll = (hubwire, transports) =>
  Promise.all(STYLES.map((style) => hubwire.Connection.dial(transports[style], { name: 'bench-002' }))).then((conns) =>
    Object.fromEntries(STYLES.map((style, i) => [style, conns[i]])),
  );

/**
 * A worker serving the hand-written server and the three providers.
 * Resolves to `{ hand(name, input), conns: { plain, typed, loose }, stop() }`.
 */
async function startWorker(hubwire) {
  const hand = new MessageChannel();
  const channels = Object.fromEntries(STYLES.map((style) => [style, new MessageChannel()]));
  const hubwirePorts = Object.fromEntries(STYLES.map((style) => [style, channels[style].port2]));
  const worker = new Worker(new URL('./peer.mjs', import.meta.url), {
    workerData: { handPort: hand.port2, hubwirePorts },
    transferList: [hand.port2, ...Object.values(hubwirePorts)],
  });
  await once(worker, 'message');
  const callA = methodAClient(hand.port1);
  const conns = await dialAll(hubwire, Object.fromEntries(STYLES.map((style) => [style, hubwire.messageport.connect(channels[style].port1)])));
  return {
    hand: (method, input) => callA({ method, input }),
    conns,
    stop: async () => {
      for (const c of Object.values(conns)) c.close();
      hand.port1.close();
      await worker.terminate();
    },
  };
}

/** Both ends in this thread over hubwire's in-memory pairs; the hand-written call is a direct one. */
async function startMemory(hubwire) {
  const transports = {};
  for (const style of STYLES) {
    const [a, b] = hubwire.memory.pair();
    provider(hubwire, style)
      .serveTransport(b)
      .catch((err) => console.error(`hubwire provider (${style}): ${err.message}`));
    transports[style] = a;
  }
  const conns = await dialAll(hubwire, transports);
  return {
    hand: async (method, input) => handlers[method](input),
    conns,
    stop: async () => {
      for (const c of Object.values(conns)) c.close();
    },
  };
}

/** `n` sequential calls of `method` through `call(method, input)`, checking every answer. */
async function sequentialCalls(call, method, n) {
  let wrong = 0;
  for (let i = 0; i < n; i++) {
    if (!isAnswer[method](i, await call(method, inputs[method](i)))) wrong++;
  }
  return { calls: n, wrong };
}

/**
 * Runs study 002: on each transport, each method, each approach: `calls`
 * sequential calls in total over `rounds` alternating rounds, after `warmup`.
 * Returns `{ [transport]: { [method]: { [approach]: total } } }` (see totals.mjs).
 */
export async function run002({ calls, rounds, warmup }) {
  const hubwire = await loadHubwire();
  const decl = declarations(hubwire);
  const unwrap = (outcome) => {
    if (!outcome.ok) throw new Error(`declared failure ${JSON.stringify(outcome.failure)}`);
    return outcome.value;
  };
  const out = {};
  for (const transport of ['worker', 'memory']) {
    const setup = await (transport === 'worker' ? startWorker(hubwire) : startMemory(hubwire));
    const via = {
      hand: setup.hand,
      raw: (method, input) => setup.conns.plain.call(method, input),
      loose: async (method, input) => unwrap(await decl.loose[method].call(setup.conns.loose, input)),
      typed: async (method, input) => unwrap(await decl.typed[method].call(setup.conns.typed, input)),
    };
    const acc = {};
    try {
      for (let round = 1; round <= rounds; round++) {
        for (const method of Object.keys(METHODS)) {
          for (const a of APPROACHES) {
            progress(`002 ${transport}: round ${round}/${rounds}, ${method}, ${a.id}`);
            await sequentialCalls(via[a.id], method, warmup);
            const r = await withCpu(() => sequentialCalls(via[a.id], method, Math.ceil(calls / rounds)));
            ((acc[method] ??= {})[a.id] ??= []).push(r);
          }
        }
      }
    } finally {
      await setup.stop();
    }
    out[transport] = Object.fromEntries(
      Object.entries(acc).map(([method, byApproach]) => [method, Object.fromEntries(Object.entries(byApproach).map(([a, rs]) => [a, totalOf(rs)]))]),
    );
  }
  return out;
}
