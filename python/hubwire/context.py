"""What a handler knows about the call it serves: :class:`CallContext`."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from .hello import PeerInfo


class CallContext:
    """The context of one served call: its method, id, deadline, caller,
    and whether it was cancelled (the caller's CANCEL, the deadline, or
    the connection lost).

    An ``async def`` handler is also cancelled the asyncio way (its task
    gets ``CancelledError``); a plain ``def`` handler, which runs in a
    thread, polls :attr:`cancelled` or waits on :meth:`wait_cancelled`.
    """

    __slots__ = ("method", "call_id", "deadline", "peer", "_conn", "_flag", "_event", "_callbacks")

    def __init__(self, method: str, call_id: int, deadline: float | None, peer: PeerInfo, conn: Any) -> None:
        #: The method called.
        self.method = method
        #: The call id on this connection.
        self.call_id = call_id
        #: When the caller stops waiting (``time.monotonic()`` seconds), or None.
        self.deadline = deadline
        #: Who is calling (from its HELLO).
        self.peer = peer
        self._conn = conn
        self._flag = False
        self._event: threading.Event | None = None
        self._callbacks: list[Any] = []

    @property
    def connection(self) -> Any:
        """The ``hubwire.Connection`` the call came on: a handler may call the
        caller back. (Typed ``Any``: this layer sits below the connection.)"""
        return self._conn.handle

    @property
    def cancelled(self) -> bool:
        """Whether the call was cancelled."""
        return self._flag

    def remaining(self) -> float | None:
        """Seconds left before the deadline, or None without one."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def on_cancel(self, fn: Any) -> None:
        """Calls ``fn()`` (on the connection's event loop) when the call is
        cancelled; at once if it already was."""
        if self._flag:
            fn()
        else:
            self._callbacks.append(fn)

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Blocks (in a thread handler) until the call is cancelled or
        ``timeout`` passes; returns whether it was cancelled."""
        if self._event is None:
            self._event = threading.Event()
            if self._flag:
                self._event.set()
        return self._event.wait(timeout)

    async def until_cancelled(self) -> None:
        """Waits (in a coroutine) until the call is cancelled."""
        if self._flag:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        self.on_cancel(wake)
        await fut

    def _cancel(self) -> None:
        if self._flag:
            return
        self._flag = True
        if self._event is not None:
            self._event.set()
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn()
