"""A ZK-mode broker's answer to LeaderAndIsr or UpdateMetadata, checked without decoding it when nothing failed.

Every LeaderAndIsr response names each partition of the request with its error, nearly always 0, and
under AlterPartition load the channels read several a second per broker: kio's reader built an entity
per partition only for `response_errors` to find none set. `all_clear` walks the bytes instead (the
layout of Kafka 3.9's LeaderAndIsrResponse.json / UpdateMetadataResponse.json, the same versions
`zk_broker_messages` declares) and answers only the common case: every error 0, no tagged field, the
frame read to its last byte. Anything else (an error, a tag, StopReplica, bytes it cannot place) is
None, and the caller decodes the frame with kio as before, which reports errors and malformed frames
as it always did. tests/test_zk_broker_responses.py holds the two paths to the same verdict.
"""

from __future__ import annotations

import struct

from migrator.controller.zk_brokers import zk_broker_messages as Z
from migrator.kraft.varint import BadValue, read_uvarint

__all__ = ["all_clear"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I32_I16 = struct.Struct(">ih")


def _count(buf: bytes, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's length (compact: length + 1; classic: int32); ValueError for null (kio refuses it
    for these non-nullable arrays)."""
    if flexible:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        n = _I32.unpack_from(buf, pos)[0]
        pos += 4
    if n < 0:
        raise ValueError("null array")
    return n, pos


def _skip_string(buf: bytes, pos: int, flexible: bool) -> int:
    if flexible:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        n = _I16.unpack_from(buf, pos)[0]
        pos += 2
    if n < 0:
        raise ValueError("null string")
    if pos + n > len(buf):
        raise ValueError("string past the end")
    buf[pos : pos + n].decode()  # kio refuses a name that is not UTF-8 (UnicodeDecodeError, a ValueError)
    return pos + n


def _no_tags(buf: bytes, pos: int) -> int:
    """Position after an empty tagged-field section; ValueError if it holds any field."""
    if buf[pos] != 0:
        raise ValueError("tagged fields")
    return pos + 1


def all_clear(api_key: int, version: int, payload: bytes) -> int | None:
    """The correlation id of a response frame (without its size) whose top-level and per-partition
    errors are all 0, None if it is anything else (decode it then, see the module docstring)."""
    try:
        return _all_clear(api_key, version, payload)
    except (ValueError, IndexError, struct.error, BadValue):
        return None


def _all_clear(api_key: int, version: int, buf: bytes) -> int | None:
    flexible = Z.is_flexible(api_key, version)
    cid = _I32.unpack_from(buf, 0)[0]
    pos = _no_tags(buf, 4) if flexible else 4  # response header v1 carries a tag section
    if _I16.unpack_from(buf, pos)[0] != 0:
        return None
    pos += 2
    if api_key == Z.LEADER_AND_ISR:
        pos = _leader_and_isr(buf, pos, version, flexible)
        if pos is None:
            return None
    elif api_key != Z.UPDATE_METADATA:
        return None  # StopReplica: rare, decoded in full
    if flexible:
        pos = _no_tags(buf, pos)
    return cid if pos == len(buf) else None


def _leader_and_isr(buf: bytes, pos: int, version: int, flexible: bool) -> int | None:
    """Past LeaderAndIsrResponse's partition errors (v0-4 flat with topic names, v5+ by topic id),
    None at the first error."""
    if version <= 4:
        n, pos = _count(buf, pos, flexible)
        for _ in range(n):
            pos = _skip_string(buf, pos, flexible)
            if _I32_I16.unpack_from(buf, pos)[1] != 0:
                return None
            pos = _no_tags(buf, pos + 6) if flexible else pos + 6
        return pos
    topics, pos = _count(buf, pos, flexible)
    for _ in range(topics):
        pos += 16  # topic id
        n, pos = _count(buf, pos, flexible)
        for _ in range(n):
            if _I32_I16.unpack_from(buf, pos)[1] != 0:
                return None
            pos = _no_tags(buf, pos + 6)  # v5+ is flexible
        pos = _no_tags(buf, pos)
    return pos
