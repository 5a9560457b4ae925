/**
 * Shared-memory transport between JavaScript threads (Node worker_threads,
 * a page and its Web Worker when cross-origin isolated): two
 * single-producer, single-consumer byte rings in one SharedArrayBuffer
 * (`spec/PROTOCOL.md` §11.2). No message is posted per frame, so no thread
 * is woken per frame when the reader is already awake: after bytes arrive,
 * or after it sent a request, a reader spins (up to `spinUs`) before it
 * sleeps in `Atomics.waitAsync`. Waking a sleeping thread costs 20–25 µs on
 * the machines we run on; a spin that catches the answer costs about one.
 * A spin that finds nothing makes the next ones shorter (exponential
 * back-off), so an idle connection costs no CPU.
 *
 * Shared memory cannot tell that the other thread died: pass the Worker
 * (or a port of it) as `watch` so that its exit ends the stream at once.
 */

import { onPeerGone, type PortLike } from "./messageport.js";
import type { Transport, TransportSink } from "./index.js";

// Int32 control words at the start of each ring, then the bytes.
const WRITTEN = 0; // bytes published so far (wrapping)
const READ = 1; // bytes consumed so far (wrapping)
const SEQ = 2; // bumped on every publish and on close: what a sleeping reader waits on
const READER_ASLEEP = 3; // 1 while the reader sleeps (or is about to) on SEQ
const CLOSED = 4; // 1 once the writer closed: end of stream after the bytes published
const ROOM = 5; // bumped when the reader frees room: what a blocked writer waits on
const WRITER_BLOCKED = 6; // 1 while the writer waits on ROOM
const CONTROL = 32; // bytes of control words (8 Int32)

/** One direction of the stream: `cap` bytes (a power of two) after the control words. */
class Ring {
  private readonly ctl: Int32Array;
  private readonly bytes: Uint8Array;

  constructor(
    sab: SharedArrayBuffer,
    offset: number,
    private readonly cap: number,
  ) {
    this.ctl = new Int32Array(sab, offset, CONTROL / 4);
    this.bytes = new Uint8Array(sab, offset + CONTROL, cap);
  }

  /** Copies in as much of `b[from..]` as fits and publishes it; returns how much. */
  put(b: Uint8Array, from: number): number {
    const w = Atomics.load(this.ctl, WRITTEN);
    const room = this.cap - ((w - Atomics.load(this.ctl, READ)) | 0);
    const n = Math.min(room, b.length - from);
    if (n === 0) return 0;
    const at = w & (this.cap - 1);
    const first = Math.min(n, this.cap - at);
    this.bytes.set(b.subarray(from, from + first), at);
    if (first < n) this.bytes.set(b.subarray(from + first, from + n), 0);
    Atomics.store(this.ctl, WRITTEN, (w + n) | 0);
    this.publish();
    return n;
  }

  /** Wakes the reader if it sleeps (after bytes or the close were published). */
  private publish(): void {
    Atomics.add(this.ctl, SEQ, 1);
    if (Atomics.load(this.ctl, READER_ASLEEP) === 1) Atomics.notify(this.ctl, SEQ);
  }

  /** The writer is done: end of stream after what it published. */
  close(): void {
    Atomics.store(this.ctl, CLOSED, 1);
    this.publish();
  }

  /** Everything published and not yet read, copied out (a buffer of its own), or null. */
  take(): Uint8Array | null {
    const r = Atomics.load(this.ctl, READ);
    const n = (Atomics.load(this.ctl, WRITTEN) - r) | 0;
    if (n === 0) return null;
    const at = r & (this.cap - 1);
    let out: Uint8Array;
    if (at + n <= this.cap) out = this.bytes.slice(at, at + n);
    else {
      out = new Uint8Array(n);
      out.set(this.bytes.subarray(at));
      out.set(this.bytes.subarray(0, n - (this.cap - at)), this.cap - at);
    }
    Atomics.store(this.ctl, READ, (r + n) | 0);
    if (Atomics.load(this.ctl, WRITER_BLOCKED) === 1) {
      Atomics.store(this.ctl, WRITER_BLOCKED, 0);
      Atomics.add(this.ctl, ROOM, 1);
      Atomics.notify(this.ctl, ROOM);
    }
    return out;
  }

  get closed(): boolean {
    return Atomics.load(this.ctl, CLOSED) === 1;
  }

  get empty(): boolean {
    return Atomics.load(this.ctl, WRITTEN) === Atomics.load(this.ctl, READ);
  }

  /** The reader is going to sleep until SEQ moves on from the returned value. Check again before sleeping. */
  sleep(): Promise<unknown> | null {
    const seq = Atomics.load(this.ctl, SEQ);
    Atomics.store(this.ctl, READER_ASLEEP, 1);
    if (!this.empty || this.closed) return null;
    const w = Atomics.waitAsync(this.ctl, SEQ, seq);
    return w.async ? w.value : null;
  }

  awake(): void {
    Atomics.store(this.ctl, READER_ASLEEP, 0);
  }

  /** Wakes this ring's own reader (on our thread) so it spins: an answer is coming. */
  kick(): void {
    Atomics.notify(this.ctl, SEQ);
  }

  /** The writer waits until the reader frees room (or returns null if it already has). */
  waitForRoom(): Promise<unknown> | null {
    const room = Atomics.load(this.ctl, ROOM);
    Atomics.store(this.ctl, WRITER_BLOCKED, 1);
    const w = Atomics.waitAsync(this.ctl, ROOM, room);
    return w.async ? w.value : null;
  }
}

/** Lets every pending microtask and I/O callback run before the reader spins again. */
const nextTask: () => Promise<void> =
  typeof setImmediate === "function"
    ? () => new Promise((resolve) => setImmediate(resolve))
    : (() => {
        // Browsers: setTimeout(0) is clamped once nested; a message to ourselves is prompt.
        const ch = new MessageChannel();
        const waiting: (() => void)[] = [];
        (ch.port1 as unknown as { onmessage: () => void }).onmessage = () => waiting.shift()!();
        return () =>
          new Promise<void>((resolve) => {
            waiting.push(resolve);
            ch.port2.postMessage(null);
          });
      })();

const MAX_BACKOFF = 64;

/** Options of {@link connect}. */
export interface SharedMemoryOptions {
  /** How long a reader spins for bytes before it sleeps, in µs (default 50; 0 never spins). */
  spinUs?: number;
  /** The Worker (or a port to it) whose end means the peer is gone. */
  watch?: PortLike;
}

class SharedMemoryTransport implements Transport {
  private sink: TransportSink | null = null;
  private ended = false;
  private asleep = false;
  private pending: { bytes: Uint8Array; from: number }[] = [];
  /** Bytes in `pending` not yet put in the ring (what `queued` reports). */
  private pendingBytes = 0;
  private flushing = false;
  /** While paused: resolves on `resume` (the read loop takes nothing from the ring meanwhile). */
  private paused: Promise<void> | null = null;
  private unpause: (() => void) | null = null;
  /** Sleeps left to take without spinning first (after spins that found nothing). */
  private skip = 0;
  private backoff = 0;
  private keepAlive: ReturnType<typeof setInterval> | undefined;
  private readonly spinUs: number;

  constructor(
    private readonly incoming: Ring,
    private readonly outgoing: Ring,
    readonly description: string,
    private readonly options: SharedMemoryOptions,
  ) {
    this.spinUs = options.spinUs ?? 50;
  }

  start(sink: TransportSink): void {
    this.sink = sink;
    // A pending waitAsync does not keep Node's event loop alive; a timer does.
    this.keepAlive = setInterval(() => {}, 1 << 30);
    if (this.options.watch) onPeerGone(this.options.watch, (why) => this.finish(why));
    this.readLoop().catch((e) => this.finish(`shared-memory reader failed: ${(e as Error).message}`));
  }

  write(bytes: Uint8Array): void {
    if (this.ended) return;
    const n = this.pending.length > 0 ? 0 : this.outgoing.put(bytes, 0);
    if (n < bytes.length) {
      this.pending.push({ bytes, from: n });
      this.pendingBytes += bytes.length - n;
      if (!this.flushing) this.flush().catch((e) => this.finish(`shared-memory writer failed: ${(e as Error).message}`));
    }
    // An answer is likely on its way: wake our reader so it spins for it.
    if (this.asleep && this.skip === 0) this.incoming.kick();
  }

  /** Writes what did not fit, as the reader makes room. */
  private async flush(): Promise<void> {
    this.flushing = true;
    // Runs on after close too, so that a GOAWAY queued behind a full ring still goes out.
    while (this.pending.length > 0) {
      const head = this.pending[0]!;
      this.put(head);
      if (head.from === head.bytes.length) {
        this.pending.shift();
        continue;
      }
      const wait = this.outgoing.waitForRoom();
      this.put(head);
      if (head.from < head.bytes.length && wait !== null) await wait;
    }
    this.flushing = false;
    if (this.ended) this.outgoing.close();
    else this.sink?.onDrain?.();
  }

  /** Puts as much of a pending write in the ring as fits. */
  private put(p: { bytes: Uint8Array; from: number }): void {
    const n = this.outgoing.put(p.bytes, p.from);
    p.from += n;
    this.pendingBytes -= n;
  }

  /** Bytes written that did not fit in the ring yet. */
  queued(): number {
    return this.pendingBytes;
  }

  pause(): void {
    if (this.paused === null) this.paused = new Promise((resolve) => (this.unpause = resolve));
  }

  resume(): void {
    const unpause = this.unpause;
    this.paused = this.unpause = null;
    unpause?.();
  }

  close(): void {
    if (this.ended) return;
    this.finish("connection closed locally");
  }

  private finish(reason: string): void {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.keepAlive);
    // What is still pending goes out first (flush closes the ring when done).
    if (!this.flushing) this.outgoing.close();
    if (this.asleep) this.incoming.kick();
    this.resume();
    this.sink?.onEnd(reason);
  }

  /** Spins for up to `spinUs`; the bytes that arrived, or null. */
  private spin(): Uint8Array | null {
    const until = performance.now() + this.spinUs / 1000;
    do {
      const b = this.incoming.take();
      if (b !== null) return b;
    } while (performance.now() < until && !this.incoming.closed);
    return null;
  }

  private async readLoop(): Promise<void> {
    while (!this.ended) {
      // Paused: the peer's bytes stay in the ring, and a full ring holds its writes back.
      if (this.paused !== null) {
        await this.paused;
        continue;
      }
      let b = this.incoming.take();
      if (b === null && this.spinUs > 0) {
        if (this.skip > 0) this.skip--;
        else {
          b = this.spin();
          if (b === null) this.skip = this.backoff = Math.min(MAX_BACKOFF, this.backoff * 2 || 1);
          else this.backoff = 0;
        }
      }
      if (b !== null) {
        this.sink!.onData(b);
        // Let the connection act on it (answer, send the next request) before spinning again.
        await nextTask();
        continue;
      }
      if (this.incoming.closed) return this.finish("connection closed by peer (end of stream)");
      this.asleep = true;
      const wait = this.incoming.sleep();
      if (wait !== null) await wait;
      this.asleep = false;
      this.incoming.awake();
    }
  }
}

/** A SharedArrayBuffer for a connection, `capacity` bytes each way (a power of two; default 1 MiB). Share it with the other thread. */
export function buffer(capacity = 1 << 20): SharedArrayBuffer {
  if (capacity < 4096 || (capacity & (capacity - 1)) !== 0) throw new RangeError("capacity must be a power of two >= 4096");
  return new SharedArrayBuffer(2 * (CONTROL + capacity));
}

/**
 * One end of the shared-memory transport over `sab` (from {@link buffer}):
 * `"dialer"` on the thread that made it, `"acceptor"` on the other.
 */
export function connect(sab: SharedArrayBuffer, side: "dialer" | "acceptor", options: SharedMemoryOptions = {}): Transport {
  const cap = sab.byteLength / 2 - CONTROL;
  const toAcceptor = new Ring(sab, 0, cap);
  const toDialer = new Ring(sab, CONTROL + cap, cap);
  return side === "dialer"
    ? new SharedMemoryTransport(toDialer, toAcceptor, "sharedmemory:dialer", options)
    : new SharedMemoryTransport(toAcceptor, toDialer, "sharedmemory:acceptor", options);
}
