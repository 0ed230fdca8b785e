"""KRaft metadata record values: Kafka's framing plus the flexible-version body, driven by `schema.py`.

A value is ``uvarint frameVersion (1) | uvarint apiKey | uvarint version | body``. The body codec is one
generic engine: at import time it reads the declarations in `schema.py` and compiles, for every
(apiKey, version), a specialised encoder and decoder as Python source (runs of fixed-size fields become
one ``struct`` call, varints take an inline one-byte fast path). Nothing here is written per record type.

Decoders work on ``bytes`` between two positions so that a whole record batch can be decoded without
slicing each value out first (`batch.decode_batch_records`). They raise `CorruptRecordError`.

Record types whose untagged fields are fixed-size or arrays of fixed-size elements (PartitionRecord,
the bulk of any metadata log) also get shape-specialised codecs: once the array lengths are known the
whole body is one ``struct`` format, learned on first sight and verified byte for byte (`ShapeLearner`).
"""

from __future__ import annotations

import base64
import binascii
import operator
import os
import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from migrator.errors import BadInputError
from migrator.kraft.schema import CONTROL_SCHEMAS, SCHEMAS, Field, RecordSchema, schema_by_name

__all__ = [
    "FRAME_VERSION",
    "UNKNOWN_TAGGED_FIELDS",
    "CorruptRecordError",
    "InvalidUuidError",
    "MetadataRecord",
    "OpaqueRecord",
    "decode_value",
    "encode_value",
    "encode_values",
    "kafka_to_uuid",
    "record",
    "uuid_to_kafka",
]

#: The metadata value frame version Kafka writes and reads (0 was the 2.8 preview format).
FRAME_VERSION = 1

#: Key under which a decoded struct keeps tagged fields this schema does not know, as {tag: bytes};
#: the encoder writes them back in tag order, so such records round-trip unchanged.
UNKNOWN_TAGGED_FIELDS = "_unknown_tagged_fields"


class CorruptRecordError(BadInputError):
    """A metadata record value that cannot be decoded; the message names where it was found."""

    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}corrupt metadata record: {reason}")


class InvalidUuidError(BadInputError, ValueError):
    """A string that is not Kafka's 22-character base64url Uuid."""


class _Bad(Exception):
    """Raised inside generated decoders; converted to CorruptRecordError with a location outside."""


#: Exceptions a decoder raises on malformed input (anything else is a bug and propagates).
DECODE_ERRORS: tuple[type[Exception], ...] = (
    _Bad,
    struct.error,
    IndexError,
    UnicodeDecodeError,
    ValueError,
)


def decode_error_reason(exc: Exception, size: int) -> str:
    """One line describing why a generated decoder failed on a value of ``size`` bytes."""
    if isinstance(exc, _Bad):
        return str(exc)
    if isinstance(exc, struct.error | IndexError):
        return f"value truncated ({size} bytes)"
    if isinstance(exc, UnicodeDecodeError):
        return f"string is not valid UTF-8 ({exc.reason} at byte {exc.start})"
    if isinstance(exc, ValueError) and "16-char" in str(exc):
        return f"value truncated inside a uuid ({size} bytes)"
    return str(exc)


# ----------------------------------------------------------------------------------------------
# Records


class MetadataRecord(NamedTuple):
    """A decoded metadata record: its apiKey, version and fields by Kafka's CamelCase names.

    A named tuple rather than a frozen dataclass because decoding builds one per record, and a tuple is
    the cheapest immutable object CPython creates (`_new_record`). It compares equal only to another
    MetadataRecord, never to a plain tuple or an `OpaqueRecord`, as the dataclass did.
    """

    api_key: int
    version: int
    fields: dict[str, Any]

    @property
    def name(self) -> str:
        return SCHEMAS[self.api_key].name

    def __eq__(self, other: object) -> bool:
        if type(other) is MetadataRecord:
            return tuple.__eq__(self, other)
        return NotImplemented if not isinstance(other, tuple) else False

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]  # fields is a dict, as with the frozen dataclass


@dataclass(frozen=True, slots=True)
class OpaqueRecord:
    """A record whose apiKey or version this build does not know; its body bytes are kept as read."""

    api_key: int
    version: int
    body: bytes

    @property
    def name(self) -> str:
        known = SCHEMAS.get(self.api_key)
        return f"{known.name if known else 'UnknownRecord'}(apiKey={self.api_key}, v{self.version})"


_tuple_new = tuple.__new__


def _new_record(api_key: int, version: int, fields: dict[str, Any]) -> MetadataRecord:
    """Build a MetadataRecord without the named tuple's Python-level __new__."""
    return _tuple_new(MetadataRecord, (api_key, version, fields))


# ----------------------------------------------------------------------------------------------
# Uuids


def uuid_to_kafka(u: uuid.UUID) -> str:
    """Kafka's string form of a Uuid: base64url of its 16 bytes without padding (22 characters)."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


def kafka_to_uuid(s: str) -> uuid.UUID:
    """Parse Kafka's Uuid string (as in ZooKeeper's ``topic_id``); raises InvalidUuidError."""
    if not isinstance(s, str) or len(s) != 22:
        raise InvalidUuidError(f"invalid Kafka Uuid {s!r}: expected 22 base64url characters")
    try:
        raw = base64.urlsafe_b64decode(s + "==")
    except (binascii.Error, ValueError):
        raise InvalidUuidError(f"invalid Kafka Uuid {s!r}: not base64url") from None
    if len(raw) != 16 or uuid_to_kafka(uuid.UUID(bytes=raw)) != s:
        raise InvalidUuidError(f"invalid Kafka Uuid {s!r}: not base64url") from None
    return uuid.UUID(bytes=raw)


_UUID_CACHE: dict[bytes, uuid.UUID] = {}
_UUID_CACHE_MAX = 1 << 16


def _make_uuid(raw: bytes) -> uuid.UUID:
    """Decode 16 bytes to a UUID, remembering it: topic ids and directory ids repeat a lot."""
    u = uuid.UUID(bytes=raw)
    if len(_UUID_CACHE) >= _UUID_CACHE_MAX:
        _UUID_CACHE.clear()
    _UUID_CACHE[raw] = u
    return u


# ----------------------------------------------------------------------------------------------
# Varints (unsigned, as Kafka's ByteUtils: at most 5 bytes for 32-bit values)

_UV_TABLE_SIZE = 1 << 14


def _encode_uvarint(n: int) -> bytes:
    if n < 0 or n > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {n}")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


#: uvarint bytes of 0..16383 (one byte below 128, two above), built by formula: import time matters.
_UV: list[bytes] = [
    bytes((i,)) if i < 128 else bytes(((i & 0x7F) | 0x80, i >> 7)) for i in range(_UV_TABLE_SIZE)
]


def _zigzag_bytes(n: int) -> bytes:
    """Signed (zigzag) varint bytes of a non-negative int, as record framing uses."""
    return _encode_uvarint(n << 1)


#: Offset delta i as its zigzag varint bytes read as one big-endian int (1 byte below 64, else 2).
_OD_INT: list[int] = [2 * i if i < 64 else (((2 * i) & 0x7F | 0x80) << 8) | (2 * i) >> 7 for i in range(8192)]


def encode_uvarint(n: int) -> bytes:
    """Unsigned varint bytes of ``n`` (0 ≤ n < 2**32)."""
    return _UV[n] if 0 <= n < _UV_TABLE_SIZE else _encode_uvarint(n)


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """Read an unsigned varint at ``pos``; returns (value, next position). Raises _Bad if overlong."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result > 0xFFFFFFFF:
                raise _Bad(f"unsigned varint at byte {pos - 5} exceeds 32 bits")
            return result, pos
        shift += 7
        if shift > 28:
            raise _Bad(f"unsigned varint at byte {pos - 5} is longer than 5 bytes")


# ----------------------------------------------------------------------------------------------
# Code generation

_FIXED: dict[str, tuple[str, int]] = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "uint16": ("H", 2),
    "float64": ("d", 8),
    "bool": ("?", 1),
    "uuid": ("16s", 16),
}
_SMALL_ARRAY = 64


def shape_eligible(schema: RecordSchema, version: int) -> bool:
    """Whether a record version's layout is fixed once its array lengths are known (see ShapeLearner)."""
    plain = [f for f in schema.fields_in(version) if not f.is_tagged_in(version)]
    arrays = [f for f in plain if f.is_array]
    return bool(arrays) and all(
        (f.element_type in _FIXED) and not f.is_struct and not f.is_nullable_in(version) for f in plain
    )


#: Shape-specialised codecs: at most this many layouts per record version, arrays up to this long.
_MAX_SHAPES = 64
_MAX_SHAPE_ARRAY = 32


class _Compiler:
    """Turns schema declarations into specialised Python functions (source text, exec'd once)."""

    def __init__(self) -> None:
        self.ns: dict[str, Any] = {
            "_Bad": _Bad,
            "_uvarint": read_uvarint,
            "_UV": _UV,
            "_uvenc": _encode_uvarint,
            "_ucg": _UUID_CACHE.get,
            "_mku": _make_uuid,
            "_Struct": struct.Struct,
            "_unpack_from": struct.unpack_from,
            "_tagged": _encode_tagged_section,
            "_UNK": UNKNOWN_TAGGED_FIELDS,
            "_new": _new_record,
            "_ZERO": uuid.UUID(int=0),
        }
        for t, (code, _size) in _FIXED.items():
            if t != "uuid":
                self.ns[f"_A_{code}"] = tuple(struct.Struct(f">{i}{code}") for i in range(_SMALL_ARRAY))
                self.ns[f"_S_{code}"] = struct.Struct(f">{code}")
        self.lines: list[str] = []
        self.framed: dict[int, str] = {}
        self._structs: dict[str, str] = {}
        self._n = 0

    # -- helpers ------------------------------------------------------------------------------

    def _const_struct(self, fmt: str) -> str:
        name = self._structs.get(fmt)
        if name is None:
            name = f"_S{len(self._structs)}"
            self._structs[fmt] = name
            self.ns[name] = struct.Struct(">" + fmt)
        return name

    def _var(self) -> str:
        self._n += 1
        return f"x{self._n}"

    # -- decoding -----------------------------------------------------------------------------

    @staticmethod
    def _read_uv(ind: str, var: str) -> list[str]:
        return [
            f"{ind}{var} = buf[pos]",
            f"{ind}if {var} < 128:",
            f"{ind}    pos += 1",
            f"{ind}else:",
            f"{ind}    {var}, pos = _uvarint(buf, pos)",
        ]

    def _decode_field(self, f: Field, version: int, var: str, ind: str, ctx: str) -> list[str]:
        """Statements that decode one field (tagged or not) into local ``var``."""
        out: list[str] = []
        nullable = f.is_nullable_in(version)
        label = f"{ctx}.{f.name}"
        if not f.is_array and f.type in _FIXED:
            s = self._const_struct(_FIXED[f.type][0])
            out.append(f"{ind}{var}, = {s}.unpack_from(buf, pos)")
            out.append(f"{ind}pos += {_FIXED[f.type][1]}")
            if f.type == "uuid":
                out.append(f"{ind}{var} = _ucg({var}) or _mku({var})")
            return out
        if f.is_struct and not f.is_array:
            fn = self._decode_struct_fn(f.fields, version, f"{ctx}.{f.name}")
            out.append(f"{ind}{var}, pos = {fn}(buf, pos, end)")
            return out
        n = self._var()
        out += self._read_uv(ind, n)
        out.append(f"{ind}if {n} == 0:")
        if nullable:
            out.append(f"{ind}    {var} = None")
        else:
            out.append(f"{ind}    raise _Bad('non-nullable field {label} is null')")
        out.append(f"{ind}else:")
        ind2 = ind + "    "
        out.append(f"{ind2}{n} -= 1")
        if not f.is_array:
            e = self._var()
            out.append(f"{ind2}{e} = pos + {n}")
            if f.type == "string":
                out.append(f"{ind2}{var} = buf[pos:{e}].decode()")
            elif f.type == "bytes":
                out.append(f"{ind2}{var} = buf[pos:{e}]")
            else:
                raise ValueError(f"unsupported type {f.type} for {label}")
            out.append(f"{ind2}pos = {e}")
            return out
        et = f.element_type
        if et in _FIXED and et != "uuid":
            code, size = _FIXED[et]
            out.append(f"{ind2}if {n} * {size} > end - pos:")
            out.append(f"{ind2}    raise _Bad('array {label} claims %d elements' % {n})")
            out.append(
                f"{ind2}{var} = list((_A_{code}[{n}] if {n} < {_SMALL_ARRAY} "
                f"else _Struct('>%d{code}' % {n})).unpack_from(buf, pos))"
            )
            out.append(f"{ind2}pos += {n}" + (f" * {size}" if size != 1 else ""))
            return out
        min_size = 16 if et == "uuid" else 1
        out.append(f"{ind2}if {n} * {min_size} > end - pos:")
        out.append(f"{ind2}    raise _Bad('array {label} claims %d elements' % {n})")
        out.append(f"{ind2}{var} = []")
        out.append(f"{ind2}for _ in range({n}):")
        ind3 = ind2 + "    "
        t = self._var()
        if et == "uuid":
            out.append(f"{ind3}{t} = buf[pos:pos + 16]")
            out.append(f"{ind3}pos += 16")
            out.append(f"{ind3}{var}.append(_ucg({t}) or _mku({t}))")
        elif et in ("string", "bytes"):
            m = self._var()
            out += self._read_uv(ind3, m)
            out.append(f"{ind3}if {m} == 0:")
            out.append(f"{ind3}    raise _Bad('null element in array {label}')")
            out.append(f"{ind3}{t} = pos + {m} - 1")
            out.append(f"{ind3}{var}.append(buf[pos:{t}]" + (".decode())" if et == "string" else ")"))
            out.append(f"{ind3}pos = {t}")
        elif f.is_struct:
            fn = self._decode_struct_fn(f.fields, version, label)
            out.append(f"{ind3}{t}, pos = {fn}(buf, pos, end)")
            out.append(f"{ind3}{var}.append({t})")
        else:
            raise ValueError(f"unsupported array type {f.type} for {label}")
        return out

    def _decode_body(self, fields: tuple[Field, ...], version: int, ctx: str) -> tuple[list[str], str]:
        """Statements decoding a struct body at ``version`` and the dict expression of its result."""
        body: list[str] = []
        ind = "    "
        present = [f for f in fields if f.exists_in(version)]
        plain = [f for f in present if not f.is_tagged_in(version)]
        tagged = sorted((f for f in present if f.is_tagged_in(version)), key=lambda f: f.tag or 0)
        names: dict[str, str] = {}
        i = 0
        while i < len(plain):
            f = plain[i]
            if not f.is_array and f.type in _FIXED:
                run = [f]
                while i + len(run) < len(plain):
                    g = plain[i + len(run)]
                    if g.is_array or g.type not in _FIXED:
                        break
                    run.append(g)
                vars_ = [self._var() for _ in run]
                for g, v in zip(run, vars_, strict=True):
                    names[g.name] = v
                fmt = "".join(_FIXED[g.type][0] for g in run)
                size = sum(_FIXED[g.type][1] for g in run)
                s = self._const_struct(fmt)
                body.append(f"{ind}{', '.join(vars_)}, = {s}.unpack_from(buf, pos)")
                body.append(f"{ind}pos += {size}")
                for g, v in zip(run, vars_, strict=True):
                    if g.type == "uuid":
                        body.append(f"{ind}{v} = _ucg({v}) or _mku({v})")
                i += len(run)
                continue
            v = self._var()
            names[f.name] = v
            body += self._decode_field(f, version, v, ind, ctx)
            i += 1
        nt = self._var()
        body += self._read_uv(ind, nt)
        for f in tagged:
            v = self._var()
            names[f.name] = v
            body.append(f"{ind}{v} = {_literal(f.default())}")
        order = [f.name for f in present]
        result = "{" + ", ".join(f"{nm!r}: {names[nm]}" for nm in order) + "}"
        body.append(f"{ind}if {nt}:")
        ind2 = ind + "    "
        unk = self._var()
        body.append(f"{ind2}if {nt} > end - pos:")
        body.append(f"{ind2}    raise _Bad('tagged field count %d is larger than the data' % {nt})")
        body.append(f"{ind2}{unk} = None")
        body.append(f"{ind2}for _ in range({nt}):")
        ind3 = ind2 + "    "
        tg, sz, stop = self._var(), self._var(), self._var()
        body += self._read_uv(ind3, tg)
        body += self._read_uv(ind3, sz)
        body.append(f"{ind3}{stop} = pos + {sz}")
        kw = "if"
        for f in tagged:
            body.append(f"{ind3}{kw} {tg} == {f.tag}:")
            body += self._decode_field(f, version, names[f.name], ind3 + "    ", ctx)
            kw = "elif"
        if tagged:
            body.append(f"{ind3}else:")
            ind4 = ind3 + "    "
        else:
            ind4 = ind3
        body.append(f"{ind4}if {unk} is None:")
        body.append(f"{ind4}    {unk} = {{}}")
        body.append(f"{ind4}{unk}[{tg}] = buf[pos:{stop}]")
        body.append(f"{ind4}pos = {stop}")
        body.append(f"{ind3}if pos != {stop}:")
        body.append(
            f"{ind3}    raise _Bad('tagged field %d of {ctx} declares %d bytes but holds %d' "
            f"% ({tg}, {sz}, pos - {stop} + {sz}))"
        )
        body.append(f"{ind2}if {unk} is not None:")
        body.append(f"{ind2}    r = {result}")
        body.append(f"{ind2}    r[_UNK] = {unk}")
        body.append(f"{ind2}    RETURN_R")
        return body, result

    def _decode_struct_fn(self, fields: tuple[Field, ...], version: int, ctx: str) -> str:
        self._n += 1
        name = f"_d{self._n}"
        body, result = self._decode_body(fields, version, ctx)
        src = [f"def {name}(buf, pos, end):"]
        src += [ln.replace("RETURN_R", "return r, pos") for ln in body]
        src.append(f"    return {result}, pos")
        self.lines.append("\n".join(src))
        return name

    def record_decoder(self, schema: RecordSchema, version: int) -> str:
        """A function (buf, pos, end) -> fields dict that also insists the body ends exactly at end."""
        self._n += 1
        name = f"_dec_{schema.name}_v{version}_{self._n}"
        body, result = self._decode_body(schema.fields, version, schema.name)

        def check(ind: str) -> list[str]:
            return [
                f"{ind}if pos != end:",
                f"{ind}    raise _Bad('%d bytes left over after the record body' % (end - pos)"
                " if pos < end else 'record body runs %d bytes past the end of the value' % (pos - end))",
            ]

        src = [f"def {name}(buf, pos, end):"]
        for ln in body:
            if ln.strip() == "RETURN_R":
                ind = ln[: len(ln) - len(ln.lstrip())]
                src += check(ind)
                src.append(f"{ind}return r")
            else:
                src.append(ln)
        src += check("    ")
        src.append(f"    return {result}")
        self.lines.append("\n".join(src))
        return name

    # -- encoding -----------------------------------------------------------------------------

    @staticmethod
    def _uv_expr(n: str) -> str:
        return f"(_UV[{n}] if {n} < {_UV_TABLE_SIZE} else _uvenc({n}))"

    def _encode_field(self, f: Field, version: int, val: str, ind: str, ctx: str) -> tuple[list[str], str]:
        """Statements and an expression giving the bytes of one field's value held in ``val``."""
        stmts: list[str] = []
        nullable = f.is_nullable_in(version)
        label = f"{ctx}.{f.name}"
        if not f.is_array and f.type in _FIXED:
            s = self._const_struct(_FIXED[f.type][0])
            return stmts, f"{s}.pack({val}.int.to_bytes(16))" if f.type == "uuid" else f"{s}.pack({val})"
        if f.is_struct and not f.is_array:
            fn = self._encode_struct_fn(f.fields, version, label)
            return stmts, f"{fn}({val})"
        out = self._var()
        ind2 = ind
        if nullable:
            stmts.append(f"{ind}if {val} is None:")
            stmts.append(f"{ind}    {out} = b'\\x00'")
            stmts.append(f"{ind}else:")
            ind2 = ind + "    "
        if not f.is_array:
            b, n = self._var(), self._var()
            if f.type == "string":
                stmts.append(f"{ind2}{b} = {val}.encode()")
            elif f.type == "bytes":
                stmts.append(f"{ind2}{b} = bytes({val})")
            else:
                raise ValueError(f"unsupported type {f.type} for {label}")
            stmts.append(f"{ind2}{n} = len({b}) + 1")
            stmts.append(f"{ind2}{out} = {self._uv_expr(n)} + {b}")
            return stmts, out
        et = f.element_type
        n = self._var()
        stmts.append(f"{ind2}{n} = len({val}) + 1")
        if et in _FIXED and et != "uuid":
            code = _FIXED[et][0]
            stmts.append(
                f"{ind2}{out} = {self._uv_expr(n)} + (_A_{code}[{n} - 1] if {n} <= {_SMALL_ARRAY} "
                f"else _Struct('>%d{code}' % ({n} - 1))).pack(*{val})"
            )
        elif et == "uuid":
            stmts.append(f"{ind2}{out} = {self._uv_expr(n)} + b''.join([u.int.to_bytes(16) for u in {val}])")
        elif et == "string":
            stmts.append(f"{ind2}{out} = {self._uv_expr(n)} + b''.join([_cstr(s) for s in {val}])")
            self.ns["_cstr"] = _compact_string
        elif et == "bytes":
            stmts.append(f"{ind2}{out} = {self._uv_expr(n)} + b''.join([_cbytes(s) for s in {val}])")
            self.ns["_cbytes"] = _compact_bytes
        elif f.is_struct:
            fn = self._encode_struct_fn(f.fields, version, label)
            stmts.append(f"{ind2}{out} = {self._uv_expr(n)} + b''.join([{fn}(e) for e in {val}])")
        else:
            raise ValueError(f"unsupported array type {f.type} for {label}")
        return stmts, out

    def _encode_body(self, fields: tuple[Field, ...], version: int, ctx: str, prefix: bytes) -> list[str]:
        """Statements ending in ``return <bytes>`` for a struct whose dict is the local ``f``."""
        ind = "    "
        stmts: list[str] = []
        pieces: list[str] = [repr(prefix)] if prefix else []
        present = [f for f in fields if f.exists_in(version)]
        plain = [f for f in present if not f.is_tagged_in(version)]
        tagged = sorted((f for f in present if f.is_tagged_in(version)), key=lambda f: f.tag or 0)
        i = 0
        while i < len(plain):
            f = plain[i]
            if not f.is_array and f.type in _FIXED:
                run = [f]
                while i + len(run) < len(plain):
                    g = plain[i + len(run)]
                    if g.is_array or g.type not in _FIXED:
                        break
                    run.append(g)
                fmt = "".join(_FIXED[g.type][0] for g in run)
                s = self._const_struct(fmt)
                args = ", ".join(
                    f"f[{g.name!r}].int.to_bytes(16)" if g.type == "uuid" else f"f[{g.name!r}]" for g in run
                )
                pieces.append(f"{s}.pack({args})")
                i += len(run)
                continue
            v = self._var()
            stmts.append(f"{ind}{v} = f[{f.name!r}]")
            s2, expr = self._encode_field(f, version, v, ind, ctx)
            stmts += s2
            pieces.append(expr)
            i += 1
        unk = self._var()
        stmts.append(f"{ind}{unk} = f.get(_UNK)")
        if tagged:
            t = self._var()
            stmts.append(f"{ind}{t} = []")
            for f in tagged:
                v = self._var()
                stmts.append(f"{ind}{v} = f[{f.name!r}]")
                stmts.append(f"{ind}if {_differs(v, f.default())}:")
                s2, expr = self._encode_field(f, version, v, ind + "    ", ctx)
                stmts += s2
                stmts.append(f"{ind}    {t}.append(({f.tag}, {expr}))")
            pieces.append(f"(_tagged({t}, {unk}) if {t} or {unk} else b'\\x00')")
        else:
            pieces.append(f"(_tagged((), {unk}) if {unk} else b'\\x00')")
        stmts.append(f"{ind}return b''.join(({', '.join(pieces)},))")
        return stmts

    def _encode_struct_fn(self, fields: tuple[Field, ...], version: int, ctx: str) -> str:
        self._n += 1
        name = f"_e{self._n}"
        src = [f"def {name}(f):"] + self._encode_body(fields, version, ctx, b"")
        self.lines.append("\n".join(src))
        return name

    def record_encoder(self, schema: RecordSchema, version: int, prefix: bytes) -> str:
        """A function (fields dict) -> bytes: ``prefix`` (the frame) followed by the body."""
        self._n += 1
        name = f"_enc_{schema.name}_v{version}_{self._n}"
        src = [f"def {name}(f):"] + self._encode_body(schema.fields, version, schema.name, prefix)
        self.lines.append("\n".join(src))
        if shape_eligible(schema, version):
            return self._shape_encoder(schema, version, prefix, name)
        return name

    def _shape_encoder(self, schema: RecordSchema, version: int, prefix: bytes, general: str) -> str:
        """An encoder that packs a whole body with one struct call when its layout is fixed.

        Applies to records whose untagged fields are fixed-size or arrays of fixed-size elements, when
        every tagged field holds its default: the layout then depends only on the array lengths, and
        one ``struct.Struct`` per length combination writes frame, fields, counts and the empty tagged
        section. Anything else goes to the general encoder.

        A second function, registered in FRAMED_ENCODERS, does the same for a record inside a batch:
        its struct also writes the record framing (length, attributes, timestampDelta, offsetDelta,
        null key, value length, header count), which is constant per layout except the offset delta.
        """
        self._n += 1
        uid = self._n
        name = f"_encs_{schema.name}_v{version}_{uid}"
        framed_name = f"_encf_{schema.name}_v{version}_{uid}"
        present = schema.fields_in(version)
        plain = [f for f in present if not f.is_tagged_in(version)]
        tagged = [f for f in present if f.is_tagged_in(version)]
        arrays = [f for f in plain if f.is_array]
        codes = [("a", _FIXED[f.element_type][0]) if f.is_array else ("f", _FIXED[f.type][0]) for f in plain]

        def body_fmt(lengths: tuple[int, ...]) -> str:
            fmt = []
            it = iter(lengths)
            for kind, code in codes:
                fmt.append("B" + code * next(it) if kind == "a" else code)
            return "".join(fmt) + "x"  # "x": the empty tagged-field section

        def make(lengths: tuple[int, ...]) -> Any:
            return struct.Struct(f">{len(prefix)}s" + body_fmt(lengths)).pack

        def make_framed(key: tuple[Any, ...]) -> tuple[Any, bytes, bytes]:
            *lengths, one_byte_delta = key
            body = body_fmt(tuple(lengths))
            vlen = len(prefix) + struct.calcsize(">" + body)
            width = 1 if one_byte_delta else 2
            tail = b"\x01" + _zigzag_bytes(vlen) + prefix  # null key, value length, frame
            rlen = 2 + width + len(tail) + vlen - len(prefix) + 1
            head = _zigzag_bytes(rlen) + b"\x00\x00"  # length, attributes, timestampDelta
            fmt = f">{len(head)}s{'B' if width == 1 else 'H'}{len(tail)}s{body}x"  # "x": no headers
            return struct.Struct(fmt).pack, head, tail

        self.ns[f"_mkencshape{uid}"] = make
        self.ns[f"_mkencframed{uid}"] = make_framed
        self.ns[f"_encshapes{uid}"] = {}
        self.ns[f"_encframed{uid}"] = {}
        self.ns[f"_encprefix{uid}"] = prefix
        self.ns["_OD_INT"] = _OD_INT
        names = [f.name for f in present]
        local = {nm: self._var() for nm in names}
        nvars = {f.name: self._var() for f in arrays}
        head: list[str] = []
        if len(names) == 1:
            head.append(f"    {local[names[0]]} = f[{names[0]!r}]")
        else:
            # one C call fetches every field (a missing one raises KeyError -> explained by the caller)
            self.ns[f"_get{uid}"] = operator.itemgetter(*names)
            head.append(f"    {', '.join(local[nm] for nm in names)} = _get{uid}(f)")
        conds = [_equals_default(local[f.name], f.default()) for f in tagged]
        conds.append("_UNK not in f")
        head.append(f"    if {' and '.join(conds)}:")
        for f in arrays:
            head.append(f"        {nvars[f.name]} = len({local[f.name]})")
        small = " and ".join(f"{nvars[f.name]} < {_MAX_SHAPE_ARRAY}" for f in arrays)
        lens = ", ".join(nvars[f.name] for f in arrays)
        args = []
        for f in plain:
            v = local[f.name]
            if f.is_array:
                args.append(f"{nvars[f.name]} + 1")
                if f.element_type == "uuid":
                    args.append(f"*[u.int.to_bytes(16) for u in {v}]")
                else:
                    args.append(f"*{v}")
            elif f.type == "uuid":
                args.append(f"{v}.int.to_bytes(16)")
            else:
                args.append(v)
        body_args = ", ".join(args)

        plain_fn = [f"def {name}(f):", *head]
        plain_fn += [
            f"        if {small}:",
            f"            p = _encshapes{uid}.get(({lens},))",
            "            if p is None:",
            f"                if len(_encshapes{uid}) >= {_MAX_SHAPES}:",
            f"                    return {general}(f)",
            f"                p = _encshapes{uid}[({lens},)] = _mkencshape{uid}(({lens},))",
            f"            return p(_encprefix{uid}, {body_args})",
            f"    return {general}(f)",
        ]
        self.lines.append("\n".join(plain_fn))

        framed_fn = [f"def {framed_name}(f, i):", *head]
        framed_fn += [
            f"        if {small} and i < {len(_OD_INT)}:",
            f"            k = ({lens}, i < 64)",
            f"            e = _encframed{uid}.get(k)",
            "            if e is None:",
            f"                if len(_encframed{uid}) >= {2 * _MAX_SHAPES}:",
            "                    return None",
            f"                e = _encframed{uid}[k] = _mkencframed{uid}(k)",
            f"            return e[0](e[1], _OD_INT[i], e[2], {body_args})",
            "    return None",
        ]
        self.lines.append("\n".join(framed_fn))
        self.framed[(schema.api_key or 0) << 16 | version] = framed_name
        return name

    # -- building records ---------------------------------------------------------------------

    def record_builder(self, schema: RecordSchema, version: int) -> str:
        """A function (kwargs dict) -> fields dict with defaults filled for omitted fields."""
        self._n += 1
        name = f"_build_{schema.name}_v{version}_{self._n}"
        items = []
        for f in schema.fields_in(version):
            default = f.default()
            if isinstance(default, list | dict):
                items.append(f"{f.name!r}: kw.pop({f.name!r}) if {f.name!r} in kw else {_literal(default)}")
            else:
                items.append(f"{f.name!r}: kw.pop({f.name!r}, {_literal(default)})")
        src = [f"def {name}(kw):", "    return {" + ", ".join(items) + "}"]
        self.lines.append("\n".join(src))
        return name

    def compile(self) -> dict[str, Any]:
        code = "\n\n".join(self.lines)
        exec(compile(code, "<migrator.kraft.records generated>", "exec"), self.ns)
        self.source = code
        return self.ns


def _literal(value: Any) -> str:
    """Source text of a default value (ints, bools, floats, strings, None, [], zero UUID, dicts)."""
    if isinstance(value, uuid.UUID):
        if value.int != 0:
            raise ValueError(f"unexpected non-zero default uuid {value}")
        return "_ZERO"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[]"
    return repr(value)


def _differs(var: str, default: Any) -> str:
    """A condition true when a tagged field's value must be written (it is not its default)."""
    if default is None:
        return f"{var} is not None"
    if isinstance(default, list):
        return f"{var}"
    return f"{var} != {_literal(default)}"


def _equals_default(var: str, default: Any) -> str:
    """A condition true when a tagged field holds its default (and is therefore not written)."""
    if default is None:
        return f"{var} is None"
    if isinstance(default, list):
        return f"not {var}"
    return f"{var} == {_literal(default)}"


def _compact_string(s: str) -> bytes:
    b = s.encode()
    return encode_uvarint(len(b) + 1) + b


def _compact_bytes(s: bytes) -> bytes:
    b = bytes(s)
    return encode_uvarint(len(b) + 1) + b


def _encode_tagged_section(known: Any, unknown: dict[int, bytes] | None) -> bytes:
    """Tagged-field trailer from known (tag, bytes) pairs and kept unknown ones, in ascending tag order."""
    items = dict(known)
    if unknown:
        for tag, data in unknown.items():
            if tag in items:
                raise ValueError(f"unknown tagged field {tag} collides with a known field")
            items[tag] = bytes(data)
    out = [encode_uvarint(len(items))]
    for tag in sorted(items):
        data = items[tag]
        out.append(encode_uvarint(tag))
        out.append(encode_uvarint(len(data)))
        out.append(data)
    return b"".join(out)


# ----------------------------------------------------------------------------------------------
# Compile every (apiKey, version) and the control-record bodies

Decoder = Callable[[bytes, int, int], dict[str, Any]]
Encoder = Callable[[dict[str, Any]], bytes]

_compiler = _Compiler()
_dec_names: dict[int, str] = {}
_enc_names: dict[int, str] = {}
_build_names: dict[int, str] = {}
_control_dec_names: dict[tuple[str, int], str] = {}
_control_enc_names: dict[tuple[str, int], str] = {}


def _frame(api_key: int, version: int) -> bytes:
    return encode_uvarint(FRAME_VERSION) + encode_uvarint(api_key) + encode_uvarint(version)


for _schema_ in SCHEMAS.values():
    assert _schema_.api_key is not None
    for _v in range(_schema_.min_version, _schema_.max_version + 1):
        _key = (_schema_.api_key << 16) | _v
        _dec_names[_key] = _compiler.record_decoder(_schema_, _v)
        _enc_names[_key] = _compiler.record_encoder(_schema_, _v, _frame(_schema_.api_key, _v))
        _build_names[_key] = _compiler.record_builder(_schema_, _v)
for _schema_ in CONTROL_SCHEMAS.values():
    for _v in range(_schema_.min_version, _schema_.max_version + 1):
        _control_dec_names[(_schema_.name, _v)] = _compiler.record_decoder(_schema_, _v)
        _control_enc_names[(_schema_.name, _v)] = _compiler.record_encoder(_schema_, _v, b"")
_ns = _compiler.compile()

#: (apiKey << 16 | version) -> the general decoder compiled from the declarations
GENERAL_DECODERS: dict[int, Decoder] = {k: _ns[n] for k, n in _dec_names.items()}
#: (apiKey << 16 | version) -> encoder(fields) -> framed value bytes
ENCODERS: dict[int, Encoder] = {k: _ns[n] for k, n in _enc_names.items()}
_ENCODERS_BY_KEY = ENCODERS
#: (apiKey << 16 | version) -> framed(fields, index) -> the whole record (framing + value) as it sits
#: at position ``index`` of a KRaft batch, or None when the record has no fixed layout.
FRAMED_ENCODERS: dict[int, Callable[[dict[str, Any], int], bytes | None]] = {
    k: _ns[n] for k, n in _compiler.framed.items()
}
_BUILDERS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    k: _ns[n] for k, n in _build_names.items()
}
#: (control message name, version) -> body decoder / encoder (no frame)
CONTROL_DECODERS: dict[tuple[str, int], Decoder] = {k: _ns[n] for k, n in _control_dec_names.items()}
CONTROL_ENCODERS: dict[tuple[str, int], Encoder] = {k: _ns[n] for k, n in _control_enc_names.items()}
GENERATED_SOURCE: str = _compiler.source


# ----------------------------------------------------------------------------------------------
# Plans for the native packer
#
# `_speedups.c` packs records in C but knows nothing of Kafka's schemas: each (apiKey, version) gets a
# plan derived here from the same declarations -- frame prefix, untagged field names in wire order,
# one operation byte per field, and the tagged fields that must hold their defaults. A record that
# does not fit its plan exactly is left to the Python encoders, which stay the reference.

_NATIVE_OPS = {
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "int64": "q",
    "float64": "d",
    "bool": "?",
    "uuid": "u",
}


def _native_op(f: Field, version: int) -> str | None:
    """The packer's operation for an untagged field, or None when the packer cannot handle it."""
    if f.is_struct:
        return None
    nullable = f.is_nullable_in(version)
    et = f.element_type
    if f.is_array:
        return None if nullable or et not in _NATIVE_OPS else "a" + _NATIVE_OPS[et]
    if et in _NATIVE_OPS:
        return _NATIVE_OPS[et]
    if et == "string":
        return "S" if nullable else "s"
    if et == "bytes":
        return "Y" if nullable else "y"
    return None


def native_plan(schema: RecordSchema, version: int) -> tuple[Any, ...] | None:
    """The packer's plan for one record version, or None when its layout is beyond the packer."""
    names: list[str] = []
    ops: list[str] = []
    tagged: list[tuple[str, bytes, Any]] = []
    for f in schema.fields_in(version):
        if f.is_tagged_in(version):
            d = f.default()
            kind = b"n" if d is None else b"e" if isinstance(d, list) else b"="
            tagged.append((f.name, kind, d))  # the same test as _equals_default
            continue
        op = _native_op(f, version)
        if op is None:
            return None
        names.append(f.name)
        ops.append(op)
    assert schema.api_key is not None
    return (_frame(schema.api_key, version), tuple(names), "".join(ops).encode(), tuple(tagged))


def native_decode_plan(schema: RecordSchema, version: int) -> tuple[Any, ...] | None:
    """The unpacker's plan: every field in declaration order (the order of the decoders' dicts), with
    the packer's operation for untagged fields and 't' (immutable default) or 'T' (empty list) for tagged
    ones, which the unpacker only fills with their defaults (a record with tagged fields is Python's)."""
    names: list[str] = []
    ops: list[str] = []
    defaults: list[Any] = []
    for f in schema.fields_in(version):
        d = f.default() if f.is_tagged_in(version) else None
        if not f.is_tagged_in(version):
            op = _native_op(f, version)
        elif d == [] and isinstance(d, list):
            op, d = "T", None
        elif d is None or type(d) in (int, float, bool, str, bytes):
            op = "t"
        else:
            op = None
        if op is None:
            return None
        names.append(f.name)
        ops.append(op)
        defaults.append(d)
    return (tuple(names), "".join(ops).encode(), tuple(defaults))


def _native_plans(
    plan: Callable[[RecordSchema, int], tuple[Any, ...] | None] = native_plan,
) -> tuple[Any, ...]:
    """plans[apiKey][version] -> plan or None, the tables `_speedups.configure*` take."""
    top = max(s.api_key or 0 for s in SCHEMAS.values())
    table: list[Any] = [None] * (top + 1)
    for s in SCHEMAS.values():
        assert s.api_key is not None
        table[s.api_key] = tuple(plan(s, v) if s.has_version(v) else None for v in range(s.max_version + 1))
    return tuple(table)


def _load_native() -> Any:
    """The native extension, configured; None when not built or ZK2KRAFT_PURE_PYTHON=1 is set."""
    if os.environ.get("ZK2KRAFT_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from migrator.kraft import _speedups  # type: ignore[attr-defined]
    except ImportError:
        return None
    _speedups.configure(MetadataRecord, uuid.UUID, UNKNOWN_TAGGED_FIELDS, _native_plans())
    _speedups.configure_decoding(_native_plans(native_decode_plan), _UUID_CACHE, _make_uuid)
    return _speedups


_native = _load_native()
#: pack_records(records, start) -> (framed records start..stop-1 as bytes, stop), or None without the
#: native extension (pure Python: same bytes, slower).
NATIVE_PACK_RECORDS: Callable[[Any, int], tuple[bytes, int]] | None = _native and _native.pack_records
#: unpack_records(data, pos, end, index, limit, base_offset, out) -> (stop, pos), or None without it.
NATIVE_UNPACK_RECORDS: Callable[..., tuple[int, int]] | None = _native and _native.unpack_records


# ----------------------------------------------------------------------------------------------
# Shape-specialised decoders
#
# Most records of a type share one layout: every PartitionRecord of a topic with three replicas has
# arrays of 3, 3, 0 and 0 elements and an empty tagged section. For record types whose untagged fields
# are fixed-size or arrays of fixed-size elements, a decoder learns each layout ("shape") it meets and
# compiles one struct format covering the whole body, array lengths included. A body of a known length
# is first tried against that shape; the array-length bytes and the tagged-field count are checked, so
# a wrong guess only costs a fallback to the general decoder. Shapes are derived from the same
# declarations, so the codec stays declaration-driven.


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
        self.arrays = [(f.name, _FIXED[f.element_type][1]) for f in self.plain if f.is_array]
        self.fixed_size = sum(_FIXED[f.type][1] for f in self.plain if not f.is_array) + len(self.arrays) + 1
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
            if n > _MAX_SHAPE_ARRAY:
                return None
            counts.append(n)
            total += n * elem_size
        if total != size:
            return None  # tagged fields present: the general decoder handles those
        return tuple(counts)

    def learn(self, fields: dict[str, Any], size: int) -> None:
        if len(self.by_shape) >= _MAX_SHAPES:
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
                fmt.append(_FIXED[f.type][0])
                targets.append(f"v{k}")
                values[f.name] = f"(_ucg(v{k}) or _mku(v{k}))" if f.type == "uuid" else f"v{k}"
                continue
            n = next(counts)
            k += 1
            fmt.append("B")
            targets.append(f"c{k}")
            checks.append(f"c{k} == {n + 1}")
            consts[f"c{k}"] = n + 1
            code = _FIXED[f.element_type][0]
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
            values[f.name] = _literal(f.default())
        result = "{" + ", ".join(f"{name!r}: {values[name]}" for name in self.order) + "}"
        spec = ShapeSpec(
            shape=shape,
            fmt="".join(fmt),
            targets=tuple(targets),
            checks=tuple(checks),
            result=result,
            size=struct.calcsize(">" + "".join(fmt)),
            names={"_ucg": _UUID_CACHE.get, "_mku": _make_uuid, "_ZERO": uuid.UUID(int=0)},
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
    _frame(k >> 16, k & 0xFFFF): (
        k >> 16,
        k & 0xFFFF,
        (LEARNERS[k].by_len if k in LEARNERS else _NO_SHAPES).get,
        DECODERS[k],
    )
    for k in GENERAL_DECODERS
    if (k >> 16) < 128 and (k & 0xFFFF) < 128
}


# ----------------------------------------------------------------------------------------------
# Public API


def _normalise_structs(fields: tuple[Field, ...], values: dict[str, Any], version: int, ctx: str) -> None:
    """Fill defaults and reject unknown names inside struct-array elements given as dicts."""
    for f in fields:
        if not f.is_struct or not f.exists_in(version):
            continue
        value = values.get(f.name)
        if value is None:
            continue
        elements = value if f.is_array else [value]
        fixed = []
        for element in elements:
            if not isinstance(element, dict):
                raise ValueError(f"{ctx}.{f.name}: expected a dict per element, got {type(element).__name__}")
            unknown = set(element) - {g.name for g in f.fields} - {UNKNOWN_TAGGED_FIELDS}
            if unknown:
                raise ValueError(f"{ctx}.{f.name}: unknown field(s) {', '.join(sorted(unknown))}")
            full = {
                g.name: element[g.name] if g.name in element else g.default()
                for g in f.fields
                if g.exists_in(version)
            }
            if UNKNOWN_TAGGED_FIELDS in element:
                full[UNKNOWN_TAGGED_FIELDS] = element[UNKNOWN_TAGGED_FIELDS]
            _normalise_structs(f.fields, full, version, f"{ctx}.{f.name}")
            fixed.append(full)
        values[f.name] = fixed if f.is_array else fixed[0]


def record(name: str, version: int | None = None, **fields: Any) -> MetadataRecord:
    """Build a metadata record by Kafka name; omitted fields get Kafka's defaults.

    ``version`` defaults to the record's highest version. A field name the record does not have raises
    ValueError; so does a field that exists only in other versions, unless it holds its default.
    """
    plan = _RECORD_PLANS.get((name, version))
    if plan is None:
        plan = _record_plan(name, version)
    api_key, version, builder, structs = plan
    values = builder(fields)  # ``fields`` is this call's own dict: the builder pops what it knows
    if fields:
        _reject_extra(name, version, fields)
    if structs:
        _normalise_structs(schema_by_name(name).fields, values, version, name)
    return _new_record(api_key, version, values)


#: (name, version or None) -> (apiKey, version, builder, has struct fields): the copy builds hundreds
#: of thousands of records, and looking these up per call cost as much as building the record.
_RECORD_PLANS: dict[
    tuple[str, int | None], tuple[int, int, Callable[[dict[str, Any]], dict[str, Any]], bool]
] = {}


def _record_plan(
    name: str, version: int | None
) -> tuple[int, int, Callable[[dict[str, Any]], dict[str, Any]], bool]:
    schema = schema_by_name(name)
    v = schema.max_version if version is None else version
    if not schema.has_version(v):
        raise ValueError(f"{name} has no version {v} (valid {schema.min_version}-{schema.max_version})")
    assert schema.api_key is not None
    plan = (schema.api_key, v, _BUILDERS[(schema.api_key << 16) | v], any(f.is_struct for f in schema.fields))
    _RECORD_PLANS[(name, version)] = plan
    return plan


def _reject_extra(name: str, version: int, extra_fields: dict[str, Any]) -> None:
    schema = schema_by_name(name)
    for extra, value in extra_fields.items():
        declared = next((f for f in schema.fields if f.name == extra), None)
        if declared is None:
            raise ValueError(f"{name} has no field {extra!r}")
        if value != declared.default():
            raise ValueError(f"{name} v{version} has no field {extra!r} (it exists in other versions)")


def encode_value(rec: MetadataRecord | OpaqueRecord) -> bytes:
    """The framed record value: frame version 1, apiKey, version, flexible body."""
    try:
        return _ENCODERS_BY_KEY[(rec.api_key << 16) | rec.version](rec.fields)  # type: ignore[union-attr]
    except Exception:
        return _encode_value_checked(rec)


def encode_values(recs: Iterable[MetadataRecord | OpaqueRecord]) -> list[bytes]:
    """encode_value of each record, without a Python call per record on the common path."""
    if not isinstance(recs, list | tuple):
        recs = list(recs)
    encoders = _ENCODERS_BY_KEY
    try:
        return [encoders[(r.api_key << 16) | r.version](r.fields) for r in recs]  # type: ignore[union-attr]
    except Exception:
        return [encode_value(r) for r in recs]


def _encode_value_checked(rec: MetadataRecord | OpaqueRecord) -> bytes:
    """encode_value's path for opaque records and for errors, which it explains."""
    if type(rec) is OpaqueRecord:
        return _frame(rec.api_key, rec.version) + rec.body
    encoder = ENCODERS.get((rec.api_key << 16) | rec.version)
    if encoder is None:
        raise ValueError(f"no schema for metadata record apiKey {rec.api_key} version {rec.version}")
    try:
        return encoder(rec.fields)
    except Exception as exc:
        raise ValueError(f"cannot encode {rec.name} v{rec.version}: {_explain(exc)}") from exc


def encode_body(schema: RecordSchema, version: int, fields: dict[str, Any]) -> bytes:
    """The body only (no frame) of a record or control message; used for control-record values."""
    if schema.api_key is None:
        encoder = CONTROL_ENCODERS.get((schema.name, version))
    else:
        full = ENCODERS.get((schema.api_key << 16) | version)
        encoder = None if full is None else (lambda f: full(f)[len(_frame(schema.api_key or 0, version)) :])
    if encoder is None:
        raise ValueError(f"{schema.name} has no version {version}")
    try:
        return encoder(fields)
    except Exception as exc:
        raise ValueError(f"cannot encode {schema.name} v{version}: {_explain(exc)}") from exc


def _explain(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}"
    return f"{type(exc).__name__}: {exc}"


def decode_value(buf: bytes | bytearray | memoryview, where: str = "") -> MetadataRecord | OpaqueRecord:
    """Decode one framed record value; raises CorruptRecordError naming ``where``."""
    if type(buf) is not bytes:
        buf = bytes(buf)
    return decode_value_at(buf, 0, len(buf), where)


def decode_value_at(buf: bytes, pos: int, end: int, where: str = "") -> MetadataRecord | OpaqueRecord:
    """Decode the framed value in ``buf[pos:end]`` without copying it out first."""
    start = pos
    try:
        if end - pos < 3:
            raise _Bad(f"value is only {end - pos} bytes, shorter than its frame")
        frame = buf[pos]
        api = buf[pos + 1]
        ver = buf[pos + 2]
        if frame == 1 and api < 128 and ver < 128:
            pos += 3
        else:
            frame, pos = read_uvarint(buf, pos)
            if frame != FRAME_VERSION:
                if frame == 0:
                    raise _Bad("frame version 0 (the Kafka 2.8 preview format) is not supported")
                raise _Bad(f"unknown frame version {frame}")
            api, pos = read_uvarint(buf, pos)
            ver, pos = read_uvarint(buf, pos)
            if pos > end:
                raise _Bad("value truncated inside its frame")
        decoder = DECODERS.get((api << 16) | ver) if api < 65536 and ver < 65536 else None
        if decoder is None:
            return OpaqueRecord(api, ver, bytes(buf[pos:end]))
        return _new_record(api, ver, decoder(buf, pos, end))
    except DECODE_ERRORS as exc:
        raise CorruptRecordError(where, decode_error_reason(exc, end - start)) from None


def decode_control_body(name: str, version: int, buf: bytes, where: str = "") -> dict[str, Any]:
    """Decode a control-record body of message ``name`` at ``version``; raises CorruptRecordError."""
    decoder = CONTROL_DECODERS.get((name, version))
    if decoder is None:
        raise CorruptRecordError(where, f"{name} has no version {version}")
    if type(buf) is not bytes:
        buf = bytes(buf)
    try:
        return decoder(buf, 0, len(buf))
    except DECODE_ERRORS as exc:
        raise CorruptRecordError(where, decode_error_reason(exc, len(buf))) from None
