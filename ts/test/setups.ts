/**
 * The transports the behaviour suite runs on. Each setup connects a
 * client (which also offers a small provider, so the far side can call
 * back) to the behaviour service, and can make the far side crash.
 */

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { MessageChannel, Worker } from "node:worker_threads";
import { spawn, type ChildProcess } from "node:child_process";
import { connect as natsConnect, nuid } from "nats";
import { child, Connection, messageport, nats, Provider, sharedmemory, tcp, testing, tls, unix, type Transport } from "hubwire";
import { behaviourService } from "./fixtures/service.js";
import { natsServerBinary, startNatsServer, type NatsServer } from "./natsserver.js";
import { makePki } from "./pki.js";

/** Certificates for the `tls` setup (none without `openssl`: the setup is left out). */
const PKI = makePki();

/** A connected client, and a way to kill its peer. */
export interface Setup {
  conn: Connection;
  /** The far side dies abruptly (process killed, thread terminated, socket dropped). */
  crash(): void;
  /** Lines the far side printed (child process only). */
  logs: string[];
  close(): Promise<void>;
}

const MAIN = fileURLToPath(new URL("./fixtures/provider-main.js", import.meta.url));

/** What the client side offers, for calls from the provider. */
export function clientService(): Provider {
  return new Provider("client").unary("whoami", (x: unknown) => ({ me: "client", got: x }));
}

async function inProcess(listen: (on: (t: Transport) => void) => Promise<{ dial(): Promise<Transport>; close(): Promise<void> }>): Promise<Setup> {
  const served: Transport[] = [];
  const service = behaviourService();
  const l = await listen((t) => {
    served.push(t);
    void service.serveTransport(t).catch(() => {});
  });
  const conn = await Connection.dial(await l.dial(), { name: "behaviour-client", service: clientService() });
  return {
    conn,
    logs: [],
    crash: () => served.forEach((t) => t.close()),
    close: async () => {
      conn.close();
      await l.close();
    },
  };
}

/**
 * The behaviour service in a process of its own attached to NATS at `url`
 * under `prefix`; resolves once it is subscribed, with its replica id.
 */
export async function natsProvider(url: string, prefix: string): Promise<{ proc: ChildProcess; replica: string }> {
  const proc = spawn(process.execPath, [MAIN], {
    env: { ...process.env, HUBWIRE_NATS_URL: url, HUBWIRE_NATS_PREFIX: prefix },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const replica = await new Promise<string>((resolve, reject) => {
    proc.once("exit", (c) => reject(new Error(`the NATS provider exited (${c})`)));
    proc.stdout!.on("data", (b: Buffer) => {
      const m = /ready (\w+)/u.exec(b.toString());
      if (m !== null) resolve(m[1]!);
    });
  });
  return { proc, replica };
}

/** The one `nats-server` of the NATS setups, started by the first. */
let natsServer: Promise<NatsServer> | null = null;

/**
 * The behaviour service in a child process attached to NATS (under a
 * prefix of its own, so setups never meet), reached by a link to its
 * `echo` method's subject; a crash is a `kill -9` of that process.
 */
async function overNats(): Promise<Setup> {
  natsServer ??= startNatsServer();
  const server = await natsServer;
  const prefix = `t${nuid.next()}`;
  const { proc } = await natsProvider(server.url, prefix);
  const nc = await natsConnect({ servers: server.url });
  const link = await nats.dial(nc, { method: "echo" }, { prefix });
  const conn = await Connection.dial(link, { name: "behaviour-client", service: clientService() });
  return {
    conn,
    logs: [],
    crash: () => void proc.kill("SIGKILL"),
    close: async () => {
      conn.close();
      proc.kill("SIGKILL");
      await nc.close();
    },
  };
}

/** Every setup, by name. */
export const SETUPS: Record<string, () => Promise<Setup>> = {
  memory: async () => {
    const { client, server } = await testing.pair(behaviourService(), { client: { name: "behaviour-client", service: clientService() } });
    return {
      conn: client,
      logs: [],
      crash: () => server.transport.close(),
      close: async () => client.close(),
    };
  },
  unix: () =>
    inProcess(async (on) => {
      const dir = mkdtempSync(join(tmpdir(), "hubwire-ts-"));
      const path = join(dir, "b.sock");
      const l = await unix.listen(path, on);
      const close = async () => {
        await l.close();
        rmSync(dir, { recursive: true, force: true });
      };
      return { dial: () => unix.connect(path), close };
    }),
  tcp: () =>
    inProcess(async (on) => {
      const l = await tcp.listen("127.0.0.1:0", on);
      return { dial: () => tcp.connect(l.address), close: () => l.close() };
    }),
  // Mutual TLS: the client presents a certificate the listener requires.
  ...(PKI === null
    ? {}
    : {
        tls: () =>
          inProcess(async (on) => {
            const l = await tls.listen("127.0.0.1:0", { cert: PKI.serverCert, key: PKI.serverKey, clientCa: PKI.ca }, on);
            const dial = () => tls.connect(l.address, { ca: PKI.ca, cert: PKI.clientCert, key: PKI.clientKey });
            return { dial, close: () => l.close() };
          }),
      }),
  child: async () => {
    const logs: string[] = [];
    const t = child.spawn(process.execPath, [MAIN], { name: "behaviour", onLog: (line) => logs.push(line) });
    const conn = await Connection.dial(t, { name: "behaviour-client", service: clientService() });
    return {
      conn,
      logs,
      crash: () => t.process.kill("SIGKILL"),
      close: async () => {
        conn.close();
        if (t.process.exitCode === null && t.process.signalCode === null) await new Promise((r) => t.process.once("exit", r));
      },
    };
  },
  worker: async () => {
    const { port1, port2 } = new MessageChannel();
    const worker = new Worker(MAIN, { workerData: { port: port2 }, transferList: [port2] });
    const conn = await Connection.dial(messageport.connect(port1, "worker"), { name: "behaviour-client", service: clientService() });
    return {
      conn,
      logs: [],
      crash: () => void worker.terminate(),
      close: async () => {
        conn.close();
        await worker.terminate();
      },
    };
  },
  // Left out where nats-server is not installed (`make deps` installs it).
  ...(natsServerBinary() === null ? {} : { nats: overNats }),
  sharedmemory: async () => {
    const sab = sharedmemory.buffer(1 << 16);
    const worker = new Worker(MAIN, { workerData: { sab } });
    const t = sharedmemory.connect(sab, "dialer", { watch: worker });
    const conn = await Connection.dial(t, { name: "behaviour-client", service: clientService() });
    return {
      conn,
      logs: [],
      crash: () => void worker.terminate(),
      close: async () => {
        conn.close();
        await worker.terminate();
      },
    };
  },
};
