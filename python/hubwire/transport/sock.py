"""The one transport over a socket (Unix, TCP, or a socketpair to a child
process): a non-blocking socket registered with the loop; reads with
``recv_into`` (into the reader's buffer, no copy), writes with one
``sendmsg`` per batch (headers and payloads as separate segments, no copy)."""

from __future__ import annotations

import asyncio
import socket
from typing import Callable, Sequence

from .base import Buf, Listener, Transport

#: sendmsg takes at most IOV_MAX (1024 on Linux) segments per call.
_IOV_MAX = 1024


class SocketTransport(Transport):
    """A connected stream socket."""

    def __init__(self, sock: socket.socket, description: str) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.fd = sock.fileno()
        self.description = description
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writable: Callable[[], None] | None = None
        self._closed = False
        self._on_readable: Callable[[], None] | None = None

    def attach(self, loop: asyncio.AbstractEventLoop, on_readable: Callable[[], None]) -> None:
        self._loop = loop
        self._on_readable = on_readable
        loop.add_reader(self.fd, on_readable)

    def pause_reading(self) -> None:
        if self._loop is not None and not self._closed:
            self._loop.remove_reader(self.fd)

    def resume_reading(self) -> None:
        if self._loop is not None and not self._closed and self._on_readable is not None:
            self._loop.add_reader(self.fd, self._on_readable)

    def recv_into(self, buf: memoryview) -> int:
        return self.sock.recv_into(buf)

    def send(self, parts: Sequence[Buf]) -> int:
        if len(parts) == 1:
            return self.sock.send(parts[0])
        return self.sock.sendmsg(parts[:_IOV_MAX])

    def when_writable(self, callback: Callable[[], None]) -> None:
        assert self._loop is not None, "attach() first"
        self._writable = callback
        self._loop.add_writer(self.fd, self._on_writable)

    def _on_writable(self) -> None:
        if self._loop is not None:
            self._loop.remove_writer(self.fd)
        cb, self._writable = self._writable, None
        if cb is not None:
            cb()

    def linger(self, seconds: float, max_bytes: int) -> None:
        loop = self._loop
        if self._closed or loop is None or loop.is_closed():
            return self.close()
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            return self.close()
        scratch = bytearray(64 * 1024)
        left = max_bytes
        timer = loop.call_later(seconds, self.close)

        def discard() -> None:
            nonlocal left
            try:
                n = self.sock.recv_into(scratch)
            except BlockingIOError:
                return
            except OSError:
                n = 0
            left -= n
            if n == 0 or left <= 0:
                timer.cancel()
                self.close()

        loop.remove_writer(self.fd)
        loop.add_reader(self.fd, discard)  # instead of the engine's reader

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self.fd)
            self._loop.remove_writer(self.fd)
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class SocketListener(Listener):
    """A listening socket; each accepted connection is a :class:`SocketTransport`."""

    def __init__(self, sock: socket.socket, address: str, label: str, nodelay: bool = False) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.address = address
        self._label = label
        self._nodelay = nodelay

    async def accept(self) -> Transport:
        conn, peer = await asyncio.get_running_loop().sock_accept(self.sock)
        if self._nodelay:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        who = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else self.address
        return SocketTransport(conn, f"{self._label}:{who}")

    def close(self) -> None:
        self.sock.close()
