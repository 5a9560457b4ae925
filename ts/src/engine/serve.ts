/**
 * The serving seam: what the engine hands a service, and everything the
 * protocol asks of a served call on the way (`spec/PROTOCOL.md` §5.2,
 * §7, §8). A {@link Service} lists its methods (for HELLO) and answers
 * each {@link Incoming} call with an {@link Outcome}: the RESPONSE's
 * payload, encoded. Methods, handlers, decoding and typed values are the
 * service's business (the `Provider` is one); the engine checks the
 * REQUEST against the connection (parity, duplicate ids, draining,
 * `max_calls`), registers the call, runs its deadline, catches what the
 * service throws and answers, in the same tick when the outcome is not a
 * promise: a synchronous raw echo allocates no promise.
 */

import { CODES } from "../codes.js";
import { encode } from "../codec.js";
import { Failure, HubwireError } from "../errors.js";
import { Codec, FrameType, messageBytes } from "../frame.js";
import { streamsIn, streamsOut, type MethodInfo, type PeerInfo } from "../hello.js";
import { CreditGate } from "./credit.js";
import { ItemQueue, ServedCall } from "./calls.js";
import type { Core } from "./state.js";

/** A payload as it travels: its codec (wire value, `Codec.*`) and its bytes. */
export interface Payload {
  codec: number;
  bytes: Uint8Array;
}

/**
 * What a served call ends with, when it ends well: the RESPONSE's payload,
 * or `undefined` for an empty `ok` (what stream kinds answer once their
 * outputs went out as ITEMs).
 */
export type Outcome = Payload | undefined;

/**
 * One served call, as the engine hands it to a service. It is also what a
 * `Provider` hands its handlers as their `CallContext` (`connection` is
 * then the public `Connection`).
 */
export interface Incoming {
  /** The method called. */
  readonly method: string;
  /** The call kind (wire value, `KIND.*`). */
  readonly kind: number;
  /** The call's id on this connection. */
  readonly callId: number;
  /** The REQUEST's codec (wire value); a structured answer uses it (MessagePack when it was raw). */
  readonly codec: number;
  /** The REQUEST's payload (empty when the caller streams inputs). */
  readonly payload: Uint8Array;
  /** When the caller stops waiting (epoch ms), or `undefined` for no deadline. */
  readonly deadline: number | undefined;
  /** Aborts when the call is cancelled: the caller's CANCEL, the deadline, or the connection lost. */
  readonly signal: AbortSignal;
  /** Whether the call was cancelled (without making the signal). */
  readonly cancelled: boolean;
  /** Whether the call is still live: not answered, cancelled or lost. */
  readonly live: boolean;
  /** Who the caller is (from its HELLO). */
  readonly peer: PeerInfo;
  /** The API object of the connection the call came on (the public `Connection`), opaque to the engine. */
  readonly connection: unknown;
  /**
   * The caller's ITEMs (client_stream, bidi; else `null`). Each is read as
   * `{ codec, bytes }` unless the service sets `items.decode`; credit goes
   * back as they are read.
   */
  readonly items: ItemQueue | null;
  /**
   * Sends one output ITEM (server_stream, bidi) within the caller's credit:
   * at once when there is credit (returns `null`), else a promise that
   * settles once it is sent. Throws or rejects once the call has ended,
   * and with `too_large` over the peer's `max_frame`.
   */
  sendItem(codec: number, payload: Uint8Array): Promise<void> | null;
}

/** Methods offered on a connection, and how each call of them is answered. */
export interface Service {
  /** The methods, as HELLO lists them (read once, when a connection opens). */
  methods(): MethodInfo[];
  /**
   * Answers one call: its outcome, or a promise of it. Throwing (or
   * rejecting) answers with that error: a `HubwireError` keeps its code, a
   * `Failure` is the method's declared `failure` (its value encoded in the
   * request's codec, MessagePack when that was raw), anything else is a
   * `defect` of this call only.
   */
  call(incoming: Incoming): Outcome | PromiseLike<Outcome>;
}

const EMPTY: Uint8Array = new Uint8Array(0);

/** A REQUEST arrived: check it against the connection, register it, hand it to the service, answer. */
export function serveRequest(
  core: Core,
  service: Service | undefined,
  id: number,
  kind: number,
  codec: number,
  timeoutMs: number,
  method: string,
  payload: Uint8Array,
): void {
  if (core.ours(id)) throw new HubwireError("protocol_error", `REQUEST with call id ${id} of the receiver's parity`);
  if (service === undefined) return refuse(core, id, CODES.unknown_method, `unknown method ${JSON.stringify(method)}; offered: []`);
  if (core.served.has(id)) throw new HubwireError("protocol_error", `REQUEST for call id ${id}, which is already live`);
  core.lastPeerId = id; // the latest, not the numerically largest: ids wrap (§5.10)
  if (core.draining) return refuse(core, id, CODES.unavailable, "provider is draining (GOAWAY); retry elsewhere");
  if (core.served.size >= core.local.max_calls) {
    return refuse(core, id, CODES.resource_exhausted, `too many calls in flight: the limit (max_calls) is ${core.local.max_calls}`);
  }
  const s = new ServedCall(core, id, kind, method, codec, payload);
  core.served.set(id, s);
  if (timeoutMs > 0) {
    s.deadline = Date.now() + timeoutMs;
    s.timer = setTimeout(onServedDeadline, timeoutMs, core, s);
  }
  if (streamsIn(kind)) s.items = new ItemQueue(core.local.window, (n) => core.grant(id, n));
  if (streamsOut(kind)) s.sendCredit = new CreditGate(core.peer.window);
  let out: Outcome | PromiseLike<Outcome>;
  try {
    out = service.call(s);
  } catch (e) {
    return fail(core, s, e);
  }
  // `!= null`: a JavaScript service may answer `null` for the empty ok.
  if (out != null && typeof (out as PromiseLike<Outcome>).then === "function") {
    (out as PromiseLike<Outcome>).then(
      (o) => answer(core, s, o),
      (e) => fail(core, s, e),
    );
  } else answer(core, s, out as Outcome);
}

/** Answers a REQUEST it will not serve. */
function refuse(core: Core, id: number, code: number, message: string): void {
  core.writer.status(FrameType.Response, id, Codec.Raw, code, message, null);
}

function onServedDeadline(core: Core, s: ServedCall): void {
  s.timer = undefined;
  endWith(core, s, new HubwireError("deadline_exceeded", "deadline exceeded in the handler"));
}

/** The service answered: RESPONSE `ok` with its outcome (nothing if the call has ended meanwhile). */
function answer(core: Core, s: ServedCall, out: Outcome): void {
  if (!s.live) return;
  let codec: number = Codec.Raw;
  let bytes = EMPTY;
  if (out != null) {
    if (!(out.bytes instanceof Uint8Array)) return fail(core, s, new HubwireError("defect", `${s.method}: the service's outcome has no bytes`));
    codec = out.codec;
    bytes = out.bytes;
  }
  core.forget(s);
  s.close(null, null);
  respond(core, s.callId, CODES.ok, "", codec, bytes);
}

/** The service threw (or rejected): answer with what that means for the caller. */
function fail(core: Core, s: ServedCall, e: unknown): void {
  if (!core.forget(s)) return;
  const err = toError(e);
  s.close(null, err);
  respondError(core, s, err);
}

/**
 * The call ends without an answer (the caller's CANCEL): out of the
 * table, its streams end with `reason`, the service sees its signal abort.
 */
export function stopServed(core: Core, s: ServedCall, reason: HubwireError): void {
  if (!core.forget(s)) return;
  s.close(reason, reason);
  s.cancel(reason);
}

/** Answers with an error now (the deadline, a flow-control overrun) and stops the service's work. */
export function endWith(core: Core, s: ServedCall, error: HubwireError): void {
  if (!s.live) return;
  stopServed(core, s, error);
  respondError(core, s, error);
}

/** What a thrown value means for the caller. */
function toError(e: unknown): HubwireError {
  if (e instanceof Failure) return new HubwireError("failure", "", e.value);
  if (e instanceof HubwireError) return e;
  const detail = e instanceof Error ? e.message : String(e);
  return new HubwireError("defect", `handler threw: ${detail}`);
}

/** RESPONSE with an error; a failure's value goes in the request's codec (MessagePack when that was raw). */
function respondError(core: Core, s: ServedCall, err: HubwireError): void {
  if (err.code !== "failure") return respond(core, s.callId, CODES[err.code], err.message, Codec.Raw, EMPTY);
  const codec = s.codec === Codec.Raw ? Codec.Msgpack : s.codec;
  let payload: Uint8Array;
  try {
    payload = err.failure === undefined ? EMPTY : encode(codec, err.failure);
  } catch (e) {
    return respond(core, s.callId, CODES.defect, `failure value could not be encoded: ${(e as Error).message}`, Codec.Raw, EMPTY);
  }
  respond(core, s.callId, CODES.failure, err.message, codec, payload);
}

/** Writes a RESPONSE, or `too_large` in its place when it would exceed the caller's `max_frame`. */
function respond(core: Core, id: number, code: number, message: string, codec: number, payload: Uint8Array): void {
  const max = core.peer.max_frame;
  const body = 3 + (message.length === 0 ? 0 : messageBytes(message).length) + payload.length;
  if (body > max) {
    const msg = `response of ${body} bytes exceeds the caller's max_frame of ${max} bytes`;
    core.writer.status(FrameType.Response, id, Codec.Raw, CODES.too_large, msg, null);
    return;
  }
  core.writer.status(FrameType.Response, id, codec, code, message, payload);
}
