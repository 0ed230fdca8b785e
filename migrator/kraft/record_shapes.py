"""Shape-specialised record decoders, learned from the data.

Most records of a type share one layout: every PartitionRecord of a topic with three replicas has
arrays of 3, 3, 0 and 0 elements and an empty tagged section. For record types whose untagged fields
are fixed-size or arrays of fixed-size elements, a decoder learns each layout ("shape") it meets and
compiles one struct format covering the whole body, array lengths included. A body of a known length
is first tried against that shape; the array-length bytes and the tagged-field count are checked, so
a wrong guess only costs a fallback to the general decoder (`record_codegen`). Shapes are derived from
the same declarations, so the codec stays declaration-driven. The batch decoder (`batch_decode`) builds
its record runs on these shapes.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from migrator.kraft.record_codecs import GENERAL_DECODERS, Decoder
from migrator.kraft.record_codegen import FIXED, MAX_SHAPE_ARRAY, MAX_SHAPES, literal, shape_eligible
from migrator.kraft.record_types import UNKNOWN_TAGGED_FIELDS, frame
from migrator.kraft.schema import SCHEMAS, Field, RecordSchema
from migrator.kraft.uuids import UUID_CACHE, make_uuid


@dataclass(frozen=True, slots=True)
class ShapeSpec:
    """One learned body layout: struct format (no byte-order prefix), unpack targets, checks, result.

    ``checks`` are conditions on the targets that hold exactly when a body has this layout (array
    lengths and an empty tagged section); ``result`` is a dict display building the fields from the
    targets. ``names`` holds what those expressions refer to. ``codes`` is the struct code of each
    target, ``consts`` the value each checked target must have (the same facts as ``checks``, for
    callers that verify those bytes another way), and ``values`` the (field name, expression) pairs
    of ``result``, in field order; ``uuids`` are the targets holding a single uuid's 16 bytes. The batch decoder embeds these in its own generated
    functions to decode record framing and body with a single unpack.
    """

    shape: tuple[int, ...]
    fmt: str
    targets: tuple[str, ...]
    checks: tuple[str, ...]
    result: str
    size: int
    names: dict[str, Any]
    codes: tuple[str, ...] = ()
    consts: dict[str, int] = field(default_factory=dict)
    values: tuple[tuple[str, str], ...] = ()
    uuids: tuple[str, ...] = ()


class ShapeLearner:
    """Learns and compiles the shapes of one (apiKey, version)."""

    def __init__(self, schema: RecordSchema, version: int) -> None:
        present = schema.fields_in(version)
        self.api_key = schema.api_key
        self.version = version
        self.plain = [f for f in present if not f.is_tagged_in(version)]
        self.tagged = [f for f in present if f.is_tagged_in(version)]
        self.order = [f.name for f in present]
        self.arrays = [(f.name, FIXED[f.element_type][1]) for f in self.plain if f.is_array]
        self.fixed_size = sum(FIXED[f.type][1] for f in self.plain if not f.is_array) + len(self.arrays) + 1
        self.by_len: dict[int, Callable[[bytes, int, int], dict[str, Any] | None]] = {}
        self.by_shape: dict[tuple[int, ...], Callable[[bytes, int, int], dict[str, Any] | None]] = {}
        self.specs: dict[tuple[int, ...], ShapeSpec] = {}
        self.label = f"{schema.name} v{version}"

    def shape_of(self, fields: dict[str, Any], size: int) -> tuple[int, ...] | None:
        """The shape of a decoded body of ``size`` bytes, or None if it has no fixed layout."""
        if UNKNOWN_TAGGED_FIELDS in fields:
            return None
        counts = []
        total = self.fixed_size
        for name, elem_size in self.arrays:
            n = len(fields[name])
            if n > MAX_SHAPE_ARRAY:
                return None
            counts.append(n)
            total += n * elem_size
        if total != size:
            return None  # tagged fields present: the general decoder handles those
        return tuple(counts)

    def learn(self, fields: dict[str, Any], size: int) -> None:
        if len(self.by_shape) >= MAX_SHAPES:
            return
        shape = self.shape_of(fields, size)
        if shape is None:
            return
        fn = self.by_shape.get(shape)
        if fn is None:
            fn = self._compile(self.spec(shape))
            self.by_shape[shape] = fn
        self.by_len[size] = fn

    def spec(self, shape: tuple[int, ...]) -> ShapeSpec:
        cached = self.specs.get(shape)
        if cached is not None:
            return cached
        fmt: list[str] = []
        targets: list[str] = []
        checks: list[str] = []
        consts: dict[str, int] = {}
        values: dict[str, str] = {}
        scalar_uuids: list[tuple[int, Field]] = []
        counts = iter(shape)
        k = 0
        for f in self.plain:
            if not f.is_array:
                k += 1
                if f.type == "uuid":
                    scalar_uuids.append((k, f))
                fmt.append(FIXED[f.type][0])
                targets.append(f"v{k}")
                values[f.name] = f"(_ucg(v{k}) or _mku(v{k}))" if f.type == "uuid" else f"v{k}"
                continue
            n = next(counts)
            k += 1
            fmt.append("B")
            targets.append(f"c{k}")
            checks.append(f"c{k} == {n + 1}")
            consts[f"c{k}"] = n + 1
            code = FIXED[f.element_type][0]
            items = []
            for _ in range(n):
                k += 1
                fmt.append(code)
                targets.append(f"v{k}")
                items.append(f"(_ucg(v{k}) or _mku(v{k}))" if f.element_type == "uuid" else f"v{k}")
            values[f.name] = "[" + ", ".join(items) + "]"
        fmt.append("B")
        targets.append("t")
        checks.append("t == 0")
        consts["t"] = 0
        for f in self.tagged:
            values[f.name] = literal(f.default())
        result = "{" + ", ".join(f"{name!r}: {values[name]}" for name in self.order) + "}"
        spec = ShapeSpec(
            shape=shape,
            fmt="".join(fmt),
            targets=tuple(targets),
            checks=tuple(checks),
            result=result,
            size=struct.calcsize(">" + "".join(fmt)),
            names={"_ucg": UUID_CACHE.get, "_mku": make_uuid, "_ZERO": uuid.UUID(int=0)},
            codes=tuple(fmt),
            consts=consts,
            values=tuple((name, values[name]) for name in self.order),
            uuids=tuple(f"v{k}" for k, f in scalar_uuids),
        )
        self.specs[shape] = spec
        return spec

    def _compile(self, spec: ShapeSpec) -> Callable[[bytes, int, int], dict[str, Any] | None]:
        src = (
            "def shape(buf, pos, end):\n"
            f"    {', '.join(spec.targets)}, = _S.unpack_from(buf, pos)\n"
            f"    if {' and '.join(spec.checks)}:\n"
            f"        return {spec.result}\n"
            "    return None\n"
        )
        ns: dict[str, Any] = dict(spec.names, _S=struct.Struct(">" + spec.fmt))
        exec(compile(src, f"<{self.label} shape {spec.shape}>", "exec"), ns)
        return ns["shape"]


def _shaped_decoder(general: Decoder, learner: ShapeLearner) -> Decoder:
    get = learner.by_len.get
    learn = learner.learn

    def decode(buf: bytes, pos: int, end: int) -> dict[str, Any]:
        shape = get(end - pos)
        if shape is not None:
            fields = shape(buf, pos, end)
            if fields is not None:
                return fields
        fields = general(buf, pos, end)
        learn(fields, end - pos)
        return fields

    return decode


def _decoder_for(key: int) -> Decoder:
    schema = SCHEMAS[key >> 16]
    version = key & 0xFFFF
    general = GENERAL_DECODERS[key]
    if not shape_eligible(schema, version):
        return general
    learner = LEARNERS[key] = ShapeLearner(schema, version)
    return _shaped_decoder(general, learner)


#: (apiKey << 16 | version) -> the shape learner of record types with fixed-size layouts
LEARNERS: dict[int, ShapeLearner] = {}


#: (apiKey << 16 | version) -> decoder(buf, body_start, end) -> fields dict (shape-accelerated)
DECODERS: dict[int, Decoder] = {k: _decoder_for(k) for k in GENERAL_DECODERS}

_NO_SHAPES: dict[int, Any] = {}
#: The three frame bytes of every known (apiKey, version) whose varints are one byte each ->
#: (apiKey, version, shape lookup by body length, decoder); the batch decoder's dispatch table.
FAST_FRAMES: dict[bytes, tuple[int, int, Callable[[int], Any], Decoder]] = {
    frame(k >> 16, k & 0xFFFF): (
        k >> 16,
        k & 0xFFFF,
        (LEARNERS[k].by_len if k in LEARNERS else _NO_SHAPES).get,
        DECODERS[k],
    )
    for k in GENERAL_DECODERS
    if (k >> 16) < 128 and (k & 0xFFFF) < 128
}
