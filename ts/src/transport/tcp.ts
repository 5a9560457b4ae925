/**
 * TCP (`host:port`), with `TCP_NODELAY` so a small frame leaves at once.
 */

import * as net from "node:net";
import type { Listener, OnTransport, Transport } from "./index.js";
import { SocketTransport } from "./socket.js";
import { bind } from "./unix.js";

/** Splits `host:port` (IPv6 hosts in brackets: `[::1]:7070`). */
export function parseAddress(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(":");
  const port = Number(address.slice(i + 1));
  if (i < 0 || !Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`not a host:port address: ${address}`);
  return { host: address.slice(0, i).replace(/^\[(.*)\]$/, "$1"), port };
}

/** `host:port`, with an IPv6 host in brackets. */
export function formatAddress(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Connects to `host:port`. */
export function connect(address: string): Promise<Transport> {
  const { host, port } = parseAddress(address);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port, allowHalfOpen: true, noDelay: true });
    socket.once("error", reject);
    socket.once("connect", () => {
      socket.off("error", reject);
      resolve(new SocketTransport(socket, `tcp:${address}`));
    });
  });
}

/**
 * Listens on `host:port` (port 0 picks one: see `.address`). Each accepted
 * connection's transport goes to `onTransport` if given, else to whoever
 * takes the listener: `provider.serve(listener)` or `listener.accept(…)`.
 */
export async function listen(address: string, onTransport?: OnTransport): Promise<Listener> {
  const { host, port } = parseAddress(address);
  const server = net.createServer({ allowHalfOpen: true, noDelay: true });
  const l = await bind(
    server,
    { host, port },
    (s) => `tcp:${formatAddress(s.remoteAddress ?? "?", s.remotePort ?? 0)}`,
    () => {
      const a = server.address() as net.AddressInfo;
      return formatAddress(a.address, a.port);
    },
    (s) => s.setNoDelay(true),
  );
  if (onTransport !== undefined) void l.accept(onTransport);
  return l;
}
