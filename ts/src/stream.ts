/**
 * The ITEMs this side receives on one stream, written once for callers
 * and handlers: {@link ItemQueue} buffers them and grants credit back as
 * the application consumes them (the counting is `engine/credit.ts`).
 */

import { HubwireError } from "./errors.js";
import { RecvWindow } from "./engine/credit.js";

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
  private readonly window: RecvWindow;
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
    this.window = new RecvWindow(window);
  }

  /** An ITEM arrived: false if it was beyond the credit granted. */
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
