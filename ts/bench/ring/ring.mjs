// The floor of a shared-memory worker transport, with no protocol: one
// direction is a single-producer, single-consumer byte ring in a
// SharedArrayBuffer. The writer copies bytes in and publishes the new write
// index; the reader copies out everything published. The SDK's
// shared-memory transport (ts/src/transport/sharedmemory.ts) grew out of
// this prototype and adds what a transport needs on top (waiting for room,
// end of stream, a peer that dies); echo.mjs measures the bare rings.

// Int32 control words, then the bytes.
const WRITE = 0; // bytes published so far (wrapping int32)
const READ = 1; // bytes consumed so far
const SLEEPING = 2; // 1 while the reader sleeps, or is about to, on SEQ
const SEQ = 3; // bumped by the writer on every publish
const CONTROL_BYTES = 16;

/** One direction: `cap` (a power of two) bytes at `offset` of `sab`. */
class Ring {
  constructor(sab, offset, cap) {
    this.cap = cap;
    this.ctl = new Int32Array(sab, offset, CONTROL_BYTES / 4);
    this.buf = new Uint8Array(sab, offset + CONTROL_BYTES, cap);
  }

  /** Copies as much of `bytes` as fits and publishes it in one step; returns how many bytes it took. */
  write(bytes) {
    const w = Atomics.load(this.ctl, WRITE);
    const room = this.cap - ((w - Atomics.load(this.ctl, READ)) | 0);
    const n = Math.min(room, bytes.length);
    if (n === 0) return 0;
    const at = w & (this.cap - 1);
    const first = Math.min(n, this.cap - at);
    this.buf.set(bytes.subarray(0, first), at);
    if (first < n) this.buf.set(bytes.subarray(first, n), 0);
    Atomics.store(this.ctl, WRITE, (w + n) | 0);
    Atomics.add(this.ctl, SEQ, 1);
    if (Atomics.load(this.ctl, SLEEPING) === 1) Atomics.notify(this.ctl, SEQ);
    return n;
  }

  /** Copies out everything published (a fresh, unshared Uint8Array), or null when empty. */
  read() {
    const r = Atomics.load(this.ctl, READ);
    const n = (Atomics.load(this.ctl, WRITE) - r) | 0;
    if (n === 0) return null;
    const at = r & (this.cap - 1);
    let out;
    // slice copies into a new buffer without zero-filling it first.
    if (at + n <= this.cap) out = this.buf.slice(at, at + n);
    else {
      out = new Uint8Array(n);
      out.set(this.buf.subarray(at));
      out.set(this.buf.subarray(0, n - (this.cap - at)), this.cap - at);
    }
    Atomics.store(this.ctl, READ, (r + n) | 0);
    return out;
  }

  /** Whether bytes are waiting. */
  hasData() {
    return Atomics.load(this.ctl, WRITE) !== Atomics.load(this.ctl, READ);
  }

  /**
   * Announces that the reader is going to sleep and returns the SEQ value to
   * wait on. The caller must check hasData() once more before waiting, and
   * call awake() after.
   */
  prepareSleep() {
    Atomics.store(this.ctl, SLEEPING, 1);
    return Atomics.load(this.ctl, SEQ);
  }

  /** The word and value a reader sleeps on: Atomics.wait/waitAsync(ctl, index, value). */
  seqWord(value) {
    return [this.ctl, SEQ, value];
  }

  awake() {
    Atomics.store(this.ctl, SLEEPING, 0);
  }
}

/** The two rings in `sab` (from ringBuffer) as seen from `side` 'a' or 'b': `{ incoming, outgoing }`. */
export function rings(sab, side) {
  const cap = sab.byteLength / 2 - CONTROL_BYTES;
  const a2b = new Ring(sab, 0, cap);
  const b2a = new Ring(sab, CONTROL_BYTES + cap, cap);
  return side === 'a' ? { incoming: b2a, outgoing: a2b } : { incoming: a2b, outgoing: b2a };
}

/** A SharedArrayBuffer for two rings of `cap` bytes (a power of two). */
export function ringBuffer(cap) {
  if ((cap & (cap - 1)) !== 0) throw new Error('ring capacity must be a power of two');
  return new SharedArrayBuffer(2 * (CONTROL_BYTES + cap));
}
