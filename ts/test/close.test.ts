/**
 * Closing after a fatal GOAWAY (spec §7.3), over TCP, as a client whose
 * application holds its `Connection`: a raw provider sends a header
 * announcing a body over `max_frame` and goes on writing body bytes. It
 * must still read the GOAWAY `too_large`, then end of stream, and its
 * writes must fail soon after (the runtime discards input for a bounded
 * time, then lets go of the descriptor). Bounds are generous.
 */

import assert from "node:assert/strict";
import net from "node:net";
import { describe, it } from "node:test";
import { Connection, decodeFrame, encodeFrame, tcp } from "hubwire";
import { RAW_HELLO as HELLO } from "./fixtures/hello.js";

describe("closing after a fatal GOAWAY", () => {
  it("cuts off a peer that never stops writing, while the Connection is held", async () => {
    const start = Date.now();
    let goaway = "";
    let readEnded = -1;
    let writeFailed = -1;
    const done = new Promise<void>((resolve) => {
      const server = net.createServer((s) => {
        server.close();
        let buf = Buffer.alloc(0);
        s.on("data", (b: Buffer) => {
          buf = Buffer.concat([buf, b]);
          for (;;) {
            const d = decodeFrame(new Uint8Array(buf));
            if (d === null) break;
            if (d.frame.type === "goaway") goaway = d.frame.code;
            buf = buf.subarray(d.length);
          }
        });
        const finish = () => {
          if (writeFailed < 0) writeFailed = Date.now() - start;
          resolve();
        };
        s.on("end", () => {
          if (readEnded < 0) readEnded = Date.now() - start;
        });
        s.on("error", finish);
        s.on("close", finish);
        s.write(encodeFrame({ type: "hello", body: HELLO }));
        const header = new Uint8Array(12);
        const v = new DataView(header.buffer);
        v.setUint32(0, 16777216 + 1, true);
        header.set([1, 2, 0, 0], 4);
        v.setUint32(8, 2, true);
        s.write(header);
        const body = Buffer.alloc(64 * 1024, 97);
        const pump = () => {
          while (!s.destroyed && Date.now() - start < 5000) {
            if (!s.write(body)) return void s.once("drain", pump);
          }
        };
        pump();
      });
      server.listen(0, "127.0.0.1", async () => {
        const port = (server.address() as net.AddressInfo).port;
        const conn = await Connection.dial(await tcp.connect(`127.0.0.1:${port}`));
        await done;
        assert.equal((await conn.closed).code, "unavailable");
      });
    });
    const timeout = new Promise<void>((r) => setTimeout(r, 5000).unref());
    await Promise.race([done, timeout]);
    assert.equal(goaway, "too_large");
    assert.ok(readEnded >= 0 && readEnded < 5000, `read ended at ${readEnded} ms`);
    assert.ok(writeFailed >= 0 && writeFailed < 5000, `write failed at ${writeFailed} ms`);
  });
});
