"""The background I/O thread of the blocking API: one event loop, started
on first use, on which every blocking connection of the process lives.
Callers in plain threads hand work to it and wait for the answer; the
engine fails a call at once when its connection is lost, so a caller
never waits on a connection that is gone."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def io_loop() -> asyncio.AbstractEventLoop:
    """The loop of the I/O thread (started on first use)."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            threading.Thread(target=run, name="hubwire-io", daemon=True).start()
            ready.wait()
            _loop = loop
        return _loop


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Runs ``coro`` on the I/O thread and waits for its result. If the
    waiting thread is interrupted (KeyboardInterrupt), the coroutine is
    cancelled, which cancels its call (CANCEL to the peer)."""
    loop = io_loop()
    if _in_loop(loop):
        raise RuntimeError("a blocking hubwire call was made on the hubwire I/O thread (from a callback?)")
    fut = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return fut.result()
    except BaseException:
        fut.cancel()
        raise


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
