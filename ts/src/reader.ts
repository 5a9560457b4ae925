/**
 * Routing frames to calls. The connection parses every complete frame of
 * each read and hands its fields to a visitor: {@link Handshake} until the
 * peer's HELLO has arrived (only HELLO, or a refusing GOAWAY, may come
 * first), then {@link Router}, which finds each frame's call by id. A frame
 * for a call that is no longer live is ignored (`spec/PROTOCOL.md` §3); an
 * error thrown here is a protocol error that closes the connection.
 */

import { codeName } from "./codes.js";
import { HubwireError } from "./errors.js";
import { FrameType, type FrameVisitor } from "./frame.js";
import type { Hello } from "./hello.js";
import { onRequest } from "./provider.js";
import type { Connection } from "./connection.js";

const TYPE_NAMES = ["", "HELLO", "REQUEST", "RESPONSE", "ITEM", "END", "CANCEL", "CREDIT", "PING", "PONG", "GOAWAY"];

/** Frames before the peer's HELLO. */
export class Handshake implements FrameVisitor {
  constructor(private readonly conn: Connection) {}
  private unexpected(type: number): never {
    throw new HubwireError("protocol_error", `expected HELLO as the first frame, got ${TYPE_NAMES[type]}`);
  }
  hello(h: Hello): void {
    this.conn.onHello(h);
  }
  goaway(_lastId: number, code: number, message: string): void {
    this.conn.onRefused(code, message);
  }
  request(): void { this.unexpected(FrameType.Request); }
  response(): void { this.unexpected(FrameType.Response); }
  item(): void { this.unexpected(FrameType.Item); }
  end(): void { this.unexpected(FrameType.End); }
  cancel(): void { this.unexpected(FrameType.Cancel); }
  credit(): void { this.unexpected(FrameType.Credit); }
  ping(): void { this.unexpected(FrameType.Ping); }
  pong(): void { this.unexpected(FrameType.Pong); }
}

function overrun(id: number): HubwireError {
  return new HubwireError("resource_exhausted", `call ${id}: ITEM beyond the flow-control credit granted`);
}

/** Frames after the handshake, routed by call id. */
export class Router implements FrameVisitor {
  constructor(private readonly conn: Connection) {}

  hello(): void {
    throw new HubwireError("protocol_error", "unexpected second HELLO");
  }

  request(id: number, kind: number, codec: number, timeoutMs: number, method: string, payload: Uint8Array): void {
    if (this.conn.ours(id)) throw new HubwireError("protocol_error", `REQUEST with call id ${id} of the receiver's parity`);
    onRequest(this.conn, id, kind, codec, timeoutMs, method, payload);
  }

  response(id: number, codec: number, code: number, message: string, payload: Uint8Array): void {
    const call = this.conn.out.get(id);
    if (call === undefined) return;
    this.conn.release(call);
    call.settle(code, message, codec, payload);
  }

  item(id: number, codec: number, payload: Uint8Array): void {
    const conn = this.conn;
    if (conn.ours(id)) {
      const call = conn.out.get(id);
      if (call === undefined) return;
      if (call.recv === null) throw new HubwireError("protocol_error", `ITEM for call ${id}, which has no stream from the callee`);
      if (!call.recv.push(codec, payload)) conn.abandon(call, overrun(id));
    } else {
      const s = conn.served.get(id);
      if (s === undefined) return;
      if (s.items === null) throw new HubwireError("protocol_error", `ITEM for call ${id}, which takes no stream from the caller`);
      if (!s.items.push(codec, payload)) s.finishWith(overrun(id));
    }
  }

  end(id: number): void {
    this.conn.served.get(id)?.items?.finish(null);
  }

  cancel(id: number): void {
    this.conn.served.get(id)?.stop(new HubwireError("cancelled", "the caller cancelled the call"));
  }

  credit(id: number, n: number): void {
    const gate = this.conn.ours(id) ? this.conn.out.get(id)?.send : this.conn.served.get(id)?.sendCredit;
    gate?.add(n);
  }

  ping(data: Uint8Array): void {
    this.conn.writer.ping(FrameType.Pong, data);
  }

  pong(data: Uint8Array): void {
    this.conn.onPong(data);
  }

  goaway(lastId: number, code: number, message: string): void {
    if (code !== 0) {
      this.conn.die(new HubwireError("unavailable", `connection closed: peer sent GOAWAY ${codeName(code)}: ${message}`));
    } else this.conn.peerDrains(lastId);
  }
}
