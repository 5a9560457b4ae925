"""A connection: one transport, one handshake, many calls both ways.

:class:`Connection` is the public handle to the engine's :class:`Core`:
open one with :meth:`Connection.dial` or :meth:`Connection.accept` (or
:func:`connect` an address, :func:`spawn` a child provider), call the
peer's methods, and offer ours with ``ConnectionOptions(service=...)``.
Everything here is asyncio; :mod:`hubwire.blocking` has the same calls
for plain threads.
"""

from __future__ import annotations

from typing import Any, Sequence, TypeVar, overload

from . import client
from .codec import Codec
from .engine.handshake import open_connection
from .engine.options import ConnectionOptions
from .engine.state import Core
from .errors import HubwireError
from .hello import Hello
from .stream import BidiStream, ClientStream, ItemStream
from .transport import Transport
from .transport import connect as connect_transport
from .transport.child import Child, LogFn, default_log
from .transport.child import spawn as spawn_child

T = TypeVar("T")


class Connection:
    """A live connection to a peer: call its methods, and serve ours to it.
    ``async with`` closes it on exit."""

    def __init__(self, core: Core) -> None:
        self._core = core
        #: The child process behind the connection, when :func:`spawn` made it.
        self.child: Child | None = None

    @classmethod
    def _wrap(cls, core: Core) -> Connection:
        conn = core.handle
        if conn is None:
            conn = core.handle = cls(core)
        return conn  # type: ignore[no-any-return]

    @classmethod
    async def dial(cls, transport: Transport, options: ConnectionOptions | None = None) -> Connection:
        """Opens the connection as the dialer (odd call ids): HELLOs both ways."""
        return cls._wrap(await open_connection(transport, options or ConnectionOptions(), True))

    @classmethod
    async def accept(cls, transport: Transport, options: ConnectionOptions | None = None) -> Connection:
        """Opens the connection as the acceptor (even call ids)."""
        return cls._wrap(await open_connection(transport, options or ConnectionOptions(), False))

    # ---- The connection ------------------------------------------------------

    @property
    def peer(self) -> Hello:
        """The peer's HELLO: its identity, limits and methods."""
        return self._core.peer

    @property
    def description(self) -> str:
        """Where the connection goes, for logs."""
        return self._core.transport.description

    @property
    def is_closed(self) -> bool:
        """Whether the connection has ended."""
        return self._core.error is not None

    @property
    def is_draining(self) -> bool:
        """Whether the peer sent GOAWAY: new calls belong elsewhere."""
        return self._core.peer_draining

    async def closed(self) -> HubwireError:
        """Waits until the connection ends; returns why."""
        return await self._core.closed

    async def ping(self) -> float:
        """Round-trip time of a PING, in seconds."""
        return await self._core.ping()

    def close(self) -> None:
        """Closes now: calls in flight either way fail with ``unavailable``,
        handlers are cancelled."""
        from .codes import Code

        self._core.die(HubwireError(Code.unavailable, "connection closed locally"))

    async def drain(self, grace: float = 5.0) -> None:
        """Sends GOAWAY ok (the peer starts no new calls), waits up to
        ``grace`` seconds for the calls in flight either way, then closes."""
        await self._core.drain(grace)

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
        if self.child is not None:
            try:
                await self.child.wait()
            except Exception:
                pass

    # ---- Calls -----------------------------------------------------------------

    @overload
    async def call(self, method: str, input: Any = None, *, output: type[T], errors: Any = ..., timeout: float | None = ..., codec: Codec | str | None = ...) -> T: ...
    @overload
    async def call(self, method: str, input: Any = None, *, errors: Any = ..., timeout: float | None = ..., codec: Codec | str | None = ...) -> Any: ...

    async def call(
        self, method: str, input: Any = None, *, output: Any = Any, errors: Any = Any, timeout: float | None = None, codec: Codec | str | None = None
    ) -> Any:
        """A unary call. ``input`` is encoded with ``codec`` (MessagePack
        unless set); the output is decoded (and validated) as ``output``; a
        declared failure is raised as ``Failure.of(type)`` of its value,
        decoded as ``errors``. ``timeout`` (seconds) is the deadline, sent
        to the callee and enforced here."""
        return await client.unary(self._core, method, input, codec, output, errors, timeout)

    async def call_raw(self, method: str, data: bytes | bytearray | memoryview, *, timeout: float | None = None) -> bytes:
        """A unary call with raw bytes in and out: no serialization at all."""
        return await client.unary_raw(self._core, method, data, timeout)

    def server_stream(
        self, method: str, input: Any = None, *, output: Any = Any, errors: Any = Any, timeout: float | None = None, codec: Codec | str | None = None
    ) -> ItemStream[Any]:
        """Calls a server-streaming method: one input, a stream of outputs
        (``async for``)."""
        return client.server_stream(self._core, method, input, codec, output, errors, timeout)

    def client_stream(
        self, method: str, *, input: Any = Any, output: Any = Any, errors: Any = Any, timeout: float | None = None, codec: Codec | str | None = None
    ) -> ClientStream[Any]:
        """Calls a client-streaming method: ``send`` inputs, then ``finish()``."""
        return client.client_stream(self._core, method, codec, input, output, errors, timeout)

    def bidi(
        self, method: str, *, input: Any = Any, output: Any = Any, errors: Any = Any, timeout: float | None = None, codec: Codec | str | None = None
    ) -> BidiStream[Any]:
        """Calls a bidirectional method: ``send``/``end`` inputs, ``async for`` outputs."""
        return client.bidi(self._core, method, codec, input, output, errors, timeout)


async def connect(address: str, options: ConnectionOptions | None = None) -> Connection:
    """Dials ``unix:/path`` or ``tcp:host:port`` and opens a connection."""
    return await Connection.dial(await connect_transport(address), options)


async def spawn(
    argv: Sequence[str],
    options: ConnectionOptions | None = None,
    *,
    name: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    log: LogFn | None = default_log,
) -> Connection:
    """Starts a child provider (socketpair on descriptor 3) and dials it.
    Its stdout and stderr lines go to ``log``; closing the connection ends
    the child's, which then exits."""
    child = await spawn_child(argv, name=name, env=env, cwd=cwd, log=log)
    try:
        conn = await Connection.dial(child.transport, options)
    except BaseException:
        child.kill()
        await child.wait()
        raise
    conn.child = child
    return conn
