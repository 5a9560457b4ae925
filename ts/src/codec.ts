/**
 * Payload codecs (`spec/PROTOCOL.md` §6): `raw` bytes pass untouched,
 * `msgpack` through msgpackr (shortest forms, maps keyed by field name,
 * `Uint8Array` as `bin`), `json` compact (`Uint8Array` as an array of
 * numbers). A payload is decoded once, where it is used.
 */

import { C1, Packr } from "msgpackr";
import { Codec, type CodecName } from "./frame.js";
import { HubwireError } from "./errors.js";

const packr = new Packr({
  useRecords: false,
  mapsAsObjects: true,
  variableMapSize: true,
  encodeUndefinedAsNil: true,
  // Integers beyond 2^53 arrive as BigInt rather than losing precision.
  int64AsType: "auto" as "number",
});

const FLOAT64 = 0xcb;
const NEVER_USED = 0xc1;
const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder();

/** Whether `v` holds an integer outside 32 bits, which msgpackr would write as float64. */
function hasWideInt(v: unknown): boolean {
  if (typeof v === "number") return Number.isInteger(v) && (v > 0xffffffff || v < -0x80000000);
  if (typeof v !== "object" || v === null || ArrayBuffer.isView(v)) return false;
  if (Array.isArray(v)) return v.some(hasWideInt);
  for (const k in v) if (hasWideInt((v as Record<string, unknown>)[k])) return true;
  return false;
}

/**
 * A plain MessagePack encoder for the rare value holding an integer past
 * 32 bits, which msgpackr writes as float64 (and, as a BigInt, as int64
 * even when positive). The spec wants the shortest (u)int form.
 */
function packWide(v: unknown, out: number[]): void {
  const u8 = (...b: number[]) => out.push(...b);
  const be = (n: bigint, bytes: number) => {
    for (let i = bytes - 1; i >= 0; i--) out.push(Number((n >> BigInt(8 * i)) & 0xffn));
  };
  const len = (n: number, fix: number, fixMax: number, c8: number | null, c16: number, c32: number) => {
    if (n <= fixMax) u8(fix | n);
    else if (c8 !== null && n < 0x100) u8(c8, n);
    else if (n < 0x10000) u8(c16, n >> 8, n & 0xff);
    else u8(c32, (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff);
  };
  if (typeof v === "number" && Number.isInteger(v) && (v > 0xffffffff || v < -0x80000000)) {
    if (v > 0) (u8(0xcf), be(BigInt(v), 8));
    else (u8(0xd3), be(BigInt.asUintN(64, BigInt(v)), 8));
  } else if (Array.isArray(v)) {
    len(v.length, 0x90, 15, null, 0xdc, 0xdd);
    for (const x of v) packWide(x, out);
  } else if (typeof v === "object" && v !== null && !ArrayBuffer.isView(v)) {
    const keys = Object.keys(v);
    len(keys.length, 0x80, 15, null, 0xde, 0xdf);
    for (const k of keys) {
      packWide(k, out);
      packWide((v as Record<string, unknown>)[k], out);
    }
  } else for (const b of packr.pack(v)) out.push(b); // scalars and byte strings as msgpackr writes them
}

/** One value as MessagePack, in the shortest form of each value. */
export function encodeMsgpack(value: unknown): Uint8Array {
  const out = packr.pack(value);
  // msgpackr writes integers past 32 bits as float64; the spec wants
  // (u)int64. Only a payload holding a float64 marker byte can be
  // affected, so the common case costs one memchr.
  if (out.indexOf(FLOAT64) === -1 || !hasWideInt(value)) return out;
  const bytes: number[] = [];
  packWide(value, bytes);
  return new Uint8Array(bytes);
}

/** Whether msgpackr's stand-in for the never-used byte 0xc1 is anywhere in `v`. */
function hasNeverUsed(v: unknown): boolean {
  if (v === C1) return true;
  if (typeof v !== "object" || v === null || ArrayBuffer.isView(v)) return false;
  if (Array.isArray(v)) return v.some(hasNeverUsed);
  for (const k in v) if (hasNeverUsed((v as Record<string, unknown>)[k])) return true;
  return false;
}

/** One MessagePack value; throws on malformed input (including the never-used byte 0xc1). */
export function decodeMsgpack(bytes: Uint8Array): unknown {
  const v = packr.unpack(bytes);
  // msgpackr returns a marker object for 0xc1 instead of failing. Only a
  // payload holding that byte can contain one: the common case is one memchr.
  if (bytes.indexOf(NEVER_USED) !== -1 && hasNeverUsed(v)) throw new Error("0xc1 is not a MessagePack value");
  return v;
}

function jsonReplacer(_key: string, v: unknown): unknown {
  if (v instanceof Uint8Array) return Array.from(v);
  if (typeof v === "bigint") return Number(v);
  return v;
}

/** One value as compact JSON. */
export function encodeJson(value: unknown): Uint8Array {
  return utf8.encode(JSON.stringify(value === undefined ? null : value, jsonReplacer));
}

/** One JSON value. */
export function decodeJson(bytes: Uint8Array): unknown {
  return JSON.parse(utf8Decoder.decode(bytes));
}

/**
 * Encodes `value` with codec `codec` (wire value). `raw` takes a
 * `Uint8Array` as it is; anything else is `invalid_argument`.
 */
export function encode(codec: number, value: unknown): Uint8Array {
  if (codec === Codec.Msgpack) return encodeMsgpack(value);
  if (codec === Codec.Json) return encodeJson(value);
  if (value instanceof Uint8Array) return value;
  throw new HubwireError("invalid_argument", "the raw codec takes a Uint8Array");
}

/** Decodes a payload of codec `codec`; `raw` gives the bytes themselves. */
export function decode(codec: number, bytes: Uint8Array): unknown {
  if (codec === Codec.Msgpack) return decodeMsgpack(bytes);
  if (codec === Codec.Json) return decodeJson(bytes);
  return bytes;
}

/** The wire value of a codec name. */
export function codecValue(name: CodecName | undefined, dflt: number = Codec.Msgpack): number {
  if (name === undefined) return dflt;
  const v = name === "raw" ? Codec.Raw : name === "msgpack" ? Codec.Msgpack : name === "json" ? Codec.Json : -1;
  if (v < 0) throw new HubwireError("invalid_argument", `unknown codec ${JSON.stringify(name)}`);
  return v;
}
