"""Frames (``spec/PROTOCOL.md`` §2, §5): pure, bytes in and frames out, no I/O.

A frame is a 12-byte little-endian header and a body::

    bytes 0-3   body_len  u32
    byte  4     version   (1)
    byte  5     type      0x01 HELLO .. 0x0A GOAWAY
    byte  6     flags     REQUEST: bits 0-1 the call kind; others reserved
    byte  7     codec     0 raw, 1 msgpack, 2 json
    bytes 8-11  call_id   u32

:meth:`Decoder.check` is the cheap completeness check: it reads the header
alone, refuses what the header proves bad (version, size, type, codec,
call id, in the order of §2.2) before the body arrives, and says how long
the frame is. :func:`decode_body` then parses a checked, complete frame.
Encoding is :func:`encode` (whole frames, for tests and tools) and the
``*_head`` helpers the writer uses to put a header and fixed fields in
front of a payload without copying the payload.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Union

from .codes import Code, code_of
from .errors import HubwireError
from .hello import Hello, encode_hello, parse_hello

HEADER_LEN = 12
VERSION = 1
HEADER = struct.Struct("<IBBBBI")
_U32 = struct.Struct("<I")
_REQ = struct.Struct("<IB")  # timeout_ms, method length
_STATUS = struct.Struct("<BH")  # code, message length

HELLO, REQUEST, RESPONSE, ITEM, END, CANCEL, CREDIT, PING, PONG, GOAWAY = range(1, 11)
TYPE_NAMES = ("", "HELLO", "REQUEST", "RESPONSE", "ITEM", "END", "CANCEL", "CREDIT", "PING", "PONG", "GOAWAY")
KINDS = ("unary", "server_stream", "client_stream", "bidi")
CODECS = ("raw", "msgpack", "json")
DEFAULT_MAX_FRAME = 16 * 1024 * 1024

#: A payload as it sits in a frame: bytes, or a view of a read buffer.
Buf = Union[bytes, bytearray, memoryview]


def _protocol(message: str) -> HubwireError:
    return HubwireError(Code.protocol_error, message)


class HelloFrame(NamedTuple):
    """HELLO (0x01): the handshake body."""

    body: Hello


class Request(NamedTuple):
    """REQUEST (0x02): a new call."""

    call_id: int
    kind: int
    codec: int
    timeout_ms: int
    method: str
    payload: Buf


class Response(NamedTuple):
    """RESPONSE (0x03): the end of a call, with its status."""

    call_id: int
    codec: int
    code: Code
    message: str
    payload: Buf


class Item(NamedTuple):
    """ITEM (0x04): one stream item."""

    call_id: int
    codec: int
    payload: Buf


class End(NamedTuple):
    """END (0x05): the caller has no more items."""

    call_id: int


class Cancel(NamedTuple):
    """CANCEL (0x06): the caller abandons the call."""

    call_id: int


class Credit(NamedTuple):
    """CREDIT (0x07): more items may be sent on a call."""

    call_id: int
    credit: int


class Ping(NamedTuple):
    """PING (0x08): 8 opaque bytes to be echoed."""

    data: bytes


class Pong(NamedTuple):
    """PONG (0x09): the bytes of a PING."""

    data: bytes


class Goaway(NamedTuple):
    """GOAWAY (0x0A): draining (code ok) or a fatal error."""

    last_id: int
    code: Code
    message: str


Frame = Union[HelloFrame, Request, Response, Item, End, Cancel, Credit, Ping, Pong, Goaway]


class Decoder:
    """Turns a byte stream into frames. Holds only the limits; the caller owns the buffer."""

    __slots__ = ("max_frame", "version")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        #: The version byte every frame but HELLO must carry (set after negotiation).
        self.version = VERSION

    def check(self, b: Buf, off: int, avail: int) -> int:
        """-1 while the header at ``b[off:]`` is incomplete, else the whole
        frame's length (which may be more than is buffered). Raises the
        error the header alone proves, in the order of §2.2."""
        if avail < HEADER_LEN:
            return -1
        body_len, version, ftype, _flags, codec, call_id = HEADER.unpack_from(b, off)
        expected = VERSION if ftype == HELLO else self.version
        if version != expected:
            raise HubwireError(Code.unsupported_version, f"frame version {version}, expected {expected}")
        if body_len > self.max_frame:
            raise HubwireError(Code.too_large, f"frame body of {body_len} bytes exceeds the limit of {self.max_frame} bytes")
        if ftype < HELLO or ftype > GOAWAY:
            raise _protocol(f"unknown frame type 0x{ftype:02x}")
        if codec > 2:
            raise _protocol(f"unknown codec {codec}")
        if ftype in (HELLO, PING, PONG):
            if call_id != 0:
                raise _protocol(f"{TYPE_NAMES[ftype]} frame with call id {call_id}, must be 0")
        elif ftype != GOAWAY and call_id == 0:
            raise _protocol(f"{TYPE_NAMES[ftype]} frame with call id 0")
        return HEADER_LEN + int(body_len)

    def finish(self, b: Buf, off: int, avail: int) -> HubwireError | None:
        """At end of stream with ``avail`` unread bytes at ``b[off:]``: the
        error if they are part of a frame (the header checks run first)."""
        if avail == 0:
            return None
        try:
            n = self.check(b, off, avail)
        except HubwireError as e:
            return e
        if n < 0:
            return _protocol(f"truncated frame header: stream ended after {avail} of {HEADER_LEN} bytes")
        return _protocol(f"truncated frame body: stream ended after {avail} of {n} bytes")


def _text(b: Buf, start: int, end: int, what: str) -> str:
    try:
        return bytes(b[start:end]).decode("utf-8")
    except UnicodeDecodeError:
        raise _protocol(f"{what} is not valid UTF-8") from None


def request_fields(b: Buf, start: int, end: int, flags: int) -> tuple[int, int, str, int]:
    """The fixed fields of a REQUEST body at ``b[start:end]``: (kind,
    timeout_ms, method, where the payload starts)."""
    body_len = end - start
    if body_len < 5:
        raise _protocol(f"REQUEST body of {body_len} bytes is shorter than 5")
    timeout_ms, mlen = _REQ.unpack_from(b, start)
    if mlen == 0:
        raise _protocol("REQUEST with an empty method name")
    if mlen > body_len - 5:
        raise _protocol(f"REQUEST method length {mlen} exceeds the {body_len - 5} bytes left in the body")
    method = _text(b, start + 5, start + 5 + mlen, "method name")
    kind = flags & 3
    at = start + 5 + mlen
    if kind >= 2 and at != end:
        raise _protocol(f"{KINDS[kind]} REQUEST must have an empty payload, got {end - at} bytes")
    return kind, timeout_ms, method, at


def status_fields(b: Buf, start: int, end: int, name: str) -> tuple[Code, str, int]:
    """The fixed fields of a RESPONSE or GOAWAY body at ``b[start:end]``:
    (code, message, where the payload starts)."""
    body_len = end - start
    if body_len < 3:
        raise _protocol(f"{name} body of {body_len} bytes is shorter than 3")
    value, mlen = _STATUS.unpack_from(b, start)
    code = code_of(value)
    if code is None:
        raise _protocol(f"{name} with reserved status code {value}")
    if mlen > body_len - 3:
        raise _protocol(f"{name} message length {mlen} exceeds the {body_len - 3} bytes left in the body")
    message = _text(b, start + 3, start + 3 + mlen, "message") if mlen else ""
    return code, message, start + 3 + mlen


def decode_body(b: memoryview, off: int, n: int) -> Frame:
    """Parses the checked, complete frame at ``b[off:off+n]``. Payloads are
    copied out as ``bytes`` (the buffer is reused)."""
    _blen, _v, ftype, flags, codec, call_id = HEADER.unpack_from(b, off)
    start = off + HEADER_LEN
    end = off + n
    body_len = n - HEADER_LEN
    if ftype == ITEM:
        return Item(call_id, codec, bytes(b[start:end]))
    if ftype == REQUEST:
        kind, timeout_ms, method, at = request_fields(b, start, end, flags)
        return Request(call_id, kind, codec, timeout_ms, method, bytes(b[at:end]))
    if ftype == RESPONSE or ftype == GOAWAY:
        code, message, rest = status_fields(b, start, end, TYPE_NAMES[ftype])
        if ftype == RESPONSE:
            return Response(call_id, codec, code, message, bytes(b[rest:end]))
        if rest != end:
            raise _protocol(f"GOAWAY has {end - rest} bytes after its message")
        return Goaway(call_id, code, message)
    if ftype == END or ftype == CANCEL:
        if body_len != 0:
            raise _protocol(f"{TYPE_NAMES[ftype]} body must be 0 bytes, got {body_len}")
        return End(call_id) if ftype == END else Cancel(call_id)
    if ftype == CREDIT:
        if body_len != 4:
            raise _protocol(f"CREDIT body must be 4 bytes, got {body_len}")
        (credit,) = _U32.unpack_from(b, start)
        if credit == 0:
            raise _protocol("CREDIT of 0")
        return Credit(call_id, credit)
    if ftype == HELLO:
        return HelloFrame(parse_hello(bytes(b[start:end])))
    # PING or PONG (check() refused every other type).
    if body_len != 8:
        raise _protocol(f"{TYPE_NAMES[ftype]} body must be 8 bytes, got {body_len}")
    data = bytes(b[start:end])
    return Ping(data) if ftype == PING else Pong(data)


def decode(data: Buf, decoder: Decoder | None = None) -> tuple[Frame, int] | None:
    """The first frame of ``data`` and its length, or None if more bytes are
    needed. Raises :class:`HubwireError` on bad input."""
    d = decoder or Decoder()
    n = d.check(data, 0, len(data))
    if n < 0 or len(data) < n:
        return None
    return decode_body(memoryview(data), 0, n), n


# ---- Encoding ---------------------------------------------------------------


def header(ftype: int, flags: int, codec: int, call_id: int, body_len: int) -> bytes:
    """A 12-byte header."""
    return HEADER.pack(body_len, VERSION, ftype, flags, codec, call_id)


def message_bytes(message: str) -> bytes:
    """A status message as UTF-8, cut to 65535 bytes at a character boundary."""
    m = message.encode("utf-8")
    if len(m) <= 0xFFFF:
        return m
    end = 0xFFFF
    while m[end] & 0xC0 == 0x80:
        end -= 1
    return m[:end]


def request_head(call_id: int, kind: int, codec: int, timeout_ms: int, method: bytes, payload_len: int) -> bytes:
    """Header and fixed fields of a REQUEST; the payload follows."""
    body = 5 + len(method) + payload_len
    return HEADER.pack(body, VERSION, REQUEST, kind, codec, call_id) + _REQ.pack(timeout_ms, len(method)) + method


def status_head(ftype: int, call_id: int, codec: int, code: int, message: bytes, payload_len: int) -> bytes:
    """Header and fixed fields of a RESPONSE (payload follows) or a GOAWAY."""
    body = 3 + len(message) + payload_len
    return HEADER.pack(body, VERSION, ftype, 0, codec, call_id) + _STATUS.pack(code, len(message)) + message


def encode(f: Frame) -> bytes:
    """A whole frame as bytes."""
    if isinstance(f, HelloFrame):
        body = encode_hello(f.body)
        return header(HELLO, 0, 0, 0, len(body)) + body
    if isinstance(f, Request):
        return request_head(f.call_id, f.kind, f.codec, f.timeout_ms, f.method.encode(), len(f.payload)) + bytes(f.payload)
    if isinstance(f, Response):
        return status_head(RESPONSE, f.call_id, f.codec, f.code, message_bytes(f.message), len(f.payload)) + bytes(f.payload)
    if isinstance(f, Goaway):
        return status_head(GOAWAY, f.last_id, 0, f.code, message_bytes(f.message), 0)
    if isinstance(f, Item):
        return header(ITEM, 0, f.codec, f.call_id, len(f.payload)) + bytes(f.payload)
    if isinstance(f, End):
        return header(END, 0, 0, f.call_id, 0)
    if isinstance(f, Cancel):
        return header(CANCEL, 0, 0, f.call_id, 0)
    if isinstance(f, Credit):
        return header(CREDIT, 0, 0, f.call_id, 4) + _U32.pack(f.credit)
    if isinstance(f, Ping):
        return header(PING, 0, 0, 0, 8) + f.data
    return header(PONG, 0, 0, 0, 8) + f.data


def id_after(call_id: int, last: int) -> bool:
    """Whether ``call_id`` was started after ``last`` by the same peer, in the
    serial-number order of ``spec/PROTOCOL.md`` §3 (ids wrap after
    0xFFFFFFFF): ``(call_id - last) mod 2**32`` is in ``1..2**31 - 1``.
    ``last`` 0 means "none seen", so every id is after it (GOAWAY, §5.10)."""
    return last == 0 or 1 <= (call_id - last) % (1 << 32) < (1 << 31)
