/**
 * The TypeScript testee of the conformance suite (`conformance/README.md`):
 * reads control commands as JSON lines on stdin, serves the conformance
 * service or makes the calls it is told to, and reports events as JSON
 * lines on stdout. Model: `rust/hubwire-testee`.
 *
 *   hubwire-conformance --lang ts --testee "node ts/dist/conformance/testee.js"
 */

import { createInterface } from "node:readline";
import { connect as natsConnect, type NatsConnection } from "nats";
import { child, Connection, HubwireError, nats, tcp, unix, SDK_VERSION, type CallOptions, type ConnectionOptions, type Transport } from "hubwire";
import { conformanceService } from "./service.js";

/** Byte strings as arrays of numbers (as JSON carries them, `spec/PROTOCOL.md` §6). */
function replacer(_key: string, v: unknown): unknown {
  if (v instanceof Uint8Array) return Array.from(v);
  if (typeof v === "bigint") return Number(v);
  return v;
}

/** One writer, so event lines never interleave. */
function emit(event: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify(event, replacer) + "\n");
}

const hex = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("hex");

function parent(): Transport {
  const t = child.parent();
  if (t === null) throw new HubwireError("unavailable", "HUBWIRE_FD is not set");
  return t;
}

type Cmd = Record<string, any>;

/** The provider name the runner listens under on NATS (client role). */
const NATS_RUNNER = "runner";

/** NATS connections of this testee, by server URL (one per server, shared by its cases). */
const natsConnections = new Map<string, Promise<NatsConnection>>();

/** A `nats` address, `nats://host:port/<prefix>`: a connection to the server, and the case's subject prefix. */
async function natsAddress(address: string): Promise<{ nc: NatsConnection; prefix: string }> {
  const m = /^(nats:\/\/[^/]+)\/(.+)$/u.exec(address);
  if (m === null) throw new HubwireError("unavailable", `nats address ${JSON.stringify(address)} is not nats://host:port/<prefix>`);
  const url = m[1]!;
  let nc = natsConnections.get(url);
  if (nc === undefined) {
    nc = natsConnect({ servers: url });
    natsConnections.set(url, nc);
  }
  return { nc: await nc, prefix: m[2]! };
}

async function serve(cmd: Cmd): Promise<string> {
  const provider = conformanceService(emit);
  const options: ConnectionOptions = { name: "conformance-testee" };
  if (typeof cmd.token === "string") options.requireToken = cmd.token;
  switch (cmd.transport) {
    case "unix":
    case "tcp": {
      const listener = cmd.transport === "unix" ? await unix.listen(cmd.address) : await tcp.listen(cmd.address);
      void provider.serve(listener, options);
      return listener.address;
    }
    case "nats": {
      // Attach as a replica; the runner dials it by its replica id.
      const { nc, prefix } = await natsAddress(cmd.address);
      const listener = await nats.listen(nc, provider, { prefix });
      void provider.serve(listener, options);
      return listener.replica;
    }
    case "child":
      // The handshake needs the runner, which waits for `ready`: answer first.
      setImmediate(() => void provider.serveTransport(parent(), options).catch(() => {}));
      return "child";
    default:
      throw new HubwireError("unavailable", `unsupported transport ${JSON.stringify(cmd.transport)}`);
  }
}

async function connect(cmd: Cmd): Promise<Connection> {
  const options: ConnectionOptions = { name: "conformance-testee" };
  if (typeof cmd.token === "string") options.token = cmd.token;
  switch (cmd.transport) {
    case "unix":
      return Connection.dial(await unix.connect(cmd.address), options);
    case "tcp":
      return Connection.dial(await tcp.connect(cmd.address), options);
    case "nats": {
      const { nc, prefix } = await natsAddress(cmd.address);
      return Connection.dial(await nats.dial(nc, { provider: NATS_RUNNER }, { prefix, peer: "conformance-testee" }), options);
    }
    case "child":
      // A child is the acceptor of its parent's socketpair (§10), even when it calls.
      return Connection.accept(parent(), options);
    default:
      throw new HubwireError("unavailable", `unsupported transport ${JSON.stringify(cmd.transport)}`);
  }
}

/** The raw input of a command: `input_text`, `input_hex` or `input_fill`. */
function rawInput(cmd: Cmd): Uint8Array {
  if (typeof cmd.input_text === "string") return new TextEncoder().encode(cmd.input_text);
  if (typeof cmd.input_hex === "string") return Buffer.from(cmd.input_hex, "hex");
  if (Array.isArray(cmd.input_fill)) return new Uint8Array(cmd.input_fill[1]).fill(cmd.input_fill[0]);
  return new Uint8Array(0);
}

/** A raw stream item: hex when it is hex, else its UTF-8 bytes. */
function rawItem(v: unknown): Uint8Array {
  const s = String(v);
  return /^([0-9a-f]{2})*$/i.test(s) ? Buffer.from(s, "hex") : new TextEncoder().encode(s);
}

/** Runs one `call` command; reports its `result` event. */
async function call(conn: Connection, cmd: Cmd): Promise<void> {
  const r: Record<string, unknown> = { event: "result", id: cmd.id };
  const raw = cmd.codec === "raw";
  const show = (v: unknown) => (raw && v instanceof Uint8Array ? hex(v) : v);
  const dropper = new AbortController();
  const options: CallOptions = { codec: cmd.codec ?? "msgpack", signal: dropper.signal };
  if (cmd.timeout_ms > 0) options.timeoutMs = cmd.timeout_ms;
  let dropped = false;
  const drop = () => {
    dropped = true;
    dropper.abort();
  };
  const timer = cmd.cancel_after_ms !== undefined ? setTimeout(drop, cmd.cancel_after_ms) : undefined;
  const items: unknown[] = (cmd.items ?? []).map((v: unknown) => (raw ? rawItem(v) : v));
  const end = cmd.end !== false;
  const readItems = async (stream: AsyncIterable<unknown>) => {
    const got: unknown[] = [];
    r.items = got;
    for await (const x of stream) {
      got.push(show(x));
      if (cmd.read === got.length) {
        drop();
        break;
      }
    }
  };
  try {
    switch (cmd.kind ?? "unary") {
      case "unary": {
        const out = await conn.call(cmd.method, raw ? rawInput(cmd) : cmd.input, options);
        r[raw ? "output_hex" : "output"] = show(out);
        break;
      }
      case "server_stream":
        await readItems(conn.serverStream(cmd.method, raw ? rawInput(cmd) : cmd.input, options));
        break;
      case "client_stream": {
        const cs = conn.clientStream(cmd.method, options);
        for (const x of items) {
          // A send fails once the call has ended (the callee may answer early).
          if (!(await cs.send(x).then(() => true, () => false))) break;
        }
        r.output = show(await (end ? cs.finish() : cs.response()));
        break;
      }
      case "bidi": {
        const bd = conn.bidi(cmd.method, options);
        const sender = (async () => {
          for (const x of items) await bd.send(x);
          if (end) bd.end();
        })();
        sender.catch(() => {});
        await readItems(bd);
        await sender;
        break;
      }
      default:
        throw new HubwireError("invalid_argument", `unknown kind ${JSON.stringify(cmd.kind)}`);
    }
    r.code = dropped ? "cancelled" : "ok";
  } catch (e) {
    const err = e instanceof HubwireError ? e : new HubwireError("internal", String(e));
    r.code = dropped ? "cancelled" : err.code;
    r.message = dropped ? "dropped by the testee" : err.message;
    if (err.code === "failure") r.failure = err.failure ?? null;
  } finally {
    clearTimeout(timer);
  }
  emit(r);
}

async function main(): Promise<void> {
  let conn: Connection | null = null;
  for await (const line of createInterface({ input: process.stdin })) {
    let cmd: Cmd;
    try {
      cmd = JSON.parse(line);
    } catch {
      emit({ event: "error", code: "invalid_argument", message: `not JSON: ${line}` });
      continue;
    }
    switch (cmd.op) {
      case "hello":
        emit({ event: "hello", lang: "ts", version: SDK_VERSION, roles: ["client", "provider"], transports: ["child", "unix", "tcp", "nats"] });
        break;
      case "serve":
        serve(cmd).then(
          (address) => emit({ event: "ready", address }),
          (e) => emit({ event: "error", code: "unavailable", message: String(e?.message ?? e) }),
        );
        break;
      case "connect":
        try {
          conn = await connect(cmd);
          emit({ event: "connected" });
        } catch (e) {
          const err = e instanceof HubwireError ? e : new HubwireError("unavailable", String((e as Error)?.message ?? e));
          emit({ event: "error", code: err.code, message: err.message });
        }
        break;
      case "ping":
        if (conn === null) emit({ event: "result", id: cmd.id, code: "unavailable", message: "not connected" });
        else
          conn.ping().then(
            () => emit({ event: "result", id: cmd.id, code: "ok" }),
            (e: HubwireError) => emit({ event: "result", id: cmd.id, code: e.code, message: e.message }),
          );
        break;
      case "call":
        if (conn === null) emit({ event: "result", id: cmd.id, code: "unavailable", message: "not connected" });
        else void call(conn, cmd);
        break;
      default:
        emit({ event: "error", code: "invalid_argument", message: `unknown op ${JSON.stringify(cmd.op)}` });
    }
  }
  conn?.close();
  process.exit(0);
}

void main();
