"""The segment files of a metadata log: naming, listing, loading, deleting, and the recovery scan.

`scan_segment` is the one place that decides, for the last segment, between a torn tail (cut on a
writable open) and damage (a CRC-valid batch follows: raise, never skip); `valid_batch_after` is the
resynchronisation both it and `log_verify` use.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from migrator.errors import UnreachableError
from migrator.kraft.batch import CorruptLogError, iter_batches

#: Segments up to this size are read into memory; larger ones are mapped.
READ_LIMIT = 64 << 20
_PREFIX = struct.Struct(">qi")
SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
#: DefaultRecordBatch.RECORDBATCH_OVERHEAD: the smallest batch.
BATCH_OVERHEAD = 61


class OffsetOrderError(CorruptLogError):
    """CRC-valid batches whose offsets go backwards: damage, never a torn tail."""


@dataclass
class Segment:
    base_offset: int
    path: Path


@dataclass
class SegmentScan:
    valid_end: int
    next_offset: int
    last_epoch: int | None
    last_timestamp: int | None
    torn_at: int | None
    torn_bytes: int
    torn_reason: str | None


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


#: Kafka's suffix for a file scheduled for deletion (LogFileUtils.DELETED_FILE_SUFFIX).
DELETED_SUFFIX = ".deleted"


def delete_file(path: Path) -> None:
    """Rename to `.deleted` first, as Kafka does, so a crash never leaves half a segment under its name."""
    gone = path.with_name(path.name + DELETED_SUFFIX)
    try:
        os.replace(path, gone)
    except FileNotFoundError:
        return
    gone.unlink(missing_ok=True)


def remove_deleted_files(partition_dir: Path) -> None:
    """Files a crash left renamed for deletion (Kafka removes them when it loads the log)."""
    for name in os.listdir(partition_dir):
        if name.endswith(DELETED_SUFFIX):
            (partition_dir / name).unlink(missing_ok=True)


def load_segment(path: Path) -> bytes | mmap.mmap:
    """A segment's bytes: read when small, mapped read-only when large (file positions stay exact)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            if size == 0:
                return b""
            if size <= READ_LIMIT:
                return f.read()
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise UnreachableError(f"{path}: segment disappeared while reading (log cleaned up?)") from None
    except PermissionError as e:
        raise UnreachableError(f"cannot read {path}: {e.strerror}") from None


def valid_batch_after(buf: bytes | mmap.mmap, start: int, file: str, min_offset: int = 0) -> int | None:
    """Position of the first CRC-valid batch at or after `start`, or None: decides torn tail vs damage.

    Only positions with magic 2 at byte 16, a sane length and a base offset not below `min_offset`
    are checksummed, so scanning garbage stays linear in practice.
    """
    total = len(buf)
    pos = start
    while True:
        hit = buf.find(b"\x02", pos + 16)
        if hit < 0:
            return None
        cand = hit - 16
        if cand + BATCH_OVERHEAD <= total:
            base, length = _PREFIX.unpack_from(buf, cand)
            if base >= min_offset and BATCH_OVERHEAD - 12 <= length and cand + 12 + length <= total:
                try:
                    batch = next(iter_batches(buf, file, cand), None)
                except CorruptLogError:
                    batch = None
                if batch is not None and batch.records_count > 0:
                    return cand
        pos = cand + 1


def scan_segment(
    path: Path, buf: bytes | mmap.mmap, base_offset: int, expect_offset: int | None, last: bool
) -> SegmentScan:
    """Check every batch of a segment (CRC, framing, increasing offsets) and find its valid end.

    In the last segment, damage with no valid batch after it is a torn tail; anywhere else it raises.
    """
    file = str(path)
    pos = 0
    next_offset = base_offset if expect_offset is None else max(base_offset, expect_offset)
    last_epoch = None
    last_ts = None
    try:
        for batch in iter_batches(buf, file):
            if batch.base_offset < next_offset:
                raise OffsetOrderError(
                    file,
                    batch.position,
                    f"batch base offset {batch.base_offset} is below the expected offset {next_offset} "
                    "(offsets must increase)",
                )
            next_offset = batch.next_offset
            last_epoch = batch.partition_leader_epoch
            last_ts = batch.max_timestamp
            pos = batch.end_position
    except OffsetOrderError:
        raise
    except CorruptLogError as e:
        # Truncated or not: if a valid batch follows (say a flipped bit in a length field), it is damage.
        after = valid_batch_after(buf, pos + 1, file, next_offset)
        if not last or after is not None:
            where = (
                f"; a valid batch follows at byte {after}" if after is not None else " (not the last segment)"
            )
            raise CorruptLogError(file, e.offset, f"{e.reason}{where}") from None
        return SegmentScan(pos, next_offset, last_epoch, last_ts, e.offset, len(buf) - e.offset, e.reason)
    return SegmentScan(pos, next_offset, last_epoch, last_ts, None, 0, None)


def list_segments(partition_dir: Path) -> list[Segment]:
    """The `%020d.log` segments of a partition directory in offset order; [] when it is missing."""
    try:
        names = os.listdir(partition_dir)
    except FileNotFoundError:
        return []
    except PermissionError as e:
        raise UnreachableError(f"cannot list {partition_dir}: {e.strerror}") from None
    segs = []
    for name in names:
        m = SEGMENT_RE.match(name)
        if m:
            segs.append(Segment(int(m.group(1)), partition_dir / name))
    segs.sort(key=lambda s: s.base_offset)
    return segs
