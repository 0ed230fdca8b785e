"""The image at the end of a metadata log, kept between asks (`MetadataLog.load_image`).

Asked again with nothing appended, the same result comes back (callers treat it as read-only;
ImageBuilder copies before it replays); after appends, a copy of it goes on with the new records; after a
snapshot the copy that was snapshotted is kept as a replay of that snapshot would give it. `migrate`
asks after every phase, and replaying 200,000 partitions from offset 0 each time was a third of the
command.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from migrator.bulk import without_gc
from migrator.errors import BadInputError
from migrator.kraft.dirfiles import MetaProperties
from migrator.kraft.image import ImageBuilder, ReplayResult, Uncommitted
from migrator.kraft.records import MetadataRecord, OpaqueRecord
from migrator.kraft.snapshot import SnapshotId, read_snapshot

__all__ = ["ImageCache", "LoadedImage"]


@dataclass
class LoadedImage:
    """The replayed image of a log plus where it came from."""

    result: ReplayResult
    snapshot: str | None
    snapshot_end_offset: int | None
    end_offset: int


class ImageSource(Protocol):
    """What the cache reads of its log (`MetadataLog`)."""

    partition_dir: Path
    meta: MetaProperties | None

    @property
    def end_offset(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    def snapshot_ids(self) -> list[SnapshotId]: ...

    def read(self, from_offset: int = 0) -> Iterator[tuple[int, int, MetadataRecord | OpaqueRecord]]: ...


class ImageCache:
    """One log's last loaded image and how it goes on from there."""

    def __init__(self, log: ImageSource) -> None:
        self._log = log
        self.kept: LoadedImage | None = None

    def forget(self) -> None:
        """Drop the kept answer: its caller takes that image over to change it (the first sync's
        syncer, instead of copying a whole cluster), so it must not be handed out again."""
        self.kept = None

    def snapshot_written(self, loaded: LoadedImage, path: Path, counts: dict[str, int]) -> None:
        """`loaded` (the image at the log's end) was just snapshotted at `path`, its records counted by
        name in `counts`: keep it as `load_image`'s answer, as a replay of that snapshot would give it,
        instead of replaying the whole cluster from the new snapshot (the copy's commit: 6 s and a
        second image at once at 1M partitions). tests/test_kraft_retention.py holds it equal to a
        fresh load of the directory."""
        end = loaded.end_offset
        if end != self._log.end_offset or loaded.result.open_transaction is not None:
            return
        result = loaded.result.model_copy()  # shares the image: load_image's answers are read-only
        at = end - 1 if counts else -1  # a snapshot's records stand at its last contained offset
        result.last_offset = at
        result.migration_state_offset = at if result.migration_state is not None else None
        result.counts = dict(counts)
        result.unknown_records = counts.get("UnknownRecord", 0)
        result.committed_transactions = result.aborted_transactions = 0
        self.kept = LoadedImage(result=result, snapshot=str(path), snapshot_end_offset=end, end_offset=end)

    def load(self) -> LoadedImage:
        """The image at the end of the log: the newest snapshot, then the records after it.

        The last image is kept. Asked again with nothing appended, the same result comes back (callers
        treat it as read-only; ImageBuilder copies before it replays); after appends, a copy of it goes
        on with the new records. `migrate` asks after every phase, and replaying 200,000 partitions
        from offset 0 each time was a third of the command.
        """
        with without_gc():  # see migrator.bulk: most of a large replay was the collector's
            cached = self.kept
            if cached is not None and self._newest_snapshot_end() != cached.snapshot_end_offset:
                cached = None  # a newer snapshot: load from it, as any reader of the directory would
            if cached is not None and cached.end_offset == self._log.end_offset:
                return cached
            if cached is not None and self._log.log_start_offset <= cached.end_offset < self._log.end_offset:
                loaded = self._continue(cached)
            else:
                loaded = self._load()
            self.kept = loaded
            return loaded

    def _newest_snapshot_end(self) -> int | None:
        snaps = self._log.snapshot_ids()
        return snaps[-1].end_offset if snaps else None

    def _continue(self, previous: LoadedImage) -> LoadedImage:
        try:  # betting that what was appended commits (ImageBuilder(committed=True)), else buffered
            result = self._continue_result(previous, committed=True)
        except Uncommitted:
            if previous.result.open_transaction is not None:
                # its records were not kept: only an abort (an interrupted copy's) goes on from here
                return self._load()
            result = self._continue_result(previous, committed=False)
        return LoadedImage(
            result=result,
            snapshot=previous.snapshot,
            snapshot_end_offset=previous.snapshot_end_offset,
            end_offset=self._log.end_offset,
        )

    def _continue_result(self, previous: LoadedImage, committed: bool) -> ReplayResult:
        # a copy: what was handed out stays as it was
        builder = ImageBuilder(previous.result, committed=committed)
        for offset, _epoch, rec in self._log.read(previous.end_offset):
            builder.replay(offset, rec)
        return builder.finish()

    def _load(self) -> LoadedImage:
        try:  # betting that every transaction commits (ImageBuilder(committed=True)), else buffered
            return self._load_as(committed=True)
        except Uncommitted:
            return self._load_as(committed=False)

    def _load_as(self, committed: bool) -> LoadedImage:
        snaps = self._log.snapshot_ids()
        snap = snaps[-1] if snaps else None
        start = 0
        builder = ImageBuilder(committed=committed)
        if snap is not None:
            # A snapshot's records stand for the state at its last contained offset.
            at = snap.end_offset - 1
            for _offset, rec in read_snapshot(snap.path).records:
                builder.replay(at, rec)
            if builder.finish().open_transaction is not None:
                raise BadInputError(f"{snap.path}: snapshot ends inside a metadata transaction")
            start = snap.end_offset
        if self._log.log_start_offset > start and self._log.end_offset > start:
            raise BadInputError(
                f"{self._log.partition_dir}: the log starts at offset {self._log.log_start_offset} but "
                + (f"the newest snapshot ends at {start}" if snap else "there is no snapshot")
                + f"; offsets {start}..{self._log.log_start_offset - 1} are missing"
            )
        for offset, _epoch, rec in self._log.read(start):
            builder.replay(offset, rec)
        result = builder.finish()
        if self._log.meta is not None:
            result.image.cluster_id = self._log.meta.cluster_id
        return LoadedImage(
            result=result,
            snapshot=str(snap.path) if snap else None,
            snapshot_end_offset=snap.end_offset if snap else None,
            end_offset=self._log.end_offset,
        )
