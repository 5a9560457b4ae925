"""Payload codecs: one MessagePack value (``spec/PROTOCOL.md`` §6.2) and
byte strings inside JSON (§6)."""

from __future__ import annotations

from typing import Any, Optional

import msgspec
import pytest

from hubwire.codec import Codec, decode, encode


@pytest.mark.parametrize("h", ["c0", "01", "ca3fc00000", "cb3ff8000000000000", "a161", "c40100", "92c3c2", "81a16101", "82a16180a162910a", "de0001a16101", "dc000101"])
def test_msgpack_accepts_the_data_model(h: str) -> None:
    decode(bytes.fromhex(h), Codec.msgpack)


@pytest.mark.parametrize("h", ["", "0102", "80c0", "92c0", "cd01", "ddffffffff", "810102", "81c4016101", "9181c001", "d40100", "c7020501ff", "d6ff00000000", "c1", "a2c328"])
def test_msgpack_refuses_what_is_not_one_value(h: str) -> None:
    with pytest.raises((ValueError, msgspec.DecodeError)):
        decode(bytes.fromhex(h), Codec.msgpack)


class Blob(msgspec.Struct):
    data: bytes
    maybe: Optional[bytes] = None
    many: list[bytes] = []


def test_json_bytes_are_arrays_of_numbers() -> None:
    assert encode({"a": b"\x00\xff", "n": [bytearray(b"x"), 1]}, Codec.json) == b'{"a":[0,255],"n":[[120],1]}'
    assert encode(Blob(b"ab", None, [b"c"]), Codec.json) == b'{"data":[97,98],"maybe":null,"many":[[99]]}'
    got = decode(b'{"data":[97,98],"maybe":[1],"many":[[99]]}', Codec.json, Blob)
    assert got == Blob(b"ab", b"\x01", [b"c"])
    any_value: Any = decode(b"[1,2]", Codec.json)
    assert any_value == [1, 2]  # untyped JSON has no byte strings
    with pytest.raises(msgspec.ValidationError):
        decode(b'{"data":[300]}', Codec.json, Blob)


def test_a_large_hello_is_shortened() -> None:
    """PROTOCOL.md §4.1.2: docs go first, then schemas; names and kinds stay."""
    from hubwire.hello import HELLO_LIMIT, Hello, MethodInfo, PeerInfo, encode_hello, fit_hello

    def hello(n: int, schema_pad: int, doc_pad: int) -> Hello:
        methods = [MethodInfo(f"m{i}", "unary", {"description": "x" * schema_pad}, {}, True, "d" * doc_pad) for i in range(n)]
        return Hello(versions=[1], peer=PeerInfo("many", "python", "0"), methods=methods)

    small = hello(10, 100, 100)
    assert fit_hello(small) is small
    docs = fit_hello(hello(3000, 30, 300))
    assert len(encode_hello(docs)) <= HELLO_LIMIT and docs.methods[0].doc is None and docs.methods[0].errors is True
    schemas = fit_hello(hello(3000, 300, 10))
    assert len(encode_hello(schemas)) <= HELLO_LIMIT and schemas.methods[0].errors is None and len(schemas.methods) == 3000
