"""Transports move bytes and nothing else, behind one small interface:
:class:`Transport`. The engine reads and writes through it; how the bytes
travel (a socket, a socketpair to a child process, an in-memory pipe) is
the transport's business.

| file | what |
|---|---|
| ``sock`` | :class:`~hubwire.transport.sock.SocketTransport`, the one implementation over a socket, and :class:`Listener` |
| ``unix`` | Unix domain sockets (a path) |
| ``tcp`` | TCP (``host:port``, ``TCP_NODELAY``) |
| ``child`` | a child process on a socketpair, descriptor 3 (``spec/PROTOCOL.md`` §10) |
| ``memory`` | the in-memory twin, with socket semantics (bounded buffer, end of stream on close) |
"""

from __future__ import annotations

import abc
import asyncio
from typing import Callable, Sequence, Union

Buf = Union[bytes, bytearray, memoryview]


class Transport(abc.ABC):
    """A reliable, ordered, bidirectional byte stream, driven by an asyncio loop.

    Reads and writes never block: they raise :class:`BlockingIOError` when
    nothing can be done now, and the transport calls back when it can.
    """

    #: Where the transport goes, for logs (``unix:/run/x.sock``, ``tcp:127.0.0.1:7000``, ...).
    description: str = "transport"

    @abc.abstractmethod
    def attach(self, loop: asyncio.AbstractEventLoop, on_readable: Callable[[], None]) -> None:
        """Starts calling ``on_readable()`` on ``loop`` whenever bytes (or the
        end of stream) can be read."""

    @abc.abstractmethod
    def recv_into(self, buf: memoryview) -> int:
        """Reads into ``buf``: the number of bytes read, 0 at end of stream.
        Raises BlockingIOError when nothing is there yet, OSError on failure."""

    @abc.abstractmethod
    def send(self, parts: Sequence[Buf]) -> int:
        """Writes as much of ``parts`` (in order, as one run of bytes) as fits
        now; returns how many bytes. Raises BlockingIOError when nothing fits,
        OSError (BrokenPipeError, ...) when the peer is gone."""

    @abc.abstractmethod
    def when_writable(self, callback: Callable[[], None]) -> None:
        """Calls ``callback()`` once, on the loop, when a send may make progress."""

    @abc.abstractmethod
    def close(self) -> None:
        """Ends the stream both ways and releases the transport. Idempotent."""


class Listener(abc.ABC):
    """Accepts connections: each is a :class:`Transport`."""

    #: The address actually listened on (the port the OS chose for ``:0``).
    address: str = ""

    @abc.abstractmethod
    async def accept(self) -> Transport:
        """Waits for the next connection."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stops listening."""


async def connect(address: str) -> Transport:
    """Dials ``unix:/path`` (or a path with a slash) or ``tcp:host:port``
    (or ``host:port``)."""
    from . import tcp, unix

    if address.startswith("unix:"):
        return await unix.connect(address[5:])
    if address.startswith("tcp:"):
        return await tcp.connect(address[4:])
    if "/" in address:
        return await unix.connect(address)
    return await tcp.connect(address)


async def listen(address: str) -> Listener:
    """Listens on ``unix:/path`` or ``tcp:host:port`` (as :func:`connect` reads them)."""
    from . import tcp, unix

    if address.startswith("unix:"):
        return await unix.listen(address[5:])
    if address.startswith("tcp:"):
        return await tcp.listen(address[4:])
    if "/" in address:
        return await unix.listen(address)
    return await tcp.listen(address)


__all__ = ["Transport", "Listener", "connect", "listen", "Buf"]
