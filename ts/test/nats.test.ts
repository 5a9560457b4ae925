/**
 * hubwire over NATS (`spec/PROTOCOL.md` §13): the vectors of
 * `spec/vectors/nats.json`, then against a real `nats-server` on a free
 * loopback port: dialing nobody, refusals, chunking at a small
 * `max_payload`, a broken sequence and a silent peer seen on the wire,
 * `$SRV` discovery, and calls across languages with the Rust testee
 * (a TS client of a Rust provider, a Rust client of a TS provider, and a
 * Rust provider killed mid-call). The behaviour suite runs over NATS too
 * (`setups.ts`).
 */

import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";
import { connect as natsConnect, createInbox, nuid, type NatsConnection } from "nats";
import { Connection, HubwireError, nats, Provider } from "hubwire";
import { checkSeq, encodeLinkMessage, parseLinkMessage, type LinkKindName } from "../src/transport/natslink.js";
import { natsServerBinary, startNatsServer, type NatsServer } from "./natsserver.js";
import { rejects } from "./rejects.js";
import { natsProvider } from "./setups.js";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const vectors = JSON.parse(readFileSync(join(ROOT, "spec/vectors/nats.json"), "utf8"));
const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const unhex = (s: string) => new Uint8Array(Buffer.from(s, "hex"));
const utf8 = new TextEncoder();

describe("nats vectors (spec/vectors/nats.json)", () => {
  it("encodes and decodes subject tokens", () => {
    for (const v of vectors.tokens) {
      assert.equal(nats.token(v.method), v.token, v.name);
      assert.equal(nats.untoken(v.token), v.method, v.name);
    }
  });

  it("builds connect subjects and micro service names", () => {
    for (const v of vectors.subjects) assert.equal(nats.connectSubject(v.prefix, { [v.target]: v.value } as nats.Target), v.subject, v.name);
    for (const v of vectors.services) assert.equal(nats.serviceName(v.provider), v.service, v.name);
  });

  it("encodes and parses link messages", () => {
    for (const v of vectors.messages) {
      assert.equal(hex(encodeLinkMessage(v.kind as LinkKindName, v.seq, unhex(v.data_hex))), v.hex, v.name);
      const m = parseLinkMessage(unhex(v.hex));
      assert.ok(typeof m !== "string", `${v.name}: ${m}`);
      assert.deepEqual([m.kind, m.seq, hex(m.data)], [v.kind, v.seq, v.data_hex], v.name);
    }
    for (const v of vectors.invalid_messages) assert.equal(typeof parseLinkMessage(unhex(v.hex)), "string", v.name);
  });

  it("breaks a link at the first seq out of order", () => {
    for (const v of vectors.sequences) {
      let expected: number = v.first ?? 0;
      let broken: number | null = null;
      for (const [i, seq] of (v.seqs as number[]).entries()) {
        if (checkSeq(expected, seq) !== null) {
          broken = i;
          break;
        }
        expected = (expected + 1) >>> 0;
      }
      assert.equal(broken, v.broken_at, v.name);
    }
  });

  it("reads connect bodies and refuses bad ones with their code", () => {
    for (const v of vectors.connect.filter((c: { role: string }) => c.role === "request")) {
      assert.deepEqual({ ...nats.parseConnectRequest(utf8.encode(JSON.stringify(v.body))) }, v.body, v.name);
    }
    for (const v of vectors.connect_invalid) {
      assert.throws(() => nats.parseConnectRequest(utf8.encode(v.body_text)), (e: HubwireError) => e.code === v.code, v.name);
    }
  });
});

/** A provider for the NATS tests. */
function tsProvider(name: string): Provider {
  return new Provider(name)
    .unary("echo", (b: Uint8Array) => b, { raw: true })
    .unary("math.add", (v: { a: number; b: number }) => v.a + v.b)
    .unary("sleep", async (ms: number) => {
      await new Promise((r) => setTimeout(r, ms));
      return ms;
    });
}

/** Waits for the first message on `subject` matching `pred` (the suite's timeout catches a hang). */
function nextMessage(nc: NatsConnection, subject: string, pred: (m: Uint8Array) => boolean): Promise<Uint8Array> {
  return new Promise((resolve) => {
    const sub = nc.subscribe(subject, {
      callback: (_e, msg) => {
        if (!pred(msg.data)) return;
        sub.unsubscribe();
        resolve(msg.data);
      },
    });
  });
}

describe("nats against a real nats-server", { skip: natsServerBinary() === null && "nats-server is not installed (make deps)", timeout: 60_000 }, () => {
  let server: NatsServer;
  let nc: NatsConnection;
  before(async () => {
    server = await startNatsServer();
    nc = await natsConnect({ servers: server.url });
  });
  after(async () => {
    Testee.killAll();
    await nc.close();
    server.kill();
  });

  it("fails a dial at once when nobody offers the method (no responders, not the connect timeout)", async () => {
    const e = await rejects(nats.dial(nc, { method: "nobody.here" }, { prefix: `t${nuid.next()}`, connectTimeoutMs: 600_000 }), "unavailable");
    assert.match(e.message, /no provider of method "nobody.here" on NATS/);
    assert.match(e.message, /\.m\.nobody-2ehere/);
  });

  it("fails a dial on a closed NATS connection unavailable", async () => {
    const closed = await natsConnect({ servers: server.url });
    await closed.close();
    const e = await rejects(nats.dial(closed, { method: "echo" }), "unavailable");
    assert.match(e.message, /cannot reach method "echo" on NATS/);
  });

  it("breaks every link of a NATS connection that is closed, failing their calls unavailable", async () => {
    const prefix = `t${nuid.next()}`;
    const p = tsProvider("slow");
    const listener = await nats.listen(nc, p, { prefix });
    void p.serve(listener);
    const own = await natsConnect({ servers: server.url });
    const conn = await Connection.dial(await nats.dial(own, { method: "sleep" }, { prefix }));
    const call = conn.call("sleep", 30_000);
    await conn.callRaw("echo", new Uint8Array([1]));
    await own.close();
    const e = await rejects(call, "unavailable");
    assert.match(e.message, /NATS connection was closed/);
    await listener.close();
  });

  it("reaches a provider by method, provider name and replica id; a closed listener no more", async () => {
    const prefix = `t${nuid.next()}`;
    const p = tsProvider("calc one");
    const listener = await nats.listen(nc, p, { prefix });
    void p.serve(listener);
    for (const target of [{ method: "math.add" }, { provider: "calc one" }, { replica: listener.replica }] as nats.Target[]) {
      const link = await nats.dial(nc, target, { prefix, peer: "test" });
      assert.equal(link.replica, listener.replica);
      assert.equal(link.provider, "calc one");
      const conn = await Connection.dial(link);
      assert.equal(await conn.call("math.add", { a: 2, b: 3 }), 5);
      conn.close();
    }
    await listener.close();
    await rejects(nats.dial(nc, { method: "math.add" }, { prefix }), "unavailable");
  });

  it("fails over: a replica killed with kill -9 fails its calls, and the next dial reaches another", async () => {
    const prefix = `t${nuid.next()}`;
    const replicas = await Promise.all([natsProvider(server.url, prefix), natsProvider(server.url, prefix)]);
    try {
      const link = await nats.dial(nc, { method: "sleep" }, { prefix });
      const victim = replicas.find((r) => r.replica === link.replica)!;
      const survivor = replicas.find((r) => r !== victim)!;
      const conn = await Connection.dial(link);
      const call = conn.call("sleep", { ms: 30_000 });
      await conn.call("echo_value", 1);
      victim.proc.kill("SIGKILL");
      await rejects(call, "unavailable");
      // Its NATS connection closed with it, so the server hands every new link to the survivor.
      for (let i = 0; i < 5; i++) {
        const next = await nats.dial(nc, { method: "echo_value" }, { prefix });
        assert.equal(next.replica, survivor.replica);
        const c = await Connection.dial(next);
        assert.equal(await c.call("echo_value", i), i);
        c.close();
      }
    } finally {
      for (const r of replicas) r.proc.kill("SIGKILL");
    }
  });

  it("refuses links past maxLinks with resource_exhausted", async () => {
    const prefix = `t${nuid.next()}`;
    const p = tsProvider("small");
    const listener = await nats.listen(nc, p, { prefix, maxLinks: 1 });
    void p.serve(listener);
    const conn = await Connection.dial(await nats.dial(nc, { method: "echo" }, { prefix }));
    const e = await rejects(nats.dial(nc, { method: "echo" }, { prefix }), "resource_exhausted");
    assert.match(e.message, /no more links/);
    conn.close();
    await listener.close();
  });

  it("splits writes at a small max_payload, both ways", async () => {
    const small = await startNatsServer({ maxPayload: 4096 });
    const nc2 = await natsConnect({ servers: small.url });
    try {
      assert.equal(nc2.info?.max_payload, 4096);
      const prefix = `t${nuid.next()}`;
      const p = tsProvider("chunks");
      void p.serve(await nats.listen(nc2, p, { prefix }));
      const conn = await Connection.dial(await nats.dial(nc2, { method: "echo" }, { prefix }));
      // A publish over max_payload would be refused by the client: 100 KiB arriving intact proves the split.
      const big = new Uint8Array(100 * 1024).map((_, i) => (i * 31) & 0xff);
      assert.deepEqual(await conn.callRaw("echo", big), big);
      conn.close();
    } finally {
      await nc2.close();
      small.kill();
    }
  });

  /** Opens a link by hand to a fresh replica: our subject D, its subject A. */
  async function rawLink(): Promise<{ d: string; a: string; close: () => Promise<void> }> {
    const prefix = `t${nuid.next()}`;
    const p = tsProvider("raw");
    const listener = await nats.listen(nc, p, { prefix });
    void p.serve(listener);
    const d = createInbox();
    const reply = await nc.request(`${prefix}.m.echo`, utf8.encode(JSON.stringify({ hubwire: 1, link: d })), { timeout: 5000 });
    const body = JSON.parse(new TextDecoder().decode(reply.data));
    assert.equal(body.hubwire, 1);
    assert.equal(body.replica, listener.replica);
    return { d, a: body.link, close: () => listener.close() };
  }
  const kindIs = (kind: number) => (m: Uint8Array) => m[0] === kind;

  it("breaks a link at a gap in the sequence and sends CLOSE", async () => {
    const { d, a, close } = await rawLink();
    const closed = nextMessage(nc, d, kindIs(3));
    nc.publish(a, encodeLinkMessage("heartbeat", 0));
    nc.publish(a, encodeLinkMessage("heartbeat", 2));
    const m = parseLinkMessage(await closed);
    assert.ok(typeof m !== "string" && m.kind === "close");
    await close();
  });

  it("heartbeats an idle link, and breaks it (CLOSE) when the peer stays silent", async () => {
    const { d, close } = await rawLink();
    const heartbeat = nextMessage(nc, d, kindIs(1));
    const closed = nextMessage(nc, d, kindIs(3));
    const hb = parseLinkMessage(await heartbeat);
    assert.ok(typeof hb !== "string" && hb.kind === "heartbeat" && hb.data.length === 0);
    const m = parseLinkMessage(await closed);
    assert.ok(typeof m !== "string" && m.kind === "close");
    await close();
  });

  it("bounds what a dialer keeps before its connection reads: a flood breaks the link", async () => {
    // A hand-written acceptor that floods the dialer's subject right after its reply.
    const prefix = `t${nuid.next()}`;
    const a = createInbox();
    const sub = nc.subscribe(`${prefix}.m.flood`, {
      callback: (_e, msg) => {
        const d = JSON.parse(new TextDecoder().decode(msg.data)).link;
        msg.respond(utf8.encode(JSON.stringify({ hubwire: 1, link: a, replica: "flooder", provider: "flooder" })));
        const chunk = new Uint8Array(60_000);
        for (let seq = 0; seq < 40; seq++) nc.publish(d, encodeLinkMessage("data", seq, chunk));
      },
    });
    const closed = nextMessage(nc, a, kindIs(3));
    const link = await nats.dial(nc, { method: "flood" }, { prefix });
    await closed;
    const e = await rejects(Connection.dial(link), "unavailable");
    assert.match(e.message, /before the connection started reading/);
    sub.unsubscribe();
  });

  it("does not take a blocked event loop for a silent peer", async () => {
    const prefix = `t${nuid.next()}`;
    // Both ends in this process: a handler that blocks the loop past the silence limit stalls both.
    const p = new Provider("busy").unary("block", (ms: number) => {
      const until = Date.now() + ms;
      while (Date.now() < until);
      return ms;
    });
    const listener = await nats.listen(nc, p, { prefix });
    void p.serve(listener);
    const conn = await Connection.dial(await nats.dial(nc, { method: "block" }, { prefix }));
    assert.equal(await conn.call("block", 1500), 1500);
    assert.equal(await conn.call("block", 0), 0);
    conn.close();
    await listener.close();
  });

  it("answers $SRV PING, INFO and STATS as a micro service", async () => {
    const prefix = `t${nuid.next()}`;
    const p = tsProvider("math.svc");
    const listener = await nats.listen(nc, p, { prefix });
    void p.serve(listener);
    const conn = await Connection.dial(await nats.dial(nc, { method: "math.add" }, { prefix }));
    await conn.call("math.add", { a: 1, b: 1 });
    await conn.call("math.add", { a: 1, b: 2 });
    const ask = async (subject: string) => JSON.parse(new TextDecoder().decode((await nc.request(subject, undefined, { timeout: 5000 })).data));
    const ping = await ask(`$SRV.PING.math_svc.${listener.replica}`);
    assert.equal(ping.type, "io.nats.micro.v1.ping_response");
    assert.deepEqual(ping.metadata, { "hubwire.protocol": "1", "hubwire.provider": "math.svc", "hubwire.prefix": prefix });
    const info = await ask(`$SRV.INFO.math_svc.${listener.replica}`);
    assert.equal(info.id, listener.replica);
    assert.deepEqual(
      info.endpoints.map((e: { name: string; subject: string; queue_group: string }) => [e.name, e.subject, e.queue_group]),
      [
        ["echo", `${prefix}.m.echo`, "hubwire"],
        ["math-2eadd", `${prefix}.m.math-2eadd`, "hubwire"],
        ["sleep", `${prefix}.m.sleep`, "hubwire"],
        ["-provider", `${prefix}.p.math-2esvc`, "hubwire"],
        ["-replica", `${prefix}.r.${listener.replica}`, "hubwire"],
      ],
    );
    assert.deepEqual(info.endpoints[1].metadata, { "hubwire.method": "math.add", "hubwire.kind": "unary" });
    const stats = await ask(`$SRV.STATS.math_svc.${listener.replica}`);
    const add = stats.endpoints.find((e: { name: string }) => e.name === "math-2eadd");
    assert.equal(add.num_requests, 1);
    assert.equal(add.num_errors, 0);
    assert.deepEqual(add.data, { calls: 2 });
    assert.equal(stats.endpoints.find((e: { name: string }) => e.name === "-replica").data, null);
    conn.close();
    await listener.close();
  });

  describe("across languages, with the Rust testee", { skip: rustTestee() === null && "the Rust testee is not built (cargo build -p hubwire-testee)" }, () => {
    it("a TS client calls a Rust provider", async () => {
      const prefix = `t${nuid.next()}`;
      const rust = new Testee();
      const replica = await rust.serve(`${server.url}/${prefix}`);
      const link = await nats.dial(nc, { method: "echo_value" }, { prefix });
      assert.equal(link.replica, replica);
      const conn = await Connection.dial(link);
      assert.deepEqual(await conn.call("echo_value", { s: "héllo", n: [1, 2, 3] }), { s: "héllo", n: [1, 2, 3] });
      const big = new Uint8Array(3 << 20).map((_, i) => i & 0xff);
      assert.deepEqual(await conn.callRaw("echo", big), big);
      conn.close();
      // Both sides name subjects alike: by its provider name (escaped), and in its $SRV answers.
      const again = await nats.dial(nc, { provider: link.provider }, { prefix });
      assert.equal(again.replica, replica);
      again.close();
      const ask = await nc.request(`$SRV.INFO.${nats.serviceName(link.provider)}.${replica}`, undefined, { timeout: 5000 });
      const info = JSON.parse(new TextDecoder().decode(ask.data));
      const methods = info.endpoints.filter((e: { metadata: Record<string, string> }) => e.metadata["hubwire.method"] !== undefined);
      assert.ok(methods.length > 5);
      for (const e of methods) {
        const name = e.metadata["hubwire.method"];
        assert.deepEqual([e.name, e.subject, e.queue_group], [nats.token(name), nats.connectSubject(prefix, { method: name }), "hubwire"]);
      }
      // (The Rust replica lists its endpoints in no particular order.)
      const subjectOf = (name: string) => info.endpoints.find((e: { name: string }) => e.name === name)?.subject;
      assert.equal(subjectOf("-provider"), nats.connectSubject(prefix, { provider: link.provider }));
      assert.equal(subjectOf("-replica"), nats.connectSubject(prefix, { replica }));
      rust.kill();
    });

    it("a Rust client calls a TS provider", async () => {
      const prefix = `t${nuid.next()}`;
      const p = tsProvider("runner").unary("echo_value", (v: unknown) => v);
      const listener = await nats.listen(nc, p, { prefix });
      void p.serve(listener);
      const rust = new Testee();
      assert.deepEqual(await rust.command({ op: "connect", transport: "nats", address: `${server.url}/${prefix}` }), { event: "connected" });
      const r = await rust.command({ op: "call", id: "c1", method: "echo_value", input: { from: "rust" } });
      assert.deepEqual([r.code, r.output], ["ok", { from: "rust" }]);
      const raw = await rust.command({ op: "call", id: "c2", method: "echo", codec: "raw", input_fill: [7, 2_000_000] });
      assert.equal(raw.code, "ok");
      assert.equal(raw.output_hex.length, 4_000_000);
      rust.kill();
      await listener.close();
    });

    it("fails a TS caller's calls unavailable when the Rust provider is killed mid-call", async () => {
      const prefix = `t${nuid.next()}`;
      const rust = new Testee();
      await rust.serve(`${server.url}/${prefix}`);
      const conn = await Connection.dial(await nats.dial(nc, { method: "sleep" }, { prefix }));
      const calls = [conn.call("sleep", { ms: 30_000 }), conn.call("sleep", { ms: 30_000 })];
      await conn.call("echo_value", 1);
      rust.kill();
      for (const c of calls) {
        const e = await rejects(c, "unavailable");
        assert.match(e.message, /silent|closed/);
      }
      await rejects(conn.call("echo_value", 1), "unavailable");
      // Nobody serves the method any more: the next dial fails at once.
      await rejects(nats.dial(nc, { method: "sleep" }, { prefix, connectTimeoutMs: 600_000 }), "unavailable");
    });
  });
});

/** The Rust testee binary (`rust/target/debug/hubwire-testee`), or null when it is not built. */
function rustTestee(): string | null {
  const bin = process.env.HUBWIRE_BIN !== undefined ? join(process.env.HUBWIRE_BIN, "hubwire-testee") : join(ROOT, "rust/target/debug/hubwire-testee");
  return existsSync(bin) ? bin : null;
}

/** The Rust testee in a process of its own, driven by the conformance protocol's JSON lines (`conformance/README.md`). */
class Testee {
  private readonly proc: ChildProcess;
  private readonly waiting: ((event: Record<string, any>) => void)[] = [];
  private static readonly all = new Set<Testee>();

  constructor() {
    this.proc = spawn(rustTestee()!, [], { stdio: ["pipe", "pipe", "inherit"] });
    Testee.all.add(this);
    createInterface({ input: this.proc.stdout! }).on("line", (line) => {
      if (line.startsWith("{")) this.waiting.shift()?.(JSON.parse(line));
    });
  }

  /** Sends one command and resolves with the next event. */
  command(cmd: Record<string, unknown>): Promise<Record<string, any>> {
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.proc.stdin!.write(JSON.stringify(cmd) + "\n");
    });
  }

  /** Attaches the conformance service to NATS at `address` (`nats://host:port/<prefix>`); resolves with its replica id. */
  async serve(address: string): Promise<string> {
    const ev = await this.command({ op: "serve", transport: "nats", address });
    assert.equal(ev.event, "ready", JSON.stringify(ev));
    return ev.address;
  }

  /** `kill -9`. */
  kill(): void {
    this.proc.kill("SIGKILL");
    Testee.all.delete(this);
  }

  /** Kills every testee still running (a failed test leaves its own). */
  static killAll(): void {
    for (const t of Testee.all) t.kill();
  }
}
