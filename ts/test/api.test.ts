/**
 * The public vocabulary: the serving seam (a Service that is not a
 * Provider, through `testing.pair`), the two halves of a stream
 * (`ItemStream`, `ItemSink`) on both sides, and `provider.serve` on a
 * bound listener.
 */

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  Codec,
  Connection,
  decodeMsgpack,
  encodeMsgpack,
  fail,
  HubwireError,
  ItemSink,
  ItemStream,
  KIND,
  Provider,
  testing,
  unix,
  type Incoming,
  type MethodInfo,
  type Payload,
  type Service,
  type ServiceOutcome,
} from "hubwire";

const bytes = (...b: number[]) => new Uint8Array(b);

/** A service written against the seam alone: no Provider, no handlers. */
class Bare implements Service {
  seen: Incoming[] = [];

  methods(): MethodInfo[] {
    return [
      { name: "echo", kind: "unary", input: {}, output: {} },
      { name: "later", kind: "unary", input: {}, output: {} },
      { name: "count", kind: "server_stream", input: {}, output: {} },
      { name: "total", kind: "client_stream", input: {}, output: {} },
    ];
  }

  call(incoming: Incoming): ServiceOutcome | Promise<ServiceOutcome> {
    this.seen.push(incoming);
    switch (incoming.method) {
      case "echo":
        return { codec: incoming.codec, bytes: incoming.payload };
      case "later":
        return new Promise((resolve) => setTimeout(() => resolve({ codec: Codec.Raw, bytes: bytes(7) }), 5));
      case "count":
        return (async () => {
          const n = decodeMsgpack(incoming.payload) as number;
          for (let i = 0; i < n; i++) {
            const wait = incoming.sendItem(Codec.Msgpack, encodeMsgpack(i));
            if (wait !== null) await wait;
          }
          return undefined;
        })();
      case "total":
        return (async () => {
          let t = 0;
          for await (const item of incoming.items!) t += decodeMsgpack((item as Payload).bytes) as number;
          return { codec: Codec.Msgpack, bytes: encodeMsgpack(t) };
        })();
      case "declared":
        throw fail({ kind: "declared" });
      default:
        throw new Error(`no ${incoming.method}`);
    }
  }
}

describe("the serving seam (a bare Service)", () => {
  it("advertises its methods and answers through testing.pair", async () => {
    const service = new Bare();
    const { client, server } = await testing.pair(service);
    assert.deepEqual(
      client.peer.methods.map((m) => m.name),
      ["echo", "later", "count", "total"],
    );
    assert.deepEqual(await client.callRaw("echo", bytes(1, 2, 3)), bytes(1, 2, 3));
    assert.equal(await client.call("echo", { a: 1 }, { codec: "json" }).then((v) => JSON.stringify(v)), '{"a":1}');
    assert.deepEqual(await client.callRaw("later", bytes()), bytes(7));
    assert.equal(service.seen[0]!.kind, KIND.unary);
    assert.equal(service.seen[0]!.connection, server, "the engine hands the service its Connection");
    assert.equal(service.seen[0]!.peer.name, "ts");
    client.close();
  });

  it("streams out with sendItem, and in through items", async () => {
    const { client } = await testing.pair(new Bare());
    const got: unknown[] = [];
    for await (const x of client.serverStream("count", 150)) got.push(x);
    assert.deepEqual(got, Array.from({ length: 150 }, (_, i) => i));
    const cs = client.clientStream("total");
    for (let i = 1; i <= 100; i++) await cs.send(i);
    assert.equal(await cs.finish(), 5050);
    client.close();
  });

  it("answers what the service throws: a Failure in MessagePack for a raw request, anything else a defect", async () => {
    const { client } = await testing.pair(new Bare());
    await assert.rejects(client.callRaw("declared", bytes()), (e: HubwireError) => e.code === "failure" && (e.failure as { kind: string }).kind === "declared");
    await assert.rejects(client.call("nope", 1), (e: HubwireError) => e.code === "defect" && /no nope/.test(e.message));
    assert.deepEqual(await client.callRaw("echo", bytes(9)), bytes(9), "and goes on");
    client.close();
  });

  it("refuses every method on a connection that offers none", async () => {
    const { client, server } = await testing.pair(new Bare());
    await assert.rejects(server.call("anything", 1), (e: HubwireError) => e.code === "unknown_method" && /offered: \[\]/.test(e.message));
    client.close();
  });
});

describe("the two halves of a stream", () => {
  const provider = () =>
    new Provider("streams")
      .serverStream("count", function* (n: number) {
        for (let i = 0; i < n; i++) yield i;
      })
      .clientStream("kinds", async (items, ctx) => {
        const kinds = [items instanceof ItemStream];
        for await (const x of items) kinds.push(typeof x === "number");
        return { kinds, method: ctx.method };
      })
      .bidi("echo", async function* (items) {
        for await (const x of items) yield x;
      })
      .clientStream("first", async (items: ItemStream<number>) => {
        const first = await items.next();
        items.cancel(); // stops reading: the rest is dropped
        return first.value;
      });

  it("is an ItemStream on both sides, and an ItemSink for the caller's inputs", async () => {
    const { client } = await testing.pair(provider());
    const s = client.serverStream("count", 3);
    assert.ok(s instanceof ItemStream);
    assert.deepEqual(await s.next(), { done: false, value: 0 });

    const cs = client.clientStream("kinds");
    assert.ok(cs.sink instanceof ItemSink);
    await cs.sink.send(1);
    await cs.send(2);
    assert.deepEqual(await cs.finish(), { kinds: [true, true, true], method: "kinds" });

    const bd = client.bidi("echo");
    assert.ok(bd instanceof ItemStream && bd.sink instanceof ItemSink);
    await bd.sink.send("a");
    bd.sink.end();
    await assert.rejects(bd.send("late"), (e: HubwireError) => e.code === "invalid_argument");
    const got: unknown[] = [];
    for await (const x of bd) got.push(x);
    assert.deepEqual(got, ["a"]);
    client.close();
  });

  it("lets a handler stop reading its inputs", async () => {
    const { client } = await testing.pair(provider());
    const cs = client.clientStream("first");
    await cs.send(41);
    await cs.send(42);
    assert.equal(await cs.finish(), 41);
    client.close();
  });

  it("cancels a caller's stream: CANCEL, and reading on gives cancelled", async () => {
    const { client } = await testing.pair(provider());
    const s = client.serverStream("count", 1_000_000);
    await s.next();
    s.cancel();
    await assert.rejects(
      (async () => {
        for (;;) if ((await s.next()).done) break;
      })(),
      (e: HubwireError) => e.code === "cancelled",
    );
    client.close();
  });
});

describe("provider.serve(listener)", () => {
  it("serves every connection the listener accepts, those that came early too, until it closes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hubwire-ts-"));
    const path = join(dir, "serve.sock");
    try {
      const listener = await unix.listen(path);
      // Dialled before anyone serves: the connection waits for the provider.
      const early = Connection.dial(await unix.connect(path));
      const provider = new Provider("listening").unary("echo", (b: Uint8Array) => b, { raw: true });
      let served = false;
      const serving = provider.serve(listener).then(() => (served = true));
      const a = await early;
      const b = await Connection.dial(await unix.connect(path));
      assert.equal(a.peer.peer.name, "listening");
      assert.deepEqual(await b.callRaw("echo", bytes(5)), bytes(5));
      assert.throws(() => listener.accept(() => {}), /already/);
      a.close();
      b.close();
      assert.equal(served, false);
      await listener.close();
      await serving;
      assert.equal(served, true, "serve resolves once the listener is closed");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
