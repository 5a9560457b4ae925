"""How a connection presents itself and what it serves: :class:`ConnectionOptions`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..frame import VERSION
from .writer import DEFAULT_WRITE_QUEUE
from ..hello import DEFAULT_MAX_CALLS, DEFAULT_MAX_FRAME, DEFAULT_WINDOW, Hello, PeerInfo, fit_hello

if TYPE_CHECKING:
    from .serve import Service

#: The package version, sent in HELLO.
SDK_VERSION = "0.1.0"


@dataclass
class ConnectionOptions:
    """Options for opening a connection (``Connection.dial``/``accept``)."""

    #: Our name in the peer's logs and listings.
    name: str = "python"
    #: The largest frame body we accept (bytes).
    max_frame: int = DEFAULT_MAX_FRAME
    #: Initial credit we grant per stream we receive.
    window: int = DEFAULT_WINDOW
    #: Calls we serve at once before answering ``resource_exhausted``.
    max_calls: int = DEFAULT_MAX_CALLS
    #: Seconds to wait for the peer's HELLO.
    handshake_timeout: float = 10.0
    #: The service whose methods we offer, if any (a ``Provider``).
    service: Service | None = None
    #: As the dialer: the token sent in our HELLO (``spec/PROTOCOL.md`` §4.4).
    token: str | None = field(default=None, repr=False)
    #: As the acceptor: the token dialers must send. Without it (or with
    #: another) they get GOAWAY ``unauthenticated`` and never our HELLO.
    require_token: str | None = field(default=None, repr=False)
    #: Frame bytes queued for the peer (not yet taken by its socket) above
    #: which we stop reading its new calls and PINGs and item senders wait
    #: (at least 64 KiB): a peer that sends but does not read is held back
    #: by its own full socket instead of growing our queue. Answers, items,
    #: credit and cancels are still read.
    write_queue: int = DEFAULT_WRITE_QUEUE
    #: Seconds the queue may stay above ``write_queue`` while a new call
    #: waits to be read, before the connection is closed with GOAWAY
    #: ``resource_exhausted``.
    write_stall_timeout: float = 30.0

    def hello(self, dialer: bool) -> Hello:
        """Our HELLO. The service's methods are asked for once, here."""
        return fit_hello(Hello(
            versions=[VERSION],
            peer=PeerInfo(self.name, "python", SDK_VERSION),
            max_frame=self.max_frame,
            window=max(1, self.window),
            max_calls=max(1, self.max_calls),
            methods=self.service.methods() if self.service is not None else [],
            # Only a dialer sends a token (§4.4).
            token=self.token if dialer else None,
        ))
