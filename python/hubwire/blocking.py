"""The blocking API: the same calls as :class:`hubwire.Connection`, from
plain threads, with no event loop in sight::

    import hubwire.blocking as hw

    with hw.connect("unix:/tmp/calc.sock") as conn:
        print(conn.call("add", [2, 3]))
        for n in conn.server_stream("count", 3):
            print(n)

One implementation: a blocking connection is the asyncio engine on an
event loop of its own, and the loop is run by whichever thread is waiting
for it. A call made while no other thread is waiting runs the loop itself
until its answer is in (leader); calls made meanwhile by other threads hand
their work to that loop and sleep until their answer arrives or the leader
leaves, when one of them leads in turn (:class:`Driver`). So a single
caller pays no thread hand-off at all; and as long as any call waits, some
thread reads the connection, so a lost connection fails every waiting call
at once. An idle connection is read by nobody: what arrived meanwhile (a
GOAWAY, the end of the stream) is seen by the next call, which then fails
at once if it must. Every wait ends: at the call's deadline (``timeout=``),
at its answer, or when the connection is lost. Interrupting a waiting
thread (Ctrl-C) cancels its call (CANCEL to the peer).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, Callable, Generic, Iterator, Sequence, TypeVar, overload

from . import client
from . import connection as aconn
from .codec import Codec, codec_of
from .codes import Code
from .engine.options import ConnectionOptions
from .errors import HubwireError
from .hello import Hello
from .stream import BidiStream as ABidiStream
from .stream import ClientStream as AClientStream
from .stream import ItemStream as AItemStream
from .transport.child import LogFn, SyncChild, default_log, spawn_sync

T = TypeVar("T")


class _Wait:
    __slots__ = ("fut", "done")

    def __init__(self) -> None:
        self.fut: asyncio.Future[Any] | None = None
        self.done = False


class Driver:
    """Runs one event loop in whichever thread waits on it (leader/followers)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.loop = loop or asyncio.new_event_loop()
        self.cond = threading.Condition(threading.Lock())
        self.leading = False

    def run(self, start: Callable[[], Awaitable[T]]) -> T:
        """Calls ``start()`` on the loop and waits for the awaitable it returns."""
        if asyncio.events._get_running_loop() is not None:
            raise RuntimeError("a blocking hubwire call inside a running event loop: use the asyncio API there")
        w = _Wait()
        loop = self.loop

        def begin() -> None:
            fut = asyncio.ensure_future(start(), loop=loop)
            w.fut = fut
            fut.add_done_callback(lambda _: self._finished(w))

        with self.cond:
            lead = not self.leading
            if lead:
                self.leading = True
            else:
                loop.call_soon_threadsafe(begin)
        if lead:
            begin()
        else:
            try:
                with self.cond:
                    while not w.done and self.leading:
                        self.cond.wait()
                    lead = not w.done
                    if lead:
                        self.leading = True
            except BaseException:
                loop.call_soon_threadsafe(self._cancel, w)
                raise
        if lead:
            self._lead(w)
        assert w.fut is not None
        return w.fut.result()  # type: ignore[no-any-return]

    def _lead(self, w: _Wait) -> None:
        try:
            self._pump(w)
        except BaseException:
            # Interrupted (Ctrl-C): cancel the work, let its cancellation
            # through (CANCEL to the peer), then raise.
            if w.fut is not None and not w.fut.done():
                w.fut.cancel()
                self._pump(w)
            raise
        finally:
            with self.cond:
                self.leading = False
                self.cond.notify_all()

    def _pump(self, w: _Wait) -> None:
        """Runs the loop until ``w`` is done."""
        loop = self.loop
        run_once = getattr(loop, "_run_once", None)
        if run_once is None:  # not a BaseEventLoop: the public way
            while not w.done:
                loop.run_until_complete(asyncio.sleep(0) if w.fut is None else asyncio.wait([w.fut]))
            return
        # The loop's own step, as run_forever takes it, without run_forever's
        # setup and teardown on every call (~25 % of a blocking call's CPU):
        # this thread is the loop's only runner while it leads.
        # Done when the work's future is: its done-callbacks (which wake
        # followers) run on the next step, whoever takes it, which saves a
        # step per call.
        asyncio.events._set_running_loop(loop)
        try:
            while not w.done and (w.fut is None or not w.fut.done()):
                run_once()
        finally:
            asyncio.events._set_running_loop(None)

    def _finished(self, w: _Wait) -> None:
        with self.cond:
            w.done = True
            self.cond.notify_all()

    @staticmethod
    def _cancel(w: _Wait) -> None:
        if w.fut is not None:
            w.fut.cancel()


class ItemStream(Generic[T]):
    """A stream's items for a plain thread: iterate it with ``for``. Leaving
    early inside ``with`` (``break``, an exception) cancels the call."""

    def __init__(self, stream: AItemStream[T], driver: Driver) -> None:
        self._stream = stream
        self._driver = driver

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        end = _END
        item = self._driver.run(lambda: self._stream.next_or(end))
        if item is end:
            raise StopIteration
        return item  # type: ignore[no-any-return]

    def cancel(self) -> None:
        """Abandons the call (CANCEL to the callee)."""

        async def cancel() -> None:
            self._stream.cancel()

        self._driver.run(cancel)

    def __enter__(self) -> ItemStream[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._stream.ended:
            self.cancel()


_END = object()


class BidiStream(ItemStream[T]):
    """A bidirectional call for plain threads: ``send``/``end`` inputs (from
    this or another thread), ``for`` over the outputs."""

    def __init__(self, stream: ABidiStream[T], driver: Driver) -> None:
        super().__init__(stream, driver)
        self._bidi = stream

    def send(self, item: Any) -> None:
        """Sends one input, waiting for credit."""
        self._driver.run(lambda: self._bidi.send(item))

    def end(self) -> None:
        """No more inputs (END)."""

        async def end() -> None:
            self._bidi.end()

        self._driver.run(end)


class ClientStream(Generic[T]):
    """A client-streaming call for a plain thread: ``send`` inputs, then ``finish``."""

    def __init__(self, cs: AClientStream[T], driver: Driver) -> None:
        self._cs = cs
        self._driver = driver
        self._done = False

    def send(self, item: Any) -> None:
        """Sends one input, waiting for credit; fails once the call has ended."""
        self._driver.run(lambda: self._cs.send(item))

    def finish(self) -> T:
        """Ends the inputs (END) and waits for the output."""
        self._done = True
        return self._driver.run(self._cs.finish)

    def response(self) -> T:
        """Waits for the output without ending the inputs."""
        self._done = True
        return self._driver.run(self._cs.response)

    def cancel(self) -> None:
        """Abandons the call (CANCEL to the callee)."""

        async def cancel() -> None:
            self._cs.cancel()

        self._driver.run(cancel)

    def __enter__(self) -> ClientStream[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._done:
            self.cancel()


class Connection:
    """A connection for plain threads (any number of them at once); ``with``
    closes it on exit."""

    def __init__(self, conn: aconn.Connection, driver: Driver) -> None:
        #: The asyncio connection underneath (its loop is run by the calling threads).
        self.aio = conn
        self._driver = driver
        self._core = conn._core
        #: The child process behind the connection, when :func:`spawn` made it.
        self.child: SyncChild | None = None

    @property
    def peer(self) -> Hello:
        """The peer's HELLO."""
        return self.aio.peer

    @property
    def is_closed(self) -> bool:
        """Whether the connection has ended (as far as it was read)."""
        return self.aio.is_closed

    def run(self, start: Callable[[], Awaitable[T]]) -> T:
        """Runs ``start()`` on the connection's loop and waits for its result:
        for anything the asyncio connection (:attr:`aio`) can do."""
        return self._driver.run(start)

    def ping(self) -> float:
        """Round-trip time of a PING, in seconds."""
        return self._driver.run(self.aio.ping)

    def close(self) -> None:
        """Closes now: calls in flight fail with ``unavailable``."""

        async def close() -> None:
            self.aio.close()

        if not self._driver.loop.is_closed():
            self._driver.run(close)
        if self.child is not None:
            self.child.wait()

    def drain(self, grace: float = 5.0) -> None:
        """GOAWAY, wait up to ``grace`` s for calls in flight, then close."""
        self._driver.run(lambda: self.aio.drain(grace))

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- Calls ---------------------------------------------------------------

    def _unary(self, method: str, codec: Codec, payload: Any, timeout: float | None) -> tuple[Code, str, int, Any]:
        core = self._core

        def start() -> asyncio.Future[Any]:
            call = client.OnceCall(client.UNARY, method, codec, payload, core.loop.create_future())
            core.begin(call, timeout)
            fut = call.future

            def interrupted(f: asyncio.Future[Any]) -> None:
                if f.cancelled():
                    core.abandon(call, HubwireError(Code.cancelled, "the call was interrupted"))

            fut.add_done_callback(interrupted)
            return fut

        r = self._driver.run(start)
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

        return ItemStream(self._driver.run(start), self._driver)

    def client_stream(
        self, method: str, *, input: Any = Any, output: Any = Any, errors: Any = Any, timeout: float | None = None, codec: Codec | str | None = None
    ) -> ClientStream[Any]:
        """Calls a client-streaming method: ``send`` inputs, then ``finish()``."""

        async def start() -> AClientStream[Any]:
            return self.aio.client_stream(method, input=input, output=output, errors=errors, timeout=timeout, codec=codec)

        return ClientStream(self._driver.run(start), self._driver)

    def bidi(
        self, method: str, *, input: Any = Any, output: Any = Any, errors: Any = Any, timeout: float | None = None, codec: Codec | str | None = None
    ) -> BidiStream[Any]:
        """Calls a bidirectional method: ``send``/``end`` inputs, ``for`` over outputs."""

        async def start() -> ABidiStream[Any]:
            return self.aio.bidi(method, input=input, output=output, errors=errors, timeout=timeout, codec=codec)

        return BidiStream(self._driver.run(start), self._driver)


def open(start: Callable[[], Awaitable[aconn.Connection]]) -> Connection:
    """A blocking connection opened by ``start()`` (an asyncio opener, such
    as ``lambda: hubwire.Connection.dial(transport)``) on a new loop."""
    driver = Driver()
    return Connection(driver.run(start), driver)


def connect(address: str, options: ConnectionOptions | None = None) -> Connection:
    """Dials ``unix:/path`` or ``tcp:host:port`` (see :func:`hubwire.connect`)."""
    return open(lambda: aconn.connect(address, options))


def spawn(
    argv: Sequence[str],
    options: ConnectionOptions | None = None,
    *,
    name: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    log: LogFn | None = default_log,
) -> Connection:
    """Starts a child provider and dials it (see :func:`hubwire.spawn`). The
    child's output is read by two plain threads, so a chatty child never
    blocks while this side is idle."""
    child = spawn_sync(argv, name=name, env=env, cwd=cwd, log=log)
    try:
        conn = open(lambda: aconn.Connection.dial(child.transport, options))
    except BaseException:
        child.kill()
        child.wait()
        raise
    conn.child = child
    return conn
