/**
 * Payload codecs (`spec/PROTOCOL.md` §6): `raw` bytes pass untouched,
 * `msgpack` through msgpackr (shortest forms, maps keyed by field name,
 * `Uint8Array` as `bin`), `json` compact (`Uint8Array` as an array of
 * numbers). A payload is decoded once, where it is used.
 */

import { Packr } from "msgpackr";
import { Codec, type CodecName } from "./frame.js";
import { HubwireError } from "./errors.js";
import { checkMsgpack } from "./onevalue.js";

const packr = new Packr({
  useRecords: false,
  mapsAsObjects: true,
  variableMapSize: true,
  encodeUndefinedAsNil: true,
  // Integers beyond 2^53 arrive as BigInt rather than losing precision.
  int64AsType: "auto" as "number",
});

const FLOAT64 = 0xcb;
const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder();

const TWO32 = 0x1_0000_0000;
const TWO63 = 2 ** 63;
const TWO64 = 2 ** 64;
let slabView: DataView<ArrayBufferLike> = new DataView(new ArrayBuffer(0));

/**
 * Rewrites in place, in `b` (one MessagePack value as msgpackr wrote it),
 * every float64 holding an integer that fits (u)int64 into that int form:
 * msgpackr writes integers past 32 bits as float64, the spec wants the
 * shortest form, uint64 (0xcf) or int64 (0xd3), which has the same length
 * (1 + 8 bytes). Walks the bytes token by token: a map or array header is
 * followed by its elements, so no nesting needs tracking; strings, byte
 * strings and extensions are skipped whole. Integers out of (u)int64 range
 * stay float64. Returns `b`.
 */
function widenInts(b: Uint8Array): Uint8Array {
  // msgpackr writes into a slab it reuses across calls: one view per slab.
  if (slabView.buffer !== b.buffer) slabView = new DataView(b.buffer);
  const view = slabView;
  const base = b.byteOffset;
  const n = b.length;
  let i = 0;
  while (i < n) {
    const t = b[i];
    if (t < 0xa0 || t >= 0xe0) {
      i++; // fixint, fixmap, fixarray, negative fixint
      continue;
    }
    if (t < 0xc0) {
      i += 1 + (t & 0x1f); // fixstr
      continue;
    }
    switch (t) {
      case 0xcb: {
        const v = view.getFloat64(base + i + 1);
        if (Number.isInteger(v) && v < TWO64 && v >= -TWO63 && (v >= TWO32 || v < -0x8000_0000)) {
          // Both halves are exact: v / 2^32 only moves the exponent, and the low half is an integer below 2^32.
          const hi = Math.floor(v / TWO32);
          const lo = v - hi * TWO32;
          if (v > 0) {
            b[i] = 0xcf;
            view.setUint32(base + i + 1, hi);
          } else {
            b[i] = 0xd3;
            view.setInt32(base + i + 1, hi);
          }
          view.setUint32(base + i + 5, lo);
        }
        i += 9;
        break;
      }
      case 0xc4: // bin8
      case 0xd9: // str8
        i += 2 + b[i + 1];
        break;
      case 0xc5: // bin16
      case 0xda: // str16
        i += 3 + ((b[i + 1] << 8) | b[i + 2]);
        break;
      case 0xc6: // bin32
      case 0xdb: // str32
        i += 5 + ((b[i + 1] << 24) >>> 0) + ((b[i + 2] << 16) | (b[i + 3] << 8) | b[i + 4]);
        break;
      case 0xc7: // ext8
        i += 3 + b[i + 1];
        break;
      case 0xc8: // ext16
        i += 4 + ((b[i + 1] << 8) | b[i + 2]);
        break;
      case 0xc9: // ext32
        i += 6 + ((b[i + 1] << 24) >>> 0) + ((b[i + 2] << 16) | (b[i + 3] << 8) | b[i + 4]);
        break;
      case 0xcc: // uint8
      case 0xd0: // int8
        i += 2;
        break;
      case 0xcd: // uint16
      case 0xd1: // int16
      case 0xdc: // array16
      case 0xde: // map16
      case 0xd4: // fixext1
        i += 3;
        break;
      case 0xd5: // fixext2
        i += 4;
        break;
      case 0xca: // float32
      case 0xce: // uint32
      case 0xd2: // int32
      case 0xdd: // array32
      case 0xdf: // map32
        i += 5;
        break;
      case 0xd6: // fixext4
        i += 6;
        break;
      case 0xcf: // uint64
      case 0xd3: // int64
        i += 9;
        break;
      case 0xd7: // fixext8
        i += 10;
        break;
      case 0xd8: // fixext16
        i += 18;
        break;
      default: // nil, never used, false, true
        i++;
    }
  }
  return b;
}

/** One value as MessagePack, in the shortest form of each value. */
export function encodeMsgpack(value: unknown): Uint8Array {
  const out = packr.pack(value);
  // msgpackr writes integers past 32 bits as float64; the spec wants
  // (u)int64. Only a payload holding a float64 marker byte can be
  // affected, so the common case costs one memchr.
  return out.indexOf(FLOAT64) === -1 ? out : widenInts(out);
}

/** One MessagePack value; throws on malformed input and on anything §6.2 refuses (see {@link checkMsgpack}). */
export function decodeMsgpack(bytes: Uint8Array): unknown {
  // One value of the shared data model, whatever msgpackr would tolerate (§6.2).
  checkMsgpack(bytes);
  return packr.unpack(bytes);
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
