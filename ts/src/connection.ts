/**
 * A connection: one transport, one handshake, many calls both ways.
 *
 * {@link Connection} is the public face of the engine's `Core`
 * (`engine/state.ts`): {@link Connection.dial} and
 * {@link Connection.accept} build one and run the handshake
 * (`engine/handshake.ts`); the calls delegate to `client.ts`, which works
 * on the Core; the methods we offer are a {@link Service} (usually a
 * `Provider`), which the engine runs (`engine/serve.ts`).
 */

import { HubwireError } from "./errors.js";
import { VERSION } from "./frame.js";
import { DEFAULT_MAX_CALLS, DEFAULT_MAX_FRAME, DEFAULT_WINDOW, fitHello, SDK_VERSION, type Hello } from "./hello.js";
import { Core } from "./engine/state.js";
import { open } from "./engine/handshake.js";
import type { Service } from "./engine/serve.js";
import * as client from "./client.js";
import { DirectRoutes, neverSent } from "./direct.js";
import type { BidiStream, CallOptions, ClientStream } from "./client.js";
import type { ItemStream } from "./stream.js";
import type { Transport } from "./transport/index.js";

/** How a connection presents itself and the limits it sets. */
export interface ConnectionOptions {
  /** Our name in the peer's logs and listings (default `"ts"`). */
  name?: string;
  /** The methods we offer on this connection, if any: a `Provider`, or any {@link Service}. */
  service?: Service;
  /** The largest frame body we accept (default 16 MiB). */
  maxFrame?: number;
  /** Initial credit we grant per incoming stream (default 64). */
  window?: number;
  /** Calls we serve at once before answering `resource_exhausted` (default 4096). */
  maxCalls?: number;
  /** How long to wait for the peer's HELLO (default 10 s). */
  handshakeTimeoutMs?: number;
  /**
   * Frame bytes queued for the peer and not yet taken by it (default
   * 4 MiB, at least 64 KiB): what our writer holds plus what the
   * transport still buffers (a Node socket buffers every write, without
   * limit). Above it we stop reading the peer's new calls and PINGs (its
   * writes then stop at its full socket) and stream senders wait; answers
   * to calls already running still queue, bounded by our `maxCalls`.
   * ITEMs, CREDIT, answers and CANCEL are still read.
   */
  writeQueue?: number;
  /**
   * How long the queue may stay above `writeQueue` while a new call waits
   * to be read (default 30 s), before the connection is closed with
   * GOAWAY `resource_exhausted`.
   */
  writeStallTimeoutMs?: number;
  /** As the dialer: the token sent in our HELLO (`spec/PROTOCOL.md` §4.4). */
  token?: string;
  /**
   * As the acceptor: the token dialers must send. Without it (or with
   * another) they get GOAWAY `unauthenticated`, and never our HELLO.
   */
  requireToken?: string;
  /**
   * The direct path through a hub (`spec/PROTOCOL.md` §14; off by
   * default). We send `direct` in our HELLO. As a client dialling a hub
   * that sent it too, unary calls of a provider the hub reaches at an
   * address (a dialled provider) go over a connection straight to its
   * replica once the hub has handed it over; they fall back to the hub
   * when it drains or ends. As a provider served on a listener the hub
   * dials (`provider.serve(listener, { direct: true })`), we serve
   * clients' direct connections and report their calls to the hub.
   * Node cannot receive descriptors, so a spawned provider's path
   * (`via: fd`) is never taken.
   */
  direct?: boolean;
}

export { SDK_VERSION } from "./hello.js";

/** Our HELLO, from the options. */
function localHello(options: ConnectionOptions, dialer: boolean): Hello {
  const hello: Hello = {
    versions: [VERSION],
    peer: { name: options.name ?? "ts", lang: "ts", version: SDK_VERSION },
    max_frame: options.maxFrame ?? DEFAULT_MAX_FRAME,
    window: Math.max(1, options.window ?? DEFAULT_WINDOW),
    max_calls: Math.max(1, options.maxCalls ?? DEFAULT_MAX_CALLS),
    methods: options.service?.methods() ?? [],
  };
  // Only a dialer sends a token (§4.4).
  if (dialer && options.token !== undefined) hello.token = options.token;
  if (options.direct === true) hello.direct = 1;
  return fitHello(hello);
}

/** A live connection to a peer: call its methods, and serve ours to it. */
export class Connection {
  /** @internal The protocol state behind this connection. */
  readonly core: Core;
  /** As a client with `direct`: the direct connections, by method (§14). */
  private readonly routes: DirectRoutes | undefined;

  private constructor(transport: Transport, options: ConnectionOptions, dialer: boolean) {
    this.core = new Core(transport, dialer, localHello(options, dialer), options.writeQueue, options.writeStallTimeoutMs);
    // Carried opaquely by the engine, so a handler's context can call back.
    this.core.connection = this;
    if (dialer && options.direct === true) {
      // A direct connection is dialled with our options, minus the direct path, any service and the hub's token.
      const { direct: _, service: __, token: ___, ...rest } = options;
      this.routes = new DirectRoutes(this, (t, token) => Connection.dial(t, { ...rest, ...(token === undefined ? {} : { token }) }));
    }
  }

  /** Opens a connection as the dialer (odd call ids): HELLOs both ways, then ready. */
  static dial(transport: Transport, options: ConnectionOptions = {}): Promise<Connection> {
    return new Connection(transport, options, true).open(options);
  }

  /** Opens a connection as the acceptor (even call ids). */
  static accept(transport: Transport, options: ConnectionOptions = {}): Promise<Connection> {
    return new Connection(transport, options, false).open(options);
  }

  private async open(options: ConnectionOptions): Promise<Connection> {
    const gate = this.core.dialer ? undefined : options.requireToken;
    await open(this.core, options.service, options.handshakeTimeoutMs ?? 10_000, gate);
    return this;
  }

  /** The peer's HELLO: identity, limits, methods (set once the handshake is done). */
  get peer(): Hello {
    return this.core.peer;
  }

  /** Resolves with why, when the connection has ended. */
  get closed(): Promise<HubwireError> {
    return this.core.closed;
  }

  /** The transport this connection runs on. */
  get transport(): Transport {
    return this.core.transport;
  }

  /** Whether we opened the connection (our call ids are odd). */
  get dialer(): boolean {
    return this.core.dialer;
  }

  /** A unary call with raw bytes in and out: no serialization at all. */
  callRaw(method: string, input: Uint8Array, options?: CallOptions): Promise<Uint8Array> {
    return this.unary(method, input, true, options) as Promise<Uint8Array>;
  }

  /** A unary call; the input is encoded with `options.codec` (MessagePack unless set). */
  call(method: string, input: unknown, options?: CallOptions): Promise<unknown> {
    return this.unary(method, input, false, options);
  }

  /**
   * A unary call over the direct connection for `method` if there is one;
   * one the replica never saw (it was draining) is started again here,
   * through the hub, so no call is lost to a drain (§14.6).
   */
  private unary(method: string, input: unknown, raw: boolean, options: CallOptions | undefined): Promise<unknown> {
    const direct = this.routes?.route(method);
    if (direct === undefined) return client.unary(this.core, method, input, raw, options);
    return client.unary(direct.core, method, input, raw, options).catch((e: unknown) => {
      if (neverSent(e)) return client.unary(this.core, method, input, raw, options);
      throw e;
    });
  }

  /** As a client with `direct`: how many methods are routed over a live direct connection now. */
  get directRoutesLive(): number {
    return this.routes?.live ?? 0;
  }

  /** Calls a server-streaming method: one input, a stream of outputs. */
  serverStream(method: string, input: unknown, options?: CallOptions): ItemStream {
    return client.serverStream(this.core, method, input, options);
  }

  /** Calls a client-streaming method: send inputs, then `finish()` for the output. */
  clientStream(method: string, options?: CallOptions): ClientStream {
    return client.clientStream(this.core, method, options);
  }

  /** Calls a bidirectional method: send inputs, iterate outputs. */
  bidi(method: string, options?: CallOptions): BidiStream {
    return client.bidi(this.core, method, options);
  }

  /** Round-trip time of a PING, in milliseconds. */
  ping(): Promise<number> {
    return this.core.ping();
  }

  /** Whether the connection has ended. */
  get isClosed(): boolean {
    return this.core.error !== null;
  }

  /** Where the connection goes, for logs. */
  get description(): string {
    return this.core.transport.description;
  }

  /** Closes the connection now: pending calls fail with `unavailable`, handlers are cancelled. */
  close(): void {
    this.core.die(new HubwireError("unavailable", "connection closed locally"));
  }

  /**
   * Drains, then closes: sends GOAWAY `ok` (the peer starts no new calls),
   * waits up to `graceMs` for the calls in flight either way to finish.
   */
  drain(graceMs = 5000): Promise<void> {
    return this.core.drain(graceMs);
  }
}
