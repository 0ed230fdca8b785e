"""The C twin's plans: `_speedups.c` packs and unpacks records but knows nothing of Kafka's schemas.

Each (apiKey, version) gets a plan derived here from the same declarations as the Python codec -- frame
prefix, untagged field names in wire order, one operation byte per field, and the tagged fields that
must hold their defaults. A record that does not fit its plan exactly is left to the Python codec
(`record_codegen`), which stays the reference (tests/test_speedups.py compares the two).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import Any

from migrator.kraft.record_types import UNKNOWN_TAGGED_FIELDS, MetadataRecord, frame
from migrator.kraft.schema import SCHEMAS, Field, RecordSchema
from migrator.kraft.uuids import UUID_CACHE, make_uuid

try:
    from migrator.kraft import _speedups  # type: ignore[attr-defined]
except ImportError:  # not built: the Python codec alone (same bytes, slower)
    _speedups = None

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
            tagged.append((f.name, kind, d))  # the same test as record_codegen.equals_default
            continue
        op = _native_op(f, version)
        if op is None:
            return None
        names.append(f.name)
        ops.append(op)
    assert schema.api_key is not None
    return (frame(schema.api_key, version), tuple(names), "".join(ops).encode(), tuple(tagged))


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


def native_plans(
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
    if _speedups is None:
        return None
    _speedups.configure(MetadataRecord, uuid.UUID, UNKNOWN_TAGGED_FIELDS, native_plans())
    _speedups.configure_decoding(native_plans(native_decode_plan), UUID_CACHE, make_uuid)
    return _speedups


_native = _load_native()
#: pack_records(records, start) -> (framed records start..stop-1 as bytes, stop), or None without the
#: native extension (pure Python: same bytes, slower).
NATIVE_PACK_RECORDS: Callable[[Any, int], tuple[bytes, int]] | None = _native and _native.pack_records
#: unpack_records(data, pos, end, index, limit, base_offset, out) -> (stop, pos), or None without it.
NATIVE_UNPACK_RECORDS: Callable[..., tuple[int, int]] | None = _native and _native.unpack_records
