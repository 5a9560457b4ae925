/**
 * Calls this side started, as the connection's call table sees them:
 * each kind of call (unary, the three streams) extends {@link OutCall}
 * in `client.ts`. A call is in the table from its REQUEST to its end;
 * the reader routes RESPONSE, ITEM and CREDIT frames to it by id.
 */

import { HubwireError } from "./errors.js";
import type { ItemQueue } from "./stream.js";
import type { CreditGate } from "./engine/credit.js";
import type { Connection } from "./connection.js";

const EMPTY = new Uint8Array(0);

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
    readonly conn: Connection,
    readonly kind: number,
    readonly method: string,
    readonly codec: number,
    readonly payload: Uint8Array,
  ) {}

  /** The RESPONSE arrived (the call has left the table). */
  abstract settle(code: number, message: string, codec: number, payload: Uint8Array): void;

  /** The call failed without a RESPONSE: deadline, cancellation, connection lost. */
  abstract fail(error: HubwireError): void;

  /** The caller's signal aborted (an `EventListener` object: no closure per call). */
  handleEvent(): void {
    this.conn.abandon(this, new HubwireError("cancelled", "the call was cancelled by its caller"));
  }
}

/** The deadline timer's callback; the call rides along as the timer's argument. */
export function onDeadline(call: OutCall): void {
  call.timer = undefined;
  call.conn.abandon(call, new HubwireError("deadline_exceeded", "deadline exceeded waiting for the response"));
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
