"""The blocking API: the same calls as :class:`hubwire.Connection`, from
plain threads, with no event loop in sight::

    import hubwire.blocking as hw

    with hw.connect("unix:/tmp/calc.sock") as conn:
        print(conn.call("add", [2, 3]))
        for n in conn.server_stream("count", 3):
            print(n)

Connections live on one background I/O thread (:mod:`hubwire._loop`); a
call hands its REQUEST to it and waits for the answer. A unary call takes
the short path: no task, no asyncio future, just the engine's call entry
and a lock the I/O thread releases when the RESPONSE (or the connection's
end) arrives. Every wait ends: at the call's deadline (``timeout=``), at
its answer, or when the connection is lost, which fails its calls at once.
Interrupting a waiting thread (Ctrl-C) cancels the call.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Generic, Iterator, Sequence, TypeVar, overload

from . import _loop, client
from . import connection as aconn
from .codec import Codec, codec_of
from .codes import Code
from .engine.calls import OutCall
from .engine.options import ConnectionOptions
from .engine.state import Core
from .errors import HubwireError
from .hello import Hello
from .stream import BidiStream as ABidiStream
from .stream import ClientStream as AClientStream
from .stream import ItemStream as AItemStream
from .transport.child import LogFn, default_log

T = TypeVar("T")


class _ThreadCall(OutCall):
    """A unary call waited for by a plain thread: the I/O thread releases
    ``done`` when the outcome is in."""

    __slots__ = ("done", "result")

    def __init__(self, method: str, codec: int, payload: Any) -> None:
        super().__init__(0, method, codec, payload)
        self.done = threading.Lock()
        self.done.acquire()
        self.result: Any = None

    def settle(self, code: Code, message: str, codec: int, payload: Any) -> None:
        self.result = (code, message, codec, payload)
        self.done.release()

    def fail(self, error: HubwireError) -> None:
        if self.result is None:
            self.result = error
            self.done.release()


class ItemStream(Generic[T]):
    """A stream's items for a plain thread: iterate it with ``for``. Leaving
    early (``break``, an exception) inside ``with`` cancels the call."""

    def __init__(self, stream: AItemStream[T], loop: asyncio.AbstractEventLoop) -> None:
        self._stream = stream
        self._loop = loop

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        try:
            return _loop.run(self._stream.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def cancel(self) -> None:
        """Abandons the call (CANCEL to the callee)."""
        self._loop.call_soon_threadsafe(self._stream.cancel)

    def __enter__(self) -> ItemStream[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._stream.ended:
            self.cancel()


class BidiStream(ItemStream[T]):
    """A bidirectional call for a plain thread: ``send``/``end`` inputs
    (from this or another thread), ``for`` over the outputs."""

    def __init__(self, stream: ABidiStream[Any], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(stream, loop)
        self._bidi = stream

    def send(self, item: Any) -> None:
        """Sends one input, waiting for credit."""
        _loop.run(self._bidi.send(item))

    def end(self) -> None:
        """No more inputs (END)."""
        self._loop.call_soon_threadsafe(self._bidi.end)


class ClientStream(Generic[T]):
    """A client-streaming call for a plain thread: ``send`` inputs, then ``finish``."""

    def __init__(self, cs: AClientStream[T], loop: asyncio.AbstractEventLoop) -> None:
        self._cs = cs
        self._loop = loop
        self._done = False

    def send(self, item: Any) -> None:
        """Sends one input, waiting for credit; fails once the call has ended."""
        _loop.run(self._cs.send(item))

    def finish(self) -> T:
        """Ends the inputs (END) and waits for the output."""
        self._done = True
        return _loop.run(self._cs.finish())

    def response(self) -> T:
        """Waits for the output without ending the inputs."""
        self._done = True
        return _loop.run(self._cs.response())

    def cancel(self) -> None:
        """Abandons the call (CANCEL to the callee)."""
        self._loop.call_soon_threadsafe(self._cs.cancel)

    def __enter__(self) -> ClientStream[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._done:
            self.cancel()


class Connection:
    """A connection for plain threads (any number of them at once); ``with``
    closes it on exit."""

    def __init__(self, conn: aconn.Connection) -> None:
        #: The asyncio connection underneath, living on the I/O thread.
        self.aio = conn
        self._core: Core = conn._core
        self._loop = self._core.loop

    @property
    def peer(self) -> Hello:
        """The peer's HELLO."""
        return self.aio.peer

    @property
    def is_closed(self) -> bool:
        """Whether the connection has ended."""
        return self.aio.is_closed

    def closed(self, timeout: float | None = None) -> HubwireError | None:
        """Waits (up to ``timeout`` s) until the connection ends; why, or None if it has not."""
        try:
            return asyncio.run_coroutine_threadsafe(self.aio.closed(), self._loop).result(timeout)
        except TimeoutError:
            return None

    def ping(self) -> float:
        """Round-trip time of a PING, in seconds."""
        return _loop.run(self.aio.ping())

    def close(self) -> None:
        """Closes now: calls in flight fail with ``unavailable``."""
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.aio.close)
        child = self.aio.child
        if child is not None:
            try:
                _loop.run(child.wait())
            except Exception:
                pass

    def drain(self, grace: float = 5.0) -> None:
        """GOAWAY, wait up to ``grace`` s for calls in flight, then close."""
        _loop.run(self.aio.drain(grace))

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- Calls ---------------------------------------------------------------

    def _unary(self, method: str, codec: Codec, payload: Any, timeout: float | None) -> tuple[Code, str, int, Any]:
        call = _ThreadCall(method, codec, payload)
        core = self._core
        self._loop.call_soon_threadsafe(core.begin, call, timeout)
        try:
            call.done.acquire()
        except BaseException:  # interrupted: cancel the call
            self._loop.call_soon_threadsafe(core.abandon, call, HubwireError(Code.cancelled, "the call was interrupted"))
            raise
        r = call.result
        if isinstance(r, HubwireError):
            raise r
        return r  # type: ignore[no-any-return]

    @overload
    def call(self, method: str, input: Any = None, *, output: type[T], errors: Any = ..., timeout: float | None = ..., codec: Codec | str | None = ...) -> T: ...
    @overload
    def call(self, method: str, input: Any = None, *, errors: Any = ..., timeout: float | None = ..., codec: Codec | str | None = ...) -> Any: ...

    def call(
        self, method: str, input: Any = None, *, output: Any = Any, errors: Any = Any, timeout: float | None = None, codec: Codec | str | None = None
    ) -> Any:
        """A unary call (see :meth:`hubwire.Connection.call`)."""
        c, payload = client._encode_input(input, codec_of(codec))
        return client._result(self._unary(method, c, payload, timeout), output, errors)

    def call_raw(self, method: str, data: bytes | bytearray | memoryview, *, timeout: float | None = None) -> bytes:
        """A unary call with raw bytes in and out."""
        return client._result(self._unary(method, Codec.raw, data, timeout), bytes, Any)  # type: ignore[no-any-return]

    def server_stream(
        self, method: str, input: Any = None, *, output: Any = Any, errors: Any = Any, timeout: float | None = None, codec: Codec | str | None = None
    ) -> ItemStream[Any]:
        """Calls a server-streaming method: ``for`` over the outputs."""

        async def start() -> AItemStream[Any]:
            return self.aio.server_stream(method, input, output=output, errors=errors, timeout=timeout, codec=codec)

        return ItemStream(_loop.run(start()), self._loop)

    def client_stream(
        self, method: str, *, input: Any = Any, output: Any = Any, errors: Any = Any, timeout: float | None = None, codec: Codec | str | None = None
    ) -> ClientStream[Any]:
        """Calls a client-streaming method: ``send`` inputs, then ``finish()``."""

        async def start() -> AClientStream[Any]:
            return self.aio.client_stream(method, input=input, output=output, errors=errors, timeout=timeout, codec=codec)

        return ClientStream(_loop.run(start()), self._loop)

    def bidi(
        self, method: str, *, input: Any = Any, output: Any = Any, errors: Any = Any, timeout: float | None = None, codec: Codec | str | None = None
    ) -> BidiStream[Any]:
        """Calls a bidirectional method: ``send``/``end`` inputs, ``for`` over outputs."""

        async def start() -> ABidiStream[Any]:
            return self.aio.bidi(method, input=input, output=output, errors=errors, timeout=timeout, codec=codec)

        return BidiStream(_loop.run(start()), self._loop)


def connect(address: str, options: ConnectionOptions | None = None) -> Connection:
    """Dials ``unix:/path`` or ``tcp:host:port`` (see :func:`hubwire.connect`)."""
    return Connection(_loop.run(aconn.connect(address, options)))


def spawn(
    argv: Sequence[str],
    options: ConnectionOptions | None = None,
    *,
    name: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    log: LogFn | None = default_log,
) -> Connection:
    """Starts a child provider and dials it (see :func:`hubwire.spawn`)."""
    return Connection(_loop.run(aconn.spawn(argv, options, name=name, env=env, cwd=cwd, log=log)))


def wrap(conn: aconn.Connection) -> Connection:
    """A blocking handle to an asyncio connection that lives on the I/O
    thread (opened with :func:`hubwire._loop.run`)."""
    return Connection(conn)
