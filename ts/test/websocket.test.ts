/**
 * The WebSocket transport (`spec/PROTOCOL.md` §11.3) in Node, against a
 * real hub and its Rust test provider (Node 20 has no global WebSocket:
 * the `ws` package stands in), and against a `ws` server playing a peer
 * that breaks the rules.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import WS, { WebSocketServer } from "ws";
import { Connection, HubwireError, websocket } from "hubwire";
import { startHub, type RunningHub } from "./hub.js";

const WebSocket = WS as unknown as websocket.WebSocketConstructor;

describe("websocket transport against a real hub", { timeout: 60_000 }, () => {
  let hub: RunningHub;
  let conn: Connection;
  before(async () => {
    hub = await startHub('allowed_origins = ["http://good.example"]');
    conn = await Connection.dial(websocket.connect(hub.url, { WebSocket }), { name: "node-ws" });
  });
  after(async () => {
    conn?.close();
    await hub?.stop();
  });

  it("calls a method of the Rust provider through the hub", async () => {
    assert.deepEqual(await conn.callRaw("echo", new Uint8Array([0, 255, 7])), new Uint8Array([0, 255, 7]));
    assert.equal(conn.peer.peer.name, "hubwire");
  });

  it("carries frames larger than a message both ways (3 MiB echo)", async () => {
    const big = new Uint8Array(3 << 20).map((_, i) => i % 251);
    const back = await conn.callRaw("echo", big);
    assert.equal(back.length, big.length);
    assert.ok(back.every((b, i) => b === big[i]), "bytes differ");
  });

  it("streams both ways under flow control, many calls at once", async () => {
    const got: unknown[] = [];
    for await (const x of conn.serverStream("count", 500)) got.push(x);
    assert.deepEqual(got, Array.from({ length: 500 }, (_, i) => i));
    const sum = conn.clientStream("sum");
    for (let i = 1; i <= 100; i++) await sum.send(i);
    assert.equal(await sum.finish(), 5050);
    const r = await Promise.all(Array.from({ length: 300 }, (_, i) => conn.callRaw("echo", new TextEncoder().encode(String(i)))));
    assert.deepEqual(r.map((b) => new TextDecoder().decode(b)), Array.from({ length: 300 }, (_, i) => String(i)));
  });

  it("is refused at the upgrade from an Origin not in allowed_origins, allowed from one in it", async () => {
    const from = (origin: string) =>
      class extends WS {
        constructor(url: string, protocols?: string | string[]) {
          super(url, protocols, { origin });
        }
      } as unknown as websocket.WebSocketConstructor;
    await assert.rejects(
      Connection.dial(websocket.connect(hub.url, { WebSocket: from("http://evil.example") })),
      (e: HubwireError) => e.code === "unavailable" && /could not open/.test(e.message),
    );
    const ok = await Connection.dial(websocket.connect(hub.url, { WebSocket: from("http://good.example") }));
    assert.deepEqual(await ok.callRaw("echo", new Uint8Array([1])), new Uint8Array([1]));
    ok.close();
  });
});

describe("websocket transport against a peer that breaks the rules", { timeout: 30_000 }, () => {
  it("closes with 1003 on a text message and ends the connection", async () => {
    const server = new WebSocketServer({ port: 0, host: "127.0.0.1", handleProtocols: () => websocket.SUBPROTOCOL });
    await new Promise((r) => server.once("listening", r));
    const closed = new Promise<number>((resolve) =>
      server.once("connection", (peer) => {
        peer.send("not bytes");
        peer.once("close", (code) => resolve(code));
      }),
    );
    const port = (server.address() as { port: number }).port;
    await assert.rejects(Connection.dial(websocket.connect(`ws://127.0.0.1:${port}/`, { WebSocket })), (e: HubwireError) =>
      /text WebSocket message/.test(e.message),
    );
    assert.equal(await closed, 1003);
    await new Promise((r) => server.close(r));
  });

  it("fails when the server does not take the subprotocol", async () => {
    const server = new WebSocketServer({ port: 0, host: "127.0.0.1", handleProtocols: () => false });
    await new Promise((r) => server.once("listening", r));
    const port = (server.address() as { port: number }).port;
    await assert.rejects(Connection.dial(websocket.connect(`ws://127.0.0.1:${port}/`, { WebSocket })), (e: HubwireError) =>
      e.code === "unavailable",
    );
    await new Promise((r) => server.close(r));
  });

  it("says what to do where there is no global WebSocket", () => {
    const g = globalThis as { WebSocket?: unknown };
    const saved = Object.getOwnPropertyDescriptor(g, "WebSocket");
    Object.defineProperty(g, "WebSocket", { value: undefined, configurable: true, writable: true });
    try {
      assert.throws(() => websocket.connect("ws://127.0.0.1:1/"), /pass one/);
    } finally {
      if (saved) Object.defineProperty(g, "WebSocket", saved);
      else delete g.WebSocket;
    }
  });
});
