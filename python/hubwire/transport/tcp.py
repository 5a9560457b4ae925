"""TCP: ``host:port`` is the address; ``TCP_NODELAY`` on every connection
(small frames must not wait for Nagle)."""

from __future__ import annotations

import asyncio
import socket

from .sock import SocketListener, SocketTransport


def split(address: str) -> tuple[str, int]:
    """``host:port`` (or ``[v6]:port``) as a pair."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected host:port, got {address!r}")
    return host.strip("[]"), int(port)


async def connect(address: str) -> SocketTransport:
    """Dials ``host:port``."""
    host, port = split(address)
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    family, _, _, _, addr = infos[0]
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        await loop.sock_connect(s, addr)
    except BaseException:
        s.close()
        raise
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return SocketTransport(s, f"tcp:{address}")


def connect_blocking(address: str, timeout: float | None = None) -> SocketTransport:
    """Dials without an event loop (for the blocking API)."""
    host, port = split(address)
    s = socket.create_connection((host, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return SocketTransport(s, f"tcp:{address}")


async def listen(address: str) -> SocketListener:
    """Listens on ``host:port`` (port 0: the OS picks; see ``Listener.address``)."""
    host, port = split(address)
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, addr = infos[0]
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(addr)
    s.listen(128)
    h, p = s.getsockname()[:2]
    return SocketListener(s, f"{h}:{p}", "tcp", nodelay=True)
