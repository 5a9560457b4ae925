/**
 * A provider's half of the direct path (`spec/PROTOCOL.md` §14.5), for a
 * provider served on a listener the hub dials
 * (`provider.serve(listener, { direct: true })`): clients' direct
 * connections arrive on the same listener as the hub's. The hub's
 * connection is the one whose HELLO said `direct` (a client's direct
 * connection does not say it); the calls answered on the others are
 * counted and reported to the hub with `hubwire.report`, at most once a
 * second while the numbers change, and once more when a direct connection
 * closes. When its last hub connection ends (the hub stops or lets the
 * replica go, §14.6), the direct connections are drained: GOAWAY `ok`,
 * their calls in flight finish, and the clients' new calls go through the
 * hub.
 *
 * ACCEPT (a descriptor handed over, §14.4) is for spawned providers; Node
 * cannot receive one, so a TS provider the hub spawns should not say
 * `direct`.
 */

import { REPORT_METHOD } from "./direct.js";
import type { MethodInfo } from "./hello.js";
import type { Incoming, Outcome, Service } from "./engine/serve.js";
import type { Connection } from "./connection.js";

/** How often the counts are reported at most (§14.5). */
const REPORT_EVERY_MS = 1000;
/** How long a report may wait for the hub's answer. */
const REPORT_TIMEOUT_MS = 5000;
/**
 * How long the direct connections' calls may take to finish once the hub
 * connection has ended. A dialled provider is not signalled after it (its
 * process is not the hub's), so this is only our own bound (§14.6).
 */
const DRAIN_GRACE_MS = 5000;

/** Counts a provider's direct calls and reports them to its hubs (see the file's comment). */
export class DirectReporter {
  private calls = 0;
  private errors = 0;
  private open = 0;
  /** What the last report said `open` was: a change of it alone is worth a report. */
  private reportedOpen = 0;
  /** The hub connections: those whose peer said `direct`. */
  private readonly hubs = new Set<Connection>();
  /** The clients' direct connections open now. */
  private readonly directs = new Set<Connection>();
  private timer: ReturnType<typeof setInterval> | null = null;

  /** `service`, counting the calls answered on connections that are not a hub's. */
  wrap(service: Service): Service {
    return {
      methods: (): MethodInfo[] => service.methods(),
      call: (incoming: Incoming): Outcome | PromiseLike<Outcome> => {
        const conn = incoming.connection as Connection;
        if (conn.peer.direct !== undefined) return service.call(incoming);
        let out: Outcome | PromiseLike<Outcome>;
        try {
          out = service.call(incoming);
        } catch (e) {
          this.count(false);
          throw e;
        }
        if (out != null && typeof (out as PromiseLike<Outcome>).then === "function") {
          return (out as PromiseLike<Outcome>).then(
            (o) => (this.count(true), o),
            (e: unknown) => {
              this.count(false);
              throw e;
            },
          );
        }
        this.count(true);
        return out;
      },
    };
  }

  /** A connection's handshake is done: a hub's is reported to, a client's is counted open until it closes. */
  opened(conn: Connection): void {
    if (conn.peer.direct !== undefined) {
      this.hubs.add(conn);
      if (this.timer === null) {
        this.timer = setInterval(() => this.report(), REPORT_EVERY_MS);
        // Reports are for people: they never keep the process alive.
        (this.timer as { unref?: () => void }).unref?.();
      }
      void conn.closed.then(() => {
        this.hubs.delete(conn);
        if (this.hubs.size > 0) return;
        if (this.timer !== null) clearInterval(this.timer);
        this.timer = null;
        for (const c of this.directs) void c.drain(DRAIN_GRACE_MS);
      });
      return;
    }
    this.open++;
    this.directs.add(conn);
    void conn.closed.then(() => {
      this.open--;
      this.directs.delete(conn);
      this.report();
    });
  }

  private count(ok: boolean): void {
    this.calls++;
    if (!ok) this.errors++;
  }

  /** Sends what happened since the last report to every hub, if anything did. */
  private report(): void {
    // Without a hub the counts wait for one.
    if (this.hubs.size === 0 || (this.calls === 0 && this.errors === 0 && this.open === this.reportedOpen)) return;
    const body = { calls: this.calls, errors: this.errors, open: this.open };
    (this.calls = 0), (this.errors = 0), (this.reportedOpen = this.open);
    // Counts lost with a failed report are at most a second's (§14.5).
    for (const hub of this.hubs) hub.call(REPORT_METHOD, body, { timeoutMs: REPORT_TIMEOUT_MS }).catch(() => {});
  }
}
