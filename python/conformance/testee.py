"""The Python testee of the conformance suite (``conformance/README.md``):
reads control commands as JSON lines on stdin, serves the conformance
service or makes the calls it is told to, and reports events as JSON
lines on stdout. Model: ``rust/hubwire-testee``, ``ts/conformance/testee.ts``.

    hubwire-conformance --lang python --testee "python/.venv/bin/python python/conformance/testee.py"
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
import threading
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from service import conformance_service  # noqa: E402

import hubwire  # noqa: E402
from hubwire import Code, Connection, ConnectionOptions, HubwireError  # noqa: E402
from hubwire.transport import child, tcp, unix  # noqa: E402

OPTIONS = ConnectionOptions(name="conformance-testee")


def _json(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray, memoryview)):
        return list(bytes(v))
    raise TypeError(f"not JSON: {type(v).__name__}")


def emit(event: dict[str, Any]) -> None:
    """One writer (the loop's thread), so event lines never interleave."""
    sys.stdout.write(json.dumps(event, default=_json, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def parent() -> hubwire.transport.Transport:
    t = child.parent()
    if t is None:
        raise HubwireError(Code.unavailable, "HUBWIRE_FD is not set")
    return t


def with_token(cmd: dict[str, Any], field: str) -> ConnectionOptions:
    """The options, with the command's ``token`` (if any) as ``field``:
    ``require_token`` for serve, ``token`` for connect."""
    token = cmd.get("token")
    return dataclasses.replace(OPTIONS, **{field: token}) if isinstance(token, str) else OPTIONS


async def serve(cmd: dict[str, Any]) -> None:
    provider = conformance_service(emit)
    transport = cmd.get("transport")
    options = with_token(cmd, "require_token")
    if transport == "child":
        emit({"event": "ready", "address": "child"})  # the runner waits for it before its handshake
        await provider.serve_transport(parent(), options)
        return
    if transport == "unix":
        listener: hubwire.transport.Listener = await unix.listen(cmd["address"])
    elif transport == "tcp":
        listener = await tcp.listen(cmd["address"])
    else:
        raise HubwireError(Code.unavailable, f"unsupported transport {transport!r}")
    emit({"event": "ready", "address": listener.address})
    await provider.serve(listener, options)


async def connect(cmd: dict[str, Any]) -> Connection:
    transport = cmd.get("transport")
    options = with_token(cmd, "token")
    if transport == "unix":
        return await Connection.dial(await unix.connect(cmd["address"]), options)
    if transport == "tcp":
        return await Connection.dial(await tcp.connect(cmd["address"]), options)
    if transport == "child":
        return await Connection.accept(parent(), options)  # a child is its parent's acceptor, even when it calls
    raise HubwireError(Code.unavailable, f"unsupported transport {transport!r}")


def raw_input(cmd: dict[str, Any]) -> bytes:
    if isinstance(cmd.get("input_text"), str):
        return str(cmd["input_text"]).encode()
    if isinstance(cmd.get("input_hex"), str):
        return bytes.fromhex(cmd["input_hex"])
    if isinstance(cmd.get("input_fill"), list):
        value, n = cmd["input_fill"]
        return bytes([value]) * n
    return b""


def raw_item(v: Any) -> bytes:
    s = str(v)
    try:
        return bytes.fromhex(s)
    except ValueError:
        return s.encode()


async def run_call(conn: Connection, cmd: dict[str, Any], r: dict[str, Any], state: dict[str, bool]) -> None:
    raw = cmd.get("codec") == "raw"
    codec = cmd.get("codec", "msgpack")
    timeout = cmd["timeout_ms"] / 1000 if cmd.get("timeout_ms") else None
    kind = cmd.get("kind", "unary")
    show = (lambda v: bytes(v).hex()) if raw else (lambda v: v)
    items = [raw_item(x) if raw else x for x in cmd.get("items", [])]
    value = raw_input(cmd) if raw else cmd.get("input")

    async def read(stream: hubwire.ItemStream[Any]) -> None:
        got: list[Any] = []
        r["items"] = got
        async for x in stream:
            got.append(show(x))
            if cmd.get("read") == len(got):
                state["dropped"] = True
                return

    if kind == "unary":
        # A raw caller wants the bytes whatever the answer's codec (§6.1).
        out = await conn.call(cmd["method"], value, codec=codec, timeout=timeout, output=bytes if raw else Any)
        r["output_hex" if raw else "output"] = show(out)
    elif kind == "server_stream":
        async with conn.server_stream(cmd["method"], value, codec=codec, timeout=timeout) as s:
            await read(s)
    elif kind == "client_stream":
        async with conn.client_stream(cmd["method"], codec=codec, timeout=timeout) as cs:
            for x in items:
                try:
                    await cs.send(x)
                except HubwireError:
                    break  # the call has ended: the callee answered early
            out = await (cs.finish() if cmd.get("end", True) else cs.response())
            r["output_hex" if raw else "output"] = show(out)
    elif kind == "bidi":
        async with conn.bidi(cmd["method"], codec=codec, timeout=timeout) as bd:

            async def sender() -> None:
                for x in items:
                    await bd.send(x)
                if cmd.get("end", True):
                    bd.end()

            task = asyncio.ensure_future(sender())
            try:
                await read(bd)
            finally:
                task.cancel()
    else:
        raise HubwireError(Code.invalid_argument, f"unknown kind {kind!r}")


async def call(conn: Connection, cmd: dict[str, Any]) -> None:
    r: dict[str, Any] = {"event": "result", "id": cmd.get("id")}
    state = {"dropped": False}
    task = asyncio.ensure_future(run_call(conn, cmd, r, state))
    timer = None
    if cmd.get("cancel_after_ms") is not None:

        def drop() -> None:
            state["dropped"] = True
            task.cancel()

        timer = asyncio.get_running_loop().call_later(cmd["cancel_after_ms"] / 1000, drop)
    try:
        await task
        r["code"] = "cancelled" if state["dropped"] else "ok"
    except asyncio.CancelledError:
        r["code"] = "cancelled"
        r["message"] = "dropped by the testee"
    except HubwireError as e:
        r["code"] = "cancelled" if state["dropped"] else e.code.name
        r["message"] = e.message
        if isinstance(e, hubwire.Failure):
            r["failure"] = e.value
    finally:
        if timer is not None:
            timer.cancel()
    emit(r)


async def main() -> None:
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()

    def read_stdin() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(lines.put_nowait, line)
        loop.call_soon_threadsafe(lines.put_nowait, None)

    threading.Thread(target=read_stdin, daemon=True).start()
    conn: Connection | None = None
    tasks: set[asyncio.Task[Any]] = set()

    def spawn(coro: Any) -> None:
        t = asyncio.ensure_future(coro)
        tasks.add(t)
        t.add_done_callback(tasks.discard)

    while (line := await lines.get()) is not None:
        try:
            cmd = json.loads(line)
        except ValueError:
            emit({"event": "error", "code": "invalid_argument", "message": f"not JSON: {line.strip()}"})
            continue
        op = cmd.get("op")
        if op == "hello":
            emit({"event": "hello", "lang": "python", "version": hubwire.__version__, "roles": ["client", "provider"],
                  "transports": ["child", "unix", "tcp"]})
        elif op == "serve":
            spawn(serve_and_report(cmd))
        elif op == "connect":
            try:
                conn = await connect(cmd)
                emit({"event": "connected"})
            except HubwireError as e:
                emit({"event": "error", "code": e.code.name, "message": e.message})
            except OSError as e:
                emit({"event": "error", "code": "unavailable", "message": str(e)})
        elif op == "ping":
            if conn is None:
                emit({"event": "result", "id": cmd.get("id"), "code": "unavailable", "message": "not connected"})
            else:
                spawn(ping(conn, cmd))
        elif op == "call":
            if conn is None:
                emit({"event": "result", "id": cmd.get("id"), "code": "unavailable", "message": "not connected"})
            else:
                spawn(call(conn, cmd))
        else:
            emit({"event": "error", "code": "invalid_argument", "message": f"unknown op {op!r}"})
    if conn is not None:
        conn.close()


async def serve_and_report(cmd: dict[str, Any]) -> None:
    try:
        await serve(cmd)
    except (HubwireError, OSError) as e:
        emit({"event": "error", "code": "unavailable", "message": str(e)})


async def ping(conn: Connection, cmd: dict[str, Any]) -> None:
    try:
        await conn.ping()
        emit({"event": "result", "id": cmd.get("id"), "code": "ok"})
    except HubwireError as e:
        emit({"event": "result", "id": cmd.get("id"), "code": e.code.name, "message": e.message})


if __name__ == "__main__":
    asyncio.run(main())
