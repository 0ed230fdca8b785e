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
        found = self.locate(offset, max_bytes, upto)
        if found is None:
            return b""
        fd, pos, count = found
        try:
            return _pread_all(fd, count, pos)
        finally:
            os.close(fd)

    def locate(self, offset: int, max_bytes: int, upto: int) -> tuple[int, int, int] | None:
        """Where `read`'s bytes are: (an open descriptor of the segment, now the caller's to close,
        position, byte count), or None when there is nothing to hand out.

        The cut is found from the index's entries (batch starts) and a few headers after the last
        entry that fits, not by reading the bytes: the caller can send them with sendfile, and the
        descriptor stays valid if retention deletes the segment meanwhile."""
        segs = self._segs
        bases = [s.base_offset for s in segs]
        i = bisect.bisect_right(bases, offset) - 1
        i = max(i, 0)
        while i < len(segs) and 0 <= segs[i].end_offset <= offset:
            i += 1
        if i >= len(segs):
            return None
        seg = segs[i]
        end = seg.end_position
        pos = seg.floor_position(offset)
        try:
            fd = os.open(seg.path, os.O_RDONLY)
        except FileNotFoundError:
            return None  # retention deleted it since: the fetcher asks again and is sent to the snapshot
        try:
            while pos + _HEADER_NEEDED <= end:  # skip the batches before the one holding `offset`
                head = _header(fd, pos)
                if head is None:
                    break
                base, length, last = head
                if last >= offset:
                    break
                pos += 12 + length
            else:
                os.close(fd)
                return None
            cut = self._cut(seg, fd, pos, end, min(end, pos + max(0, max_bytes)), upto)
            if cut == pos:  # the first batch alone exceeds max_bytes (or none is below `upto`)
                head = _header(fd, pos)
                if head is None or head[2] >= upto or pos + 12 + head[1] > end:
                    os.close(fd)
                    return None
                cut = pos + 12 + head[1]
        except BaseException:
            os.close(fd)
            raise
        return fd, pos, cut - pos

    @staticmethod
    def _cut(seg: SegmentIndex, fd: int, pos: int, end: int, limit: int, upto: int) -> int:
        """The end of the last whole batch after ``pos`` that ends by ``limit`` and lies below ``upto``.

        An entry's batch starts where the batches before it end, and their records lie below the
        entry's (the batch's last) offset: the last entry within ``limit`` whose offset is below
        ``upto`` is a valid cut, and the headers from there to the next entry refine it. ``end`` is the
        indexed end read before ``seg.end_offset`` is read here (the writer's `add` moves the position
        first), so the two never pair a newer end with an older offset."""
        if limit == end and seg.end_offset <= upto:
            return limit  # the rest of the segment, all of it committed
        n = len(seg.positions)
        j = bisect.bisect_right(seg.positions, limit, 0, n) - 1
        while j >= 0 and seg.positions[j] > pos and seg.offsets[j] >= upto:
            j -= 1
        q = seg.positions[j] if j >= 0 and seg.positions[j] > pos else pos
        while q + _HEADER_NEEDED <= limit:
            head = _header(fd, q)
            if head is None:
                break
            _base, length, last = head
            if last >= upto or q + 12 + length > limit:
                break
            q += 12 + length
        return q


def _header(fd: int, pos: int) -> tuple[int, int, int] | None:
    """(base offset, length, last offset) of the batch at ``pos``; None if the file ends first."""
    head = os.pread(fd, 27, pos)
    if len(head) < 27:
        return None
    base, length = _HEAD.unpack_from(head, 0)
    (delta,) = _LAST_DELTA.unpack_from(head, 23)
    return base, length, base + delta


def _pread_all(fd: int, count: int, pos: int) -> bytes:
    """``count`` bytes at ``pos`` (fewer only if the file is shorter: the caller's check fails then)."""
    data = os.pread(fd, count, pos)
    if len(data) == count or not data:
        return data
    parts = [data]
    got = len(data)
    while got < count:
        more = os.pread(fd, count - got, pos + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


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
