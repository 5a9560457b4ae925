"""The behaviour suite's harness: a client connected to the behaviour
provider over one transport (memory, unix, tcp, child), through one API
(asyncio, or the blocking API driven from worker threads). A case sees
only :class:`Harness`, whose client has the same async methods either way:
for the blocking API each one runs the blocking call in a thread."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import behaviour_provider as bp

import hubwire
from hubwire import blocking, testing

PROVIDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "behaviour_provider.py")
SETUPS = ["memory", "unix", "tcp", "child"]
APIS = ["asyncio", "blocking"]


class End(Exception):
    """A stream ended ok."""


class Stream:
    """One side's view of a stream call: next item, send, end, finish, cancel."""

    def __init__(self, obj: Any, threaded: bool) -> None:
        self.obj = obj
        self.threaded = threaded

    async def _do(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args) if self.threaded else await fn(*args)

    async def next(self) -> Any:
        if self.threaded:
            item = await asyncio.to_thread(next, self.obj, End)
            if item is End:
                raise End
            return item
        try:
            return await self.obj.__anext__()
        except StopAsyncIteration:
            raise End from None

    async def collect(self) -> list[Any]:
        out = []
        while True:
            try:
                out.append(await self.next())
            except End:
                return out

    async def send(self, item: Any) -> None:
        await self._do(self.obj.send, item)

    async def end(self) -> None:
        if self.threaded:
            await asyncio.to_thread(self.obj.end)
        else:
            self.obj.end()

    async def finish(self) -> Any:
        return await self._do(self.obj.finish)

    async def cancel(self) -> None:
        if self.threaded:
            await asyncio.to_thread(self.obj.cancel)
        else:
            self.obj.cancel()


class Client:
    """The client under test, with async methods whatever the API."""

    def __init__(self, conn: hubwire.Connection | blocking.Connection) -> None:
        self.conn = conn
        self.threaded = isinstance(conn, blocking.Connection)

    async def _do(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        if self.threaded:
            return await asyncio.to_thread(lambda: fn(*args, **kw))
        return await fn(*args, **kw)

    async def call(self, method: str, input: Any = None, **kw: Any) -> Any:
        return await self._do(self.conn.call, method, input, **kw)

    async def call_raw(self, method: str, data: bytes, **kw: Any) -> bytes:
        return await self._do(self.conn.call_raw, method, data, **kw)  # type: ignore[no-any-return]

    async def ping(self) -> float:
        return await self._do(self.conn.ping)  # type: ignore[no-any-return]

    async def server_stream(self, method: str, input: Any = None, **kw: Any) -> Stream:
        if self.threaded:
            return Stream(await asyncio.to_thread(lambda: self.conn.server_stream(method, input, **kw)), True)
        return Stream(self.conn.server_stream(method, input, **kw), False)

    async def client_stream(self, method: str, **kw: Any) -> Stream:
        if self.threaded:
            return Stream(await asyncio.to_thread(lambda: self.conn.client_stream(method, **kw)), True)
        return Stream(self.conn.client_stream(method, **kw), False)

    async def bidi(self, method: str, **kw: Any) -> Stream:
        if self.threaded:
            return Stream(await asyncio.to_thread(lambda: self.conn.bidi(method, **kw)), True)
        return Stream(self.conn.bidi(method, **kw), False)

    @property
    def peer(self) -> hubwire.Hello:
        return self.conn.peer

    @property
    def is_closed(self) -> bool:
        return self.conn.is_closed


class Harness:
    """A client connected to the behaviour provider."""

    def __init__(self, setup: str, api: str) -> None:
        self.setup = setup
        self.api = api
        self.logs: list[tuple[str, str]] = []
        self.client: Client
        self._proc: asyncio.subprocess.Process | None = None
        self._pair: testing.Pair | None = None
        self._tmp = tempfile.mkdtemp(prefix="hw-behaviour-")

    def token(self, name: str) -> str:
        return f"{name}-{uuid.uuid4().hex[:8]}"

    def log(self, name: str, stream: str, line: str) -> None:
        self.logs.append((stream, line))

    async def start(self) -> Harness:
        threaded = self.api == "blocking"
        if threaded:  # every blocking call in flight holds a thread
            asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(256, thread_name_prefix="blocking-client"))
        if self.setup == "memory":
            if threaded:
                conn, self._pair = await asyncio.to_thread(testing.blocking_pair, bp.provider(), None, bp.options())
                self.client = Client(conn)
            else:
                pair = self._pair = testing.pair(bp.provider(), server=bp.options())
                await pair.open()
                self.client = Client(pair.client)
        elif self.setup == "child":
            argv = [sys.executable, PROVIDER]
            if threaded:
                self.client = Client(await asyncio.to_thread(blocking.spawn, argv, name="behaviour", log=self.log))
            else:
                self.client = Client(await hubwire.spawn(argv, name="behaviour", log=self.log))
        else:
            address = f"unix:{self._tmp}/p.sock" if self.setup == "unix" else "tcp:127.0.0.1:0"
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, PROVIDER, "--listen", address, stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL
            )
            assert self._proc.stdout is not None
            while True:
                line = (await asyncio.wait_for(self._proc.stdout.readline(), 20)).decode()
                assert line, "the provider exited before listening"
                if line.startswith("listening "):
                    break
            real = line.split(" ", 1)[1].strip()
            if self.setup == "tcp":
                real = "tcp:" + real
            asyncio.ensure_future(self._proc.stdout.read())  # keep its stdout drained
            if threaded:
                self.client = Client(await asyncio.to_thread(blocking.connect, real))
            else:
                self.client = Client(await hubwire.connect(real))
        return self

    async def kill_peer(self) -> None:
        """The provider crashes (or, in memory, its end is dropped)."""
        conn = self.client.conn
        if self._pair is not None:
            server = self._pair.server
            if isinstance(conn, blocking.Connection):

                async def close() -> None:
                    server.close()

                await asyncio.to_thread(conn.run, close)
            else:
                server.close()
        elif self._proc is not None:
            self._proc.kill()
            await self._proc.wait()
        else:
            child = conn.child
            assert child is not None
            child.kill()

    async def close(self) -> None:
        """Closes what :meth:`start` opened, as far as it got, and removes
        the temp dir (the unix setup's socket) whatever happens."""
        try:
            if hasattr(self, "client"):
                conn = self.client.conn
                if isinstance(conn, blocking.Connection):
                    await asyncio.to_thread(conn.close)
                else:
                    conn.close()
                    if conn.child is not None:
                        await conn.child.wait()
            if self._pair is not None and self.api == "asyncio":
                self._pair.close()
            if self._proc is not None:
                if self._proc.returncode is None:
                    self._proc.kill()
                await self._proc.wait()
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)
