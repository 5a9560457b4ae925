"""The two halves of a stream, for callers and handlers alike:
:class:`ItemStream` receives (``async for``; credit goes back as items are
consumed) and :class:`ItemSink` sends (``send`` waits for credit, ``end``
sends END); :class:`ClientStream` is a client-streaming call: send, then
the one answer (``spec/PROTOCOL.md`` §8).
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Generic, TypeVar

from .codec import Codec, decode_as, encode_raw_or, is_raw
from .codes import Code
from .engine.calls import Inbox
from .errors import HubwireError

T = TypeVar("T")


class ItemStream(Generic[T]):
    """The receiving half of a stream: items of type ``T`` in order, then the
    end. Iterate it with ``async for``; the loop ends when the stream ends
    ``ok`` and raises the call's error otherwise.

    For a caller, leaving the loop early (``break``) does not by itself
    tell the callee; use ``async with`` (or :meth:`cancel`), or drop the
    stream: a stream that is garbage-collected before its end cancels its
    call.
    """

    def __init__(self, inbox: Inbox, item_type: Any, decode_code: Code, abandon: Callable[[], None] | None = None) -> None:
        self._inbox = inbox
        self._type = item_type
        self._raw = is_raw(item_type)
        #: ``invalid_argument`` in a handler (the caller sent a bad item), ``internal`` in a caller.
        self._code = decode_code
        self._abandon = abandon

    def __aiter__(self) -> ItemStream[T]:
        return self

    async def __anext__(self) -> T:
        entry = await self._inbox.get()
        if entry is None:
            raise StopAsyncIteration
        return self._decode(entry[0], entry[1])

    async def next(self) -> T | None:
        """The next item, or None at the stream's ``ok`` end."""
        entry = await self._inbox.get()
        if entry is None:
            return None
        return self._decode(entry[0], entry[1])

    async def next_or(self, end: Any) -> Any:
        """The next item, or ``end`` at the stream's ``ok`` end (which tells a
        ``None`` item from the end)."""
        entry = await self._inbox.get()
        if entry is None:
            return end
        return self._decode(entry[0], entry[1])

    def _decode(self, codec: int, payload: Any) -> T:
        if self._raw or (codec == Codec.raw and self._type is Any and self._code == Code.internal):
            return payload if type(payload) is bytes else bytes(payload)  # type: ignore[return-value]
        return decode_as(payload, codec, self._type, self._code, "item")  # type: ignore[no-any-return]

    async def collect(self) -> list[T]:
        """Reads the rest of the stream into a list."""
        return [x async for x in self]

    @property
    def ended(self) -> bool:
        """Whether the stream has ended and every item was read."""
        return self._inbox.ended and not self._inbox.items

    def cancel(self) -> None:
        """A caller's stream: abandons the call (CANCEL to the callee)."""
        if self._abandon is not None and not self._inbox.ended:
            self._abandon()

    async def __aenter__(self) -> ItemStream[T]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()

    def __del__(self) -> None:
        abandon = self._abandon
        if abandon is not None and not self._inbox.ended:
            self._abandon = None
            try:
                abandon()
            except RuntimeError:  # the loop is gone: so is the connection
                pass


class ItemSink(Generic[T]):
    """The sending half of a stream: items of type ``T``, each within the
    receiver's credit (``send`` waits while there is none)."""

    def __init__(self, send: Callable[[int, Any], Awaitable[None]], codec: Codec, item_type: Any, end: Callable[[], None] | None, encode_code: Code) -> None:
        self._send = send
        self._codec = Codec.raw if is_raw(item_type) else (Codec.msgpack if codec == Codec.raw else codec)
        self._end = end
        self._code = encode_code

    async def send(self, item: T) -> None:
        """Sends one item, waiting for credit. Fails once the call has ended
        (the callee may answer before taking every input)."""
        try:
            codec, payload = encode_raw_or(item, self._codec)
        except HubwireError:
            raise
        except Exception as e:
            raise HubwireError(self._code, f"cannot encode item: {e}") from None
        await self._send(codec, payload)

    def end(self) -> None:
        """No more items: sends END (a caller's inputs). Ending twice does
        nothing; a handler's outputs end with its answer instead."""
        if self._end is not None:
            self._end()


class ClientStream(Generic[T]):
    """A client-streaming call: :meth:`send` inputs, then :meth:`finish` for
    the one output. ``async with`` cancels the call if it is left unfinished."""

    def __init__(self, sink: ItemSink[Any], result: Callable[[], Awaitable[T]], cancel: Callable[[], None]) -> None:
        self._sink = sink
        self._result = result
        self._cancel = cancel
        self._done = False

    async def send(self, item: Any) -> None:
        """Sends one input, waiting for credit. Fails once the call has ended
        (the callee may answer early); :meth:`response` then says how."""
        await self._sink.send(item)

    async def finish(self) -> T:
        """Ends the inputs (END) and waits for the output."""
        self._sink.end()
        return await self.response()

    async def response(self) -> T:
        """Waits for the output without ending the inputs (for methods that
        answer before the caller's END)."""
        try:
            return await self._result()
        finally:
            self._done = True

    def cancel(self) -> None:
        """Abandons the call: CANCEL to the callee."""
        self._cancel()

    async def __aenter__(self) -> ClientStream[T]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if not self._done:
            self.cancel()


class BidiStream(ItemStream[T]):
    """A bidirectional call: :meth:`send` inputs and :meth:`end` them; iterate
    the outputs with ``async for``."""

    def __init__(self, inbox: Inbox, item_type: Any, sink: ItemSink[Any], abandon: Callable[[], None]) -> None:
        super().__init__(inbox, item_type, Code.internal, abandon)
        self._sink = sink

    async def send(self, item: Any) -> None:
        """Sends one input, waiting for credit."""
        await self._sink.send(item)

    def end(self) -> None:
        """No more inputs (END); the outputs go on until the callee ends them."""
        self._sink.end()
