// Study 001: echo round trips for RUN_SECS through a worker thread and
// through a child process at the study's five message sizes, Node's own
// channels against hubwire's codecs on its transports (and the bare
// SharedArrayBuffer ring, the floor of a shared-memory transport) in the
// same run.
import { isDeepStrictEqual } from 'node:util';
import { message, SIZES } from './messages.mjs';
import { startPostMessage, startProcessSend } from './baselines.mjs';
import { startHubwireThread, startHubwireChild } from './hubwire-echo.mjs';
import { startRingEcho } from '../ring/echo.mjs';
import { cpuStart, cpuEnd } from '../lib/cpu.mjs';
import { progress } from '../lib/progress.mjs';

/**
 * The variants in table order. `start()` resolves to `{ roundTrip(payload)
 * → reply, pid? (a child's), served?() (calls a hubwire provider answered),
 * stop() }`. The payload is the message itself, or with `bytes` its JSON
 * bytes, encoded once outside the loop, as an application holding bytes
 * would send them (the raw codec and the bare ring).
 */
export const VARIANTS = [
  { id: 'thread/postMessage', side: 'thread', label: 'postMessage (structured clone)', baseline: true, start: startPostMessage },
  { id: 'thread/hubwire-raw', side: 'thread', label: 'hubwire raw', bytes: true, start: () => startHubwireThread('raw') },
  { id: 'thread/hubwire-msgpack', side: 'thread', label: 'hubwire msgpack', start: () => startHubwireThread('msgpack') },
  { id: 'thread/hubwire-json', side: 'thread', label: 'hubwire json', start: () => startHubwireThread('json') },
  { id: 'thread/hubwire-shm-raw', side: 'thread', label: 'hubwire raw, shared memory', bytes: true, start: () => startHubwireThread('raw', { shm: true }) },
  { id: 'thread/hubwire-shm-msgpack', side: 'thread', label: 'hubwire msgpack, shared memory', start: () => startHubwireThread('msgpack', { shm: true }) },
  { id: 'thread/ring', side: 'thread', label: 'bare SAB ring (no protocol)', bytes: true, start: () => startRingEcho(50) },
  { id: 'child/process.send', side: 'child', label: 'process.send (JSON)', baseline: true, start: startProcessSend },
  { id: 'child/hubwire-raw', side: 'child', label: 'hubwire raw', bytes: true, start: () => startHubwireChild('raw') },
  { id: 'child/hubwire-msgpack', side: 'child', label: 'hubwire msgpack', start: () => startHubwireChild('msgpack') },
  { id: 'child/hubwire-json', side: 'child', label: 'hubwire json', start: () => startHubwireChild('json') },
];

/** Whether an echoed reply is the message sent (bytes compare by content, whatever their class). */
function same(reply, msg) {
  if (msg instanceof Uint8Array) return reply instanceof Uint8Array && Buffer.compare(reply, msg) === 0;
  return isDeepStrictEqual(reply, msg);
}

/** Round trips of `msg` through `roundTrip` for `secs`; returns `{ count, wrong }`, checking the first and last replies. */
async function echoFor(roundTrip, msg, secs) {
  const deadline = performance.now() + secs * 1e3;
  let count = 0;
  let wrong = 0;
  let reply;
  do {
    reply = await roundTrip(msg);
    if (count === 0 && !same(reply, msg)) wrong++;
    count++;
  } while (performance.now() < deadline);
  if (!same(reply, msg)) wrong++;
  return { count, wrong };
}

/**
 * Runs study 001: for each size in `sizes`, each variant in `variants` (ids)
 * echoes for `secs` after `warmupSecs`. Returns `{ sizes: { [size]: { jsonBytes,
 * variants: { [id]: { count, secs, perSec, wrong, provider, cpu } } } } }`.
 */
export async function run001({ secs, warmupSecs, sizes = SIZES, variants = VARIANTS.map((v) => v.id) }) {
  const out = {};
  for (const size of sizes) {
    const msg = message(size);
    const json = JSON.stringify(msg);
    const bytes = new TextEncoder().encode(json);
    out[size] = { jsonBytes: bytes.length, variants: {} };
    for (const v of VARIANTS.filter((x) => variants.includes(x.id))) {
      progress(`001: ${size} (${bytes.length} B), ${v.id}, ${secs} s`);
      const payload = v.bytes ? bytes : msg;
      const peer = await v.start();
      try {
        const warm = await echoFor(peer.roundTrip, payload, warmupSecs);
        const start = cpuStart(peer.pid);
        const r = await echoFor(peer.roundTrip, payload, secs);
        const cpu = cpuEnd(start);
        // hubwire's provider counts the echoes it answered: proof that they went through it.
        const provider = peer.served ? { sent: warm.count + r.count, served: await peer.served() } : null;
        out[size].variants[v.id] = {
          count: r.count,
          secs: cpu.wall,
          perSec: r.count / cpu.wall,
          wrong: warm.wrong + r.wrong,
          provider,
          cpu: { mainCores: cpu.main === null ? null : cpu.main / cpu.wall, peerCores: cpu.peer === null ? null : cpu.peer / cpu.wall, totalCores: cpu.total / cpu.wall },
        };
      } finally {
        await peer.stop();
      }
    }
  }
  return { sizes: out };
}
