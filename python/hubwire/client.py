"""Calling a peer's methods: unary (typed or raw), server streams, client
streams and bidirectional streams. Each call is an :class:`OutCall` of the
engine's table; its outcome goes to a future (unary, client_stream) or an
:class:`Inbox` (server_stream, bidi). A deadline (``timeout=``) is sent to
the callee and enforced here too; cancelling the calling task, or leaving
a stream early, sends CANCEL.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from .codec import Codec, codec_of, decode, decode_as, encode_raw_or, is_raw
from .codes import Code
from .engine.calls import Inbox, OutCall
from .engine.state import Core
from .errors import Failure, HubwireError
from .stream import BidiStream, ClientStream, ItemSink, ItemStream

UNARY, SERVER_STREAM, CLIENT_STREAM, BIDI = 0, 1, 2, 3
EMPTY = b""


def response_error(code: Code, message: str, codec: int, payload: Any, errors: Any) -> HubwireError:
    """The error a non-ok RESPONSE stands for; a failure's value is decoded
    as ``errors`` and raised as ``Failure.of(type(value))``."""
    if code != Code.failure:
        return HubwireError(code, message)
    try:
        value = decode(payload, codec, errors) if len(payload) else None
    except ValueError as e:
        return HubwireError(Code.internal, f"cannot decode the failure value: {e}")
    return Failure.raise_for(value, message)


class OnceCall(OutCall):
    """A call whose outcome is one RESPONSE: unary and client_stream."""

    __slots__ = ("future",)

    def __init__(self, kind: int, method: str, codec: int, payload: Any, future: asyncio.Future[Any]) -> None:
        super().__init__(kind, method, codec, payload)
        #: Resolves to (code, message, codec, payload), or a HubwireError.
        self.future = future

    def settle(self, code: Code, message: str, codec: int, payload: Any) -> None:
        if self.send is not None:
            self.send.close(HubwireError(Code.cancelled, "the call has ended; no more items can be sent"))
        if not self.future.done():
            self.future.set_result((code, message, codec, payload))

    def fail(self, error: HubwireError) -> None:
        if self.send is not None:
            self.send.close(error)
        if not self.future.done():
            self.future.set_result(error)


class StreamCall(OutCall):
    """A call whose outputs are ITEMs: server_stream and bidi."""

    __slots__ = ("errors",)

    def __init__(self, kind: int, method: str, codec: int, payload: Any, core: Core, errors: Any) -> None:
        super().__init__(kind, method, codec, payload)
        self.errors = errors
        self.recv = Inbox(core.local.window, self._grant(core))

    def _grant(self, core: Core) -> Callable[[int], None]:
        return lambda n: core.grant(self.id, n)

    def settle(self, code: Code, message: str, codec: int, payload: Any) -> None:
        if self.send is not None:
            self.send.close(HubwireError(Code.cancelled, "the call has ended; no more items can be sent"))
        assert self.recv is not None
        self.recv.finish(None if code == Code.ok else response_error(code, message, codec, payload, self.errors))

    def fail(self, error: HubwireError) -> None:
        if self.send is not None:
            self.send.close(error)
        assert self.recv is not None
        self.recv.finish(error)


def _encode_input(value: Any, codec: Codec) -> tuple[Codec, Any]:
    try:
        return encode_raw_or(value, codec)
    except HubwireError:
        raise
    except Exception as e:
        raise HubwireError(Code.invalid_argument, f"cannot encode input: {e}") from None


def _cancelled() -> HubwireError:
    return HubwireError(Code.cancelled, "the call was cancelled by its caller")


async def _outcome(core: Core, call: OnceCall) -> tuple[Code, str, int, Any]:
    """Waits for a call's RESPONSE; cancelling the wait abandons the call."""
    try:
        r = await call.future
    except asyncio.CancelledError:
        core.abandon(call, _cancelled())
        raise
    if isinstance(r, HubwireError):
        raise r
    return r  # type: ignore[no-any-return]


def _result(r: tuple[Code, str, int, Any], output: Any, errors: Any) -> Any:
    code, message, codec, payload = r
    if code != Code.ok:
        raise response_error(code, message, codec, payload, errors)
    if is_raw(output) or (codec == Codec.raw and output is Any):
        return payload if type(payload) is bytes else bytes(payload)
    return decode_as(payload, codec, output, Code.internal, "the response")


async def unary(core: Core, method: str, value: Any, codec: Codec | str | None, output: Any, errors: Any, timeout: float | None) -> Any:
    """A unary call: encode, send, wait, decode."""
    c, payload = _encode_input(value, codec_of(codec))
    call = OnceCall(UNARY, method, c, payload, core.loop.create_future())
    core.begin(call, timeout)
    return _result(await _outcome(core, call), output, errors)


async def unary_raw(core: Core, method: str, data: Any, timeout: float | None) -> bytes:
    """A unary call with raw bytes in and out: no serialization at all."""
    call = OnceCall(UNARY, method, Codec.raw, data, core.loop.create_future())
    core.begin(call, timeout)
    return _result(await _outcome(core, call), bytes, Any)  # type: ignore[no-any-return]


def _abandoner(core: Core, call: OutCall) -> Callable[[], None]:
    loop = core.loop

    def abandon() -> None:
        # Also called from __del__, perhaps on another thread.
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            core.abandon(call, _cancelled())
        elif not loop.is_closed():
            loop.call_soon_threadsafe(core.abandon, call, _cancelled())

    return abandon


def _sink(core: Core, call: OutCall, codec: Codec, item_type: Any) -> ItemSink[Any]:
    async def send(c: int, payload: Any) -> None:
        gate = call.send
        assert gate is not None
        if gate.error is not None:
            raise gate.error
        if len(payload) > core.peer.max_frame:
            e = HubwireError(Code.too_large, f"item of {len(payload)} bytes exceeds the peer's max_frame of {core.peer.max_frame} bytes")
            core.abandon(call, e)
            raise e
        await gate.take()
        if core.writer.queued > 4 * 1024 * 1024:
            await core.writer.ready()
        if call.send is not None and call.send.error is not None:
            raise call.send.error
        core.send_item(call.id, c, payload)

    def end() -> None:
        gate = call.send
        assert gate is not None
        if gate.error is not None:
            return
        gate.close(HubwireError(Code.invalid_argument, "the inputs have ended (END was sent)"))
        if call.id == 0:
            call.end_pending = True  # still queued for the peer's max_calls: END follows the REQUEST
        else:
            core.send_end(call.id)

    return ItemSink(send, codec, item_type, end, Code.invalid_argument)


def server_stream(core: Core, method: str, value: Any, codec: Codec | str | None, output: Any, errors: Any, timeout: float | None) -> ItemStream[Any]:
    """Starts a server-streaming call: one input, a stream of outputs."""
    c, payload = _encode_input(value, codec_of(codec))
    if c == Codec.raw and output is Any:
        output = bytes
    call = StreamCall(SERVER_STREAM, method, c, payload, core, errors)
    core.begin(call, timeout)
    assert call.recv is not None
    return ItemStream(call.recv, output, Code.internal, _abandoner(core, call))


def client_stream(core: Core, method: str, codec: Codec | str | None, input: Any, output: Any, errors: Any, timeout: float | None) -> ClientStream[Any]:
    """Starts a client-streaming call: send inputs, then finish for the output."""
    from .engine.credit import CreditGate

    c = codec_of(codec)
    if c == Codec.raw:
        input = bytes if input is Any else input
    call = OnceCall(CLIENT_STREAM, method, c, EMPTY, core.loop.create_future())
    call.send = CreditGate(0)  # the peer's window arrives as the REQUEST goes out
    core.begin(call, timeout)

    async def result() -> Any:
        return _result(await _outcome(core, call), output, errors)

    return ClientStream(_sink(core, call, c, input), result, _abandoner(core, call))


def bidi(core: Core, method: str, codec: Codec | str | None, input: Any, output: Any, errors: Any, timeout: float | None) -> BidiStream[Any]:
    """Starts a bidirectional call: send inputs and end them; iterate outputs."""
    from .engine.credit import CreditGate

    c = codec_of(codec)
    if c == Codec.raw:
        input = bytes if input is Any else input
        output = bytes if output is Any else output
    call = StreamCall(BIDI, method, c, EMPTY, core, errors)
    call.send = CreditGate(0)
    core.begin(call, timeout)
    assert call.recv is not None
    return BidiStream(call.recv, output, _sink(core, call, c, input), _abandoner(core, call))
