"""hubwire for Python: call any hubwire provider, or be one, over child
processes, Unix sockets, TCP or memory, with asyncio or from plain
threads (:mod:`hubwire.blocking`). See ``python/README.md``."""

from .codec import Codec, Payload
from .codes import Code
from .connection import Connection, connect, spawn
from .context import CallContext
from .engine.options import SDK_VERSION, ConnectionOptions
from .engine.serve import Incoming, Service
from .errors import Failure, HubwireError
from .hello import Hello, MethodInfo, PeerInfo
from .kind import Kind
from .provider import Provider
from .stream import BidiStream, ClientStream, ItemSink, ItemStream
from . import testing  # noqa: E402  (hubwire.testing.pair)

__version__ = SDK_VERSION

__all__ = [
    "BidiStream",
    "CallContext",
    "ClientStream",
    "Code",
    "Codec",
    "Connection",
    "ConnectionOptions",
    "Failure",
    "Hello",
    "HubwireError",
    "Incoming",
    "ItemSink",
    "ItemStream",
    "Kind",
    "MethodInfo",
    "Payload",
    "PeerInfo",
    "Provider",
    "Service",
    "connect",
    "spawn",
]
