/**
 * Reading: bytes to frames, frames to calls. The {@link FrameReader} is
 * the transport's sink: it parses every complete frame of each read
 * (keeping a partial one for the next) and hands its fields to a visitor,
 * the handshake's until the peer's HELLO has arrived, then the
 * {@link Dispatcher}, which finds each frame's call by id (the dialer's
 * ids are odd, the acceptor's even). A frame for a call that is no longer
 * live is ignored (`spec/PROTOCOL.md` §3); an error thrown while reading
 * is the peer's fault: GOAWAY with its code, then close (§7.1).
 *
 * While our write queue is over its cap (the peer is not reading what we
 * send, `writer.ts`), a new REQUEST or PING from the peer is held: it and
 * everything after it stay unparsed, and the transport is paused (so the
 * peer's writes stop at its full socket), until the queue is within its
 * cap again. Other frames (answers, ITEMs, CREDIT, CANCEL, END) are
 * always read, so two peers streaming to each other never wait on one
 * another. If the queue stays over its cap for `writeStallTimeoutMs`
 * with a call held, GOAWAY `resource_exhausted` and close.
 */

import { CODES, codeName } from "../codes.js";
import { HubwireError } from "../errors.js";
import { Decoder, FrameType, HEADER_LEN, type DirectOffer, type FrameVisitor } from "../frame.js";
import { concat } from "../bytes.js";
import { HELLO_LIMIT } from "../hello.js";
import type { TransportSink } from "../transport/index.js";
import { endWith, serveRequest, stopServed, type Service } from "./serve.js";
import type { Core } from "./state.js";

/** Turns the transport's bytes into frames for the current visitor. */
export class FrameReader implements TransportSink {
  readonly decoder: Decoder;
  /** Who gets the frames: the handshake, then the {@link Dispatcher}. */
  visitor!: FrameVisitor;
  private chunks: Uint8Array[] = [];
  private buffered = 0;
  /** How many bytes the frame at the head of `chunks` needs in all. */
  private need = 0;
  /** A REQUEST or PING heads `chunks`, held while the write queue is over its cap. */
  private held = false;

  constructor(private readonly core: Core) {
    // The HELLO may be larger than our max_frame: the peer cannot know our
    // limit before sending it (§4.1.2). The handshake lowers it after.
    this.decoder = new Decoder(Math.max(core.local.max_frame, HELLO_LIMIT));
  }

  /** Bytes from the transport. */
  onData(chunk: Uint8Array): void {
    if (this.core.error !== null) return;
    if (this.buffered === 0) {
      this.consume(chunk);
      return;
    }
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    // Not a whole frame yet (or one held): join nothing until it can go on.
    if (this.buffered < this.need || this.held) return;
    const b = concat(this.chunks, this.buffered);
    this.chunks = [];
    this.buffered = 0;
    this.consume(b);
  }

  /** Parses every complete frame of `b`; keeps the rest for the next read. */
  private consume(b: Uint8Array): void {
    let off = 0;
    try {
      for (;;) {
        const avail = b.length - off;
        const n = this.decoder.check(b, off, avail);
        if (n < 0 || avail < n) {
          this.need = n < 0 ? HEADER_LEN : n;
          break;
        }
        const type = b[off + 5];
        if ((type === FrameType.Request || type === FrameType.Ping) && this.core.opening === null && this.core.writer.overCap()) {
          this.hold();
          break;
        }
        this.decoder.parse(b, off, n, this.visitor);
        off += n;
        if (this.core.error !== null) return;
      }
    } catch (e) {
      this.fatal(e instanceof HubwireError ? e : new HubwireError("internal", String(e)));
      return;
    }
    if (off < b.length) {
      this.chunks.push(off === 0 ? b : b.subarray(off));
      this.buffered = b.length - off;
    }
  }

  /**
   * Holds the frame at the head of what is left unparsed (see the file's
   * comment): pauses the transport until the write queue is within its
   * cap, or ends the connection after the stall timeout.
   */
  private hold(): void {
    const core = this.core;
    this.held = true;
    core.transport.pause?.();
    const ms = core.writeStallMs;
    const timer = setTimeout(() => {
      if (!this.held) return;
      this.fatal(new HubwireError("resource_exhausted", `the peer has not read our last frames for ${ms} ms (write queue over its cap)`));
    }, ms);
    void (core.writer.ready() ?? Promise.resolve()).then(() => {
      clearTimeout(timer);
      this.release();
    });
  }

  /** The write queue is within its cap again (or the connection ended): reads on from the held frame. */
  private release(): void {
    this.held = false;
    if (this.core.error !== null) return;
    this.core.transport.resume?.();
    if (this.buffered === 0) return;
    const b = concat(this.chunks, this.buffered);
    this.chunks = [];
    this.buffered = 0;
    this.consume(b);
  }

  /** The transport's queue emptied: the writer may be within its cap again. */
  onDrain(): void {
    this.core.writer.wake();
  }

  /** The transport ended. */
  onEnd(reason: string): void {
    const core = this.core;
    if (core.error !== null) return;
    // Held calls go unanswered: the peer is gone.
    if (this.buffered > 0 && !this.held) {
      const rest = concat(this.chunks, this.buffered);
      const e = this.decoder.finish(rest, 0, rest.length);
      if (e !== null) return this.fatal(e);
    }
    core.die(new HubwireError("unavailable", core.opening !== null ? `peer closed the connection before its HELLO (${reason})` : reason));
  }

  /**
   * Our side found the peer's bytes bad (or the handshake failed): GOAWAY
   * with the error, then close. During the handshake the opener gets the
   * error itself; after it, pending calls get `unavailable` saying why.
   */
  fatal(e: HubwireError): void {
    const core = this.core;
    if (core.error !== null) return;
    core.writer.status(FrameType.Goaway, core.lastPeerId, 0, CODES[e.code], e.message, null);
    core.die(core.opening !== null ? e : new HubwireError("unavailable", `connection closed: sent GOAWAY ${e.code}: ${e.message}`), true);
  }
}

function overrun(id: number): HubwireError {
  return new HubwireError("resource_exhausted", `call ${id}: ITEM beyond the flow-control credit granted`);
}

/** Frames after the handshake, dispatched by call id. */
export class Dispatcher implements FrameVisitor {
  /** `service`: what answers the peer's REQUESTs (none: every method is unknown). */
  constructor(
    private readonly core: Core,
    private readonly service: Service | undefined,
  ) {}

  hello(): void {
    throw new HubwireError("protocol_error", "unexpected second HELLO");
  }

  request(id: number, kind: number, codec: number, timeoutMs: number, method: string, payload: Uint8Array): void {
    serveRequest(this.core, this.service, id, kind, codec, timeoutMs, method, payload);
  }

  response(id: number, codec: number, code: number, message: string, payload: Uint8Array): void {
    const call = this.core.out.get(id);
    if (call === undefined) return;
    this.core.release(call);
    call.settle(code, message, codec, payload);
  }

  item(id: number, codec: number, payload: Uint8Array): void {
    const core = this.core;
    if (core.ours(id)) {
      const call = core.out.get(id);
      if (call === undefined) return;
      if (call.recv === null) throw new HubwireError("protocol_error", `ITEM for call ${id}, which has no stream from the callee`);
      if (!call.recv.push(codec, payload)) core.abandon(call, overrun(id));
    } else {
      const s = core.served.get(id);
      if (s === undefined) return;
      if (s.items === null) throw new HubwireError("protocol_error", `ITEM for call ${id}, which takes no stream from the caller`);
      if (!s.items.push(codec, payload)) endWith(core, s, overrun(id));
    }
  }

  end(id: number): void {
    this.core.served.get(id)?.items?.finish(null);
  }

  cancel(id: number): void {
    const s = this.core.served.get(id);
    if (s !== undefined) stopServed(this.core, s, new HubwireError("cancelled", "the caller cancelled the call"));
  }

  credit(id: number, n: number): void {
    const core = this.core;
    const gate = core.ours(id) ? core.out.get(id)?.send : core.served.get(id)?.sendCredit;
    gate?.add(n);
  }

  ping(data: Uint8Array): void {
    this.core.writer.ping(FrameType.Pong, data);
  }

  pong(data: Uint8Array): void {
    this.core.onPong(data);
  }

  goaway(lastId: number, code: number, message: string): void {
    if (code !== 0) {
      this.core.die(new HubwireError("unavailable", `connection closed: peer sent GOAWAY ${codeName(code)}: ${message}`));
    } else this.core.peerDrains(lastId);
  }

  direct(offer: DirectOffer): void {
    this.core.onDirect?.(offer);
  }

  // No `accept`: an ACCEPT carries a descriptor this runtime cannot
  // receive, so it finds none and is ignored (§14.2 3.).
}
