"""An example Python provider, the one ``make run``'s hub starts as a child
process: a chat command that translates every line it is sent into Pig
Latin, as a bidirectional stream (one answer per line, as the lines come).

    translate  {text} ... -> {text} ...   e.g. {"text": "hello hub"} -> {"text": "ellohay ubhay"}

Started by a hubwire parent (HUBWIRE_FD set) it serves the parent;
otherwise ``--listen unix:/path`` or ``--listen tcp:host:port``.
"""

from __future__ import annotations

import os
import re
import sys
from typing import AsyncIterator

import msgspec

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import hubwire  # noqa: E402


class Line(msgspec.Struct):
    """One line of chat."""

    text: str


class Empty(msgspec.Struct, tag="empty_line"):
    """The declared failure: a line with no words."""


provider = hubwire.Provider("translate")

_VOWELS = "aeiouAEIOU"


def pig_latin(word: str) -> str:
    """``hello`` -> ``ellohay``, ``apple`` -> ``appleway``; punctuation stays put."""
    m = re.match(r"^([A-Za-z]+)(.*)$", word)
    if m is None:
        return word
    core, rest = m.groups()
    if core[0] in _VOWELS:
        return core + "way" + rest
    i = next((i for i, c in enumerate(core) if c in _VOWELS), len(core))
    out = core[i:] + core[:i].lower() + "ay"
    return (out.capitalize() if core[0].isupper() else out) + rest


@provider.bidi(errors=Empty, doc="Translates each line into Pig Latin: {text} ... -> {text} ...")
async def translate(lines: hubwire.ItemStream[Line]) -> AsyncIterator[Line]:
    async for line in lines:
        if not line.text.split():
            raise hubwire.Failure(Empty())
        yield Line(" ".join(pig_latin(w) for w in line.text.split()))


if __name__ == "__main__":
    if "--listen" in sys.argv:
        provider.serve(sys.argv[sys.argv.index("--listen") + 1])
    else:
        print("translate: serving the parent", flush=True)  # a log line, never the framing
        provider.serve_child()
