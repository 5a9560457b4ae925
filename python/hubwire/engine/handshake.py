"""Opening a connection (``spec/PROTOCOL.md`` §4): both sides send HELLO at
once, read the peer's and negotiate the version (the reader does that as
the first frame arrives); the connection is open when the peer's HELLO was
good. A handshake that fails for anything but a lost peer is refused with
GOAWAY and its code, so the peer learns why; one that takes longer than
the options' ``handshake_timeout`` fails with ``deadline_exceeded``.

An acceptor that requires a token (§4.4) sends its HELLO only once the
dialer's has arrived with that token (the reader checks it): its HELLO
lists its methods, which a peer without the token must not learn.
"""

from __future__ import annotations

import asyncio

from ..codes import Code
from ..errors import HubwireError
from ..transport import Transport
from .options import ConnectionOptions
from .reader import Reader
from .state import Core
from .writer import MIN_WRITE_QUEUE


async def open_connection(transport: Transport, options: ConnectionOptions, dialer: bool) -> Core:
    """Opens a connection over ``transport`` as the dialer (odd call ids) or
    the acceptor (even ids); returns its core once both HELLOs are in."""
    loop = asyncio.get_running_loop()
    core = Core(transport, options.hello(dialer), options.service, dialer, loop)
    core.require_token = None if dialer else options.require_token
    core.writer.cap = max(options.write_queue, MIN_WRITE_QUEUE)
    core.write_stall_timeout = options.write_stall_timeout
    reader = Reader(core)
    core.reader = reader
    if core.require_token is None:
        core.send_hello()
    try:
        transport.attach(loop, reader.on_readable)
    except OSError as e:
        core.die(HubwireError(Code.unavailable, f"cannot use the transport: {e}"))
    try:
        await asyncio.wait_for(asyncio.shield(core.handshake), options.handshake_timeout)
    except asyncio.TimeoutError:
        core.fail_protocol(
            HubwireError(Code.deadline_exceeded, f"no HELLO from {transport.description} within {options.handshake_timeout} s")
        )
        assert core.error is not None
        raise core.error from None
    except asyncio.CancelledError:
        core.die(HubwireError(Code.cancelled, "the handshake was cancelled"))
        raise
    return core
