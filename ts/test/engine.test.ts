/**
 * Unit tests of the engine's pure parts: flow-control accounting
 * (`src/engine/credit.ts`), call id allocation (`src/engine/calls.ts`)
 * and the call kinds (`src/hello.ts`); and the serving fast path, on a
 * transport driven by hand. They reach into the engine directly: these
 * are not public API.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  Codec,
  Connection,
  decodeFrame,
  encodeFrame,
  HubwireError,
  KIND,
  KINDS,
  streamsIn,
  streamsOut,
  type Frame,
  type Hello,
  type Service,
  type Transport,
  type TransportSink,
} from "hubwire";
import { CallIds } from "../src/engine/calls.js";
import { CreditGate, RecvWindow } from "../src/engine/credit.js";

describe("engine: receive window (credit granted)", () => {
  it("accepts ITEMs up to the window and detects the overrun", () => {
    const w = new RecvWindow(3);
    assert.equal(w.onItem(), true);
    assert.equal(w.onItem(), true);
    assert.equal(w.onItem(), true);
    assert.equal(w.onItem(), false, "a fourth ITEM overran a window of 3");
    assert.equal(w.credit, 0);
  });

  it("grants credit back in batches of half the window", () => {
    const w = new RecvWindow(64);
    for (let i = 0; i < 64; i++) assert.ok(w.onItem());
    const grants: number[] = [];
    for (let i = 0; i < 64; i++) grants.push(w.consumed());
    // One grant of 32 after the 32nd item consumed, another after the 64th.
    assert.deepEqual(
      grants.map((g, i) => [i, g]).filter(([, g]) => g !== 0),
      [
        [31, 32],
        [63, 32],
      ],
    );
  });

  it("counts the credit as restored before the grant is sent", () => {
    const w = new RecvWindow(8);
    for (let i = 0; i < 8; i++) assert.ok(w.onItem());
    assert.equal(w.onItem(), false);
    assert.equal(w.consumed() + w.consumed() + w.consumed(), 0, "no grant before half the window");
    assert.equal(w.credit, 0);
    const grant = w.consumed();
    assert.equal(grant, 4);
    // Before the CREDIT frame leaves, the 4 credits already count: the peer
    // may send 4 more ITEMs at once, and a fifth is an overrun.
    assert.equal(w.credit, 4);
    for (let i = 0; i < 4; i++) assert.ok(w.onItem(), `item ${i} of the grant`);
    assert.equal(w.onItem(), false);
  });

  it("grants after every ITEM with a window of 1", () => {
    const w = new RecvWindow(1);
    assert.equal(w.batch, 1);
    assert.ok(w.onItem());
    assert.equal(w.onItem(), false);
    assert.equal(w.consumed(), 1);
    assert.ok(w.onItem());
  });
});

describe("engine: send credit", () => {
  it("sends at once while there is credit, then waits in order for grants", async () => {
    const g = new CreditGate(2);
    assert.equal(g.take(), null);
    assert.equal(g.take(), null);
    const order: number[] = [];
    const waits = [1, 2, 3].map((i) => g.take()!.then(() => order.push(i)));
    g.add(1);
    await waits[0];
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, [1], "one credit wakes one waiter, the first");
    g.add(5);
    await Promise.all(waits);
    assert.deepEqual(order, [1, 2, 3]);
    assert.equal(g.available, 3, "what the waiters did not take stays");
  });

  it("fails waiting and later sends once the call has ended", async () => {
    const g = new CreditGate(0);
    const waiting = g.take()!;
    const why = new HubwireError("cancelled", "the call has ended");
    g.close(why);
    await assert.rejects(waiting, (e) => e === why);
    await assert.rejects(g.take()!, (e) => e === why);
  });
});

describe("engine: call ids", () => {
  it("gives the dialer odd ids and the acceptor even ones, from 1 and 2", () => {
    const none = new Set<number>();
    const dialer = new CallIds(true);
    const acceptor = new CallIds(false);
    assert.deepEqual([dialer.take(none), dialer.take(none), dialer.take(none)], [1, 3, 5]);
    assert.deepEqual([acceptor.take(none), acceptor.take(none), acceptor.take(none)], [2, 4, 6]);
  });

  it("wraps past 0xffffffff to the first id of its parity", () => {
    const none = new Set<number>();
    const dialer = new CallIds(true, 0xfffffffd);
    assert.deepEqual([dialer.take(none), dialer.take(none), dialer.take(none)], [0xfffffffd, 0xffffffff, 1]);
    const acceptor = new CallIds(false, 0xfffffffc);
    assert.deepEqual([acceptor.take(none), acceptor.take(none), acceptor.take(none)], [0xfffffffc, 0xfffffffe, 2]);
  });

  it("skips ids still in use, across the wrap too", () => {
    const live = new Set([0xffffffff, 1, 3, 9]);
    const ids = new CallIds(true, 0xfffffffd);
    assert.deepEqual([ids.take(live), ids.take(live), ids.take(live), ids.take(live)], [0xfffffffd, 5, 7, 11]);
    const even = new CallIds(false);
    assert.equal(even.take(new Set([2, 4])), 6);
  });

  it("refuses a start of the other parity", () => {
    assert.throws(() => new CallIds(true, 2), RangeError);
    assert.throws(() => new CallIds(false, 0xffffffff), RangeError);
  });
});

describe("engine: call kinds", () => {
  it("says which kinds stream inputs and outputs", () => {
    assert.deepEqual(
      [KIND.unary, KIND.serverStream, KIND.clientStream, KIND.bidi].map((k) => [KINDS[k], streamsIn(k), streamsOut(k)]),
      [
        ["unary", false, false],
        ["server_stream", false, true],
        ["client_stream", true, false],
        ["bidi", true, true],
      ],
    );
  });
});

/** A transport the test drives by hand: bytes in through its sink, bytes out kept. */
class Tap implements Transport {
  readonly description = "tap";
  sink!: TransportSink;
  written: Uint8Array[] = [];
  start(sink: TransportSink): void {
    this.sink = sink;
  }
  write(b: Uint8Array): void {
    this.written.push(b.slice());
  }
  close(): void {}
  /** Every frame written so far. */
  frames(): Frame[] {
    const all = Buffer.concat(this.written);
    const out: Frame[] = [];
    for (let off = 0; off < all.length; ) {
      const d = decodeFrame(new Uint8Array(all.buffer, all.byteOffset + off, all.length - off))!;
      out.push(d.frame);
      off += d.length;
    }
    return out;
  }
}

const PEER: Hello = { versions: [1], peer: { name: "tap", lang: "test", version: "0" }, max_frame: 1 << 24, window: 64, max_calls: 64, methods: [] };

describe("engine: serving", () => {
  it("answers a synchronous outcome in the same tick, without a promise; a promised one when it settles", async () => {
    let calls = 0;
    const service: Service = {
      methods: () => [],
      call: (incoming) => {
        calls++;
        if (incoming.method === "later") return Promise.resolve({ codec: Codec.Raw, bytes: new Uint8Array([2]) });
        return { codec: Codec.Raw, bytes: incoming.payload };
      },
    };
    const t = new Tap();
    const opening = Connection.accept(t, { service });
    t.sink.onData(encodeFrame({ type: "hello", body: PEER }));
    const conn = await opening;
    const request = (id: number, method: string) =>
      encodeFrame({ type: "request", call_id: id, kind: "unary", codec: "raw", timeout_ms: 0, method, payload: new Uint8Array([id]) });

    // Count every promise made while the REQUEST is handled.
    const RealPromise = globalThis.Promise;
    let promises = 0;
    globalThis.Promise = class extends RealPromise<unknown> {
      constructor(executor: ConstructorParameters<typeof Promise<unknown>>[0]) {
        promises++;
        super(executor);
      }
    } as PromiseConstructor;
    try {
      t.sink.onData(request(1, "echo"));
    } finally {
      globalThis.Promise = RealPromise;
    }
    assert.equal(calls, 1);
    assert.equal(conn.core.served.size, 0, "answered (and forgotten) before onData returned");
    assert.equal(promises, 0, "no promise on the way");

    t.sink.onData(request(3, "later"));
    assert.equal(conn.core.served.size, 1, "a promised outcome keeps the call live until it settles");
    await new Promise((r) => setTimeout(r, 10));
    assert.equal(conn.core.served.size, 0);
    const responses = t.frames().filter((f) => f.type === "response");
    assert.deepEqual(
      responses.map((f) => f.type === "response" && [f.call_id, f.code, [...f.payload]]),
      [
        [1, "ok", [1]],
        [3, "ok", [2]],
      ],
    );
    conn.close();
  });
});
