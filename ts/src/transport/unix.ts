/**
 * Unix domain sockets (`SOCK_STREAM`; the path is the address).
 */

import * as net from "node:net";
import type { Listener, OnTransport, Transport } from "./index.js";
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

/** Listens on `path`; each accepted connection's transport goes to `onTransport`. */
export function listen(path: string, onTransport: OnTransport): Promise<Listener> {
  return serveOn(net.createServer({ allowHalfOpen: true }), { path }, () => `unix:${path}`, onTransport, () => path);
}

/** @internal Binds `server` and hands out a transport per connection (shared with TCP). */
export function serveOn(
  server: net.Server,
  where: net.ListenOptions,
  describe: (s: net.Socket) => string,
  onTransport: OnTransport,
  address: () => string,
  setup?: (s: net.Socket) => void,
): Promise<Listener> {
  server.on("connection", (s) => {
    setup?.(s);
    onTransport(new SocketTransport(s, describe(s)));
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(where, () => {
      server.off("error", reject);
      resolve({
        address: address(),
        close: () => new Promise<void>((done) => server.close(() => done())),
      });
    });
  });
}
