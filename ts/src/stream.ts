/**
 * Flow control (`spec/PROTOCOL.md` §8), written once for callers and
 * handlers: {@link CreditGate} holds the credit for the ITEMs this side
 * sends, {@link ItemQueue} the ITEMs this side receives, granting credit
 * back in batches of half the window as the application consumes them.
 */

import { HubwireError } from "./errors.js";

interface Waiter {
  resolve: () => void;
  reject: (e: HubwireError) => void;
}

/** Credit for sending ITEMs on one stream. */
export class CreditGate {
  private waiters: Waiter[] = [];
  /** Set when the call ended: no more sends. */
  error: HubwireError | null = null;

  constructor(private credit: number) {}

  /** Takes one credit: `null` if one was there, else a promise for when one is. */
  take(): Promise<void> | null {
    if (this.error !== null) return Promise.reject(this.error);
    if (this.credit > 0 && this.waiters.length === 0) {
      this.credit--;
      return null;
    }
    return new Promise<void>((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /** The receiver granted `n` more. */
  add(n: number): void {
    this.credit += n;
    while (this.credit > 0 && this.waiters.length > 0) {
      this.credit--;
      this.waiters.shift()!.resolve();
    }
  }

  /** The call ended: every waiting and later send fails with `error`. */
  close(error: HubwireError): void {
    if (this.error !== null) return;
    this.error = error;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.reject(error);
  }
}

/** Turns a received payload into the value the application sees. */
export type ItemDecoder = (codec: number, payload: Uint8Array) => unknown;

interface Pending {
  resolve: (r: IteratorResult<unknown>) => void;
  reject: (e: unknown) => void;
}

/**
 * ITEMs received on one stream, in order, then its end. Also the
 * `AsyncIterator` the application reads them through.
 */
export class ItemQueue implements AsyncIterableIterator<unknown> {
  private codecs: number[] = [];
  private payloads: Uint8Array[] = [];
  private head = 0;
  private remaining: number;
  private consumed = 0;
  private readonly batch: number;
  private ended = false;
  private error: HubwireError | null = null;
  private pending: Pending | null = null;
  /** Called when the application stops reading early (`break` in `for await`). */
  onReturn: (() => void) | null = null;

  /**
   * `window`: the credit granted up front; `grant(n)` sends CREDIT;
   * `decodeItem` turns a payload into a value (and throws a
   * `HubwireError` for one that does not decode).
   */
  constructor(
    window: number,
    private readonly grant: (n: number) => void,
    private readonly decodeItem: ItemDecoder,
  ) {
    this.remaining = window;
    this.batch = Math.max(1, window >> 1);
  }

  /** An ITEM arrived: false if it was beyond the credit granted. */
  push(codec: number, payload: Uint8Array): boolean {
    if (this.remaining === 0) return false;
    this.remaining--;
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
    if (++this.consumed >= this.batch) {
      this.remaining += this.consumed;
      this.grant(this.consumed);
      this.consumed = 0;
    }
    let value: unknown;
    try {
      value = this.decodeItem(codec, payload);
    } catch (e) {
      p.reject(e);
      return;
    }
    p.resolve({ done: false, value });
  }

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
