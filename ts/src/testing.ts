/**
 * Test support: a service and a client connected in one process over the
 * in-memory transport (as `hubwire::testing::pair` in the Rust core), so
 * a test exercises the real protocol without a socket.
 *
 *   const { client, server } = await testing.pair(provider);
 *   await client.call("echo", 1);
 */

import { Connection, type ConnectionOptions } from "./connection.js";
import type { Service } from "./engine/serve.js";
import { Provider } from "./provider.js";
import { pair as memoryPair } from "./transport/memory.js";

/** Options of {@link pair}: each side's {@link ConnectionOptions}. */
export interface PairOptions {
  /** The dialer's options (it may offer a provider too, for calls back). */
  client?: ConnectionOptions;
  /** The acceptor's options (its `provider` is the service given). */
  server?: ConnectionOptions;
}

/**
 * Serves `service` on one end of an in-memory transport and dials it from
 * the other; resolves with both connections once the handshake is done
 * (rejects, closing both, if it fails). A `Provider` is served under its
 * name, as `provider.serveTransport` does.
 */
export async function pair(service: Service, options: PairOptions = {}): Promise<{ client: Connection; server: Connection }> {
  const [a, b] = memoryPair();
  const name = service instanceof Provider ? service.name : undefined;
  const [client, server] = await Promise.allSettled([
    Connection.dial(a, options.client),
    Connection.accept(b, { name, ...options.server, service }),
  ]);
  if (client.status === "fulfilled" && server.status === "fulfilled") return { client: client.value, server: server.value };
  for (const side of [client, server]) if (side.status === "fulfilled") side.value.close();
  throw client.status === "rejected" ? client.reason : (server as PromiseRejectedResult).reason;
}
