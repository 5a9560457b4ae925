/**
 * The handshake (`spec/PROTOCOL.md` §4): the HELLO body, its validation,
 * its canonical JSON form, and version negotiation.
 */

import { HubwireError } from "./errors.js";

/** The package version, sent in HELLO (and in NATS discovery answers). */
export const SDK_VERSION = "0.1.0";

/** Default `max_frame`: the largest body a peer accepts (16 MiB). */
export const DEFAULT_MAX_FRAME = 16 * 1024 * 1024;
/** Default `window`: initial credit per stream. */
export const DEFAULT_WINDOW = 64;
/** Default `max_calls`: concurrent calls accepted as callee. */
export const DEFAULT_MAX_CALLS = 4096;
/** The smallest `max_frame` a peer may declare. */
export const MIN_MAX_FRAME = 4096;
/** The longest `token` a HELLO may carry, in bytes (§4.4). */
export const MAX_TOKEN = 4096;
/**
 * The HELLO body size every peer accepts whatever its `max_frame`
 * (PROTOCOL.md §4.1.2): the first frame is read with the limit
 * `max(max_frame, HELLO_LIMIT)`.
 */
export const HELLO_LIMIT = 1 << 20;
const U32_MAX = 0xffffffff;

/** The four call kinds' names, by their wire value (REQUEST flags bits 0–1). */
export const KINDS = ["unary", "server_stream", "client_stream", "bidi"] as const;
/** A call kind's name. */
export type Kind = (typeof KINDS)[number];

/**
 * The call kinds' wire values (`spec/PROTOCOL.md` §1, §5.2), so code says
 * `KIND.bidi` rather than `3`. Bit 0: the callee streams outputs; bit 1:
 * the caller streams inputs.
 */
export const KIND = { unary: 0, serverStream: 1, clientStream: 2, bidi: 3 } as const;

/** Whether the caller of a call of wire kind `kind` streams inputs (ITEMs to the callee): client_stream, bidi. */
export function streamsIn(kind: number): boolean {
  return (kind & 2) !== 0;
}

/** Whether the callee of a call of wire kind `kind` streams outputs (ITEMs to the caller): server_stream, bidi. */
export function streamsOut(kind: number): boolean {
  return (kind & 1) !== 0;
}

/** Who a peer is. */
export interface PeerInfo {
  name: string;
  lang: string;
  version: string;
}

/** One method a peer offers. `errors` and `doc` are present only when given. */
export interface MethodInfo {
  name: string;
  kind: Kind;
  input: unknown;
  output: unknown;
  errors?: unknown;
  /** One line saying what the method does. */
  doc?: string;
}

/** The HELLO body, with defaults filled in. */
export interface Hello {
  versions: number[];
  peer: PeerInfo;
  max_frame: number;
  window: number;
  max_calls: number;
  methods: MethodInfo[];
  /** The direct path through a hub (§14.1): the version of it the sender implements (1), present only when sent. */
  direct?: number;
  /** The dialer's credential (§4.4), present only when sent; an acceptor never sends one. Never log it. */
  token?: string;
}

const utf8 = new TextEncoder();
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

function bad(why: string): HubwireError {
  return new HubwireError("protocol_error", `invalid HELLO body: ${why}`);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function u32(v: unknown, field: string, min: number, dflt: number): number {
  // null is absent (PROTOCOL.md §4.1.1); JSON.parse already reads 64.0 as 64.
  if (v === undefined || v === null) return dflt;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > U32_MAX) {
    throw bad(`${field} must be an integer in ${min}..${U32_MAX}, got ${JSON.stringify(v)}`);
  }
  return v;
}

function str(o: Record<string, unknown>, field: string, where: string): string {
  const v = o[field];
  if (typeof v !== "string") throw bad(`${where}.${field} must be a string`);
  return v;
}

/** A method's schema: an object or a boolean; `undefined` when absent or null (PROTOCOL.md §4.1.1). */
function schema(v: unknown, method: string, field: string): unknown {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean" && !isObject(v)) {
    throw bad(`method ${method}: ${field} must be a JSON Schema (an object or a boolean), got ${JSON.stringify(v)}`);
  }
  return v;
}

/** Validates a parsed HELLO object and fills in the defaults. */
export function helloFromValue(v: unknown): Hello {
  if (!isObject(v)) throw bad("not a JSON object");
  const versions = v.versions;
  if (!Array.isArray(versions) || versions.length === 0) throw bad("versions must be a non-empty list");
  for (const x of versions) {
    if (typeof x !== "number" || !Number.isInteger(x) || x < 1 || x > U32_MAX) {
      throw bad(`versions must be integers >= 1, got ${JSON.stringify(versions)}`);
    }
  }
  if (!isObject(v.peer)) throw bad("peer must be an object");
  const peer = { name: str(v.peer, "name", "peer"), lang: str(v.peer, "lang", "peer"), version: str(v.peer, "version", "peer") };
  const methodsIn = v.methods ?? [];
  if (!Array.isArray(methodsIn)) throw bad("methods must be a list");
  const methods = methodsIn.map((m): MethodInfo => {
    if (!isObject(m)) throw bad("each method must be an object");
    const name = str(m, "name", "method");
    const len = utf8.encode(name).length;
    if (len < 1 || len > 255) throw bad(`method name must be 1-255 bytes, got ${len} bytes`);
    const kind = m.kind;
    if (typeof kind !== "string" || !(KINDS as readonly string[]).includes(kind)) {
      throw bad(`method ${name}: unknown kind ${JSON.stringify(kind)}`);
    }
    const info: MethodInfo = { name, kind: kind as Kind, input: schema(m.input, name, "input") ?? {}, output: schema(m.output, name, "output") ?? {} };
    const errors = schema(m.errors, name, "errors");
    if (errors !== undefined) info.errors = errors;
    if (m.doc !== undefined && m.doc !== null) {
      if (typeof m.doc !== "string") throw bad(`method ${name}: doc must be a string`);
      info.doc = m.doc;
    }
    return info;
  });
  const hello: Hello = {
    versions: versions as number[],
    peer,
    max_frame: u32(v.max_frame, "max_frame", MIN_MAX_FRAME, DEFAULT_MAX_FRAME),
    window: u32(v.window, "window", 1, DEFAULT_WINDOW),
    max_calls: u32(v.max_calls, "max_calls", 1, DEFAULT_MAX_CALLS),
    methods,
  };
  // null is absent, as for every optional field (§4.1.1); any value >= 1 is taken as 1.
  if (v.direct !== undefined && v.direct !== null) hello.direct = Math.min(1, u32(v.direct, "direct", 1, 1));
  if (v.token !== undefined && v.token !== null) {
    const len = typeof v.token === "string" ? utf8.encode(v.token).length : -1;
    if (len < 1 || len > MAX_TOKEN) throw bad(`token must be a string of 1-${MAX_TOKEN} bytes`);
    hello.token = v.token as string;
  }
  return hello;
}

/**
 * Whether `got` equals `want`, in time that depends only on their lengths,
 * never on where the first difference is (§4.4).
 */
export function tokenMatches(got: string, want: string): boolean {
  const a = utf8.encode(got);
  const b = utf8.encode(want);
  let diff = a.length ^ b.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0;
}

/**
 * `h` shortened to at most {@link HELLO_LIMIT} body bytes, the size every
 * peer accepts (PROTOCOL.md §4.1.2): first the docs go, then the schemas
 * (`{}`, no `errors`), which are descriptive; names and kinds always stay.
 */
export function fitHello(h: Hello): Hello {
  const fits = (x: Hello) => encodeHello(x).length <= HELLO_LIMIT;
  if (fits(h)) return h;
  const noDocs: Hello = { ...h, methods: h.methods.map(({ doc: _, ...m }) => m) };
  if (fits(noDocs)) return noDocs;
  return { ...h, methods: h.methods.map((m) => ({ name: m.name, kind: m.kind, input: {}, output: {} })) };
}

/** Parses and validates a HELLO body (UTF-8 JSON bytes). */
export function parseHello(body: Uint8Array): Hello {
  let value: unknown;
  try {
    value = JSON.parse(strictUtf8.decode(body));
  } catch (e) {
    throw bad(e instanceof Error ? e.message : String(e));
  }
  return helloFromValue(value);
}

/** JSON Schema values are written with sorted keys (the canonical form of `spec/vectors/README.md`). */
function sorted(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sorted);
  if (!isObject(v)) return v;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v).sort()) out[k] = sorted(v[k]);
  return out;
}

/** The HELLO body as canonical compact JSON bytes. */
export function encodeHello(h: Hello): Uint8Array {
  const canonical = {
    versions: h.versions,
    peer: { name: h.peer.name, lang: h.peer.lang, version: h.peer.version },
    max_frame: h.max_frame,
    window: h.window,
    max_calls: h.max_calls,
    methods: h.methods.map((m) => {
      const o: Record<string, unknown> = { name: m.name, kind: m.kind, input: sorted(m.input), output: sorted(m.output) };
      if (m.errors !== undefined) o.errors = sorted(m.errors);
      if (m.doc !== undefined) o.doc = m.doc;
      return o;
    }),
    ...(h.direct === undefined ? {} : { direct: h.direct }),
    ...(h.token === undefined ? {} : { token: h.token }),
  };
  return utf8.encode(JSON.stringify(canonical));
}

/** The highest version in both lists (§4.2), or `unsupported_version`. */
export function negotiate(ours: readonly number[], theirs: readonly number[]): number {
  let best = 0;
  for (const v of ours) if (theirs.includes(v) && v > best) best = v;
  if (best === 0) {
    throw new HubwireError(
      "unsupported_version",
      `no common protocol version: we speak [${ours.join(", ")}], peer speaks [${theirs.join(", ")}]`,
    );
  }
  return best;
}
