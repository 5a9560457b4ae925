"""Test support for provider authors: a client connected to a service in
memory, in one line::

    async with hubwire.testing.pair(provider) as client:
        assert await client.call("add", [2, 3]) == 5
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .connection import Connection
from .engine.options import ConnectionOptions
from .transport import memory

if TYPE_CHECKING:
    from . import blocking


class Pair:
    """Two ends of one in-memory connection: ``client`` (the dialer) calls
    the service that ``server`` (the acceptor) offers. ``async with``
    yields the client and closes both on exit."""

    def __init__(self, service: Any, client: ConnectionOptions | None = None, server: ConnectionOptions | None = None) -> None:
        self._service = service
        self._client_options = client or ConnectionOptions(name="client")
        self._server_options = server
        #: The dialer, calling the service (set once opened).
        self.client: Connection
        #: The acceptor, serving it.
        self.server: Connection

    async def open(self) -> Pair:
        """Opens both ends (the handshakes run concurrently)."""
        import asyncio

        from .provider import Provider

        if isinstance(self._service, Provider):
            server_options = self._service.options(self._server_options)
        else:
            server_options = replace(self._server_options or ConnectionOptions(name="server"), service=self._service)
        a, b = memory.pair()
        self.client, self.server = await asyncio.gather(Connection.dial(a, self._client_options), Connection.accept(b, server_options))
        return self

    def close(self) -> None:
        """Closes both ends."""
        self.client.close()
        self.server.close()

    async def __aenter__(self) -> Connection:
        await self.open()
        return self.client

    async def __aexit__(self, *exc: object) -> None:
        self.close()


def pair(service: Any, client: ConnectionOptions | None = None, server: ConnectionOptions | None = None) -> Pair:
    """A client connected to ``service`` (a ``Provider`` or any ``Service``)
    over the in-memory transport: ``async with pair(p) as client: ...``,
    or ``p = await pair(service).open()`` for both ends."""
    return Pair(service, client, server)


def blocking_pair(service: Any, client: ConnectionOptions | None = None, server: ConnectionOptions | None = None) -> tuple[blocking.Connection, Pair]:
    """Like :func:`pair`, for the blocking API: a blocking client connected
    to ``service`` in memory (both ends on the client's loop, so the
    service runs while the client waits), and the pair (to close the
    server's end, run ``client.run`` with a coroutine that does)."""
    from . import blocking

    p = Pair(service, client, server)

    async def open() -> Connection:
        await p.open()
        return p.client

    return blocking.open(open), p
