"""The write queue's cap (``ConnectionOptions.write_queue``) over a real
Unix socket: a raw peer sends HELLO, then echo REQUESTs, and does not read.
The bytes queued for it stay within the cap and one answer, the provider
stops reading its new calls (so its writes stop at its full socket), and
then either it reads again and gets every answer, or it does not and is
closed with GOAWAY ``resource_exhausted`` after the stall timeout."""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

import hubwire
from hubwire import ConnectionOptions
from hubwire.engine.serve import Answer, Incoming
from hubwire.frame import HELLO, Response, decode, header, request_head
from hubwire.hello import MethodInfo, encode_hello

PAYLOAD = 16 * 1024
CAP = 64 * 1024
#: An echo answer's frame: header, code and message length, the payload.
ANSWER = 12 + 3 + PAYLOAD
#: Requests the raw peer offers at most: 32 MiB, far beyond what the sockets hold.
OFFERED = 2048
#: How long a write may make no progress before the peer's writes count as
#: stopped (a pause, not an assertion).
STOPPED = 0.3


class Echo:
    """Answers each unary call with its input, counting the calls."""

    def __init__(self) -> None:
        self.calls = 0

    def methods(self) -> list[MethodInfo]:
        return [MethodInfo("echo", "unary")]

    def call(self, incoming: Incoming) -> Answer:
        self.calls += 1
        return (incoming.codec, incoming.input)


async def setup(stall: float, sock_dir: str) -> tuple[hubwire.Connection, Echo, socket.socket]:
    """A provider with the cap on a fresh Unix socket in ``sock_dir``, and a raw peer that has sent its HELLO."""
    path = os.path.join(sock_dir, "wq.sock")
    listener = await hubwire.transport.listen(f"unix:{path}")
    loop = asyncio.get_running_loop()
    raw = socket.socket(socket.AF_UNIX)
    raw.setblocking(False)
    await loop.sock_connect(raw, path)
    body = encode_hello(ConnectionOptions(name="raw").hello(True))
    await loop.sock_sendall(raw, header(HELLO, 0, 0, 0, len(body)) + body)
    echo = Echo()
    t = await listener.accept()
    listener.close()
    conn = await hubwire.Connection.accept(t, ConnectionOptions(service=echo, write_queue=CAP, write_stall_timeout=stall))
    return conn, echo, raw


async def flood(raw: socket.socket) -> int:
    """Writes echo REQUESTs (ids 1, 3, …) until all are written or a write
    makes no progress for STOPPED; returns how many went out whole."""
    loop = asyncio.get_running_loop()
    payload = bytes(PAYLOAD)
    for sent in range(OFFERED):
        req = request_head(2 * sent + 1, 0, 0, 0, b"echo", PAYLOAD) + payload
        try:
            await asyncio.wait_for(loop.sock_sendall(raw, req), STOPPED)
        except asyncio.TimeoutError:
            return sent
    return OFFERED


def queued(conn: hubwire.Connection) -> int:
    core: Any = conn._core  # the engine's view: bytes the writer holds
    return int(core.writer.queued)


async def test_a_peer_that_does_not_read_is_held_back_then_answered(sock_dir: str) -> None:
    conn, echo, raw = await setup(3600.0, sock_dir)
    try:
        sent = await flood(raw)
        assert queued(conn) <= CAP + ANSWER, f"{queued(conn)} bytes queued for a peer that does not read (cap {CAP})"
        assert sent < OFFERED, "every request went out: nothing held the peer back"
        assert echo.calls < sent, f"the provider took all {sent} calls from a peer that does not read"
        # Now read: every request sent whole is answered, none lost.
        loop = asyncio.get_running_loop()
        got = b""
        frames = 0
        answered = 0
        while answered < sent:
            chunk = await asyncio.wait_for(loop.sock_recv(raw, 1 << 16), 60)
            assert chunk, f"closed after {answered} of {sent} answers"
            got += chunk
            while (d := decode(got)) is not None:
                f, n = d
                got = got[n:]
                frames += 1
                if frames == 1:
                    continue  # the HELLO
                assert isinstance(f, Response) and f.code == 0 and len(f.payload) == PAYLOAD, f
                answered += 1
        assert echo.calls == sent
    finally:
        raw.close()
        conn.close()


async def test_a_peer_that_never_reads_is_closed_with_resource_exhausted(sock_dir: str) -> None:
    # Longer than the flood takes to see its writes stop, so that it has
    # stopped writing when the provider closes.
    conn, _, raw = await setup(3 * STOPPED, sock_dir)
    try:
        await flood(raw)
        why = await asyncio.wait_for(conn.closed(), 60)
        assert "resource_exhausted" in why.message, why.message
        # The socket is closed: reading ends.
        loop = asyncio.get_running_loop()
        while True:
            try:
                chunk = await asyncio.wait_for(loop.sock_recv(raw, 1 << 16), 60)
            except ConnectionResetError:
                break
            if not chunk:
                break
    finally:
        raw.close()

