"""Writing record batches v2: data batches of metadata record values and control batches.

The bytes are Kafka's (see `batch` for the layout); the records section of a metadata batch goes through
the native packer (`native`) when it is built and the generated framed encoders (`record_codecs`)
otherwise, both byte-for-byte what encoding each value and framing it would give.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from crc32c import crc32c

from migrator.kraft.batch import (
    ATTR_CONTROL,
    BATCH_HEADER_SIZE,
    CONTROL_KEY,
    LOG_OVERHEAD,
    MAGIC,
    MID,
)
from migrator.kraft.native import NATIVE_PACK_RECORDS
from migrator.kraft.record_codecs import FRAMED_ENCODERS
from migrator.kraft.record_types import MetadataRecord, OpaqueRecord
from migrator.kraft.records import encode_value, encode_values
from migrator.kraft.varint import ZZ, ZZ_TABLE_SIZE, zigzag, zz

_PREFIX = struct.Struct(">qiib")
_AFTER_CRC = struct.Struct(">hiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
#: The most framing bytes a record adds to its value (lengths and offset delta as long varints).
_MAX_RECORD_FRAMING = 5 + 1 + 1 + 5 + 1 + 5 + 1

__all__ = [
    "encode_batch",
    "encode_control_batch",
    "encode_record_batch",
    "encode_record_batches",
    "with_base_offset",
]


def _header(
    base_offset: int, epoch: int, attributes: int, count: int, timestamp_ms: int, records: bytes
) -> bytes:
    tail = _AFTER_CRC.pack(attributes, count - 1, timestamp_ms, timestamp_ms, -1, -1, -1, count)
    crc = crc32c(records, crc32c(tail))
    return _PREFIX.pack(base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(records), epoch, MAGIC) + (
        struct.pack(">I", crc) + tail
    )


def encode_batch(base_offset: int, epoch: int, values: Sequence[bytes], timestamp_ms: int) -> bytes:
    """An uncompressed data batch of ``values`` (null keys, no headers) at ``base_offset``."""
    n = len(values)
    if n == 0:
        raise ValueError("a record batch needs at least one record")
    parts: list[bytes] = []
    extend = parts.extend
    zz = ZZ
    mid = MID
    small = ZZ_TABLE_SIZE
    for i, v in enumerate(values):
        ln = len(v)
        m = mid[i] if i < small else b"\x00\x00" + zigzag(i) + b"\x01"
        zl = zz[ln] if ln < small else zigzag(ln)
        total = len(m) + len(zl) + ln + 1
        extend((zz[total] if total < small else zigzag(total), m, zl, v, b"\x00"))
    records = b"".join(parts)
    return _header(base_offset, epoch, 0, n, timestamp_ms, records) + records


def encode_record_batch(
    base_offset: int, epoch: int, records: Sequence[MetadataRecord | OpaqueRecord], timestamp_ms: int
) -> bytes:
    """encode_batch of the records' values, with each fixed-layout record and its framing packed at once.

    Byte-for-byte the same as ``encode_batch(base_offset, epoch, encode_values(records), timestamp_ms)``;
    raises ValueError like encode_value for a record that cannot be encoded. The native packer does the
    records it can when it is built; the Python loop below is the same thing without it.
    """
    n = len(records)
    if n == 0:
        raise ValueError("a record batch needs at least one record")
    if NATIVE_PACK_RECORDS is not None:
        data = _native_records(records, n)
        return _header(base_offset, epoch, 0, n, timestamp_ms, data) + data
    parts: list[bytes] = []
    append = parts.append
    framed_get = FRAMED_ENCODERS.get
    zz = ZZ
    mid = MID
    small = ZZ_TABLE_SIZE
    for i, rec in enumerate(records):
        framed = framed_get((rec.api_key << 16) | rec.version) if type(rec) is MetadataRecord else None
        if framed is not None:
            try:
                data = framed(rec.fields, i)  # type: ignore[union-attr]
            except Exception:
                data = None  # encode_value below explains the problem
            if data is not None:
                append(data)
                continue
        v = encode_value(rec)
        ln = len(v)
        m = mid[i] if i < small else b"\x00\x00" + zigzag(i) + b"\x01"
        zl = zz[ln] if ln < small else zigzag(ln)
        total = len(m) + len(zl) + ln + 1
        append((zz[total] if total < small else zigzag(total)) + m + zl + v + b"\x00")
    data = b"".join(parts)
    return _header(base_offset, epoch, 0, n, timestamp_ms, data) + data


def encode_record_batches(
    records: Sequence[MetadataRecord | OpaqueRecord],
    epoch: int,
    timestamp_ms: int,
    max_records: int,
    max_bytes: int,
) -> list[tuple[bytes, int]]:
    """All of ``records`` as (batch, record count) pairs, numbered from offset 0 (see with_base_offset).

    A batch holds at most ``max_records`` records and, unless it holds one record, at most ``max_bytes``
    bytes. Everything is encoded before anything is returned, so a record that cannot be encoded raises
    ValueError before the caller writes a byte.
    """
    if max_records < 1:
        raise ValueError("max_records must be positive")
    out: list[tuple[bytes, int]] = []
    offset = 0
    for start in range(0, len(records), max_records):
        chunk = records[start : start + max_records]
        data = encode_record_batch(offset, epoch, chunk, timestamp_ms)
        if len(data) <= max_bytes or len(chunk) == 1:
            out.append((data, len(chunk)))
            offset += len(chunk)
            continue
        values = encode_values(chunk)  # too big for one batch: split where the sizes say
        first = 0
        while first < len(values):
            end, size = first + 1, BATCH_HEADER_SIZE + len(values[first]) + _MAX_RECORD_FRAMING
            while end < len(values) and size + len(values[end]) + _MAX_RECORD_FRAMING <= max_bytes:
                size += len(values[end]) + _MAX_RECORD_FRAMING
                end += 1
            out.append((encode_batch(offset, epoch, values[first:end], timestamp_ms), end - first))
            offset += end - first
            first = end
    return out


def with_base_offset(batch: bytes, base_offset: int) -> bytes:
    """``batch`` moved to ``base_offset``; the CRC does not cover the base offset, so nothing else changes."""
    return _BASE_OFFSET.pack(base_offset) + batch[8:]


def _native_records(records: Sequence[MetadataRecord | OpaqueRecord], n: int) -> bytes:
    """The records section through the native packer; each record it leaves goes through encode_value."""
    if type(records) is not list and type(records) is not tuple:
        records = list(records)
    pack = NATIVE_PACK_RECORDS
    assert pack is not None
    parts: list[bytes] = []
    i = 0
    while True:
        data, i = pack(records, i)
        parts.append(data)
        if i >= n:
            return b"".join(parts)
        v = encode_value(records[i])
        zl = zigzag(len(v))
        body = b"\x00\x00" + zigzag(i) + b"\x01" + zl + v + b"\x00"
        parts.append(zigzag(len(body)) + body)
        i += 1


def encode_control_batch(
    base_offset: int, epoch: int, records: Sequence[tuple[int, bytes]], timestamp_ms: int
) -> bytes:
    """A control batch (attribute 0x20): each record's key is int16 version 0 + int16 type."""
    n = len(records)
    if n == 0:
        raise ValueError("a control batch needs at least one record")
    parts: list[bytes] = []
    for i, (ctype, value) in enumerate(records):
        body = (
            b"\x00\x00" + zz(i) + zz(4) + CONTROL_KEY.pack(0, ctype) + zz(len(value)) + bytes(value) + b"\x00"
        )
        parts.append(zz(len(body)))
        parts.append(body)
    data = b"".join(parts)
    return _header(base_offset, epoch, ATTR_CONTROL, n, timestamp_ms, data) + data
