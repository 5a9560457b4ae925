/**
 * The one small interface every transport implements: it moves bytes and
 * nothing else. Framing, calls and flow control live above it, so each
 * transport is a few dozen lines and they all behave the same.
 */

/** Where a transport delivers what it reads. */
export interface TransportSink {
  /** Bytes arrived, in order. The sink may keep `bytes` (the transport never reuses them). */
  onData(bytes: Uint8Array): void;
  /** The stream ended (end of stream, error, peer gone); `reason` says why. Called once. */
  onEnd(reason: string): void;
  /**
   * Optional: the transport's {@link Transport.queued} bytes fell back to
   * 0 after having been above {@link DRAIN_MARK}: a connection whose
   * write queue was over its cap may go on (`engine/writer.ts`).
   */
  onDrain?(): void;
}

/**
 * A transport that reports {@link Transport.queued} calls its sink's
 * `onDrain` once they fall back to 0 after having been above this many
 * bytes (64 KiB, the smallest write-queue cap a connection takes), so
 * that a connection waiting below its cap is always woken.
 */
export const DRAIN_MARK = 64 * 1024;

/** A reliable, ordered, bidirectional byte stream to one peer. */
export interface Transport {
  /** Where it goes, for logs and error messages. */
  readonly description: string;
  /** Starts delivering bytes to `sink` (called once, by the connection). */
  start(sink: TransportSink): void;
  /**
   * Sends `bytes`. The view now belongs to the transport (it may keep it;
   * the writer never writes those bytes again), but it may be part of a
   * larger buffer the writer goes on filling past its end: never transfer
   * or resize its buffer. Never blocks; errors surface as `onEnd`.
   */
  write(bytes: Uint8Array): void;
  /**
   * Optional: sends `segments` in order as one write (a gather write), so
   * a big payload travels without being copied into a batch first. Same
   * ownership as {@link write}; a segment may also be the caller's payload,
   * which the transport must not modify. Without it, segments are joined
   * and passed to `write`.
   */
  writev?(segments: Uint8Array[]): void;
  /** Sends what is queued, then closes both directions. Idempotent. */
  close(): void;
  /**
   * Optional: closes after a fatal GOAWAY (spec §7.3). Sends what is
   * queued and shuts down the sending side only, then reads and discards
   * what still arrives until the peer's end of stream, `maxBytes` or `ms`,
   * whichever comes first, then lets go of the descriptor. The sink hears
   * nothing more (its `onEnd` is called at once). Without it, `close`.
   */
  linger?(ms: number, maxBytes: number): void;
  /**
   * Optional: the bytes written that the transport still holds, not yet
   * passed on (a socket's `writableLength`: what the kernel has not
   * taken; a shared-memory ring's overflow; a WebSocket's
   * `bufferedAmount`). The connection's write-queue cap (`writeQueue`)
   * measures them; a transport that has this calls its sink's `onDrain`
   * (see {@link DRAIN_MARK}). Without it the transport holds nothing:
   * every write is passed on at once (memory, MessagePort, a NATS link).
   */
  queued?(): number;
  /**
   * Optional: stops delivering bytes until {@link resume} (the connection
   * holds the peer's new call while its write queue is over its cap);
   * what arrives meanwhile stays with the transport, whose own bound (a
   * socket's receive buffer, a ring) then holds the peer's writes back.
   * Without it, the connection buffers what arrives until it goes on.
   */
  pause?(): void;
  /** Optional: delivers bytes again after {@link pause}. */
  resume?(): void;
}

/**
 * A bound listening socket (`unix.listen`, `tcp.listen`). Hand it to
 * `provider.serve(listener)`, or take its connections yourself with
 * {@link Listener.accept}; connections that arrive before either wait.
 */
export interface Listener {
  /** The address it listens on (for TCP, with the real port). */
  readonly address: string;
  /**
   * Hands each accepted connection's transport to `onTransport`, from now
   * until the listener is closed (those that arrived earlier first);
   * resolves once it is closed. One callback per listener: a second call
   * throws.
   */
  accept(onTransport: OnTransport): Promise<void>;
  /** Stops accepting; connections already made go on. Resolves once the listener is closed. */
  close(): Promise<void>;
}

/** Called with each accepted connection's transport. */
export type OnTransport = (transport: Transport) => void;
