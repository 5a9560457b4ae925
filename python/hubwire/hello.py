"""The handshake body (``spec/PROTOCOL.md`` §4): :class:`Hello`, its
validation with defaults filled in, its canonical compact JSON, and
version negotiation."""

from __future__ import annotations

import hmac
import json
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .codes import Code
from .errors import HubwireError

DEFAULT_MAX_FRAME = 16 * 1024 * 1024
DEFAULT_WINDOW = 64
DEFAULT_MAX_CALLS = 4096
MIN_MAX_FRAME = 4096
#: The longest ``token`` a HELLO may carry, in bytes (§4.4).
MAX_TOKEN = 4096
#: The HELLO body size every peer accepts whatever its ``max_frame``
#: (PROTOCOL.md §4.1.2): the first frame is read with the limit
#: ``max(max_frame, HELLO_LIMIT)``.
HELLO_LIMIT = 1 << 20
U32_MAX = 0xFFFFFFFF
KIND_NAMES = ("unary", "server_stream", "client_stream", "bidi")


@dataclass(frozen=True)
class PeerInfo:
    """Who a peer is: its name, implementation language and version."""

    name: str
    lang: str
    version: str


@dataclass(frozen=True)
class MethodInfo:
    """One method a peer offers, as HELLO lists it."""

    name: str
    kind: str
    input: Any = field(default_factory=dict)
    output: Any = field(default_factory=dict)
    #: JSON Schema of the method's failure values, or None.
    errors: Any = None
    #: One line saying what the method does, or None.
    doc: str | None = None


@dataclass(frozen=True)
class Hello:
    """A HELLO body with every default filled in."""

    versions: list[int]
    peer: PeerInfo
    max_frame: int = DEFAULT_MAX_FRAME
    window: int = DEFAULT_WINDOW
    max_calls: int = DEFAULT_MAX_CALLS
    methods: list[MethodInfo] = field(default_factory=list)
    #: The dialer's credential (§4.4), or None; an acceptor never sends
    #: one. Left out of ``repr`` so a logged HELLO never shows it.
    token: str | None = field(default=None, repr=False)


def token_matches(got: str, want: str) -> bool:
    """Whether ``got`` equals ``want``, in time that depends only on their
    lengths, never on where the first difference is (§4.4)."""
    return hmac.compare_digest(got.encode("utf-8"), want.encode("utf-8"))


def _bad(why: str) -> HubwireError:
    return HubwireError(Code.protocol_error, f"invalid HELLO body: {why}")


def _int(v: Any) -> bool:
    # JSON true/false are Python ints: they are not numbers here.
    return (type(v) is int) or (type(v) is float and v.is_integer())


def _u32(v: Any, name: str, low: int, default: int) -> int:
    if v is None:
        return default
    if not _int(v) or not low <= v <= U32_MAX:
        raise _bad(f"{name} must be an integer in {low}..{U32_MAX}, got {json.dumps(v)}")
    return int(v)


def _str(o: dict[str, Any], key: str, where: str) -> str:
    v = o.get(key)
    if not isinstance(v, str):
        raise _bad(f"{where}.{key} must be a string")
    return v


def _schema(v: Any, method: str, key: str) -> Any:
    """A method's schema: an object or a boolean; None when absent or null (PROTOCOL.md §4.1.1)."""
    if v is not None and not isinstance(v, (dict, bool)):
        raise _bad(f"method {method}: {key} must be a JSON Schema (an object or a boolean), got {json.dumps(v)}")
    return v


def hello_from_value(v: Any) -> Hello:
    """Validates a parsed HELLO object and fills in the defaults."""
    if not isinstance(v, dict):
        raise _bad("not a JSON object")
    versions = v.get("versions")
    if not isinstance(versions, list) or not versions:
        raise _bad("versions must be a non-empty list")
    for x in versions:
        if not _int(x) or not 1 <= x <= U32_MAX:
            raise _bad(f"versions must be integers >= 1, got {json.dumps(versions)}")
    p = v.get("peer")
    if not isinstance(p, dict):
        raise _bad("peer must be an object")
    peer = PeerInfo(_str(p, "name", "peer"), _str(p, "lang", "peer"), _str(p, "version", "peer"))
    methods_in = v.get("methods", [])
    if methods_in is None:
        methods_in = []
    if not isinstance(methods_in, list):
        raise _bad("methods must be a list")
    methods = []
    for m in methods_in:
        if not isinstance(m, dict):
            raise _bad("each method must be an object")
        name = _str(m, "name", "method")
        n = len(name.encode("utf-8"))
        if not 1 <= n <= 255:
            raise _bad(f"method name must be 1-255 bytes, got {n} bytes")
        kind = m.get("kind")
        if not isinstance(kind, str) or kind not in KIND_NAMES:
            raise _bad(f"method {name}: unknown kind {json.dumps(kind)}")
        doc = m.get("doc")
        if doc is not None and not isinstance(doc, str):
            raise _bad(f"method {name}: doc must be a string")
        inp, out, errs = (_schema(m.get(k), name, k) for k in ("input", "output", "errors"))
        methods.append(MethodInfo(name, kind, {} if inp is None else inp, {} if out is None else out, errs, doc))
    # null counts as absent (§4.1.1).
    token = v.get("token")
    if token is not None and not (isinstance(token, str) and 1 <= len(token.encode("utf-8")) <= MAX_TOKEN):
        raise _bad(f"token must be a string of 1-{MAX_TOKEN} bytes")
    return Hello(
        versions=[int(x) for x in versions],
        peer=peer,
        max_frame=_u32(v.get("max_frame"), "max_frame", MIN_MAX_FRAME, DEFAULT_MAX_FRAME),
        window=_u32(v.get("window"), "window", 1, DEFAULT_WINDOW),
        max_calls=_u32(v.get("max_calls"), "max_calls", 1, DEFAULT_MAX_CALLS),
        methods=methods,
        token=token,
    )


def parse_hello(body: bytes) -> Hello:
    """Parses and validates a HELLO body (UTF-8 JSON bytes)."""
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise _bad(str(e)) from None
    return hello_from_value(value)


def _sorted(v: Any) -> Any:
    # JSON Schema values are written with sorted keys (the canonical form
    # of spec/vectors/README.md).
    if isinstance(v, dict):
        return {k: _sorted(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [_sorted(x) for x in v]
    return v


def hello_value(h: Hello) -> dict[str, Any]:
    """The HELLO as a JSON value, keys in the canonical order."""
    methods = []
    for m in h.methods:
        o: dict[str, Any] = {"name": m.name, "kind": m.kind, "input": _sorted(m.input), "output": _sorted(m.output)}
        if m.errors is not None:
            o["errors"] = _sorted(m.errors)
        if m.doc is not None:
            o["doc"] = m.doc
        methods.append(o)
    value: dict[str, Any] = {
        "versions": list(h.versions),
        "peer": {"name": h.peer.name, "lang": h.peer.lang, "version": h.peer.version},
        "max_frame": h.max_frame,
        "window": h.window,
        "max_calls": h.max_calls,
        "methods": methods,
    }
    if h.token is not None:
        value["token"] = h.token
    return value


def fit_hello(h: Hello) -> Hello:
    """``h`` shortened to at most :data:`HELLO_LIMIT` body bytes, the size
    every peer accepts (PROTOCOL.md §4.1.2): first the docs go, then the
    schemas (``{}``, no ``errors``), which are descriptive; names and kinds
    always stay."""
    if len(encode_hello(h)) <= HELLO_LIMIT:
        return h
    no_docs = dataclasses.replace(h, methods=[dataclasses.replace(m, doc=None) for m in h.methods])
    if len(encode_hello(no_docs)) <= HELLO_LIMIT:
        return no_docs
    return dataclasses.replace(h, methods=[MethodInfo(m.name, m.kind, {}, {}) for m in h.methods])


def encode_hello(h: Hello) -> bytes:
    """The HELLO body as canonical compact JSON (UTF-8, nothing escaped that need not be)."""
    return json.dumps(hello_value(h), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def negotiate(ours: list[int], theirs: list[int]) -> int:
    """The highest version in both lists (§4.2), or ``unsupported_version``."""
    common = set(ours) & set(theirs)
    if not common:
        raise HubwireError(
            Code.unsupported_version,
            f"no common protocol version: we speak {sorted(ours)}, peer speaks {sorted(theirs)}",
        )
    return max(common)
