"""The call table's entries: :class:`OutCall` (a call this side started,
from its REQUEST to its end) and :class:`Served` (a call this side serves),
the :class:`Inbox` of items a stream receives, and the :class:`CallQueue`
of calls waiting for the peer's ``max_calls``.

The reader routes every frame to its entry by call id (``spec/PROTOCOL.md``
§3: the dialer's ids are odd, the acceptor's even). The API layer
subclasses :class:`OutCall` for each kind of call; the engine only calls
its :meth:`OutCall.settle` and :meth:`OutCall.fail`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any, Callable

from ..codes import Code
from ..errors import HubwireError
from .credit import CreditGate, RecvWindow

if TYPE_CHECKING:
    from ..context import CallContext

#: What an :class:`Inbox` holds per item: (codec, payload).
Entry = tuple[int, Any]


class Inbox:
    """The items of one stream we receive, in order, then its end.

    Holds at most the window this side granted (the reader refuses an ITEM
    beyond it as an overrun, :meth:`push` returns False), and grants credit
    back through ``grant`` as :meth:`get` hands items out.
    """

    __slots__ = ("window", "grant", "items", "waiter", "ended", "error")

    def __init__(self, window: int, grant: Callable[[int], None]) -> None:
        self.window = RecvWindow(window)
        self.grant = grant
        self.items: deque[Entry] = deque()
        self.waiter: asyncio.Future[None] | None = None
        self.ended = False
        #: Why the stream ended badly, once it did (None: it ended ok).
        self.error: HubwireError | None = None

    def push(self, codec: int, payload: Any) -> bool:
        """An ITEM arrived; False if it was beyond the credit granted."""
        if self.ended:
            return True
        if not self.window.on_item():
            return False
        self.items.append((codec, payload))
        self._wake()
        return True

    def finish(self, error: HubwireError | None) -> None:
        """The stream ended: ok (None) or with ``error``. Items already here
        are still handed out first, then the end."""
        if self.ended:
            return
        self.ended = True
        self.error = error
        self._wake()

    def _wake(self) -> None:
        w = self.waiter
        if w is not None:
            self.waiter = None
            if not w.done():
                w.set_result(None)

    async def get(self) -> Entry | None:
        """The next item, None at an ok end; raises the stream's error."""
        while True:
            if self.items:
                entry = self.items.popleft()
                n = self.window.consumed()
                if n and not self.ended:
                    self.grant(n)
                return entry
            if self.ended:
                if self.error is not None:
                    raise self.error
                return None
            if self.waiter is not None:
                raise HubwireError(Code.invalid_argument, "the stream is already being read by another task")
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.waiter = fut
            try:
                await fut
            finally:
                if self.waiter is fut:
                    self.waiter = None


class OutCall:
    """A call this side started. Subclasses (in the API layer) say where its
    outcome goes; the engine fills in ``id`` when the REQUEST goes out."""

    __slots__ = ("id", "kind", "method", "codec", "payload", "timer", "deadline", "send", "recv", "end_pending", "queued", "__weakref__")

    def __init__(self, kind: int, method: str, codec: int, payload: Any) -> None:
        self.id = 0
        self.kind = kind
        self.method = method
        self.codec = codec
        self.payload = payload
        self.timer: asyncio.TimerHandle | None = None
        #: When the call must end (loop time), or None.
        self.deadline: float | None = None
        #: Credit for our ITEMs (client_stream, bidi).
        self.send: CreditGate | None = None
        #: The callee's ITEMs (server_stream, bidi).
        self.recv: Inbox | None = None
        #: The inputs ended while the call was still queued: END follows the REQUEST.
        self.end_pending = False
        self.queued = False

    def settle(self, code: Code, message: str, codec: int, payload: Any) -> None:
        """The RESPONSE arrived (the call has left the table)."""
        raise NotImplementedError

    def fail(self, error: HubwireError) -> None:
        """The call ended without a RESPONSE: deadline, cancellation, connection lost."""
        raise NotImplementedError


class Served:
    """A call this side serves: its context (which is also its identity: the
    peer may reuse an id once the call has ended), its handler's task, and
    the halves of its streams."""

    __slots__ = ("id", "ctx", "codec", "task", "items", "credit", "timer")

    def __init__(self, call_id: int, ctx: CallContext, codec: int) -> None:
        self.id = call_id
        self.ctx = ctx
        #: The request's codec: the answer's too.
        self.codec = codec
        self.task: asyncio.Future[Any] | None = None
        #: The caller's ITEMs (client_stream, bidi).
        self.items: Inbox | None = None
        #: Credit for our ITEMs (server_stream, bidi).
        self.credit: CreditGate | None = None
        self.timer: asyncio.TimerHandle | None = None

    def stop(self, reason: HubwireError) -> None:
        """The call ends without (further) answer: the handler is cancelled
        and sees ``reason`` on its streams."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.items is not None:
            self.items.finish(reason)
        if self.credit is not None:
            self.credit.close(reason)
        self.ctx._cancel()
        if self.task is not None and not self.task.done():
            self.task.cancel()


class CallQueue:
    """Calls waiting for the peer's ``max_calls`` to allow them, in order. A
    call abandoned while waiting is only marked and skipped later.

    Its size is what the program started beyond the peer's limit (each such
    call is a task or a thread of the program waiting on it): calls leave it
    in order as slots free up, and all fail at once with ``unavailable``
    when the connection dies or the peer drains."""

    __slots__ = ("calls", "size")

    def __init__(self) -> None:
        self.calls: deque[OutCall] = deque()
        self.size = 0

    def push(self, call: OutCall) -> None:
        """Adds ``call`` at the end of the queue."""
        call.queued = True
        self.calls.append(call)
        self.size += 1

    def shift(self) -> OutCall | None:
        """The next waiting call, or None."""
        while self.calls:
            call = self.calls.popleft()
            if call.queued:
                call.queued = False
                self.size -= 1
                return call
        return None

    def remove(self, call: OutCall) -> bool:
        """Takes ``call`` out of the queue; False if it was not waiting."""
        if not call.queued:
            return False
        call.queued = False
        self.size -= 1
        return True

    def drain(self) -> list[OutCall]:
        """Empties the queue, returning the calls that were waiting."""
        waiting = [c for c in self.calls if c.queued]
        for c in waiting:
            c.queued = False
        self.calls.clear()
        self.size = 0
        return waiting
