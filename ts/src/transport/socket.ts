/**
 * A transport over a Node stream socket: the one implementation behind
 * the Unix socket, TCP, TLS and child-process transports (as `fd.rs` is in
 * the Rust core). Sockets are half-open, so a GOAWAY can still go out
 * after the peer's end of stream.
 */

import type { Socket } from "node:net";
import type { Transport, TransportSink } from "./index.js";

/** A transport over a connected `net.Socket`. */
export class SocketTransport implements Transport {
  private sink: TransportSink | null = null;
  private ended = false;
  /** Lingering after a fatal GOAWAY: how many more bytes to discard. */
  private discard = -1;

  constructor(
    readonly socket: Socket,
    readonly description: string,
  ) {}

  start(sink: TransportSink): void {
    this.sink = sink;
    const socket = this.socket;
    // Plain Uint8Array views (no copy), so payloads have the same type on every transport.
    socket.on("data", (b: Buffer) => {
      if (this.discard < 0) return sink.onData(new Uint8Array(b.buffer, b.byteOffset, b.byteLength));
      this.discard -= b.byteLength;
      if (this.discard <= 0) socket.destroy();
    });
    socket.on("end", () => {
      if (this.discard >= 0) socket.destroy();
      this.finish("connection closed by peer (end of stream)");
    });
    // Node emits "drain" once writableLength is back to 0 after a write
    // found it at or above the socket's high-water mark (16 KiB, below
    // DRAIN_MARK): the contract of `queued`.
    socket.on("drain", () => sink.onDrain?.());
    socket.on("error", (e) => this.finish(`connection lost: ${e.message}`));
    socket.on("close", () => this.finish("connection closed"));
  }

  private finish(reason: string): void {
    if (this.ended) return;
    this.ended = true;
    this.sink?.onEnd(reason);
  }

  write(bytes: Uint8Array): void {
    if (!this.socket.destroyed && this.socket.writable) this.socket.write(bytes);
  }

  writev(segments: Uint8Array[]): void {
    const socket = this.socket;
    if (socket.destroyed || !socket.writable) return;
    // Corked writes leave in one writev(2): big payloads are never copied.
    socket.cork();
    for (const seg of segments) socket.write(seg);
    socket.uncork();
  }

  /** What Node holds for the kernel: bytes written that the socket has not taken yet. */
  queued(): number {
    return this.socket.writableLength;
  }

  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    // Lingering reads (and discards) whatever the connection had paused.
    if (this.discard < 0) this.socket.resume();
  }

  close(): void {
    // Sends what is queued, then FIN, then lets go of the descriptor.
    if (!this.socket.destroyed && this.discard < 0) this.socket.destroySoon();
    this.finish("connection closed locally");
  }

  linger(ms: number, maxBytes: number): void {
    const socket = this.socket;
    this.finish("connection closed locally");
    if (socket.destroyed || this.discard >= 0) return;
    this.discard = maxBytes;
    // Sends what is queued, then FIN; reading goes on (discarded above).
    socket.end();
    socket.resume();
    const timer = setTimeout(() => socket.destroy(), ms);
    timer.unref();
    socket.once("close", () => clearTimeout(timer));
  }
}
