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
  /** As the dialer: the token sent in our HELLO (`spec/PROTOCOL.md` §4.4). */
  token?: string;
  /**
   * As the acceptor: the token dialers must send. Without it (or with
   * another) they get GOAWAY `unauthenticated`, and never our HELLO.
   */
  requireToken?: string;
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
  return fitHello(hello);
}

/** A live connection to a peer: call its methods, and serve ours to it. */
export class Connection {
  /** @internal The protocol state behind this connection. */
  readonly core: Core;

  private constructor(transport: Transport, options: ConnectionOptions, dialer: boolean) {
    this.core = new Core(transport, dialer, localHello(options, dialer));
    // Carried opaquely by the engine, so a handler's context can call back.
    this.core.connection = this;
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
    return client.unary(this.core, method, input, true, options) as Promise<Uint8Array>;
  }

  /** A unary call; the input is encoded with `options.codec` (MessagePack unless set). */
  call(method: string, input: unknown, options?: CallOptions): Promise<unknown> {
    return client.unary(this.core, method, input, false, options);
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
