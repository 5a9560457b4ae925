"""What only the asyncio API has, or what the behaviour suite does not
reach: cancelling the calling task, ``asyncio.timeout()``, dropping a
stream, draining, the peer's ``max_calls``, sync handlers beside the loop,
the handshake's deadline, and bad bytes from a peer."""

from __future__ import annotations

import asyncio
import gc
import os
import socket

import behaviour_provider as bp
import pytest

import hubwire
from hubwire import Code, ConnectionOptions, HubwireError, testing
from hubwire.frame import Goaway, decode
from hubwire.transport import memory


async def observed(client: hubwire.Connection, token: str) -> None:
    for _ in range(1000):
        if await client.call("was_cancelled", token) is True:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"cancellation of {token} never observed")


async def test_cancelling_the_task_cancels_the_call() -> None:
    async with testing.pair(bp.provider(), server=bp.options()) as c:
        task = asyncio.ensure_future(c.call("sleep", bp.Tagged(token="t1", n=60_000)))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await observed(c, "t1")
        assert await c.call("add", [1, 2]) == 3


async def test_asyncio_timeout_is_a_deadline() -> None:
    async with testing.pair(bp.provider(), server=bp.options()) as c:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await c.call("sleep", bp.Tagged(token="t2", n=60_000))
        await observed(c, "t2")


async def test_leaving_or_dropping_a_stream_cancels_it() -> None:
    async with testing.pair(bp.provider(), server=bp.options()) as c:
        async with c.server_stream("slow_stream", bp.Tagged(token="s1", n=5)) as s:
            async for i in s:
                if i == 2:
                    break
        await observed(c, "s1")
        s2 = c.server_stream("slow_stream", bp.Tagged(token="s2", n=5))
        assert await s2.next() == 0
        del s2
        gc.collect()
        await observed(c, "s2")


async def test_drain_finishes_calls_in_flight_and_refuses_new_ones() -> None:
    p = await testing.pair(bp.provider(), server=bp.options()).open()
    slow = asyncio.ensure_future(p.client.call("delay_echo", [7, 200]))
    await asyncio.sleep(0.05)
    drain = asyncio.ensure_future(p.server.drain(5))
    await asyncio.sleep(0.05)
    assert p.client.is_draining
    with pytest.raises(HubwireError) as e:
        await p.client.call("add", [1, 1])
    assert e.value.code == Code.unavailable
    assert await slow == 7
    await drain
    assert p.server.is_closed
    assert (await p.client.closed()).code == Code.unavailable


async def test_calls_beyond_the_peers_max_calls_queue_here() -> None:
    server = ConnectionOptions(name="behaviour", max_calls=2)
    async with testing.pair(bp.provider(), server=server) as c:
        assert c.peer.max_calls == 2
        got = await asyncio.gather(*(c.call("delay_echo", [i, 10]) for i in range(20)))
        assert got == list(range(20))


async def test_a_sync_handler_does_not_block_the_connection() -> None:
    async with testing.pair(bp.provider(), server=bp.options()) as c:
        order: list[str] = []

        async def slow() -> None:
            await c.call("sleep_in_thread", bp.Tagged(token="th", n=300))
            order.append("thread")

        async def fast() -> None:
            await asyncio.sleep(0.05)
            assert await c.call_raw("echo", b"x") == b"x"
            order.append("echo")

        await asyncio.gather(slow(), fast())
        assert order == ["echo", "thread"]


async def test_no_hello_is_a_handshake_deadline() -> None:
    a, _b = memory.pair()
    with pytest.raises(HubwireError) as e:
        await hubwire.Connection.dial(a, ConnectionOptions(handshake_timeout=0.1))
    assert e.value.code == Code.deadline_exceeded


async def test_bad_bytes_end_that_connection_only(sock_dir: str) -> None:
    path = os.path.join(sock_dir, "p.sock")
    listener = await hubwire.transport.listen(f"unix:{path}")
    server = asyncio.ensure_future(bp.provider().serve(listener, bp.options()))
    try:
        good = await hubwire.connect(f"unix:{path}")
        loop = asyncio.get_running_loop()
        for bad, code in [(b"hello world\n", Code.unsupported_version), (bytes.fromhex("010000010102000001000000"), Code.too_large)]:
            s = socket.socket(socket.AF_UNIX)
            s.setblocking(False)
            await loop.sock_connect(s, path)
            await loop.sock_sendall(s, bad)
            got = b""
            while chunk := await asyncio.wait_for(loop.sock_recv(s, 65536), 10):
                got += chunk
            s.close()
            hello = decode(got)
            assert hello is not None
            goaway = decode(got[hello[1]:])
            assert goaway is not None and isinstance(goaway[0], Goaway)
            assert goaway[0].code == code
        assert await good.call("add", [2, 2]) == 4  # the other connection is served on
        good.close()
    finally:
        server.cancel()


async def test_a_hello_over_a_small_max_frame_is_read_up_to_one_mib() -> None:
    """PROTOCOL.md §4.1.2: the first frame is read with max(max_frame, 1 MiB)."""
    p = hubwire.Provider("many")
    for i in range(1000):

        async def echo(x: int) -> int:
            return x

        p.unary(name=f"method_{i}", doc="padding so that the HELLO grows beyond 64 KiB, " * 2)(echo)
    async with testing.pair(p, client=ConnectionOptions(max_frame=4096)) as c:
        assert len(c.peer.methods) == 1000
        assert await c.call("method_999", 7) == 7


async def test_a_fatal_goaway_cuts_off_a_peer_that_never_stops_writing() -> None:
    """PROTOCOL.md §7.3, over TCP, as a client whose application holds its
    connection: a raw provider sends a header announcing a body over
    max_frame and never stops writing. It still reads the GOAWAY too_large,
    then end of stream, and its writes fail soon after (the client discards
    input for a bounded time, then closes). Bounds are generous."""
    import threading
    import time

    from hubwire.frame import HELLO, header
    from hubwire.hello import encode_hello

    bound = 5.0
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    seen: dict[str, object] = {}

    def raw_provider() -> None:
        s, _ = listener.accept()
        listener.close()
        start = time.monotonic()
        body = encode_hello(ConnectionOptions().hello(False))
        s.sendall(header(HELLO, 0, 0, 0, len(body)) + body)

        s.settimeout(bound)

        def flood() -> None:
            chunk = (16 * 1024 * 1024 + 1).to_bytes(4, "little") + bytes([1, 2, 0, 0]) + (2).to_bytes(4, "little")
            try:
                while time.monotonic() - start < bound:
                    s.sendall(chunk)
                    chunk = b"a" * 65536
            except socket.timeout:
                pass
            except OSError:
                seen["write_failed"] = time.monotonic() - start

        writer = threading.Thread(target=flood)
        writer.start()
        got = b""
        try:
            while time.monotonic() - start < bound:
                data = s.recv(65536)
                if not data:
                    break
                got += data
            seen["read_ended"] = time.monotonic() - start
        except socket.timeout:
            pass
        except OSError:
            seen["read_ended"] = time.monotonic() - start
        writer.join()
        s.close()
        seen["got"] = got

    t = threading.Thread(target=raw_provider)
    t.start()
    client = await hubwire.connect(f"tcp:127.0.0.1:{port}")
    await asyncio.get_running_loop().run_in_executor(None, t.join)
    got = seen["got"]
    assert isinstance(got, bytes)
    hello = decode(got)
    assert hello is not None
    goaway = decode(got[hello[1]:])
    assert goaway is not None and isinstance(goaway[0], Goaway) and goaway[0].code == Code.too_large
    assert "read_ended" in seen, seen.keys()
    assert "write_failed" in seen, seen.keys()
    assert client.is_closed
    client.close()
