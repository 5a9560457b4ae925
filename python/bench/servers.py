"""The echo servers of the bench, one per baseline, each run as its own
process: ``python servers.py KIND [ADDRESS]``. Each prints ``ready`` on
stdout once it accepts, then echoes until its peer goes.

* ``socket ADDR``: the floor: a Unix socket, messages framed by a 4-byte
  little-endian length, echoed as they are;
* ``pipe``: ``multiprocessing.Pipe`` (the parent passes its end; see run.py);
* ``mpconn ADDR``: ``multiprocessing.connection.Listener`` on a Unix socket;
* ``grpc ADDR``: grpcio, generic handlers with bytes in and out (no protoc):
  ``/bench/Echo`` (unary) and ``/bench/Stream`` (bidi);
* ``hubwire [ADDR]``: the Python hubwire provider (``echo``, raw, answered
  inline on the loop): ADDR ``unix:...``/``tcp:...`` listens, none serves
  its parent (HUBWIRE_FD).
"""

from __future__ import annotations

import os
import socket
import struct
import sys
from typing import Any, Iterator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

_LEN = struct.Struct("<I")


def recv_exact(s: socket.socket, n: int) -> bytearray | None:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = s.recv_into(view[got:])
        if k == 0:
            return None
        got += k
    return buf


def socket_server(path: str) -> None:
    if os.path.exists(path):
        os.unlink(path)
    lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lst.bind(path)
    lst.listen(1)
    print("ready", flush=True)
    s, _ = lst.accept()
    while True:
        head = recv_exact(s, 4)
        if head is None:
            return
        (n,) = _LEN.unpack(head)
        body = recv_exact(s, n) if n else bytearray()
        if body is None:
            return
        s.sendmsg([head, body])


def mpconn_server(path: str) -> None:
    from multiprocessing.connection import Listener

    with Listener(path, family="AF_UNIX") as lst:
        print("ready", flush=True)
        with lst.accept() as c:
            try:
                while True:
                    c.send_bytes(c.recv_bytes())
            except EOFError:
                return


def grpc_server(address: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    import grpc

    def echo(req: bytes, ctx: Any) -> bytes:
        return req

    def stream(reqs: Iterator[bytes], ctx: Any) -> Iterator[bytes]:
        yield from reqs

    server = grpc.server(ThreadPoolExecutor(max_workers=4), options=[("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)])
    handler = grpc.method_handlers_generic_handler(
        "bench", {"Echo": grpc.unary_unary_rpc_method_handler(echo), "Stream": grpc.stream_stream_rpc_method_handler(stream)}
    )
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(address)
    server.start()
    print("ready", flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    server.stop(0)


def hubwire_server(address: str | None) -> None:
    import hubwire

    p = hubwire.Provider("bench-echo")

    @p.unary(inline=True)
    def echo(data: bytes) -> bytes:
        return data

    if address is None:
        p.serve_child()
        return

    async def serve() -> None:
        listener = await hubwire.transport.listen(address)
        print("ready", flush=True)
        await p.serve(listener)

    import asyncio

    asyncio.run(serve())


def pin() -> None:
    """Runs on the CPU the bench chose for servers (HUBWIRE_BENCH_CPU), set
    before any thread starts, so that every thread of the server inherits it."""
    cpu = os.environ.get("HUBWIRE_BENCH_CPU")
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(cpu)})


if __name__ == "__main__":
    pin()
    kind = sys.argv[1]
    arg = sys.argv[2] if len(sys.argv) > 2 else None
    if kind == "socket":
        socket_server(str(arg))
    elif kind == "mpconn":
        mpconn_server(str(arg))
    elif kind == "grpc":
        grpc_server(str(arg))
    elif kind == "hubwire":
        hubwire_server(arg)
    else:
        sys.exit(f"unknown server {kind}")
