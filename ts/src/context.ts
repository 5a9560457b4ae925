/**
 * What a handler can read about its call: the method, the deadline, a
 * cancellation signal and who the caller is. The signal is made on first
 * use, so handlers that never look at it cost no `AbortController`.
 */

import type { PeerInfo } from "./hello.js";
import type { Connection } from "./connection.js";
import { HubwireError } from "./errors.js";

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

/** The lazily created cancellation signal behind {@link CallContext.signal}. */
export class Cancellation {
  private controller: AbortController | null = null;
  /** Why the call was cancelled, once it was. */
  reason: HubwireError | null = null;

  /** The signal (created on first use; already aborted if the call was). */
  get signal(): AbortSignal {
    if (this.controller === null) {
      this.controller = new AbortController();
      if (this.reason !== null) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  /** Whether the call was cancelled. */
  get cancelled(): boolean {
    return this.reason !== null;
  }

  /** Cancels once; later calls do nothing. */
  cancel(reason: HubwireError): void {
    if (this.reason !== null) return;
    this.reason = reason;
    this.controller?.abort(reason);
  }
}
