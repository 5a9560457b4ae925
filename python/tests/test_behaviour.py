"""The shared behaviour suite (mirrors ``rust/hubwire-tests/tests/behaviour.rs``):
every case runs on every transport (memory, unix, tcp, child) through both
APIs (asyncio, and the blocking API from threads). A case sees only a
:class:`Harness` whose client is connected to the behaviour provider."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import behaviour_provider as bp
import pytest
from harness import APIS, SETUPS, End, Harness

from hubwire import Code, Failure, HubwireError

Case = Callable[[Harness], Awaitable[None]]
CASES: list[Case] = []


def case(fn: Case) -> Case:
    CASES.append(fn)
    return fn


async def expect_code(aw: Awaitable[Any], code: Code) -> HubwireError:
    try:
        got = await aw
    except HubwireError as e:
        assert e.code == code, f"expected {code.name}, got {e!r}"
        return e
    raise AssertionError(f"expected {code.name}, got the value {got!r}")


async def cancel_observed(h: Harness, token: str) -> None:
    """Polls the provider until it reports the cancellation of ``token`` (at most 10 s)."""
    for _ in range(1000):
        if await h.client.call("was_cancelled", token) is True:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the provider never observed the cancellation of {token}")


@case
async def unary_raw(h: Harness) -> None:
    c = h.client
    assert await c.call_raw("echo", b"hello") == b"hello"
    assert await c.call_raw("echo", b"") == b""
    big = bytes(i * 7 % 256 for i in range(1_000_000))
    assert await c.call_raw("echo", big) == big


@case
async def unary_typed(h: Harness) -> None:
    c = h.client
    assert await c.call("add", [2, 40], output=int) == 42
    assert await c.call("add", [-5, 3], output=int, codec="json") == -2
    assert await c.call("divide", bp.Div(a=1.0, b=4.0), output=float) == 0.25
    assert await c.call("add_in_thread", [20, 22]) == 42


@case
async def typed_failure(h: Harness) -> None:
    for codec in ("msgpack", "json"):
        e = await expect_code(h.client.call("divide", bp.Div(a=1, b=0), output=float, errors=bp.DivError, codec=codec), Code.failure)
        assert isinstance(e, Failure.of(bp.DivError))
        assert e.value == bp.DivError(kind="division_by_zero")
    # Without a declared type the value arrives as plain data.
    e = await expect_code(h.client.call("divide", {"a": 1, "b": 0}), Code.failure)
    assert isinstance(e, Failure) and e.value == {"kind": "division_by_zero"}


@case
async def defect_panic(h: Harness) -> None:
    e = await expect_code(h.client.call("panic", "boom 42"), Code.defect)
    assert "boom 42" in e.message
    assert await h.client.call("add", [1, 1]) == 2  # only that call failed


@case
async def unknown_method(h: Harness) -> None:
    e = await expect_code(h.client.call_raw("no_such_method", b""), Code.unknown_method)
    assert "no_such_method" in e.message


@case
async def invalid_argument(h: Harness) -> None:
    await expect_code(h.client.call("add", "not a pair"), Code.invalid_argument)
    await expect_code(h.client.call_raw("add", b"\x92\x01\x02"), Code.invalid_argument)  # structured method, raw bytes
    e = await expect_code(h.client.call("count", 3), Code.invalid_argument)  # wrong call kind
    assert "server_stream" in e.message


@case
async def response_type_mismatch(h: Harness) -> None:
    await expect_code(h.client.call("add", [1, 2], output=str), Code.internal)


@case
async def server_stream(h: Harness) -> None:
    assert await (await h.client.server_stream("count", 100, output=int)).collect() == list(range(100))
    assert await (await h.client.server_stream("count", 0)).collect() == []
    assert await (await h.client.server_stream("count_in_thread", 50)).collect() == list(range(50))


@case
async def server_stream_error(h: Harness) -> None:
    s = await h.client.server_stream("then_fail", 2, output=int, errors=bp.DivError)
    assert [await s.next(), await s.next()] == [0, 1]
    e = await expect_code(s.next(), Code.failure)
    assert isinstance(e, Failure.of(bp.DivError)) and e.value.kind == "stream_failed"


@case
async def client_stream(h: Harness) -> None:
    for method in ("sum", "sum_in_thread"):
        cs = await h.client.client_stream(method, output=int)
        for i in range(1, 201):  # far more items than the provider's window: needs CREDIT
            await cs.send(i)
        assert await cs.finish() == 20100
    cs = await h.client.client_stream("sum")
    assert await cs.finish() == 0


@case
async def client_stream_early_answer(h: Harness) -> None:
    cs = await h.client.client_stream("first_only")
    await cs.send(7)
    assert await cs.finish() == 7


@case
async def bidi(h: Harness) -> None:
    for method in ("upper", "upper_in_thread"):
        b = await h.client.bidi(method, output=str)
        for i in range(50):
            await b.send(f"line {i}")
            assert await b.next() == f"LINE {i}"

        async def burst() -> None:  # more than both windows, read afterwards
            for i in range(100):
                await b.send(f"b{i}")
            await b.end()

        writer = asyncio.ensure_future(burst())
        for i in range(100):
            assert await b.next() == f"B{i}"
        with pytest.raises(End):
            await b.next()
        await writer


@case
async def cancel_stream_observed(h: Harness) -> None:
    token = h.token("cancel-stream")
    s = await h.client.server_stream("slow_stream", bp.Tagged(token=token, n=5))
    assert [await s.next() for _ in range(3)] == [0, 1, 2]
    await s.cancel()
    await cancel_observed(h, token)


@case
async def deadline_exceeded(h: Harness) -> None:
    token = h.token("deadline-unary")
    await expect_code(h.client.call("sleep", bp.Tagged(token=token, n=60_000), timeout=0.1), Code.deadline_exceeded)
    await cancel_observed(h, token)
    token = h.token("deadline-thread")
    await expect_code(h.client.call("sleep_in_thread", bp.Tagged(token=token, n=60_000), timeout=0.1), Code.deadline_exceeded)
    await cancel_observed(h, token)
    await h.client.call("sleep", bp.Tagged(token=h.token("ok"), n=1), timeout=10)  # a call that fits its deadline
    await h.client.call("sleep", bp.Tagged(token=h.token("none"), n=20), timeout=0)  # 0 is no deadline, as on the wire


@case
async def deadline_exceeded_mid_stream(h: Harness) -> None:
    token = h.token("deadline-stream")
    s = await h.client.server_stream("slow_stream", bp.Tagged(token=token, n=20), timeout=0.3)
    got = 0
    with pytest.raises(HubwireError) as e:
        while True:
            await s.next()
            got += 1
    assert e.value.code == Code.deadline_exceeded
    assert got >= 1
    await cancel_observed(h, token)


@case
async def flow_control_bounded(h: Harness) -> None:
    # The client grants 64 items (its default window); a provider that
    # could send 100 000 stops at the window while nobody reads.
    token = h.token("flow")
    s = await h.client.server_stream("firehose", bp.Tagged(token=token, n=100_000), output=int)
    assert await s.next() == 0
    await asyncio.sleep(0.3)
    sent = await h.client.call("progress", token)
    assert 32 <= sent <= 65, f"producer ran ahead of the consumer: sent {sent} with window 64"
    for i in range(1, 192):
        assert await s.next() == i
    assert await h.client.call("progress", token) >= 191  # credit went back
    await s.cancel()


@case
async def flow_control_bounded_upstream(h: Harness) -> None:
    # A handler that does not read grants no credit beyond its window.
    cs = await h.client.client_stream("stall")
    sent = 0
    while sent < 10 * bp.PROVIDER_WINDOW:
        try:
            await asyncio.wait_for(asyncio.shield(cs.send(1)), 0.3) if not cs.threaded else await asyncio.wait_for(cs.send(1), 0.3)
        except (asyncio.TimeoutError, TimeoutError):
            break
        sent += 1
    assert sent == bp.PROVIDER_WINDOW, "the caller must stop at the callee's window"
    await cs.cancel()


@case
async def concurrent_1000(h: Harness) -> None:
    n = 1000 if not h.client.threaded else 200  # threads are heavier; the engine sees the same out-of-order answers

    async def one(i: int) -> int:
        return await h.client.call("delay_echo", [i, (i * 37) % 50], output=int)  # type: ignore[no-any-return]

    assert await asyncio.gather(*(one(i) for i in range(n))) == list(range(n))


@case
async def too_large(h: Harness) -> None:
    e = await expect_code(h.client.call_raw("echo", bytes(bp.PROVIDER_MAX_FRAME)), Code.too_large)
    assert "max_frame" in e.message
    ok = b"\x01" * (bp.PROVIDER_MAX_FRAME - 64)  # nothing was sent; the connection is fine
    assert await h.client.call_raw("echo", ok) == ok


@case
async def ping_and_identity(h: Harness) -> None:
    assert await h.client.ping() >= 0
    peer = h.client.peer
    assert (peer.peer.name, peer.peer.lang) == ("behaviour", "python")
    assert (peer.window, peer.max_frame) == (bp.PROVIDER_WINDOW, bp.PROVIDER_MAX_FRAME)
    methods = {m.name: m for m in peer.methods}
    assert methods["count"].kind == "server_stream"
    assert methods["echo"].input == {"contentMediaType": "application/octet-stream"}
    assert methods["divide"].errors is not None


@case
async def peer_crash_fails_in_flight(h: Harness) -> None:
    calls = [asyncio.ensure_future(h.client.call("sleep", bp.Tagged(token=h.token(f"crash{i}"), n=60_000))) for i in range(10)]
    s = await h.client.server_stream("slow_stream", bp.Tagged(token=h.token("crash-s"), n=10))
    assert await s.next() == 0
    await h.client.ping()  # every REQUEST has reached the provider
    await h.kill_peer()
    for c in calls:
        await expect_code(asyncio.wait_for(c, 10), Code.unavailable)
    with pytest.raises(HubwireError) as e:
        while True:
            await asyncio.wait_for(s.next(), 10)
    assert e.value.code == Code.unavailable
    await expect_code(h.client.call_raw("echo", b""), Code.unavailable)  # new calls fail at once, too
    assert h.client.is_closed


@case
async def stray_output_is_logged(h: Harness) -> None:
    for i in range(20):
        assert await h.client.call("shout", f"hi {i}") == f"HI {i}"
    assert await h.client.call_raw("echo", b"\x01\x02") == b"\x01\x02"
    if h.setup != "child":
        return  # in-process or a server, the garbage went to an output that is not the connection either
    for _ in range(500):
        if ("stderr", "noise hi 19") in h.logs:
            break
        await asyncio.sleep(0.01)
    assert ("stdout", "HW garbage hi 3") in h.logs, h.logs[:10]
    assert ("stderr", "noise hi 19") in h.logs
    assert ("stdout", "behaviour-provider starting") in h.logs


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("setup", SETUPS)
@pytest.mark.parametrize("run", CASES, ids=[c.__name__ for c in CASES])
async def test_behaviour(run: Case, setup: str, api: str) -> None:
    h = Harness(setup, api)
    try:
        await h.start()
        await asyncio.wait_for(run(h), 60)
    finally:
        await h.close()
