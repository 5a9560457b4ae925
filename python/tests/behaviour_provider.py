"""The provider of the behaviour suite. In-process (``provider()``), or as
a program: ``python behaviour_provider.py`` serves its parent when started
as a hubwire child (HUBWIRE_FD), or ``--listen unix:/path|tcp:host:port``.
It prints a line on stdout at start and garbage on both outputs from
``shout``, which must never reach the framing."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from typing import Any, AsyncIterator, Iterator

import msgspec

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from hubwire import CallContext, ConnectionOptions, Failure, ItemStream, Provider  # noqa: E402

#: The window the provider grants per stream (small, so flow control shows).
PROVIDER_WINDOW = 8
#: The provider's frame limit (small, so too_large shows).
PROVIDER_MAX_FRAME = 1024 * 1024


class Div(msgspec.Struct):
    a: float
    b: float


class DivError(msgspec.Struct):
    kind: str


class Tagged(msgspec.Struct):
    token: str
    n: int


#: What the provider observed, per token: cancellations and items sent.
cancelled: dict[str, bool] = {}
progress: dict[str, int] = {}
_lock = threading.Lock()


def options() -> ConnectionOptions:
    return ConnectionOptions(name="behaviour", window=PROVIDER_WINDOW, max_frame=PROVIDER_MAX_FRAME)


def provider() -> Provider:
    p = Provider("behaviour")

    @p.unary(inline=True)
    def echo(data: bytes) -> bytes:
        return data

    @p.unary(inline=True)
    def add(pair: tuple[int, int]) -> int:
        return pair[0] + pair[1]

    @p.unary(errors=DivError)
    async def divide(d: Div) -> float:
        if d.b == 0:
            raise Failure(DivError(kind="division_by_zero"))
        return d.a / d.b

    @p.unary
    async def panic(message: str) -> None:
        raise RuntimeError(message)

    @p.unary
    async def sleep(t: Tagged, ctx: CallContext) -> None:
        cancelled[t.token] = False
        try:
            await asyncio.sleep(t.n / 1000)
        except asyncio.CancelledError:
            cancelled[t.token] = True
            raise

    @p.unary
    def sleep_in_thread(t: Tagged, ctx: CallContext) -> None:
        """A plain def handler: runs in a thread, learns of cancellation from ctx."""
        with _lock:
            cancelled[t.token] = False
        if ctx.wait_cancelled(t.n / 1000):
            with _lock:
                cancelled[t.token] = True

    @p.unary(inline=True)
    def was_cancelled(token: str) -> bool | None:
        return cancelled.get(token)

    @p.unary(inline=True, name="progress")
    def progress_of(token: str) -> int:
        return progress.get(token, 0)

    @p.unary
    async def delay_echo(pair: tuple[int, int]) -> int:
        await asyncio.sleep(pair[1] / 1000)
        return pair[0]

    @p.unary
    def add_in_thread(pair: tuple[int, int]) -> int:
        time.sleep(0.001)
        return pair[0] + pair[1]

    @p.unary(inline=True)
    def shout(line: str) -> str:
        print(f"HW garbage {line}", flush=True)  # must never reach the framing
        sys.stdout.buffer.write(b"\x0c\x00\x00\x00\x01\x08\x00\x00\x00\x00\x00\x00raw bytes\n")
        sys.stdout.flush()
        print(f"noise {line}", file=sys.stderr, flush=True)
        return line.upper()

    @p.server_stream
    async def count(n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    @p.server_stream
    def count_in_thread(n: int) -> Iterator[int]:
        yield from range(n)

    @p.server_stream
    async def firehose(t: Tagged) -> AsyncIterator[int]:
        for i in range(t.n):
            yield i
            progress[t.token] = i + 1

    @p.server_stream(errors=DivError)
    async def then_fail(n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i
        raise Failure(DivError(kind="stream_failed"))

    @p.server_stream
    async def slow_stream(t: Tagged) -> AsyncIterator[int]:
        cancelled[t.token] = False
        i = 0
        try:
            while True:
                yield i
                i += 1
                await asyncio.sleep(t.n / 1000)
        except (asyncio.CancelledError, GeneratorExit):
            cancelled[t.token] = True
            raise

    @p.client_stream
    async def sum(items: ItemStream[int]) -> int:
        total = 0
        async for x in items:
            total += x
        return total

    @p.client_stream
    def sum_in_thread(items: Iterator[int]) -> int:
        total = 0
        for x in items:
            total += x
        return total

    @p.client_stream
    async def stall(items: ItemStream[int], ctx: CallContext) -> int:
        await ctx.until_cancelled()  # holds the stream open without reading it
        return 0

    @p.client_stream
    async def first_only(items: ItemStream[int]) -> int | None:
        async for x in items:
            return x
        return None

    @p.bidi
    async def upper(items: ItemStream[str]) -> AsyncIterator[str]:
        async for s in items:
            yield s.upper()

    @p.bidi
    def upper_in_thread(items: Iterator[str]) -> Iterator[str]:
        for s in items:
            yield s.upper()

    return p


def main() -> None:
    print("behaviour-provider starting", flush=True)
    p = provider()
    if "--listen" in sys.argv:
        address = sys.argv[sys.argv.index("--listen") + 1]

        async def serve() -> None:
            from hubwire.transport import listen

            listener = await listen(address)
            print(f"listening {listener.address}", flush=True)
            await p.serve(listener, options())

        asyncio.run(serve())
    else:
        p.serve_child(options())


if __name__ == "__main__":
    main()
