"""Offering methods: a :class:`Provider` registers handlers by name with a
decorator per method, then serves them on a listener, one transport, or
to the parent process. It is a :class:`~hubwire.engine.serve.Service`:
the engine hands it each call, and it finds the handler, decodes (and
validates) the input, runs the handler and encodes its output.

Handlers may be:

* ``async def`` (a coroutine, or an async generator for the streaming-out
  kinds): it runs as a task on the connection's loop and is cancelled
  (``CancelledError``) when the caller cancels or the deadline passes;
* plain ``def`` (a function, or a generator): it runs in the provider's
  thread pool, so it never blocks the connection; it learns of
  cancellation from its :class:`~hubwire.context.CallContext`;
* ``def`` with ``inline=True``: it runs on the loop itself, answered in
  the same pass as its REQUEST was read (for handlers that never block).

Types come from the annotations: the first parameter is the input (for the
streaming-in kinds an ``ItemStream[T]``/``AsyncIterator[T]``, or an
``Iterator[T]`` in a thread), the return annotation the output (for the
streaming-out kinds an ``AsyncIterator[T]``/``Iterator[T]``); ``bytes``
means raw bytes, no encoding. An optional second parameter receives the
:class:`~hubwire.context.CallContext`. Raise :class:`~hubwire.errors.Failure`
for a declared failure; any other exception is a ``defect`` of that call.
"""

from __future__ import annotations

import asyncio
import collections.abc as cabc
import inspect
import typing
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable, Iterator, TypeVar, overload

from .codec import Codec, decode_as, encode, is_raw, schema_of
from .codes import Code
from .kind import Kind, streams_in, streams_out
from .context import CallContext
from .engine.options import ConnectionOptions
from .engine.serve import Answer, Incoming
from .errors import Failure, HubwireError
from .hello import KIND_NAMES, MethodInfo
from .stream import ItemStream
from .transport import Listener, Transport

F = TypeVar("F", bound=Callable[..., Any])
_STREAMS = (ItemStream, cabc.AsyncIterator, cabc.AsyncIterable, cabc.AsyncGenerator, cabc.Iterator, cabc.Iterable, cabc.Generator)


def _element(t: Any) -> Any:
    """``T`` of ``AsyncIterator[T]``, ``Iterator[T]``, ``ItemStream[T]``, ...; else ``Any``."""
    origin = typing.get_origin(t)
    if origin in _STREAMS or t in _STREAMS:
        args = typing.get_args(t)
        return args[0] if args else Any
    return Any


def _defect(e: BaseException) -> HubwireError:
    return HubwireError(Code.defect, f"handler raised {type(e).__name__}: {e}")


def _out_codec(codec: int) -> Codec:
    """Answers travel in the request's codec (MessagePack when it was raw)."""
    return Codec.msgpack if codec == Codec.raw else Codec(codec)


def failure_error(f: Failure[Any], codec: int) -> HubwireError:
    """A declared failure as it goes on the wire: its value encoded in the call's codec."""
    c = _out_codec(codec)
    try:
        data = encode(f.value, c)
    except Exception as e:
        return HubwireError(Code.defect, f"failure value could not be encoded: {e}")
    err = HubwireError(Code.failure, f.message)
    err.detail = (c, data)
    return err


class Method:
    """One registered method: its handler and how to call it."""

    def __init__(self, kind: int, fn: Callable[..., Any], name: str, input: Any, output: Any, errors: Any, doc: str | None, inline: bool) -> None:
        self.kind = kind
        self.fn = fn
        self.name = name
        params = [p for p in inspect.signature(fn).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.nargs = min(len(params), 2)
        try:
            hints = typing.get_type_hints(fn)
        except Exception:
            hints = {}
        first = hints.get(params[0].name, Any) if params else Any
        ret = hints.get("return", Any)
        if input is None:
            input = _element(first) if Kind(kind).streams_in else first
        if output is None:
            output = _element(ret) if Kind(kind).streams_out else ret
        self.input = input
        self.output = output
        self.raw_in = is_raw(input)
        self.raw_out = is_raw(output)
        if inspect.isasyncgenfunction(fn) or inspect.iscoroutinefunction(fn):
            self.style = "async"
        elif inline:
            self.style = "inline"
        else:
            self.style = "thread"
        if Kind(kind).streams_out and not (inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn)):
            raise TypeError(f"{name}: a {KIND_NAMES[kind]} handler must be a generator (yield its outputs)")
        summary = doc if doc is not None else (inspect.getdoc(fn) or "").split("\n", 1)[0] or None
        self.info = MethodInfo(name, KIND_NAMES[kind], schema_of(input), schema_of(output), schema_of(errors) if errors is not None else None, summary)

    def decode_input(self, codec: int, payload: Any) -> Any:
        """The input, decoded and validated; ``invalid_argument`` if it does not fit."""
        if self.raw_in:
            return payload if type(payload) is bytes else bytes(payload)
        return decode_as(payload, codec, self.input, Code.invalid_argument, f"{self.name} input")

    def encode_output(self, codec: int, value: Any) -> tuple[int, Any]:
        """An output (or item) as it goes on the wire; ``defect`` if it cannot be encoded."""
        if self.raw_out:
            if isinstance(value, (bytes, bytearray, memoryview)):
                return Codec.raw, value
            raise HubwireError(Code.defect, f"{self.name}: a raw method must produce bytes, got {type(value).__name__}")
        c = _out_codec(codec)
        try:
            return c, encode(value, c)
        except Exception as e:
            raise HubwireError(Code.defect, f"{self.name}: output could not be encoded: {e}") from None


class _Items(Iterator[Any]):
    """A stream's items for a handler running in a thread: each ``next``
    waits on the connection's loop."""

    def __init__(self, stream: ItemStream[Any], loop: asyncio.AbstractEventLoop) -> None:
        self._stream = stream
        self._loop = loop

    def __next__(self) -> Any:
        try:
            return asyncio.run_coroutine_threadsafe(self._stream.__anext__(), self._loop).result()
        except StopAsyncIteration:
            raise StopIteration from None


class Provider:
    """A set of methods under a name; a ``Service`` for connections."""

    def __init__(self, name: str, *, max_threads: int = 32) -> None:
        #: The provider's name, sent in HELLO.
        self.name = name
        self.methods: dict[str, Method] = {}
        self._max_threads = max_threads
        self._executor: ThreadPoolExecutor | None = None

    # ---- Registering ---------------------------------------------------------

    def _register(self, kind: Kind, fn: Any, name: str | None, input: Any, output: Any, errors: Any, doc: str | None, inline: bool) -> Any:
        def add(f: F) -> F:
            n = name or f.__name__
            if not 1 <= len(n.encode("utf-8")) <= 255:
                raise ValueError(f"method name must be 1-255 bytes: {n!r}")
            self.methods[n] = Method(kind, f, n, input, output, errors, doc, inline)
            return f

        return add(fn) if fn is not None else add

    @overload
    def unary(self, fn: F) -> F: ...
    @overload
    def unary(self, *, name: str | None = ..., input: Any = ..., output: Any = ..., errors: Any = ..., doc: str | None = ..., inline: bool = ...) -> Callable[[F], F]: ...

    def unary(self, fn: Any = None, *, name: str | None = None, input: Any = None, output: Any = None, errors: Any = None, doc: str | None = None, inline: bool = False) -> Any:
        """Registers a unary method: ``handler(input[, ctx]) -> output``."""
        return self._register(Kind.unary, fn, name, input, output, errors, doc, inline)

    @overload
    def server_stream(self, fn: F) -> F: ...
    @overload
    def server_stream(self, *, name: str | None = ..., input: Any = ..., output: Any = ..., errors: Any = ..., doc: str | None = ...) -> Callable[[F], F]: ...

    def server_stream(self, fn: Any = None, *, name: str | None = None, input: Any = None, output: Any = None, errors: Any = None, doc: str | None = None) -> Any:
        """Registers a server-streaming method: a generator ``handler(input[, ctx])`` yielding outputs."""
        return self._register(Kind.server_stream, fn, name, input, output, errors, doc, False)

    @overload
    def client_stream(self, fn: F) -> F: ...
    @overload
    def client_stream(self, *, name: str | None = ..., input: Any = ..., output: Any = ..., errors: Any = ..., doc: str | None = ...) -> Callable[[F], F]: ...

    def client_stream(self, fn: Any = None, *, name: str | None = None, input: Any = None, output: Any = None, errors: Any = None, doc: str | None = None) -> Any:
        """Registers a client-streaming method: ``handler(items[, ctx]) -> output``."""
        return self._register(Kind.client_stream, fn, name, input, output, errors, doc, False)

    @overload
    def bidi(self, fn: F) -> F: ...
    @overload
    def bidi(self, *, name: str | None = ..., input: Any = ..., output: Any = ..., errors: Any = ..., doc: str | None = ...) -> Callable[[F], F]: ...

    def bidi(self, fn: Any = None, *, name: str | None = None, input: Any = None, output: Any = None, errors: Any = None, doc: str | None = None) -> Any:
        """Registers a bidirectional method: a generator ``handler(items[, ctx])`` yielding outputs."""
        return self._register(Kind.bidi, fn, name, input, output, errors, doc, False)

    # ---- The Service -----------------------------------------------------------

    def methods_info(self) -> list[MethodInfo]:
        """The methods as HELLO lists them."""
        return [m.info for m in self.methods.values()]

    def call(self, inc: Incoming) -> Answer | Awaitable[Answer]:
        """Serves one call (the ``Service`` seam)."""
        m = self.methods.get(inc.method)
        if m is None:
            raise HubwireError(Code.unknown_method, f"unknown method {inc.method!r}; offered: {sorted(self.methods)}")
        if m.kind != inc.kind:
            raise HubwireError(Code.invalid_argument, f"method {inc.method!r} is {KIND_NAMES[m.kind]}, called as {KIND_NAMES[inc.kind]}")
        ctx = inc.context
        if streams_in(m.kind):
            assert inc.items is not None
            stream: ItemStream[Any] = ItemStream(inc.items, m.input, Code.invalid_argument)
            arg: Any = stream if m.style == "async" else _Items(stream, asyncio.get_running_loop())
        else:
            arg = m.decode_input(inc.codec, inc.input)
        args = (arg, ctx)[: m.nargs]
        if streams_out(m.kind):
            return self._stream_out(m, inc, args)
        if m.style == "inline":
            try:
                return m.encode_output(inc.codec, m.fn(*args))
            except Failure as f:
                raise failure_error(f, inc.codec) from None
            except HubwireError:
                raise
            except Exception as e:
                raise _defect(e) from None
        return self._unary(m, inc, args)

    async def _unary(self, m: Method, inc: Incoming, args: tuple[Any, ...]) -> Answer:
        try:
            if m.style == "async":
                out = await m.fn(*args)
            else:
                out = await asyncio.get_running_loop().run_in_executor(self.executor, m.fn, *args)
        except Failure as f:
            raise failure_error(f, inc.codec) from None
        except (HubwireError, asyncio.CancelledError):
            raise
        except Exception as e:
            raise _defect(e) from None
        return m.encode_output(inc.codec, out)

    async def _stream_out(self, m: Method, inc: Incoming, args: tuple[Any, ...]) -> Answer:
        try:
            if m.style == "async":
                agen = m.fn(*args)
                try:
                    async for item in agen:
                        c, payload = m.encode_output(inc.codec, item)
                        await inc.send_item(c, payload)
                finally:
                    await agen.aclose()
            else:
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(self.executor, self._pump_thread, m, inc, args, loop)
        except Failure as f:
            raise failure_error(f, inc.codec) from None
        except (HubwireError, asyncio.CancelledError):
            raise
        except Exception as e:
            raise _defect(e) from None
        return None

    @staticmethod
    def _pump_thread(m: Method, inc: Incoming, args: tuple[Any, ...], loop: asyncio.AbstractEventLoop) -> None:
        gen = m.fn(*args)
        try:
            for item in gen:
                c, payload = m.encode_output(inc.codec, item)
                asyncio.run_coroutine_threadsafe(inc.send_item(c, payload), loop).result()
        finally:
            gen.close()

    @property
    def executor(self) -> ThreadPoolExecutor:
        """The threads plain ``def`` handlers run in (made on first use)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self._max_threads, thread_name_prefix=f"hubwire-{self.name}")
        return self._executor

    # ---- Serving ---------------------------------------------------------------

    def options(self, options: ConnectionOptions | None = None) -> ConnectionOptions:
        """Connection options that offer these methods (named after the provider)."""
        from dataclasses import replace

        if options is None:
            return ConnectionOptions(name=self.name, service=_ServiceOf(self))
        return replace(options, service=_ServiceOf(self))

    async def _serve_transport(self, transport: Transport, options: ConnectionOptions | None) -> None:
        from .connection import Connection

        conn = await Connection.accept(transport, self.options(options))
        await conn.closed()

    def serve_transport(self, transport: Transport, options: ConnectionOptions | None = None) -> Awaitable[None]:
        """Serves these methods on one transport (as the acceptor) until it
        closes. Awaitable in a coroutine; called outside one, it blocks."""
        return _run_or_await(self._serve_transport(transport, options))

    async def _serve(self, listener: Listener | str, options: ConnectionOptions | None) -> None:
        from .transport import listen

        lst = await listen(listener) if isinstance(listener, str) else listener
        tasks: set[asyncio.Task[Any]] = set()
        try:
            while True:
                t = await lst.accept()
                task = asyncio.ensure_future(self._serve_one(t, options))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        finally:
            lst.close()
            for task in tasks:
                task.cancel()

    async def _serve_one(self, t: Transport, options: ConnectionOptions | None) -> None:
        try:
            await self._serve_transport(t, options)
        except HubwireError:
            pass  # a failed handshake ends that connection only

    def serve(self, listener: Listener | str, options: ConnectionOptions | None = None) -> Awaitable[None]:
        """Accepts connections on ``listener`` (or an address such as
        ``unix:/run/x.sock``, ``tcp:127.0.0.1:7000``) forever, serving these
        methods on each. Awaitable in a coroutine; outside one, it blocks."""
        return _run_or_await(self._serve(listener, options))

    async def _serve_child(self, options: ConnectionOptions | None) -> None:
        from .transport import child

        t = child.parent()
        if t is None:
            raise HubwireError(Code.unavailable, "HUBWIRE_FD is not set: not started as a hubwire child process")
        await self._serve_transport(t, options)

    def serve_child(self, options: ConnectionOptions | None = None) -> Awaitable[None]:
        """In a child process started by a hub (or any parent), serves these
        methods to the parent on ``HUBWIRE_FD`` until the parent goes.
        Awaitable in a coroutine; outside one, it blocks."""
        return _run_or_await(self._serve_child(options))


class _ServiceOf:
    """A provider as the engine's ``Service`` (``methods`` is a name the
    provider uses for its table, so the seam is this small adapter)."""

    __slots__ = ("p",)

    def __init__(self, p: Provider) -> None:
        self.p = p

    def methods(self) -> list[MethodInfo]:
        return self.p.methods_info()

    def call(self, inc: Incoming) -> Answer | Awaitable[Answer]:
        return self.p.call(inc)


class _Done:
    """An awaitable that is already done (what a blocking serve returns)."""

    def __await__(self) -> typing.Generator[Any, None, None]:
        return
        yield


def _run_or_await(coro: typing.Coroutine[Any, Any, Any]) -> Awaitable[None]:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        try:
            asyncio.run(coro)
        except KeyboardInterrupt:
            pass
        return _Done()
    return coro
