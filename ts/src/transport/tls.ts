/**
 * TLS over TCP (`host:port`), with Node's own `tls`: the same frames as
 * over `tcp`, encrypted. The counterpart of the Rust runtime's
 * `transport/tls.rs`, and what a hub's `tcp` listener speaks when its
 * config has `[hub.tls]`. Certificates and keys are PEM text (or Buffers).
 */

import type * as net from "node:net";
import * as tls from "node:tls";
import type { Listener, OnTransport, Transport } from "./index.js";
import { SocketTransport } from "./socket.js";
import { formatAddress, parseAddress } from "./tcp.js";
import { bind } from "./unix.js";

/** How long a TLS handshake may take, on either side (as in the Rust runtime). */
export const HANDSHAKE_TIMEOUT_MS = 10_000;

/** PEM text, or several. */
export type Pem = string | Buffer | Array<string | Buffer>;

/** What a dialer checks and shows. */
export interface ConnectOptions {
  /** CA certificates that signed the server's certificate (default: Node's bundled roots). */
  ca?: Pem;
  /** Our certificate chain, for a server that asks for one (mutual TLS). */
  cert?: Pem;
  /** The key of `cert`. */
  key?: Pem;
  /** The name the server's certificate must carry (default: the host of the address). */
  servername?: string;
}

/** What a listener shows and asks for. */
export interface ListenOptions {
  /** Our certificate chain. */
  cert: Pem;
  /** Its key. */
  key: Pem;
  /** When given, every client must present a certificate signed by one of these. */
  clientCa?: Pem;
}

/**
 * Connects to `host:port` and completes the handshake (within
 * {@link HANDSHAKE_TIMEOUT_MS}), checking the server's certificate.
 */
export function connect(address: string, options: ConnectOptions = {}): Promise<Transport> {
  const { host, port } = parseAddress(address);
  return new Promise((resolve, reject) => {
    const socket = tls.connect({
      host,
      port,
      ca: options.ca,
      cert: options.cert,
      key: options.key,
      // Node refuses SNI for an IP address; the certificate is then checked against the IP.
      servername: options.servername ?? (host.includes(":") || /^[\d.]+$/.test(host) ? undefined : host),
    });
    const fail = (e: Error): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(new Error(`connect to tls:${address}: ${e.message}`));
    };
    const timer = setTimeout(() => fail(new Error(`TLS handshake not done within ${HANDSHAKE_TIMEOUT_MS} ms`)), HANDSHAKE_TIMEOUT_MS);
    socket.once("error", fail);
    socket.once("secureConnect", () => {
      clearTimeout(timer);
      socket.off("error", fail);
      socket.setNoDelay(true);
      resolve(new SocketTransport(socket, `tls:${address}`));
    });
  });
}

/**
 * Listens on `host:port` (port 0 picks one: see `.address`); a connection
 * becomes a transport once its handshake is done (within
 * {@link HANDSHAKE_TIMEOUT_MS}; one that is not is dropped). Accepting works as
 * for `tcp.listen`.
 */
export async function listen(address: string, options: ListenOptions, onTransport?: OnTransport): Promise<Listener> {
  const { host, port } = parseAddress(address);
  const server = tls.createServer({
    allowHalfOpen: true,
    noDelay: true,
    handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
    cert: options.cert,
    key: options.key,
    ca: options.clientCa,
    requestCert: options.clientCa !== undefined,
    rejectUnauthorized: options.clientCa !== undefined,
  });
  const l = await bind(
    server,
    { host, port },
    (s: net.Socket) => `tls:${formatAddress(s.remoteAddress ?? "?", s.remotePort ?? 0)}`,
    () => {
      const a = server.address() as net.AddressInfo;
      return formatAddress(a.address, a.port);
    },
    undefined,
    "secureConnection",
  );
  if (onTransport !== undefined) void l.accept(onTransport);
  return l;
}
