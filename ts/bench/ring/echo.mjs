// The bare floor of a SharedArrayBuffer worker transport, with no protocol
// at all: length-prefixed records echoed through the two rings of ring.mjs.
// Both sides spin up to `spinUs` for data, then sleep: the worker, a
// dedicated echo thread, with Atomics.wait; the main thread with
// Atomics.waitAsync. No back-off: on CPUs busy with other work the spins
// fail and this floor collapses (the SDK's transport backs off).
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { rings, ringBuffer } from './ring.mjs';

const STOP = 0xffffffff; // record length that tells the worker to return

/** Reads one whole record (length-prefixed), gathering partial reads; `wait()` is called when the ring is empty. */
function readRecord(ring, wait, state) {
  for (;;) {
    if (state.buf.length >= 4) {
      const n = new DataView(state.buf.buffer, state.buf.byteOffset, 4).getUint32(0, true);
      if (n === STOP) return STOP;
      if (state.buf.length >= 4 + n) {
        const rec = state.buf.subarray(4, 4 + n);
        state.buf = state.buf.subarray(4 + n);
        return rec;
      }
    }
    const more = ring.read();
    if (more === null) {
      const r = wait();
      if (r instanceof Promise) return r.then(() => readRecord(ring, wait, state));
      continue;
    }
    state.buf = state.buf.length ? concat(state.buf, more) : more;
  }
}

function concat(a, b) {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

function writeRecord(ring, bytes, length = bytes.length) {
  const head = new Uint8Array(4);
  new DataView(head.buffer).setUint32(0, length, true);
  // The echo is sequential and a record fits the ring, so both writes take everything.
  if (ring.write(head) !== 4 || ring.write(bytes) !== bytes.length) throw new Error('ring full: the echo sends one record at a time');
}

/** A waiter: spin up to spinUs for data, then sleep with `sleep(ctl, index, value)`. */
function waiter(ring, spinUs, sleep) {
  return () => {
    const until = performance.now() + spinUs / 1e3;
    while (performance.now() < until) if (ring.hasData()) return undefined;
    const seq = ring.prepareSleep();
    const done = () => ring.awake();
    if (ring.hasData()) return done();
    const r = sleep(...ring.seqWord(seq));
    return r instanceof Promise ? r.then(done) : done();
  };
}

/** The worker side: echoes every record until STOP. Blocks the worker thread (a dedicated echo thread). */
export function serveRingEcho(sab, spinUs) {
  const { incoming, outgoing } = rings(sab, 'b');
  const wait = waiter(incoming, spinUs, (...word) => void Atomics.wait(...word));
  const state = { buf: new Uint8Array(0) };
  for (;;) {
    const rec = readRecord(incoming, wait, state);
    if (rec === STOP) return;
    writeRecord(outgoing, rec);
  }
}

/** Starts a worker echoing over the rings. Resolves to `{ roundTrip(bytes) → bytes, stop() }`. */
export async function startRingEcho(spinUs) {
  const sab = ringBuffer(1 << 20);
  const { incoming, outgoing } = rings(sab, 'a');
  const worker = new Worker(new URL('../001/thread-peer.mjs', import.meta.url), { workerData: { mode: 'ring', ring: sab, spinUs } });
  await once(worker, 'message');
  const wait = waiter(incoming, spinUs, (...word) => {
    const w = Atomics.waitAsync(...word);
    return w.async ? w.value : undefined;
  });
  const state = { buf: new Uint8Array(0) };
  return {
    roundTrip: async (bytes) => {
      writeRecord(outgoing, bytes);
      return readRecord(incoming, wait, state);
    },
    stop: async () => {
      writeRecord(outgoing, new Uint8Array(0), STOP);
      await worker.terminate();
    },
  };
}
