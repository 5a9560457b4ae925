"""The write queue of a connection.

Frames queued while the loop runs other work leave together: the first
frame queued schedules one flush (``loop.call_soon``), and everything
queued until it runs goes out in one ``sendmsg``. A frame that is alone
(a REQUEST with no other call in flight, the RESPONSE of the only call
served) is written at once instead (``now=True``): it saves a trip
through the loop on the path of a single round trip. While the reader
dispatches the frames of one read, the writer is corked, and the answers
produced meanwhile leave in one write when it is done. Small frames are packed
into one buffer; a payload of 16 KiB or more stays a segment of its own,
so it is never copied in Python (the kernel copies it once). A socket that
is full hands the rest to a writability callback.

Cap (``ConnectionOptions.write_queue``, 4 MiB): above it,
:meth:`Writer.ready` makes senders of stream items wait and the reader
holds the peer's new calls and PINGs (``reader.py``), so a peer that does
not read is held back by its own full socket; answers to calls already
running still queue, bounded by the calls the peer may have in flight.
"""

from __future__ import annotations

import asyncio
from typing import Callable, Union

from ..transport import Transport

Buf = Union[bytes, bytearray, memoryview]

#: Payloads this large are not copied into the batch buffer.
BIG = 16 * 1024
#: ``ConnectionOptions.write_queue`` by default: queued bytes above which
#: item senders wait and the reader holds new calls.
DEFAULT_WRITE_QUEUE = 4 * 1024 * 1024
#: The smallest cap taken (as in the Rust runtime).
MIN_WRITE_QUEUE = 64 * 1024


class Writer:
    """Batches frames and writes them to the transport."""

    __slots__ = ("transport", "loop", "on_error", "buf", "parts", "queued", "scheduled", "blocked", "closed", "waiters", "corked", "cap")

    def __init__(
        self,
        transport: Transport,
        loop: asyncio.AbstractEventLoop,
        on_error: Callable[[OSError], None],
        cap: int = DEFAULT_WRITE_QUEUE,
    ) -> None:
        self.transport = transport
        #: Queued bytes above which item senders wait and the reader holds new calls.
        self.cap = max(cap, MIN_WRITE_QUEUE)
        self.loop = loop
        self.on_error = on_error
        #: The current run of small frames.
        self.buf = bytearray()
        #: Earlier runs and big payloads, in order, not yet written.
        self.parts: list[Buf] = []
        self.queued = 0
        self.scheduled = False
        self.blocked = False
        self.closed = False
        self.waiters: list[asyncio.Future[None]] = []
        #: The reader is dispatching: flush when it is done.
        self.corked = False

    def write(self, head: bytes, payload: Buf | None = None, now: bool = False) -> None:
        """Queues one frame: its header and fixed fields, then its payload;
        ``now`` writes it at once unless other frames are waiting."""
        if self.closed:
            return
        if now and not self.buf and not self.parts and not (self.scheduled or self.blocked or self.corked):
            # Alone: straight to the transport, head and payload as two
            # segments (no copy); whatever does not fit is queued below.
            try:
                n = self.transport.send((head, payload) if payload else (head,))
            except BlockingIOError:
                n = 0
            except OSError as e:
                self._fail(e)
                return
            if n >= len(head):
                if payload is None or n - len(head) >= len(payload):
                    return
                payload, head = memoryview(payload)[n - len(head) :], b""
            else:
                head = head[n:]
            now = False
        if payload is None or len(payload) < BIG:
            self.buf += head
            if payload:
                self.buf += payload
                self.queued += len(payload)
        else:
            self.buf += head
            self.parts.append(self.buf)
            self.parts.append(payload)
            self.buf = bytearray()
            self.queued += len(payload)
        self.queued += len(head)
        if self.scheduled or self.blocked or self.corked:
            return
        if now:
            self.flush()
        else:
            self.scheduled = True
            self.loop.call_soon(self.flush)

    def uncork(self) -> None:
        """The reader is done with a read: write what its frames produced."""
        self.corked = False
        if not self.scheduled and not self.blocked and (self.buf or self.parts):
            self.flush()

    def flush(self) -> None:
        """Writes what is queued, as far as the transport takes it."""
        self.scheduled = False
        if self.closed or self.blocked:
            return
        parts = self.parts
        if self.buf:
            parts.append(self.buf)
            self.buf = bytearray()
        if not parts:
            return
        try:
            n = self.transport.send(parts)
        except BlockingIOError:
            n = 0
        except OSError as e:
            self._fail(e)
            return
        self.queued -= n
        while n:
            first = parts[0]
            if n >= len(first):
                n -= len(first)
                del parts[0]
            else:
                parts[0] = memoryview(first)[n:]
                n = 0
        if parts:
            self.blocked = True
            self.transport.when_writable(self._writable)
        elif self.waiters:
            self._wake()

    def _fail(self, e: OSError) -> None:
        self.closed = True
        self.parts = []
        self.buf = bytearray()
        self._wake()
        self.on_error(e)

    def _writable(self) -> None:
        self.blocked = False
        self.flush()
        if self.queued <= self.cap:
            self._wake()

    def _wake(self) -> None:
        waiters, self.waiters = self.waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def over_cap(self) -> bool:
        """Whether more than the cap is queued (and the writer is open)."""
        return self.queued > self.cap and not self.closed

    async def ready(self) -> None:
        """Waits while more than the cap is queued."""
        while self.queued > self.cap and not self.closed:
            fut: asyncio.Future[None] = self.loop.create_future()
            self.waiters.append(fut)
            await fut

    def close(self) -> None:
        """Writes what it can now, then accepts nothing more."""
        if not self.closed:
            self.blocked = False
            self.flush()
        self.closed = True
        self.parts = []
        self.buf = bytearray()
        self._wake()
