/**
 * The two halves of a stream, one vocabulary for callers and handlers
 * (as `stream.rs` in the Rust core): {@link ItemStream} receives items
 * (a caller's outputs, a handler's inputs), {@link ItemSink} sends a
 * caller's inputs, each within the peer's credit. Flow control itself is
 * the engine's (`engine/credit.ts`, `engine/calls.ts`); these wrap it.
 */

import { encode } from "./codec.js";
import { HubwireError } from "./errors.js";
import { FrameType } from "./frame.js";
import { CreditGate } from "./engine/credit.js";
import type { OutCall } from "./engine/calls.js";
import type { Core } from "./engine/state.js";

/**
 * The receiving half of a stream: what `conn.serverStream()` returns, the
 * outputs of `conn.bidi()`, and the inputs a client_stream or bidi handler
 * is given. An `AsyncIterable` (leaving a `for await` early stops the
 * stream), with `next()` and `cancel()`.
 */
export class ItemStream<T = unknown> implements AsyncIterable<T> {
  /** @internal `source`: the items; `stop`: what {@link cancel} does (by default, stop reading). */
  constructor(
    private readonly source: AsyncIterator<T>,
    private readonly stop: (() => void) | null = null,
  ) {}

  /** The next item; `done` when the stream ended with `ok`. Rejects with the call's error otherwise. */
  next(): Promise<IteratorResult<T>> {
    return this.source.next();
  }

  /**
   * Gives up on the stream. A caller's: the call is abandoned (CANCEL to
   * the callee), reading on gives `cancelled`. A handler's inputs: it
   * stops reading, later items are dropped.
   */
  cancel(): void {
    if (this.stop !== null) this.stop();
    else void this.source.return?.();
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return this.source;
  }
}

/** @internal Encodes a caller's input; a value the codec cannot take is `invalid_argument`. */
export function encodeInput(codec: number, input: unknown): Uint8Array {
  try {
    return encode(codec, input);
  } catch (e) {
    if (e instanceof HubwireError) throw e;
    throw new HubwireError("invalid_argument", `cannot encode input: ${(e as Error).message}`);
  }
}

/**
 * The sending half of a stream: a client_stream or bidi caller's inputs
 * (`ClientStream.sink`, `BidiStream.sink`). Each `send` waits for the
 * callee's credit; `end()` sends END.
 */
export class ItemSink<T = unknown> {
  /** @internal Sends `call`'s inputs in `codec`; its credit arrives with the REQUEST (the peer's window). */
  constructor(
    private readonly core: Core,
    private readonly call: OutCall,
    private readonly codec: number,
  ) {
    call.send = new CreditGate(0);
  }

  /** Sends one item, waiting for credit (and while the write queue is over its cap). Rejects once the call has ended (its outcome then says how). */
  async send(item: T): Promise<void> {
    const { call, core } = this;
    const gate = call.send!;
    if (gate.error !== null) throw gate.error;
    const payload = encodeInput(this.codec, item);
    if (payload.length > core.peer.max_frame) {
      const e = new HubwireError("too_large", `item of ${payload.length} bytes exceeds the peer's max_frame of ${core.peer.max_frame} bytes`);
      core.abandon(call, e);
      throw e;
    }
    const wait = gate.take();
    if (wait !== null) await wait;
    // Over the write queue's cap (the peer is not reading): wait for it to drain.
    const full = core.writer.ready();
    if (full !== null) await full;
    core.writer.item(call.id, this.codec, payload);
  }

  /** No more items (END). Sending after this fails with `invalid_argument`. */
  end(): void {
    const call = this.call;
    if (call.send!.error !== null) return;
    call.send!.close(new HubwireError("invalid_argument", "the inputs have ended (END was sent)"));
    // A call still queued for the peer's max_calls sends END after its REQUEST.
    if (call.id === 0) call.endPending = true;
    else this.core.writer.empty(FrameType.End, call.id);
  }
}
