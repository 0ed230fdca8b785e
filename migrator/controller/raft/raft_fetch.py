"""What a Raft leader reads out of `__cluster_metadata` for a fetcher: Kafka's offset and epoch check,
record batches up to the high watermark, and slices of snapshot files.

The rules are Kafka 3.9's (ReplicatedLog.validateOffsetAndEpoch, KafkaMetadataLog.endOffsetForEpoch,
LeaderEpochFileCache.endOffsetFor, KafkaRaftClient.tryCompleteFetchRequest), applied to zk2kraft's
`MetadataLog`. The high watermark is the end of what an append has fsynced: a single-voter quorum
commits a record when its one voter has it on disk, and nothing past that is handed out, so no
fetcher ever sees a record a crash could take back.
"""

from __future__ import annotations

import os
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from migrator.controller.raft.raft_slices import SegmentSlice
from migrator.kraft.log import MetadataLog
from migrator.kraft.offset_index import LogIndex
from migrator.kraft.snapshot import SnapshotId, list_snapshots

__all__ = ["SLICE_MIN_BYTES", "FetchRead", "LogView", "Verdict"]

#: Reads of more than this are handed out as a `SegmentSlice` when the caller can send one: below it,
#: a sendfile's extra system calls cost more than the copy, and the long polls' answers stay bytes
#: (shared by every observer one append wakes).
SLICE_MIN_BYTES = 64 << 10


@dataclass(frozen=True, slots=True)
class Verdict:
    """ValidOffsetAndEpoch: ``kind`` is "valid", "diverging" or "snapshot" with (offset, epoch)."""

    kind: str
    offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class FetchRead:
    verdict: Verdict
    records: bytes
    high_watermark: int
    log_start_offset: int
    slice: SegmentSlice | None = None  # instead of ``records``: where they are (the caller closes it)


class LogView:
    """The leader's read side of a writable `MetadataLog`, safe to use from listener threads.

    Appends happen on the controller's writer thread; ``on_append`` (chained onto the log's
    ``after_append`` hook, which runs after the fsync) moves the high watermark and wakes long polls.
    """

    def __init__(self, log: MetadataLog, indexed: bool = True) -> None:
        self.log = log
        self.changed = threading.Condition()
        # Kafka's sparse offset index: a fetch reads a few headers, not its segment from the start.
        # ``indexed=False`` keeps the scan from the segment's first batch (the benchmark's baseline).
        self.index = LogIndex(log) if indexed else None
        self._hw = log.end_offset  # what an open finds is on disk: durable
        # The reads at the current high watermark by what they depend on: the observers one append wakes
        # all ask for the same (offset, epoch, max bytes); one validates and reads, the others reuse it.
        self._reads: dict[tuple[int, ...], FetchRead] = {}
        self._snaps: tuple[tuple[int, int], float, list[SnapshotId]] | None = None
        self._stat_at: tuple[tuple[int, int], float] = ((-1, -1), 0.0)  # (hw, log start), time of last stat
        self._hook: object = None
        self._woken: list[Callable[[], None]] = []  # called after each append (long_polls.LongPolls)
        self._ensure_hook()

    def _ensure_hook(self) -> None:
        """Chain onto the log's ``after_append`` (again, if something re-attached a snapshot policy).

        The chained hook is bound to the previous hook's owner, so `retention.purge_aborted`, which
        finds the snapshot policy as ``log.after_append.__self__``, still finds it.
        """
        log = self.log
        if log.after_append is self._hook and self._hook is not None:
            return
        previous = log.after_append
        view = self

        def after_append(owner: object, lg: MetadataLog, records: object, written: int) -> None:
            view.on_append()  # first: the append is durable, long polls need not wait for a snapshot
            if previous is not None:
                previous(lg, records, written)  # type: ignore[arg-type]

        hook = types.MethodType(after_append, getattr(previous, "__self__", self))
        log.after_append = hook
        self._hook = hook

    @property
    def high_watermark(self) -> int:
        return self._hw

    def on_append(self) -> None:
        if self.index is not None:
            self.index.refresh()  # the new batches only: a few headers
        with self.changed:
            self._hw = self.log.end_offset
            self._reads = {}
            self.changed.notify_all()
        for woken in self._woken:
            woken()

    def subscribe(self, woken: Callable[[], None]) -> None:
        """Call ``woken`` (cheap, non-blocking) after every append and on `wake`."""
        self._woken.append(woken)

    def wake(self) -> None:
        """Wake every long poll (the leader is closing)."""
        with self.changed:
            self.changed.notify_all()
        for woken in self._woken:
            woken()

    def wait_beyond(self, offset: int, timeout_s: float, stop: threading.Event | None = None) -> None:
        """Return once the high watermark passes ``offset``, ``timeout_s`` has gone by, or ``stop`` is set
        (and `changed` notified)."""
        with self.changed:
            self.changed.wait_for(
                lambda: self._hw > offset or (stop is not None and stop.is_set()), timeout=timeout_s
            )

    # -- snapshots ------------------------------------------------------------------------------

    def snapshots(self) -> list[SnapshotId]:
        """The snapshots on disk, listed again only when the directory changed.

        Every fetch validates against them; listing the directory for each was most of a woken long
        poll's work. The cached list is trusted only when it was taken well after the directory's
        mtime, so a change within the same coarse timestamp tick is never missed.
        """
        d = self.log.partition_dir
        cached = self._snaps
        now = time.monotonic()
        at = (self._hw, self.log.log_start_offset)
        # The long polls one append wakes share one stat. A snapshot written since (at the same high
        # watermark and log start) is seen at most 50 ms late, which changes no answer but the offset-0
        # shortcut to it: the log below it is still there.
        if cached is not None and self._stat_at[0] == at and now - self._stat_at[1] < 0.05:
            return cached[2]
        try:
            st = os.stat(d)
        except FileNotFoundError:
            return []
        self._stat_at = (at, now)
        key = (st.st_mtime_ns, st.st_ino)
        if cached is not None and cached[0] == key and cached[1] > st.st_mtime_ns / 1e9 + 0.05:
            return cached[2]
        taken = time.time()
        snaps = list_snapshots(d)
        self._snaps = (key, taken, snaps)
        return snaps

    def snapshot_path(self, end_offset: int, epoch: int) -> Path | None:
        for s in list_snapshots(self.log.partition_dir):
            if s.end_offset == end_offset and s.epoch == epoch:
                return s.path
        return None

    # -- Kafka's checks -----------------------------------------------------------------------------

    def end_offset_for_epoch(self, epoch: int, snaps: list[SnapshotId] | None = None) -> tuple[int, int]:
        """(end offset, epoch) as KafkaMetadataLog.endOffsetForEpoch answers from the epoch cache."""
        log = self.log
        epochs = log.leader_epochs
        end = self._hw
        found: tuple[int, int] | None = None
        if epochs and epochs[-1][0] == epoch:
            found = (end, epoch)
        elif epoch >= 0:
            higher = next(((e, s) for e, s in epochs if e > epoch), None)
            if higher is not None:
                floor = [(e, s) for e, s in epochs if e <= epoch]
                found = (higher[1], floor[-1][0] if floor else epoch)
        snaps = self.snapshots() if snaps is None else snaps
        earliest = next((s for s in snaps if s.end_offset >= log.log_start_offset), None)
        if found is not None:
            if earliest is not None and found == (earliest.end_offset, epoch):
                return earliest.end_offset, earliest.epoch
            return found
        return end, log.latest_epoch

    def validate(self, offset: int, epoch: int) -> Verdict:
        """ReplicatedLog.validateOffsetAndEpoch, with the leader's offset-0 shortcut to the snapshot."""
        snaps = self.snapshots()
        start = self.log.log_start_offset
        if offset == 0 and snaps:
            latest = snaps[-1]
            return Verdict("snapshot", latest.end_offset, latest.epoch)
        if start == 0 and offset == 0:
            return Verdict("valid", 0, 0)
        earliest = next((s for s in snaps if s.end_offset >= start), None)
        if earliest is not None and (
            offset < start or (offset == start and epoch != earliest.epoch) or epoch < earliest.epoch
        ):
            return Verdict("snapshot", snaps[-1].end_offset, snaps[-1].epoch)
        end, end_epoch = self.end_offset_for_epoch(epoch, snaps)
        if end_epoch != epoch or end < offset:
            return Verdict("diverging", end, end_epoch)
        return Verdict("valid", offset, epoch)

    # -- reading ------------------------------------------------------------------------------------

    def read(self, offset: int, last_epoch: int, max_bytes: int, sliced: bool = False) -> FetchRead:
        """What a Fetch for (offset, last fetched epoch) gets: batches from the one holding ``offset``
        up to the high watermark, whole batches, at least one even when it exceeds ``max_bytes``.
        With ``sliced``, more than `SLICE_MIN_BYTES` of them come as ``slice``, not read."""
        self._ensure_hook()
        hw, reads = self._hw, self._reads
        snaps = self.snapshots()
        start = self.log.log_start_offset
        key = (offset, last_epoch, max_bytes, hw, start, len(snaps), snaps[-1].end_offset if snaps else -1)
        got = reads.get(key)
        if got is None:
            got = self._read(offset, last_epoch, max_bytes, hw, sliced)
            if (
                got.slice is None and len(reads) < 64 and len(got.records) <= 64 << 10
            ):  # the long-poll answers, not catch-up
                reads[key] = got
        return got

    def _read(self, offset: int, last_epoch: int, max_bytes: int, hw: int, sliced: bool = False) -> FetchRead:
        verdict = self.validate(offset, last_epoch)
        out = bytearray()
        if verdict.kind == "valid" and offset < hw and self.index is not None:
            index = self.index
            if self.log.segments and index.first_base != self.log.segments[0].base_offset:
                index.refresh()  # retention deleted segments since the last append
            start = self.log.log_start_offset
            found = index.locate(offset, max_bytes, hw)
            if found is None:
                return FetchRead(verdict, b"", hw, start)
            part = SegmentSlice(*found)
            if sliced and part.count > SLICE_MIN_BYTES:
                return FetchRead(verdict, b"", hw, start, part)
            try:
                data = part.read()
            finally:
                part.close()
            if len(data) != part.count:
                raise OSError(f"a segment held {len(data)} of the {part.count} bytes its index promised")
            return FetchRead(verdict, data, hw, start)
        if verdict.kind == "valid" and offset < hw:
            for _attempt in range(3):  # a segment roll on the writer thread can cut one read short
                out.clear()
                try:
                    for batch in self.log.batches(offset, verify_crc=False):
                        if batch.next_offset > hw:
                            break
                        raw = batch.raw()
                        if out and len(out) + len(raw) > max_bytes:
                            break
                        out += raw
                        if len(out) >= max_bytes:
                            break
                    break
                except Exception:  # a file renamed or cut under us: read again from the new list
                    if _attempt == 2:
                        raise
        return FetchRead(verdict, bytes(out), hw, self.log.log_start_offset)
