"""Kafka's varints for the KRaft log, written and read in this one place (Kafka's ``ByteUtils``).

Two kinds: unsigned varints (record values: frame, apiKey, version, lengths and counts of the flexible
body; at most 5 bytes for 32-bit values) and zigzag varints (the record framing inside a batch: length,
deltas, key and value lengths, header counts). Small values are looked up in tables built by formula at
import time, since encoding and decoding run once per field of hundreds of thousands of records.

Each reader raises the error of the layer that reads it, so its caller can say where the bytes were:
`BadValue` for a record value (the record decoders turn it into `CorruptRecordError`), `BadFraming` for
batch framing (turned into `CorruptLogError`).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "OD_INT",
    "UV",
    "UV_TABLE_SIZE",
    "ZZ",
    "ZZ_TABLE_SIZE",
    "BadFraming",
    "BadValue",
    "encode_uvarint",
    "encode_uvarint_slow",
    "read_uvarint",
    "read_zigzag",
    "zigzag",
    "zigzag_bytes",
    "zz",
]


class BadValue(Exception):
    """Malformed bytes inside a record value; converted to CorruptRecordError with a location outside."""


class BadFraming(Exception):
    """Malformed record framing inside a batch; converted to CorruptLogError with a position outside."""


# ----------------------------------------------------------------------------------------------
# Unsigned varints (record values)

UV_TABLE_SIZE = 1 << 14


def encode_uvarint_slow(n: int) -> bytes:
    """Unsigned varint bytes of any ``n`` in 0..2**32-1, without the table; ValueError outside it."""
    if n < 0 or n > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {n}")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


#: uvarint bytes of 0..16383 (one byte below 128, two above), built by formula: import time matters.
UV: list[bytes] = [
    bytes((i,)) if i < 128 else bytes(((i & 0x7F) | 0x80, i >> 7)) for i in range(UV_TABLE_SIZE)
]


def encode_uvarint(n: int) -> bytes:
    """Unsigned varint bytes of ``n`` (0 ≤ n < 2**32)."""
    return UV[n] if 0 <= n < UV_TABLE_SIZE else encode_uvarint_slow(n)


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """Read an unsigned varint at ``pos``; returns (value, next position). Raises BadValue if overlong."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result > 0xFFFFFFFF:
                raise BadValue(f"unsigned varint at byte {pos - 5} exceeds 32 bits")
            return result, pos
        shift += 7
        if shift > 28:
            raise BadValue(f"unsigned varint at byte {pos - 5} is longer than 5 bytes")


# ----------------------------------------------------------------------------------------------
# Zigzag varints (record framing inside a batch)


def read_zigzag(buf: Any, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Read a zigzag varint at ``pos`` (``max_bytes`` 10 for a varlong); raises BadFraming if overlong."""
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
            raise BadFraming(f"varint at byte {start} is longer than {max_bytes} bytes")


def zigzag(n: int) -> bytes:
    """Zigzag varint bytes of any signed 64-bit ``n``, without the table."""
    raw = (n << 1) ^ (n >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def zigzag_bytes(n: int) -> bytes:
    """Zigzag varint bytes of a non-negative 32-bit int, as record framing uses (ValueError above)."""
    return encode_uvarint_slow(n << 1)


ZZ_TABLE_SIZE = 1 << 14
#: Zigzag varint bytes of small non-negative ints (record lengths, offset deltas, value lengths).
ZZ: list[bytes] = [
    UV[2 * i] if 2 * i < len(UV) else bytes(((2 * i) & 0x7F | 0x80, ((2 * i) >> 7) | 0x80, (2 * i) >> 14))
    for i in range(ZZ_TABLE_SIZE)
]


def zz(n: int) -> bytes:
    """Zigzag varint bytes of ``n``, from the table when small."""
    return ZZ[n] if 0 <= n < ZZ_TABLE_SIZE else zigzag(n)


#: Offset delta i as its zigzag varint bytes read as one big-endian int (1 byte below 64, else 2).
OD_INT: list[int] = [2 * i if i < 64 else (((2 * i) & 0x7F | 0x80) << 8) | (2 * i) >> 7 for i in range(8192)]
