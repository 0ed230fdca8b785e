"""Reading the records appended since the last read, without walking the active segment again.

`MetadataLog.read(offset)` loads the segment holding `offset` and checks every batch from its first
byte: right for a reader that starts anywhere, but the dual-write syncer and the finalize guard read
the few records appended since their previous read, many times a second, from a segment that holds
the whole copy (megabytes at 100,000 partitions). `LogTail` remembers where its last read ended
(segment file, byte position, offset) and reads only the bytes after it; any other start (a reader
going back, a segment rolled or cut since) goes through `MetadataLog` as before.

Like every reader of a writable log, it is called where no append runs at the same time (the
controller's commit lock, or the single writing thread).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from migrator.kraft.batch import RecordBatch, iter_batches
from migrator.kraft.batch_decode import decode_batch_records
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import MetadataRecord, OpaqueRecord

__all__ = ["LogTail"]

Entry = tuple[int, int, MetadataRecord | OpaqueRecord]


class LogTail:
    """`read(offset)` as `MetadataLog.read`, from the byte where the previous read stopped when it can."""

    def __init__(self, log: MetadataLog) -> None:
        self.log = log
        self._path: str | None = None  # the segment the cursor is in
        self._pos = 0  # byte after the last batch read
        self._next = -1  # offset after the last batch read

    def read(self, from_offset: int) -> Iterator[Entry]:
        segs = self.log.segments
        active = str(segs[-1].path) if segs else None
        end = self.log.active_end
        if self._path is None or self._path != active or from_offset != self._next or self._pos > end:
            return self._through_log(from_offset, active)
        return self._from_cursor(active, end)

    def _from_cursor(self, path: str, end: int) -> Iterator[Entry]:
        if self._pos == end:
            return
        fd = os.open(path, os.O_RDONLY)
        try:
            buf = os.pread(fd, end - self._pos, self._pos)
        finally:
            os.close(fd)
        base = self._pos
        for batch in iter_batches(buf, path):
            self._pos = base + batch.end_position
            self._next = batch.next_offset
            yield from _records(batch, -1)

    def _through_log(self, from_offset: int, active: str | None) -> Iterator[Entry]:
        self._path = None
        for batch in self.log.batches(from_offset):
            if batch.file == active:
                self._path = active
                self._pos = batch.end_position
                self._next = batch.next_offset
            yield from _records(batch, from_offset)
        if self._path is None and active is not None and self.log.end_offset <= from_offset:
            # Nothing after `from_offset` yet: the next read starts at the active segment's end.
            self._path, self._pos, self._next = active, self.log.active_end, self.log.end_offset


def _records(batch: RecordBatch, from_offset: int) -> list[Entry]:
    if batch.is_control:
        return []
    epoch = batch.partition_leader_epoch
    if batch.base_offset >= from_offset:
        return [(offset, epoch, rec) for offset, rec in decode_batch_records(batch)]
    return [(offset, epoch, rec) for offset, rec in decode_batch_records(batch) if offset >= from_offset]
