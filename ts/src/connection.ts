/**
 * A connection: one transport, one handshake, many calls both ways.
 *
 * {@link Connection.dial} and {@link Connection.accept} send our HELLO at
 * once and wait for the peer's (`spec/PROTOCOL.md` §4). After that the
 * connection is the transport's sink: it parses every complete frame of
 * each read and routes it by call id (the dialer's ids are odd, the
 * acceptor's even). {@link Connection.die} is the one place a connection
 * ends: every pending call fails at once with `unavailable`, every handler
 * is cancelled.
 */

import { CODES, codeName } from "./codes.js";
import { HubwireError } from "./errors.js";
import { Decoder, FrameType, HEADER_LEN, VERSION, encodeFrame, type FrameVisitor } from "./frame.js";
import { Handshake, Router } from "./reader.js";
import { DEFAULT_MAX_CALLS, DEFAULT_MAX_FRAME, DEFAULT_WINDOW, negotiate, type Hello } from "./hello.js";
import { CallQueue, onDeadline, type OutCall } from "./calls.js";
import { Writer } from "./engine/writer.js";
import { concat } from "./bytes.js";
import type { Provider, ServedCall } from "./provider.js";
import * as client from "./client.js";
import type { BidiStream, CallOptions, ClientStream, ItemStream } from "./client.js";
import type { Transport, TransportSink } from "./transport/index.js";

/** How a connection presents itself and the limits it sets. */
export interface ConnectionOptions {
  /** Our name in the peer's logs and listings (default `"ts"`). */
  name?: string;
  /** The methods we offer on this connection, if any. */
  provider?: Provider;
  /** The largest frame body we accept (default 16 MiB). */
  maxFrame?: number;
  /** Initial credit we grant per incoming stream (default 64). */
  window?: number;
  /** Calls we serve at once before answering `resource_exhausted` (default 4096). */
  maxCalls?: number;
  /** How long to wait for the peer's HELLO (default 10 s). */
  handshakeTimeoutMs?: number;
}

/** The package version, sent in HELLO. */
export const SDK_VERSION = "0.1.0";


/** A live connection to a peer: call its methods, and serve ours to it. */
export class Connection implements TransportSink {
  /** The peer's HELLO: identity, limits, methods (set once the handshake is done). */
  peer!: Hello;
  /** Resolves with why, when the connection has ended. */
  readonly closed: Promise<HubwireError>;

  /** @internal */ readonly writer: Writer;
  /** @internal */ readonly local: Hello;
  /** @internal */ readonly provider: Provider | undefined;
  /** @internal */ readonly out = new Map<number, OutCall>();
  /** @internal */ readonly served = new Map<number, ServedCall>();
  /** @internal Why the connection ended, once it has. */
  error: HubwireError | null = null;
  /** @internal The highest call id the peer started that we saw. */
  lastPeerId = 0;
  /** @internal We sent GOAWAY ok: accept no new calls. */
  draining = false;

  private readonly decoder: Decoder;
  private visitor: FrameVisitor;
  private readonly router: Router;
  private chunks: Uint8Array[] = [];
  private buffered = 0;
  private need = 0;
  private nextId: number;
  private readonly firstId: number;
  private peerDraining = false;
  /** Calls waiting for the peer's `max_calls` to allow them. */
  private readonly queue = new CallQueue();
  private pings = new Map<number, (rtt: number) => void>();
  private pingSeq = 0;
  /** Resolves a pending {@link drain} once the calls are done. */
  private idle: (() => void) | null = null;
  private resolveClosed!: (e: HubwireError) => void;
  private handshake: { resolve: (c: Connection) => void; reject: (e: HubwireError) => void; timer: ReturnType<typeof setTimeout> } | null =
    null;

  private constructor(
    readonly transport: Transport,
    options: ConnectionOptions,
    /** Whether we opened the connection (our call ids are odd). */
    readonly dialer: boolean,
  ) {
    this.provider = options.provider;
    this.local = {
      versions: [VERSION],
      peer: { name: options.name ?? "ts", lang: "ts", version: SDK_VERSION },
      max_frame: options.maxFrame ?? DEFAULT_MAX_FRAME,
      window: Math.max(1, options.window ?? DEFAULT_WINDOW),
      max_calls: Math.max(1, options.maxCalls ?? DEFAULT_MAX_CALLS),
      methods: this.provider?.methodInfos() ?? [],
    };
    this.decoder = new Decoder(this.local.max_frame);
    this.visitor = new Handshake(this);
    this.router = new Router(this);
    this.writer = new Writer(transport);
    this.firstId = dialer ? 1 : 2;
    this.nextId = this.firstId;
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve));
  }

  /** Opens a connection as the dialer (odd call ids): HELLOs both ways, then ready. */
  static dial(transport: Transport, options: ConnectionOptions = {}): Promise<Connection> {
    return new Connection(transport, options, true).open(options);
  }

  /** Opens a connection as the acceptor (even call ids). */
  static accept(transport: Transport, options: ConnectionOptions = {}): Promise<Connection> {
    return new Connection(transport, options, false).open(options);
  }

  private open(options: ConnectionOptions): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const ms = options.handshakeTimeoutMs ?? 10_000;
      const timer = setTimeout(() => {
        this.fatal(new HubwireError("deadline_exceeded", `no HELLO from ${this.transport.description} within ${ms} ms`));
      }, ms);
      this.handshake = { resolve, reject, timer };
      this.writer.frame(encodeFrame({ type: "hello", body: this.local }));
      this.transport.start(this);
    });
  }

  /** @internal The peer's HELLO arrived first. */
  onHello(h: Hello): void {
    this.decoder.version = negotiate(this.local.versions, h.versions);
    this.peer = h;
    this.visitor = this.router;
    const hs = this.handshake!;
    this.handshake = null;
    clearTimeout(hs.timer);
    hs.resolve(this);
  }

  /** @internal The peer refused the handshake with a GOAWAY. */
  onRefused(code: number, message: string): void {
    this.die(new HubwireError(codeName(code) ?? "protocol_error", `peer refused the handshake: ${message}`));
  }

  // ---- Reading ------------------------------------------------------------

  /** @internal Bytes from the transport. */
  onData(chunk: Uint8Array): void {
    if (this.error !== null) return;
    if (this.buffered === 0) {
      this.consume(chunk);
      return;
    }
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    if (this.buffered < this.need) return;
    const b = concat(this.chunks, this.buffered);
    this.chunks = [];
    this.buffered = 0;
    this.consume(b);
  }

  /** Parses every complete frame of `b`; keeps the rest for the next read. */
  private consume(b: Uint8Array): void {
    let off = 0;
    try {
      for (;;) {
        const avail = b.length - off;
        const n = this.decoder.check(b, off, avail);
        if (n < 0 || avail < n) {
          this.need = n < 0 ? HEADER_LEN : n;
          break;
        }
        this.decoder.parse(b, off, n, this.visitor);
        off += n;
        if (this.error !== null) return;
      }
    } catch (e) {
      this.fatal(e instanceof HubwireError ? e : new HubwireError("internal", String(e)));
      return;
    }
    if (off < b.length) {
      this.chunks.push(off === 0 ? b : b.subarray(off));
      this.buffered = b.length - off;
    }
  }

  /** @internal The transport ended. */
  onEnd(reason: string): void {
    if (this.error !== null) return;
    if (this.buffered > 0) {
      const rest = concat(this.chunks, this.buffered);
      const e = this.decoder.finish(rest, 0, rest.length);
      if (e !== null) return this.fatal(e);
    }
    this.die(new HubwireError("unavailable", this.handshake ? `peer closed the connection before its HELLO (${reason})` : reason));
  }

  /**
   * Our side found the peer's bytes bad (or the handshake failed): GOAWAY
   * with the error, then close (`spec/PROTOCOL.md` §7.1).
   */
  private fatal(e: HubwireError): void {
    if (this.error !== null) return;
    this.writer.status(FrameType.Goaway, this.lastPeerId, 0, CODES[e.code], e.message, null);
    this.die(this.handshake ? e : new HubwireError("unavailable", `connection closed: sent GOAWAY ${e.code}: ${e.message}`));
  }

  /** @internal Whether `id` is of our parity: a call we started. */
  ours(id: number): boolean {
    return (id & 1) === (this.dialer ? 1 : 0);
  }

  /** @internal The peer sent GOAWAY `ok`: the calls it never saw (ids above `lastId`) fail now, safe to retry. */
  peerDrains(lastId: number): void {
    this.peerDraining = true;
    for (const call of [...this.out.values()]) {
      if (call.id > lastId) {
        this.release(call);
        call.fail(new HubwireError("unavailable", "peer is draining (GOAWAY) and never saw this call; safe to retry"));
      }
    }
    for (const call of this.queue.drain()) call.fail(new HubwireError("unavailable", "peer is draining (GOAWAY)"));
  }

  /** @internal A PONG arrived. */
  onPong(data: Uint8Array): void {
    const seq = data[0]! | (data[1]! << 8) | (data[2]! << 16) | (data[3]! << 24);
    const done = this.pings.get(seq);
    if (done !== undefined) {
      this.pings.delete(seq);
      done(performance.now());
    }
  }

  // ---- Calls we start ------------------------------------------------------

  /** @internal Starts `call` now, or queues it while the peer's `max_calls` are in flight. */
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
    let id = this.nextId;
    while (this.out.has(id)) id = id + 2 > 0xffffffff ? this.firstId : id + 2;
    this.nextId = id + 2 > 0xffffffff ? this.firstId : id + 2;
    call.id = id;
    this.out.set(id, call);
    const timeoutMs = call.deadline === 0 ? 0 : Math.max(1, call.deadline - Date.now());
    this.writer.request(id, call.kind, call.codec, timeoutMs, call.methodBytes, call.payload);
    if (call.send !== null) {
      if (call.endPending) this.writer.empty(FrameType.End, id);
      else call.send.add(this.peer.window);
    }
  }

  /** @internal The call has ended: forget it, stop its timer, start a queued call. */
  release(call: OutCall): void {
    if (call.id !== 0) this.out.delete(call.id);
    if (call.timer !== undefined) clearTimeout(call.timer);
    if (call.signal !== undefined) call.signal.removeEventListener("abort", call);
    while (this.queue.size > 0 && this.out.size < this.peer.max_calls) this.send(this.queue.shift()!);
    if (this.draining) this.checkIdle();
  }

  /** @internal This side gives up on a call: CANCEL if it is on the wire, then fail it with `error`. */
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

  /** @internal Sends CREDIT for a stream we receive. */
  grant(id: number, n: number): void {
    if (this.error === null) this.writer.credit(id, n);
  }

  // ---- Public API ----------------------------------------------------------

  /** A unary call with raw bytes in and out: no serialization at all. */
  callRaw(method: string, input: Uint8Array, options?: CallOptions): Promise<Uint8Array> {
    return client.unary(this, method, input, true, options) as Promise<Uint8Array>;
  }

  /** A unary call; the input is encoded with `options.codec` (MessagePack unless set). */
  call(method: string, input: unknown, options?: CallOptions): Promise<unknown> {
    return client.unary(this, method, input, false, options);
  }

  /** Calls a server-streaming method: one input, a stream of outputs. */
  serverStream(method: string, input: unknown, options?: CallOptions): ItemStream {
    return client.serverStream(this, method, input, options);
  }

  /** Calls a client-streaming method: send inputs, then `finish()` for the output. */
  clientStream(method: string, options?: CallOptions): ClientStream {
    return client.clientStream(this, method, options);
  }

  /** Calls a bidirectional method: send inputs, iterate outputs. */
  bidi(method: string, options?: CallOptions): BidiStream {
    return client.bidi(this, method, options);
  }

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

  /** Whether the connection has ended. */
  get isClosed(): boolean {
    return this.error !== null;
  }

  /** Where the connection goes, for logs. */
  get description(): string {
    return this.transport.description;
  }

  /** Closes the connection now: pending calls fail with `unavailable`, handlers are cancelled. */
  close(): void {
    this.die(new HubwireError("unavailable", "connection closed locally"));
  }

  /**
   * Drains, then closes: sends GOAWAY `ok` (the peer starts no new calls),
   * waits up to `graceMs` for the calls in flight either way to finish.
   */
  async drain(graceMs = 5000): Promise<void> {
    if (this.error !== null) return;
    this.draining = true;
    this.writer.status(FrameType.Goaway, this.lastPeerId, 0, 0, "draining", null);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, graceMs);
      this.idle = () => (clearTimeout(timer), resolve());
      this.checkIdle();
    });
    this.close();
  }

  /** @internal While draining: closes the drain once no call is left either way. */
  checkIdle(): void {
    if (this.idle !== null && (this.error !== null || (this.out.size === 0 && this.served.size === 0 && this.queue.size === 0))) {
      const idle = this.idle;
      this.idle = null;
      idle();
    }
  }

  /**
   * @internal Ends the connection: fails every pending call with `error`,
   * stops every handler, closes the transport. Idempotent.
   */
  die(error: HubwireError): void {
    if (this.error !== null) return;
    this.error = error;
    if (this.handshake !== null) {
      clearTimeout(this.handshake.timer);
      this.handshake.reject(error);
      this.handshake = null;
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
    for (const s of served) s.stop(error);
    this.pings.clear();
    this.writer.close();
    this.transport.close();
    this.checkIdle();
    this.resolveClosed(error);
  }
}
