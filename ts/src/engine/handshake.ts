/**
 * The handshake (`spec/PROTOCOL.md` §4): each side sends its HELLO at
 * once and waits for the peer's. Before it, only HELLO (or a GOAWAY
 * refusing the connection) may arrive; then the version is negotiated,
 * the peer's HELLO kept, and the reader switches to the
 * {@link Dispatcher}. A peer that says nothing in time is refused with
 * `deadline_exceeded`.
 *
 * An acceptor that requires a token (§4.4) sends its HELLO only once the
 * dialer's has arrived with that token: its HELLO lists its methods, which
 * a peer without the token must not learn. Otherwise it answers GOAWAY
 * `unauthenticated` and closes.
 */

import { codeName } from "../codes.js";
import { HubwireError } from "../errors.js";
import { encodeFrame, FrameType, type FrameVisitor } from "../frame.js";
import { negotiate, tokenMatches, type Hello } from "../hello.js";
import { Dispatcher, FrameReader } from "./reader.js";
import type { Service } from "./serve.js";
import type { Core } from "./state.js";

const TYPE_NAMES = ["", "HELLO", "REQUEST", "RESPONSE", "ITEM", "END", "CANCEL", "CREDIT", "PING", "PONG", "GOAWAY"];

/**
 * Opens `core`'s connection: sends our HELLO, starts reading, and resolves
 * once the peer's HELLO has arrived (rejects with why it failed: no common
 * version, a refusal, a bad first frame, `timeoutMs` without a HELLO, the
 * connection lost). `service` answers the peer's calls from then on.
 * With `requireToken`, our HELLO waits for the dialer's, and its token.
 */
export function open(core: Core, service: Service | undefined, timeoutMs: number, requireToken?: string): Promise<void> {
  const reader = new FrameReader(core);
  reader.visitor = new Handshake(core, reader, service, requireToken);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reader.fatal(new HubwireError("deadline_exceeded", `no HELLO from ${core.transport.description} within ${timeoutMs} ms`));
    }, timeoutMs);
    core.opening = { resolve, reject, timer };
    if (requireToken === undefined) core.writer.frame(encodeFrame({ type: "hello", body: core.local }));
    core.transport.start(reader);
  });
}

/** Frames before the peer's HELLO. */
class Handshake implements FrameVisitor {
  constructor(
    private readonly core: Core,
    private readonly reader: FrameReader,
    private readonly service: Service | undefined,
    private readonly requireToken: string | undefined,
  ) {}

  private unexpected(type: number): never {
    throw new HubwireError("protocol_error", `expected HELLO as the first frame, got ${TYPE_NAMES[type]}`);
  }

  hello(h: Hello): void {
    const core = this.core;
    if (this.requireToken !== undefined) {
      // Thrown: the reader answers with GOAWAY and closes. Never echo the token.
      if (h.token === undefined) throw new HubwireError("unauthenticated", "token required");
      if (!tokenMatches(h.token, this.requireToken)) throw new HubwireError("unauthenticated", "wrong token");
      core.writer.frame(encodeFrame({ type: "hello", body: core.local }));
    }
    // Throws unsupported_version: the reader answers it with GOAWAY.
    this.reader.decoder.version = negotiate(core.local.versions, h.versions);
    this.reader.decoder.maxFrame = core.local.max_frame;
    this.reader.decoder.handoffs = core.local.direct !== undefined && h.direct !== undefined;
    core.peer = h;
    this.reader.visitor = new Dispatcher(core, this.service);
    const opening = core.opening!;
    core.opening = null;
    clearTimeout(opening.timer);
    opening.resolve();
  }

  goaway(_lastId: number, code: number, message: string): void {
    this.core.die(new HubwireError(codeName(code) ?? "protocol_error", `peer refused the handshake: ${message}`));
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
