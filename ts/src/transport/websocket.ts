/**
 * WebSocket transport (`spec/PROTOCOL.md` §11.3): a page reaches a hub's
 * WebSocket listener with the same frames as on a socket. The byte stream
 * travels in binary messages offered under the subprotocol `hubwire.v1`;
 * each write goes out as one message (split at {@link MAX_MESSAGE}), and
 * what arrives is a byte stream whatever the message boundaries. A text
 * message is refused (close 1003); the end of the stream is a Close.
 *
 * Browsers have a global `WebSocket`, as has Node from 22; on Node 20 pass
 * a compatible class, such as the `ws` package's:
 * `websocket.connect(url, { WebSocket })`.
 */

import { DRAIN_MARK, type Transport, type TransportSink } from "./index.js";
import { concat } from "../bytes.js";

/** The subprotocol offered in `Sec-WebSocket-Protocol`; the hub requires it. */
export const SUBPROTOCOL = "hubwire.v1";

/** The largest message payload a peer sends or accepts (1 MiB); longer writes are split. */
export const MAX_MESSAGE = 1 << 20;

/** What this transport needs of a WebSocket: the WHATWG API (browsers, Node ≥ 22, the `ws` package). */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  readonly protocol: string;
  /** Bytes sent that the socket has not passed to the network yet. */
  readonly bufferedAmount: number;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: string, listener: (event: any) => void): void;
}

/** A `WebSocket` class: `new WebSocket(url, protocols)`. */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

/** Options of {@link connect}. */
export interface WebSocketOptions {
  /** The WebSocket class to use; default: the global `WebSocket`. */
  WebSocket?: WebSocketConstructor;
}

/** `readyState` values (the WHATWG constants). */
const CONNECTING = 0;
const OPEN = 1;

/**
 * How often `bufferedAmount` is looked at while it is above
 * {@link DRAIN_MARK}: the WebSocket API has no event for it draining.
 */
const DRAIN_POLL_MS = 5;

/** Close codes this transport sends (RFC 6455 §7.4.1). */
const NORMAL = 1000;
const UNSUPPORTED_DATA = 1003;

class WebSocketTransport implements Transport {
  private sink: TransportSink | null = null;
  private ended: string | null = null;
  /** Bytes that arrived before `start`, in order. */
  private early: Uint8Array[] = [];
  /** Messages written before the socket opened, sent once it does. */
  private earlyOut: Uint8Array[] = [];
  /** Their bytes. */
  private earlyOutBytes = 0;
  private wasOpen = false;
  /** Watches `bufferedAmount` fall back to 0 (to call `onDrain`), while it is above DRAIN_MARK. */
  private drainPoll: ReturnType<typeof setInterval> | null = null;

  constructor(
    private readonly ws: WebSocketLike,
    readonly description: string,
  ) {
    ws.binaryType = "arraybuffer";
    // Listeners from the start, so nothing is missed before `start`.
    ws.addEventListener("open", () => this.opened());
    ws.addEventListener("message", (ev: { data: unknown }) => this.received(ev.data));
    ws.addEventListener("close", (ev: { code?: number; reason?: string }) => {
      const why = `code ${ev.code ?? "?"}${ev.reason ? ` (${ev.reason})` : ""}`;
      if (!this.wasOpen) this.finish(`WebSocket to ${description} could not open: ${why}`);
      else this.finish(ev.code === NORMAL ? "connection closed by peer (end of stream)" : `WebSocket closed: ${why}`);
    });
    // A browser's error event says nothing; the close event that follows says why.
    ws.addEventListener("error", () => {});
  }

  start(sink: TransportSink): void {
    this.sink = sink;
    for (const b of this.early) sink.onData(b);
    this.early = [];
    if (this.ended !== null) sink.onEnd(this.ended);
  }

  private opened(): void {
    this.wasOpen = true;
    if (this.ws.protocol !== SUBPROTOCOL) {
      this.ws.close(NORMAL);
      this.finish(`the server at ${this.description} did not accept the subprotocol ${SUBPROTOCOL}`);
      return;
    }
    const early = this.earlyOut;
    this.earlyOut = [];
    this.earlyOutBytes = 0;
    for (const m of early) this.ws.send(m);
    this.watchDrain();
  }

  private received(data: unknown): void {
    if (this.ended !== null) return;
    let bytes: Uint8Array;
    if (data instanceof ArrayBuffer) bytes = new Uint8Array(data);
    else if (ArrayBuffer.isView(data)) bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    else {
      // A text message: the stream may have stopped mid-frame, so no GOAWAY.
      this.ws.close(UNSUPPORTED_DATA, "protocol_error: text message (hubwire travels in binary messages)");
      this.finish("protocol_error: the peer sent a text WebSocket message");
      return;
    }
    if (this.sink) this.sink.onData(bytes);
    else this.early.push(bytes);
  }

  private finish(reason: string): void {
    if (this.ended !== null) return;
    this.ended = reason;
    this.earlyOut = [];
    this.earlyOutBytes = 0;
    if (this.drainPoll !== null) clearInterval(this.drainPoll);
    this.drainPoll = null;
    this.sink?.onEnd(reason);
  }

  write(bytes: Uint8Array): void {
    // The view shares the writer's slab: copy it out into a buffer of its own.
    this.send(bytes.slice());
  }

  writev(segments: Uint8Array[]): void {
    this.send(concat(segments));
  }

  /** Sends `own` (ours to keep) as one message, or several of at most MAX_MESSAGE bytes. */
  private send(own: Uint8Array): void {
    if (this.ended !== null) return;
    for (let at = 0; at < own.length; at += MAX_MESSAGE) {
      const m = own.length <= MAX_MESSAGE ? own : own.subarray(at, at + MAX_MESSAGE);
      if (this.ws.readyState === OPEN) this.ws.send(m);
      else if (this.ws.readyState === CONNECTING) {
        this.earlyOut.push(m);
        this.earlyOutBytes += m.length;
      }
    }
    this.watchDrain();
  }

  /** Bytes written and not yet on the network: the browser's buffer, and what waits for the socket to open. */
  queued(): number {
    return (this.ws.bufferedAmount ?? 0) + this.earlyOutBytes;
  }

  /** Above DRAIN_MARK, polls until the buffer is empty, then calls the sink's `onDrain`. */
  private watchDrain(): void {
    if (this.drainPoll !== null || this.queued() <= DRAIN_MARK) return;
    this.drainPoll = setInterval(() => {
      if (this.queued() > 0) return;
      clearInterval(this.drainPoll!);
      this.drainPoll = null;
      this.sink?.onDrain?.();
    }, DRAIN_POLL_MS);
  }

  close(): void {
    if (this.ended !== null) return;
    // What was sent before goes out ahead of the Close frame.
    this.ws.close(NORMAL);
    this.finish("connection closed locally");
  }
}

/**
 * Opens a WebSocket to `url` (`ws://host:port/`, `wss://…` behind a TLS
 * proxy) offering {@link SUBPROTOCOL}, and returns its transport at once:
 * writes wait for the socket to open, and a socket that fails to open ends
 * the stream, so `Connection.dial(websocket.connect(url))` fails with
 * `unavailable` (or its handshake timeout).
 */
export function connect(url: string, options: WebSocketOptions = {}): Transport {
  const Ctor = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (!Ctor) {
    throw new TypeError("no global WebSocket here (Node 20): pass one, e.g. websocket.connect(url, { WebSocket }) with the ws package's");
  }
  return new WebSocketTransport(new Ctor(url, [SUBPROTOCOL]), url);
}
