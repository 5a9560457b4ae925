"""The conformance service (``conformance/README.md``): the methods every
testee offers in the provider role, written as any provider author would."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Callable

import msgspec

from hubwire import CallContext, Failure, ItemStream, Provider


class Ms(msgspec.Struct):
    """``{"ms": n}``."""

    ms: int


def conformance_service(emit: Callable[[dict[str, Any]], None]) -> Provider:
    """The service; ``emit`` reports events (``cancelled``) to the runner."""
    p = Provider("conformance-testee")

    @p.unary(inline=True)
    def echo(data: bytes) -> bytes:
        return data

    @p.unary(inline=True)
    def echo_value(value: Any) -> Any:
        return value

    @p.unary(inline=True)
    def fail(value: Any) -> None:
        raise Failure(value)

    @p.unary(inline=True)
    def panic(_: bytes) -> None:
        raise RuntimeError("conformance: the caller asked for a panic")

    @p.unary
    async def sleep(m: Ms, ctx: CallContext) -> None:
        try:
            await asyncio.sleep(m.ms / 1000)
        except asyncio.CancelledError:
            emit({"event": "cancelled", "method": ctx.method})
            raise

    @p.unary(inline=True)
    def big(n: int) -> bytes:
        return b"a" * n

    @p.server_stream
    async def count(n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    @p.server_stream
    async def fail_after(n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i
        raise Failure({"after": n})

    @p.server_stream
    async def forever(m: Ms, ctx: CallContext) -> AsyncIterator[int]:
        i = 0
        try:
            while True:
                yield i
                i += 1
                await asyncio.sleep(max(1, m.ms) / 1000)
        except (asyncio.CancelledError, GeneratorExit):
            emit({"event": "cancelled", "method": ctx.method})
            raise

    @p.client_stream
    async def sum(items: ItemStream[int]) -> int:
        total = 0
        async for x in items:
            total += x
        return total

    @p.client_stream
    async def first(items: ItemStream[Any]) -> Any:
        async for x in items:
            return x
        return None

    @p.bidi
    async def echo_stream(items: ItemStream[Any]) -> AsyncIterator[Any]:
        async for x in items:
            yield x

    return p
