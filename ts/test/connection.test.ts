/**
 * Connection-level behaviour against a raw peer on the memory transport:
 * bad input answered with GOAWAY and a close (§7.1) while other
 * connections go on, handshake failures, `max_calls` both ways,
 * `max_frame`, and draining.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { Connection, decodeFrame, encodeFrame, HubwireError, memory, Provider, testing, type Frame, type Transport } from "hubwire";
import { RAW_HELLO as HELLO } from "./fixtures/hello.js";

const SPEC = fileURLToPath(new URL("../../../spec/", import.meta.url));
const unhex = (s: string) => new Uint8Array(Buffer.from(s, "hex"));

/** The far end of a connection, speaking frames by hand. */
class RawPeer {
  private buf = new Uint8Array(0);
  private frames: Frame[] = [];
  private waiting: (() => void) | null = null;
  ended = false;

  constructor(readonly t: Transport) {
    t.start({
      onData: (b) => {
        const all = new Uint8Array(this.buf.length + b.length);
        all.set(this.buf);
        all.set(b, this.buf.length);
        this.buf = all;
        for (;;) {
          const d = decodeFrame(this.buf);
          if (d === null) break;
          this.frames.push(d.frame);
          this.buf = this.buf.subarray(d.length);
        }
        this.waiting?.();
      },
      onEnd: () => {
        this.ended = true;
        this.waiting?.();
      },
    });
  }

  send(f: Frame | Uint8Array): void {
    this.t.write(f instanceof Uint8Array ? f : encodeFrame(f));
  }

  /** The next frame, or null at end of stream. */
  async next(): Promise<Frame | null> {
    while (this.frames.length === 0 && !this.ended) await new Promise<void>((r) => (this.waiting = r));
    return this.frames.shift() ?? null;
  }
}

function echoProvider(): Provider {
  return new Provider("p")
    .unary("echo", (b: Uint8Array) => b, { raw: true })
    .unary("sleep", (ms: number) => new Promise<number>((r) => setTimeout(() => r(ms), ms)));
}

/** A provider connection with a raw peer as the dialer, after the handshake. */
async function rawDialer(options: { maxCalls?: number; maxFrame?: number } = {}): Promise<{ peer: RawPeer; served: Promise<Connection> }> {
  const [a, b] = memory.pair();
  const served = echoProvider().serveTransport(b, options);
  const peer = new RawPeer(a);
  peer.send({ type: "hello", body: HELLO });
  const h = await peer.next();
  assert.equal(h?.type, "hello");
  return { peer, served };
}

describe("bad input", () => {
  const reject = JSON.parse(readFileSync(SPEC + "vectors/reject.json", "utf8"));
  for (const c of reject.cases) {
    it(`GOAWAY ${c.error} for ${c.name}`, async () => {
      const { peer, served } = await rawDialer({ maxFrame: c.max_frame });
      peer.send(unhex(c.hex));
      if (c.eof) {
        // The memory transport has no half-close, so the GOAWAY cannot
        // reach us after our end of stream: the provider says what it
        // sent (the conformance suite checks the wire over sockets).
        peer.t.close();
        const why = await (await served).closed;
        assert.equal(why.code, "unavailable");
        assert.ok(why.message.includes(`sent GOAWAY ${c.error}`), why.message);
        if (c.message_contains) assert.ok(why.message.includes(c.message_contains), why.message);
        return;
      }
      let f = await peer.next();
      while (f !== null && f.type !== "goaway") f = await peer.next();
      assert.ok(f !== null && f.type === "goaway", "a GOAWAY");
      assert.equal(f.code, c.error, f.message);
      if (c.message_contains) assert.ok(f.message.includes(c.message_contains), f.message);
      assert.equal(await peer.next(), null, "then the connection closes");
      const conn = await served;
      assert.equal((await conn.closed).code, "unavailable");
    });
  }

  it("leaves the provider's other connections alone", async () => {
    const provider = echoProvider();
    const { client: good } = await testing.pair(provider);
    const [a1, b1] = memory.pair();
    void provider.serveTransport(b1);
    const bad = new RawPeer(a1);
    bad.send({ type: "hello", body: HELLO });
    bad.send(unhex("0000000001ff000000000000"));
    let f = await bad.next();
    while (f !== null && f.type !== "goaway") f = await bad.next();
    assert.equal(f?.type === "goaway" && f.code, "protocol_error");
    assert.deepEqual(await good.callRaw("echo", new Uint8Array([1])), new Uint8Array([1]));
    good.close();
  });

  it("fails the caller's pending calls with unavailable when the peer sends GOAWAY", async () => {
    const [a, b] = memory.pair();
    const peer = new RawPeer(b);
    peer.send({ type: "hello", body: HELLO });
    const conn = await Connection.dial(a);
    const pending = conn.call("anything", 1);
    assert.equal((await peer.next())?.type, "hello");
    assert.equal((await peer.next())?.type, "request");
    peer.send({ type: "goaway", last_id: 0, code: "protocol_error", message: "you are wrong" });
    await assert.rejects(pending, (e: HubwireError) => e.code === "unavailable" && /you are wrong/.test(e.message));
  });
});

describe("handshake", () => {
  it("refuses a first frame that is not HELLO", async () => {
    const [a, b] = memory.pair();
    const served = echoProvider().serveTransport(b);
    const peer = new RawPeer(a);
    peer.send({ type: "ping", data: new Uint8Array(8) });
    assert.equal((await peer.next())?.type, "hello");
    const g = await peer.next();
    assert.ok(g?.type === "goaway" && g.code === "protocol_error", JSON.stringify(g));
    await assert.rejects(served, (e: HubwireError) => e.code === "protocol_error");
  });

  it("reads a HELLO over a small max_frame up to 1 MiB, then applies max_frame (§4.1.2)", async () => {
    const methods = Array.from({ length: 1000 }, (_, i) => ({
      name: `method_${i}`,
      kind: "unary" as const,
      input: { type: "object", description: "padding so that the HELLO grows" },
      output: {},
    }));
    const [a, b] = memory.pair();
    const served = echoProvider().serveTransport(b, { maxFrame: 4096 });
    const peer = new RawPeer(a);
    const big = encodeFrame({ type: "hello", body: { ...HELLO, methods } });
    assert.ok(big.length > 64 * 1024 && big.length <= 1 << 20, `${big.length} bytes`);
    peer.send(big);
    assert.equal((await peer.next())?.type, "hello");
    peer.send({ type: "ping", data: new Uint8Array(8).fill(7) });
    assert.equal((await peer.next())?.type, "pong");
    peer.send(encodeFrame({ type: "item", call_id: 1, codec: "raw", payload: new Uint8Array(5000) }).subarray(0, 12));
    const g = await peer.next();
    assert.ok(g?.type === "goaway" && g.code === "too_large", JSON.stringify(g));
    await served;
  });

  it("refuses a first frame over 1 MiB with too_large", async () => {
    const [a, b] = memory.pair();
    const served = echoProvider().serveTransport(b, { maxFrame: 4096 });
    const peer = new RawPeer(a);
    const header = encodeFrame({ type: "hello", body: HELLO }).slice(0, 12);
    new DataView(header.buffer).setUint32(0, (1 << 20) + 1, true);
    peer.send(header);
    assert.equal((await peer.next())?.type, "hello");
    const g = await peer.next();
    assert.ok(g?.type === "goaway" && g.code === "too_large", JSON.stringify(g));
    await assert.rejects(served, (e: HubwireError) => e.code === "too_large");
  });

  it("fails on no common version, naming both lists", async () => {
    const [a, b] = memory.pair();
    const peer = new RawPeer(b);
    peer.send({ type: "hello", body: { ...HELLO, versions: [2, 3] } });
    await assert.rejects(Connection.dial(a), (e: HubwireError) => e.code === "unsupported_version" && /\[2, 3\]/.test(e.message));
    assert.equal((await peer.next())?.type, "hello");
    const g = await peer.next();
    assert.ok(g?.type === "goaway" && g.code === "unsupported_version");
  });

  it("times out a peer that never says HELLO", async () => {
    const [a] = memory.pair();
    await assert.rejects(Connection.dial(a, { handshakeTimeoutMs: 50 }), (e: HubwireError) => e.code === "deadline_exceeded");
  });
});

describe("limits", () => {
  it("queues calls beyond the peer's max_calls instead of exceeding it", async () => {
    const { client: conn } = await testing.pair(echoProvider(), { server: { maxCalls: 2 } });
    assert.equal(conn.peer.max_calls, 2);
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => conn.call("sleep", i)));
    assert.deepEqual(results, Array.from({ length: 10 }, (_, i) => i));
    conn.close();
  });

  it("answers resource_exhausted to a REQUEST beyond its own max_calls", async () => {
    const { peer } = await rawDialer({ maxCalls: 2 });
    for (const id of [1, 3, 5]) {
      peer.send({ type: "request", call_id: id, kind: "unary", codec: "msgpack", timeout_ms: 0, method: "sleep", payload: new Uint8Array([100]) });
    }
    const f = await peer.next();
    assert.ok(f?.type === "response" && f.call_id === 5 && f.code === "resource_exhausted", JSON.stringify(f));
  });

  it("refuses locally a request over the peer's max_frame, and goes on", async () => {
    const { client: conn } = await testing.pair(echoProvider(), { server: { maxFrame: 4096 } });
    await assert.rejects(conn.callRaw("echo", new Uint8Array(5000)), (e: HubwireError) => e.code === "too_large");
    assert.equal((await conn.callRaw("echo", new Uint8Array(4000))).length, 4000);
    conn.close();
  });

  it("drains: calls in flight finish, new ones are refused", async () => {
    const { client: conn, server } = await testing.pair(echoProvider());
    const inFlight = conn.call("sleep", 50);
    await new Promise((r) => setTimeout(r, 10));
    const draining = server.drain(5000);
    await new Promise((r) => setTimeout(r, 10));
    await assert.rejects(conn.call("sleep", 1), (e: HubwireError) => e.code === "unavailable");
    assert.equal(await inFlight, 50);
    await draining;
    assert.equal((await conn.closed).code, "unavailable");
  });
});
