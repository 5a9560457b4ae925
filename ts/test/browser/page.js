// The page: dials the worker over the MessagePort transport and runs checks
// of every call kind, failures, cancellation, deadlines and flow control.
// Results go to window.hubwireResults for the Node side (playwright) to read.
import { Connection, HubwireError, messageport, Provider, sharedmemory } from "hubwire";

const checks = [];
const check = (name, f) => checks.push({ name, f });
const eq = (a, b, what = "") => {
  const [x, y] = [JSON.stringify(a), JSON.stringify(b)];
  if (x !== y) throw new Error(`${what} expected ${y}, got ${x}`);
};
async function rejects(p, code) {
  try {
    await p;
  } catch (e) {
    if (!(e instanceof HubwireError)) throw new Error(`not a HubwireError: ${e}`);
    if (e.code !== code) throw new Error(`expected ${code}, got ${e.code}: ${e.message}`);
    return e;
  }
  throw new Error(`expected ${code}, the call succeeded`);
}
const state = (conn) => conn.call("state", null);
async function eventually(f) {
  while (!(await f())) await new Promise((r) => setTimeout(r, 10));
}

check("the worker's HELLO lists its methods", async (conn) => {
  eq(conn.peer.peer.name, "behaviour");
  if (!conn.peer.methods.some((m) => m.name === "echo_stream")) throw new Error("no echo_stream");
});
check("raw echo, small and 1 MiB", async (conn) => {
  eq([...(await conn.callRaw("echo", new Uint8Array([0, 255, 7])))], [0, 255, 7]);
  const big = new Uint8Array(1 << 20).map((_, i) => i & 0xff);
  const back = await conn.callRaw("echo", big);
  eq(back.length, big.length);
  if (!back.every((b, i) => b === big[i])) throw new Error("bytes differ");
});
check("msgpack and json values", async (conn) => {
  const v = { n: 1, neg: -129, f: 1.5, s: "héllo ✓", l: [1, "two", [3]], z: null, big: 4294967296 };
  eq(await conn.call("echo_value", v), v);
  eq(await conn.call("echo_value", v, { codec: "json" }), v);
});
check("declared failure with its value", async (conn) => {
  eq((await rejects(conn.call("fail", { kind: "division_by_zero" }), "failure")).failure, { kind: "division_by_zero" });
});
check("a thrown bug is a defect", async (conn) => {
  await rejects(conn.call("panic", null), "defect");
  eq(await conn.call("echo_value", 1), 1);
});
check("unknown method", async (conn) => {
  await rejects(conn.call("nope", 1), "unknown_method");
});
check("server stream past the window", async (conn) => {
  const got = [];
  for await (const x of conn.serverStream("count", 150)) got.push(x);
  eq(got.length, 150);
  eq(got[149], 149);
});
check("client stream", async (conn) => {
  const cs = conn.clientStream("sum");
  for (let i = 1; i <= 100; i++) await cs.send(i);
  eq(await cs.finish(), 5050);
});
check("bidi stream", async (conn) => {
  const bd = conn.bidi("echo_stream");
  const sending = (async () => {
    for (let i = 0; i < 100; i++) await bd.send(i);
    bd.end();
  })();
  const got = [];
  for await (const x of bd) got.push(x);
  await sending;
  eq(got, Array.from({ length: 100 }, (_, i) => i));
});
check("the worker calls the page back", async (conn) => {
  eq(await conn.call("callback", { method: "whoami", input: 3 }), { me: "page", got: 3 });
});
check("cancellation through an AbortSignal reaches the handler", async (conn) => {
  const before = (await state(conn)).cancelled;
  const ac = new AbortController();
  const p = conn.call("sleep", { ms: 30000 }, { signal: ac.signal });
  setTimeout(() => ac.abort(), 30);
  await rejects(p, "cancelled");
  await eventually(async () => (await state(conn)).cancelled === before + 1);
});
check("deadline", async (conn) => {
  await rejects(conn.call("sleep", { ms: 30000 }, { timeoutMs: 50 }), "deadline_exceeded");
});
check("flow control bounds a fast producer", async (conn) => {
  const it = conn.serverStream("flood", null)[Symbol.asyncIterator]();
  await it.next();
  await eventually(async () => (await state(conn)).produced >= 64);
  await new Promise((r) => setTimeout(r, 100));
  const produced = (await state(conn)).produced;
  if (produced > 66) throw new Error(`produced ${produced} with a window of 64`);
  await it.return();
});
check("1000 concurrent calls", async (conn) => {
  const r = await Promise.all(Array.from({ length: 1000 }, (_, i) => conn.call("echo_value", i)));
  eq(r, Array.from({ length: 1000 }, (_, i) => i));
});

/** The page's end of each transport to a fresh worker. */
const transports = {
  messageport() {
    const worker = new Worker("/test/browser/worker.js", { type: "module" });
    return messageport.connect(worker, "web-worker");
  },
  sharedmemory() {
    // Needs cross-origin isolation (the test server sends COOP and COEP).
    const worker = new Worker("/test/browser/worker.js?sharedmemory", { type: "module" });
    const sab = sharedmemory.buffer(1 << 16);
    worker.postMessage(sab);
    return sharedmemory.connect(sab, "dialer", { watch: worker });
  },
};

async function main() {
  const results = [];
  for (const [transport, open] of Object.entries(transports)) {
    const page = new Provider("page").unary("whoami", (x) => ({ me: "page", got: x }));
    const conn = await Connection.dial(open(), { name: "page", service: page });
    for (const { name, f } of checks) {
      try {
        await f(conn);
        results.push({ name: `${transport}: ${name}`, ok: true });
      } catch (e) {
        results.push({ name: `${transport}: ${name}`, ok: false, error: String(e?.stack ?? e) });
      }
    }
    conn.close();
  }
  window.hubwireResults = results;
}

main().catch((e) => (window.hubwireResults = [{ name: "setup", ok: false, error: String(e?.stack ?? e) }]));
