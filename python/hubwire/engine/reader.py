"""The reader of a connection: on each readable event it reads as much as
is there into one buffer (``recv_into``, no copy), parses every complete
frame, and routes each by call id; a REQUEST goes to the serving seam
(``serve.on_request``). Before the peer's HELLO only a HELLO (or a
refusing GOAWAY) may come. Bad input ends the connection with GOAWAY and
its code (``spec/PROTOCOL.md`` §7.1).

While our write queue is over its cap (the peer is not reading what we
send), a new REQUEST or PING from the peer is held: it and what follows
stay unparsed and the transport stops reading (so the peer's writes stop
at its full socket) until the queue drains; if it stays over the cap for
``write_stall_timeout``, the connection is closed with GOAWAY
``resource_exhausted``. Other frames are always read, so two peers
streaming to each other never wait on one another.

The buffer starts at 256 KiB and grows to hold a whole frame when one is
larger (up to ``max_frame``, which the header check enforces before any of
the body is read); it shrinks back once it is empty again.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable

from ..codes import Code
from ..errors import HubwireError
from ..frame import (
    HEADER_LEN,
    PONG,
    Cancel,
    HEADER,
    ITEM,
    PING,
    REQUEST,
    RESPONSE,
    Credit,
    Decoder,
    End,
    Frame,
    Goaway,
    HelloFrame,
    Item,
    Ping,
    Pong,
    Request,
    Response,
    decode_body,
    header,
    request_fields,
    status_fields,
)
from ..hello import HELLO_LIMIT, negotiate, token_matches
from . import serve

if TYPE_CHECKING:
    from .state import Core

_header = HEADER.unpack_from

#: The read buffer's usual size.
CHUNK = 256 * 1024


def _overrun(call_id: int) -> HubwireError:
    return HubwireError(Code.resource_exhausted, f"call {call_id}: ITEM beyond the flow-control credit granted")


class Reader:
    """Reads, parses and routes the frames of one connection."""

    def __init__(self, core: Core) -> None:
        self.core = core
        # The HELLO may be larger than our max_frame: the peer cannot know our
        # limit before sending it (§4.1.2). Lowered once the HELLO is read.
        self.decoder = Decoder(max(core.local.max_frame, HELLO_LIMIT))
        self.buf = bytearray(CHUNK)
        self.mv = memoryview(self.buf)
        self.start = 0
        self.end = 0
        self.need = HEADER_LEN
        #: A REQUEST or PING waits at ``start`` while the write queue is over its cap.
        self.held = False
        self.routes: dict[type, Callable[[Any], None]] = {
            Response: self._response,
            Item: self._item,
            Request: self._request,
            Credit: self._credit,
            End: self._end,
            Cancel: self._cancel,
            Ping: self._ping,
            Pong: self._pong,
            Goaway: self._goaway,
            HelloFrame: self._second_hello,
        }

    # ---- Reading -------------------------------------------------------------

    def _room(self) -> None:
        """Makes room after ``end`` for at least the rest of the frame being read."""
        start, end = self.start, self.end
        if start == end:
            self.start = self.end = start = end = 0
            if len(self.buf) > CHUNK and self.need <= CHUNK:
                self._resize(CHUNK)
        want = max(self.need - (end - start), 4096)
        if len(self.buf) - end >= want:
            return
        size = max(CHUNK, self.need)
        if size > len(self.buf):
            old = self.mv[start:end].tobytes()
            self._resize(size)
            self.buf[: len(old)] = old
        else:
            self.buf[: end - start] = self.buf[start:end]
        self.start, self.end = 0, end - start

    def _resize(self, size: int) -> None:
        self.mv.release()
        self.buf = bytearray(size)
        self.mv = memoryview(self.buf)

    def on_readable(self) -> None:
        """The transport has bytes (or its end) for us."""
        core = self.core
        if core.error is not None or self.held:
            return
        self._room()
        try:
            n = core.transport.recv_into(self.mv[self.end :])
        except BlockingIOError:
            return
        except OSError as e:
            core.die(HubwireError(Code.unavailable, f"connection lost: read failed: {e}"))
            return
        if n == 0:
            self._eof()
            return
        self.end += n
        if self.end - self.start >= self.need:
            self._parse()

    def _eof(self) -> None:
        core = self.core
        e = self.decoder.finish(self.mv, self.start, self.end - self.start)
        if e is not None:
            core.fail_protocol(e)
        elif not core.handshake.done():
            core.die(HubwireError(Code.unavailable, "peer closed the connection before its HELLO"))
        else:
            core.die(HubwireError(Code.unavailable, "connection closed by peer (end of stream)"))

    def _parse(self) -> None:
        core = self.core
        mv, decoder, routes = self.mv, self.decoder, self.routes
        start, end = self.start, self.end
        opened = core.handshake.done()
        version, max_frame = decoder.version, decoder.max_frame
        writer = core.writer
        core.writer.corked = True
        try:
            while True:
                avail = end - start
                if avail < HEADER_LEN:
                    self.need = HEADER_LEN
                    break
                body_len, v, ftype, flags, codec, call_id = _header(mv, start)
                n = HEADER_LEN + body_len
                # The hot frames, parsed here without a frame object; any
                # header the checks of Decoder.check would refuse takes the
                # general path below, which raises the right error.
                if opened and REQUEST <= ftype <= ITEM and v == version and body_len <= max_frame and codec <= 2 and call_id:
                    if avail < n:
                        self.need = n
                        break
                    if ftype == REQUEST and writer.queued > writer.cap:
                        self._hold()
                        break
                    at = start + HEADER_LEN
                    start += n
                    self.start = start
                    if ftype == RESPONSE:
                        code, message, rest = status_fields(mv, at, start, "RESPONSE")
                        self._response_of(call_id, codec, code, message, bytes(mv[rest:start]))
                    elif ftype == REQUEST:
                        kind, timeout_ms, method, rest = request_fields(mv, at, start, flags)
                        serve.on_request(core, call_id, kind, codec, timeout_ms, method, bytes(mv[rest:start]))
                    else:
                        self._item_of(call_id, codec, bytes(mv[at:start]))
                    if core.error is not None:
                        return
                    continue
                n = decoder.check(mv, start, avail)
                if avail < n:
                    self.need = n
                    break
                if opened and ftype in (REQUEST, PING) and writer.queued > writer.cap:
                    self._hold()
                    break
                frame = decode_body(mv, start, n)
                start += n
                self.start = start
                if core.handshake.done():
                    routes[type(frame)](frame)
                    if not opened:
                        opened, version = True, decoder.version
                else:
                    self._first(frame)
                    decoder.max_frame = max_frame = core.local.max_frame
                    opened, version = core.handshake.done(), decoder.version
                if core.error is not None:
                    return
            self.start = start
        except HubwireError as e:
            core.writer.corked = False
            core.fail_protocol(e)
        finally:
            if core.writer.corked:
                core.writer.uncork()

    def _hold(self) -> None:
        """Holds the frame at ``start`` (see the module's comment) until the
        write queue is within its cap, or ends the connection after the
        stall timeout."""
        core = self.core
        self.held = True
        core.transport.pause_reading()
        stall = core.write_stall_timeout
        timer = core.loop.call_later(stall, self._stalled, stall)
        below: asyncio.Future[None] = core.loop.create_future()
        below.add_done_callback(lambda _: self._release(timer))
        # Resolved by the writer once the queue is within its cap (or closed).
        core.writer.waiters.append(below)

    def _stalled(self, stall: float) -> None:
        if self.held:
            self.core.fail_protocol(
                HubwireError(Code.resource_exhausted, f"the peer has not read our last frames for {stall} s (write queue over its cap)")
            )

    def _release(self, timer: asyncio.TimerHandle) -> None:
        """The write queue is within its cap (or the connection ended): reads on from the held frame."""
        timer.cancel()
        self.held = False
        core = self.core
        if core.error is not None:
            return
        core.transport.resume_reading()
        if self.end > self.start:
            self._parse()

    # ---- Routing -------------------------------------------------------------

    def _first(self, frame: Frame) -> None:
        core = self.core
        if isinstance(frame, HelloFrame):
            want = core.require_token
            if want is not None:
                # Raised: answered with GOAWAY, then closed. Never echo the token.
                if frame.body.token is None:
                    raise HubwireError(Code.unauthenticated, "token required")
                if not token_matches(frame.body.token, want):
                    raise HubwireError(Code.unauthenticated, "wrong token")
                core.send_hello()
            version = negotiate(core.local.versions, frame.body.versions)
            core.peer = frame.body
            self.decoder.version = version
            core.handshake.set_result(None)
        elif isinstance(frame, Goaway):
            core.die(HubwireError(frame.code, f"peer refused the handshake: {frame.message}"))
        else:
            raise HubwireError(Code.protocol_error, f"expected HELLO as the first frame, got {type(frame).__name__.upper()}")

    def _second_hello(self, frame: HelloFrame) -> None:
        raise HubwireError(Code.protocol_error, "unexpected second HELLO")

    def _request(self, f: Request) -> None:
        serve.on_request(self.core, *f)

    def _response(self, f: Response) -> None:
        self._response_of(*f)

    def _response_of(self, call_id: int, codec: int, code: Code, message: str, payload: Any) -> None:
        core = self.core
        call = core.out.get(call_id)
        if call is None:
            return
        core.release(call)
        call.settle(code, message, codec, payload)

    def _item(self, f: Item) -> None:
        self._item_of(*f)

    def _item_of(self, call_id: int, codec: int, payload: Any) -> None:
        core = self.core
        if core.ours(call_id):
            call = core.out.get(call_id)
            if call is None:
                return
            if call.recv is None:
                raise HubwireError(Code.protocol_error, f"ITEM for call {call_id}, which has no stream from the callee")
            if not call.recv.push(codec, payload):
                core.abandon(call, _overrun(call_id))
        else:
            s = core.served.get(call_id)
            if s is None:
                return
            if s.items is None:
                raise HubwireError(Code.protocol_error, f"ITEM for call {call_id}, which takes no stream from the caller")
            if not s.items.push(codec, payload):
                serve.finish(core, s, _overrun(call_id))

    def _end(self, f: End) -> None:
        s = self.core.served.get(f.call_id)
        if s is not None and s.items is not None:
            s.items.finish(None)

    def _cancel(self, f: Cancel) -> None:
        core = self.core
        s = core.served.pop(f.call_id, None)
        if s is not None:
            s.stop(HubwireError(Code.cancelled, "the caller cancelled the call"))
            if core.draining:
                core.check_idle()

    def _credit(self, f: Credit) -> None:
        core = self.core
        if core.ours(f.call_id):
            call = core.out.get(f.call_id)
            gate = call.send if call is not None else None
        else:
            s = core.served.get(f.call_id)
            gate = s.credit if s is not None else None
        if gate is not None:
            gate.add(f.credit)

    def _ping(self, f: Ping) -> None:
        self.core.writer.write(header(PONG, 0, 0, 0, 8) + f.data)

    def _pong(self, f: Pong) -> None:
        fut = self.core.pings.pop(f.data, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _goaway(self, f: Goaway) -> None:
        core = self.core
        if f.code != Code.ok:
            core.die(HubwireError(Code.unavailable, f"connection closed: peer sent GOAWAY {f.code.name}: {f.message}"))
        else:
            core.peer_drains(f.last_id)
