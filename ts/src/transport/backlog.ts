/**
 * The accepting half every listener shares (Unix, TCP, TLS, NATS):
 * connections that arrive before a callback takes them wait in a list;
 * {@link Backlog.accept} hands over those, then each new one; closing
 * closes those still waiting and resolves the promise `accept` returned.
 */

import type { OnTransport, Transport } from "./index.js";

/** Accepted transports on their way to the one callback that takes them. */
export class Backlog {
  private onTransport: OnTransport | null = null;
  private waiting: Transport[] = [];
  private done!: () => void;
  /** Resolves once the listener is closed. */
  readonly closed = new Promise<void>((resolve) => (this.done = resolve));

  /** One accepted connection: to the callback, or into the list until there is one. */
  push(t: Transport): void {
    if (this.onTransport !== null) this.onTransport(t);
    else this.waiting.push(t);
  }

  /** {@link Listener.accept}: one callback per listener (a second call throws). */
  accept(callback: OnTransport): Promise<void> {
    if (this.onTransport !== null) throw new Error("this listener already hands its connections to a callback");
    this.onTransport = callback;
    const early = this.waiting;
    this.waiting = [];
    for (const t of early) callback(t);
    return this.closed;
  }

  /** The listener is closed: those still waiting are closed, `closed` resolves. */
  close(): void {
    for (const t of this.waiting) t.close();
    this.waiting = [];
    this.done();
  }
}
