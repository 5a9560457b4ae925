/**
 * Unix domain sockets (`SOCK_STREAM`; the path is the address).
 */

import * as net from "node:net";
import type { Listener, OnTransport, Transport } from "./index.js";
import { Backlog } from "./backlog.js";
import { SocketTransport } from "./socket.js";

/** Connects to the socket at `path`. */
export function connect(path: string): Promise<Transport> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ path, allowHalfOpen: true });
    socket.once("error", reject);
    socket.once("connect", () => {
      socket.off("error", reject);
      resolve(new SocketTransport(socket, `unix:${path}`));
    });
  });
}

/**
 * Listens on `path`. Each accepted connection's transport goes to
 * `onTransport` if given, else to whoever takes the listener: pass it to
 * `provider.serve(listener)`, or call `listener.accept(onTransport)`.
 */
export async function listen(path: string, onTransport?: OnTransport): Promise<Listener> {
  const l = await bind(net.createServer({ allowHalfOpen: true }), { path }, () => `unix:${path}`, () => path);
  if (onTransport !== undefined) void l.accept(onTransport);
  return l;
}

/**
 * @internal Binds `server` (shared with TCP). Until a callback takes them
 * ({@link Listener.accept}), accepted connections wait in a list; those
 * still waiting when the listener closes are closed.
 */
export function bind(
  server: net.Server,
  where: net.ListenOptions,
  describe: (s: net.Socket) => string,
  address: () => string,
  setup?: (s: net.Socket) => void,
  event: "connection" | "secureConnection" = "connection",
): Promise<Listener> {
  const backlog = new Backlog();
  // `secureConnection` for a TLS server: the socket once its handshake is done.
  server.on(event, (s: net.Socket) => {
    setup?.(s);
    backlog.push(new SocketTransport(s, describe(s)));
  });
  server.once("close", () => backlog.close());
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(where, () => {
      server.off("error", reject);
      resolve({
        address: address(),
        accept: (callback: OnTransport) => backlog.accept(callback),
        close: () => new Promise<void>((done) => server.close(() => done())),
      });
    });
  });
}
