"""The four call kinds (``spec/PROTOCOL.md`` §1), by their wire value."""

from __future__ import annotations

import enum


class Kind(enum.IntEnum):
    """A call kind: what streams each way."""

    unary = 0
    server_stream = 1
    client_stream = 2
    bidi = 3

    @property
    def streams_in(self) -> bool:
        """Whether the caller sends a stream of items (client_stream, bidi)."""
        return self >= 2

    @property
    def streams_out(self) -> bool:
        """Whether the callee sends a stream of items (server_stream, bidi)."""
        return bool(self & 1)

    def __str__(self) -> str:
        return self.name


def streams_in(kind: int) -> bool:
    """``Kind(kind).streams_in`` for a kind as it came off the wire, without
    making an enum member (the hot path serves one per call)."""
    return kind >= 2


def streams_out(kind: int) -> bool:
    """``Kind(kind).streams_out`` for a kind as it came off the wire."""
    return bool(kind & 1)
