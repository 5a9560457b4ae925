"""The in-memory transport: two connected ends in one process, with socket
semantics (a bounded buffer each way, end of stream after the bytes
written once an end closes). The behaviour suite runs on it beside the
real transports; ``hubwire.testing.pair`` uses it. Both ends must be used
from one event loop.
"""

from __future__ import annotations

import asyncio
from typing import Callable, Sequence

from .base import Buf, Transport

#: Bytes one direction holds before a send would block (like a socket buffer).
CAPACITY = 256 * 1024


class _Pipe:
    """One direction: bytes written by one end, read by the other."""

    __slots__ = ("data", "closed", "reader", "scheduled", "loop", "writer_waiting")

    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False
        self.reader: Callable[[], None] | None = None
        self.scheduled = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.writer_waiting: Callable[[], None] | None = None

    def wake_reader(self) -> None:
        if self.reader is not None and not self.scheduled and self.loop is not None and not self.loop.is_closed():
            self.scheduled = True
            self.loop.call_soon(self._run_reader)

    def _run_reader(self) -> None:
        self.scheduled = False
        if self.reader is not None:
            self.reader()

    def wake_writer(self) -> None:
        cb, self.writer_waiting = self.writer_waiting, None
        if cb is not None and self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon(cb)


class MemoryTransport(Transport):
    """One end of an in-memory connection."""

    def __init__(self, inbound: _Pipe, outbound: _Pipe, description: str) -> None:
        self._in = inbound
        self._out = outbound
        self.description = description
        self._closed = False
        self._on_readable: Callable[[], None] | None = None

    def attach(self, loop: asyncio.AbstractEventLoop, on_readable: Callable[[], None]) -> None:
        self._in.loop = loop
        self._out.loop = self._out.loop or loop
        self._in.reader = self._on_readable = on_readable
        if self._in.data or self._in.closed:
            self._in.wake_reader()

    def pause_reading(self) -> None:
        self._in.reader = None

    def resume_reading(self) -> None:
        if not self._closed and self._on_readable is not None:
            self._in.reader = self._on_readable
            self._in.wake_reader()

    def recv_into(self, buf: memoryview) -> int:
        p = self._in
        if not p.data:
            if p.closed or self._closed:
                return 0
            raise BlockingIOError()
        n = min(len(buf), len(p.data))
        buf[:n] = p.data[:n]
        del p.data[:n]
        p.wake_writer()
        if p.data:  # level-triggered, like a socket: more to read, call again
            p.wake_reader()
        return n

    def send(self, parts: Sequence[Buf]) -> int:
        p = self._out
        if p.closed or self._closed:
            raise BrokenPipeError("memory transport closed")
        room = CAPACITY - len(p.data)
        if room <= 0:
            raise BlockingIOError()
        sent = 0
        for part in parts:
            take = min(room - sent, len(part))
            p.data += part[:take]
            sent += take
            if sent == room:
                break
        p.wake_reader()
        return sent

    def when_writable(self, callback: Callable[[], None]) -> None:
        p = self._out
        if p.closed or len(p.data) < CAPACITY:
            if p.loop is not None:
                p.loop.call_soon(callback)
            return
        p.writer_waiting = callback

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for p in (self._in, self._out):
            p.closed = True
        self._out.wake_reader()
        self._out.wake_writer()
        self._in.wake_writer()
        self._in.reader = None


def pair(name: str = "memory") -> tuple[MemoryTransport, MemoryTransport]:
    """Two connected ends: (dialer's, acceptor's)."""
    a_to_b, b_to_a = _Pipe(), _Pipe()
    return MemoryTransport(b_to_a, a_to_b, f"{name}:a"), MemoryTransport(a_to_b, b_to_a, f"{name}:b")
