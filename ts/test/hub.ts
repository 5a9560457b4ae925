/**
 * A real hub for the WebSocket tests: `hubwire hub` (the Rust daemon) on a
 * config written for the test, with a WebSocket listener on port 0 and the
 * Rust test provider (`hubwire-test-provider`: echo, count, sum, upper…).
 * The binaries come from `$HUBWIRE_BIN` (mk/ts.mk sets it), else
 * `rust/target/debug`.
 */

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** Where the Rust binaries are. */
export const BIN = process.env.HUBWIRE_BIN ?? fileURLToPath(new URL("../../../rust/target/debug", import.meta.url));

/** A running hub; `stop()` ends it (SIGTERM, then SIGKILL) and removes its directory. */
export interface RunningHub {
  /** `ws://127.0.0.1:PORT/` (or as `startHub`'s `scheme` says), read from the hub's log. */
  url: string;
  /** The hub's stderr so far. */
  log(): string;
  stop(): Promise<void>;
}

/**
 * Starts a hub with `extra` lines in `[hub]` (tables such as `[hub.tls]`
 * may follow them); resolves once the listener `scheme` (`ws`, `wss`, or
 * `tls` for a tcp listener with TLS) has logged its port and the provider
 * has logged `ready` (before that, the hub answers its methods "still
 * starting"). The `url` is then `ws://…/`, `wss://…/`, or `HOST:PORT` for
 * `tls`.
 */
export async function startHub(extra = "", scheme: "ws" | "wss" | "tls" = "ws"): Promise<RunningHub> {
  const dir = mkdtempSync(join(tmpdir(), "hw-ws-"));
  const config = join(dir, "hubwire.toml");
  const provider = JSON.stringify(join(BIN, "hubwire-test-provider"));
  writeFileSync(config, `[hub]\nwebsocket = "127.0.0.1:0"\n${extra}\n[[provider]]\nname = "rust"\nexec = [${provider}]\n`, {
    // The hub refuses a config others could write, whatever the umask.
    mode: 0o600,
  });
  const hub: ChildProcess = spawn(join(BIN, "hubwire"), ["hub", "--config", config], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  const started = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the hub logged no ${scheme} port and no ready provider within 20 s:\n${log}`)), 20_000);
    hub.once("error", (e) => reject(new Error(`cannot start ${join(BIN, "hubwire")} (run make build, or set HUBWIRE_BIN): ${e.message}`)));
    hub.once("exit", (code) => reject(new Error(`the hub exited (${code}):\n${log}`)));
    hub.stderr!.setEncoding("utf8").on("data", (s: string) => {
      log += s;
      const m = new RegExp(`listen=${scheme}:(\\S+)`).exec(log);
      if (m && /\bready provider=rust\b/.test(log)) {
        clearTimeout(timer);
        resolve(scheme === "tls" ? m[1]! : `${scheme}://${m[1]}/`);
      }
    });
  });
  let url: string;
  try {
    url = await started;
  } catch (e) {
    // No `stop()` to call: end the hub and remove its directory here.
    hub.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return {
    url,
    log: () => log,
    async stop() {
      if (hub.exitCode === null && hub.signalCode === null) {
        const exited = new Promise((r) => hub.once("exit", r));
        hub.kill("SIGTERM");
        const killer = setTimeout(() => hub.kill("SIGKILL"), 10_000);
        await exited;
        clearTimeout(killer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
