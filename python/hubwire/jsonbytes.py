"""Byte strings inside JSON payloads (``spec/PROTOCOL.md`` §6): an array of
numbers, one per byte, as every other implementation writes them. msgspec
writes ``bytes`` in JSON as a base64 string and reads only that, so both
directions are bridged here:

* :func:`json_ready` turns a value into builtins with every byte string
  replaced by a list of ints, for the JSON encoder;
* :func:`bytes_from_arrays` turns the arrays of a decoded JSON value back
  into ``bytes`` where the expected type has a byte string, before
  ``msgspec.convert`` validates it.

Both cost a walk over the value; JSON is the codec for people, gateways and
debugging, not the fast path (MessagePack carries bytes as ``bin``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgspec
from msgspec import inspect as mi

_BYTES = (bytes, bytearray, memoryview)


def json_ready(value: Any) -> Any:
    """``value`` as builtins for the JSON encoder, byte strings as lists of ints."""
    if isinstance(value, _BYTES):
        return list(bytes(value))
    if value is None or isinstance(value, (str, int, float)):
        return value
    # Structs, dataclasses, enums, ... become dicts and lists; bytes stay bytes.
    out = msgspec.to_builtins(value, builtin_types=_BYTES)
    todo = [out]
    while todo:
        x = todo.pop()
        items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
        for k, y in items:
            if isinstance(y, _BYTES):
                x[k] = list(bytes(y))
            elif isinstance(y, (dict, list)):
                todo.append(y)
    return out


@lru_cache(maxsize=256)
def _info(t: Any) -> mi.Type:
    return mi.type_info(t)


@lru_cache(maxsize=256)
def has_bytes(t: Any) -> bool:
    """Whether values of type ``t`` can hold a byte string (then JSON input
    needs :func:`bytes_from_arrays`)."""
    seen: set[int] = set()

    def walk(i: mi.Type) -> bool:
        if id(i) in seen:
            return False
        seen.add(id(i))
        if isinstance(i, (mi.BytesType, mi.ByteArrayType, mi.MemoryViewType)):
            return True
        return any(walk(c) for c in _children(i))

    return walk(_info(t))


def _children(i: mi.Type) -> list[mi.Type]:
    """The types nested directly in ``i``."""
    if isinstance(i, mi.Metadata):
        return [i.type]
    if isinstance(i, (mi.StructType, mi.DataclassType, mi.TypedDictType, mi.NamedTupleType)):
        return [f.type for f in i.fields]
    if isinstance(i, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
        return [i.item_type]
    if isinstance(i, mi.TupleType):
        return list(i.item_types)
    if isinstance(i, mi.DictType):
        return [i.value_type]
    if isinstance(i, mi.UnionType):
        return list(i.types)
    return []


def bytes_from_arrays(value: Any, t: Any) -> Any:
    """``value`` (decoded JSON) with every array that stands where ``t`` has
    a byte string made ``bytes``. Arrays that are not all integers 0..255
    are left for validation to refuse."""
    return _convert(value, _info(t))


def _convert(v: Any, i: mi.Type) -> Any:
    if isinstance(i, mi.Metadata):
        return _convert(v, i.type)
    if isinstance(i, (mi.BytesType, mi.ByteArrayType, mi.MemoryViewType)):
        if isinstance(v, list) and all(type(x) is int and 0 <= x <= 255 for x in v):
            return bytes(v)
        return v
    if isinstance(v, dict) and isinstance(i, (mi.StructType, mi.DataclassType, mi.TypedDictType)):
        for f in i.fields:
            if f.encode_name in v:
                v[f.encode_name] = _convert(v[f.encode_name], f.type)
    elif isinstance(v, dict) and isinstance(i, mi.DictType):
        for k in v:
            v[k] = _convert(v[k], i.value_type)
    elif isinstance(v, list) and isinstance(i, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
        return [_convert(x, i.item_type) for x in v]
    elif isinstance(v, list) and isinstance(i, (mi.TupleType, mi.NamedTupleType)):
        types = list(i.item_types) if isinstance(i, mi.TupleType) else [f.type for f in i.fields]
        return [_convert(x, types[n]) if n < len(types) else x for n, x in enumerate(v)]
    elif isinstance(i, mi.UnionType):
        # Optional[X] and unions with one byte-string member: the non-None
        # member that can take the value's shape.
        for m in i.types:
            if not isinstance(m, mi.NoneType):
                got = _convert(v, m)
                if got is not v:
                    return got
    return v
