/**
 * The byte-level vectors of `spec/vectors/` (format: its README): every
 * frame both ways, HELLO bodies and negotiation, MessagePack and JSON
 * values, every must-reject input with its code; and the status-code
 * table against `spec/codes.json`.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import {
  CODES,
  codeName,
  decodeFrame,
  decodeJson,
  decodeMsgpack,
  Decoder,
  encodeFrame,
  encodeJson,
  encodeMsgpack,
  HubwireError,
  negotiate,
  parseHello,
  type Frame,
} from "hubwire";

const SPEC = fileURLToPath(new URL("../../../spec/", import.meta.url));
const load = (name: string) => JSON.parse(readFileSync(SPEC + name, "utf8"));
const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const unhex = (s: string) => new Uint8Array(Buffer.from(s, "hex"));

/** A frame in the vectors' JSON shape (payloads as hex). */
function toVector(f: Frame): Record<string, unknown> {
  const { payload, data, ...rest } = f as Frame & { payload?: Uint8Array; data?: Uint8Array };
  const v: Record<string, unknown> = { ...rest };
  if (payload !== undefined) v.payload_hex = hex(payload);
  if (data !== undefined) v.data_hex = hex(data);
  return v;
}

/** A vector's `frame` as a {@link Frame}. */
function fromVector(v: Record<string, any>): Frame {
  const { payload_hex, data_hex, ...rest } = v;
  const f: Record<string, unknown> = { ...rest };
  if (payload_hex !== undefined) f.payload = unhex(payload_hex);
  if (data_hex !== undefined) f.data = unhex(data_hex);
  return f as Frame;
}

describe("vectors: frames.json", () => {
  const file = load("vectors/frames.json");
  for (const c of file.cases) {
    it(`decode ${c.name}`, () => {
      const bytes = unhex(c.hex);
      const r = decodeFrame(bytes);
      assert.ok(r !== null);
      assert.equal(r.length, bytes.length);
      assert.deepEqual(toVector(r.frame), c.frame);
      // A prefix asks for more bytes.
      assert.equal(decodeFrame(bytes.subarray(0, bytes.length - 1)), null);
    });
    it(`encode ${c.name}`, () => {
      // HELLO bodies too: this encoder writes the canonical form exactly.
      assert.equal(hex(encodeFrame(fromVector(c.frame))), c.hex);
    });
  }
  for (const c of file.decode_only) {
    it(`decode_only ${c.name}`, () => {
      const r = decodeFrame(unhex(c.hex));
      assert.ok(r !== null);
      assert.deepEqual(toVector(r.frame), c.frame);
      const cleared = unhex(c.hex);
      cleared[6] = c.frame.type === "request" ? cleared[6]! & 3 : 0;
      assert.equal(hex(encodeFrame(fromVector(c.frame))), hex(cleared));
    });
  }
});

describe("vectors: handshake.json", () => {
  const file = load("vectors/handshake.json");
  for (const c of file.cases) {
    it(c.name, () => {
      const body = new TextEncoder().encode(c.body_json);
      const header = new Uint8Array(12);
      header.set([body.length & 0xff, (body.length >> 8) & 0xff, 0, 0, 1, 1, 0, 0]);
      const framed = new Uint8Array(12 + body.length);
      framed.set(header);
      framed.set(body, 12);
      if (c.valid) {
        assert.deepEqual(parseHello(body), c.hello);
        const r = decodeFrame(framed);
        assert.ok(r !== null && r.frame.type === "hello");
        assert.deepEqual(r.frame.body, c.hello);
      } else {
        assert.throws(() => parseHello(body), (e: HubwireError) => e.code === c.error);
        assert.throws(() => decodeFrame(framed), (e: HubwireError) => e.code === c.error);
      }
    });
  }
  for (const c of file.negotiation) {
    it(`negotiation ${c.name}`, () => {
      if (c.result !== undefined) assert.equal(negotiate(c.ours, c.theirs), c.result);
      else
        assert.throws(
          () => negotiate(c.ours, c.theirs),
          (e: HubwireError) => e.code === c.error && (!c.message_contains || e.message.includes(c.message_contains)),
        );
    });
  }
});

describe("vectors: codecs.json", () => {
  const file = load("vectors/codecs.json");
  for (const c of file.cases) {
    it(c.name, () => {
      assert.deepEqual(decodeMsgpack(unhex(c.msgpack_hex)), c.value);
      assert.equal(hex(encodeMsgpack(c.value)), c.msgpack_hex);
      assert.equal(new TextDecoder().decode(encodeJson(c.value)), c.json);
      assert.deepEqual(decodeJson(new TextEncoder().encode(c.json)), c.value);
    });
  }
  for (const c of file.bin) {
    it(c.name, () => {
      assert.equal(hex(encodeMsgpack(unhex(c.bytes_hex))), c.msgpack_hex);
      assert.equal(hex(decodeMsgpack(unhex(c.msgpack_hex)) as Uint8Array), c.bytes_hex);
      assert.equal(new TextDecoder().decode(encodeJson(unhex(c.bytes_hex))), c.json);
      // Untyped JSON has no byte strings: the array of numbers holds the bytes.
      assert.equal(hex(Uint8Array.from(decodeJson(new TextEncoder().encode(c.json)) as number[])), c.bytes_hex);
    });
  }
  for (const c of file.json_numbers) {
    it(`json_numbers/${c.name}`, () => {
      const bits = new DataView(new ArrayBuffer(8));
      bits.setFloat64(0, decodeJson(new TextEncoder().encode(c.json)) as number);
      assert.equal(hex(new Uint8Array(bits.buffer)), c.f64_hex);
    });
  }
});

describe("vectors: reject.json", () => {
  const file = load("vectors/reject.json");
  for (const c of file.cases) {
    it(c.name, () => {
      const d = new Decoder(c.max_frame ?? 16777216);
      const b = unhex(c.hex);
      let off = 0;
      let error: HubwireError | null = null;
      try {
        for (;;) {
          const n = d.check(b, off, b.length - off);
          if (n < 0 || b.length - off < n) break;
          decodeFrame(b.subarray(off, off + n), d);
          off += n;
        }
      } catch (e) {
        error = e as HubwireError;
      }
      if (error === null) {
        assert.ok(c.eof, "the decoder should have refused from the bytes it had");
        error = d.finish(b, off, b.length - off);
      }
      assert.ok(error instanceof HubwireError, "must be rejected");
      assert.equal(error.code, c.error, error.message);
      if (c.message_contains) assert.ok(error.message.includes(c.message_contains), error.message);
    });
  }
});

describe("codes.json", () => {
  it("matches the status-code table", () => {
    const codes: { value: number; name: string }[] = load("codes.json").codes;
    assert.equal(Object.keys(CODES).length, codes.length);
    for (const { value, name } of codes) {
      assert.equal(CODES[name as keyof typeof CODES], value);
      assert.equal(codeName(value), name);
    }
    assert.equal(codeName(codes.length), undefined);
  });
});

describe("vectors: direct.json", () => {
  const file = load("vectors/direct.json");
  // A decoder for a connection where both HELLOs said `direct` (§14.2), or not.
  const decoder = (negotiated: boolean) => Object.assign(new Decoder(), { handoffs: negotiated });
  for (const c of file.cases) {
    it(`decode ${c.name}`, () => {
      const bytes = unhex(c.hex);
      const r = decodeFrame(bytes, decoder(true));
      assert.ok(r !== null);
      assert.equal(r.length, bytes.length);
      assert.deepEqual(r.frame, c.frame);
    });
    it(`encode ${c.name}`, () => assert.equal(hex(encodeFrame(c.frame as Frame)), c.hex));
  }
  for (const c of file.reject) {
    it(`reject ${c.name}`, () => {
      assert.throws(
        () => decodeFrame(unhex(c.hex), decoder(c.negotiated)),
        (e: HubwireError) => e.code === c.code && e.message.includes(c.message_contains),
      );
    });
  }
});
