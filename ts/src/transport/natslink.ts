/**
 * A link (`spec/PROTOCOL.md` §13.4–§13.6): one hubwire connection's byte
 * stream carried by NATS messages between two subjects, ours (we
 * subscribe) and the peer's (we publish). Every message starts with a
 * 5-byte header, `kind` (u8) and `seq` (u32 little-endian): DATA carries
 * the next run of the stream, HEARTBEAT says "still here", END is our
 * half-close, CLOSE says we let go. A gap in `seq` (NATS core drops
 * messages of a slow consumer) breaks the link rather than corrupt the
 * stream, and a peer silent for 600 ms is taken for dead, so a `kill -9`
 * fails the calls in flight without waiting for their deadlines.
 *
 * `nats.ts` opens links (dial, listen); this file only runs them.
 */

import type { NatsConnection, Subscription } from "nats";
import type { Transport, TransportSink } from "./index.js";

/** The kinds of link message (the header's first byte). */
export const LinkKind = { data: 0, heartbeat: 1, end: 2, close: 3 } as const;
/** A link message's kind, by name. */
export type LinkKindName = keyof typeof LinkKind;
const KIND_NAMES: readonly LinkKindName[] = ["data", "heartbeat", "end", "close"];

/** The header's size: kind (1) and seq (4). */
export const LINK_HEADER = 5;
/** A side sends a HEARTBEAT on a link on which it sent nothing for this long (§13.5). */
export const HEARTBEAT_MS = 200;
/** A link on which nothing arrived for this long is broken (§13.5). */
export const SILENCE_MS = 600;
/**
 * How often the links of one NATS connection are looked at. A heartbeat
 * goes out once a link has been quiet for `HEARTBEAT_MS − TICK_MS`, so two
 * never lie more than 200 ms apart (the spec allows 250); a silence is
 * noticed after 600 to 650 ms.
 */
const TICK_MS = 50;
/**
 * Bytes a dialer keeps before its connection starts reading. Until our
 * HELLO goes out a well-behaved acceptor sends nothing but heartbeats
 * (it answers HELLO with HELLO, §4), so this is generous; past it the
 * link breaks, so a peer that floods a link nobody reads yet costs
 * bounded memory.
 */
export const EARLY_MAX = 1 << 20;

/** One link message, parsed. */
export interface LinkMessage {
  kind: LinkKindName;
  seq: number;
  /** DATA's bytes (a view of the message); empty for the other kinds. */
  data: Uint8Array;
}

/** A link message's bytes: the header, then `data` (DATA only). */
export function encodeLinkMessage(kind: LinkKindName, seq: number, data: Uint8Array = EMPTY): Uint8Array {
  const m = new Uint8Array(LINK_HEADER + data.length);
  writeHeader(m, kind, seq);
  m.set(data, LINK_HEADER);
  return m;
}

function writeHeader(m: Uint8Array, kind: LinkKindName, seq: number): void {
  m[0] = LinkKind[kind];
  m[1] = seq & 0xff;
  m[2] = (seq >>> 8) & 0xff;
  m[3] = (seq >>> 16) & 0xff;
  m[4] = (seq >>> 24) & 0xff;
}

/**
 * Parses a link message, or says why it breaks the link: shorter than
 * the header, an unknown kind, an empty DATA, data on another kind.
 */
export function parseLinkMessage(m: Uint8Array): LinkMessage | string {
  if (m.length < LINK_HEADER) return `nats link: a message of ${m.length} bytes (the header alone is ${LINK_HEADER})`;
  const kind = KIND_NAMES[m[0]!];
  if (kind === undefined) return `nats link: unknown message kind ${m[0]}`;
  const seq = (m[1]! | (m[2]! << 8) | (m[3]! << 16) | (m[4]! << 24)) >>> 0;
  const data = m.subarray(LINK_HEADER);
  if (kind === "data" && data.length === 0) return "nats link: an empty DATA message";
  if (kind !== "data" && data.length > 0) return `nats link: ${kind} carries ${data.length} bytes of data`;
  return { kind, seq, data };
}

/**
 * Whether `seq` is the number expected next (null), or why the link
 * breaks: a gap (a message NATS dropped) or a repeat. Numbers wrap modulo
 * 2^32.
 */
export function checkSeq(expected: number, seq: number): string | null {
  if (seq === expected) return null;
  const ahead = ((seq - expected) >>> 0) < 0x80000000;
  return ahead ? `nats link: message ${expected} lost` : `nats link: message ${seq} repeated (expected ${expected})`;
}

const EMPTY = new Uint8Array(0);
const now = (): number => performance.now();

/**
 * The links of one NATS connection, looked after together: one timer for
 * the heartbeats and silences of all of them (not one per link, nor per
 * call), and one watch on the connection, whose loss breaks them all at
 * once (§13.5.3: what was published to us meanwhile is lost anyway).
 */
class LinkSet {
  readonly links = new Set<NatsLink>();
  private timer: ReturnType<typeof setInterval> | null = null;
  private lastTick = now();

  constructor(nc: NatsConnection) {
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === "disconnect") this.breakAll(`nats link: the NATS connection dropped (${String(s.data)})`);
      }
    })().catch(() => {});
    void nc.closed().then(() => this.breakAll("nats link: the NATS connection was closed"));
  }

  add(link: NatsLink): void {
    this.links.add(link);
    if (this.timer === null) {
      this.lastTick = now();
      this.timer = setInterval(() => this.tick(), TICK_MS);
      // The NATS connection, not this timer, keeps a process alive.
      this.timer.unref?.();
    }
  }

  delete(link: NatsLink): void {
    this.links.delete(link);
    if (this.links.size === 0 && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  private tick(): void {
    const t = now();
    // A late tick means the event loop was blocked (a busy handler): what
    // the peers sent meanwhile may still wait unread in the socket, and
    // timers run before I/O, so the stall is not counted as silence.
    const stalled = Math.max(0, t - this.lastTick - 2 * TICK_MS);
    this.lastTick = t;
    for (const link of this.links) link.tick(t, stalled);
  }

  private breakAll(reason: string): void {
    for (const link of [...this.links]) link.broken(reason);
  }
}

const sets = new WeakMap<NatsConnection, LinkSet>();

function linkSet(nc: NatsConnection): LinkSet {
  let s = sets.get(nc);
  if (s === undefined) {
    s = new LinkSet(nc);
    sets.set(nc, s);
  }
  return s;
}

/**
 * One link, as a {@link Transport}: `Connection.dial(link)` on the
 * dialer's side, handed to `provider.serve(listener)` on the acceptor's.
 * Made by `nats.dial` and `nats.listen`, never directly.
 */
export class NatsLink implements Transport {
  /** The replica the link reached (its replica id, §13.1); empty on the acceptor's side. */
  replica = "";
  /** The provider name the replica serves as; empty on the acceptor's side. */
  provider = "";
  private readonly set: LinkSet;
  private readonly sub: Subscription;
  /** Where we publish: the peer's subject (null on a dialer until the reply names it). */
  private out: string | null;
  private sink: TransportSink | null = null;
  /** DATA that arrived before `start`, in order. */
  private early: Uint8Array[] = [];
  private earlyBytes = 0;
  /** Why the stream ended for our reader, once it has (told to the sink on `start` if it had not started). */
  private ended: string | null = null;
  private sendSeq = 0;
  private recvSeq = 0;
  private sentEnd = false;
  private gotEnd = false;
  /** CLOSE sent or received, subscription gone: nothing more in or out. */
  private released = false;
  private lastSent = now();
  private lastHeard = now();
  /** After `linger`: how many more bytes to discard before letting go (-1: not lingering). */
  private discard = -1;
  private lingerTimer: ReturnType<typeof setTimeout> | null = null;
  /** @internal Called once the link is let go (the listener counts its open links). */
  onRelease: (() => void) | null = null;

  /**
   * @internal Subscribes to `inbox` (ours) at once, so nothing the peer
   * sends is missed; `out` is the peer's subject, if known yet.
   */
  constructor(
    private readonly nc: NatsConnection,
    readonly inbox: string,
    out: string | null,
    readonly description: string,
  ) {
    this.out = out;
    this.set = linkSet(nc);
    this.sub = nc.subscribe(inbox, {
      callback: (err, msg) => {
        if (err !== null) return this.broken(`nats link: ${err.message}`);
        // A plain Uint8Array view (Node hands a Buffer), so payloads have the same type on every transport.
        const d = msg.data;
        this.receive(new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
      },
    });
    this.set.add(this);
  }

  /** @internal The dialer learnt the peer's subject from the reply: the link is up. */
  connected(out: string): void {
    this.out = out;
    this.lastHeard = now();
    this.lastSent = now();
  }

  start(sink: TransportSink): void {
    this.sink = sink;
    const early = this.early;
    this.early = [];
    for (const b of early) sink.onData(b);
    if (this.ended !== null) sink.onEnd(this.ended);
  }

  /** One message from the peer. */
  private receive(m: Uint8Array): void {
    if (this.released) return;
    this.lastHeard = now();
    const parsed = parseLinkMessage(m);
    if (typeof parsed === "string") return this.broken(parsed);
    const out = checkSeq(this.recvSeq, parsed.seq);
    if (out !== null) return this.broken(out);
    this.recvSeq = (this.recvSeq + 1) >>> 0;
    if (this.discard >= 0) {
      // Lingering after a fatal GOAWAY: discard until the peer lets go or enough has come.
      this.discard -= parsed.data.length;
      if (parsed.kind === "close") this.release(false);
      else if (parsed.kind === "end" || this.discard <= 0) this.release(true);
      return;
    }
    switch (parsed.kind) {
      case "data":
        if (this.gotEnd) return this.broken("nats link: DATA after END");
        if (this.sink !== null) this.sink.onData(parsed.data);
        else if ((this.earlyBytes += parsed.data.length) > EARLY_MAX) this.broken(`nats link: over ${EARLY_MAX} bytes before the connection started reading`);
        else this.early.push(parsed.data);
        return;
      case "heartbeat":
        return;
      case "end":
        this.gotEnd = true;
        return this.end("connection closed by peer (end of stream)");
      case "close":
        this.end("connection closed by peer (end of stream)");
        return this.release(false);
    }
  }

  /** Tells the reader the stream ended (once). */
  private end(reason: string): void {
    if (this.ended !== null) return;
    this.ended = reason;
    this.early = [];
    this.sink?.onEnd(reason);
  }

  /**
   * @internal The link is broken (§13.4): reading stops here, the reader
   * hears `reason` (its calls fail `unavailable`), and the peer gets CLOSE.
   */
  broken(reason: string): void {
    if (this.released) return;
    this.end(reason);
    this.release(true);
  }

  /** @internal Heartbeat and silence, checked by the link set's timer (`stalled`: ms the event loop was blocked since the last tick). */
  tick(t: number, stalled: number): void {
    if (this.released || this.out === null) return;
    // Never past now: a message read after the last tick, before the
    // stall, must not delay noticing a real death later.
    this.lastHeard = Math.min(t, this.lastHeard + stalled);
    if (t - this.lastHeard >= SILENCE_MS) return this.broken(`nats link: peer silent for ${SILENCE_MS} ms`);
    if (t - this.lastSent >= HEARTBEAT_MS - TICK_MS) this.publish(encodeLinkMessage("heartbeat", this.sendSeq));
  }

  /** Publishes one message to the peer (its seq already in it), counting it. */
  private publish(m: Uint8Array): void {
    if (this.out === null) return;
    try {
      this.nc.publish(this.out, m);
    } catch (e) {
      // The NATS connection is closed or draining: nothing more will reach the peer.
      if (!this.released) this.broken(`nats link: cannot publish: ${(e as Error).message}`);
      return;
    }
    this.sendSeq = (this.sendSeq + 1) >>> 0;
    this.lastSent = now();
  }

  /** The largest data a DATA message carries: the server's max payload less the header. */
  private maxData(): number {
    return Math.max(1, (this.nc.info?.max_payload ?? 1 << 20) - LINK_HEADER);
  }

  write(bytes: Uint8Array): void {
    this.writev([bytes]);
  }

  writev(segments: Uint8Array[]): void {
    if (this.released || this.sentEnd || this.out === null) return;
    let total = 0;
    for (const s of segments) total += s.length;
    const max = this.maxData();
    // Split at the server's max payload (§13.4): each message a header and
    // the next run of the segments, copied once.
    let seg = 0;
    let off = 0;
    while (total > 0 && !this.released) {
      const n = Math.min(total, max);
      const m = new Uint8Array(LINK_HEADER + n);
      writeHeader(m, "data", this.sendSeq);
      let at = LINK_HEADER;
      while (at < m.length) {
        const s = segments[seg]!;
        const take = Math.min(s.length - off, m.length - at);
        m.set(s.subarray(off, off + take), at);
        at += take;
        off += take;
        if (off === s.length) {
          seg++;
          off = 0;
        }
      }
      total -= n;
      this.publish(m);
    }
  }

  close(): void {
    this.end("connection closed locally");
    this.release(true);
  }

  linger(ms: number, maxBytes: number): void {
    this.end("connection closed locally");
    if (this.released || this.discard >= 0) return;
    // END, then keep reading (discarded) until the peer lets go, `maxBytes` or `ms` (§7.3).
    this.publish(encodeLinkMessage("end", this.sendSeq));
    this.sentEnd = true;
    this.discard = maxBytes;
    this.lingerTimer = setTimeout(() => this.release(true), ms);
    this.lingerTimer.unref?.();
  }

  /** Lets go of the link: CLOSE to the peer (unless it sent one), unsubscribe, no more heartbeats. */
  private release(sendClose: boolean): void {
    if (this.released) return;
    this.released = true;
    if (sendClose) this.publish(encodeLinkMessage("close", this.sendSeq));
    if (this.lingerTimer !== null) clearTimeout(this.lingerTimer);
    this.sub.unsubscribe();
    this.set.delete(this);
    this.onRelease?.();
  }
}
