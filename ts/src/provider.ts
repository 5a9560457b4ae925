/**
 * Offering methods: register handlers by name for each call kind, then
 * serve them on any transport. A handler returns its output (or a
 * promise of it); `fail(value)`, returned or thrown, is a declared
 * failure; a thrown `HubwireError` answers with its code; anything else
 * thrown is a `defect` of that call only.
 *
 * A {@link Provider} is a {@link Service}: the engine (`engine/serve.ts`)
 * hands it each call as an `Incoming`; the provider finds the method,
 * decodes the input, runs the handler and encodes its output. A handler
 * that answers synchronously is answered in the same tick as its REQUEST
 * arrived, without a promise: the raw echo costs one call.
 */

import { decode, encode } from "./codec.js";
import type { CallContext } from "./context.js";
import { Failure, HubwireError } from "./errors.js";
import { Codec } from "./frame.js";
import { KIND, KINDS, streamsIn, streamsOut, type MethodInfo } from "./hello.js";
import type { Incoming, Outcome, Service } from "./engine/serve.js";
import { Connection, type ConnectionOptions } from "./connection.js";
import { ItemStream } from "./stream.js";
import { DirectReporter } from "./direct_serve.js";
import type { Listener, Transport } from "./transport/index.js";

/** What a unary or client-stream handler may return. */
export type Answer<O> = O | Failure<unknown> | PromiseLike<O | Failure<unknown>>;
/** What a server-stream or bidi handler returns: the outputs (its return value may be a `Failure`). */
export type Outputs<O> = AsyncIterable<O> | Iterable<O>;

/** Per-method options. */
export interface MethodOptions {
  /** Raw bytes (`Uint8Array`, no encoding) for the input, the output, or both (`true`). */
  raw?: boolean | "input" | "output";
  /** JSON Schemas advertised in HELLO (`{}` when absent; `errors` only when given). */
  schema?: { input?: unknown; output?: unknown; errors?: unknown };
  /** One line saying what the method does (HELLO, `hubwire list`). */
  doc?: string;
}

/** @internal A registered method. */
export interface Method {
  info: MethodInfo;
  /** The wire kind (`KIND`). */
  kind: number;
  rawIn: boolean;
  rawOut: boolean;
  handler: (input: any, ctx: CallContext) => unknown;
  /** Calls handed to the handler so far (`served`). */
  calls: number;
}

const RAW_SCHEMA = { contentMediaType: "application/octet-stream" };

/** A set of methods under a name: the usual {@link Service}. */
export class Provider implements Service {
  /** @internal The methods by name. */
  readonly table = new Map<string, Method>();

  constructor(readonly name: string) {}

  /** @internal */
  add(name: string, kind: number, handler: Method["handler"], options: MethodOptions = {}): this {
    const len = new TextEncoder().encode(name).length;
    if (len < 1 || len > 255) throw new HubwireError("invalid_argument", `method name must be 1-255 bytes: ${JSON.stringify(name)}`);
    const rawIn = options.raw === true || options.raw === "input";
    const rawOut = options.raw === true || options.raw === "output";
    const info: MethodInfo = {
      name,
      kind: KINDS[kind]!,
      input: options.schema?.input ?? (rawIn ? RAW_SCHEMA : {}),
      output: options.schema?.output ?? (rawOut ? RAW_SCHEMA : {}),
    };
    if (options.schema?.errors !== undefined) info.errors = options.schema.errors;
    if (options.doc !== undefined) info.doc = options.doc;
    this.table.set(name, { info, kind, rawIn, rawOut, handler, calls: 0 });
    return this;
  }

  /** Registers a unary method: `handler(input, ctx)` returns the output. */
  unary<I = any, O = unknown>(name: string, handler: (input: I, ctx: CallContext) => Answer<O>, options?: MethodOptions): this {
    return this.add(name, KIND.unary, handler, options);
  }

  /** Registers a server-streaming method: `handler(input, ctx)` returns (or is a generator of) the outputs. */
  serverStream<I = any, O = unknown>(name: string, handler: (input: I, ctx: CallContext) => Outputs<O>, options?: MethodOptions): this {
    return this.add(name, KIND.serverStream, handler, options);
  }

  /** Registers a client-streaming method: `handler(items, ctx)` returns the output. */
  clientStream<I = any, O = unknown>(name: string, handler: (items: ItemStream<I>, ctx: CallContext) => Answer<O>, options?: MethodOptions): this {
    return this.add(name, KIND.clientStream, handler, options);
  }

  /** Registers a bidirectional method: `handler(items, ctx)` returns (or is a generator of) the outputs. */
  bidi<I = any, O = unknown>(name: string, handler: (items: ItemStream<I>, ctx: CallContext) => Outputs<O>, options?: MethodOptions): this {
    return this.add(name, KIND.bidi, handler, options);
  }

  /** Registers a method declared with `method()` (the typed layer): the handler's types come from its schemas. */
  implement<H>(def: { register(provider: Provider, handler: H): void }, handler: H): this {
    def.register(this, handler);
    return this;
  }

  /** The methods as HELLO lists them ({@link Service}). */
  methods(): MethodInfo[] {
    return [...this.table.values()].map((m) => m.info);
  }

  /**
   * Answers one call ({@link Service}): finds the method, decodes the
   * input, runs the handler, encodes its output; a stream handler's
   * outputs go out as ITEMs within the caller's credit.
   */
  call(incoming: Incoming): Outcome | PromiseLike<Outcome> {
    const name = incoming.method;
    const m = this.table.get(name);
    if (m === undefined) {
      throw new HubwireError("unknown_method", `unknown method ${JSON.stringify(name)}; offered: ${JSON.stringify([...this.table.keys()])}`);
    }
    const kind = incoming.kind;
    if (m.kind !== kind) throw new HubwireError("invalid_argument", `method ${JSON.stringify(name)} is ${KINDS[m.kind]}, called as ${KINDS[kind]}`);
    m.calls++;
    // The engine's Incoming has every field of a CallContext; `connection`
    // is the Connection the engine carries opaquely.
    const ctx = incoming as unknown as CallContext;
    let input: unknown;
    if (streamsIn(kind)) {
      const items = incoming.items!;
      items.decode = (c, p) => decodeIn(m, name, c, p);
      input = new ItemStream(items);
    } else input = decodeIn(m, name, incoming.codec, incoming.payload);
    const result = m.handler(input, ctx);
    if (streamsOut(kind)) return pump(incoming, m, result);
    if (result !== null && typeof result === "object" && typeof (result as PromiseLike<unknown>).then === "function") {
      return (result as PromiseLike<unknown>).then((v) => encodeOutput(m, incoming, v));
    }
    return encodeOutput(m, incoming, result);
  }

  /** Calls of `method` handed to its handler so far, on every connection (NATS discovery's STATS, `spec/PROTOCOL.md` §13.7). */
  served(method: string): number {
    return this.table.get(method)?.calls ?? 0;
  }

  /**
   * Serves these methods on every connection `listener` accepts (see
   * `unix.listen`, `tcp.listen`), each as the acceptor, until the listener
   * is closed: resolves then. A connection whose handshake fails is
   * dropped; the others live until they end.
   *
   * With `direct: true` (a listener a hub dials, `spec/PROTOCOL.md` §14):
   * we say `direct` to the hub, serve clients' direct connections on the
   * same listener, and report their calls to the hub (`hubwire.report`).
   */
  serve(listener: Listener, options: ConnectionOptions = {}): Promise<void> {
    if (options.direct !== true) return listener.accept((t) => void this.serveTransport(t, options).catch(() => {}));
    const reporter = new DirectReporter();
    const service = reporter.wrap(this);
    return listener.accept(
      (t) =>
        void Connection.accept(t, { name: this.name, ...options, service }).then(
          (c) => reporter.opened(c),
          () => {},
        ),
    );
  }

  /** Serves these methods on one transport as the acceptor (`Connection.accept` with this provider); resolves once the handshake is done. */
  serveTransport(transport: Transport, options: ConnectionOptions = {}): Promise<Connection> {
    return Connection.accept(transport, { name: this.name, ...options, service: this });
  }
}

/** The codec of a method's outputs and items: raw for raw outputs, else the request's (MessagePack when that was raw). */
function outCodec(m: Method, requestCodec: number): number {
  return m.rawOut ? Codec.Raw : requestCodec === Codec.Raw ? Codec.Msgpack : requestCodec;
}

/** An output or item as it goes on the wire (in {@link outCodec}); a `Failure` is thrown, to answer with it. */
function encodeOut(m: Method, codec: number, value: unknown): Uint8Array {
  if (m.rawOut && value instanceof Uint8Array) return value;
  if (value instanceof Failure) throw value;
  if (m.rawOut) throw new HubwireError("defect", `${m.info.name}: a raw method must produce a Uint8Array`);
  try {
    return encode(codec, value);
  } catch (e) {
    throw new HubwireError("defect", `output could not be encoded: ${(e as Error).message}`);
  }
}

/** A unary or client-stream handler's output as the RESPONSE's {@link Outcome}. */
function encodeOutput(m: Method, incoming: Incoming, value: unknown): Outcome {
  const codec = outCodec(m, incoming.codec);
  return { codec, bytes: encodeOut(m, codec, value) };
}

/** Decodes the unary or server-stream input, or an item. */
function decodeIn(m: Method, name: string, codec: number, payload: Uint8Array): unknown {
  if (m.rawIn) return payload;
  if (codec === Codec.Raw) {
    throw new HubwireError("invalid_argument", `${name}: takes a structured input (msgpack or json), got raw bytes`);
  }
  try {
    return decode(codec, payload);
  } catch (e) {
    throw new HubwireError("invalid_argument", `${name}: cannot decode input: ${(e as Error).message}`);
  }
}

/**
 * Sends a stream handler's outputs as ITEMs, each within the caller's
 * credit; then the empty `ok` (the outputs went out as ITEMs), or the
 * handler's returned `Failure`, thrown.
 */
async function pump(incoming: Incoming, m: Method, outputs: unknown): Promise<Outcome> {
  const source = (await outputs) as AsyncIterable<unknown> | Iterable<unknown>;
  const it: AsyncIterator<unknown> | Iterator<unknown> =
    typeof (source as AsyncIterable<unknown>)[Symbol.asyncIterator] === "function"
      ? (source as AsyncIterable<unknown>)[Symbol.asyncIterator]()
      : (source as Iterable<unknown>)[Symbol.iterator]();
  const codec = outCodec(m, incoming.codec);
  let finished = false;
  try {
    for (;;) {
      const r = await it.next();
      if (!incoming.live) return undefined;
      if (r.done) {
        finished = true;
        if (r.value instanceof Failure) throw r.value;
        return undefined;
      }
      const wait = incoming.sendItem(codec, encodeOut(m, codec, r.value));
      if (wait !== null) {
        await wait;
        if (!incoming.live) return undefined;
      }
    }
  } finally {
    // Stopped early (cancelled, or an error): let the generator clean up.
    if (!finished) await it.return?.();
  }
}
