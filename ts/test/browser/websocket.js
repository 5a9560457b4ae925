// The page: dials the hub named in ?hub= over the SDK's WebSocket transport
// and calls the Rust provider behind it. With ?expect=refused the page's
// origin is not allowed, and the dial must fail. Results go to
// window.hubwireResults for the Node side (playwright) to read.
import { Connection, HubwireError, websocket } from "hubwire";

const params = new URLSearchParams(location.search);
const hub = params.get("hub");

const checks = [];
const check = (name, f) => checks.push({ name, f });
const eq = (a, b, what = "") => {
  const [x, y] = [JSON.stringify(a), JSON.stringify(b)];
  if (x !== y) throw new Error(`${what} expected ${y}, got ${x}`);
};

check("raw echo, small and 3 MiB", async (conn) => {
  eq([...(await conn.callRaw("echo", new Uint8Array([0, 255, 7])))], [0, 255, 7]);
  const big = new Uint8Array(3 << 20).map((_, i) => i % 251);
  const back = await conn.callRaw("echo", big);
  eq(back.length, big.length);
  if (!back.every((b, i) => b === big[i])) throw new Error("bytes differ");
});
check("server stream", async (conn) => {
  const got = [];
  for await (const x of conn.serverStream("count", 300)) got.push(x);
  eq(got, Array.from({ length: 300 }, (_, i) => i));
});
check("bidi stream", async (conn) => {
  const bd = conn.bidi("upper");
  const out = bd[Symbol.asyncIterator]();
  const got = [];
  for (const w of ["hub", "wire"]) {
    await bd.send(w);
    got.push((await out.next()).value);
  }
  bd.end();
  eq(got, ["HUB", "WIRE"]);
});
check("the hub's own status method", async (conn) => {
  const s = await conn.call("hubwire.status", null);
  eq(s.providers.map((p) => p.name), ["rust"]);
});
check("200 concurrent calls", async (conn) => {
  const r = await Promise.all(Array.from({ length: 200 }, (_, i) => conn.callRaw("echo", new TextEncoder().encode(String(i)))));
  eq(r.map((b) => new TextDecoder().decode(b)), Array.from({ length: 200 }, (_, i) => String(i)));
});

async function main() {
  if (params.get("expect") === "refused") {
    try {
      const conn = await Connection.dial(websocket.connect(hub), { name: "page" });
      conn.close();
      return [{ name: "refused", ok: false, error: "the hub accepted a page from an origin not in allowed_origins" }];
    } catch (e) {
      const ok = e instanceof HubwireError && e.code === "unavailable";
      return [{ name: "refused", ok, error: String(e?.stack ?? e) }];
    }
  }
  const results = [];
  const conn = await Connection.dial(websocket.connect(hub), { name: "page" });
  for (const { name, f } of checks) {
    try {
      await f(conn);
      results.push({ name, ok: true });
    } catch (e) {
      results.push({ name, ok: false, error: String(e?.stack ?? e) });
    }
  }
  conn.close();
  return results;
}

main().then(
  (r) => (window.hubwireResults = r),
  (e) => (window.hubwireResults = [{ name: "setup", ok: false, error: String(e?.stack ?? e) }]),
);
