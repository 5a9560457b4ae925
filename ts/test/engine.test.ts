/**
 * Unit tests of the engine's pure parts: flow-control accounting
 * (`src/engine/credit.ts`) and call id allocation (`src/engine/calls.ts`).
 * They reach into the engine directly: these are not public API.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HubwireError } from "hubwire";
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
