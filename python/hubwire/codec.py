"""Payload codecs (``spec/PROTOCOL.md`` §6): how a Python value becomes the
bytes of a payload and back, through msgspec.

* ``raw`` (0): ``bytes`` travel as they are, no encoding at all;
* ``msgpack`` (1): the default; shortest forms, structures as maps keyed
  by field name, byte strings as ``bin``;
* ``json`` (2): compact UTF-8 JSON, byte strings as arrays of numbers.

A type given as the expected type of a payload (a ``msgspec.Struct``,
``int``, ``list[str]``, ...) is validated as it is decoded; ``Any`` takes
whatever the payload holds. Decoders are made once per type and kept.
"""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass
from typing import Any, Union

import msgspec

from .codes import Code
from .errors import HubwireError
from .jsonbytes import bytes_from_arrays, has_bytes, json_ready

Buf = Union[bytes, bytearray, memoryview]


class Codec(enum.IntEnum):
    """A payload codec, by its wire value."""

    raw = 0
    msgpack = 1
    json = 2

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Payload:
    """A payload as it travels: its codec and its bytes."""

    codec: Codec
    data: Buf


RAW_SCHEMA = {"contentMediaType": "application/octet-stream"}

_mp_encoder = msgspec.msgpack.Encoder()
_json_encoder = msgspec.json.Encoder()
_mp_decoders: dict[Any, msgspec.msgpack.Decoder[Any]] = {}
_json_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def is_raw(t: Any) -> bool:
    """Whether ``t`` stands for raw bytes (no encoding)."""
    return t is bytes or t is bytearray or t is memoryview


def codec_of(name: Codec | str | int | None) -> Codec:
    """A codec from its name or value (None: MessagePack)."""
    if name is None:
        return Codec.msgpack
    if isinstance(name, str):
        try:
            return Codec[name]
        except KeyError:
            raise HubwireError(Code.invalid_argument, f"unknown codec {name!r}: raw, msgpack or json") from None
    return Codec(name)


def encode(value: Any, codec: Codec) -> bytes:
    """Encodes ``value`` with a structured codec (raw values are bytes already)."""
    if codec == Codec.json:
        # Byte strings as arrays of numbers (§6), not msgspec's base64.
        return _json_encoder.encode(json_ready(value))
    return _mp_encoder.encode(value)


def encode_raw_or(value: Any, codec: Codec) -> tuple[Codec, Buf]:
    """The payload of a value: bytes-like values travel raw when ``codec``
    is raw; everything else is encoded with ``codec`` (MessagePack when raw)."""
    if codec == Codec.raw:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return Codec.raw, value
        raise HubwireError(Code.invalid_argument, f"a raw payload must be bytes, got {type(value).__name__}")
    return codec, encode(value, codec)


def decoder_for(t: Any, codec: Codec) -> msgspec.msgpack.Decoder[Any] | msgspec.json.Decoder[Any]:
    """The cached decoder of type ``t`` for ``codec``."""
    if codec == Codec.json:
        j = _json_decoders.get(t)
        if j is None:
            j = _json_decoders[t] = msgspec.json.Decoder(t)
        return j
    m = _mp_decoders.get(t)
    if m is None:
        m = _mp_decoders[t] = msgspec.msgpack.Decoder(t)
    return m


def decode(data: Buf, codec: Codec | int, t: Any = Any) -> Any:
    """Decodes a structured payload as type ``t``. Raises ``ValueError``
    (msgspec's errors are ValueErrors) when it does not decode or validate,
    and for raw payloads, which have no structure."""
    if codec == Codec.raw:
        raise ValueError("expected structured data (msgpack or json), got raw bytes")
    try:
        if codec == Codec.json and t is not Any and has_bytes(t):
            # Byte strings arrive as arrays of numbers (§6); msgspec reads only base64.
            return msgspec.convert(bytes_from_arrays(msgspec.json.decode(data), t), t)
        v = decoder_for(t, Codec(codec)).decode(data)
    except RecursionError:
        # msgspec recurses; a deeply nested payload is a bad payload, not a crash.
        raise ValueError("the value is nested too deeply") from None
    if codec == Codec.msgpack:
        _check_data_model(v)
    return v


#: The deepest nesting of arrays and maps accepted (§6.2 lets a receiver
#: refuse deeper values), as in the other runtimes.
MAX_DEPTH = 128


def _check_data_model(v: Any) -> None:
    """Raises ``ValueError`` for what §6.2 refuses in a MessagePack payload
    and msgspec accepts: map keys that are not strings, ext values (msgspec
    gives ``Ext`` objects, and ``datetime`` for the timestamp), and nesting
    deeper than :data:`MAX_DEPTH`. Trailing bytes, 0xc1 and invalid UTF-8
    msgspec refuses itself. Walks dicts and lists without recursion; typed
    values (Structs) are not entered, their keys are field names."""
    todo: list[tuple[Any, int]] = [(v, 1)]
    while todo:
        x, depth = todo.pop()
        if isinstance(x, (dict, list, tuple)) and depth > MAX_DEPTH:
            raise ValueError(f"the value is nested deeper than {MAX_DEPTH} arrays and maps")
        if isinstance(x, dict):
            for k, y in x.items():
                if type(k) is not str:
                    raise ValueError(f"a map key must be a string, got {type(k).__name__}")
                todo.append((y, depth + 1))
        elif isinstance(x, (list, tuple)):
            todo.extend((y, depth + 1) for y in x)
        elif isinstance(x, (msgspec.msgpack.Ext, datetime.datetime)):
            raise ValueError("MessagePack ext types are not part of the data model")


def decode_as(data: Buf, codec: int, t: Any, code: Code, what: str) -> Any:
    """Decodes a payload as ``t`` (raw types take the bytes as they are),
    turning a mismatch into a :class:`HubwireError` with ``code``
    (``invalid_argument`` for a callee's input, ``internal`` for a caller's
    output)."""
    if is_raw(t):
        return data if type(data) is bytes else bytes(data)
    try:
        return decode(data, codec, t)
    except (ValueError, msgspec.DecodeError) as e:
        raise HubwireError(code, f"cannot decode {what}: {e}") from None


def schema_of(t: Any) -> Any:
    """The JSON Schema of a type, for HELLO: raw bytes are
    ``application/octet-stream``, ``Any`` is ``{}``."""
    if is_raw(t):
        return dict(RAW_SCHEMA)
    if t is Any:
        return {}
    try:
        return msgspec.json.schema(t)
    except (TypeError, ValueError):
        return {}
