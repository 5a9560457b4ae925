/**
 * Child-process providers (`spec/PROTOCOL.md` §10): the parent starts the
 * child with one end of a socketpair as descriptor 3 and `HUBWIRE_FD=3`;
 * the protocol never touches stdin/stdout, so a stray print cannot corrupt
 * it. The child's stdout and stderr become log lines. The parent dials,
 * the child accepts ({@link serveChild}).
 */

import { spawn as spawnProcess, type ChildProcess } from "node:child_process";
import * as net from "node:net";
import { createInterface } from "node:readline";
import type { Connection, ConnectionOptions } from "../connection.js";
import type { Provider } from "../provider.js";
import { HubwireError } from "../errors.js";
import type { Transport } from "./index.js";
import { SocketTransport } from "./socket.js";

/** Receives a child's output, one line at a time. */
export type LogSink = (line: string, stream: "stdout" | "stderr") => void;

/** Options of {@link spawn}. */
export interface SpawnOptions {
  /** The provider's name in log lines (default: the command). */
  name?: string;
  /** Extra environment variables (on top of this process's). */
  env?: Record<string, string>;
  /** Where the child's output lines go (default: this process's stderr, tagged). */
  onLog?: LogSink;
}

/** The transport to a spawned child, with its process. */
export interface ChildTransport extends Transport {
  /** The child process (to wait for or kill). */
  readonly process: ChildProcess;
}

/** Starts `command` with a socketpair on fd 3 (`HUBWIRE_FD=3`) and returns the transport to it. */
export function spawn(command: string, args: readonly string[] = [], options: SpawnOptions = {}): ChildTransport {
  const name = options.name ?? command;
  // 'pipe' for fd 3 is a socketpair in libuv: the spec's dedicated descriptor.
  const proc = spawnProcess(command, args, {
    stdio: ["ignore", "pipe", "pipe", "pipe"],
    env: { ...process.env, ...options.env, HUBWIRE_FD: "3" },
  });
  const onLog = options.onLog ?? ((line, stream) => process.stderr.write(`[${name} ${stream}] ${line}\n`));
  for (const stream of ["stdout", "stderr"] as const) {
    // readline decodes UTF-8 leniently: invalid bytes become U+FFFD, never an error.
    createInterface({ input: proc[stream]! }).on("line", (line) => onLog(line, stream));
  }
  const socket = proc.stdio[3] as net.Socket;
  const t = new SocketTransport(socket, `child:${name}`);
  proc.on("error", (e) => socket.destroy(e));
  return Object.assign(t, { process: proc });
}

/** In a child started by a hubwire parent: the transport to the parent, or `null` when `HUBWIRE_FD` is not set. */
export function parent(): Transport | null {
  const fd = process.env.HUBWIRE_FD;
  if (fd === undefined) return null;
  const n = Number(fd);
  if (!Number.isInteger(n) || n < 0) throw new HubwireError("unavailable", `HUBWIRE_FD is not a descriptor: ${JSON.stringify(fd)}`);
  const socket = new net.Socket({ fd: n, readable: true, writable: true, allowHalfOpen: true });
  return new SocketTransport(socket, `parent:fd${n}`);
}

/**
 * In a child process: serves `provider` to the parent (the acceptor's side
 * of the socketpair) until the connection ends; resolves with why. Fails
 * with `unavailable` when this process was not started by a hubwire parent.
 */
export async function serveChild(provider: Provider, options: ConnectionOptions = {}): Promise<HubwireError> {
  const t = parent();
  if (t === null) throw new HubwireError("unavailable", "HUBWIRE_FD is not set: this program must be started by a hubwire parent");
  const conn: Connection = await provider.serveTransport(t, options);
  return conn.closed;
}
