/**
 * The direct path through a hub (`spec/PROTOCOL.md` §14) as Node takes it:
 * a real Rust hub dials a TS provider (`fixtures/direct-provider.ts`, a
 * child process) on a Unix socket; a TS client with `direct` gets its
 * unary calls onto a connection straight to the provider (the hub's
 * status counts them as `direct_calls`, its routed count does not move), a
 * client without it stays routed, the provider killed mid-traffic ends
 * every call (answer or `unavailable`) and later calls go through the hub,
 * and a draining hub lets the calls in flight on direct connections
 * finish. And with a hub played by the test: a replica that drains
 * (GOAWAY) loses no call, the ones it never saw go through the hub.
 *
 * Bounds on time here only catch hangs: every wait has a deadline.
 */

import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";
import { Connection, encodeFrame, HubwireError, memory, Provider, unix } from "hubwire";
import { BIN } from "./hub.js";

const DIRECT = "hubwire.direct";
const FIXTURE = fileURLToPath(new URL("./fixtures/direct-provider.js", import.meta.url));

/** Polls `done` every 20 ms until it holds, for at most `ms`. */
async function until(what: string, done: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Starts the TS provider on `path`; resolves once it listens. */
async function startProvider(path: string): Promise<ChildProcess> {
  const p = spawn(process.execPath, [FIXTURE, path], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the provider did not listen within 10 s")), 10_000);
    p.once("exit", (code) => reject(new Error(`the provider exited (${code})`)));
    p.stdout!.setEncoding("utf8").on("data", (s: string) => {
      if (s.includes("listening")) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  return p;
}

/** Ends `p` with `signal` and waits for it (at most 10 s). */
async function stop(p: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise((r) => p.once("exit", r));
  p.kill(signal);
  const killer = setTimeout(() => p.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(killer);
}

interface Replica {
  state: string;
  calls: number;
  direct_calls: number;
  direct_open: number;
}

describe("the direct path through a real hub to a TS provider", { timeout: 120_000 }, () => {
  let dir: string;
  let providerSock: string;
  let provider: ChildProcess;
  let hub: ChildProcess;
  let hubSock: string;

  const dial = async (direct: boolean) => Connection.dial(await unix.connect(hubSock), { name: "ts-direct-test", direct });
  const replica = async (): Promise<Replica> => {
    const c = await dial(false);
    try {
      const s = (await c.call("hubwire.status", null, { timeoutMs: 5000 })) as { providers: { replicas: Replica[] }[] };
      return s.providers[0]!.replicas[0]!;
    } finally {
      c.close();
    }
  };
  const echo = async (c: Connection, i: number) => assert.deepEqual(await c.callRaw("echo", new Uint8Array([i & 0xff])), new Uint8Array([i & 0xff]));

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "hw-direct-"));
    providerSock = join(dir, "p.sock");
    hubSock = join(dir, "hub.sock");
    provider = await startProvider(providerSock);
    const config = join(dir, "hubwire.toml");
    const toml = `[hub]\nunix = "hub.sock"\n[[provider]]\nname = "ts"\ndial = "unix:${providerSock}"\nrestart_backoff = "50ms"\n`;
    // The hub refuses a config others could write, whatever the umask.
    writeFileSync(config, toml, { mode: 0o600 });
    hub = spawn(join(BIN, "hubwire"), ["hub", "--config", config], { stdio: ["ignore", "ignore", "ignore"] });
    await until("the hub's socket", () => existsSync(hubSock), 20_000);
    await until("the provider ready", async () => (await replica()).state === "ready", 20_000);
  });
  after(async () => {
    if (hub) await stop(hub, "SIGTERM");
    if (provider) await stop(provider, "SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  it("routes a direct client's calls straight to the provider, which reports them", async () => {
    const c = await dial(true);
    assert.equal(c.peer.direct, 1, "the hub offers the direct path on its Unix socket");
    await until("a direct connection", async () => (await echo(c, 0), c.directRoutesLive > 0));
    const before = await replica();
    for (let i = 0; i < 50; i++) await echo(c, i);
    await until("the reports", async () => (await replica()).direct_calls >= before.direct_calls + 50);
    const r = await replica();
    assert.equal(r.calls, before.calls, "none of the 50 calls went through the hub");
    assert.equal(r.direct_open, 1);
    c.close();
  });

  it("keeps a client without `direct` routed through the hub", async () => {
    const c = await dial(false);
    const before = await replica();
    for (let i = 0; i < 20; i++) await echo(c, i);
    assert.equal(c.directRoutesLive, 0);
    const r = await replica();
    assert.equal(r.calls, before.calls + 20, "all 20 went through the hub");
    c.close();
  });

  it("ends every call when the provider is killed mid-traffic, then routes through the hub", async () => {
    const c = await dial(true);
    await until("a direct connection", async () => (await echo(c, 0), c.directRoutesLive > 0));
    const calls: Promise<string>[] = [];
    for (let i = 0; i < 200; i++) {
      calls.push(
        c.callRaw("echo", new Uint8Array([i & 0xff]), { timeoutMs: 20_000 }).then(
          () => "ok",
          (e: HubwireError) => e.code,
        ),
      );
      if (i === 100) await stop(provider, "SIGKILL");
    }
    // Calls started before the client saw the connection end were on it: they fail `unavailable` at once.
    const outcomes = await Promise.all(calls);
    assert.ok(outcomes.every((o) => o === "ok" || o === "unavailable"), `outcomes: ${[...new Set(outcomes)]}`);
    assert.equal(c.directRoutesLive, 0, "the dead direct connection takes no calls");
    // Calls started now go through the hub, which waits for the provider to be back.
    const later = Array.from({ length: 50 }, (_, i) => c.callRaw("echo", new Uint8Array([i]), { timeoutMs: 20_000 }));
    provider = await startProvider(providerSock);
    assert.equal((await Promise.all(later)).length, 50, "every later call answered");
    await until("the provider ready again", async () => (await replica()).state === "ready", 20_000);
    const before = await replica();
    await echo(c, 7);
    assert.equal((await replica()).calls, before.calls + 1, "the first call after the crash went through the hub");
    c.close();
  });

  it("lets calls in flight on a direct connection finish when the hub drains", async () => {
    const c = await dial(true);
    await until("a direct connection", async () => (await echo(c, 0), c.directRoutesLive > 0));
    const slow = c.call("sleep", { ms: 300 }, { timeoutMs: 10_000 });
    await new Promise((r) => setTimeout(r, 50));
    const exited = stop(hub, "SIGTERM");
    assert.equal(await slow, "slept 300 ms", "the call in flight on the direct connection finished");
    await exited;
    await assert.rejects(c.call("sleep", { ms: 1 }, { timeoutMs: 5000 }), (e: HubwireError) => e.code === "unavailable");
    c.close();
  });
});

describe("the direct path's fallback when the replica drains (a hub played by the test)", { timeout: 60_000 }, () => {
  it("starts the calls the draining replica never saw again through the hub: none is lost", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hw-direct-"));
    const path = join(dir, "p.sock");
    // The replica: its direct connections, kept so the test can drain them.
    const replicaConns: Connection[] = [];
    const replica = new Provider("replica").unary("echo", (b: Uint8Array) => b, { raw: true });
    const listener = await unix.listen(path, (t) => void Connection.accept(t, { service: replica }).then((c) => replicaConns.push(c)));
    // The hub: answers `hubwire.direct` with a DIRECT to the replica's address, and routes `echo` itself.
    let routed = 0;
    let asked: unknown = null;
    const hubService = new Provider("hub")
      .unary(DIRECT, (ask: unknown, ctx) => {
        asked = ask;
        const body = { provider: "replica", replica: 0, methods: ["echo"], via: "address" as const, address: `unix:${path}` };
        (ctx.connection as Connection).core.writer.frame(encodeFrame({ type: "direct", body }));
        return null;
      })
      .unary("echo", (b: Uint8Array) => (routed++, b), { raw: true });
    const [a, b] = memory.pair();
    const [hubSide, c] = await Promise.all([
      Connection.accept(a, { service: hubService, direct: true }),
      Connection.dial(b, { name: "client", direct: true }),
    ]);
    try {
      await until("a direct connection", async () => (await c.callRaw("echo", new Uint8Array([1])), c.directRoutesLive > 0));
      assert.deepEqual(asked, { method: "echo", via: ["address"] }, "a Node client takes addresses only");
      const before = routed;
      const calls: Promise<Uint8Array>[] = [];
      for (let i = 0; i < 300; i++) {
        calls.push(c.callRaw("echo", new Uint8Array([i & 0xff]), { timeoutMs: 10_000 }));
        if (i === 150) void replicaConns[0]!.drain(5000);
      }
      const got = await Promise.all(calls);
      assert.ok(got.every((g, i) => g.length === 1 && g[0] === (i & 0xff)), "every call answered, with its own bytes");
      await c.callRaw("echo", new Uint8Array([2]));
      assert.ok(routed > before, "after the GOAWAY, calls go through the hub");
    } finally {
      c.close();
      hubSide.close();
      await listener.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the direct path's refusals (§14.3; a hub played by the test)", () => {
  // How many times a client asks when the hub refuses with `code`, over 20 calls each of two methods.
  const asksAfterRefusal = async (code: "unknown_method" | "invalid_argument" | "unauthenticated") => {
    const asked: string[] = [];
    const hubService = new Provider("hub")
      .unary(DIRECT, ({ method }: { method: string }) => {
        asked.push(method);
        throw new HubwireError(code, "refused by the test");
      })
      .unary("echo", (b: Uint8Array) => b, { raw: true })
      .unary("upper", (b: Uint8Array) => b, { raw: true });
    const [a, b] = memory.pair();
    const [hubSide, c] = await Promise.all([
      Connection.accept(a, { service: hubService, direct: true }),
      Connection.dial(b, { name: "client", direct: true }),
    ]);
    for (let i = 0; i < 20; i++) {
      await c.callRaw("echo", new Uint8Array([i]));
      await c.callRaw("upper", new Uint8Array([i]));
      await c.ping(); // lets the ask's answer arrive between calls
    }
    c.close();
    hubSide.close();
    return asked;
  };

  // (`unavailable` backs off for a time: not asserted here, no unit test depends on time.)
  for (const code of ["unknown_method", "invalid_argument"] as const) {
    it(`${code}: asks once per method, never again`, async () => {
      assert.deepEqual((await asksAfterRefusal(code)).sort(), ["echo", "upper"]);
    });
  }
  it("unauthenticated: never asks again on the connection", async () => {
    assert.equal((await asksAfterRefusal("unauthenticated")).length, 1);
  });
});
