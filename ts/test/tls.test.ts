/**
 * The TLS transport against a real hub whose tcp listener has `[hub.tls]`
 * with `client_ca` (mutual TLS), with certificates made by `openssl` for
 * the run. (TS to TS over TLS runs in the behaviour suite, setup `tls`.)
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Connection, tls } from "hubwire";
import { startHub, type RunningHub } from "./hub.js";
import { makePki } from "./pki.js";

const PKI = makePki();

describe("tls transport against a real hub", { timeout: 60_000, skip: PKI === null ? "openssl is not installed" : false }, () => {
  const pki = PKI!;
  let hub: RunningHub;
  before(async () => {
    const files = `cert = "${pki.dir}/server.pem"\nkey = "${pki.dir}/server.key"\nclient_ca = "${pki.dir}/ca.pem"`;
    hub = await startHub(`tcp = "127.0.0.1:0"\n[hub.tls]\n${files}`, "tls");
  });
  after(async () => {
    await hub?.stop();
  });

  it("calls the Rust provider through the hub with a client certificate", async () => {
    const t = await tls.connect(hub.url, { ca: pki.ca, cert: pki.clientCert, key: pki.clientKey });
    assert.match(t.description, /^tls:127\.0\.0\.1:\d+$/);
    const conn = await Connection.dial(t, { name: "node-tls" });
    try {
      assert.deepEqual(await conn.callRaw("echo", new Uint8Array([1, 2, 3])), new Uint8Array([1, 2, 3]));
      const big = new Uint8Array(1 << 20).map((_, i) => i % 253);
      const back = await conn.callRaw("echo", big);
      assert.equal(back.length, big.length);
      assert.ok(back.every((b, i) => b === big[i]), "bytes differ");
    } finally {
      conn.close();
    }
  });

  it("is refused without a client certificate", async () => {
    await assert.rejects(async () => {
      const conn = await Connection.dial(await tls.connect(hub.url, { ca: pki.ca }), { name: "no-cert" });
      conn.close();
    });
  });

  it("refuses a hub whose certificate no trusted CA signed", async () => {
    // Node's bundled roots do not include the test CA.
    await assert.rejects(tls.connect(hub.url), /connect to tls:.*certificate/);
  });
});
