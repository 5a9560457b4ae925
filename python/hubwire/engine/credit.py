"""Flow control (``spec/PROTOCOL.md`` §8), written once for callers and
handlers: :class:`RecvWindow` is the pure accounting of the credit this
side grants for a stream it receives; :class:`CreditGate` holds the credit
for the ITEMs this side sends, and makes senders wait for more."""

from __future__ import annotations

import asyncio
from collections import deque

from ..errors import HubwireError


class RecvWindow:
    """Credit granted for a stream we receive. The reader spends it
    (:meth:`on_item`); the consumer earns it back (:meth:`consumed`) in
    batches of half the window, so a stream costs one CREDIT per half
    window rather than one per item."""

    __slots__ = ("remaining", "count", "batch")

    def __init__(self, window: int) -> None:
        self.remaining = window
        self.count = 0
        self.batch = max(1, window // 2)

    def on_item(self) -> bool:
        """An ITEM arrived: spends one credit; False if none was left (an overrun)."""
        if self.remaining <= 0:
            return False
        self.remaining -= 1
        return True

    def consumed(self) -> int:
        """The application took one item: the credit to grant now (0 until a
        batch is complete). It counts as remaining before it is sent, so the
        peer can never spend credit this side has not counted."""
        self.count += 1
        if self.count < self.batch:
            return 0
        n, self.count = self.count, 0
        self.remaining += n
        return n


class CreditGate:
    """Credit for sending ITEMs on one stream; senders wait while it is 0.
    Closed when the call ends: waiting and later senders get the reason."""

    __slots__ = ("credit", "waiters", "error")

    def __init__(self, credit: int) -> None:
        self.credit = credit
        self.waiters: deque[asyncio.Future[None]] = deque()
        #: Why no more items can be sent, once that is so.
        self.error: HubwireError | None = None

    async def take(self) -> None:
        """Takes one credit, waiting for it; raises the gate's error once closed."""
        if self.error is not None:
            raise self.error
        if self.credit > 0 and not self.waiters:
            self.credit -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut in self.waiters:
                self.waiters.remove(fut)
            elif fut.done() and not fut.cancelled() and fut.exception() is None:
                self.credit += 1  # granted to us, but we left: give it back
                self._wake()
            raise

    def add(self, n: int) -> None:
        """CREDIT arrived."""
        if self.error is not None:
            return
        self.credit = min(self.credit + n, 0xFFFF_FFFF)  # saturates at 2^32 - 1 (§8)
        self._wake()

    def _wake(self) -> None:
        while self.credit > 0 and self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():
                self.credit -= 1
                fut.set_result(None)

    def close(self, error: HubwireError) -> None:
        """No more sends: every waiter gets ``error``."""
        if self.error is not None:
            return
        self.error = error
        while self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():
                fut.set_exception(error)
