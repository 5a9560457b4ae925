"""The byte-level vectors of ``spec/vectors/`` (``spec/vectors/README.md``),
every case of every file, both directions, and the status codes against
``spec/codes.json``."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import msgspec
import pytest

from hubwire import frame as fr
from hubwire.codec import Codec, decode, encode
from hubwire.codes import Code
from hubwire.errors import HubwireError
from hubwire.hello import encode_hello, hello_from_value, hello_value, negotiate, parse_hello

SPEC = Path(__file__).resolve().parents[2] / "spec"


def load(name: str) -> dict[str, Any]:
    return json.loads((SPEC / "vectors" / name).read_text())  # type: ignore[no-any-return]


def cases(name: str, section: str = "cases") -> list[Any]:
    return [pytest.param(c, id=c["name"]) for c in load(name)[section]]


def frame_fields(f: fr.Frame) -> dict[str, Any]:
    """A decoded frame as the `frame` object of frames.json."""
    if isinstance(f, fr.HelloFrame):
        return {"type": "hello", "body": hello_value(f.body)}
    if isinstance(f, fr.Request):
        return {"type": "request", "call_id": f.call_id, "kind": fr.KINDS[f.kind], "codec": fr.CODECS[f.codec],
                "timeout_ms": f.timeout_ms, "method": f.method, "payload_hex": bytes(f.payload).hex()}
    if isinstance(f, fr.Response):
        return {"type": "response", "call_id": f.call_id, "codec": fr.CODECS[f.codec], "code": f.code.name,
                "message": f.message, "payload_hex": bytes(f.payload).hex()}
    if isinstance(f, fr.Item):
        return {"type": "item", "call_id": f.call_id, "codec": fr.CODECS[f.codec], "payload_hex": bytes(f.payload).hex()}
    if isinstance(f, (fr.End, fr.Cancel)):
        return {"type": type(f).__name__.lower(), "call_id": f.call_id}
    if isinstance(f, fr.Credit):
        return {"type": "credit", "call_id": f.call_id, "credit": f.credit}
    if isinstance(f, (fr.Ping, fr.Pong)):
        return {"type": type(f).__name__.lower(), "data_hex": f.data.hex()}
    assert isinstance(f, fr.Goaway)
    return {"type": "goaway", "last_id": f.last_id, "code": f.code.name, "message": f.message}


def frame_of(o: dict[str, Any]) -> fr.Frame:
    """The `frame` object of frames.json as a frame."""
    t = o["type"]
    if t == "hello":
        return fr.HelloFrame(hello_from_value(o["body"]))
    if t == "request":
        return fr.Request(o["call_id"], fr.KINDS.index(o["kind"]), fr.CODECS.index(o["codec"]), o["timeout_ms"], o["method"],
                          bytes.fromhex(o["payload_hex"]))
    if t == "response":
        return fr.Response(o["call_id"], fr.CODECS.index(o["codec"]), Code[o["code"]], o["message"], bytes.fromhex(o["payload_hex"]))
    if t == "item":
        return fr.Item(o["call_id"], fr.CODECS.index(o["codec"]), bytes.fromhex(o["payload_hex"]))
    if t in ("end", "cancel"):
        return (fr.End if t == "end" else fr.Cancel)(o["call_id"])
    if t == "credit":
        return fr.Credit(o["call_id"], o["credit"])
    if t in ("ping", "pong"):
        return (fr.Ping if t == "ping" else fr.Pong)(bytes.fromhex(o["data_hex"]))
    return fr.Goaway(o["last_id"], Code[o["code"]], o["message"])


@pytest.mark.parametrize("case", cases("frames.json"))
def test_frame_decodes_and_encodes(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["hex"])
    got = fr.decode(data)
    assert got is not None
    f, n = got
    assert n == len(data)
    assert frame_fields(f) == case["frame"]
    for cut in (0, 5, 11, len(data) - 1):
        if cut < len(data):
            assert fr.decode(data[:cut]) is None, f"a prefix of {cut} bytes asks for more"
    assert fr.encode(frame_of(case["frame"])) == data


@pytest.mark.parametrize("case", cases("frames.json", "decode_only"))
def test_frame_decode_only(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["hex"])
    got = fr.decode(data)
    assert got is not None
    assert frame_fields(got[0]) == case["frame"]
    expected = bytearray(data)
    expected[6] = expected[6] & 3 if expected[5] == fr.REQUEST else 0
    assert fr.encode(frame_of(case["frame"])) == bytes(expected)


@pytest.mark.parametrize("case", cases("handshake.json"))
def test_hello_bodies(case: dict[str, Any]) -> None:
    body = case["body_json"].encode()
    if case["valid"]:
        h = parse_hello(body)
        assert hello_value(h) == case["hello"]
        frame = fr.header(fr.HELLO, 0, 0, 0, len(body)) + body
        got = fr.decode(frame)
        assert got is not None and frame_fields(got[0])["body"] == case["hello"]
        assert json.loads(encode_hello(h)) == case["hello"]
    else:
        with pytest.raises(HubwireError) as e:
            parse_hello(body)
        assert e.value.code.name == case["error"]
        with pytest.raises(HubwireError) as e:
            fr.decode(fr.header(fr.HELLO, 0, 0, 0, len(body)) + body)
        assert e.value.code.name == case["error"]


@pytest.mark.parametrize("case", cases("handshake.json", "negotiation"))
def test_negotiation(case: dict[str, Any]) -> None:
    if "result" in case:
        assert negotiate(case["ours"], case["theirs"]) == case["result"]
    else:
        with pytest.raises(HubwireError) as e:
            negotiate(case["ours"], case["theirs"])
        assert e.value.code.name == case["error"]
        assert case.get("message_contains", "") in e.value.message


def same(a: Any, b: Any) -> bool:
    """Values equal as the vectors mean it: integers as integers, other numbers as float64."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and (a == b or (math.isnan(a) and math.isnan(b)))
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("case", cases("codecs.json"))
def test_codecs(case: dict[str, Any]) -> None:
    mp = bytes.fromhex(case["msgpack_hex"])
    assert same(decode(mp, Codec.msgpack), case["value"])
    assert encode(case["value"], Codec.msgpack).hex() == case["msgpack_hex"]
    assert encode(case["value"], Codec.json).decode() == case["json"]
    assert same(decode(case["json"].encode(), Codec.json), case["value"])


@pytest.mark.parametrize("case", cases("codecs.json", "bin"))
def test_codec_bin(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["bytes_hex"])
    assert encode(data, Codec.msgpack).hex() == case["msgpack_hex"]
    assert decode(bytes.fromhex(case["msgpack_hex"]), Codec.msgpack, bytes) == data
    assert msgspec.msgpack.decode(bytes.fromhex(case["msgpack_hex"])) == data
    assert encode(data, Codec.json).decode() == case["json"]
    assert decode(case["json"].encode(), Codec.json, bytes) == data


@pytest.mark.parametrize("case", cases("codecs.json", "json_numbers"))
def test_codec_json_number(case: dict[str, Any]) -> None:
    value = decode(case["json"].encode(), Codec.json, float)
    assert struct.pack(">d", value).hex() == case["f64_hex"]


@pytest.mark.parametrize("case", cases("reject.json"))
def test_reject(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["hex"])
    d = fr.Decoder(case.get("max_frame", fr.DEFAULT_MAX_FRAME))
    mv = memoryview(data)
    off = 0
    err: HubwireError | None = None
    try:
        while True:
            n = d.check(mv, off, len(data) - off)
            if n < 0 or len(data) - off < n:
                break
            fr.decode_body(mv, off, n)
            off += n
    except HubwireError as e:
        err = e
    if err is None:
        assert case["eof"], "the decoder should have refused from the bytes it had"
        err = d.finish(mv, off, len(data) - off)
    assert err is not None, "no error at end of stream"
    assert err.code.name == case["error"], err.message
    assert case.get("message_contains", "") in err.message


def test_codes_match_codes_json() -> None:
    table = json.loads((SPEC / "codes.json").read_text())["codes"]
    assert [(c["value"], c["name"]) for c in table] == [(c.value, c.name) for c in Code]
