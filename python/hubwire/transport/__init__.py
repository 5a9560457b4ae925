"""Transports move bytes and nothing else, behind one small interface:
:class:`Transport`. The engine reads and writes through it; how the bytes
travel (a socket, a socketpair to a child process, an in-memory pipe) is
the transport's business.

| file | what |
|---|---|
| ``sock`` | :class:`~hubwire.transport.sock.SocketTransport`, the one implementation over a socket, and :class:`Listener` |
| ``unix`` | Unix domain sockets (a path) |
| ``tcp`` | TCP (``host:port``, ``TCP_NODELAY``) |
| ``child`` | a child process on a socketpair, descriptor 3 (``spec/PROTOCOL.md`` §10) |
| ``memory`` | the in-memory twin, with socket semantics (bounded buffer, end of stream on close) |
"""

from __future__ import annotations

from .base import Buf, Listener, Transport

async def connect(address: str) -> Transport:
    """Dials ``unix:/path`` (or a path with a slash) or ``tcp:host:port``
    (or ``host:port``)."""
    from . import tcp, unix

    if address.startswith("unix:"):
        return await unix.connect(address[5:])
    if address.startswith("tcp:"):
        return await tcp.connect(address[4:])
    if "/" in address:
        return await unix.connect(address)
    return await tcp.connect(address)


async def listen(address: str) -> Listener:
    """Listens on ``unix:/path`` or ``tcp:host:port`` (as :func:`connect` reads them)."""
    from . import tcp, unix

    if address.startswith("unix:"):
        return await unix.listen(address[5:])
    if address.startswith("tcp:"):
        return await tcp.listen(address[4:])
    if "/" in address:
        return await unix.listen(address)
    return await tcp.listen(address)


__all__ = ["Transport", "Listener", "connect", "listen", "Buf"]
