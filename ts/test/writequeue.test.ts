/**
 * The write queue's cap (`ConnectionOptions.writeQueue`), over a real Unix
 * socket: a raw peer sends HELLO, then REQUESTs for an echo, and does not
 * read. Node buffers every socket write without limit, so without the cap
 * the provider would read every request and queue every answer. With it,
 * the bytes queued for the peer stay within the cap and one answer, the
 * provider stops reading new calls (so the peer's writes stop at its full
 * socket), and then either the peer reads again and gets every answer, or
 * it does not and is closed with GOAWAY `resource_exhausted` after the
 * stall timeout. The same over the shared-memory ring, whose reader
 * pauses by leaving the peer's bytes in the ring; and a WebSocket reports
 * its `bufferedAmount`, and its draining.
 */

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { Codec, Connection, decodeFrame, encodeFrame, sharedmemory, unix, websocket, type ConnectionOptions, type Incoming, type Service } from "hubwire";
import { RAW_HELLO } from "./fixtures/hello.js";

/** Each request's payload, and the provider's cap. */
const PAYLOAD = 16 * 1024;
const CAP = 64 * 1024;
/** An echo answer's frame: header, code and message length, the payload. */
const ANSWER = 12 + 3 + PAYLOAD;
/** Requests the raw peer offers at most: 32 MiB, far beyond what the two sockets hold. */
const OFFERED = 2048;
/** How long the peer's writes must make no progress to count as stopped (a pause, not an assertion). */
const STOPPED_MS = 300;

const dir = mkdtempSync(join(tmpdir(), "hubwire-writequeue-"));
after(() => rmSync(dir, { recursive: true, force: true }));
let sockets = 0;

/** A synchronous raw echo, counting the calls it was handed. */
class Echo implements Service {
  calls = 0;
  methods() {
    return [{ name: "echo", kind: "unary" as const, input: null, output: null }];
  }
  call(c: Incoming) {
    this.calls++;
    return { codec: Codec.Raw, bytes: c.payload };
  }
}

/** A provider on a fresh Unix socket, and a raw peer connected to it that has sent its HELLO. */
async function setup(options: ConnectionOptions): Promise<{ conn: Connection; echo: Echo; raw: net.Socket }> {
  const path = join(dir, `s${sockets++}.sock`);
  const echo = new Echo();
  let accepted!: (c: Promise<Connection>) => void;
  const conn = new Promise<Promise<Connection>>((resolve) => (accepted = resolve));
  const listener = await unix.listen(path, (t) => accepted(Connection.accept(t, { ...options, service: echo })));
  const raw = net.connect(path);
  raw.pause();
  raw.write(encodeFrame({ type: "hello", body: RAW_HELLO }));
  const c = await (await conn);
  void listener.close(); // resolves once the connection is gone too
  return { conn: c, echo, raw };
}

/**
 * Writes REQUESTs (ids 1, 3, …) without reading, each time the socket
 * drains, until they are all written or the writes have made no progress
 * for {@link STOPPED_MS}; returns how many were handed to the socket.
 */
async function flood(raw: net.Socket): Promise<number> {
  let sent = 0;
  for (;;) {
    while (sent < OFFERED) {
      sent++;
      if (!raw.write(request(2 * sent - 1))) break;
    }
    if (sent === OFFERED && raw.writableLength === 0) return sent;
    const drained = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => (raw.off("drain", onDrain), resolve(false)), STOPPED_MS);
      const onDrain = () => (clearTimeout(timer), resolve(true));
      raw.once("drain", onDrain);
    });
    if (!drained) return sent;
  }
}

/** An echo REQUEST with call id `id` and a {@link PAYLOAD}-byte payload. */
function request(id: number): Uint8Array {
  return encodeFrame({ type: "request", call_id: id, kind: "unary", codec: "raw", timeout_ms: 0, method: "echo", payload: new Uint8Array(PAYLOAD).fill(7) });
}

/** Resolves once `measure()` has not changed for {@link STOPPED_MS}: the flow it measures has stopped. */
async function stopped(measure: () => number): Promise<void> {
  for (let last = -1; ; ) {
    const now = measure();
    if (now === last) return;
    last = now;
    await new Promise((resolve) => setTimeout(resolve, STOPPED_MS));
  }
}

/** Reads the raw peer's frames from now on (past its HELLO), calling `each` on each; resolves at end of stream. */
function readAll(raw: net.Socket, each: (f: ReturnType<typeof decodeFrame>) => void = () => {}): Promise<void> {
  let buf: Buffer = Buffer.alloc(0);
  let hello = false;
  return new Promise((resolve) => {
    raw.on("data", (b: Buffer) => {
      buf = buf.length === 0 ? b : Buffer.concat([buf, b]);
      for (;;) {
        const d = decodeFrame(new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength));
        if (d === null) break;
        buf = buf.subarray(d.length);
        if (!hello && d.frame.type === "hello") hello = true;
        else each(d);
      }
    });
    raw.on("end", resolve);
    raw.on("close", resolve);
    raw.resume();
  });
}

describe("the write queue's cap", () => {
  it("holds back a peer that does not read, then answers every call once it does", { timeout: 60_000 }, async () => {
    const { conn, echo, raw } = await setup({ writeQueue: CAP, writeStallTimeoutMs: 3_600_000 });
    const sent = await flood(raw);
    const queued = conn.core.writer.queued();
    assert.ok(queued <= CAP + ANSWER, `${queued} bytes queued for a peer that does not read (cap ${CAP})`);
    assert.ok(sent < OFFERED, `all ${OFFERED} requests went out: nothing held the peer back`);
    assert.ok(echo.calls < sent, `the provider took all ${sent} calls from a peer that does not read`);
    // Now read: every request sent is answered, none lost.
    let answered = 0;
    const done = new Promise<void>((resolve) => {
      void readAll(raw, (d) => {
        const f = d!.frame;
        assert.equal(f.type, "response");
        if (f.type !== "response") return;
        assert.equal(f.code, "ok");
        assert.equal(f.payload.length, PAYLOAD);
        if (++answered === sent) resolve();
      });
    });
    await done;
    assert.equal(echo.calls, sent);
    raw.destroy();
    conn.close();
  });

  it("closes a peer that never reads with GOAWAY resource_exhausted after the stall timeout", { timeout: 60_000 }, async () => {
    // Longer than the flood takes to see its writes stop, so that it has
    // stopped writing when the provider closes (and discards what it still
    // reads, at most 1 MiB, spec §7.3).
    const { conn, raw } = await setup({ writeQueue: CAP, writeStallTimeoutMs: 3 * STOPPED_MS });
    raw.on("error", () => {});
    await flood(raw);
    const why = await conn.closed;
    assert.equal(why.code, "unavailable");
    assert.match(why.message, /GOAWAY resource_exhausted/);
    // What the provider queued, then its GOAWAY, then end of stream.
    let goaway = "";
    await readAll(raw, (d) => {
      if (d!.frame.type === "goaway") goaway = d!.frame.code;
    });
    assert.equal(goaway, "resource_exhausted");
    raw.destroy();
  });

  it("over shared memory, holds back a peer that does not read, then answers every call once it does", { timeout: 60_000 }, async () => {
    const sab = sharedmemory.buffer(CAP);
    // The raw peer is a bare transport that writes and is not started: it reads nothing until it is.
    const raw = sharedmemory.connect(sab, "dialer", { spinUs: 0 });
    const echo = new Echo();
    const server = Connection.accept(sharedmemory.connect(sab, "acceptor", { spinUs: 0 }), { writeQueue: CAP, service: echo });
    raw.write(encodeFrame({ type: "hello", body: RAW_HELLO }));
    const conn = await server;
    for (let i = 0; i < OFFERED; i++) raw.write(request(2 * i + 1));
    await stopped(() => raw.queued!());
    const queued = conn.core.writer.queued();
    assert.ok(queued <= CAP + ANSWER, `${queued} bytes queued for a peer that does not read (cap ${CAP})`);
    assert.ok(raw.queued!() > 0, "the ring took every request: nothing held the peer back");
    assert.ok(echo.calls < OFFERED, `the provider took all ${OFFERED} calls from a peer that does not read`);
    // Now read: every request is answered, none lost.
    let buf: Uint8Array = new Uint8Array(0);
    let answered = 0;
    await new Promise<void>((resolve, reject) => {
      raw.start({
        onData: (b) => {
          buf = buf.length === 0 ? b : Buffer.concat([buf, b]);
          for (let d = decodeFrame(buf); d !== null; d = decodeFrame(buf)) {
            buf = buf.subarray(d.length);
            if (d.frame.type === "response" && d.frame.code === "ok" && d.frame.payload.length === PAYLOAD) answered++;
            else if (d.frame.type !== "hello") reject(new Error(`unexpected ${d.frame.type}`));
          }
          if (answered === OFFERED) resolve();
        },
        onEnd: (why) => reject(new Error(`closed after ${answered} of ${OFFERED} answers: ${why}`)),
      });
    });
    assert.equal(echo.calls, OFFERED);
    conn.close();
    raw.close();
  });

  it("counts a WebSocket's bufferedAmount and says when it has drained", { timeout: 60_000 }, async () => {
    /** A WebSocket that is open at once and never sends: `bufferedAmount` is set by the test. */
    class Stuck {
      binaryType = "";
      readyState = 1;
      protocol = websocket.SUBPROTOCOL;
      bufferedAmount = 0;
      private readonly listeners = new Map<string, (ev: unknown) => void>();
      send(data: Uint8Array): void {
        this.bufferedAmount += data.length;
      }
      close(): void {}
      addEventListener(type: string, listener: (ev: unknown) => void): void {
        this.listeners.set(type, listener);
      }
      static last: Stuck;
      constructor() {
        Stuck.last = this;
      }
    }
    const t = websocket.connect("ws://127.0.0.1:1/", { WebSocket: Stuck });
    let drained!: () => void;
    const drain = new Promise<void>((resolve) => (drained = resolve));
    t.start({ onData: () => {}, onEnd: () => {}, onDrain: () => drained() });
    t.write(new Uint8Array(2 * CAP));
    assert.equal(t.queued!(), 2 * CAP);
    // The network takes it all: the transport notices and says so.
    Stuck.last.bufferedAmount = 0;
    await drain;
    assert.equal(t.queued!(), 0);
    t.close();
  });
});
