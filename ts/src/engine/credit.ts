/**
 * Flow control (`spec/PROTOCOL.md` §8): the credit of one stream, counted
 * on both sides. {@link CreditGate} holds the credit for the ITEMs this
 * side sends; {@link RecvWindow} counts the credit this side granted for
 * the ITEMs it receives. Neither sends a frame: the caller sends CREDIT
 * (or the ITEM) itself, so the counting can be tested alone.
 */

import { HubwireError } from "../errors.js";

interface Waiter {
  resolve: () => void;
  reject: (e: HubwireError) => void;
}

/** Credit for sending ITEMs on one stream; a send without credit waits, in order. */
export class CreditGate {
  private waiters: Waiter[] = [];
  /** Set when the call ended: no more sends. */
  error: HubwireError | null = null;

  /** A gate holding `credit` (the peer's window, or 0 until the call starts). */
  constructor(private credit: number) {}

  /**
   * Takes one credit: `null` if one was there (send now: no promise on the
   * fast path), else a promise for when one is. Waiters are served first,
   * so sends keep their order.
   */
  take(): Promise<void> | null {
    if (this.error !== null) return Promise.reject(this.error);
    if (this.credit > 0 && this.waiters.length === 0) {
      this.credit--;
      return null;
    }
    return new Promise<void>((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /** The receiver granted `n` more: wakes that many waiters, keeps the rest. */
  add(n: number): void {
    // Saturates at 2^32 - 1 (§8): endless grants never lose precision.
    this.credit = Math.min(this.credit + n, 0xffff_ffff);
    while (this.credit > 0 && this.waiters.length > 0) {
      this.credit--;
      this.waiters.shift()!.resolve();
    }
  }

  /** The credit left (for tests and diagnostics). */
  get available(): number {
    return this.credit;
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

/**
 * The credit this side granted for one stream it receives: the reader
 * spends one per ITEM ({@link onItem}), the consumer earns it back
 * ({@link consumed}). Credit goes back in batches of half the window, so a
 * stream costs one CREDIT frame per half window rather than one per item.
 * The same accounting as the Rust core's `RecvWindow`.
 */
export class RecvWindow {
  /** ITEMs the peer may still send. */
  private remaining: number;
  /** ITEMs consumed since the last grant. */
  private count = 0;
  /** How many consumed ITEMs make a grant: half the window (at least 1). */
  readonly batch: number;

  /** A window that starts with `window` credits granted (in HELLO). */
  constructor(window: number) {
    this.remaining = window;
    this.batch = Math.max(1, window >> 1);
  }

  /** An ITEM arrived: spends one credit; false if none was left (the peer overran the window). */
  onItem(): boolean {
    if (this.remaining === 0) return false;
    this.remaining--;
    return true;
  }

  /**
   * The application took one ITEM. Returns the credit to grant now (0 until
   * a batch is complete); the caller sends it as CREDIT. The credit counts
   * as remaining before this returns, so an ITEM the peer sends on the
   * strength of the grant is never taken for an overrun.
   */
  consumed(): number {
    if (++this.count < this.batch) return 0;
    const n = this.count;
    this.count = 0;
    this.remaining += n;
    return n;
  }

  /** The credit the peer has left (for tests and diagnostics). */
  get credit(): number {
    return this.remaining;
  }
}
