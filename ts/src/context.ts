/**
 * What a handler can read about its call: the method, the deadline, a
 * cancellation signal and who the caller is. A `Provider` hands its
 * handlers the engine's `Incoming` itself as this context (no object of
 * its own per call); its signal is made on first use, so handlers that
 * never look at it cost no `AbortController`.
 */

import type { PeerInfo } from "./hello.js";
import type { Connection } from "./connection.js";

/** The context a handler is called with. */
export interface CallContext {
  /** The method's name. */
  readonly method: string;
  /** The call's id on this connection. */
  readonly callId: number;
  /** When the caller stops waiting (epoch ms), or `undefined` for no deadline. */
  readonly deadline: number | undefined;
  /** Aborts when the call is cancelled: the caller's CANCEL, the deadline, or the connection lost. */
  readonly signal: AbortSignal;
  /** Who the caller is (from its HELLO). */
  readonly peer: PeerInfo;
  /** The connection the call came on: a handler may call the caller back on it. */
  readonly connection: Connection;
}
