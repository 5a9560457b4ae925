/**
 * MessagePort transport: worker_threads in Node, Web Workers in browsers
 * (`spec/PROTOCOL.md` §11.1). Each message carries a run of the byte
 * stream as a `Uint8Array` of its own, its buffer transferred (in browsers,
 * a run under 1 KiB is cloned instead: `CLONE_BELOW_BROWSER`); message
 * boundaries mean nothing (the writer sends whole frames, but a receiver
 * reads a byte stream). The message `null` is the end of stream. A Node
 * port's `close` event (the peer's thread ended) and a browser Worker's
 * `error` event end it too, so a crashed worker fails calls at once.
 */

import type { Transport, TransportSink } from "./index.js";
import { concat } from "../bytes.js";

/**
 * What this transport needs of a port: a Node `MessagePort`, `parentPort`
 * or `Worker`, or a browser `MessagePort`, `Worker` or worker `self`.
 */
export interface PortLike {
  postMessage(message: unknown, transfer?: any): void;
  on?(event: string, listener: (value: any) => void): unknown;
  addEventListener?(type: string, listener: (event: any) => void): void;
  start?(): void;
  close?(): void;
}

/**
 * Calls `gone` when the other side of `port` can no longer answer: a Node
 * port's `close` (its thread ended), a Node Worker's `exit`, a Worker's
 * `error`. Shared with the shared-memory transport, which has no other way
 * to learn that a worker died.
 */
export function onPeerGone(port: PortLike, gone: (why: string) => void): void {
  if (typeof port.on === "function") {
    port.on("close", () => gone("the port was closed (the peer's thread ended)"));
    port.on("exit", () => gone("the worker exited"));
    port.on("error", (e: Error) => gone(`the worker failed: ${e?.message ?? e}`));
  } else if (typeof port.addEventListener === "function") {
    port.addEventListener("error", (ev: { message?: string }) => gone(`the worker failed: ${ev?.message ?? "error"}`));
  } else {
    throw new TypeError("not a MessagePort: it has neither on() nor addEventListener()");
  }
}

/**
 * In browsers, a run of bytes shorter than this is posted cloned, without a
 * transfer list: Chromium posts a small buffer faster copied than
 * transferred. Measured in Chromium 156 (8 alternating rounds, a page and
 * its worker): a bare echo of 30 B to 512 B ~9 % less time per round trip
 * cloned, 1–2 KiB even, 16 KiB a half more; a sequential hubwire call 1–12 %
 * less, with less CPU on the page's thread. In Node cloning does not pay:
 * even with transferring up to 64 B, twice its cost from 128 B, so Node
 * always transfers.
 */
const CLONE_BELOW_BROWSER = 1024;

class PortTransport implements Transport {
  private sink: TransportSink | null = null;
  private ended = false;
  /** Runs shorter than this are posted cloned, longer ones transferred (a Node port has `on`, a browser one does not). */
  private readonly cloneBelow: number;

  constructor(
    private readonly port: PortLike,
    readonly description: string,
  ) {
    this.cloneBelow = typeof port.on === "function" ? 0 : CLONE_BELOW_BROWSER;
  }

  start(sink: TransportSink): void {
    this.sink = sink;
    const port = this.port;
    const onMessage = (data: unknown) => {
      if (this.ended) return;
      if (data instanceof Uint8Array) sink.onData(data);
      else if (data instanceof ArrayBuffer) sink.onData(new Uint8Array(data));
      else if (data === null) this.finish("connection closed by peer (end of stream)");
    };
    if (typeof port.on === "function") {
      // Node: the listener gets the value itself, no MessageEvent per message.
      port.on("message", onMessage);
    } else if (typeof port.addEventListener === "function") {
      port.addEventListener("message", (ev: { data: unknown }) => onMessage(ev.data));
      port.start?.();
    }
    onPeerGone(port, (why) => this.finish(why));
  }

  private finish(reason: string): void {
    if (this.ended) return;
    this.ended = true;
    this.sink?.onEnd(reason);
  }

  write(bytes: Uint8Array): void {
    if (this.ended) return;
    // The view shares the writer's slab: copy it out into a buffer of its
    // own (posting the view would clone the whole slab).
    this.post(bytes.slice());
  }

  writev(segments: Uint8Array[]): void {
    if (this.ended) return;
    // One copy of everything into a buffer of our own.
    this.post(concat(segments));
  }

  /** Posts a run in a buffer of its own: transferred, unless small enough to post cheaper cloned (`CLONE_BELOW_BROWSER`). */
  private post(own: Uint8Array): void {
    if (own.length < this.cloneBelow) this.port.postMessage(own);
    else this.port.postMessage(own, [own.buffer]);
  }

  close(): void {
    if (this.ended) return;
    this.port.postMessage(null);
    // A MessagePort is closed too, so it no longer keeps a Node event loop
    // alive (messages already posted are still delivered). Never a
    // worker's own scope: close() there would end the worker.
    if ((this.port as object).constructor?.name === "MessagePort") this.port.close?.();
    this.finish("connection closed locally");
  }
}

/** A transport over `port` (either end may dial; usually the page or main thread does). */
export function connect(port: PortLike, description = "messageport"): Transport {
  return new PortTransport(port, description);
}
