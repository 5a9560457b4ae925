/**
 * The writer of a connection: frames are encoded straight into a slab,
 * and everything queued in the same tick leaves in one transport write
 * (one syscall, one postMessage) from a microtask. Headers are written in
 * place, so a frame costs no allocation of its own, and a batch is a view
 * of the slab: a new slab is allocated only when one is used up.
 *
 * The queue has a cap (`ConnectionOptions.writeQueue`, 4 MiB): the bytes
 * of the batch not yet handed over plus those the transport still holds
 * ({@link Transport.queued}: a Node socket buffers every write, without
 * limit, until the kernel takes it). Above it, stream senders wait
 * ({@link Writer.ready}) and the reader holds the peer's new calls
 * (`reader.ts`); frames pushed by code that cannot wait (answers) still
 * queue, bounded by the calls the peer may have in flight.
 */

import { FrameType, HEADER_LEN, messageBytes, writeHeader, writeU32 } from "../frame.js";
import type { Transport } from "../transport/index.js";
import { concat } from "../bytes.js";

/** The size of a slab; batches are carved from it one after another. */
const SLAB = 64 * 1024;
/** Payloads this large are not copied into the slab: they go to the transport as segments of their own. */
const BIG = 16 * 1024;
const utf8 = new TextEncoder();

/** `ConnectionOptions.writeQueue` by default: 4 MiB. */
export const DEFAULT_WRITE_QUEUE = 4 * 1024 * 1024;
/** `ConnectionOptions.writeStallTimeoutMs` by default: 30 s. */
export const DEFAULT_WRITE_STALL_MS = 30_000;
/** The smallest cap taken: a smaller `writeQueue` is raised to it (as in the Rust runtime). */
export const MIN_WRITE_QUEUE = 64 * 1024;

/** Encodes frames into a batch and hands each batch to the transport. */
export class Writer {
  private buf = new Uint8Array(SLAB);
  /** Where the current batch starts in `buf` (earlier bytes belong to the transport). */
  private start = 0;
  private pos = 0;
  /** The batch so far, when it holds a big payload: slab views and payloads, in order. */
  private segments: Uint8Array[] = [];
  /** Bytes of the batch so far (slab bytes and big payloads): queued, not yet handed to the transport. */
  private batched = 0;
  private scheduled = false;
  private closed = false;
  private readonly names = new Map<string, Uint8Array>();
  private readonly flushBound = () => this.flush();
  /** Who waits for the queue to fall to the cap ({@link ready}). */
  private waiters: (() => void)[] = [];

  /** A writer to `transport` whose queue is capped at `cap` bytes (see the file's comment). */
  constructor(
    private readonly transport: Transport,
    readonly cap: number = DEFAULT_WRITE_QUEUE,
  ) {}

  /** Bytes queued for the peer: the batch not yet handed over, and what the transport still holds. */
  queued(): number {
    return this.batched + (this.transport.queued?.() ?? 0);
  }

  /** Whether more than the cap is queued (and the writer is open). */
  overCap(): boolean {
    return !this.closed && this.queued() > this.cap;
  }

  /**
   * `null` when the queue is within its cap, else a promise that resolves
   * once it is (the transport drained) or the writer is closed:
   * backpressure for stream senders, and for the reader.
   */
  ready(): Promise<void> | null {
    if (!this.overCap()) return null;
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Wakes {@link ready}'s waiters if the queue is within its cap (the transport drained, a batch was handed over). */
  wake(): void {
    if (this.waiters.length === 0 || this.overCap()) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /** Makes room for `n` more bytes and returns where they go (read `this.buf` after: it may be a new buffer). */
  private reserve(n: number): number {
    let pos = this.pos;
    if (pos + n > this.buf.length) {
      // A new slab, with the batch so far moved to its front.
      const batch = pos - this.start;
      const slab = new Uint8Array(Math.max(SLAB, 2 * (batch + n)));
      slab.set(this.buf.subarray(this.start, pos));
      this.buf = slab;
      this.start = 0;
      pos = batch;
    }
    this.pos = pos + n;
    this.batched += n;
    if (!this.scheduled) {
      this.scheduled = true;
      queueMicrotask(this.flushBound);
    }
    return pos;
  }

  /** Room for a payload after its frame's fixed fields: all of it when it is copied in, none when big. */
  private static inline(payload: Uint8Array | null): number {
    return payload === null || payload.length >= BIG ? 0 : payload.length;
  }

  /** Puts a payload at `at` (where {@link inline} made room), or cuts the batch there and adds it as a segment. */
  private payload(payload: Uint8Array, at: number): void {
    if (payload.length < BIG) {
      this.buf.set(payload, at);
      return;
    }
    this.segments.push(this.buf.subarray(this.start, this.pos), payload);
    this.start = this.pos;
    this.batched += payload.length;
  }

  /** The UTF-8 bytes of a method name, cached: names repeat. */
  methodBytes(method: string): Uint8Array {
    let b = this.names.get(method);
    if (b === undefined) {
      b = utf8.encode(method);
      if (this.names.size < 1024) this.names.set(method, b);
    }
    return b;
  }

  /** REQUEST: `timeout_ms`, method, payload. */
  request(id: number, kind: number, codec: number, timeoutMs: number, method: Uint8Array, payload: Uint8Array): void {
    if (this.closed) return;
    const body = 5 + method.length + payload.length;
    const p = this.reserve(HEADER_LEN + body - payload.length + Writer.inline(payload));
    const b = this.buf;
    writeHeader(b, p, FrameType.Request, kind, codec, id, body);
    writeU32(b, p + 12, timeoutMs);
    b[p + 16] = method.length;
    b.set(method, p + 17);
    this.payload(payload, p + 17 + method.length);
  }

  /** RESPONSE or GOAWAY: code, message, payload (GOAWAY: none). */
  status(type: number, id: number, codec: number, code: number, message: string, payload: Uint8Array | null): void {
    if (this.closed) return;
    const m = message.length === 0 ? null : messageBytes(message);
    const mlen = m === null ? 0 : m.length;
    const plen = payload === null ? 0 : payload.length;
    const body = 3 + mlen + plen;
    const p = this.reserve(HEADER_LEN + body - plen + Writer.inline(payload));
    const b = this.buf;
    writeHeader(b, p, type, 0, codec, id, body);
    b[p + 12] = code;
    b[p + 13] = mlen & 0xff;
    b[p + 14] = mlen >> 8;
    if (m !== null) b.set(m, p + 15);
    if (payload !== null) this.payload(payload, p + 15 + mlen);
  }

  /** ITEM: one payload. */
  item(id: number, codec: number, payload: Uint8Array): void {
    if (this.closed) return;
    const p = this.reserve(HEADER_LEN + Writer.inline(payload));
    writeHeader(this.buf, p, FrameType.Item, 0, codec, id, payload.length);
    this.payload(payload, p + HEADER_LEN);
  }

  /** END or CANCEL: no body. */
  empty(type: number, id: number): void {
    if (this.closed) return;
    const p = this.reserve(HEADER_LEN);
    writeHeader(this.buf, p, type, 0, 0, id, 0);
  }

  /** CREDIT. */
  credit(id: number, credit: number): void {
    if (this.closed) return;
    const p = this.reserve(HEADER_LEN + 4);
    writeHeader(this.buf, p, FrameType.Credit, 0, 0, id, 4);
    writeU32(this.buf, p + HEADER_LEN, credit);
  }

  /** PING or PONG with its 8 bytes. */
  ping(type: number, data: Uint8Array): void {
    if (this.closed) return;
    const p = this.reserve(HEADER_LEN + 8);
    writeHeader(this.buf, p, type, 0, 0, 0, 8);
    this.buf.set(data.subarray(0, 8), p + HEADER_LEN);
  }

  /** A whole encoded frame (the HELLO). */
  frame(bytes: Uint8Array): void {
    if (this.closed) return;
    const p = this.reserve(bytes.length);
    this.buf.set(bytes, p);
  }

  /** Hands the batch to the transport now. */
  flush(): void {
    this.scheduled = false;
    if (this.closed) return;
    // The batch now belongs to the transport; the next one starts after it.
    const tail = this.pos > this.start ? this.buf.subarray(this.start, this.pos) : null;
    this.start = this.pos;
    this.batched = 0;
    if (this.segments.length === 0) {
      if (tail !== null) this.transport.write(tail);
    } else {
      const segments = this.segments;
      this.segments = [];
      if (tail !== null) segments.push(tail);
      if (this.transport.writev !== undefined) this.transport.writev(segments);
      else this.transport.write(concat(segments));
    }
    // A transport that passed the batch on at once brings the queue back under the cap here.
    this.wake();
  }

  /** Flushes what is queued and accepts nothing more; whoever waits in {@link ready} goes on. */
  close(): void {
    this.flush();
    this.closed = true;
    this.wake();
  }
}
