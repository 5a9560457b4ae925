"""The serving seam: what the engine knows about serving calls is one
protocol, :class:`Service`, and one object per call, :class:`Incoming`.

When a REQUEST arrives the engine does the protocol's half of serving it
(:func:`on_request`): the id's parity, a live id reused, draining,
``max_calls``, registering the call so that its ITEMs, END, CREDIT and
CANCEL reach it, the deadline. It then hands the call to the service. A
service answers at once (a payload, or None for an empty ``ok``), or
returns an awaitable that the engine runs as a task, cancelling it when
the caller cancels or the deadline passes, and answers with what it
yields. Raising :class:`HubwireError` answers with that code; any other
exception is a ``defect`` of that call only.

A ``Provider`` is a service (methods by name, typed handlers).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Awaitable, Protocol, Union

from ..codes import Code
from ..context import CallContext
from ..errors import HubwireError
from ..hello import MethodInfo
from ..kind import streams_in, streams_out
from .calls import Inbox, Served
from .credit import CreditGate

if TYPE_CHECKING:
    from .state import Core

#: What a service answers with: (codec, payload) for ok, None for an empty ok.
Answer = Union[tuple[int, Any], None]


class Incoming:
    """One call as the engine hands it to a :class:`Service`.

    A unary call is registered in the call table only if the service does
    not answer it at once: a call answered during :meth:`Service.call`
    cannot receive any frame before its answer, so it costs no entry, no
    context and no timer unless the handler asks for its context.
    """

    __slots__ = ("core", "served", "method", "call_id", "kind", "codec", "input", "timeout_ms", "_ctx")

    def __init__(self, core: Core, call_id: int, method: str, kind: int, codec: int, payload: Any, timeout_ms: int) -> None:
        self.core = core
        self.served: Served | None = None
        #: The method called.
        self.method = method
        #: The call id on this connection.
        self.call_id = call_id
        #: The kind the caller asked for (0 unary .. 3 bidi).
        self.kind = kind
        #: The request's codec (the answer's, too).
        self.codec = codec
        #: The REQUEST payload (empty for the streaming-in kinds).
        self.input = payload
        #: The caller's deadline, in milliseconds from the REQUEST's arrival (0: none).
        self.timeout_ms = timeout_ms
        self._ctx: CallContext | None = None

    @property
    def context(self) -> CallContext:
        """The call's context: method, id, deadline, cancellation, caller."""
        if self._ctx is None:
            deadline = time.monotonic() + self.timeout_ms / 1000 if self.timeout_ms else None
            self._ctx = CallContext(self.method, self.call_id, deadline, self.core.peer.peer, self.core)
        return self._ctx

    def register(self) -> Served:
        """Enters the call in the table (so its frames reach it) and starts its deadline."""
        s = self.served
        if s is not None:
            return s
        core, call_id = self.core, self.call_id
        s = self.served = Served(call_id, self.context, self.codec)
        if streams_in(self.kind):
            s.items = Inbox(core.local.window, lambda n: core.grant(call_id, n))
        if streams_out(self.kind):
            s.credit = CreditGate(core.peer.window)
        core.served[call_id] = s
        if self.timeout_ms:
            s.timer = core.loop.call_later(self.timeout_ms / 1000, _on_deadline, core, s)
        return s

    @property
    def items(self) -> Inbox | None:
        """The caller's items (client_stream, bidi)."""
        return self.served.items if self.served is not None else None

    async def send_item(self, codec: int, payload: Any) -> None:
        """Sends one item to the caller (server_stream, bidi), waiting for
        credit; fails once the call has ended, or with ``too_large`` for an
        item over the caller's ``max_frame``."""
        s = self.served
        gate = s.credit if s is not None else None
        if s is None or gate is None:
            raise HubwireError(Code.internal, f"a {self.kind} call has no output stream")
        core = self.core
        core.check_size(len(payload), "item")
        await gate.take()
        if core.writer.over_cap():
            await core.writer.ready()
        if core.served.get(s.id) is not s:
            raise HubwireError(Code.cancelled, "the call has ended")
        core.send_item(s.id, codec, payload)


class Service(Protocol):
    """Whatever serves the calls that arrive on a connection."""

    def methods(self) -> list[MethodInfo]:
        """The methods offered, advertised in HELLO (asked once per connection)."""
        ...

    def call(self, incoming: Incoming) -> Answer | Awaitable[Answer]:
        """Serves one call: an answer now, or an awaitable of it. Raise
        :class:`HubwireError` to refuse (``unknown_method``, ``invalid_argument``)."""
        ...


def on_request(core: Core, call_id: int, kind: int, codec: int, timeout_ms: int, method: str, payload: Any) -> None:
    """A REQUEST arrived: check it, register it, hand it to the service."""
    if core.ours(call_id):
        raise HubwireError(Code.protocol_error, f"REQUEST with call id {call_id} of the receiver's parity")
    if call_id in core.served:
        raise HubwireError(Code.protocol_error, f"REQUEST for call id {call_id}, which is already live")
    core.last_peer_id = call_id  # the latest, not the numerically largest: ids wrap (§5.10)
    service = core.service
    if service is None:
        core.send_response(call_id, Code.unknown_method, f"unknown method {method!r}: this side offers no methods", 0, None)
        return
    if core.draining:
        core.send_response(call_id, Code.unavailable, "draining (GOAWAY); retry elsewhere", 0, None)
        return
    if len(core.served) >= core.local.max_calls:
        limit = core.local.max_calls
        core.send_response(call_id, Code.resource_exhausted, f"too many calls in flight: the limit (max_calls) is {limit}", 0, None)
        return
    inc = Incoming(core, call_id, method, kind, codec, payload, timeout_ms)
    if kind:
        inc.register()  # its stream frames may come before it answers
    answer: Any
    try:
        answer = service.call(inc)
    except HubwireError as e:
        answer = e
    except Exception as e:  # a bug in the service: this call only
        answer = HubwireError(Code.defect, f"service raised {type(e).__name__}: {e}")
    if answer is None or type(answer) is tuple or isinstance(answer, HubwireError):
        s = inc.served
        if s is not None:
            finish(core, s, answer)
        elif isinstance(answer, HubwireError):
            core.send_error(call_id, answer)
        elif answer is None:
            core.send_response(call_id, Code.ok, "", 0, None)
        else:
            core.send_response(call_id, Code.ok, "", answer[0], answer[1])
        return
    s = inc.register()
    s.task = asyncio.ensure_future(_run(core, s, answer))


async def _run(core: Core, s: Served, work: Awaitable[Answer]) -> None:
    try:
        answer = await work
    except asyncio.CancelledError:
        if core.served.get(s.id) is s:  # cancelled by someone else than the engine
            finish(core, s, HubwireError(Code.cancelled, "the handler was cancelled"))
        return
    except HubwireError as e:
        finish(core, s, e)
        return
    except Exception as e:
        finish(core, s, HubwireError(Code.defect, f"handler raised {type(e).__name__}: {e}"))
        return
    finish(core, s, answer)


def _on_deadline(core: Core, s: Served) -> None:
    s.timer = None
    finish(core, s, HubwireError(Code.deadline_exceeded, "deadline exceeded in the handler"))


def finish(core: Core, s: Served, result: Answer | HubwireError) -> None:
    """Forgets a served call and answers it, unless it already ended (the
    entry is removed only if it is still this call: a cancelled call's id
    may already be reused). An error answer also stops the handler."""
    if core.served.get(s.id) is not s:
        return
    del core.served[s.id]
    if isinstance(result, HubwireError):
        s.stop(result)
        core.send_error(s.id, result)
    else:
        if s.timer is not None:
            s.timer.cancel()
            s.timer = None
        ended = HubwireError(Code.cancelled, "the call has ended")
        if s.items is not None:
            s.items.finish(ended)
        if s.credit is not None:
            s.credit.close(ended)
        if result is None:
            core.send_response(s.id, Code.ok, "", 0, None)
        else:
            core.send_response(s.id, Code.ok, "", result[0], result[1])
    if core.draining:
        core.check_idle()
