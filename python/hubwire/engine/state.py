""":class:`Core`: the state of one connection, shared by its reader, the
calls it serves and every handle to it.

It sends frames (through the :class:`~.writer.Writer`), starts and
abandons the calls this side makes, drains, and dies. :meth:`Core.die` is
the one place a connection ends: every pending call fails at once with
``unavailable`` and a message saying why, and every handler is cancelled.
Everything here runs on the connection's event loop.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from ..codes import Code
from ..errors import HubwireError
from ..frame import CANCEL, CREDIT, END, GOAWAY, HELLO, ITEM, PING, RESPONSE, header, id_after, message_bytes, request_head, status_head
from ..hello import Hello, encode_hello
from ..transport import Transport
from .calls import CallQueue, OutCall, Served
from .writer import Writer

_U32 = struct.Struct("<I")

#: How long a connection that sent a fatal GOAWAY discards input before it
#: closes, and how many bytes at most (``spec/PROTOCOL.md`` §7.3).
LINGER_SECONDS = 1.0
LINGER_BYTES = 1 << 20


class Core:
    """The shared state of one connection."""

    def __init__(self, transport: Transport, local: Hello, service: Any, dialer: bool, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport = transport
        #: Our HELLO.
        self.local = local
        #: The peer's HELLO, once the handshake is done.
        self.peer: Hello = local
        #: The ``Service`` whose methods we offer (engine/serve.py), or None.
        self.service = service
        #: We opened the connection: our call ids are odd.
        self.dialer = dialer
        #: As the acceptor: the token the dialer's HELLO must carry (§4.4),
        #: our HELLO held back until it does; None requires none.
        self.require_token: str | None = None
        self.writer = Writer(transport, loop, self._write_failed)
        self.out: dict[int, OutCall] = {}
        self.served: dict[int, Served] = {}
        self.first_id = 1 if dialer else 2
        self.next_id = self.first_id
        self.queue = CallQueue()
        #: Why the connection ended, once it has.
        self.error: HubwireError | None = None
        #: We sent GOAWAY ok: accept no new calls.
        self.draining = False
        #: The peer sent GOAWAY ok: start no new calls.
        self.peer_draining = False
        #: The highest call id the peer started that we saw.
        self.last_peer_id = 0
        self.pings: dict[bytes, asyncio.Future[None]] = {}
        self.ping_seq = 0
        self.closed: asyncio.Future[HubwireError] = loop.create_future()
        self.idle: asyncio.Event = asyncio.Event()
        self.handshake: asyncio.Future[None] = loop.create_future()
        #: Seconds the write queue may stay over its cap with a new call held (reader.py).
        self.write_stall_timeout = 30.0
        #: The connection's reader (engine/reader.py).
        self.reader: Any = None
        #: The public ``Connection`` of this core, once one was made.
        self.handle: Any = None
        self._method_names: dict[str, bytes] = {}

    def ours(self, call_id: int) -> bool:
        """Whether ``call_id`` is of our parity: a call we started."""
        return (call_id & 1) == (1 if self.dialer else 0)

    # ---- Sending frames ----------------------------------------------------

    def send_response(self, call_id: int, code: int, message: str, codec: int, payload: Any) -> None:
        """Sends a RESPONSE; one over the caller's ``max_frame`` becomes
        ``too_large``. The answer of the only call served leaves at once."""
        m = message_bytes(message) if message else b""
        n = len(payload) if payload is not None else 0
        body = 3 + len(m) + n
        if body > self.peer.max_frame:
            msg = f"response of {body} bytes exceeds the caller's max_frame of {self.peer.max_frame} bytes"
            self.writer.write(status_head(RESPONSE, call_id, 0, Code.too_large, message_bytes(msg), 0))
            return
        self.writer.write(status_head(RESPONSE, call_id, codec, code, m, n), payload, not self.served)

    def send_error(self, call_id: int, e: HubwireError) -> None:
        """Sends a RESPONSE for an error (a failure carries its encoded value)."""
        if e.detail is not None:
            self.send_response(call_id, e.code, e.message, e.detail[0], e.detail[1])
        else:
            self.send_response(call_id, e.code, e.message, 0, None)

    def send_item(self, call_id: int, codec: int, payload: Any) -> None:
        """Sends an ITEM (the caller checked its size and credit)."""
        self.writer.write(header(ITEM, 0, codec, call_id, len(payload)), payload)

    def send_end(self, call_id: int) -> None:
        """Sends END: no more items from us on this call."""
        self.writer.write(header(END, 0, 0, call_id, 0))

    def grant(self, call_id: int, n: int) -> None:
        """Sends CREDIT for a stream we receive."""
        if self.error is None:
            self.writer.write(header(CREDIT, 0, 0, call_id, 4) + _U32.pack(n))

    def check_size(self, body_len: int, what: str) -> None:
        """Raises ``too_large`` for a frame body over the peer's limit."""
        if body_len > self.peer.max_frame:
            raise HubwireError(Code.too_large, f"{what} of {body_len} bytes exceeds the peer's max_frame of {self.peer.max_frame} bytes")

    # ---- Calls we start ----------------------------------------------------

    def begin(self, call: OutCall, timeout: float | None) -> None:
        """Starts ``call`` now, or queues it while the peer's ``max_calls``
        are in flight; fails it at once if it cannot start. A timeout of
        None or 0 is no deadline, as ``timeout_ms = 0`` is on the wire."""
        if self.error is not None:
            return call.fail(self.error)
        if self.peer_draining:
            return call.fail(HubwireError(Code.unavailable, "peer is draining (GOAWAY); start the call elsewhere"))
        name = self._method_names.get(call.method)
        if name is None:
            name = call.method.encode("utf-8")
            if len(self._method_names) < 1024:
                self._method_names[call.method] = name
        if not 1 <= len(name) <= 255:
            return call.fail(HubwireError(Code.invalid_argument, f"method name must be 1-255 bytes, got {len(name)}"))
        body = 5 + len(name) + len(call.payload)
        if body > self.peer.max_frame:
            return call.fail(
                HubwireError(Code.too_large, f"request of {body} bytes exceeds the peer's max_frame of {self.peer.max_frame} bytes")
            )
        if timeout:
            call.deadline = self.loop.time() + timeout
            call.timer = self.loop.call_later(timeout, self._on_deadline, call)
        if len(self.out) >= self.peer.max_calls:
            self.queue.push(call)
        else:
            self._send_request(call, name)

    def _send_request(self, call: OutCall, name: bytes | None = None) -> None:
        out = self.out
        call_id = self.next_id
        while call_id in out:
            call_id = call_id + 2 if call_id + 2 <= 0xFFFFFFFF else self.first_id
        self.next_id = call_id + 2 if call_id + 2 <= 0xFFFFFFFF else self.first_id
        call.id = call_id
        out[call_id] = call
        timeout_ms = 0
        if call.deadline is not None:
            timeout_ms = min(0xFFFFFFFF, max(1, int((call.deadline - self.loop.time()) * 1000)))
        if name is None:
            name = call.method.encode("utf-8")
        # Alone in flight: write now; else share a write with the others.
        self.writer.write(request_head(call_id, call.kind, call.codec, timeout_ms, name, len(call.payload)), call.payload, len(out) == 1)
        if call.send is not None:
            if call.end_pending:
                self.send_end(call_id)
            else:
                call.send.add(self.peer.window)

    def _on_deadline(self, call: OutCall) -> None:
        call.timer = None
        self.abandon(call, HubwireError(Code.deadline_exceeded, "deadline exceeded waiting for the response"))

    def release(self, call: OutCall) -> None:
        """The call has ended: forget it, stop its timer, start a queued call."""
        if call.id and self.out.get(call.id) is call:
            del self.out[call.id]
        if call.timer is not None:
            call.timer.cancel()
            call.timer = None
        while self.queue.size and len(self.out) < self.peer.max_calls and self.error is None:
            nxt = self.queue.shift()
            if nxt is not None:
                self._send_request(nxt)
        if self.draining:
            self.check_idle()

    def abandon(self, call: OutCall, error: HubwireError) -> None:
        """This side gives up on ``call``: CANCEL if it is on the wire, then
        fail it with ``error``. Does nothing once the call has ended."""
        if call.id == 0:
            if not self.queue.remove(call):
                return
        else:
            if self.out.get(call.id) is not call:
                return
            self.writer.write(header(CANCEL, 0, 0, call.id, 0))
        self.release(call)
        call.fail(error)

    # ---- The connection's life -------------------------------------------

    def peer_drains(self, last_id: int) -> None:
        """The peer sent GOAWAY ok: calls it never saw (ids after
        ``last_id`` in §3's order) fail now, safe to retry; the others go on."""
        self.peer_draining = True
        for call in [c for c in self.out.values() if id_after(c.id, last_id)]:
            self.release(call)
            call.fail(HubwireError(Code.unavailable, "peer is draining (GOAWAY) and never saw this call; safe to retry"))
        for call in self.queue.drain():
            call.fail(HubwireError(Code.unavailable, "peer is draining (GOAWAY)"))

    async def ping(self) -> float:
        """Round-trip time of a PING, in seconds."""
        if self.error is not None:
            raise self.error
        self.ping_seq += 1
        data = self.ping_seq.to_bytes(8, "little")
        fut: asyncio.Future[None] = self.loop.create_future()
        self.pings[data] = fut
        start = self.loop.time()
        self.writer.write(header(PING, 0, 0, 0, 8) + data)
        await fut
        return self.loop.time() - start

    def check_idle(self) -> None:
        """Tells a drain when no calls are left either way."""
        if not self.out and not self.served and not self.queue.size:
            self.idle.set()

    async def drain(self, grace: float) -> None:
        """Sends GOAWAY ok (the peer starts no new calls), refuses new calls,
        waits up to ``grace`` seconds for the calls in flight, then closes."""
        if self.error is not None:
            return
        self.draining = True
        self.writer.write(status_head(GOAWAY, self.last_peer_id, 0, Code.ok, b"draining", 0))
        self.check_idle()
        try:
            await asyncio.wait_for(self.idle.wait(), grace)
        except asyncio.TimeoutError:
            pass
        self.die(HubwireError(Code.unavailable, "connection closed locally (drained)"))

    def fail_protocol(self, e: HubwireError) -> None:
        """Our side found the peer's bytes bad: GOAWAY with the error, then
        close (``spec/PROTOCOL.md`` §7.1)."""
        if self.error is not None:
            return
        self.writer.write(status_head(GOAWAY, self.last_peer_id, 0, e.code, message_bytes(e.message), 0))
        handshaking = not self.handshake.done()
        self.die(e if handshaking else HubwireError(Code.unavailable, f"connection closed: sent GOAWAY {e.code.name}: {e.message}"), linger=True)

    def _write_failed(self, e: OSError) -> None:
        self.die(HubwireError(Code.unavailable, f"connection lost: write failed: {e}"))

    def send_hello(self) -> None:
        """Sends our HELLO: at once, or (an acceptor requiring a token)
        once the dialer's HELLO has shown it."""
        body = encode_hello(self.local)
        self.writer.write(header(HELLO, 0, 0, 0, len(body)), body)

    def die(self, error: HubwireError, linger: bool = False) -> None:
        """Ends the connection: fails every pending call with ``error``, stops
        every handler, closes the transport. Idempotent. ``linger``: we sent
        a fatal GOAWAY, so the transport half-closes and discards input for
        a bounded time before it closes (§7.3)."""
        if self.error is not None:
            return
        self.error = error
        if not self.handshake.done():
            self.handshake.set_exception(error)
            self.handshake.exception()  # retrieved: nobody may be waiting
        calls = list(self.out.values()) + self.queue.drain()
        self.out.clear()
        for call in calls:
            if call.timer is not None:
                call.timer.cancel()
                call.timer = None
            call.fail(error)
        served = list(self.served.values())
        self.served.clear()
        for s in served:
            s.stop(error)
        for fut in self.pings.values():
            if not fut.done():
                fut.set_exception(error)
        self.pings.clear()
        self.writer.close()
        if linger:
            self.transport.linger(LINGER_SECONDS, LINGER_BYTES)
        else:
            self.transport.close()
        self.idle.set()
        if not self.closed.done():
            self.closed.set_result(error)
