/**
 * The in-memory transport: two connected ends in one process, for tests
 * and for a provider living beside its caller. Delivery is asynchronous
 * (a microtask), like a socket, so a writer never re-enters its reader.
 */

import type { Transport, TransportSink } from "./index.js";

class MemoryEnd implements Transport {
  peer!: MemoryEnd;
  private sink: TransportSink | null = null;
  private early: Uint8Array[] = [];
  private closed = false;

  constructor(readonly description: string) {}

  start(sink: TransportSink): void {
    this.sink = sink;
    const early = this.early;
    this.early = [];
    for (const b of early) sink.onData(b);
    if (this.closed) sink.onEnd("connection closed by peer (end of stream)");
  }

  /** Delivery to this end, from the peer. */
  deliver(bytes: Uint8Array): void {
    if (this.closed) return;
    if (this.sink) this.sink.onData(bytes);
    else this.early.push(bytes);
  }

  /** The peer closed: end of stream here. */
  hangup(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.sink?.onEnd(reason);
  }

  write(bytes: Uint8Array): void {
    if (this.closed) return;
    queueMicrotask(() => this.peer.deliver(bytes));
  }

  close(): void {
    if (this.closed) return;
    // Whatever was written before close arrives before the end of stream.
    queueMicrotask(() => this.peer.hangup("connection closed by peer (end of stream)"));
    this.hangup("connection closed locally");
  }
}

/** Two connected transports: what one writes, the other reads. */
export function pair(): [Transport, Transport] {
  const a = new MemoryEnd("memory:a");
  const b = new MemoryEnd("memory:b");
  a.peer = b;
  b.peer = a;
  return [a, b];
}
