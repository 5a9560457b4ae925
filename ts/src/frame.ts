/**
 * Frames (`spec/PROTOCOL.md` §2, §5): pure, bytes in and frames out, no I/O.
 *
 * The reader's hot path never builds a frame object: {@link Decoder.check}
 * looks at a 12-byte header alone (refusing a bad version, an oversized
 * body, an unknown type or codec, a misplaced call id before the body
 * arrives) and says how long the frame is; {@link Decoder.parse} then hands
 * the body's fields to a {@link FrameVisitor}, with payloads as subarrays of
 * the read buffer (no copy). {@link decodeFrame} and {@link encodeFrame}
 * build and take plain objects, for tests and tools.
 */

import { codeName, CODES, type CodeName } from "./codes.js";
import { HubwireError } from "./errors.js";
import { DEFAULT_MAX_FRAME, encodeHello, KINDS, parseHello, streamsIn, type Hello, type Kind } from "./hello.js";

/** Length of the fixed frame header. */
export const HEADER_LEN = 12;
/** The protocol version this implementation speaks. */
export const VERSION = 1;

/** Frame type bytes. */
export const FrameType = {
  Hello: 0x01,
  Request: 0x02,
  Response: 0x03,
  Item: 0x04,
  End: 0x05,
  Cancel: 0x06,
  Credit: 0x07,
  Ping: 0x08,
  Pong: 0x09,
  Goaway: 0x0a,
  /** The direct path's hand-over frames (§14.2): known only where both HELLOs said `direct`. */
  Direct: 0x0d,
  Accept: 0x0e,
} as const;

const TYPE_NAMES = ["", "Hello", "Request", "Response", "Item", "End", "Cancel", "Credit", "Ping", "Pong", "Goaway", "", "", "Direct", "Accept"];

/** Payload codec bytes (§6). */
export const Codec = { Raw: 0, Msgpack: 1, Json: 2 } as const;
/** A codec's name. */
export type CodecName = "raw" | "msgpack" | "json";
/** Codec names by wire value. */
export const CODEC_NAMES: readonly CodecName[] = ["raw", "msgpack", "json"];

/** Receives the fields of one parsed frame. */
export interface FrameVisitor {
  hello(hello: Hello): void;
  request(callId: number, kind: number, codec: number, timeoutMs: number, method: string, payload: Uint8Array): void;
  response(callId: number, codec: number, code: number, message: string, payload: Uint8Array): void;
  item(callId: number, codec: number, payload: Uint8Array): void;
  end(callId: number): void;
  cancel(callId: number): void;
  credit(callId: number, credit: number): void;
  ping(data: Uint8Array): void;
  pong(data: Uint8Array): void;
  goaway(lastId: number, code: number, message: string): void;
  /** A DIRECT (§14.3; only when {@link Decoder.handoffs}). A visitor without it ignores them. */
  direct?(offer: DirectOffer): void;
  /** An ACCEPT (§14.4; only when {@link Decoder.handoffs}). A visitor without it ignores them. */
  accept?(body: AcceptBody): void;
}

/** A DIRECT's body (§14.3): a direct connection to a provider replica. */
export interface DirectOffer {
  /** Whom the direct connection reaches (for logs). */
  provider: string;
  replica: number;
  /** Every method of that provider: the client routes them over the direct connection. */
  methods: string[];
  /** `fd`: the frame carries a descriptor (never readable in Node); `address`: dial {@link address}. */
  via: "fd" | "address";
  /** With `via: address`: `unix:PATH` or `tcp:HOST:PORT`. */
  address?: string;
  /** The token to send in the direct connection's HELLO, if the replica's listener wants one. */
  token?: string;
}

/** An ACCEPT's body (§14.4). */
export interface AcceptBody {
  /** Who the handed-over connection is for (for logs). */
  client: string;
}

/** A DIRECT or ACCEPT body as a JSON object; anything else is a `protocol_error` (§14.2). */
function handoffObject(name: string, b: Uint8Array, start: number, end: number): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(strictUtf8.decode(b.subarray(start, end)));
  } catch (e) {
    throw protocol(`invalid ${name} body: ${(e as Error).message}`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw protocol(`invalid ${name} body: not a JSON object`);
  return v as Record<string, unknown>;
}

/** Validates a DIRECT body (§14.3): unknown fields ignored, a missing or mistyped required one a `protocol_error`. */
function parseDirect(b: Uint8Array, start: number, end: number): DirectOffer {
  const o = handoffObject("DIRECT", b, start, end);
  const bad = (why: string) => protocol(`invalid DIRECT body: ${why}`);
  if (typeof o.provider !== "string") throw bad("provider must be a string");
  if (typeof o.replica !== "number" || !Number.isInteger(o.replica) || o.replica < 0) throw bad("replica must be an integer >= 0");
  if (!Array.isArray(o.methods) || !o.methods.every((m) => typeof m === "string")) throw bad("methods must be a list of strings");
  if (o.via !== "fd" && o.via !== "address") throw bad(`via must be "fd" or "address", got ${JSON.stringify(o.via)}`);
  const offer: DirectOffer = { provider: o.provider, replica: o.replica, methods: o.methods as string[], via: o.via };
  if (o.via === "address") {
    if (typeof o.address !== "string") throw bad("via address needs an address string");
    offer.address = o.address;
  }
  if (o.token !== undefined && o.token !== null) {
    if (typeof o.token !== "string") throw bad("token must be a string");
    offer.token = o.token;
  }
  return offer;
}

/** Validates an ACCEPT body (§14.4). */
function parseAccept(b: Uint8Array, start: number, end: number): AcceptBody {
  const o = handoffObject("ACCEPT", b, start, end);
  if (typeof o.client !== "string") throw protocol("invalid ACCEPT body: client must be a string");
  return { client: o.client };
}

function protocol(message: string): HubwireError {
  return new HubwireError("protocol_error", message);
}

/** Reads a little-endian u32. */
export function readU32(b: Uint8Array, i: number): number {
  return (b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16)) + b[i + 3]! * 0x1000000;
}

/** Writes a little-endian u32. */
export function writeU32(b: Uint8Array, i: number, v: number): void {
  b[i] = v & 0xff;
  b[i + 1] = (v >>> 8) & 0xff;
  b[i + 2] = (v >>> 16) & 0xff;
  b[i + 3] = (v >>> 24) & 0xff;
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** UTF-8 text of `b[start, end)`; short ASCII strings skip the decoder. */
function text(b: Uint8Array, start: number, end: number, what: string): string {
  if (end - start <= 32) {
    let ascii = true;
    for (let i = start; i < end; i++) if (b[i]! >= 0x80) ascii = false;
    if (ascii) return String.fromCharCode.apply(null, b.subarray(start, end) as unknown as number[]);
  }
  try {
    return strictUtf8.decode(b.subarray(start, end));
  } catch {
    throw protocol(`${what} is not valid UTF-8`);
  }
}

/** Turns a byte stream into frames. Holds only the limits; the caller owns the buffer. */
export class Decoder {
  /** The version byte frames other than HELLO must carry (set after negotiation). */
  version = VERSION;
  /** Whether both HELLOs said `direct` (§14.1): DIRECT and ACCEPT are known types, else unknown. */
  handoffs = false;

  /** The last method name decoded, and its bytes: calls tend to repeat a name. */
  private lastName = "";
  private lastNameBytes = new Uint8Array(0);

  /** A decoder refusing bodies over `maxFrame` bytes. */
  constructor(public maxFrame: number = DEFAULT_MAX_FRAME) {}

  /** The method name at `b[at, at + len)`, reusing the last one's string when the bytes match. */
  private methodName(b: Uint8Array, at: number, len: number): string {
    const last = this.lastNameBytes;
    if (last.length === len) {
      let i = 0;
      while (i < len && last[i] === b[at + i]) i++;
      if (i === len) return this.lastName;
    }
    const name = text(b, at, at + len, "method name");
    this.lastName = name;
    this.lastNameBytes = b.slice(at, at + len);
    return name;
  }

  /**
   * The cheap completeness check on the header at `b[off..]` (`avail`
   * bytes there): -1 while the header is incomplete, else the whole
   * frame's length (which may be more than is buffered). Throws the error
   * the header alone proves, in the order of §2.2.
   */
  check(b: Uint8Array, off: number, avail: number): number {
    if (avail < HEADER_LEN) return -1;
    const bodyLen = readU32(b, off);
    const version = b[off + 4]!;
    const type = b[off + 5]!;
    const codec = b[off + 7]!;
    const expected = type === FrameType.Hello ? VERSION : this.version;
    if (version !== expected) {
      throw new HubwireError("unsupported_version", `frame version ${version}, expected ${expected}`);
    }
    if (bodyLen > this.maxFrame) {
      throw new HubwireError("too_large", `frame body of ${bodyLen} bytes exceeds the limit of ${this.maxFrame} bytes`);
    }
    const handoff = type === FrameType.Direct || type === FrameType.Accept;
    if ((type < FrameType.Hello || type > FrameType.Goaway) && !(handoff && this.handoffs)) {
      throw protocol(`unknown frame type 0x${type.toString(16).padStart(2, "0")}`);
    }
    if (codec > Codec.Json) throw protocol(`unknown codec ${codec}`);
    const callId = readU32(b, off + 8);
    const connectionLevel = type === FrameType.Hello || type === FrameType.Ping || type === FrameType.Pong || handoff;
    if (connectionLevel && callId !== 0) throw protocol(`${TYPE_NAMES[type]} frame with call id ${callId}, must be 0`);
    if (!connectionLevel && type !== FrameType.Goaway && callId === 0) throw protocol(`${TYPE_NAMES[type]} frame with call id 0`);
    return HEADER_LEN + bodyLen;
  }

  /**
   * Parses the whole frame at `b[off, off + len)` (already checked) and
   * hands its fields to `v`. Payloads are subarrays of `b`.
   */
  parse(b: Uint8Array, off: number, len: number, v: FrameVisitor): void {
    const type = b[off + 5]!;
    const flags = b[off + 6]!;
    const codec = b[off + 7]!;
    const callId = readU32(b, off + 8);
    const start = off + HEADER_LEN;
    const end = off + len;
    const bodyLen = len - HEADER_LEN;
    switch (type) {
      case FrameType.Hello:
        return v.hello(parseHello(b.subarray(start, end)));
      case FrameType.Request: {
        if (bodyLen < 5) throw protocol(`Request body of ${bodyLen} bytes is shorter than 5`);
        const timeoutMs = readU32(b, start);
        const mlen = b[start + 4]!;
        if (mlen === 0) throw protocol("Request with an empty method name");
        if (mlen > bodyLen - 5) throw protocol(`Request method length ${mlen} exceeds the ${bodyLen - 5} bytes left in the body`);
        const method = this.methodName(b, start + 5, mlen);
        const kind = flags & 3;
        const payloadStart = start + 5 + mlen;
        if (streamsIn(kind) && payloadStart !== end) {
          throw protocol(`${KINDS[kind]} Request must have an empty payload, got ${end - payloadStart} bytes`);
        }
        return v.request(callId, kind, codec, timeoutMs, method, b.subarray(payloadStart, end));
      }
      case FrameType.Response:
      case FrameType.Goaway: {
        const name = TYPE_NAMES[type];
        if (bodyLen < 3) throw protocol(`${name} body of ${bodyLen} bytes is shorter than 3`);
        const code = b[start]!;
        if (codeName(code) === undefined) throw protocol(`${name} with reserved status code ${code}`);
        const mlen = b[start + 1]! | (b[start + 2]! << 8);
        if (mlen > bodyLen - 3) throw protocol(`${name} message length ${mlen} exceeds the ${bodyLen - 3} bytes left in the body`);
        const message = mlen === 0 ? "" : text(b, start + 3, start + 3 + mlen, "message");
        const rest = start + 3 + mlen;
        if (type === FrameType.Response) return v.response(callId, codec, code, message, b.subarray(rest, end));
        if (rest !== end) throw protocol(`Goaway has ${end - rest} bytes after its message`);
        return v.goaway(callId, code, message);
      }
      case FrameType.Item:
        return v.item(callId, codec, b.subarray(start, end));
      case FrameType.End:
      case FrameType.Cancel:
        if (bodyLen !== 0) throw protocol(`${TYPE_NAMES[type]} body must be 0 bytes, got ${bodyLen}`);
        return type === FrameType.End ? v.end(callId) : v.cancel(callId);
      case FrameType.Credit: {
        if (bodyLen !== 4) throw protocol(`Credit body must be 4 bytes, got ${bodyLen}`);
        const credit = readU32(b, start);
        if (credit === 0) throw protocol("Credit of 0");
        return v.credit(callId, credit);
      }
      case FrameType.Direct:
        return v.direct?.(parseDirect(b, start, end));
      case FrameType.Accept:
        return v.accept?.(parseAccept(b, start, end));
      default: {
        // PING or PONG (check() refused every other type).
        if (bodyLen !== 8) throw protocol(`${TYPE_NAMES[type]} body must be 8 bytes, got ${bodyLen}`);
        const data = b.subarray(start, end);
        return type === FrameType.Ping ? v.ping(data) : v.pong(data);
      }
    }
  }

  /** At end of stream with `avail` bytes left unread at `b[off..]`: the error if they are part of a frame. */
  finish(b: Uint8Array, off: number, avail: number): HubwireError | null {
    if (avail === 0) return null;
    try {
      const n = this.check(b, off, avail);
      if (n < 0) return protocol(`truncated frame header: stream ended after ${avail} of ${HEADER_LEN} bytes`);
      return protocol(`truncated frame body: stream ended after ${avail} of ${n} bytes`);
    } catch (e) {
      return e as HubwireError;
    }
  }
}

// ---- Encoding -------------------------------------------------------------

/** Writes a 12-byte header at `b[i..]`. */
export function writeHeader(b: Uint8Array, i: number, type: number, flags: number, codec: number, callId: number, bodyLen: number): void {
  writeU32(b, i, bodyLen);
  b[i + 4] = VERSION;
  b[i + 5] = type;
  b[i + 6] = flags;
  b[i + 7] = codec;
  writeU32(b, i + 8, callId);
}

// ---- Frames as objects (tests, tools) --------------------------------------

/** One frame as a plain object, shaped like the `frame` of `spec/vectors/frames.json`. */
export type Frame =
  | { type: "hello"; body: Hello }
  | { type: "request"; call_id: number; kind: Kind; codec: CodecName; timeout_ms: number; method: string; payload: Uint8Array }
  | { type: "response"; call_id: number; codec: CodecName; code: CodeName; message: string; payload: Uint8Array }
  | { type: "item"; call_id: number; codec: CodecName; payload: Uint8Array }
  | { type: "end" | "cancel"; call_id: number }
  | { type: "credit"; call_id: number; credit: number }
  | { type: "ping" | "pong"; data: Uint8Array }
  | { type: "goaway"; last_id: number; code: CodeName; message: string }
  | { type: "direct"; body: DirectOffer }
  | { type: "accept"; body: AcceptBody };

const utf8 = new TextEncoder();

/** A visitor that builds {@link Frame} objects. */
class Collect implements FrameVisitor {
  frame: Frame | undefined;
  hello(body: Hello) { this.frame = { type: "hello", body }; }
  request(call_id: number, kind: number, codec: number, timeout_ms: number, method: string, payload: Uint8Array) {
    this.frame = { type: "request", call_id, kind: KINDS[kind]!, codec: CODEC_NAMES[codec]!, timeout_ms, method, payload };
  }
  response(call_id: number, codec: number, code: number, message: string, payload: Uint8Array) {
    this.frame = { type: "response", call_id, codec: CODEC_NAMES[codec]!, code: codeName(code)!, message, payload };
  }
  item(call_id: number, codec: number, payload: Uint8Array) { this.frame = { type: "item", call_id, codec: CODEC_NAMES[codec]!, payload }; }
  end(call_id: number) { this.frame = { type: "end", call_id }; }
  cancel(call_id: number) { this.frame = { type: "cancel", call_id }; }
  credit(call_id: number, credit: number) { this.frame = { type: "credit", call_id, credit }; }
  ping(data: Uint8Array) { this.frame = { type: "ping", data }; }
  pong(data: Uint8Array) { this.frame = { type: "pong", data }; }
  goaway(last_id: number, code: number, message: string) { this.frame = { type: "goaway", last_id, code: codeName(code)!, message }; }
  direct(body: DirectOffer) { this.frame = { type: "direct", body }; }
  accept(body: AcceptBody) { this.frame = { type: "accept", body }; }
}

/**
 * Decodes the first frame of `b`: the frame and the bytes it used, or
 * `null` when more bytes are needed. Throws a {@link HubwireError} on bad input.
 */
export function decodeFrame(b: Uint8Array, decoder: Decoder = new Decoder()): { frame: Frame; length: number } | null {
  const n = decoder.check(b, 0, b.length);
  if (n < 0 || b.length < n) return null;
  const c = new Collect();
  decoder.parse(b, 0, n, c);
  return { frame: c.frame!, length: n };
}

/** Messages are at most 65535 bytes of UTF-8; longer ones are cut. */
export function messageBytes(message: string): Uint8Array {
  const b = utf8.encode(message);
  if (b.length <= 0xffff) return b;
  let end = 0xffff;
  while ((b[end]! & 0xc0) === 0x80) end--; // back to a character boundary
  return b.subarray(0, end);
}

/** Encodes a whole frame. */
export function encodeFrame(f: Frame): Uint8Array {
  let type: number, flags = 0, codec = 0, id = 0;
  let body: Uint8Array;
  switch (f.type) {
    case "hello":
      type = FrameType.Hello;
      body = encodeHello(f.body);
      break;
    case "request": {
      type = FrameType.Request;
      flags = KINDS.indexOf(f.kind);
      codec = CODEC_NAMES.indexOf(f.codec);
      id = f.call_id;
      const m = utf8.encode(f.method);
      body = new Uint8Array(5 + m.length + f.payload.length);
      writeU32(body, 0, f.timeout_ms);
      body[4] = m.length;
      body.set(m, 5);
      body.set(f.payload, 5 + m.length);
      break;
    }
    case "direct":
    case "accept":
      // Connection-level JSON, in the order the object's keys are in.
      type = f.type === "direct" ? FrameType.Direct : FrameType.Accept;
      body = utf8.encode(JSON.stringify(f.body));
      break;
    case "response":
    case "goaway": {
      const m = messageBytes(f.message);
      const payload = f.type === "response" ? f.payload : new Uint8Array(0);
      type = f.type === "response" ? FrameType.Response : FrameType.Goaway;
      if (f.type === "response") {
        codec = CODEC_NAMES.indexOf(f.codec);
        id = f.call_id;
      } else id = f.last_id;
      body = new Uint8Array(3 + m.length + payload.length);
      body[0] = CODES[f.code];
      body[1] = m.length & 0xff;
      body[2] = m.length >> 8;
      body.set(m, 3);
      body.set(payload, 3 + m.length);
      break;
    }
    case "item":
      type = FrameType.Item;
      codec = CODEC_NAMES.indexOf(f.codec);
      id = f.call_id;
      body = f.payload;
      break;
    case "end":
    case "cancel":
      type = f.type === "end" ? FrameType.End : FrameType.Cancel;
      id = f.call_id;
      body = new Uint8Array(0);
      break;
    case "credit":
      type = FrameType.Credit;
      id = f.call_id;
      body = new Uint8Array(4);
      writeU32(body, 0, f.credit);
      break;
    case "ping":
    case "pong":
      type = f.type === "ping" ? FrameType.Ping : FrameType.Pong;
      body = f.data;
      break;
  }
  const out = new Uint8Array(HEADER_LEN + body.length);
  writeHeader(out, 0, type, flags, codec, id, body.length);
  out.set(body, HEADER_LEN);
  return out;
}

/**
 * Whether call id `id` was started after `last` by the same peer, in the
 * serial-number order of `spec/PROTOCOL.md` §3 (ids wrap after
 * 0xFFFFFFFF): `(id - last) mod 2^32` is in `1..2^31`. `last` 0 means
 * "none seen", so every id is after it (GOAWAY's `call_id`, §5.10).
 */
export function idAfter(id: number, last: number): boolean {
  const d = (id - last) >>> 0;
  return last === 0 || (d >= 1 && d < 0x8000_0000);
}
