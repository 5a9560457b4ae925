/**
 * The client's half of the direct path through a hub (`spec/PROTOCOL.md`
 * §14), as Node allows it: a connection dialled with
 * `ConnectionOptions.direct` to a hub that sent `direct` too keeps
 * {@link DirectRoutes}: for each method, the direct connection to a
 * provider replica that serves it.
 *
 * The first call of a method that has none goes through the hub as always
 * and, meanwhile, asks the hub for one (`hubwire.direct`, one at a time per
 * hub connection, with `via: ["address"]`: Node's `net.Socket` cannot
 * receive a descriptor, so a spawned provider's path, which is one, is
 * never offered). The hub's DIRECT names the replica's own listener; the
 * client dials it and, once the handshake is done, routes that provider's
 * methods there.
 *
 * A direct connection takes no new calls once it drains (GOAWAY) or ends,
 * nor once the hub connection does; a unary call that fails because the
 * replica never saw it ({@link neverSent}) is started again through the
 * hub, so no call is lost to a replica's restart.
 */

import { HubwireError } from "./errors.js";
import type { DirectOffer } from "./frame.js";
import type { Core } from "./engine/state.js";
import type { Transport } from "./transport/index.js";

/** The hub's own method a client asks for a direct connection with. */
export const DIRECT_METHOD = "hubwire.direct";
/** The hub's own method a replica reports its direct calls to. */
export const REPORT_METHOD = "hubwire.report";
/** Method names of the protocol and of hubs: never routed directly. */
const RESERVED_PREFIX = "hubwire.";

/** How long the calls in flight on a direct connection may take to finish once its hub connection drains or ends. */
const DRAIN_GRACE_MS = 10_000;
/** How long an ask may wait for the hub's answer. */
const ASK_TIMEOUT_MS = 10_000;
/** The first wait before asking again after `unavailable` (§14.3). */
const ASK_BACKOFF_MS = 1_000;
/** The longest. */
const ASK_BACKOFF_MAX_MS = 30_000;

/** What the routes need of a connection: the public `Connection`'s surface, as an interface so this file sits below it. */
export interface DirectConn {
  readonly core: Core;
  readonly isClosed: boolean;
  call(method: string, input: unknown, options?: { timeoutMs?: number }): Promise<unknown>;
  drain(graceMs?: number): Promise<void>;
}

/** Opens a connection over `transport` as the dialer, with `token` in its HELLO. */
export type DirectDial = (transport: Transport, token: string | undefined) => Promise<DirectConn>;

/**
 * Whether a call failed before the callee saw it, so starting it again
 * elsewhere is safe: started after the peer's GOAWAY, or above its
 * `last_id` (§5.10). The engine says so in its `unavailable` message.
 */
export function neverSent(e: unknown): boolean {
  return (
    e instanceof HubwireError &&
    e.code === "unavailable" &&
    (e.message.includes("start the call elsewhere") || e.message.includes("never saw this call"))
  );
}

/** Opens a transport to a DIRECT's `address` (`unix:PATH`, `tcp:HOST:PORT`). Node only: imported when first used. */
async function connectTo(address: string): Promise<Transport> {
  if (address.startsWith("unix:")) return (await import("./transport/unix.js")).connect(address.slice(5));
  if (address.startsWith("tcp:")) return (await import("./transport/tcp.js")).connect(address.slice(4));
  throw new HubwireError("invalid_argument", `DIRECT address ${JSON.stringify(address)} is neither unix: nor tcp:`);
}

/** When a method may be asked for again (§14.3's table). */
type Ask = { state: "pending" } | { state: "after"; at: number; backoffMs: number } | { state: "never" };

/** A hub connection's direct connections, by method (see the file's comment). */
export class DirectRoutes {
  private readonly routes = new Map<string, DirectConn>();
  private readonly asks = new Map<string, Ask>();
  /** Methods waiting for their turn to be asked: one `hubwire.direct` in flight at a time. */
  private readonly waiting: string[] = [];
  private asking = false;
  /** The hub said `unauthenticated`: never ask again on this connection (§14.3). */
  private never = false;

  /** Routes for the hub connection `hub`; `dial` opens the direct connections. */
  constructor(
    private readonly hub: DirectConn,
    private readonly dial: DirectDial,
  ) {
    hub.core.onDirect = (offer) => this.offered(offer);
    void hub.core.closed.then(() => this.drainAll());
  }

  /** Whether the hub may hand out direct paths on this connection (both HELLOs said `direct`). */
  private get negotiated(): boolean {
    const c = this.hub.core;
    return c.local.direct !== undefined && c.peer.direct !== undefined;
  }

  /**
   * The live direct connection for `method`, if any; else `undefined`
   * (the call goes through the hub), after asking the hub for one if it is
   * time to (§14.3).
   */
  route(method: string): DirectConn | undefined {
    const hub = this.hub.core;
    if (hub.peerGoneAway && this.routes.size > 0) this.drainAll(); // the hub drains: so do its direct connections (§14.6)
    if (this.never || method.startsWith(RESERVED_PREFIX) || hub.error !== null || hub.peerGoneAway || !this.negotiated) return undefined;
    const c = this.routes.get(method);
    if (c !== undefined && !c.isClosed && !c.core.peerGoneAway) return c;
    if (c !== undefined) this.routes.delete(method);
    this.maybeAsk(method);
    return undefined;
  }

  /** How many methods have a live direct connection now. */
  get live(): number {
    let n = 0;
    for (const c of this.routes.values()) if (!c.isClosed && !c.core.peerGoneAway) n++;
    return n;
  }

  private maybeAsk(method: string): void {
    const a = this.asks.get(method);
    if (a !== undefined && (a.state !== "after" || a.at > Date.now())) return;
    this.asks.set(method, { state: "pending" });
    this.waiting.push(method);
    if (!this.asking) void this.askNext();
  }

  /** Asks for the waiting methods one at a time. */
  private async askNext(): Promise<void> {
    this.asking = true;
    for (let m = this.waiting.shift(); m !== undefined; m = this.waiting.shift()) {
      let error: unknown = null;
      try {
        await this.hub.call(DIRECT_METHOD, { method: m, via: ["address"] }, { timeoutMs: ASK_TIMEOUT_MS });
      } catch (e) {
        error = e;
      }
      this.answered(m, error);
    }
    this.asking = false;
  }

  /** Records the hub's answer to an ask for `method` (§14.3's table). */
  private answered(method: string, e: unknown): void {
    const prev = this.asks.get(method);
    const backoffMs = prev?.state === "after" ? prev.backoffMs : ASK_BACKOFF_MS;
    const code = e === null ? "ok" : e instanceof HubwireError ? e.code : "internal";
    if (code === "ok") this.asks.set(method, { state: "after", at: Date.now() + ASK_BACKOFF_MS, backoffMs: ASK_BACKOFF_MS });
    else if (code === "unavailable" || code === "deadline_exceeded") {
      this.asks.set(method, { state: "after", at: Date.now() + backoffMs, backoffMs: Math.min(backoffMs * 2, ASK_BACKOFF_MAX_MS) });
    } else if (code === "unauthenticated") this.never = true;
    else this.asks.set(method, { state: "never" });
  }

  /** A DIRECT arrived: dial the replica and route its methods there once the handshake is done. */
  private offered(offer: DirectOffer): void {
    // Never asked for (we say `via: ["address"]`), and unreadable here.
    if (offer.via !== "address" || offer.address === undefined) return;
    void connectTo(offer.address)
      .then((t) => this.dial(t, offer.token))
      .then(
        (conn) => {
          if (this.hub.core.error !== null) return void conn.drain(DRAIN_GRACE_MS);
          const old = new Set<DirectConn>();
          for (const m of offer.methods) {
            if (m.startsWith(RESERVED_PREFIX)) continue;
            const prev = this.routes.get(m);
            if (prev !== undefined && prev !== conn) old.add(prev);
            this.routes.set(m, conn);
          }
          // A DIRECT for a provider we already reach replaces that connection (§14.3).
          for (const c of old) if (![...this.routes.values()].includes(c)) void c.drain(DRAIN_GRACE_MS);
        },
        () => {
          // The handshake failed: stay routed through the hub (§14.3).
        },
      );
  }

  /** The hub connection has ended: drain every direct connection (calls in flight finish) and forget it. */
  private drainAll(): void {
    const conns = new Set(this.routes.values());
    this.routes.clear();
    for (const c of conns) void c.drain(DRAIN_GRACE_MS);
  }
}
