"""Offset and time indexes of `__cluster_metadata` segments, as Kafka keeps them beside each `.log`.

A Raft leader answers every fetch from the batch holding the fetch offset. Without an index that means
walking the segment from its first byte for each fetch (100 observers woken by one append each walked
~90 MB); with Kafka's sparse offset index (one entry per `log.index.interval.bytes` of batches) a fetch
reads a few headers and then exactly the bytes it hands out.

Entries are Kafka's (LogSegment.append / LogSegment.recover): before a batch is added, when more than
`INDEX_INTERVAL_BYTES` were written since the last entry, the offset index gets (batch last offset,
batch position) and the time index (max timestamp so far, the offset holding it). The files are Kafka's
`.index` (4-byte relative offset, 4-byte position) and `.timeindex` (8-byte timestamp, 4-byte relative
offset), written trimmed to their entries as Kafka leaves them on a clean shutdown.
"""

from __future__ import annotations

import bisect
import os
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

__all__ = [
    "INDEX_INTERVAL_BYTES",
    "LogIndex",
    "SegmentIndex",
    "read_index_file",
    "read_time_index_file",
    "write_index_files",
]

#: log.index.interval.bytes (Kafka's default).
INDEX_INTERVAL_BYTES = 4096
_HEAD = struct.Struct(">qi")  # base offset, batch length (bytes after these 12)
_LAST_DELTA = struct.Struct(">i")  # at byte 23
_MAX_TS = struct.Struct(">q")  # at byte 35
_HEADER_NEEDED = 43  # through maxTimestamp
_CHUNK = 1 << 20
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class _Log(Protocol):
    """What the index needs of a `MetadataLog` (kept structural: the log imports nothing from here)."""

    @property
    def segments(self) -> list: ...  # type: ignore[type-arg]

    @property
    def active_end(self) -> int: ...


@dataclass(slots=True)
class SegmentIndex:
    """The index of one segment over its first ``end_position`` bytes (whole batches)."""

    base_offset: int
    path: Path
    offsets: list[int] = field(default_factory=list)  # entry offsets (a batch's last offset)
    positions: list[int] = field(default_factory=list)
    times: list[tuple[int, int]] = field(default_factory=list)  # (max timestamp so far, its offset)
    end_position: int = 0
    end_offset: int = -1  # one past the last indexed batch; -1 while empty
    since_entry: int = 0
    max_ts: int = -1
    max_ts_offset: int = -1

    def add(self, base: int, length: int, last_offset: int, max_ts: int) -> None:
        """Account for the batch at ``end_position``, in LogSegment.recover's order: max timestamp
        first, then an entry when more than the interval was written since the last one."""
        if max_ts > self.max_ts:
            self.max_ts, self.max_ts_offset = max_ts, last_offset
        if self.since_entry > INDEX_INTERVAL_BYTES:
            self.offsets.append(last_offset)
            self.positions.append(self.end_position)
            self._time_entry()
            self.since_entry = 0
        self.since_entry += 12 + length
        self.end_position += 12 + length
        self.end_offset = last_offset + 1

    def _time_entry(self) -> None:
        """TimeIndex.maybeAppend: only a timestamp above the last entry's."""
        if self.max_ts >= 0 and (not self.times or self.max_ts > self.times[-1][0]):
            self.times.append((self.max_ts, self.max_ts_offset))

    def extend(self, fd: int, end: int) -> None:
        """Index the batches between ``end_position`` and ``end`` (whole batches, read in chunks)."""
        pos = self.end_position
        buf = b""
        buf_at = pos
        while pos + _HEADER_NEEDED <= end:
            rel = pos - buf_at
            if rel < 0 or rel + _HEADER_NEEDED > len(buf):
                buf = os.pread(fd, min(_CHUNK, end - pos), pos)
                buf_at, rel = pos, 0
                if len(buf) < _HEADER_NEEDED:
                    return  # the file is shorter than the log says: cut under us, stop here
            base, length = _HEAD.unpack_from(buf, rel)
            if length < _HEADER_NEEDED - 12 or pos + 12 + length > end:
                return
            (delta,) = _LAST_DELTA.unpack_from(buf, rel + 23)
            (max_ts,) = _MAX_TS.unpack_from(buf, rel + 35)
            self.add(base, length, base + delta, max_ts)
            pos += 12 + length

    def floor_position(self, offset: int) -> int:
        """The position to start looking for ``offset`` from: the last entry at or below it."""
        i = bisect.bisect_right(self.offsets, offset, 0, len(self.positions)) - 1
        return self.positions[i] if i >= 0 else 0


class LogIndex:
    """Offset indexes of every segment of a log, kept up to date by the writer after each durable append
    (``refresh``) and read by fetch threads (``read``) without touching what they do not hand out."""

    def __init__(self, log: _Log) -> None:
        self.log = log
        self._lock = threading.Lock()
        self._segs: list[SegmentIndex] = []
        self.refresh()

    @property
    def first_base(self) -> int:
        segs = self._segs
        return segs[0].base_offset if segs else -1

    @property
    def end_offset(self) -> int:
        segs = self._segs
        for s in reversed(segs):
            if s.end_offset >= 0:
                return s.end_offset
        return -1

    def refresh(self) -> None:
        """Follow the log's segments: drop deleted ones, index new bytes, rebuild one cut back."""
        with self._lock:
            log_segs = list(self.log.segments)
            old = {s.base_offset: s for s in self._segs}
            new: list[SegmentIndex] = []
            for i, seg in enumerate(log_segs):
                last = i == len(log_segs) - 1
                idx = old.get(seg.base_offset)
                try:
                    end = self.log.active_end if last else os.stat(seg.path).st_size
                except FileNotFoundError:
                    continue
                if idx is None or idx.path != seg.path or idx.end_position > end:
                    idx = SegmentIndex(seg.base_offset, seg.path)  # new, or truncated: index afresh
                if idx.end_position < end:
                    try:
                        fd = os.open(seg.path, os.O_RDONLY)
                    except FileNotFoundError:
                        continue
                    try:
                        idx.extend(fd, end)
                    finally:
                        os.close(fd)
                new.append(idx)
            self._segs = new

    def segment(self, base_offset: int) -> SegmentIndex | None:
        return next((s for s in self._segs if s.base_offset == base_offset), None)

    def read(self, offset: int, max_bytes: int, upto: int) -> bytes:
        """Whole batches from the one holding ``offset`` whose records all lie below ``upto`` (the high
        watermark), at most ``max_bytes`` of them but at least one; from one segment, as Kafka reads."""
        segs = self._segs
        bases = [s.base_offset for s in segs]
        i = bisect.bisect_right(bases, offset) - 1
        i = max(i, 0)
        while i < len(segs) and 0 <= segs[i].end_offset <= offset:
            i += 1
        if i >= len(segs):
            return b""
        seg = segs[i]
        end = seg.end_position
        pos = seg.floor_position(offset)
        try:
            fd = os.open(seg.path, os.O_RDONLY)
        except FileNotFoundError:
            return b""  # retention deleted it since: the fetcher asks again and is sent to the snapshot
        try:
            while pos + _HEADER_NEEDED <= end:  # skip the batches before the one holding `offset`
                head = os.pread(fd, 27, pos)
                if len(head) < 27:
                    return b""
                base, length = _HEAD.unpack_from(head, 0)
                (delta,) = _LAST_DELTA.unpack_from(head, 23)
                if base + delta >= offset:
                    break
                pos += 12 + length
            window = os.pread(fd, max(0, min(end - pos, max_bytes)), pos)
            cut = 0
            while cut + _HEADER_NEEDED <= len(window):
                base, length = _HEAD.unpack_from(window, cut)
                (delta,) = _LAST_DELTA.unpack_from(window, cut + 23)
                if base + delta >= upto or cut + 12 + length > len(window):
                    break
                cut += 12 + length
            if cut == 0 and pos + _HEADER_NEEDED <= end:  # the first batch alone exceeds max_bytes
                head = os.pread(fd, 27, pos)
                base, length = _HEAD.unpack_from(head, 0)
                (delta,) = _LAST_DELTA.unpack_from(head, 23)
                if base + delta < upto and pos + 12 + length <= end:
                    return os.pread(fd, 12 + length, pos)
                return b""
            return window[:cut]
        finally:
            os.close(fd)


def write_index_files(seg: SegmentIndex) -> tuple[Path, Path]:
    """Write Kafka's `.index` and `.timeindex` for ``seg`` beside its `.log`, trimmed to the entries."""
    idx_path, time_path = seg.path.with_suffix(".index"), seg.path.with_suffix(".timeindex")
    base = seg.base_offset
    off = b"".join(_OFFSET_ENTRY.pack(o - base, p) for o, p in zip(seg.offsets, seg.positions, strict=True))
    times_list = list(seg.times)
    if seg.max_ts >= 0 and (not times_list or seg.max_ts > times_list[-1][0]):
        times_list.append((seg.max_ts, seg.max_ts_offset))  # what a clean close appends last
    times = b"".join(_TIME_ENTRY.pack(t, o - base) for t, o in times_list)
    for path, data in ((idx_path, off), (time_path, times)):
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    return idx_path, time_path


def read_index_file(path: Path, base_offset: int) -> list[tuple[int, int]]:
    """(absolute offset, position) entries of a Kafka `.index` file (a partial entry is an error)."""
    data = path.read_bytes()
    if len(data) % _OFFSET_ENTRY.size:
        raise ValueError(f"{path}: {len(data)} bytes is not a whole number of 8-byte entries")
    return [(base_offset + r, p) for r, p in _OFFSET_ENTRY.iter_unpack(data)]


def read_time_index_file(path: Path, base_offset: int) -> list[tuple[int, int]]:
    """(timestamp, absolute offset) entries of a Kafka `.timeindex` file."""
    data = path.read_bytes()
    if len(data) % _TIME_ENTRY.size:
        raise ValueError(f"{path}: {len(data)} bytes is not a whole number of 12-byte entries")
    return [(t, base_offset + r) for t, r in _TIME_ENTRY.iter_unpack(data)]
