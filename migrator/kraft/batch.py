"""Kafka record batches v2 (magic 2, CRC-32C), as found in ``__cluster_metadata-0`` segments and snapshots.

Layout (big-endian, reference §3): a 61-byte header followed by ``records_count`` records, each
``varint length | int8 attributes | varlong timestampDelta | varint offsetDelta | varint keyLength | key |
varint valueLength | value | varint headerCount | headers``. The CRC covers bytes 21..end.

Errors name the file and the byte position of the bad batch or record: `CorruptLogError` for framing,
`TruncatedBatchError` (a subclass) when a batch runs past the end of the data — the log layer uses that
one to cut a torn tail during recovery — and `records.CorruptRecordError` for a bad record value.
"""

from __future__ import annotations

import itertools
import keyword
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from crc32c import crc32c

from migrator.bulk import without_gc
from migrator.errors import BadInputError
from migrator.kraft.records import (
    _OD_INT,
    _UV,
    DECODE_ERRORS,
    FAST_FRAMES,
    FRAMED_ENCODERS,
    LEARNERS,
    NATIVE_PACK_RECORDS,
    NATIVE_UNPACK_RECORDS,
    CorruptRecordError,
    MetadataRecord,
    OpaqueRecord,
    ShapeLearner,
    ShapeSpec,
    decode_error_reason,
    decode_value_at,
    encode_value,
    encode_values,
)

__all__ = [
    "ATTR_CONTROL",
    "ATTR_TRANSACTIONAL",
    "BATCH_HEADER_SIZE",
    "COMPRESSION_NAMES",
    "LOG_OVERHEAD",
    "CorruptLogError",
    "MissingCodecError",
    "CorruptRecordError",
    "RecordBatch",
    "TruncatedBatchError",
    "decode_batch_records",
    "encode_batch",
    "encode_control_batch",
    "encode_record_batch",
    "encode_record_batches",
    "iter_batches",
    "with_base_offset",
]

MAGIC = 2
#: Bytes before batchLength counts (baseOffset + batchLength).
LOG_OVERHEAD = 12
#: Size of the v2 batch header, up to the first record.
BATCH_HEADER_SIZE = 61
#: The smallest legal batchLength (a header with no records).
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
#: Where the CRC-covered part of a batch begins (the attributes field).
CRC_START = 21
ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
#: Cap on a decompressed records section; KRaft batches are at most a few MiB.
MAX_DECOMPRESSED = 256 << 20
#: The smallest possible record: seven one-byte fields with an empty key and value.
_MIN_RECORD_SIZE = 7

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qiib")
_PREFIX_LEN = struct.Struct(">qi")
_CONTROL_KEY = struct.Struct(">hh")
_AFTER_CRC = struct.Struct(">hiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
#: The most framing bytes a record adds to its value (lengths and offset delta as long varints).
_MAX_RECORD_FRAMING = 5 + 1 + 1 + 5 + 1 + 5 + 1


class CorruptLogError(BadInputError):
    """A record batch or record framing that cannot be trusted; names the file and byte position."""

    def __init__(self, file: str, offset: int, reason: str) -> None:
        self.file = file
        self.offset = offset
        self.reason = reason
        super().__init__(f"{file or '<buffer>'}: corrupt record batch at byte {offset}: {reason}")


class TruncatedBatchError(CorruptLogError):
    """A batch whose header or declared length runs past the end of the data (a torn write)."""


class MissingCodecError(BadInputError):
    """A compressed batch whose codec library is not installed. Not corruption: never truncate for it."""


# ----------------------------------------------------------------------------------------------
# Varints (signed zigzag, Kafka's ByteUtils: varint ≤ 5 bytes, varlong ≤ 10 bytes)


class _Frame(Exception):
    """Raised by the record-framing readers; turned into CorruptLogError with a position."""


def _read_varint(buf: Any, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    raw = 0
    shift = 0
    start = pos
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if pos - start >= max_bytes:
            raise _Frame(f"varint at byte {start} is longer than {max_bytes} bytes")


def _zigzag(n: int) -> bytes:
    raw = (n << 1) ^ (n >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


_ZZ_TABLE_SIZE = 1 << 14
#: Zigzag varint bytes of small non-negative ints (record lengths, offset deltas, value lengths).
_ZZ: list[bytes] = [
    _UV[2 * i] if 2 * i < len(_UV) else bytes(((2 * i) & 0x7F | 0x80, ((2 * i) >> 7) | 0x80, (2 * i) >> 14))
    for i in range(_ZZ_TABLE_SIZE)
]
#: For offset delta i: attributes 0, timestampDelta 0, offsetDelta i, keyLength -1 (null key).
_MID: list[bytes] = [b"\x00\x00" + _ZZ[i] + b"\x01" for i in range(_ZZ_TABLE_SIZE)]
_MID_LEN: list[int] = [len(m) for m in _MID]


def _zz(n: int) -> bytes:
    return _ZZ[n] if 0 <= n < _ZZ_TABLE_SIZE else _zigzag(n)


# ----------------------------------------------------------------------------------------------
# Batches


@dataclass(slots=True)
class RecordBatch:
    """One v2 batch header, where it sits, and access to its records (decoded on demand)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int
    file: str = ""
    buffer: Any = field(default=b"", repr=False, compare=False)

    @property
    def size(self) -> int:
        """Bytes the batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def end_position(self) -> int:
        return self.position + self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def compression(self) -> int:
        """The codec number (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd); see COMPRESSION_NAMES."""
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def compression_name(self) -> str:
        return COMPRESSION_NAMES.get(self.compression, f"unknown({self.compression})")

    def raw(self) -> bytes:
        """The batch's bytes exactly as stored."""
        return bytes(self.buffer[self.position : self.end_position])

    def records_section(self) -> tuple[bytes, int, int, int]:
        """(data, start, end, file position of data[0]) of the records, decompressed if needed.

        For an uncompressed batch held in ``bytes`` this is the file buffer itself, not a copy. The file
        position is -1 for decompressed data (positions inside it are not file positions).
        """
        start = self.position + BATCH_HEADER_SIZE
        end = self.end_position
        buf = self.buffer
        codec = self.attributes & ATTR_COMPRESSION_MASK
        if codec == 0:
            if type(buf) is bytes:
                return buf, start, end, 0
            return bytes(buf[start:end]), 0, end - start, start
        data = _decompress(codec, bytes(buf[start:end]), self)
        return data, 0, len(data), -1

    def _records(self) -> list[tuple[int, int, bytes | None, bytes, int]]:
        """(offset delta, byte position, key, value, value position) of every record."""
        data, pos, end, base_pos = self.records_section()
        out: list[tuple[int, int, bytes | None, bytes, int]] = []
        count = self.records_count
        if count * _MIN_RECORD_SIZE > end - pos:
            raise self._corrupt(pos, base_pos, f"claims {count} records but holds only {end - pos} bytes")
        prev = -1
        for _ in range(count):
            rstart = pos
            try:
                length, pos = _read_varint(data, pos)
                rend = pos + length
                if length < 6 or rend > end:
                    raise _Frame(f"record length {length} does not fit the batch")
                pos += 1
                _, pos = _read_varint(data, pos, 10)
                delta, pos = _read_varint(data, pos)
                if delta <= prev or delta > self.last_offset_delta:
                    raise _Frame(_bad_delta(delta, prev, self.last_offset_delta))
                prev = delta
                klen, pos = _read_varint(data, pos)
                key = None
                if klen >= 0:
                    key = bytes(data[pos : pos + klen])
                    pos += klen
                vlen, pos = _read_varint(data, pos)
                if vlen < 0:
                    raise _Frame("record has a null value")
                vpos = pos
                value = bytes(data[pos : pos + vlen])
                pos += vlen
                pos = _skip_headers(data, pos)
                if pos != rend:
                    raise _Frame(f"record declares {length} bytes but its fields take {pos - rend + length}")
            except (_Frame, IndexError) as exc:
                raise self._corrupt(rstart, base_pos, _frame_reason(exc)) from None
            out.append((delta, rstart, key, value, vpos))
        if pos != end:
            raise self._corrupt(pos, base_pos, f"{end - pos} bytes left over after {count} records")
        return out

    def _corrupt(self, pos: int, base_pos: int, reason: str) -> CorruptLogError:
        if base_pos < 0:
            return CorruptLogError(
                self.file,
                self.position,
                f"decompressed records, byte {pos}: {reason}",
            )
        return CorruptLogError(
            self.file, base_pos + pos, f"record in batch at byte {self.position}: {reason}"
        )

    def values(self) -> list[bytes]:
        """The record values in offset order (decompressed), with the same framing checks as decoding."""
        data, pos, end, base_pos = self.records_section()
        count = self.records_count
        if count * _MIN_RECORD_SIZE > end - pos:
            raise self._corrupt(pos, base_pos, f"claims {count} records but holds only {end - pos} bytes")
        out: list[bytes] = []
        append = out.append
        startswith = data.startswith
        mid = _MID
        mid_len = _MID_LEN
        small = _ZZ_TABLE_SIZE
        last_delta = self.last_offset_delta
        prev = -1
        rstart = pos
        try:
            for i in range(count):
                rstart = pos
                b = data[pos]
                if b < 128:
                    rend = pos + 1 + ((b >> 1) ^ -(b & 1))
                    pos += 1
                else:
                    length, pos = _read_varint(data, pos)
                    rend = pos + length
                if i < small and startswith(mid[i], pos):
                    pos += mid_len[i]
                    delta = i
                else:
                    delta, pos = _read_prefix_slow(data, pos)
                if delta <= prev or delta > last_delta:
                    raise _Frame(_bad_delta(delta, prev, last_delta))
                prev = delta
                b = data[pos]
                if b < 128:
                    vlen = (b >> 1) ^ -(b & 1)
                    pos += 1
                else:
                    vlen, pos = _read_varint(data, pos)
                if vlen < 0:
                    raise _Frame("record has a null value")
                e = pos + vlen
                append(data[pos:e])
                pos = e
                if data[pos] == 0:
                    pos += 1
                else:
                    pos = _skip_headers(data, pos)
                if pos != rend:
                    raise _Frame(f"record length disagrees with its fields by {pos - rend} bytes")
        except (_Frame, IndexError) as exc:
            raise self._corrupt(rstart, base_pos, _frame_reason(exc)) from None
        if pos != end:
            raise self._corrupt(pos, base_pos, f"{end - pos} bytes left over after {count} records")
        return out

    def control_records(self) -> list[tuple[int, bytes]]:
        """(control type, value) of each record of a control batch."""
        if not self.is_control:
            raise ValueError(
                f"batch at byte {self.position} of {self.file or '<buffer>'} is not a control batch"
            )
        out = []
        for _delta, rpos, key, value, _vpos in self._records():
            if key is None or len(key) < 4:
                raise CorruptLogError(
                    self.file, self.position, f"control record at byte {rpos} has a bad key"
                )
            version, ctype = _CONTROL_KEY.unpack_from(key)
            if version < 0:
                raise CorruptLogError(
                    self.file, self.position, f"control record at byte {rpos} has key version {version}"
                )
            out.append((ctype, value))
        return out


def _frame_reason(exc: Exception) -> str:
    if isinstance(exc, IndexError):
        return "record runs past the end of the batch"
    return str(exc)


def _bad_delta(delta: int, prev: int, last_delta: int) -> str:
    if delta > last_delta:
        return f"offset delta {delta} is beyond the batch's last offset delta {last_delta}"
    return f"offset delta {delta} does not increase (previous record had {prev})"


def _read_prefix_slow(data: Any, pos: int) -> tuple[int, int]:
    """attributes, timestampDelta, offsetDelta and key of a record; returns (offsetDelta, position)."""
    pos += 1
    _, pos = _read_varint(data, pos, 10)
    delta, pos = _read_varint(data, pos)
    klen, pos = _read_varint(data, pos)
    if klen > 0:
        pos += klen
    return delta, pos


def _skip_headers(data: Any, pos: int) -> int:
    b = data[pos]
    if b == 0:
        return pos + 1
    count, pos = _read_varint(data, pos)
    if count < 0:
        raise _Frame(f"negative header count {count}")
    for _ in range(count):
        klen, pos = _read_varint(data, pos)
        if klen < 0:
            raise _Frame("record header with a null key")
        pos += klen
        vlen, pos = _read_varint(data, pos)
        if vlen > 0:
            pos += vlen
    return pos


def _decompress(codec: int, data: bytes, batch: RecordBatch) -> bytes:
    """The records section of a compressed batch, through the codec's library if it is installed."""
    name = COMPRESSION_NAMES.get(codec)
    if name is None:
        raise CorruptLogError(batch.file, batch.position, f"unknown compression codec {codec}")
    try:
        if codec == 1:
            d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            out = d.decompress(data, MAX_DECOMPRESSED)
            if d.unconsumed_tail:
                raise CorruptLogError(
                    batch.file, batch.position, f"gzip records expand beyond {MAX_DECOMPRESSED} bytes"
                )
            return out
        if codec == 2:
            return _snappy_decompress(data, batch)
        if codec == 3:
            lz4_frame = _import_codec("lz4.frame", "lz4", batch)
            return bytes(lz4_frame.decompress(data))
        zstd = _import_codec("zstandard", "zstandard", batch)
        return bytes(zstd.ZstdDecompressor().decompressobj().decompress(data))
    except BadInputError:
        raise
    except Exception as exc:
        raise CorruptLogError(
            batch.file, batch.position, f"cannot decompress {name} records: {exc}"
        ) from None


def _import_codec(module: str, package: str, batch: RecordBatch) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingCodecError(
            f"{batch.file or '<buffer>'}: batch at byte {batch.position} is compressed with "
            f"{COMPRESSION_NAMES[batch.compression]}; install the Python package {package!r} to read it"
        ) from None


_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def _snappy_decompress(data: bytes, batch: RecordBatch) -> bytes:
    """Kafka writes snappy in xerial's framing (magic, two versions, then int32-sized blocks)."""
    snappy = _import_codec("snappy", "python-snappy", batch)
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(snappy.decompress(data))
    pos = 16
    out = []
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out.append(snappy.decompress(data[pos : pos + size]))
        pos += size
    return b"".join(out)


def iter_batches(
    buf: bytes | bytearray | memoryview, file: str = "", start: int = 0, verify_crc: bool = True
) -> Iterator[RecordBatch]:
    """Walk the v2 batches in ``buf`` from byte ``start`` to the end.

    Raises TruncatedBatchError for a header or batch cut off by the end of the data, CorruptLogError
    for anything else wrong (length, magic, CRC, record count); both name ``file`` and the byte.
    """
    if type(buf) is bytearray:
        buf = bytes(buf)
    view = memoryview(buf)
    total = len(buf)
    pos = start
    unpack_header = _HEADER.unpack_from
    while pos < total:
        remaining = total - pos
        if remaining < BATCH_HEADER_SIZE:
            if remaining >= LOG_OVERHEAD:
                _, length = _PREFIX_LEN.unpack_from(buf, pos)
                if length < MIN_BATCH_LENGTH:
                    raise CorruptLogError(
                        file, pos, f"batch length {length} is below the minimum {MIN_BATCH_LENGTH}"
                    )
            raise TruncatedBatchError(
                file, pos, f"only {remaining} bytes remain, less than a {BATCH_HEADER_SIZE}-byte batch header"
            )
        h = unpack_header(buf, pos)
        length = h[1]
        if length < MIN_BATCH_LENGTH:
            raise CorruptLogError(file, pos, f"batch length {length} is below the minimum {MIN_BATCH_LENGTH}")
        size = length + LOG_OVERHEAD
        if size > remaining:
            raise TruncatedBatchError(
                file, pos, f"batch length {length} runs past the end of the data ({remaining} bytes remain)"
            )
        if h[3] != MAGIC:
            raise CorruptLogError(file, pos, f"unsupported magic {h[3]} (expected {MAGIC})")
        if verify_crc:
            computed = crc32c(view[pos + CRC_START : pos + size])
            if computed != h[4]:
                raise CorruptLogError(
                    file, pos, f"CRC mismatch (stored 0x{h[4]:08x}, computed 0x{computed:08x})"
                )
        if h[12] < 0:
            raise CorruptLogError(file, pos, f"negative record count {h[12]}")
        if h[6] < 0:
            raise CorruptLogError(file, pos, f"negative last offset delta {h[6]}")
        yield RecordBatch(*h, pos, file, buf)
        pos += size


# ----------------------------------------------------------------------------------------------
# Decoding a batch's metadata records (the log layer's hot path)


def decode_batch_records(batch: RecordBatch) -> list[tuple[int, MetadataRecord | OpaqueRecord]]:
    """(absolute offset, record) for every metadata record of a data batch, decoded in place.

    Control batches hold no metadata records: use RecordBatch.control_records() for them.

    Records are decoded one at a time until one has a fixed layout (see records.ShapeLearner); from
    then on a generated "run" function decodes following records of the same layout — framing and
    body — with one ``struct.iter_unpack`` step each, checking every constant byte, and hands back to
    the general path at the first record that differs. With the native extension built, its unpacker
    goes first and leaves to these paths each record it declines.
    """
    if batch.attributes & ATTR_CONTROL:
        raise ValueError(
            f"batch at byte {batch.position} of {batch.file or '<buffer>'} is a control batch; "
            "use control_records()"
        )
    # Decoding allocates several containers per record and creates no reference cycles, so the
    # cyclic collector's repeated young-generation scans during a batch are pure cost (about a third
    # of the time): pause it for the batch, and only re-enable it if it was on.
    with without_gc():
        return _decode_batch_records(batch)


def _decode_batch_records(batch: RecordBatch) -> list[tuple[int, MetadataRecord | OpaqueRecord]]:
    data, pos, end, base_pos = batch.records_section()
    count = batch.records_count
    if count * _MIN_RECORD_SIZE > end - pos:
        raise batch._corrupt(pos, base_pos, f"claims {count} records but holds only {end - pos} bytes")
    base = batch.base_offset
    # one slot per record, filled in order (runs assign whole slices): no regrowing a long list
    out: list[Any] = [None] * count
    frames_get = FAST_FRAMES.get
    tn = tuple.__new__
    mr = MetadataRecord
    startswith = data.startswith
    mid = _MID
    mid_len = _MID_LEN
    small = _ZZ_TABLE_SIZE
    mv = memoryview(data)
    run_get = _RUN_BY_PREFIX.get
    od_width = _OD_WIDTH
    rstart = pos
    vpos = pos
    vend = -1
    delta = 0
    prev = -1
    last_delta = batch.last_offset_delta
    # runs produce offset delta == index, so they must stop where the batch's offset range ends
    run_limit = min(count, last_delta + 1, small)
    unpack = NATIVE_UNPACK_RECORDS
    native_limit = min(count, last_delta + 1) if unpack is not None else 0
    i = 0
    try:
        while i < count:
            if i < native_limit and prev == i - 1:
                # the native unpacker: the same records as the paths below, for what it can decode
                j, pos = unpack(data, pos, end, i, native_limit, base, out)
                if j > i:
                    prev = j - 1
                    i = j
                    continue
            if i < run_limit and prev == i - 1:
                # a run learned earlier for records that start with these bytes at this index width;
                # runs take offset delta == index, so only while no earlier delta has skipped ahead
                run = run_get((data[pos : pos + 3], od_width[i]))
                if run is not None:
                    j, pos = run(mv, pos, end, i, run_limit, base, out)
                    if j > i:
                        prev = j - 1
                        i = j
                        continue
            rstart = pos
            vend = -1
            # length (zigzag varint; one or two bytes inline)
            b = data[pos]
            if b < 128:
                rend = pos + 1 + ((b >> 1) ^ -(b & 1))
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 128:
                    raw = (b & 127) | (b2 << 7)
                    rend = pos + 2 + ((raw >> 1) ^ -(raw & 1))
                    pos += 2
                else:
                    length, pos = _read_varint(data, pos)
                    rend = pos + length
            lpos = pos
            # attributes 0, timestampDelta 0, offsetDelta i, null key: what KRaft writes, checked at once
            kraft = i < small and startswith(mid[i], pos)
            if kraft:
                pos += mid_len[i]
                delta = i
            else:
                delta, pos = _read_prefix_slow(data, pos)
            if delta <= prev or delta > last_delta:
                raise _Frame(_bad_delta(delta, prev, last_delta))
            prev = delta
            # valueLength
            vlpos = pos
            b = data[pos]
            if b < 128:
                vlen = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 128:
                    raw = (b & 127) | (b2 << 7)
                    vlen = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    vlen, pos = _read_varint(data, pos)
            if vlen < 0:
                raise _Frame("record has a null value")
            vpos = pos
            pos += vlen
            ve = pos
            # headerCount
            if data[pos] == 0:
                pos += 1
            else:
                pos = _skip_headers(data, pos)
            if pos != rend:
                raise _Frame(f"record length disagrees with its fields by {pos - rend} bytes")
            vend = ve
            # the value: a known (frame 1, apiKey, version) prefix goes straight to its decoder
            entry = frames_get(data[vpos : vpos + 3]) if vlen >= 3 else None
            if entry is None:
                out[i] = (
                    base + delta,
                    decode_value_at(data, vpos, vend, _where(batch, base + delta, vpos, base_pos)),
                )
                i += 1
                continue
            api, ver, shape_get, decoder = entry
            fields = None
            shape = shape_get(vlen - 3)
            if shape is not None:
                fields = shape(data, vpos + 3, vend)
            if fields is None:
                fields = decoder(data, vpos + 3, vend)
            out[i] = (base + delta, tn(mr, (api, ver, fields)))
            i += 1
            if kraft and i < count:
                learner = LEARNERS.get((api << 16) | ver)
                if learner is not None:
                    layout = learner.shape_of(fields, vlen - 3)
                    if layout is not None:
                        _learn_run(
                            learner,
                            layout,
                            data[rstart:lpos] + b"\x00\x00",
                            mid_len[i - 1] - 3,
                            data[vlpos - 1 : vpos + 3],
                        )
    except _Frame as exc:
        raise batch._corrupt(rstart, base_pos, str(exc)) from None
    except CorruptRecordError:
        raise
    except DECODE_ERRORS as exc:
        if vend < 0:
            raise batch._corrupt(rstart, base_pos, "record runs past the end of the batch") from None
        raise CorruptRecordError(
            _where(batch, base + delta, vpos, base_pos), decode_error_reason(exc, vend - vpos)
        ) from None
    if pos != end:
        raise batch._corrupt(pos, base_pos, f"{end - pos} bytes left over after {count} records")
    return out


_MAX_RUNS = 512
_RUNS: dict[tuple[Any, ...], Any] = {}
#: (first three bytes of a record, offset-delta width) -> the run last learned for such records
_RUN_BY_PREFIX: dict[tuple[bytes, int], Any] = {}
_OD_WIDTH: list[int] = [len(z) for z in _ZZ]


def _learn_run(
    learner: ShapeLearner, layout: tuple[int, ...], head: bytes, od_width: int, tail: bytes
) -> None:
    run = _run_decoder(learner, layout, head, od_width, tail)
    if run is not None:
        _RUN_BY_PREFIX[(head[:3], od_width)] = run


#: Offset-delta varint bytes of records 0..63 (one byte each), and of records 64..8191 split into
#: their first and second bytes: a run compares each against a column of its records at once.
_OD1 = bytes(2 * i for i in range(64))
_OD2_LO = bytes(((2 * i) & 0x7F) | 0x80 for i in range(len(_OD_INT)))
_OD2_HI = bytes((2 * i) >> 7 for i in range(len(_OD_INT)))
#: How far runs of each offset-delta width reach: one-byte deltas end at record 64.
_OD_END = {1: 64, 2: len(_OD_INT)}


def _agree(column: Any, expected: bytes) -> int:
    """How many leading bytes of ``column`` equal ``expected`` (rare path: a mismatching delta)."""
    got = bytes(column)
    n = min(len(got), len(expected))
    for k in range(n):
        if got[k] != expected[k]:
            return k
    return n


def _run_decoder(
    learner: ShapeLearner, layout: tuple[int, ...], head: bytes, od_width: int, tail: bytes
) -> Any:
    """A function decoding consecutive records that share one framing and body layout.

    ``head`` is the record-length varint plus attributes and timestampDelta (constant in a run), the
    offset delta has ``od_width`` bytes and must equal the record's index, and ``tail`` is the null key,
    the value-length varint and the value's frame bytes. Only integers taken from the data (array
    lengths, sizes, the record's apiKey and version) are written into the generated source.

    Three C-level passes, no per-record checks in Python: every byte that is constant in the layout
    (framing, array lengths, empty tagged section, no headers) is unpacked by one struct and compared
    with the expected tuple until the first record that differs (``takewhile``); the offset deltas of
    those records are compared as byte columns with the expected indexes; then the records are
    unpacked by a second struct that skips the checked bytes, in one list comprehension.
    """
    key = (learner.api_key, learner.version, layout, head, od_width, tail)
    fn = _RUNS.get(key)
    if fn is not None or od_width not in _OD_END:
        return fn
    if len(_RUNS) >= _MAX_RUNS:
        _RUNS.clear()
        _RUN_BY_PREFIX.clear()
    spec = learner.spec(layout)
    # byte-level layout of a record: (constant bytes, or None for data) per piece, and the data codes
    pieces: list[tuple[bytes | None, int]] = [(head, len(head)), (None, od_width), (tail, len(tail))]
    fmt = ["x" * (len(head) + od_width + len(tail))]
    targets = []
    for name, code in zip(spec.targets, spec.codes, strict=True):
        size = struct.calcsize(">" + code)
        const = spec.consts.get(name)
        if const is None:
            fmt.append(code)
            targets.append(name)
            pieces.append((None, size))
        else:
            fmt.append("x" * size)
            pieces.append((struct.pack(">" + code, const), size))
    fmt.append("x")
    pieces.append((b"\x00", 1))  # no headers
    values = struct.Struct(">" + "".join(fmt))
    size = values.size
    const_fmt = "".join("B" * n if c is not None else "x" * n for c, n in pieces)
    consts = struct.Struct(">" + const_fmt)
    expected = tuple(b for c, _ in pieces if c is not None for b in c)
    assert consts.size == size and len(expected) == const_fmt.count("B")
    od_at = len(head)
    if od_width == 1:
        columns = [(od_at, "_OD1")]
    else:
        columns = [(od_at, "_OD2_LO"), (od_at + 1, "_OD2_HI")]
    od_check = "".join(
        f"    if n and mv[pos + {at} : pos + n * {size} : {size}] != {table}[i : i + n]:\n"
        f"        n = _agree(mv[pos + {at} : pos + n * {size} : {size}], {table}[i : i + n])\n"
        for at, table in columns
    )
    unpacked = f"({', '.join(targets)},)" if targets else "_"
    body = _run_body(spec, "            ")
    rec = f"_tn(_MR, ({learner.api_key}, {learner.version}, fields))"
    src = (
        "def run(mv, pos, end, i, count, base, out):\n"
        f"    m = (end - pos) // {size}\n"
        "    if m > count - i:\n"
        "        m = count - i\n"
        "    if m > _END - i:\n"
        "        m = _END - i\n"
        "    if m <= 0:\n"
        "        return i, pos\n"
        f"    n = len(_list(_takewhile(_same, _consts(mv[pos : pos + m * {size}]))))\n"
        + od_check
        + "    if n:\n"
        + "".join(f"        b{t} = u{t} = None\n" for t in spec.uuids)
        + f"        for j, o, {unpacked} in _zip(range(i, i + n), range(base + i, base + i + n), "
        f"_values(mv[pos : pos + n * {size}])):\n" + body + f"            out[j] = (o, {rec})\n"
        f"    return i + n, pos + n * {size}\n"
    )
    ns: dict[str, Any] = dict(
        spec.names,
        _consts=consts.iter_unpack,
        _values=values.iter_unpack,
        _same=expected.__eq__,
        _takewhile=itertools.takewhile,
        _list=list,
        _OD1=_OD1,
        _OD2_LO=_OD2_LO,
        _OD2_HI=_OD2_HI,
        _END=_OD_END[od_width],
        _agree=_agree,
        _zip=zip,
        _tn=tuple.__new__,
        _MR=MetadataRecord,
        _F=type(f"{learner.label} fields", (), {}),
    )
    exec(compile(src, f"<record run {learner.label} {layout}>", "exec"), ns)
    fn = ns["run"]
    _RUNS[key] = fn
    return fn


def _run_body(spec: ShapeSpec, ind: str) -> str:
    """Statements of a run's loop that leave a record's fields dict in ``fields``.

    The dict is built as the attribute dict of a throwaway instance of a class made for the run:
    CPython's key-sharing dicts (PEP 412) then hold only the values, with one keys table per class,
    which is cheaper to build and free than a dict display with its own keys — and is still an
    ordinary ``dict`` in every way. Field names that are not identifiers fall back to a display.
    A uuid is looked up only when it differs from the previous record's (a topic's partitions follow
    each other).
    """
    lines = []
    values = dict(spec.values)
    for t in spec.uuids:
        lines.append(f"{ind}if {t} != b{t}:")
        lines.append(f"{ind}    u{t} = _ucg({t}) or _mku({t})")
        lines.append(f"{ind}    b{t} = {t}")
        values = {k: (f"u{t}" if v == f"(_ucg({t}) or _mku({t}))" else v) for k, v in values.items()}
    if all(name.isidentifier() and not keyword.iskeyword(name) for name in values):
        lines.append(f"{ind}f = _F()")
        lines += [f"{ind}f.{name} = {expr}" for name, expr in values.items()]
        lines.append(f"{ind}fields = f.__dict__")
    else:
        lines.append(f"{ind}fields = {{" + ", ".join(f"{k!r}: {v}" for k, v in values.items()) + "}")
    return "".join(line + "\n" for line in lines)


def _where(batch: RecordBatch, offset: int, vpos: int, base_pos: int) -> str:
    place = f"byte {base_pos + vpos}" if base_pos >= 0 else f"batch at byte {batch.position}"
    return f"{batch.file or '<buffer>'}: record at offset {offset} ({place})"


# ----------------------------------------------------------------------------------------------
# Encoding


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
    zz = _ZZ
    mid = _MID
    small = _ZZ_TABLE_SIZE
    for i, v in enumerate(values):
        ln = len(v)
        m = mid[i] if i < small else b"\x00\x00" + _zigzag(i) + b"\x01"
        zl = zz[ln] if ln < small else _zigzag(ln)
        total = len(m) + len(zl) + ln + 1
        extend((zz[total] if total < small else _zigzag(total), m, zl, v, b"\x00"))
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
    zz = _ZZ
    mid = _MID
    small = _ZZ_TABLE_SIZE
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
        m = mid[i] if i < small else b"\x00\x00" + _zigzag(i) + b"\x01"
        zl = zz[ln] if ln < small else _zigzag(ln)
        total = len(m) + len(zl) + ln + 1
        append((zz[total] if total < small else _zigzag(total)) + m + zl + v + b"\x00")
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
        zl = _zigzag(len(v))
        body = b"\x00\x00" + _zigzag(i) + b"\x01" + zl + v + b"\x00"
        parts.append(_zigzag(len(body)) + body)
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
            b"\x00\x00"
            + _zz(i)
            + _zz(4)
            + _CONTROL_KEY.pack(0, ctype)
            + _zz(len(value))
            + bytes(value)
            + b"\x00"
        )
        parts.append(_zz(len(body)))
        parts.append(body)
    data = b"".join(parts)
    return _header(base_offset, epoch, ATTR_CONTROL, n, timestamp_ms, data) + data
