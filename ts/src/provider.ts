/**
 * Offering methods: register handlers by name for each call kind, then
 * serve them on any transport. A handler returns its output (or a
 * promise of it); `fail(value)`, returned or thrown, is a declared
 * failure; a thrown `HubwireError` answers with its code; anything else
 * thrown is a `defect` of that call only.
 *
 * A handler that answers synchronously is answered in the same tick as
 * its REQUEST arrived, without a promise: the raw echo costs one call.
 */

import { CODES } from "./codes.js";
import { decode, encode } from "./codec.js";
import { Cancellation, type CallContext } from "./context.js";
import { Failure, HubwireError } from "./errors.js";
import { Codec, FrameType, messageBytes } from "./frame.js";
import { KIND, KINDS, streamsIn, streamsOut, type MethodInfo, type PeerInfo } from "./hello.js";
import { ItemQueue } from "./stream.js";
import { CreditGate } from "./engine/credit.js";
import { Connection, type ConnectionOptions } from "./connection.js";
import type { Transport } from "./transport/index.js";

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
  kind: number;
  rawIn: boolean;
  rawOut: boolean;
  handler: (input: any, ctx: CallContext) => unknown;
}

const RAW_SCHEMA = { contentMediaType: "application/octet-stream" };

/** A set of methods under a name. */
export class Provider {
  /** @internal */
  readonly methods = new Map<string, Method>();

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
    this.methods.set(name, { info, kind, rawIn, rawOut, handler });
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
  clientStream<I = any, O = unknown>(name: string, handler: (items: AsyncIterable<I>, ctx: CallContext) => Answer<O>, options?: MethodOptions): this {
    return this.add(name, KIND.clientStream, handler, options);
  }

  /** Registers a bidirectional method: `handler(items, ctx)` returns (or is a generator of) the outputs. */
  bidi<I = any, O = unknown>(name: string, handler: (items: AsyncIterable<I>, ctx: CallContext) => Outputs<O>, options?: MethodOptions): this {
    return this.add(name, KIND.bidi, handler, options);
  }

  /** Registers a method declared with `method()` (the typed layer): the handler's types come from its schemas. */
  implement<H>(def: { register(provider: Provider, handler: H): void }, handler: H): this {
    def.register(this, handler);
    return this;
  }

  /** @internal The methods as HELLO lists them. */
  methodInfos(): MethodInfo[] {
    return [...this.methods.values()].map((m) => m.info);
  }

  /** Serves these methods on `transport` as the acceptor (`Connection.accept` with this provider). */
  serve(transport: Transport, options: ConnectionOptions = {}): Promise<Connection> {
    return Connection.accept(transport, { name: this.name, ...options, provider: this });
  }
}

/** @internal A call this side serves; also the handler's {@link CallContext}. */
export class ServedCall extends Cancellation implements CallContext {
  /** The caller's ITEMs (client_stream, bidi). */
  items: ItemQueue | null = null;
  /** Credit for our ITEMs (server_stream, bidi). */
  sendCredit: CreditGate | null = null;
  timer: ReturnType<typeof setTimeout> | undefined = undefined;
  deadline: number | undefined = undefined;

  constructor(
    readonly conn: Connection,
    readonly callId: number,
    readonly m: Method,
    /** The request's codec; answers use it (MessagePack when it was raw). */
    readonly codec: number,
  ) {
    super();
  }

  get method(): string {
    return this.m.info.name;
  }

  get peer(): PeerInfo {
    return this.conn.peer.peer;
  }

  get connection(): Connection {
    return this.conn;
  }

  /** Whether the call is still live (not answered, cancelled or lost). */
  get live(): boolean {
    return this.conn.served.get(this.callId) === this;
  }

  /** Forgets the call. */
  private leave(): void {
    this.conn.served.delete(this.callId);
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.conn.draining) this.conn.checkIdle();
  }

  /** The call ends without an answer (CANCEL, connection lost): the handler sees its signal abort. */
  stop(reason: HubwireError): void {
    this.leave();
    this.items?.finish(reason);
    this.sendCredit?.close(reason);
    this.cancel(reason);
  }

  /** Answers with an error now (deadline, flow-control overrun) and stops the handler. */
  finishWith(error: HubwireError): void {
    if (!this.live) return;
    this.stop(error);
    this.respondError(error);
  }

  /** The handler produced `value` (the output, or a `Failure`). */
  answer(value: unknown): void {
    if (!this.live) return;
    let payload: Uint8Array;
    try {
      payload = this.encodeOut(value);
    } catch (e) {
      return this.error(e);
    }
    this.leave();
    this.items?.finish(null);
    this.sendCredit?.close(new HubwireError("cancelled", "the call has ended"));
    this.respond(0, "", this.outCodec, payload);
  }

  /** A stream handler ended: RESPONSE `ok` with no payload. */
  done(): void {
    if (!this.live) return;
    this.leave();
    this.items?.finish(null);
    this.sendCredit?.close(new HubwireError("cancelled", "the call has ended"));
    this.respond(0, "", Codec.Raw, EMPTY);
  }

  /** The handler threw (or returned a `Failure`). */
  error(e: unknown): void {
    if (!this.live) return;
    this.leave();
    this.items?.finish(null);
    const err = toError(e);
    this.sendCredit?.close(err);
    this.respondError(err);
  }

  /** The codec of outputs and items: raw for raw outputs, else the request's (MessagePack when that was raw). */
  get outCodec(): number {
    return this.m.rawOut ? Codec.Raw : this.codec === Codec.Raw ? Codec.Msgpack : this.codec;
  }

  /** @internal An output or item as it goes on the wire (in {@link outCodec}); a `Failure` is thrown. */
  encodeOut(value: unknown): Uint8Array {
    if (this.m.rawOut && value instanceof Uint8Array) return value;
    if (value instanceof Failure) throw value;
    if (this.m.rawOut) throw new HubwireError("defect", `${this.method}: a raw method must produce a Uint8Array`);
    try {
      return encode(this.outCodec, value);
    } catch (e) {
      throw new HubwireError("defect", `output could not be encoded: ${(e as Error).message}`);
    }
  }

  private respondError(err: HubwireError): void {
    if (err.code !== "failure") return this.respond(CODES[err.code], err.message, Codec.Raw, EMPTY);
    const codec = this.codec === Codec.Raw ? Codec.Msgpack : this.codec;
    let payload: Uint8Array;
    try {
      payload = err.failure === undefined ? EMPTY : encode(codec, err.failure);
    } catch (e) {
      return this.respond(CODES.defect, `failure value could not be encoded: ${(e as Error).message}`, Codec.Raw, EMPTY);
    }
    this.respond(CODES.failure, err.message, codec, payload);
  }

  private respond(code: number, message: string, codec: number, payload: Uint8Array): void {
    const conn = this.conn;
    const max = conn.peer.max_frame;
    const body = 3 + (message.length === 0 ? 0 : messageBytes(message).length) + payload.length;
    if (body > max) {
      const msg = `response of ${body} bytes exceeds the caller's max_frame of ${max} bytes`;
      conn.writer.status(FrameType.Response, this.callId, Codec.Raw, CODES.too_large, msg, null);
      return;
    }
    conn.writer.status(FrameType.Response, this.callId, codec, code, message, payload);
  }

  /** Decodes the unary or server-stream input, or an item. */
  decodeIn(codec: number, payload: Uint8Array): unknown {
    if (this.m.rawIn) return payload;
    if (codec === Codec.Raw) {
      throw new HubwireError("invalid_argument", `${this.method}: takes a structured input (msgpack or json), got raw bytes`);
    }
    try {
      return decode(codec, payload);
    } catch (e) {
      throw new HubwireError("invalid_argument", `${this.method}: cannot decode input: ${(e as Error).message}`);
    }
  }
}

const EMPTY = new Uint8Array(0);

/** What a thrown value means for the caller. */
function toError(e: unknown): HubwireError {
  if (e instanceof Failure) return new HubwireError("failure", "", e.value);
  if (e instanceof HubwireError) return e;
  const detail = e instanceof Error ? e.message : String(e);
  return new HubwireError("defect", `handler threw: ${detail}`);
}

function onServedDeadline(s: ServedCall): void {
  s.timer = undefined;
  s.finishWith(new HubwireError("deadline_exceeded", "deadline exceeded in the handler"));
}

/** Answers a REQUEST it will not run. */
function refuse(conn: Connection, id: number, code: number, message: string): void {
  conn.writer.status(FrameType.Response, id, Codec.Raw, code, message, null);
}

/** @internal A REQUEST arrived: check it, register it, run its handler. */
export function onRequest(conn: Connection, id: number, kind: number, codec: number, timeoutMs: number, name: string, payload: Uint8Array): void {
  const m = conn.provider?.methods.get(name);
  if (m === undefined) {
    const offered = conn.provider ? [...conn.provider.methods.keys()] : [];
    return refuse(conn, id, CODES.unknown_method, `unknown method ${JSON.stringify(name)}; offered: ${JSON.stringify(offered)}`);
  }
  if (m.kind !== kind) return refuse(conn, id, CODES.invalid_argument, `method ${JSON.stringify(name)} is ${KINDS[m.kind]}, called as ${KINDS[kind]}`);
  if (conn.served.has(id)) throw new HubwireError("protocol_error", `REQUEST for call id ${id}, which is already live`);
  if (id > conn.lastPeerId) conn.lastPeerId = id;
  if (conn.draining) return refuse(conn, id, CODES.unavailable, "provider is draining (GOAWAY); retry elsewhere");
  if (conn.served.size >= conn.local.max_calls) {
    return refuse(conn, id, CODES.resource_exhausted, `too many calls in flight: the limit (max_calls) is ${conn.local.max_calls}`);
  }
  const s = new ServedCall(conn, id, m, codec);
  conn.served.set(id, s);
  if (timeoutMs > 0) {
    s.deadline = Date.now() + timeoutMs;
    s.timer = setTimeout(onServedDeadline, timeoutMs, s);
  }
  const inputs = streamsIn(kind);
  const outputs = streamsOut(kind);
  if (inputs) s.items = new ItemQueue(conn.local.window, (n) => conn.grant(id, n), (c, p) => s.decodeIn(c, p));
  if (outputs) s.sendCredit = new CreditGate(conn.peer.window);
  let result: unknown;
  try {
    result = m.handler(inputs ? s.items : s.decodeIn(codec, payload), s);
  } catch (e) {
    return s.error(e);
  }
  if (!outputs) {
    if (result !== null && typeof result === "object" && typeof (result as PromiseLike<unknown>).then === "function") {
      (result as PromiseLike<unknown>).then(
        (v) => s.answer(v),
        (e) => s.error(e),
      );
    } else s.answer(result);
  } else {
    // The outputs went out as ITEMs: the RESPONSE carries none.
    pump(s, result).then(
      (v) => (v instanceof Failure ? s.error(v) : s.done()),
      (e) => s.error(e),
    );
  }
}

/** Sends a stream handler's outputs as ITEMs, each within the caller's credit; resolves with its return value. */
async function pump(s: ServedCall, outputs: unknown): Promise<unknown> {
  const source = (await outputs) as AsyncIterable<unknown> | Iterable<unknown>;
  const it: AsyncIterator<unknown> | Iterator<unknown> =
    typeof (source as AsyncIterable<unknown>)[Symbol.asyncIterator] === "function"
      ? (source as AsyncIterable<unknown>)[Symbol.asyncIterator]()
      : (source as Iterable<unknown>)[Symbol.iterator]();
  let finished = false;
  try {
    for (;;) {
      const r = await it.next();
      if (!s.live) return undefined;
      if (r.done) {
        finished = true;
        return r.value instanceof Failure ? r.value : undefined;
      }
      const payload = s.encodeOut(r.value);
      const max = s.conn.peer.max_frame;
      if (payload.length > max) throw new HubwireError("too_large", `item of ${payload.length} bytes exceeds the peer's max_frame of ${max} bytes`);
      const wait = s.sendCredit!.take();
      if (wait !== null) await wait;
      if (!s.live) return undefined;
      s.conn.writer.item(s.callId, s.outCodec, payload);
    }
  } finally {
    // Stopped early (cancelled, or an error): let the generator clean up.
    if (!finished) await it.return?.();
  }
}
