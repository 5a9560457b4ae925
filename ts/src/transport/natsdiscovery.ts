/**
 * A replica on NATS as a NATS *micro* service (`spec/PROTOCOL.md` §13.7,
 * NATS ADR-32), so `nats micro ls/info/stats` and hubs list hubwire
 * providers across a cluster: the answers on `$SRV.PING`, `$SRV.INFO`,
 * `$SRV.STATS` (each also `.<service name>` and `.<service name>.<id>`),
 * and the counts behind STATS.
 *
 * Written here rather than with the `nats` package's `services` API:
 * that API checks endpoint names against micro's `[A-Za-z0-9_-]`, and the
 * spec's endpoints are method tokens (`math~2eadd`) and `~provider`,
 * `~replica`; and it puts its endpoints in its own queue group, not
 * `hubwire`.
 */

import type { Msg } from "nats";
import { SDK_VERSION, type MethodInfo } from "../hello.js";
import { connectSubject, QUEUE_GROUP, serviceName, token } from "./natssubjects.js";

/** What a replica serves, as discovery describes it: a `Provider` fits. */
export interface ServiceSource {
  /** The provider name (HELLO `peer` name), exact. */
  readonly name: string;
  /** Its methods (read once, when the replica attaches). */
  methods(): MethodInfo[];
  /** Optional: calls of `method` served so far, on any connection (`Provider.served`); STATS reports it as `data.calls`. */
  served?(method: string): number;
}

/** One endpoint of the service: a connect subject, and what it answered. */
export interface Endpoint {
  name: string;
  subject: string;
  metadata: Record<string, string>;
  /** The method it connects to (for `data.calls`), or null for `~provider`/`~replica`. */
  method: string | null;
  requests: number;
  errors: number;
  lastError: string;
}

const utf8 = new TextEncoder();

/** The discovery side of one replica: its endpoints, their counts, the `$SRV` answers. */
export class Discovery {
  /** The connect endpoints: one per method, then `~provider`, then `~replica`. */
  readonly endpoints: Endpoint[];
  private readonly service: string;
  private readonly metadata: Record<string, string>;
  private readonly started = new Date().toISOString();

  constructor(
    private readonly source: ServiceSource,
    private readonly id: string,
    prefix: string,
    methods: MethodInfo[],
    private readonly version = SDK_VERSION,
  ) {
    this.service = serviceName(source.name);
    this.metadata = { "hubwire.protocol": "1", "hubwire.provider": source.name, "hubwire.prefix": prefix };
    const ep = (name: string, subject: string, metadata: Record<string, string>, method: string | null): Endpoint => ({
      name,
      subject,
      metadata,
      method,
      requests: 0,
      errors: 0,
      lastError: "",
    });
    this.endpoints = methods.map((m) =>
      ep(token(m.name), connectSubject(prefix, { method: m.name }), { "hubwire.method": m.name, "hubwire.kind": m.kind }, m.name),
    );
    this.endpoints.push(ep("~provider", connectSubject(prefix, { provider: source.name }), { "hubwire.connect": "provider" }, null));
    this.endpoints.push(ep("~replica", connectSubject(prefix, { replica: id }), { "hubwire.connect": "replica" }, null));
  }

  /** The nine `$SRV` subjects this replica answers on. */
  subjects(): string[] {
    const out: string[] = [];
    for (const verb of ["PING", "INFO", "STATS"]) out.push(`$SRV.${verb}`, `$SRV.${verb}.${this.service}`, `$SRV.${verb}.${this.service}.${this.id}`);
    return out;
  }

  /** Counts a connect request answered on endpoint `i`: a link opened, or a refusal. */
  answered(i: number, refused: boolean, why = ""): void {
    const ep = this.endpoints[i]!;
    ep.requests++;
    if (refused) {
      ep.errors++;
      ep.lastError = why;
    }
  }

  /** Answers a `$SRV` request (its verb is the subject's second token). */
  answer(msg: Msg): void {
    const verb = msg.subject.split(".")[1];
    const base = { name: this.service, id: this.id, version: this.version, metadata: this.metadata };
    let body: object;
    if (verb === "PING") body = { type: "io.nats.micro.v1.ping_response", ...base };
    else if (verb === "INFO") {
      body = {
        type: "io.nats.micro.v1.info_response",
        ...base,
        description: `hubwire provider ${this.source.name}`,
        endpoints: this.endpoints.map((e) => ({ name: e.name, subject: e.subject, queue_group: QUEUE_GROUP, metadata: e.metadata })),
      };
    } else {
      body = {
        type: "io.nats.micro.v1.stats_response",
        ...base,
        started: this.started,
        endpoints: this.endpoints.map((e) => {
          const stats: Record<string, unknown> = {
            name: e.name,
            subject: e.subject,
            queue_group: QUEUE_GROUP,
            num_requests: e.requests,
            num_errors: e.errors,
            last_error: e.lastError,
            processing_time: 0,
            average_processing_time: 0,
          };
          if (e.method !== null) stats.data = { calls: this.source.served?.(e.method) ?? 0 };
          return stats;
        }),
      };
    }
    msg.respond(utf8.encode(JSON.stringify(body)));
  }
}
