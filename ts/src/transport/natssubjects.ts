/**
 * The names of hubwire over NATS (`spec/PROTOCOL.md` §13.1, §13.2, §13.7):
 * subject tokens, connect subjects, micro service names, and the connect
 * request's body. Pure: no NATS connection here.
 */

import { HubwireError } from "../errors.js";

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder();

/** The link protocol's version, `hubwire` in connect bodies. */
export const LINK_VERSION = 1;
/** The subject prefix peers use unless told otherwise. */
export const DEFAULT_PREFIX = "hubwire";
/** The queue group of every connect subject. */
export const QUEUE_GROUP = "hubwire";

/**
 * A method or provider name as one subject token (§13.1): ASCII letters,
 * digits and `_` kept, every other UTF-8 byte written `-xx` (two
 * lowercase hex digits). `math.add` → `math-2eadd`, `get-user` →
 * `get-2duser`. Also a valid NATS micro endpoint name.
 */
export function token(name: string): string {
  let out = "";
  for (const b of utf8.encode(name)) {
    const keep = (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || b === 0x5f;
    out += keep ? String.fromCharCode(b) : `-${b.toString(16).padStart(2, "0")}`;
  }
  return out;
}

/** The name a {@link token} encodes; throws on a token that no name encodes to. */
export function untoken(tok: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < tok.length; i++) {
    const c = tok.charCodeAt(i);
    if (c !== 0x2d) {
      bytes.push(c);
      continue;
    }
    const hex = tok.slice(i + 1, i + 3);
    if (!/^[0-9a-f]{2}$/.test(hex)) throw new HubwireError("invalid_argument", `bad escape in subject token ${JSON.stringify(tok)}`);
    bytes.push(parseInt(hex, 16));
    i += 2;
  }
  return fromUtf8.decode(new Uint8Array(bytes));
}

/** What a dial reaches: some replica offering a method, some replica of a provider, or one replica. */
export type Target = { method: string } | { provider: string } | { replica: string };

/** The connect subject of `target` under `prefix` (§13.1): `P.m.<token>`, `P.p.<token>` or `P.r.<id>`. */
export function connectSubject(prefix: string, target: Target): string {
  if ("method" in target) return `${prefix}.m.${token(target.method)}`;
  if ("provider" in target) return `${prefix}.p.${token(target.provider)}`;
  return `${prefix}.r.${target.replica}`;
}

/** The `nats micro` service name of a provider (§13.7): every character outside `[A-Za-z0-9_-]` becomes `_`. */
export function serviceName(provider: string): string {
  return provider.replace(/[^A-Za-z0-9_-]/gu, "_");
}

/** A connect request's fields (§13.2). */
export interface ConnectRequest {
  hubwire: number;
  link: string;
  peer?: string;
}

/**
 * Reads a connect request's body, or throws the refusal's
 * `HubwireError`: `unsupported_version` for another link protocol,
 * `protocol_error` for anything but such an object.
 */
export function parseConnectRequest(body: Uint8Array): ConnectRequest {
  let v: unknown;
  try {
    v = JSON.parse(fromUtf8.decode(body));
  } catch {
    throw new HubwireError("protocol_error", "connect request is not JSON");
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new HubwireError("protocol_error", "connect request is not a JSON object");
  const o = v as Record<string, unknown>;
  if (!Number.isInteger(o.hubwire) || (o.hubwire as number) < 0) throw new HubwireError("protocol_error", "connect request has no \"hubwire\" version");
  if (o.hubwire !== LINK_VERSION) {
    throw new HubwireError("unsupported_version", `link protocol ${String(o.hubwire)} not spoken; this replica speaks ${LINK_VERSION}`);
  }
  if (typeof o.link !== "string" || !validSubject(o.link)) throw new HubwireError("protocol_error", "connect request has no valid \"link\" subject");
  const req: ConnectRequest = { hubwire: LINK_VERSION, link: o.link };
  if (typeof o.peer === "string") req.peer = o.peer;
  return req;
}

/** A subject one can publish to: dot-separated non-empty tokens, no wildcard, no whitespace. */
export function validSubject(s: string): boolean {
  return s.length > 0 && s.split(".").every((t) => t.length > 0 && !/[\s*>]/u.test(t));
}

/** A connect reply's fields (§13.2): the acceptor's link subject and who it is, or a refusal. */
export interface ConnectReply {
  hubwire: number;
  link?: string;
  replica?: string;
  provider?: string;
  error?: { code: string; message: string };
}
