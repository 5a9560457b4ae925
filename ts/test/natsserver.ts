/**
 * A real `nats-server` for the tests, on a free loopback port, killed
 * (SIGKILL) by `kill()` and when the test process exits. The binary is
 * Debian's `nats-server` package (`make deps`), found as the Rust helper
 * finds it (`rust/hubwire-tests/src/nats_server.rs`): `$NATS_SERVER`, else
 * on `PATH`, else `/usr/sbin` or `/usr/bin`.
 */

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, connect as tcpConnect } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";

/** How long a server may take to accept clients. */
const START_DEADLINE_MS = 15_000;

/** Where `nats-server` is, or null when it is not installed. */
export function natsServerBinary(): string | null {
  if (process.env.NATS_SERVER) return process.env.NATS_SERVER;
  const dirs = [...(process.env.PATH ?? "").split(delimiter), "/usr/sbin", "/usr/bin"];
  for (const d of dirs) if (d !== "" && existsSync(join(d, "nats-server"))) return join(d, "nats-server");
  return null;
}

/** A free TCP port on 127.0.0.1 (bound, then released for the server). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** Whether something accepts connections on `port` and says `INFO` first. */
function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = tcpConnect({ host: "127.0.0.1", port });
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(500, () => done(false));
    s.once("error", () => done(false));
    s.once("data", (b) => done(b.toString("latin1").startsWith("INFO ")));
  });
}

/** One running server. */
export interface NatsServer {
  /** The URL clients connect to. */
  url: string;
  port: number;
  /** Kills the server at once, as a crashed node. */
  kill(): void;
}

const running = new Set<ChildProcess>();
process.once("exit", () => running.forEach((c) => c.kill("SIGKILL")));

/** Starts a server (with its `max_payload`, if given) and waits until it accepts clients. */
export async function startNatsServer(options: { maxPayload?: number } = {}): Promise<NatsServer> {
  const bin = natsServerBinary();
  if (bin === null) throw new Error("nats-server not found (on PATH, /usr/sbin or $NATS_SERVER): run `make deps` to install it");
  const port = await freePort();
  let conf = `listen: 127.0.0.1:${port}\n`;
  if (options.maxPayload !== undefined) conf += `max_payload: ${options.maxPayload}\n`;
  const dir = mkdtempSync(join(tmpdir(), "hubwire-nats-"));
  const path = join(dir, "nats.conf");
  writeFileSync(path, conf);
  const child = spawn(bin, ["-c", path], { stdio: "ignore" });
  // The server does not keep the test process alive; it is killed when that exits.
  child.unref();
  running.add(child);
  child.once("exit", () => running.delete(child));
  const kill = () => void child.kill("SIGKILL");
  const deadline = Date.now() + START_DEADLINE_MS;
  try {
    while (!(await answers(port))) {
      if (child.exitCode !== null || Date.now() > deadline) {
        kill();
        throw new Error(`nats-server on port ${port} did not start`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    // It reads its config when it starts, before it answers: started or
    // not, the file is not read again.
    rmSync(dir, { recursive: true, force: true });
  }
  return { url: `nats://127.0.0.1:${port}`, port, kill };
}
