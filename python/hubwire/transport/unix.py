"""Unix domain sockets (``SOCK_STREAM``): the path is the address."""

from __future__ import annotations

import asyncio
import os
import socket

from .sock import SocketListener, SocketTransport


async def connect(path: str) -> SocketTransport:
    """Dials the Unix socket at ``path``."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(s, path)
    except BaseException:
        s.close()
        raise
    return SocketTransport(s, f"unix:{path}")


def connect_blocking(path: str, timeout: float | None = None) -> SocketTransport:
    """Dials without an event loop (for the blocking API)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
    except BaseException:
        s.close()
        raise
    return SocketTransport(s, f"unix:{path}")


async def listen(path: str) -> SocketListener:
    """Listens on ``path``, replacing a stale socket file left there."""
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(128)
    return SocketListener(s, path, "unix")
