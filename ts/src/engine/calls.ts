/**
 * The call table's records: calls this side started ({@link OutCall},
 * one subclass per way of returning in `client.ts`), calls it serves
 * ({@link ServedCall}, what a service sees as `Incoming`), the ITEMs a
 * stream receives ({@link ItemQueue}), the queue of calls waiting for the
 * peer's `max_calls` ({@link CallQueue}) and call id allocation
 * ({@link CallIds}). A call is in the table from its REQUEST to its end;
 * the reader routes frames to it by id (`spec/PROTOCOL.md` §3).
 *
 * The records reach their connection through {@link CallHost}, which the
 * engine's `Core` implements: an interface, so this file sits below the
 * state it is part of.
 */

import { HubwireError } from "../errors.js";
import type { Hello, PeerInfo } from "../hello.js";
import { CreditGate, RecvWindow } from "./credit.js";
import type { Writer } from "./writer.js";

const EMPTY = new Uint8Array(0);

/** What a call record needs of the connection it lives on (the engine's `Core`). */
export interface CallHost {
  /** Where frames go. */
  readonly writer: Writer;
  /** The peer's HELLO (its limits, its identity). */
  readonly peer: Hello;
  /** The API object of this connection (the public `Connection`), opaque to the engine. */
  readonly connection: unknown;
  /** This side gives up on `call`: CANCEL if it is on the wire, then fail it with `error`. */
  abandon(call: OutCall, error: HubwireError): void;
}

// ---- Call ids ----------------------------------------------------------------

/** The largest call id (a u32). */
export const MAX_CALL_ID = 0xffffffff;

/**
 * Call id allocation (`spec/PROTOCOL.md` §3): the dialer's ids are odd,
 * the acceptor's even; ids go up by two and wrap past `0xffffffff` to the
 * first again, skipping any id still in use, so a long-lived connection
 * never runs out and never reuses a live id.
 */
export class CallIds {
  private next: number;
  /** The first id of our parity: 1 for the dialer, 2 for the acceptor. */
  readonly first: number;

  /** Ids for the dialer (odd) or the acceptor (even); `start` (of the same parity) is for tests of the wrap. */
  constructor(dialer: boolean, start?: number) {
    this.first = dialer ? 1 : 2;
    this.next = start ?? this.first;
    if ((this.next & 1) !== (this.first & 1) || this.next < 1 || this.next > MAX_CALL_ID) {
      throw new RangeError(`call id ${this.next} is not a ${dialer ? "dialer's (odd)" : "acceptor's (even)"} id`);
    }
  }

  /** The next id not in `live`. */
  take(live: { has(id: number): boolean }): number {
    let id = this.next;
    while (live.has(id)) id = this.after(id);
    this.next = this.after(id);
    return id;
  }

  private after(id: number): number {
    return id + 2 > MAX_CALL_ID ? this.first : id + 2;
  }
}

// ---- Receiving ITEMs ---------------------------------------------------------

/** Turns a received payload into the value the application sees. */
export type ItemDecoder = (codec: number, payload: Uint8Array) => unknown;

/** The default {@link ItemDecoder}: each item as it travels, `{ codec, bytes }`. */
export const asPayload: ItemDecoder = (codec, bytes) => ({ codec, bytes });

interface Pending {
  resolve: (r: IteratorResult<unknown>) => void;
  reject: (e: unknown) => void;
}

/**
 * The ITEMs one stream receives, in order, then its end; also the
 * `AsyncIterator` they are read through (the public `ItemStream` wraps
 * it). Credit goes back as they are read ({@link RecvWindow}); an item is
 * decoded when it is read, so a bad one fails that `next()`.
 */
export class ItemQueue implements AsyncIterableIterator<unknown> {
  private codecs: number[] = [];
  private payloads: Uint8Array[] = [];
  private head = 0;
  private readonly window: RecvWindow;
  private ended = false;
  private error: HubwireError | null = null;
  private pending: Pending | null = null;
  /** How a payload becomes the value `next()` gives (set by the API layer; the engine does not decode). */
  decode: ItemDecoder = asPayload;
  /** Called when the application stops reading early (`break` in `for await`). */
  onReturn: (() => void) | null = null;

  /** `window`: the credit granted up front; `grant(n)` sends CREDIT for `n` more. */
  constructor(
    window: number,
    private readonly grant: (n: number) => void,
  ) {
    this.window = new RecvWindow(window);
  }

  /** An ITEM arrived: false if it was beyond the credit granted (an overrun). */
  push(codec: number, payload: Uint8Array): boolean {
    if (!this.window.onItem()) return false;
    if (this.ended) return true; // the reader stopped early: drop it
    if (this.pending !== null) {
      const p = this.pending;
      this.pending = null;
      this.deliver(codec, payload, p);
    } else {
      this.codecs.push(codec);
      this.payloads.push(payload);
    }
    return true;
  }

  /** The stream ended: normally (`null`) or with an error. Items already queued are still read first. */
  finish(error: HubwireError | null): void {
    if (this.ended) return;
    this.ended = true;
    this.error = error;
    if (this.pending !== null && this.head === this.payloads.length) {
      const p = this.pending;
      this.pending = null;
      if (error === null) p.resolve({ done: true, value: undefined });
      else p.reject(error);
    }
  }

  private deliver(codec: number, payload: Uint8Array, p: Pending): void {
    const grant = this.window.consumed();
    if (grant > 0) this.grant(grant);
    let value: unknown;
    try {
      value = this.decode(codec, payload);
    } catch (e) {
      p.reject(e);
      return;
    }
    p.resolve({ done: false, value });
  }

  /** The next item; `done` once the stream ended normally; rejects with the error it ended with. */
  next(): Promise<IteratorResult<unknown>> {
    return new Promise((resolve, reject) => {
      const p = { resolve, reject };
      if (this.head < this.payloads.length) {
        const i = this.head++;
        const codec = this.codecs[i]!;
        const payload = this.payloads[i]!;
        if (this.head === this.payloads.length) {
          this.codecs = [];
          this.payloads = [];
          this.head = 0;
        }
        this.deliver(codec, payload, p);
      } else if (this.ended) {
        if (this.error === null) resolve({ done: true, value: undefined });
        else reject(this.error);
      } else if (this.pending !== null) {
        reject(new HubwireError("invalid_argument", "next() called again before the previous one settled"));
      } else {
        this.pending = p;
      }
    });
  }

  /** The reader stops early: later items are dropped, and {@link onReturn} says so. */
  return(): Promise<IteratorResult<unknown>> {
    if (!this.ended) {
      this.finish(null);
      this.onReturn?.();
    }
    return Promise.resolve({ done: true, value: undefined });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}

// ---- Calls we start ------------------------------------------------------------

/** A call this side started. */
export abstract class OutCall {
  /** The call id, once the REQUEST went out (0 while queued). */
  id = 0;
  /** The local deadline timer, if any. */
  timer: ReturnType<typeof setTimeout> | undefined = undefined;
  /** The caller's abort signal, if any. */
  signal: AbortSignal | undefined = undefined;
  /** When the call must end (epoch ms), or 0 for never. */
  deadline = 0;
  /** Credit for our ITEMs (client_stream, bidi). */
  send: CreditGate | null = null;
  /** The callee's ITEMs (server_stream, bidi). */
  recv: ItemQueue | null = null;
  /** The method name's UTF-8 bytes (set when the call begins). */
  methodBytes: Uint8Array = EMPTY;
  /** The inputs ended while the call was still queued: send END after the REQUEST. */
  endPending = false;
  /** Waiting in the connection's queue for the peer's `max_calls`. */
  queued = false;

  constructor(
    readonly core: CallHost,
    /** The wire kind (`KIND`). */
    readonly kind: number,
    readonly method: string,
    /** The REQUEST's codec (wire value). */
    readonly codec: number,
    readonly payload: Uint8Array,
  ) {}

  /** The RESPONSE arrived (the call has left the table). */
  abstract settle(code: number, message: string, codec: number, payload: Uint8Array): void;

  /** The call failed without a RESPONSE: deadline, cancellation, connection lost. */
  abstract fail(error: HubwireError): void;

  /** The caller's signal aborted (an `EventListener` object: no closure per call). */
  handleEvent(): void {
    this.core.abandon(this, new HubwireError("cancelled", "the call was cancelled by its caller"));
  }
}

/** The deadline timer's callback; the call rides along as the timer's argument. */
export function onDeadline(call: OutCall): void {
  call.timer = undefined;
  call.core.abandon(call, new HubwireError("deadline_exceeded", "deadline exceeded waiting for the response"));
}

/**
 * Calls waiting for the peer's `max_calls` to allow them, in order. A call
 * abandoned while waiting is only marked (`queued = false`) and skipped
 * when its turn comes, so both ends are O(1) however long the queue.
 */
export class CallQueue {
  private calls: OutCall[] = [];
  private head = 0;
  /** How many calls are waiting. */
  size = 0;

  /** Queues `call` behind the others. */
  push(call: OutCall): void {
    call.queued = true;
    this.calls.push(call);
    this.size++;
  }

  /** The next waiting call, or undefined. */
  shift(): OutCall | undefined {
    while (this.head < this.calls.length) {
      const call = this.calls[this.head++]!;
      if (this.head > 1024 && this.head * 2 > this.calls.length) {
        this.calls = this.calls.slice(this.head);
        this.head = 0;
      }
      if (call.queued) {
        call.queued = false;
        this.size--;
        return call;
      }
    }
    return undefined;
  }

  /** Takes `call` out of the queue; false if it was not waiting. */
  remove(call: OutCall): boolean {
    if (!call.queued) return false;
    call.queued = false;
    this.size--;
    return true;
  }

  /** Empties the queue, returning the calls that were waiting. */
  drain(): OutCall[] {
    const waiting = this.calls.slice(this.head).filter((c) => c.queued);
    for (const c of waiting) c.queued = false;
    this.calls = [];
    this.head = 0;
    this.size = 0;
    return waiting;
  }
}

// ---- Calls we serve -------------------------------------------------------------

/**
 * A call's cancellation: its reason, and an `AbortSignal` made on first
 * use, so a handler that never looks at it costs no `AbortController`.
 */
export class Cancellation {
  private controller: AbortController | null = null;
  /** Why the call was cancelled, once it was. */
  reason: HubwireError | null = null;

  /** The signal (created on first use; already aborted if the call was). */
  get signal(): AbortSignal {
    if (this.controller === null) {
      this.controller = new AbortController();
      if (this.reason !== null) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  /** Whether the call was cancelled. */
  get cancelled(): boolean {
    return this.reason !== null;
  }

  /** Cancels once; later calls do nothing. */
  cancel(reason: HubwireError): void {
    if (this.reason !== null) return;
    this.reason = reason;
    this.controller?.abort(reason);
  }
}

/**
 * A call this side serves, from its REQUEST until it is answered,
 * cancelled or lost: the record in the table, and the `Incoming` a
 * service is handed (`serve.ts`). Its behaviour towards the connection
 * (answering, forgetting) is in `serve.ts`; what is here touches the
 * call alone.
 */
export class ServedCall extends Cancellation {
  /** The caller's ITEMs (client_stream, bidi). */
  items: ItemQueue | null = null;
  /** Credit for our ITEMs (server_stream, bidi). */
  sendCredit: CreditGate | null = null;
  /** The deadline timer, if the caller set one. */
  timer: ReturnType<typeof setTimeout> | undefined = undefined;
  /** When the caller stops waiting (epoch ms), or `undefined`. */
  deadline: number | undefined = undefined;
  /** In the table: not yet answered, cancelled or lost. */
  live = true;

  constructor(
    readonly host: CallHost,
    readonly callId: number,
    /** The wire kind (`KIND`). */
    readonly kind: number,
    readonly method: string,
    /** The REQUEST's codec (wire value). */
    readonly codec: number,
    /** The REQUEST's payload (empty when the caller streams inputs). */
    readonly payload: Uint8Array,
  ) {
    super();
  }

  /** Who the caller is (from its HELLO). */
  get peer(): PeerInfo {
    return this.host.peer.peer;
  }

  /** The connection's API object (the public `Connection`), opaque here. */
  get connection(): unknown {
    return this.host.connection;
  }

  /**
   * Sends one ITEM of the call's outputs within the caller's credit: at
   * once when there is credit and the write queue is within its cap
   * (returns `null`: no promise), else a promise that settles once it is
   * sent. Fails (throws, or rejects) once the call
   * has ended, and with `too_large` for an item over the peer's `max_frame`.
   */
  sendItem(codec: number, payload: Uint8Array): Promise<void> | null {
    const gate = this.sendCredit;
    if (gate === null) throw new HubwireError("invalid_argument", `call ${this.callId} (${this.method}) has no output stream`);
    const max = this.host.peer.max_frame;
    if (payload.length > max) throw new HubwireError("too_large", `item of ${payload.length} bytes exceeds the peer's max_frame of ${max} bytes`);
    const writer = this.host.writer;
    const wait = gate.take();
    if (wait === null && !writer.overCap()) {
      writer.item(this.callId, codec, payload);
      return null;
    }
    // Waits for credit, then while the write queue is over its cap (the peer is not reading).
    return (wait ?? Promise.resolve())
      .then(() => writer.ready())
      .then(() => {
        // The call may have ended while this item waited.
        if (this.live) writer.item(this.callId, codec, payload);
      });
  }

  /**
   * The call's streams and timer end (it has left the table): the caller's
   * items end with `items` (null: normally), later sends fail with
   * `sends` (null: `cancelled`, the call has ended), the deadline timer
   * stops.
   */
  close(items: HubwireError | null, sends: HubwireError | null): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.items?.finish(items);
    // Made only when needed: an error captures a stack, too dear per call.
    if (this.sendCredit !== null) this.sendCredit.close(sends ?? new HubwireError("cancelled", "the call has ended"));
  }
}
