/**
 * Calling a peer's methods: unary (raw or encoded), server streams,
 * client streams and bidirectional streams. Each call is an
 * {@link OutCall} in the connection's table; a deadline (`timeoutMs`) is
 * sent to the callee and enforced here too; aborting the call's signal,
 * `cancel()`, or leaving a `for await` early sends CANCEL.
 */

import { codeName } from "./codes.js";
import { codecValue, decode, encode } from "./codec.js";
import { HubwireError } from "./errors.js";
import { Codec, FrameType, type CodecName } from "./frame.js";
import { KIND } from "./hello.js";
import { ItemQueue, OutCall } from "./engine/calls.js";
import { CreditGate } from "./engine/credit.js";
import type { Core } from "./engine/state.js";

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

function encodeInput(codec: number, input: unknown): Uint8Array {
  try {
    return encode(codec, input);
  } catch (e) {
    if (e instanceof HubwireError) throw e;
    throw new HubwireError("invalid_argument", `cannot encode input: ${(e as Error).message}`);
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

/** The outputs of a server stream or a bidi call: an `AsyncIterable`. */
export class ItemStream implements AsyncIterable<unknown> {
  /** @internal */
  constructor(protected readonly call: StreamCall) {}

  /** The next output; `done` when the callee ended the stream with `ok`. Rejects with the call's error otherwise. */
  next(): Promise<IteratorResult<unknown>> {
    return this.call.recv!.next();
  }

  /** Abandons the call: CANCEL to the callee; reading on gives `cancelled`. */
  cancel(): void {
    this.call.core.abandon(this.call, new HubwireError("cancelled", "the call was cancelled by its caller"));
  }

  [Symbol.asyncIterator](): AsyncIterator<unknown> {
    return this.call.recv!;
  }
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
  return new ItemStream(call);
}

/** Sends the inputs of a client_stream or bidi call. */
class Inputs {
  constructor(
    private readonly call: OnceCall | StreamCall,
    private readonly codec: number,
  ) {
    call.send = new CreditGate(0);
  }

  /** Starts the call; its credit (the peer's window) arrives with the REQUEST. */
  begin(options?: CallOptions): void {
    this.call.core.begin(this.call, options?.timeoutMs, options?.signal);
  }

  async send(item: unknown): Promise<void> {
    const call = this.call;
    const gate = call.send!;
    if (gate.error !== null) throw gate.error;
    const payload = encodeInput(this.codec, item);
    if (payload.length > call.core.peer.max_frame) {
      const e = new HubwireError("too_large", `item of ${payload.length} bytes exceeds the peer's max_frame of ${call.core.peer.max_frame} bytes`);
      call.core.abandon(call, e);
      throw e;
    }
    const wait = gate.take();
    if (wait !== null) await wait;
    call.core.writer.item(call.id, this.codec, payload);
  }

  end(): void {
    const call = this.call;
    if (call.send!.error !== null) return;
    call.send!.close(new HubwireError("invalid_argument", "the inputs have ended (END was sent)"));
    // A call still queued for the peer's max_calls sends END after its REQUEST.
    if (call.id === 0) call.endPending = true;
    else call.core.writer.empty(FrameType.End, call.id);
  }
}

/** A client-streaming call: `send` inputs, then `finish()` for the single output. */
export class ClientStream {
  private readonly inputs: Inputs;

  /** @internal */
  constructor(private readonly call: OnceCall, codec: number, options?: CallOptions) {
    // The outcome may settle before anyone awaits it (an early answer).
    call.result.catch(() => {});
    this.inputs = new Inputs(call, codec);
    this.inputs.begin(options);
  }

  /** Sends one input, waiting for credit. Rejects once the call has ended (`finish()` then says how). */
  send(item: unknown): Promise<void> {
    return this.inputs.send(item);
  }

  /** Ends the inputs (END) and waits for the output. */
  finish(): Promise<unknown> {
    this.inputs.end();
    return this.call.result;
  }

  /** Waits for the output without ending the inputs (for methods that answer early). */
  response(): Promise<unknown> {
    return this.call.result;
  }

  /** Abandons the call: CANCEL to the callee. */
  cancel(): void {
    this.call.core.abandon(this.call, new HubwireError("cancelled", "the call was cancelled by its caller"));
  }
}

/** @internal `conn.clientStream`. */
export function clientStream(core: Core, method: string, options?: CallOptions): ClientStream {
  const codec = codecValue(options?.codec);
  const call = new OnceCall(core, KIND.clientStream, method, codec, EMPTY, codec === Codec.Raw);
  return new ClientStream(call, codec, options);
}

/** A bidirectional call: `send` inputs and `end()` them; iterate the outputs. */
export class BidiStream extends ItemStream {
  private readonly inputs: Inputs;

  /** @internal */
  constructor(call: StreamCall, codec: number, options?: CallOptions) {
    super(call);
    this.inputs = new Inputs(call, codec);
    this.inputs.begin(options);
  }

  /** Sends one input, waiting for credit. */
  send(item: unknown): Promise<void> {
    return this.inputs.send(item);
  }

  /** No more inputs (END). The outputs go on until the callee ends them. */
  end(): void {
    this.inputs.end();
  }
}

/** @internal `conn.bidi`. */
export function bidi(core: Core, method: string, options?: CallOptions): BidiStream {
  const codec = codecValue(options?.codec);
  const call = new StreamCall(core, KIND.bidi, method, codec, EMPTY, codec === Codec.Raw);
  return new BidiStream(call, codec, options);
}
