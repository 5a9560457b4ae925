/**
 * hubwire over NATS (`spec/PROTOCOL.md` §13): peers meet through a NATS
 * server or cluster instead of an address. A connection runs over a
 * *link* (`natslink.ts`), opened by a NATS request to a connect subject:
 * `P.m.<method>`, `P.p.<provider>` or `P.r.<replica id>`, each in the
 * queue group `hubwire`, so NATS picks one live replica and fails over to
 * another when one goes. Above the link everything is as on a socket.
 *
 * Bring your own NATS connection (the `nats` package's `connect`, with
 * whatever credentials and TLS your servers want), then:
 *
 * ```ts
 * const conn = await Connection.dial(await nats.dial(nc, { method: "echo" }));
 * await provider.serve(await nats.listen(nc, provider));
 * ```
 */

import { createInbox, ErrorCode, type Endpoint, type Msg, type NatsConnection, type NatsError, type ServiceMsg } from "nats";
import { CODES, type CodeName } from "../codes.js";
import { HubwireError } from "../errors.js";
import { SDK_VERSION, type MethodInfo } from "../hello.js";
import { Backlog } from "./backlog.js";
import type { Listener, OnTransport } from "./index.js";
import { NatsLink } from "./natslink.js";
import {
  connectSubject,
  DEFAULT_PREFIX,
  LINK_VERSION,
  parseConnectRequest,
  QUEUE_GROUP,
  serviceName,
  token,
  validSubject,
  type ConnectReply,
  type ConnectRequest,
  type Target,
} from "./natssubjects.js";

export { NatsLink } from "./natslink.js";
export * from "./natssubjects.js";

/** How long a dial waits for a replica's reply (§13.2.6). */
export const DEFAULT_CONNECT_TIMEOUT_MS = 1000;
/** Links a replica holds at once before refusing `resource_exhausted`. */
export const DEFAULT_MAX_LINKS = 4096;

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder();

/** Options of {@link dial}. */
export interface DialOptions {
  /** The deployment's subject prefix (default `hubwire`). */
  prefix?: string;
  /** How long to wait for a replica's reply (default 1 s). */
  connectTimeoutMs?: number;
  /** Our name, sent as `peer` for the acceptor's logs. */
  peer?: string;
}

/** How {@link dial} names what it was asked to reach, in errors. */
function describeTarget(target: Target): string {
  if ("method" in target) return `method ${JSON.stringify(target.method)}`;
  if ("provider" in target) return `provider ${JSON.stringify(target.provider)}`;
  return `replica ${JSON.stringify(target.replica)}`;
}

/**
 * Opens a link to one replica offering `target`, chosen by NATS (§13.2).
 * Resolves to its transport, for `Connection.dial`; its `replica` and
 * `provider` say whom it reached. Fails with a `HubwireError`:
 * `unavailable` at once when nobody offers `target` (NATS's no
 * responders) and after the connect timeout when no replica answers; the
 * replica's code when it refuses.
 */
export async function dial(nc: NatsConnection, target: Target, options: DialOptions = {}): Promise<NatsLink> {
  const subject = connectSubject(options.prefix ?? DEFAULT_PREFIX, target);
  const what = describeTarget(target);
  const timeout = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  // Subscribed before anything is sent: the replica may publish before its reply arrives.
  let link: NatsLink;
  try {
    link = new NatsLink(nc, createInbox(), null, `nats:${subject}`);
  } catch (e) {
    // The NATS connection is closed (or draining): nothing can be reached.
    throw dialError(e, what, subject, timeout);
  }
  const body: ConnectRequest = { hubwire: LINK_VERSION, link: link.inbox };
  if (options.peer !== undefined) body.peer = options.peer;
  let reply: ConnectReply;
  try {
    const msg = await nc.request(subject, utf8.encode(JSON.stringify(body)), { timeout });
    reply = parseReply(msg);
  } catch (e) {
    link.close();
    throw dialError(e, what, subject, timeout);
  }
  if (reply.error !== undefined) {
    link.close();
    const code = (reply.error.code in CODES ? reply.error.code : "unavailable") as CodeName;
    throw new HubwireError(code, `${what} on NATS refused the link: ${reply.error.message}`);
  }
  if (typeof reply.link !== "string" || !validSubject(reply.link) || typeof reply.replica !== "string") {
    link.close();
    throw new HubwireError("protocol_error", `${what} on NATS answered without a valid "link" subject or a "replica"`);
  }
  link.replica = reply.replica;
  link.provider = typeof reply.provider === "string" ? reply.provider : "";
  link.connected(reply.link);
  return link;
}

/** A connect reply's body as JSON. */
function parseReply(msg: Msg): ConnectReply {
  let v: unknown;
  try {
    v = JSON.parse(fromUtf8.decode(msg.data));
  } catch {
    throw new HubwireError("protocol_error", "the connect reply is not JSON");
  }
  if (typeof v !== "object" || v === null) throw new HubwireError("protocol_error", "the connect reply is not a JSON object");
  return v as ConnectReply;
}

/** A failed connect request as the dial's `HubwireError`. */
function dialError(e: unknown, what: string, subject: string, timeout: number): HubwireError {
  if (e instanceof HubwireError) return e;
  const code = (e as NatsError).code;
  if (code === ErrorCode.NoResponders) return new HubwireError("unavailable", `no provider of ${what} on NATS (nobody subscribes ${subject})`);
  if (code === ErrorCode.Timeout) return new HubwireError("unavailable", `no replica of ${what} answered on NATS within ${timeout} ms`);
  return new HubwireError("unavailable", `cannot reach ${what} on NATS: ${(e as Error).message}`);
}

/** What a replica serves, as NATS sees it: a `Provider` fits. */
export interface ServiceSource {
  /** The provider name (HELLO `peer` name), exact. */
  readonly name: string;
  /** Its methods (read once, when the replica attaches). */
  methods(): MethodInfo[];
  /** Optional: calls of `method` served so far, on any connection (`Provider.served`); `$SRV.STATS` reports it as `data.calls`. */
  served?(method: string): number;
}

/** Options of {@link listen}. */
export interface ListenOptions {
  /** The deployment's subject prefix (default `hubwire`). */
  prefix?: string;
  /** Links held at once; more are refused `resource_exhausted` (default 4096). */
  maxLinks?: number;
  /** The version `$SRV` answers give (semver; default the SDK's). */
  version?: string;
}

/**
 * A replica attached to NATS: a {@link Listener} whose connections are
 * links. Hand it to `provider.serve(listener)`.
 */
export interface NatsListener extends Listener {
  /** This replica's id (a NUID), its `P.r.<id>` subject and its `$SRV` id. */
  readonly replica: string;
}

/**
 * Attaches a replica of `source` (usually a `Provider`) to NATS (§13.2,
 * §13.7) and resolves once the server has its subscriptions: a NATS
 * *micro* service (the `nats` package's `services`, which answers
 * `$SRV.PING/INFO/STATS`) whose endpoints are the connect subjects — one
 * per method, `-provider` and `-replica` — in the queue group `hubwire`.
 * Each accepted link is an ordinary transport, served by
 * `provider.serve(listener, options)`. Closing the listener stops the
 * service (no new link reaches it); links already open go on.
 */
export async function listen(nc: NatsConnection, source: ServiceSource, options: ListenOptions = {}): Promise<NatsListener> {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const maxLinks = options.maxLinks ?? DEFAULT_MAX_LINKS;
  const service = await nc.services.add({
    name: serviceName(source.name),
    version: options.version ?? SDK_VERSION,
    description: `hubwire provider ${source.name}`,
    metadata: { "hubwire.protocol": String(LINK_VERSION), "hubwire.provider": source.name, "hubwire.prefix": prefix },
    queue: QUEUE_GROUP,
    // `data` of a method's endpoint: its calls served; null for `-provider`/`-replica`.
    statsHandler: async (ep: Endpoint) => {
      const method = ep.metadata?.["hubwire.method"];
      return method === undefined ? null : { calls: source.served?.(method) ?? 0 };
    },
  });
  const replica = service.info().id;
  const open = new Set<NatsLink>();
  const backlog = new Backlog();
  let closing = false;

  /** One connect request: a new link, subscribed before the reply (§13.2.3), or a refusal (an ordinary reply). */
  const connect = (err: NatsError | null, msg: ServiceMsg): void => {
    if (err !== null) return;
    let reply: ConnectReply;
    try {
      if (closing) throw new HubwireError("unavailable", "this replica is shutting down");
      const req = parseConnectRequest(msg.data);
      if (open.size >= maxLinks) throw new HubwireError("resource_exhausted", `replica takes no more links (${maxLinks})`);
      const who = req.peer !== undefined ? `${req.peer} ` : "";
      const link = new NatsLink(nc, createInbox(), req.link, `nats:${who}${req.link}`);
      open.add(link);
      link.onRelease = () => open.delete(link);
      backlog.push(link);
      reply = { hubwire: LINK_VERSION, link: link.inbox, replica, provider: source.name };
    } catch (e) {
      const refusal = e instanceof HubwireError ? e : new HubwireError("internal", String(e));
      reply = { hubwire: LINK_VERSION, error: { code: refusal.code, message: refusal.message } };
    }
    msg.respond(utf8.encode(JSON.stringify(reply)));
  };

  const endpoint = (name: string, target: Target, metadata: Record<string, string>) =>
    service.addEndpoint(name, { subject: connectSubject(prefix, target), metadata, handler: connect });
  for (const m of source.methods()) endpoint(token(m.name), { method: m.name }, { "hubwire.method": m.name, "hubwire.kind": m.kind });
  endpoint("-provider", { provider: source.name }, { "hubwire.connect": "provider" });
  endpoint("-replica", { replica }, { "hubwire.connect": "replica" });
  // A PING answered by a PONG: the server has every subscription made before (§13.7).
  await nc.flush();

  return {
    replica,
    address: `nats:${prefix}.r.${replica}`,
    accept: (callback: OnTransport) => backlog.accept(callback),
    async close(): Promise<void> {
      if (!closing) {
        closing = true;
        await service.stop();
        backlog.close();
      }
      return backlog.closed;
    },
  };
}
