/**
 * The example provider (`examples/provider.ts`, the one `make run`'s hub
 * spawns) answers as documented when started as a child process.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { child, Connection, HubwireError } from "hubwire";

const EXAMPLE = fileURLToPath(new URL("../examples/provider.js", import.meta.url));

describe("example provider", { timeout: 30_000 }, () => {
  let conn: Connection;
  let t: child.ChildTransport;
  before(async () => {
    t = child.spawn(process.execPath, [EXAMPLE], { name: "dice", onLog: () => {} });
    conn = await Connection.dial(t);
  });
  after(async () => {
    conn.close();
    if (t.process.exitCode === null) await new Promise((r) => t.process.once("exit", r));
  });

  it("offers roll and echo, with docs", () => {
    assert.deepEqual(conn.peer.methods.map((m) => m.name), ["roll", "echo"]);
    assert.equal(conn.peer.methods[0]!.doc, "Rolls dice: {sides (2 to 1000), count (1 to 100; more fails too_many_dice)} -> {text}");
  });

  it("rolls dice", async () => {
    const { text } = (await conn.call("roll", { sides: 6, count: 3 })) as { text: string };
    const m = /^rolled 3d6: ([1-6]) \+ ([1-6]) \+ ([1-6]) = (\d+)$/.exec(text);
    assert.ok(m, text);
    assert.equal(Number(m[1]) + Number(m[2]) + Number(m[3]), Number(m[4]));
  });

  it("fails typed on too many dice, and refuses a bad input", async () => {
    await assert.rejects(conn.call("roll", { sides: 6, count: 500 }), (e: HubwireError) => e.code === "failure" && (e.failure as { kind: string }).kind === "too_many_dice");
    await assert.rejects(conn.call("roll", { sides: 1, count: 1 }), (e: HubwireError) => e.code === "invalid_argument");
  });

  it("echoes raw bytes", async () => {
    assert.deepEqual(await conn.callRaw("echo", new Uint8Array([9, 8, 7])), new Uint8Array([9, 8, 7]));
  });

  it("exits when its parent closes the connection", async () => {
    const other = child.spawn(process.execPath, [EXAMPLE], { name: "dice", onLog: () => {} });
    const c = await Connection.dial(other);
    const exited = new Promise<number | null>((r) => other.process.once("exit", (code) => r(code)));
    c.close();
    assert.equal(await exited, 0);
  });
});
