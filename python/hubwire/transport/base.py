"""The transport interface: :class:`Transport` (a byte stream the engine
reads and writes without blocking) and :class:`Listener` (accepts them)."""

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

    def pause_reading(self) -> None:
        """Stops calling ``on_readable`` until :meth:`resume_reading` (the
        connection holds the peer's new call while its write queue is over
        its cap): what arrives meanwhile stays in the transport, whose own
        bound (a socket's receive buffer) then holds the peer's writes back.
        The default does nothing; a transport whose ``on_readable`` is
        level-triggered must implement it, or the reader is called again
        and again."""

    def resume_reading(self) -> None:
        """Calls ``on_readable`` again after :meth:`pause_reading`."""

    def linger(self, seconds: float, max_bytes: int) -> None:
        """Closes after a fatal GOAWAY (``spec/PROTOCOL.md`` §7.3): shuts down
        the sending side only, then reads and discards what still arrives
        until end of stream, ``max_bytes`` or ``seconds``, whichever comes
        first, then closes. ``on_readable`` is not called any more. The
        default closes at once."""
        self.close()


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
