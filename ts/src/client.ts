/**
 * Calling a peer's methods: unary (raw or encoded), server streams,
 * client streams and bidirectional streams. Each call is an
 * {@link OutCall} in the connection's table; a deadline (`timeoutMs`) is
 * sent to the callee and enforced here too; aborting the call's signal,
 * `cancel()`, or leaving a `for await` early sends CANCEL.
 *
 * The functions here take the engine's `Core`, not the `Connection`:
 * `Connection`'s methods delegate to them, so this file sits below
 * `connection.ts`.
 */

import { codeName } from "./codes.js";
import { codecValue, decode } from "./codec.js";
import { HubwireError } from "./errors.js";
import { Codec, type CodecName } from "./frame.js";
import { KIND } from "./hello.js";
import { ItemQueue, OutCall } from "./engine/calls.js";
import type { Core } from "./engine/state.js";
import { encodeInput, ItemSink, ItemStream } from "./stream.js";

/** Per-call options. */
export interface CallOptions {
  /** The codec of structured payloads: `"msgpack"` (default), `"json"`, or `"raw"` for `Uint8Array` in and out. */
  codec?: CodecName;
  /** Fail with `deadline_exceeded` after this many milliseconds; sent to the callee. */
  timeoutMs?: number;
  /** Aborting it cancels the call (CANCEL to the callee, `cancelled` here). */
  signal?: AbortSignal;
}

const EMPTY = new Uint8Array(0);

/** The error a non-ok RESPONSE stands for; a failure's value is decoded with its codec. */
export function responseError(code: number, message: string, codec: number, payload: Uint8Array): HubwireError {
  const name = codeName(code) ?? "protocol_error";
  if (name !== "failure") return new HubwireError(name, message);
  let value: unknown;
  try {
    value = payload.length === 0 ? undefined : decode(codec, payload);
  } catch (e) {
    return new HubwireError("internal", `cannot decode the failure value: ${(e as Error).message}`);
  }
  return new HubwireError("failure", message || "the method failed with a declared failure (see .failure)", value);
}

/** Decodes an output (or an item) as the caller asked: raw bytes stay bytes. */
function output(raw: boolean, codec: number, payload: Uint8Array): unknown {
  if (raw) return payload;
  try {
    return decode(codec, payload);
  } catch (e) {
    throw new HubwireError("internal", `cannot decode the response: ${(e as Error).message}`);
  }
}

/** A call whose outcome is one RESPONSE payload: unary and client_stream. */
class OnceCall extends OutCall {
  declare readonly core: Core;
  resolve!: (v: unknown) => void;
  reject!: (e: HubwireError) => void;
  readonly result: Promise<unknown>;

  constructor(core: Core, kind: number, method: string, codec: number, payload: Uint8Array, readonly raw: boolean) {
    super(core, kind, method, codec, payload);
    this.result = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }

  settle(code: number, message: string, codec: number, payload: Uint8Array): void {
    this.send?.close(new HubwireError("cancelled", "the call has ended; no more items can be sent"));
    if (code !== 0) return this.reject(responseError(code, message, codec, payload));
    try {
      this.resolve(output(this.raw, codec, payload));
    } catch (e) {
      this.reject(e as HubwireError);
    }
  }

  fail(error: HubwireError): void {
    this.send?.close(error);
    this.reject(error);
  }
}

/** A call whose outputs are ITEMs: server_stream and bidi. */
class StreamCall extends OutCall {
  declare readonly core: Core;

  constructor(core: Core, kind: number, method: string, codec: number, payload: Uint8Array, raw: boolean) {
    super(core, kind, method, codec, payload);
    const recv = new ItemQueue(core.local.window, (n) => core.grant(this.id, n));
    recv.decode = (c, p) => output(raw, c, p);
    recv.onReturn = () => core.abandon(this, new HubwireError("cancelled", "the caller stopped reading"));
    this.recv = recv;
  }

  settle(code: number, message: string, codec: number, payload: Uint8Array): void {
    this.send?.close(new HubwireError("cancelled", "the call has ended; no more items can be sent"));
    this.recv!.finish(code === 0 ? null : responseError(code, message, codec, payload));
  }

  fail(error: HubwireError): void {
    this.send?.close(error);
    this.recv!.finish(error);
  }
}

/** @internal `conn.call` and `conn.callRaw`. */
export function unary(core: Core, method: string, input: unknown, raw: boolean, options: CallOptions | undefined): Promise<unknown> {
  let codec: number = Codec.Raw;
  let payload: Uint8Array;
  try {
    if (!raw) {
      codec = codecValue(options?.codec);
      raw = codec === Codec.Raw;
    }
    payload = raw ? (input as Uint8Array) : encodeInput(codec, input);
    if (!(payload instanceof Uint8Array)) throw new HubwireError("invalid_argument", "a raw call takes a Uint8Array");
  } catch (e) {
    return Promise.reject(e);
  }
  const call = new OnceCall(core, KIND.unary, method, codec, payload, raw);
  core.begin(call, options?.timeoutMs, options?.signal);
  return call.result;
}

/** The caller gives up on `call`. */
function cancelled(call: OutCall): void {
  call.core.abandon(call, new HubwireError("cancelled", "the call was cancelled by its caller"));
}

/** @internal `conn.serverStream`. */
export function serverStream(core: Core, method: string, input: unknown, options?: CallOptions): ItemStream {
  let codec: number, payload: Uint8Array, error: HubwireError | null = null;
  try {
    codec = codecValue(options?.codec);
    payload = encodeInput(codec, input);
  } catch (e) {
    codec = Codec.Msgpack;
    payload = EMPTY;
    error = e as HubwireError;
  }
  const call = new StreamCall(core, KIND.serverStream, method, codec, payload, codec === Codec.Raw);
  if (error !== null) call.fail(error);
  else core.begin(call, options?.timeoutMs, options?.signal);
  return new ItemStream(call.recv!, () => cancelled(call));
}

/** A client-streaming call: `send` inputs, then `finish()` for the single output. */
export class ClientStream {
  /** The sending half: the inputs (`send`, `end`). */
  readonly sink: ItemSink;

  /** @internal */
  constructor(private readonly call: OnceCall, codec: number, options?: CallOptions) {
    // The outcome may settle before anyone awaits it (an early answer).
    call.result.catch(() => {});
    this.sink = new ItemSink(call.core, call, codec);
    call.core.begin(call, options?.timeoutMs, options?.signal);
  }

  /** Sends one input, waiting for credit. Rejects once the call has ended (`finish()` then says how). */
  send(item: unknown): Promise<void> {
    return this.sink.send(item);
  }

  /** Ends the inputs (END) and waits for the output. */
  finish(): Promise<unknown> {
    this.sink.end();
    return this.call.result;
  }

  /** Waits for the output without ending the inputs (for methods that answer early). */
  response(): Promise<unknown> {
    return this.call.result;
  }

  /** Abandons the call: CANCEL to the callee. */
  cancel(): void {
    cancelled(this.call);
  }
}

/** @internal `conn.clientStream`. */
export function clientStream(core: Core, method: string, options?: CallOptions): ClientStream {
  const codec = codecValue(options?.codec);
  const call = new OnceCall(core, KIND.clientStream, method, codec, EMPTY, codec === Codec.Raw);
  return new ClientStream(call, codec, options);
}

/** A bidirectional call: `send` inputs and `end()` them; iterate the outputs (the receiving half). */
export class BidiStream extends ItemStream {
  /** The sending half: the inputs (`send`, `end`). */
  readonly sink: ItemSink;

  /** @internal */
  constructor(call: StreamCall, codec: number, options?: CallOptions) {
    super(call.recv!, () => cancelled(call));
    this.sink = new ItemSink(call.core, call, codec);
    call.core.begin(call, options?.timeoutMs, options?.signal);
  }

  /** Sends one input, waiting for credit. */
  send(item: unknown): Promise<void> {
    return this.sink.send(item);
  }

  /** No more inputs (END). The outputs go on until the callee ends them. */
  end(): void {
    this.sink.end();
  }
}

/** @internal `conn.bidi`. */
export function bidi(core: Core, method: string, options?: CallOptions): BidiStream {
  const codec = codecValue(options?.codec);
  const call = new StreamCall(core, KIND.bidi, method, codec, EMPTY, codec === Codec.Raw);
  return new BidiStream(call, codec, options);
}
