"""The protocol engine: everything between a transport and the API. It
knows frames, call ids, credit, deadlines and the connection's life; it
knows nothing of methods, handlers or typed values. The API above it
(``connection``, ``client``, ``stream``, ``provider``) calls down into it;
it calls up only through the one seam it defines, ``Service``.

| file | what |
|---|---|
| ``state`` | ``Core``: one connection's shared state; sending frames, starting and abandoning calls, draining, dying |
| ``handshake`` | opening a connection: HELLO both ways, version negotiation |
| ``reader`` | reading, parsing, routing each frame to its call |
| ``writer`` | the write queue: batched, vectored, no payload copies |
| ``calls`` | the call table's entries: calls we started, calls we serve, stream inboxes |
| ``credit`` | flow control: the credit we grant, the credit we have |
| ``serve`` | the serving seam: ``Service``, ``Incoming``, the protocol half of serving a REQUEST |
| ``options`` | ``ConnectionOptions`` |

There are no wait modes in Python: the event loop waits.
"""

from .options import SDK_VERSION, ConnectionOptions
from .serve import Answer, Incoming, Service

__all__ = ["ConnectionOptions", "Incoming", "Service", "Answer", "SDK_VERSION"]
