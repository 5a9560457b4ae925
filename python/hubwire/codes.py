"""The status codes of ``spec/errors.md``: one byte on the wire, one name
everywhere. The members are spelled exactly as the spec spells them
(``Code.deadline_exceeded``), so ``code.name`` is the name used in logs,
vectors and the conformance suite."""

from __future__ import annotations

import enum


class Code(enum.IntEnum):
    """A hubwire status code (``spec/errors.md``); values 14-255 are reserved."""

    ok = 0
    failure = 1
    defect = 2
    unknown_method = 3
    invalid_argument = 4
    deadline_exceeded = 5
    cancelled = 6
    unavailable = 7
    resource_exhausted = 8
    too_large = 9
    protocol_error = 10
    unsupported_version = 11
    internal = 12
    unauthenticated = 13

    def __str__(self) -> str:
        return self.name


#: The highest value defined in protocol version 1; anything above is reserved.
MAX_CODE = 13


def code_of(value: int) -> Code | None:
    """The code with wire value ``value``, or None if it is reserved."""
    if 0 <= value <= MAX_CODE:
        return Code(value)
    return None
