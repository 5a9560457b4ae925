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

  constructor(
    readonly socket: Socket,
    readonly description: string,
  ) {}

  start(sink: TransportSink): void {
    this.sink = sink;
    const socket = this.socket;
    // Plain Uint8Array views (no copy), so payloads have the same type on every transport.
    socket.on("data", (b: Buffer) => sink.onData(new Uint8Array(b.buffer, b.byteOffset, b.byteLength)));
    socket.on("end", () => this.finish("connection closed by peer (end of stream)"));
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

  close(): void {
    // Sends what is queued, then FIN, then lets go of the descriptor.
    if (!this.socket.destroyed) this.socket.destroySoon();
    this.finish("connection closed locally");
  }
}
