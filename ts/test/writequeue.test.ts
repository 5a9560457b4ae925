/**
 * The write queue's cap (`ConnectionOptions.writeQueue`), over a real Unix
 * socket: a raw peer sends HELLO, then REQUESTs for an echo, and does not
 * read. Node buffers every socket write without limit, so without the cap
 * the provider would read every request and queue every answer. With it,
 * the bytes queued for the peer stay within the cap and one answer, the
 * provider stops reading new calls (so the peer's writes stop at its full
 * socket), and then either the peer reads again and gets every answer, or
 * it does not and is closed with GOAWAY `resource_exhausted` after the
 * stall timeout.
 */

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { Codec, Connection, decodeFrame, encodeFrame, unix, type ConnectionOptions, type Incoming, type Service } from "hubwire";
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
  const payload = new Uint8Array(PAYLOAD).fill(7);
  let sent = 0;
  for (;;) {
    while (sent < OFFERED) {
      const req = encodeFrame({ type: "request", call_id: 2 * sent + 1, kind: "unary", codec: "raw", timeout_ms: 0, method: "echo", payload });
      sent++;
      if (!raw.write(req)) break;
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
});
