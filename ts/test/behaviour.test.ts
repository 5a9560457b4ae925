/**
 * One behaviour suite, run on every transport (memory, Unix socket, TCP, TLS, NATS,
 * child process, worker thread over a MessagePort): every call kind both
 * ways, failures vs defects, cancellation and deadlines seen by the
 * handler, flow control bounding a fast producer, many calls in flight,
 * limits, and a crashed peer failing calls at once.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { HubwireError, type Connection } from "hubwire";
import { SETUPS, type Setup } from "./setups.js";
import { rejects } from "./rejects.js";

const bytes = (...b: number[]) => new Uint8Array(b);

async function state(conn: Connection): Promise<{ cancelled: number; produced: number }> {
  return (await conn.call("state", null)) as { cancelled: number; produced: number };
}

/** Polls `f` until it holds; the suite's timeout catches a hang. */
async function eventually(f: () => Promise<boolean>): Promise<void> {
  while (!(await f())) await new Promise((r) => setTimeout(r, 10));
}

for (const [name, open] of Object.entries(SETUPS)) {
  describe(`behaviour over ${name}`, { timeout: 60_000 }, () => {
    let s: Setup;
    before(async () => {
      s = await open();
    });
    after(async () => {
      await s.close();
    });

    it("echoes raw bytes, empty and large, unchanged", async () => {
      assert.deepEqual(await s.conn.callRaw("echo", bytes(0, 255, 128, 10)), bytes(0, 255, 128, 10));
      assert.equal((await s.conn.callRaw("echo", new Uint8Array(0))).length, 0);
      const big = new Uint8Array(1 << 20).map((_, i) => i * 7);
      assert.deepEqual(await s.conn.callRaw("echo", big), big);
    });

    it("echoes values in msgpack and json", async () => {
      const v = { n: 1, neg: -129, big: 4294967296, f: 1.5, s: "héllo ✓", t: true, l: [1, "two", [3]], z: null };
      assert.deepEqual(await s.conn.call("echo_value", v), v);
      assert.deepEqual(await s.conn.call("echo_value", v, { codec: "json" }), v);
    });

    it("delivers a declared failure with its value, returned or thrown", async () => {
      const e = await rejects(s.conn.call("fail", { kind: "division_by_zero" }), "failure");
      assert.deepEqual(e.failure, { kind: "division_by_zero" });
      const j = await rejects(s.conn.call("throw_failure", { kind: "x" }, { codec: "json" }), "failure");
      assert.deepEqual(j.failure, { kind: "x" });
    });

    it("turns a thrown bug into a defect of that call only", async () => {
      const e = await rejects(s.conn.call("panic", null), "defect");
      assert.match(e.message, /the handler has a bug/);
      await rejects(s.conn.call("refuse", null), "resource_exhausted");
      assert.equal(await s.conn.call("echo_value", "still here"), "still here");
    });

    it("answers an unknown method, a wrong kind and a bad input", async () => {
      await rejects(s.conn.call("nope", 1), "unknown_method");
      const items: unknown[] = [];
      await rejects((async () => { for await (const x of s.conn.serverStream("echo_value", 1)) items.push(x); })(), "invalid_argument");
      await rejects(s.conn.call("echo_value", bytes(1, 2), { codec: "raw" }), "invalid_argument");
    });

    it("gives a handler its context", async () => {
      const c = (await s.conn.call("context", null, { timeoutMs: 60_000 })) as { method: string; peer: string; deadline: number };
      assert.equal(c.method, "context");
      assert.equal(c.peer, "behaviour-client");
      assert.ok(c.deadline > Date.now() - 1000);
    });

    it("streams from the server past the window", async () => {
      const got: unknown[] = [];
      for await (const x of s.conn.serverStream("count", 200)) got.push(x);
      assert.deepEqual(got, Array.from({ length: 200 }, (_, i) => i));
    });

    it("ends a server stream with a declared failure after its items", async () => {
      const got: unknown[] = [];
      const e = await rejects((async () => { for await (const x of s.conn.serverStream("fail_after", 2)) got.push(x); })(), "failure");
      assert.deepEqual(got, [0, 1]);
      assert.deepEqual(e.failure, { after: 2 });
    });

    it("streams from the client past the window", async () => {
      const cs = s.conn.clientStream("sum");
      for (let i = 1; i <= 300; i++) await cs.send(i);
      assert.equal(await cs.finish(), 45150);
    });

    it("streams both ways", async () => {
      const bd = s.conn.bidi("echo_stream", { codec: "json" });
      const sent = Array.from({ length: 150 }, (_, i) => ({ i }));
      const sending = (async () => {
        for (const x of sent) await bd.send(x);
        bd.end();
      })();
      const got: unknown[] = [];
      for await (const x of bd) got.push(x);
      await sending;
      assert.deepEqual(got, sent);
    });

    it("lets the provider call the client back on the same connection", async () => {
      assert.deepEqual(await s.conn.call("callback", { method: "whoami", input: 7 }), { me: "client", got: 7 });
    });

    it("cancels through an AbortSignal, and the handler sees it", async () => {
      const before = (await state(s.conn)).cancelled;
      const ac = new AbortController();
      const p = s.conn.call("sleep", { ms: 30_000 }, { signal: ac.signal });
      setTimeout(() => ac.abort(), 50);
      await rejects(p, "cancelled");
      await eventually(async () => (await state(s.conn)).cancelled === before + 1);
    });

    it("stops a server stream when the reader leaves early", async () => {
      const before = (await state(s.conn)).cancelled;
      let n = 0;
      for await (const _ of s.conn.serverStream("forever", { ms: 1 })) if (++n === 3) break;
      await eventually(async () => (await state(s.conn)).cancelled === before + 1);
    });

    it("enforces a deadline on both sides", async () => {
      const before = (await state(s.conn)).cancelled;
      await rejects(s.conn.call("sleep", { ms: 30_000 }, { timeoutMs: 50 }), "deadline_exceeded");
      await eventually(async () => (await state(s.conn)).cancelled === before + 1);
      // Mid-stream: the stream never ends by itself, the deadline ends it.
      await rejects((async () => { for await (const _ of s.conn.serverStream("forever", { ms: 5 }, { timeoutMs: 200 })); })(), "deadline_exceeded");
    });

    it("bounds a fast producer by the window (server stream)", async () => {
      const it = s.conn.serverStream("flood", null)[Symbol.asyncIterator]();
      await it.next();
      // The consumer stops reading: the producer can get at most one window (64) ahead.
      await eventually(async () => (await state(s.conn)).produced >= 64);
      await new Promise((r) => setTimeout(r, 100));
      assert.ok((await state(s.conn)).produced <= 66, `produced ${(await state(s.conn)).produced}`);
      await it.return!();
    });

    it("bounds a fast caller by the window (client stream)", async () => {
      const cs = s.conn.clientStream("hold");
      let sent = 0;
      const sending = (async () => {
        for (let i = 0; i < 200; i++) {
          await cs.send(i);
          sent++;
        }
        return cs.finish();
      })();
      await eventually(async () => sent >= 64);
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(sent, 64, "sends beyond the window wait for credit");
      assert.equal(await s.conn.call("release", null), true);
      assert.equal(await sending, 200);
    });

    it("answers 1000 concurrent calls, each its own", async () => {
      const calls = Array.from({ length: 1000 }, (_, i) =>
        i % 2 ? s.conn.call("echo_value", i) : s.conn.call("sleep", { ms: i % 7 }).then(() => i),
      );
      assert.deepEqual(await Promise.all(calls), Array.from({ length: 1000 }, (_, i) => i));
    });

    it("refuses a payload over the peer's max_frame locally", async () => {
      await rejects(s.conn.callRaw("echo", new Uint8Array(16 * 1024 * 1024)), "too_large");
      assert.equal(await s.conn.call("echo_value", 1), 1);
    });

    it("answers a ping", async () => {
      assert.ok((await s.conn.ping()) >= 0);
    });

    it("fails in-flight calls at once when the peer crashes", async () => {
      const crashed = await open();
      try {
        const pending = [crashed.conn.call("sleep", { ms: 30_000 }), crashed.conn.call("sleep", { ms: 30_000 })];
        const stream = crashed.conn.serverStream("forever", { ms: 10 });
        await stream.next();
        crashed.crash();
        for (const p of pending) await rejects(p, "unavailable");
        await rejects((async () => { for await (const _ of stream); })(), "unavailable");
        await rejects(crashed.conn.call("echo_value", 1), "unavailable");
        assert.ok((await crashed.conn.closed) instanceof HubwireError);
      } finally {
        // Also when it fails: a unix setup's close removes its socket's directory.
        await crashed.close();
      }
    });

    if (name === "child") {
      it("turns the child's stdout into log lines, never frames", async () => {
        await s.conn.call("print", "hello from the child");
        await eventually(async () => s.logs.includes("hello from the child"));
        assert.ok(s.logs.includes("provider starting: this line is not a frame"));
      });
    }
  });
}
