/**
 * MessagePack integers past 32 bits: msgpackr writes them as float64, the
 * SDK rewrites them in place as uint64 (0xcf) / int64 (0xd3), the shortest
 * form (`spec/PROTOCOL.md` §6). Exact bytes at the boundaries, inside
 * structures next to strings and byte strings that hold the float64 marker
 * byte, and round trips through the decoder (which gives byte strings as a
 * `Buffer` in Node, hence `Buffer.from` in the values).
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decodeMsgpack, encodeHello, encodeMsgpack, fitHello, HELLO_LIMIT, type Hello } from "hubwire";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

/** The expected (u)int64 encoding of a safe integer, computed with BigInt. */
function int64Hex(v: number): string {
  const b = Buffer.alloc(9);
  if (v >= 0) {
    b[0] = 0xcf;
    b.writeBigUInt64BE(BigInt(v), 1);
  } else {
    b[0] = 0xd3;
    b.writeBigInt64BE(BigInt(v), 1);
  }
  return b.toString("hex");
}

describe("msgpack: integers past 32 bits", () => {
  const cases: [string, number, string][] = [
    ["2^32 - 1 (uint32)", 2 ** 32 - 1, "ceffffffff"],
    ["2^32 (uint64)", 2 ** 32, "cf0000000100000000"],
    ["2^32 + 1", 2 ** 32 + 1, "cf0000000100000001"],
    ["1.7e12 (a millisecond timestamp)", 1.7e12, "cf0000018bcfe56800"],
    ["2^53 - 1", 2 ** 53 - 1, "cf001fffffffffffff"],
    ["-(2^31) (int32)", -(2 ** 31), "d280000000"],
    ["-(2^31) - 1 (int64)", -(2 ** 31) - 1, "d3ffffffff7fffffff"],
    ["-1.7e12", -1.7e12, "d3fffffe74301a9800"],
    ["-(2^53 - 1)", -(2 ** 53 - 1), "d3ffe0000000000001"],
  ];
  for (const [name, v, want] of cases) {
    it(name, () => {
      assert.equal(hex(encodeMsgpack(v)), want);
      if (want.startsWith("cf") || want.startsWith("d3")) assert.equal(want, int64Hex(v));
      assert.equal(decodeMsgpack(encodeMsgpack(v)), v);
    });
  }

  it("every safe integer form, against BigInt", () => {
    const values: number[] = [];
    for (let e = 32; e <= 53; e++) {
      const p = 2 ** e;
      values.push(p - 1, p, p + 1, -p + 1, -p, -p - 1, Math.floor(p * 0.7));
    }
    for (const v of values) {
      if (!Number.isSafeInteger(v) || (v >= -(2 ** 31) && v < 2 ** 32)) continue;
      assert.equal(hex(encodeMsgpack(v)), int64Hex(v), String(v));
      assert.equal(decodeMsgpack(encodeMsgpack(v)), v, String(v));
    }
  });

  it("integers beyond 2^53 that fit 64 bits are (u)int64, decoded as BigInt", () => {
    assert.equal(hex(encodeMsgpack(2 ** 63)), "cf8000000000000000");
    assert.equal(hex(encodeMsgpack(2 ** 64 - 2048)), "cffffffffffffff800");
    assert.equal(hex(encodeMsgpack(-(2 ** 63))), "d38000000000000000");
    assert.equal(decodeMsgpack(encodeMsgpack(2 ** 60)), 2n ** 60n);
    assert.equal(decodeMsgpack(encodeMsgpack(-(2 ** 60))), -(2n ** 60n));
  });

  it("integers outside 64 bits and non-integers stay float64", () => {
    assert.equal(hex(encodeMsgpack(2 ** 64)), "cb43f0000000000000");
    assert.equal(hex(encodeMsgpack(-(2 ** 63) - 4096)), "cbc3e0000000000002");
    assert.equal(decodeMsgpack(encodeMsgpack(1e300)), 1e300);
    assert.equal(hex(encodeMsgpack(1.5)), "cb3ff8000000000000");
    assert.equal(hex(encodeMsgpack(2 ** 32 + 0.5)), "cb41f0000000080000");
  });

  it("inside structures, beside strings and byte strings holding 0xcb", () => {
    const value = {
      id: 1001,
      createdAt: 1_700_000_001_001,
      name: "ËËË", // UTF-8 c3 8b: a float64 marker inside a string
      blob: Buffer.from([0xcb, 0xcb, 0xcb, 0xcb, 0xcb, 0xcb, 0xcb, 0xcb, 0xcb]),
      long: "Ë".repeat(200), // a str16 of 400 bytes, half of them 0x8b after 0xc3
      ratio: 0.25,
      list: [-(2 ** 40), 2 ** 40, "x", [2 ** 33]],
      when: new Date(0),
    };
    const bytes = encodeMsgpack(value);
    const want =
      "88" +
      "a26964" + "cd03e9" +
      "a9637265617465644174" + int64Hex(1_700_000_001_001) +
      "a46e616d65" + "a6c38bc38bc38b" +
      "a4626c6f62" + "c409cbcbcbcbcbcbcbcbcb" +
      "a46c6f6e67" + "da0190" + "c38b".repeat(200) +
      "a5726174696f" + "cb3fd0000000000000" +
      "a46c697374" + "94" + int64Hex(-(2 ** 40)) + int64Hex(2 ** 40) + "a178" + "91" + int64Hex(2 ** 33) +
      "a47768656e" + "d6ff00000000";
    assert.equal(hex(bytes), want);
    // The timestamp ext is not part of the data model (PROTOCOL.md §6.2):
    // the decoder refuses what msgpackr writes for a Date.
    assert.throws(() => decodeMsgpack(bytes), /ext types/);
    const { when: _, ...rest } = value;
    assert.deepEqual(decodeMsgpack(encodeMsgpack(rest)), rest);
  });

  it("a round trip of many values through the decoder", () => {
    let seed = 7;
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    for (let i = 0; i < 500; i++) {
      const wide = Math.floor(rnd() * 2 ** 53) * (rnd() < 0.5 ? -1 : 1);
      const value = { i, wide, list: [wide, rnd(), `s${i}`, { t: 1.7e12 + i }], bin: Buffer.from([0xcb, i & 0xff]) };
      assert.deepEqual(decodeMsgpack(encodeMsgpack(value)), value);
    }
  });
});

describe("msgpack: one value of the data model (PROTOCOL.md §6.2)", () => {
  const bytesOf = (h: string) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));

  it("accepts every type of the data model, float32 included", () => {
    for (const h of ["c0", "01", "ca3fc00000", "cb3ff8000000000000", "a161", "c40100", "92c3c2", "81a16101", "82a16180a162910a", "de0001a16101", "dc000101"]) {
      assert.doesNotThrow(() => decodeMsgpack(bytesOf(h)), h);
    }
    assert.equal(decodeMsgpack(bytesOf("ca3fc00000")), 1.5);
  });

  it("refuses trailing bytes, cut values, ext types, non-string keys, 0xc1 and bad UTF-8", () => {
    const cases: [string, RegExp][] = [
      ["0102", /trailing/],
      ["80c0", /trailing/],
      ["92c0", /ends inside/],
      ["cd01", /ends inside/],
      ["ddffffffff", /ends inside/],
      ["810102", /map key/],
      ["81c4016101", /map key/],
      ["9181c001", /map key/],
      ["d40100", /ext/],
      ["c7020501ff", /ext/],
      ["d6ff00000000", /ext/],
      ["c1", /0xc1/],
      ["a2c328", /./],
    ];
    for (const [h, why] of cases) assert.throws(() => decodeMsgpack(bytesOf(h)), why, h);
  });

  it("nesting up to 128 arrays and maps", () => {
    const nested = (n: number) => bytesOf("91".repeat(n) + "c0");
    assert.doesNotThrow(() => decodeMsgpack(nested(128)));
    assert.throws(() => decodeMsgpack(nested(129)), /nested deeper/);
  });
});

describe("HELLO size (PROTOCOL.md §4.1.2)", () => {
  const hello = (n: number, schemaPad: number, docPad: number): Hello => ({
    versions: [1],
    peer: { name: "many", lang: "ts", version: "0" },
    max_frame: 16777216,
    window: 64,
    max_calls: 4096,
    methods: Array.from({ length: n }, (_, i) => ({
      name: `m${i}`,
      kind: "unary" as const,
      input: { description: "x".repeat(schemaPad) },
      output: {},
      errors: true,
      doc: "d".repeat(docPad),
    })),
  });

  it("a HELLO that fits is unchanged; docs go first, then schemas", () => {
    const small = hello(10, 100, 100);
    assert.equal(fitHello(small), small);
    const docs = fitHello(hello(3000, 30, 300));
    assert.ok(encodeHello(docs).length <= HELLO_LIMIT);
    assert.equal(docs.methods[0].doc, undefined);
    assert.equal(docs.methods[0].errors, true);
    const schemas = fitHello(hello(3000, 300, 10));
    assert.ok(encodeHello(schemas).length <= HELLO_LIMIT);
    assert.deepEqual(schemas.methods[2999], { name: "m2999", kind: "unary", input: {}, output: {} });
  });
});
