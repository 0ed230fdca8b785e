"""Kafka record batches v2 (magic 2, CRC-32C), as found in ``__cluster_metadata-0`` segments and snapshots.

Layout (big-endian, reference §3): a 61-byte header followed by ``records_count`` records, each
``varint length | int8 attributes | varlong timestampDelta | varint offsetDelta | varint keyLength | key |
varint valueLength | value | varint headerCount | headers``. The CRC covers bytes 21..end.

Errors name the file and the byte position of the bad batch or record: `CorruptLogError` for framing,
`TruncatedBatchError` (a subclass) when a batch runs past the end of the data — the log layer uses that
one to cut a torn tail during recovery — and `records.CorruptRecordError` for a bad record value.

This module reads the framing; `batch_decode` decodes a batch's metadata records in place and
`batch_encode` writes batches. Varints are `varint`'s.
"""

from __future__ import annotations

import importlib
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from crc32c import crc32c

from migrator.errors import BadInputError
from migrator.kraft.varint import ZZ, ZZ_TABLE_SIZE, BadFraming, read_zigzag

__all__ = [
    "ATTR_CONTROL",
    "ATTR_TRANSACTIONAL",
    "BATCH_HEADER_SIZE",
    "COMPRESSION_NAMES",
    "LOG_OVERHEAD",
    "CorruptLogError",
    "MissingCodecError",
    "RecordBatch",
    "TruncatedBatchError",
    "iter_batches",
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
MIN_RECORD_SIZE = 7

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX_LEN = struct.Struct(">qi")
CONTROL_KEY = struct.Struct(">hh")


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


#: For offset delta i: attributes 0, timestampDelta 0, offsetDelta i, keyLength -1 (null key).
MID: list[bytes] = [b"\x00\x00" + ZZ[i] + b"\x01" for i in range(ZZ_TABLE_SIZE)]
MID_LEN: list[int] = [len(m) for m in MID]


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
        if count * MIN_RECORD_SIZE > end - pos:
            raise self._corrupt(pos, base_pos, f"claims {count} records but holds only {end - pos} bytes")
        prev = -1
        for _ in range(count):
            rstart = pos
            try:
                length, pos = read_zigzag(data, pos)
                rend = pos + length
                if length < 6 or rend > end:
                    raise BadFraming(f"record length {length} does not fit the batch")
                pos += 1
                _, pos = read_zigzag(data, pos, 10)
                delta, pos = read_zigzag(data, pos)
                if delta <= prev or delta > self.last_offset_delta:
                    raise BadFraming(bad_delta(delta, prev, self.last_offset_delta))
                prev = delta
                klen, pos = read_zigzag(data, pos)
                key = None
                if klen >= 0:
                    key = bytes(data[pos : pos + klen])
                    pos += klen
                vlen, pos = read_zigzag(data, pos)
                if vlen < 0:
                    raise BadFraming("record has a null value")
                vpos = pos
                value = bytes(data[pos : pos + vlen])
                pos += vlen
                pos = skip_headers(data, pos)
                if pos != rend:
                    raise BadFraming(
                        f"record declares {length} bytes but its fields take {pos - rend + length}"
                    )
            except (BadFraming, IndexError) as exc:
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
        if count * MIN_RECORD_SIZE > end - pos:
            raise self._corrupt(pos, base_pos, f"claims {count} records but holds only {end - pos} bytes")
        out: list[bytes] = []
        append = out.append
        startswith = data.startswith
        mid = MID
        mid_len = MID_LEN
        small = ZZ_TABLE_SIZE
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
                    length, pos = read_zigzag(data, pos)
                    rend = pos + length
                if i < small and startswith(mid[i], pos):
                    pos += mid_len[i]
                    delta = i
                else:
                    delta, pos = read_prefix_slow(data, pos)
                if delta <= prev or delta > last_delta:
                    raise BadFraming(bad_delta(delta, prev, last_delta))
                prev = delta
                b = data[pos]
                if b < 128:
                    vlen = (b >> 1) ^ -(b & 1)
                    pos += 1
                else:
                    vlen, pos = read_zigzag(data, pos)
                if vlen < 0:
                    raise BadFraming("record has a null value")
                e = pos + vlen
                append(data[pos:e])
                pos = e
                if data[pos] == 0:
                    pos += 1
                else:
                    pos = skip_headers(data, pos)
                if pos != rend:
                    raise BadFraming(f"record length disagrees with its fields by {pos - rend} bytes")
        except (BadFraming, IndexError) as exc:
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
            version, ctype = CONTROL_KEY.unpack_from(key)
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


def bad_delta(delta: int, prev: int, last_delta: int) -> str:
    if delta > last_delta:
        return f"offset delta {delta} is beyond the batch's last offset delta {last_delta}"
    return f"offset delta {delta} does not increase (previous record had {prev})"


def read_prefix_slow(data: Any, pos: int) -> tuple[int, int]:
    """attributes, timestampDelta, offsetDelta and key of a record; returns (offsetDelta, position)."""
    pos += 1
    _, pos = read_zigzag(data, pos, 10)
    delta, pos = read_zigzag(data, pos)
    klen, pos = read_zigzag(data, pos)
    if klen > 0:
        pos += klen
    return delta, pos


def skip_headers(data: Any, pos: int) -> int:
    b = data[pos]
    if b == 0:
        return pos + 1
    count, pos = read_zigzag(data, pos)
    if count < 0:
        raise BadFraming(f"negative header count {count}")
    for _ in range(count):
        klen, pos = read_zigzag(data, pos)
        if klen < 0:
            raise BadFraming("record header with a null key")
        pos += klen
        vlen, pos = read_zigzag(data, pos)
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
    """The optional codec library, imported on first use: most logs are uncompressed."""
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
