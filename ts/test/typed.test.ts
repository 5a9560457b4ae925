/**
 * The typed layer with two Standard Schema validators (zod and valibot):
 * a declared failure arrives typed, a thrown bug as a defect, each side
 * validates what it receives, validation switches off per method, and
 * every call kind works through it.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import * as v from "valibot";
import { z } from "zod";
import { fail, HubwireError, method, Provider, testing, type Connection } from "hubwire";

const divide = method("divide", {
  input: z.object({ a: z.number(), b: z.number() }),
  output: z.number(),
  failure: v.object({ kind: v.literal("division_by_zero") }),
  doc: "Divides a by b",
});
const buggy = method("buggy", { input: v.number(), output: v.number() });
const strict = method("strict", { input: z.object({ n: z.number().int() }), output: z.number() });
const loose = method("loose", { input: z.object({ n: z.number().int() }), output: z.number(), validate: false });
const liar = method("liar", { input: z.null(), output: z.string() });
const liarLoose = method("liar_loose", { input: z.null(), output: z.string(), validate: false });
const countdown = method("countdown", { kind: "server_stream", input: v.pipe(v.number(), v.integer()), output: v.number() });
const total = method("total", { kind: "client_stream", input: z.number(), output: z.number() });
const shout = method("shout", { kind: "bidi", input: z.string(), output: z.string() });
const parsed = method("parsed", { input: z.string().transform((s) => s.length), output: z.number() });

function provider(): Provider {
  return new Provider("typed")
    .implement(divide, ({ a, b }) => (b === 0 ? fail({ kind: "division_by_zero" as const }) : a / b))
    .implement(buggy, (n) => {
      if (n > 0) throw new TypeError("an honest bug");
      return n;
    })
    .implement(strict, ({ n }) => n * 2)
    .implement(loose, ({ n }) => n * 2)
    .implement(liar, () => 42 as unknown as string)
    .implement(liarLoose, () => 42 as unknown as string)
    .implement(countdown, function* (n) {
      for (let i = n; i > 0; i--) yield i;
    })
    .implement(total, async (items) => {
      let t = 0;
      for await (const x of items) t += x;
      return t;
    })
    .implement(shout, async function* (items) {
      for await (const s of items) yield s.toUpperCase();
    })
    .implement(parsed, (len) => len);
}

async function connect(): Promise<Connection> {
  return (await testing.pair(provider())).client;
}

describe("typed methods", () => {
  it("returns the output as an ok outcome, and a declared failure typed", async () => {
    const conn = await connect();
    assert.deepEqual(await divide.call(conn, { a: 1, b: 4 }), { ok: true, value: 0.25 });
    const out = await divide.call(conn, { a: 1, b: 0 });
    assert.equal(out.ok, false);
    if (!out.ok) assert.equal(out.failure.kind, "division_by_zero");
    conn.close();
  });

  it("delivers a thrown bug as a defect error, not a failure", async () => {
    const conn = await connect();
    await assert.rejects(buggy.call(conn, 1), (e: HubwireError) => e.code === "defect" && /an honest bug/.test(e.message));
    assert.deepEqual(await buggy.call(conn, -1), { ok: true, value: -1 });
    conn.close();
  });

  it("answers an invalid input with invalid_argument when validation is on", async () => {
    const conn = await connect();
    await assert.rejects(strict.call(conn, { n: 1.5 }), (e: HubwireError) => e.code === "invalid_argument" && /strict: input/.test(e.message));
    assert.deepEqual(await strict.call(conn, { n: 2 }), { ok: true, value: 4 });
    conn.close();
  });

  it("lets an invalid input through when validation is off for the method", async () => {
    const conn = await connect();
    assert.deepEqual(await loose.call(conn, { n: 1.5 }), { ok: true, value: 3 });
    conn.close();
  });

  it("fails the caller with internal when the output does not match, unless validation is off", async () => {
    const conn = await connect();
    await assert.rejects(liar.call(conn, null), (e: HubwireError) => e.code === "internal");
    assert.deepEqual(await liarLoose.call(conn, null), { ok: true, value: 42 });
    conn.close();
  });

  it("hands the handler the schema's output type (transforms apply)", async () => {
    const conn = await connect();
    assert.deepEqual(await parsed.call(conn, "four"), { ok: true, value: 4 });
    conn.close();
  });

  it("works for every call kind", async () => {
    const conn = await connect();
    const got: number[] = [];
    for await (const x of countdown.stream(conn, 3)) got.push(x);
    assert.deepEqual(got, [3, 2, 1]);
    const t = total.open(conn);
    for (const x of [1, 2, 3]) await t.send(x);
    assert.deepEqual(await t.finish(), { ok: true, value: 6 });
    const s = shout.open(conn);
    await s.send("a");
    await s.send("b");
    s.end();
    const loud: string[] = [];
    for await (const x of s) loud.push(x);
    assert.deepEqual(loud, ["A", "B"]);
    conn.close();
  });

  it("advertises the method in HELLO, with JSON Schemas and its doc", async () => {
    const conn = await connect();
    const info = conn.peer.methods.find((m) => m.name === "divide");
    assert.ok(info);
    assert.equal(info.kind, "unary");
    assert.equal(info.doc, "Divides a by b");
    assert.equal((info.input as { type?: string }).type, "object");
    assert.ok(info.errors !== undefined, "a method with a failure schema lists errors");
    conn.close();
  });
});
