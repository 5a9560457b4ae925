/**
 * The state of one connection: the {@link Core} every other engine file
 * works on. It holds the writer, the call table both ways, id
 * allocation, both HELLOs, the draining flags and the pings, and it is
 * the one place a connection ends ({@link Core.die}): every pending call
 * fails at once with the reason, every served call is cancelled.
 *
 * It knows no method, handler or codec: the public `Connection` composes
 * a Core (and is carried here opaquely, as {@link Core.connection}), the
 * handshake (`handshake.ts`) fills in {@link Core.peer}, the reader
 * (`reader.ts`) feeds it frames, and `serve.ts` runs the calls it serves.
 */

import { HubwireError } from "../errors.js";
import { FrameType, idAfter, type DirectOffer } from "../frame.js";
import type { Hello } from "../hello.js";
import type { Transport } from "../transport/index.js";
import { CallIds, CallQueue, onDeadline, type CallHost, type OutCall, type ServedCall } from "./calls.js";
import { DEFAULT_WRITE_QUEUE, DEFAULT_WRITE_STALL_MS, MIN_WRITE_QUEUE, Writer } from "./writer.js";

/** How long a connection that sent a fatal GOAWAY discards input before it closes (spec §7.3). */
export const LINGER_MS = 1000;
/** How many bytes it discards at most meanwhile. */
export const LINGER_BYTES = 1 << 20;

/** The handshake under way: how {@link Core.die} fails it. */
export interface Opening {
  resolve: () => void;
  reject: (e: HubwireError) => void;
  timer: ReturnType<typeof setTimeout>;
}

/** One connection's protocol state (see the file's comment). */
export class Core implements CallHost {
  /** The peer's HELLO: identity, limits, methods (set once the handshake is done). */
  peer!: Hello;
  /** The API object this core belongs to (the public `Connection`): opaque to the engine, handed to services. */
  connection: unknown = undefined;
  /** Resolves with why, when the connection has ended. */
  readonly closed: Promise<HubwireError>;
  readonly writer: Writer;
  /** Calls we started that are on the wire, by id. */
  readonly out = new Map<number, OutCall>();
  /** Calls we serve, by id. */
  readonly served = new Map<number, ServedCall>();
  /** Why the connection ended, once it has. */
  error: HubwireError | null = null;
  /** The highest call id the peer started that we saw (GOAWAY's `last_id`). */
  lastPeerId = 0;
  /** We sent GOAWAY ok: accept no new calls. */
  draining = false;
  /** The handshake, while it is under way. */
  opening: Opening | null = null;
  /** Takes a DIRECT's body (§14.3), on a client that asked for the direct path. */
  onDirect: ((offer: DirectOffer) => void) | null = null;

  private readonly ids: CallIds;
  private peerDraining = false;
  /** Calls waiting for the peer's `max_calls` to allow them. */
  private readonly queue = new CallQueue();
  private readonly pings = new Map<number, (now: number) => void>();
  private pingSeq = 0;
  /** Resolves a pending {@link drain} once the calls are done. */
  private idle: (() => void) | null = null;
  private resolveClosed!: (e: HubwireError) => void;

  constructor(
    readonly transport: Transport,
    /** Whether we opened the connection (our call ids are odd). */
    readonly dialer: boolean,
    /** Our HELLO: identity, limits, the methods we offer. */
    readonly local: Hello,
    /** The write queue's cap in bytes (at least {@link MIN_WRITE_QUEUE}; `writer.ts`). */
    writeQueue: number = DEFAULT_WRITE_QUEUE,
    /** How long the queue may stay over its cap while a new call from the peer waits (`reader.ts`). */
    readonly writeStallMs: number = DEFAULT_WRITE_STALL_MS,
  ) {
    this.writer = new Writer(transport, Math.max(MIN_WRITE_QUEUE, writeQueue));
    this.ids = new CallIds(dialer);
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve));
  }

  /** Whether `id` is of our parity: a call we started. */
  ours(id: number): boolean {
    return (id & 1) === (this.dialer ? 1 : 0);
  }

  // ---- Calls we start ------------------------------------------------------

  /** Starts `call` now, or queues it while the peer's `max_calls` are in flight. */
  begin(call: OutCall, timeoutMs: number | undefined, signal: AbortSignal | undefined): void {
    if (this.error !== null) return call.fail(this.error);
    if (this.peerDraining) return call.fail(new HubwireError("unavailable", "peer is draining (GOAWAY); start the call elsewhere"));
    const mlen = (call.methodBytes = this.writer.methodBytes(call.method)).length;
    if (mlen === 0 || mlen > 255) {
      return call.fail(new HubwireError("invalid_argument", `method name must be 1-255 bytes, got ${mlen}`));
    }
    const body = 5 + mlen + call.payload.length;
    if (body > this.peer.max_frame) {
      return call.fail(new HubwireError("too_large", `request of ${body} bytes exceeds the peer's max_frame of ${this.peer.max_frame} bytes`));
    }
    if (signal !== undefined) {
      if (signal.aborted) return call.fail(new HubwireError("cancelled", "the call was cancelled by its caller"));
      call.signal = signal;
      signal.addEventListener("abort", call);
    }
    if (timeoutMs !== undefined && timeoutMs > 0) {
      call.deadline = Date.now() + timeoutMs;
      call.timer = setTimeout(onDeadline, timeoutMs, call);
    }
    if (this.out.size >= this.peer.max_calls) this.queue.push(call);
    else this.send(call);
  }

  /** Registers a call and sends its REQUEST. */
  private send(call: OutCall): void {
    const id = (call.id = this.ids.take(this.out));
    this.out.set(id, call);
    const timeoutMs = call.deadline === 0 ? 0 : Math.max(1, call.deadline - Date.now());
    this.writer.request(id, call.kind, call.codec, timeoutMs, call.methodBytes, call.payload);
    if (call.send !== null) {
      if (call.endPending) this.writer.empty(FrameType.End, id);
      else call.send.add(this.peer.window);
    }
  }

  /** The call has ended: forget it, stop its timer, start a queued call. */
  release(call: OutCall): void {
    if (call.id !== 0) this.out.delete(call.id);
    if (call.timer !== undefined) clearTimeout(call.timer);
    if (call.signal !== undefined) call.signal.removeEventListener("abort", call);
    while (this.queue.size > 0 && this.out.size < this.peer.max_calls) this.send(this.queue.shift()!);
    if (this.draining) this.checkIdle();
  }

  /** This side gives up on a call: CANCEL if it is on the wire, then fail it with `error`. */
  abandon(call: OutCall, error: HubwireError): void {
    if (call.id === 0) {
      if (!this.queue.remove(call)) return;
    } else {
      if (this.out.get(call.id) !== call) return;
      this.writer.empty(FrameType.Cancel, call.id);
    }
    this.release(call);
    call.fail(error);
  }

  /** Sends CREDIT for a stream we receive. */
  grant(id: number, n: number): void {
    if (this.error === null) this.writer.credit(id, n);
  }

  /** Whether the peer sent GOAWAY `ok`: it takes no new calls. */
  get peerGoneAway(): boolean {
    return this.peerDraining;
  }

  /** The peer sent GOAWAY `ok`: the calls it never saw (ids after `lastId`, §3's order) fail now, safe to retry. */
  peerDrains(lastId: number): void {
    this.peerDraining = true;
    for (const call of [...this.out.values()]) {
      if (idAfter(call.id, lastId)) {
        this.release(call);
        call.fail(new HubwireError("unavailable", "peer is draining (GOAWAY) and never saw this call; safe to retry"));
      }
    }
    for (const call of this.queue.drain()) call.fail(new HubwireError("unavailable", "peer is draining (GOAWAY)"));
  }

  // ---- Calls we serve ------------------------------------------------------

  /** A served call has ended: out of the table (false if it already was). */
  forget(s: ServedCall): boolean {
    if (!s.live) return false;
    s.live = false;
    this.served.delete(s.callId);
    if (this.draining) this.checkIdle();
    return true;
  }

  // ---- Pings ---------------------------------------------------------------

  /** Round-trip time of a PING, in milliseconds. */
  ping(): Promise<number> {
    if (this.error !== null) return Promise.reject(this.error);
    const seq = (this.pingSeq = (this.pingSeq + 1) | 0);
    const data = new Uint8Array(8);
    data[0] = seq & 0xff;
    data[1] = (seq >>> 8) & 0xff;
    data[2] = (seq >>> 16) & 0xff;
    data[3] = (seq >>> 24) & 0xff;
    const start = performance.now();
    return new Promise((resolve) => {
      this.pings.set(seq, (now) => resolve(now - start));
      this.writer.ping(FrameType.Ping, data);
    });
  }

  /** A PONG arrived. */
  onPong(data: Uint8Array): void {
    const seq = data[0]! | (data[1]! << 8) | (data[2]! << 16) | (data[3]! << 24);
    const done = this.pings.get(seq);
    if (done !== undefined) {
      this.pings.delete(seq);
      done(performance.now());
    }
  }

  // ---- Ending ----------------------------------------------------------------

  /**
   * Drains, then closes: sends GOAWAY `ok` (the peer starts no new calls),
   * waits up to `graceMs` for the calls in flight either way to finish.
   */
  async drain(graceMs: number): Promise<void> {
    if (this.error !== null) return;
    this.draining = true;
    this.writer.status(FrameType.Goaway, this.lastPeerId, 0, 0, "draining", null);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, graceMs);
      this.idle = () => (clearTimeout(timer), resolve());
      this.checkIdle();
    });
    this.die(new HubwireError("unavailable", "connection closed locally"));
  }

  /** While draining: ends the drain once no call is left either way. */
  checkIdle(): void {
    if (this.idle !== null && (this.error !== null || (this.out.size === 0 && this.served.size === 0 && this.queue.size === 0))) {
      const idle = this.idle;
      this.idle = null;
      idle();
    }
  }

  /**
   * Ends the connection: fails the handshake or every pending call with
   * `error`, cancels every served call, closes the transport. Idempotent.
   * `linger`: we sent a fatal GOAWAY, so the transport half-closes and
   * discards input for a bounded time before it closes (§7.3).
   */
  die(error: HubwireError, linger = false): void {
    if (this.error !== null) return;
    this.error = error;
    if (this.opening !== null) {
      clearTimeout(this.opening.timer);
      this.opening.reject(error);
      this.opening = null;
    }
    const out = [...this.out.values(), ...this.queue.drain()];
    this.out.clear();
    for (const call of out) {
      if (call.timer !== undefined) clearTimeout(call.timer);
      if (call.signal !== undefined) call.signal.removeEventListener("abort", call);
      call.fail(error);
    }
    const served = [...this.served.values()];
    this.served.clear();
    for (const s of served) {
      s.live = false;
      s.close(error, error);
      s.cancel(error);
    }
    this.pings.clear();
    this.writer.close();
    if (linger && this.transport.linger !== undefined) this.transport.linger(LINGER_MS, LINGER_BYTES);
    else this.transport.close();
    this.checkIdle();
    this.resolveClosed(error);
  }
}
