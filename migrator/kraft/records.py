"""KRaft metadata record values: build, encode and decode them (the entry points the project uses).

A value is ``uvarint frameVersion (1) | uvarint apiKey | uvarint version | body``. The body codec is one
generic engine compiled from the declarations in `schema.py` (`record_codegen`), with shape-specialised
decoders learned from the data (`record_shapes`) and a C twin for whole batches (`native`). The record
types and their errors are in `record_types`, Kafka's Uuid strings in `uuids`, varints in `varint`;
the names most callers need are re-exported here.

Decoders work on ``bytes`` between two positions so that a whole record batch can be decoded without
slicing each value out first (`batch_decode.decode_batch_records`). They raise `CorruptRecordError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from migrator.kraft.record_codecs import BUILDERS, CONTROL_DECODERS, CONTROL_ENCODERS, ENCODERS
from migrator.kraft.record_shapes import DECODERS
from migrator.kraft.record_types import (
    DECODE_ERRORS,
    FRAME_VERSION,
    UNKNOWN_TAGGED_FIELDS,
    CorruptRecordError,
    MetadataRecord,
    OpaqueRecord,
    decode_error_reason,
    frame,
    new_record,
)
from migrator.kraft.schema import Field, RecordSchema, schema_by_name
from migrator.kraft.uuids import InvalidUuidError, kafka_to_uuid, uuid_to_kafka
from migrator.kraft.varint import BadValue, read_uvarint

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

_ENCODERS_BY_KEY = ENCODERS


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
    return new_record(api_key, version, values)


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
    plan = (schema.api_key, v, BUILDERS[(schema.api_key << 16) | v], any(f.is_struct for f in schema.fields))
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
        return frame(rec.api_key, rec.version) + rec.body
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
        encoder = None if full is None else (lambda f: full(f)[len(frame(schema.api_key or 0, version)) :])
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
            raise BadValue(f"value is only {end - pos} bytes, shorter than its frame")
        frame = buf[pos]
        api = buf[pos + 1]
        ver = buf[pos + 2]
        if frame == 1 and api < 128 and ver < 128:
            pos += 3
        else:
            frame, pos = read_uvarint(buf, pos)
            if frame != FRAME_VERSION:
                if frame == 0:
                    raise BadValue("frame version 0 (the Kafka 2.8 preview format) is not supported")
                raise BadValue(f"unknown frame version {frame}")
            api, pos = read_uvarint(buf, pos)
            ver, pos = read_uvarint(buf, pos)
            if pos > end:
                raise BadValue("value truncated inside its frame")
        decoder = DECODERS.get((api << 16) | ver) if api < 65536 and ver < 65536 else None
        if decoder is None:
            return OpaqueRecord(api, ver, bytes(buf[pos:end]))
        return new_record(api, ver, decoder(buf, pos, end))
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
