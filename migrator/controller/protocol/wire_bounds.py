"""The bounds check every frame passes before kio reads it (see the comment below for why).

Split out of `wire`: it follows the same kio entity classes, field by field, and knows nothing of
which apiKey is being read.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from collections.abc import Callable
from typing import Any

from migrator.controller.protocol.wire_versions import WireError
from migrator.kraft.varint import BadValue, read_uvarint

# --- bounds check before kio reads ---------------------------------------------------------------
#
# kio's native reader allocates an array's claimed length before it looks at the bytes: one damaged
# length (a few bytes on the wire) makes it ask for hundreds of GB and abort the whole process, which
# no `except` can catch. So every frame is walked here first, following the same entity classes, and
# any length that cannot fit in the bytes left is a WireError before kio sees it.

_FIXED = {
    "int8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}


class _Cursor:
    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes | memoryview, pos: int, end: int) -> None:
        self.data, self.pos, self.end = data, pos, end

    def take(self, n: int) -> int:
        if n < 0 or self.pos + n > self.end:
            raise WireError(f"a field of {n} bytes at offset {self.pos} runs past the frame ({self.end})")
        at = self.pos
        self.pos += n
        return at

    def uvarint(self) -> int:
        """An unsigned varint read by the log's reader (kraft.varint), kept inside the frame."""
        try:
            value, pos = read_uvarint(self.data, self.pos)
        except BadValue:
            raise WireError(f"a varint at offset {self.pos} is longer than 5 bytes or 32 bits") from None
        except IndexError:
            raise WireError(f"a varint at offset {self.pos} runs past the frame ({self.end})") from None
        if pos > self.end:
            raise WireError(f"a varint at offset {self.pos} runs past the frame ({self.end})")
        self.pos = pos
        return value

    def int16(self) -> int:
        return int(struct.unpack_from(">h", self.data, self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack_from(">i", self.data, self.take(4))[0])

    def length(self, flexible: bool, wide: bool) -> int:
        """A string's or array's length (-1 for null), checked to fit in what is left."""
        n = self.uvarint() - 1 if flexible else (self.int32() if wide else self.int16())
        if n < -1 or n > self.end - self.pos:
            raise WireError(f"a length of {n} at offset {self.pos} does not fit in the frame")
        return n

    def tagged_fields(self, on_tag: Callable[[int, _Cursor], None] | None = None) -> None:
        if self.pos < self.end and self.data[self.pos] == 0:  # no tagged field: nearly every entity
            self.pos += 1
            return
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            at = self.take(size)
            if on_tag is not None:
                on_tag(tag, _Cursor(self.data, at, at + size))


def _unwrap(tp: Any) -> tuple[Any, bool]:
    """The type inside ``X | None``, and whether None was allowed (Kafka's nullableVersions)."""
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        return next(a for a in typing.get_args(tp) if a is not type(None)), True
    return tp, False


_Step = Callable[[_Cursor], None]


def _value_step(tp: Any, kafka_type: str | None, flexible: bool) -> _Step:
    """A checker for one field, built once per entity class (the walk runs on every request)."""
    tp, nullable = _unwrap(tp)

    def length(cur: _Cursor, wide: bool) -> int:
        n = cur.length(flexible, wide)
        if n == -1 and not nullable:
            raise WireError(f"a null at offset {cur.pos} where the schema allows none")
        return max(n, 0)

    if typing.get_origin(tp) is tuple:
        inner = typing.get_args(tp)[0]
        size = _FIXED.get(kafka_type or "") if not dataclasses.is_dataclass(inner) else None
        if size is not None:

            def fixed_array(cur: _Cursor) -> None:
                cur.take(length(cur, True) * size)

            return fixed_array
        item = _value_step(inner, kafka_type, flexible)
        entities: list[_Step] = []  # an array of entities: their step itself, looked up once

        def array(cur: _Cursor) -> None:
            n = length(cur, True)
            if n and dataclasses.is_dataclass(inner):
                if not entities:
                    entities.append(_entity_step(inner))
                step = entities[0]
                for _ in range(n):
                    step(cur)
                return
            for _ in range(n):
                item(cur)

        return array
    if dataclasses.is_dataclass(tp):
        if nullable:
            raise WireError(f"nullable struct {tp.__name__} is not supported")
        found: list[_Step] = []  # resolved on first use (an entity's step is built when first met)

        def nested(cur: _Cursor) -> None:
            if not found:
                found.append(_entity_step(tp))
            found[0](cur)

        return nested
    if kafka_type in _FIXED:
        size = _FIXED[kafka_type]
        return lambda cur: cur.take(size) and None
    if kafka_type == "string":
        return lambda cur: cur.take(length(cur, False)) and None
    if kafka_type in ("bytes", "records"):
        return lambda cur: cur.take(length(cur, True)) and None
    raise WireError(f"cannot check a field of Kafka type {kafka_type!r}")


_ENTITY_STEPS: dict[Any, _Step] = {}


def _entity_step(cls: Any) -> _Step:
    found = _ENTITY_STEPS.get(cls)
    if found is not None:
        return found
    flexible = bool(cls.__flexible__)
    steps: list[_Step] = []
    tagged: dict[int, _Step] = {}
    run = 0  # bytes of the fixed-size fields in a row so far: one take for all of them
    for f in dataclasses.fields(cls):
        kafka_type = f.metadata.get("kafka_type")
        if "tag" in f.metadata:
            tagged[int(f.metadata["tag"])] = _value_step(f.type, kafka_type, flexible)
        elif _is_fixed(f.type, kafka_type):
            run += _FIXED[str(kafka_type)]
        else:
            if run:
                steps.append(_take_step(run))
                run = 0
            steps.append(_value_step(f.type, kafka_type, flexible))
    if run:
        steps.append(_take_step(run))

    def on_tag(tag: int, sub: _Cursor) -> None:
        step = tagged.get(tag)
        if step is not None:
            step(sub)

    def entity(cur: _Cursor) -> None:
        for step in steps:
            step(cur)
        if flexible:
            cur.tagged_fields(on_tag)

    _ENTITY_STEPS[cls] = entity
    return entity


def _is_fixed(tp: Any, kafka_type: str | None) -> bool:
    """A field of one fixed size: a scalar, not an array of them (``tuple[i32, ...]``, nullable or not,
    has the element's kafka_type too) and not a struct."""
    inner, nullable = _unwrap(tp)
    return (
        kafka_type in _FIXED
        and not nullable
        and typing.get_origin(inner) is not tuple
        and not dataclasses.is_dataclass(inner)
    )


def _take_step(size: int) -> _Step:
    """Fixed-size fields in a row, checked as one: a request's per-partition walk was most of its
    decode (AlterPartition under load), and a run fits in the frame exactly when each field does."""

    def take(cur: _Cursor) -> None:
        cur.take(size)

    return take


def _check_request_header(data: bytes | memoryview, flexible: bool) -> None:
    cur = _Cursor(data, 0, len(data))
    cur.take(8)  # apiKey, apiVersion, correlationId
    cur.take(max(cur.length(False, wide=False), 0))  # ClientId: a legacy string even in header v2
    if flexible:
        cur.tagged_fields()


def _check_body(cls: Any, data: bytes | memoryview, pos: int) -> None:
    _entity_step(cls)(_Cursor(data, pos, len(data)))
