"""Snapshots and retention of the metadata log as Kafka's controller keeps them.

Cadence (Kafka's `SnapshotGenerator`): a snapshot is written once `metadata.log.max.record.bytes.between.
snapshots` bytes of records were committed since the last one, or `metadata.log.max.snapshot.interval.ms`
passed since it and something was committed; always at an offset outside any metadata transaction (Kafka's
loader publishes only there). Retention (`KafkaMetadataLog.maybeClean`): while the segments plus the
snapshots exceed `metadata.max.retention.bytes`, or the oldest snapshot is older than `metadata.max.
retention.ms`, the oldest snapshot goes, the log start moves to the next snapshot's end offset and the
segments wholly below it are deleted; the newest snapshot is never deleted.

Aborted transactions (`purge_aborted`): Kafka 3.9's `MetadataBatchLoader` keeps an aborted transaction's
records when the record after the AbortTransactionRecord comes in the same load, so no Kafka reader may
be handed them: the log start is moved past them behind a snapshot, with the segment rolled so that the
records go physically (Kafka derives the log start from the first segment when it opens the log), and
the next commit (the redone copy's) is snapshotted too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from migrator.errors import BadInputError, ZkKraftError
from migrator.kraft.batch import LOG_OVERHEAD
from migrator.kraft.batch_decode import decode_batch_records
from migrator.kraft.image import ReplayResult, snapshot_records
from migrator.kraft.records import MetadataRecord
from migrator.kraft.snapshot import (
    list_snapshots,
    read_snapshot_timestamp,
    write_snapshot,
    write_snapshot_file,
)

if TYPE_CHECKING:
    from migrator.kraft.log import MetadataLog
    from migrator.kraft.records import OpaqueRecord

__all__ = [
    "PROPERTY_KEYS",
    "RetentionConfig",
    "SnapshotPolicy",
    "clean",
    "default_config",
    "hold_snapshots",
    "purge_aborted",
    "release_snapshots",
    "release_snapshots_beside",
    "set_default_config",
    "snapshot_now",
    "start_at_snapshot",
]

_BEGIN, _END, _ABORT = 23, 24, 25
#: How often (at most) an append checks the retention rules (Kafka's KafkaRaftClient polls them).
_CLEAN_EVERY_MS = 60_000


@dataclass(frozen=True)
class RetentionConfig:
    """Kafka's controller settings for snapshots, retention and segment size, with Kafka 3.9's defaults.

    The segment size matters to retention: it deletes whole segments only, so a log that never rolls
    keeps every record on disk however far its start moves."""

    max_bytes_between_snapshots: int = 20 << 20  # metadata.log.max.record.bytes.between.snapshots
    snapshot_interval_ms: int = 3_600_000  # metadata.log.max.snapshot.interval.ms (0: no time trigger)
    retention_bytes: int = 100 << 20  # metadata.max.retention.bytes (-1: no size limit)
    retention_ms: int = 7 * 24 * 3_600_000  # metadata.max.retention.ms (-1: no time limit)
    segment_bytes: int = 1 << 30  # metadata.log.segment.bytes: a segment rolls before passing it
    segment_min_bytes: int = 8 << 20  # metadata.log.segment.min.bytes (Kafka-internal, for tests)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> RetentionConfig:
        """The settings a Kafka controller's properties file gives (other keys are ignored)."""
        values: dict[str, int] = {}
        for key, attr in PROPERTY_KEYS.items():
            if key in props:
                try:
                    values[attr] = int(props[key].strip())
                except ValueError:
                    raise BadInputError(f"{key}={props[key]!r}: not an integer") from None
        config = cls(**values)
        if config.max_bytes_between_snapshots < 1:
            raise BadInputError("metadata.log.max.record.bytes.between.snapshots must be at least 1")
        if config.snapshot_interval_ms < 0:
            raise BadInputError("metadata.log.max.snapshot.interval.ms must be 0 or more")
        for key, value in (
            ("metadata.log.segment.bytes", config.segment_bytes),
            ("metadata.log.segment.min.bytes", config.segment_min_bytes),
        ):
            if value < LOG_OVERHEAD:  # KRaftConfigs: atLeast(Records.LOG_OVERHEAD)
                raise BadInputError(f"{key}={value}: must be at least {LOG_OVERHEAD}")
        if config.segment_bytes < config.segment_min_bytes:  # KafkaMetadataLog.apply refuses to start
            raise BadInputError(
                f"Cannot set metadata.log.segment.bytes below {config.segment_min_bytes}: "
                f"{config.segment_bytes} (Kafka's bound; its internal metadata.log.segment.min.bytes "
                "lowers it, for testing only)"
            )
        return config


#: Kafka property name -> RetentionConfig field.
PROPERTY_KEYS: dict[str, str] = {
    "metadata.log.max.record.bytes.between.snapshots": "max_bytes_between_snapshots",
    "metadata.log.max.snapshot.interval.ms": "snapshot_interval_ms",
    "metadata.max.retention.bytes": "retention_bytes",
    "metadata.max.retention.ms": "retention_ms",
    "metadata.log.segment.bytes": "segment_bytes",
    "metadata.log.segment.min.bytes": "segment_min_bytes",
}
assert set(PROPERTY_KEYS.values()) == {f.name for f in fields(RetentionConfig)}


_default = RetentionConfig()


def set_default_config(config: RetentionConfig) -> None:
    """The settings of every log this process opens for writing without its own (`--config` sets it)."""
    global _default
    _default = config


def default_config() -> RetentionConfig:
    return _default


def _now_ms() -> int:
    return int(time.time() * 1000)


def snapshot_now(log: MetadataLog, at_end: ReplayResult | None = None) -> int | None:
    """Snapshot the log at its end offset; returns that offset, or None inside an open transaction.

    The image comes from the directory itself (newest snapshot + records), so it is exactly what any
    reader of the directory would load; or it is `at_end`, the caller's replay of this log to its end
    (the first sync's syncer holds one: a second replay of 1M partitions was ~8 s), which the log
    does not keep (its owner goes on changing it). An existing snapshot at that offset is kept.
    """
    end = log.end_offset
    snaps = list_snapshots(log.partition_dir)
    if snaps and snaps[-1].end_offset >= end:
        return snaps[-1].end_offset if snaps[-1].end_offset == end else None
    if at_end is not None:
        if at_end.open_transaction is not None:
            return None
        write_snapshot(log, snapshot_records(at_end), end_offset=end)
        return end
    loaded = log.load_image()
    if loaded.result.open_transaction is not None:
        return None
    counts: dict[str, int] = {}
    path = write_snapshot(log, _counted(snapshot_records(loaded.result), counts), end_offset=end)
    log.snapshot_written(loaded, path, counts)
    return end


def _counted(
    records: Iterable[MetadataRecord | OpaqueRecord], counts: dict[str, int]
) -> Iterator[MetadataRecord | OpaqueRecord]:
    """`records`, counting them by name as they go (what a replay of the snapshot counts)."""
    for rec in records:
        name = rec.name if isinstance(rec, MetadataRecord) else "UnknownRecord"
        counts[name] = counts.get(name, 0) + 1
        yield rec


def clean(log: MetadataLog, config: RetentionConfig, now_ms: int | None = None) -> bool:
    """Kafka's `maybeClean`: drop the oldest snapshots (and the log below them) per size, then age."""
    now = _now_ms() if now_ms is None else now_ms
    did = False
    if config.retention_bytes >= 0:
        snaps = list_snapshots(log.partition_dir)
        sizes = {s.end_offset: _size(s.path) for s in snaps}
        total = sum(sizes.values())

        def too_big(end_offset: int) -> bool:
            nonlocal total
            if _log_bytes(log) + total > config.retention_bytes:
                total -= sizes[end_offset]
                return True
            return False

        did |= _clean_snapshots(log, too_big)
    if config.retention_ms >= 0:

        def too_old(end_offset: int) -> bool:
            snap = next((s for s in list_snapshots(log.partition_dir) if s.end_offset == end_offset), None)
            ts = read_snapshot_timestamp(snap.path) if snap is not None else None
            return ts is not None and now - ts > config.retention_ms

        did |= _clean_snapshots(log, too_old)
    return did


def _clean_snapshots(log: MetadataLog, predicate: Callable[[int], bool]) -> bool:
    """Kafka's `cleanSnapshots`: pairwise from the oldest, stop at the first snapshot that stays."""
    did = False
    snaps = list_snapshots(log.partition_dir)
    for older, newer in zip(snaps, snaps[1:], strict=False):
        if not predicate(older.end_offset) or not _delete_before_snapshot(log, newer.end_offset):
            break
        did = True
    return did


def _delete_before_snapshot(log: MetadataLog, end_offset: int) -> bool:
    """Kafka's `deleteBeforeSnapshot`: log start to `end_offset`, then forget older snapshots."""
    if not log.log_start_offset < end_offset <= log.end_offset:
        return False
    if log.retain_from is not None and end_offset > log.retain_from():
        return False  # a reader in this process has not read that far yet
    log.advance_start(end_offset)
    for snap in list_snapshots(log.partition_dir):
        if snap.end_offset < end_offset:
            _unlink_snapshot(snap.path)
    return True


def _unlink_snapshot(path: os.PathLike[str]) -> None:
    gone = f"{os.fspath(path)}.deleted"
    try:
        os.replace(path, gone)
    except FileNotFoundError:
        return
    os.unlink(gone)


def _size(path: os.PathLike[str]) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def _log_bytes(log: MetadataLog) -> int:
    return sum(_size(s.path) for s in log.segments)


def purge_aborted(log: MetadataLog) -> int | None:
    """Put every aborted transaction's records below the log start; returns the new start, or None.

    Nothing to do when no AbortTransactionRecord is at or above the log start. Otherwise: a snapshot at
    the log end (outside any transaction), a new segment there, and every segment below it deleted, so
    the log start is that snapshot's end offset in this process and in Kafka's after a reopen. Each step
    is idempotent: a crash in between is finished by the next call.
    """
    if not _has_abort(log):
        return None
    end = log.end_offset
    if snapshot_now(log) != end:
        raise BadInputError(
            f"{log.partition_dir}: cannot move the log start past an aborted transaction: a metadata "
            "transaction is open at the log's end"
        )
    start_at_snapshot(log, end)
    policy = getattr(log.after_append, "__self__", None)
    if isinstance(policy, SnapshotPolicy):
        policy.snapshot_at_next_commit = True  # the redo's commit gets its own snapshot too
    return end


def hold_snapshots(log: MetadataLog) -> None:
    """Defer the snapshots that come due (the copy's commit makes one due at 1M partitions: ~4.6 s
    of writing and a replay inside the dark window) until `release_snapshots`. The log is the truth
    and the snapshot an optimisation: a crash before the release leaves a log that loads in full."""
    policy = getattr(log.after_append, "__self__", None)
    if isinstance(policy, SnapshotPolicy):
        policy.held = True


def release_snapshots(
    log: MetadataLog, at_end: ReplayResult | None = None, *, now: bool = True
) -> int | None:
    """End `hold_snapshots`; a snapshot that came due meanwhile is written now (from `at_end`, the
    caller's replay of the log to its end, if given: see `snapshot_now`), or, with `now=False`, at
    the next append (where another thread appends: the controller service's). Returns the offset
    of the snapshot written, else None. Atomic as every snapshot (`.part`, fsync, rename)."""
    policy = getattr(log.after_append, "__self__", None)
    if not isinstance(policy, SnapshotPolicy) or not policy.held:
        return None
    policy.held = False
    clock = policy.clock_ms()
    if policy.in_transaction is True or not policy._due(clock):
        return None
    if not now:
        policy.snapshot_at_next_commit = True
        return None
    try:
        end = snapshot_now(log, at_end)
        if end is not None:
            policy.written(log, clock)
        return end
    except (ZkKraftError, OSError) as e:  # retried at the next append, as the policy's own
        policy.last_error = str(e)
        policy.snapshot_at_next_commit = True
        return None


def release_snapshots_beside(
    log: MetadataLog,
    image: ReplayResult,
    end: int,
    exclusive: Callable[[], AbstractContextManager[object]],
) -> int | None:
    """`release_snapshots` where another thread appends (the activated controller service): the
    due snapshot is written at `end` from `image` (the log's replay to `end`, which nobody changes)
    without holding up that thread's appends; `exclusive()` holds them only to read the log's
    epochs and to apply retention after. Snapshots stay held (no second writer) until it is done."""
    policy = getattr(log.after_append, "__self__", None)
    if not isinstance(policy, SnapshotPolicy) or not policy.held:
        return None
    with exclusive():
        clock = policy.clock_ms()
        snaps = list_snapshots(log.partition_dir)
        if (
            policy.in_transaction is True
            or image.open_transaction is not None
            or not policy._due(clock)
            or (snaps and snaps[-1].end_offset >= end)
            or not 0 < end <= log.end_offset
        ):
            policy.held = False
            return None
        epoch = max(log.epoch_for_offset(end - 1), 0)
        ts = log.timestamp_of(end - 1) or int(time.time() * 1000)
    try:
        write_snapshot_file(log.partition_dir, snapshot_records(image), end, epoch, ts)
    except (ZkKraftError, OSError) as e:
        with exclusive():
            policy.held = False
            policy.last_error = str(e)
            policy.snapshot_at_next_commit = True  # retried at the next append, as the policy's own
        return None
    with exclusive():
        policy.held = False
        policy.written(log, clock)
    return end


def start_at_snapshot(log: MetadataLog, end: int) -> None:
    """Make the snapshot at `end` (on disk already) the log start for every reader, Kafka's too: a new
    segment at `end`, every segment below it deleted (Kafka derives its log start from the first
    segment's base) and the older snapshots forgotten. Idempotent: a crash in between is finished by
    calling it again."""
    log.roll()
    log.advance_start(end)
    for snap in list_snapshots(log.partition_dir):
        if snap.end_offset < end:
            _unlink_snapshot(snap.path)


def _has_abort(log: MetadataLog) -> bool:
    for batch in log.batches(log.log_start_offset):
        if batch.is_control:
            continue
        for _offset, rec in decode_batch_records(batch):
            if getattr(rec, "api_key", None) == _ABORT:
                return True
    return False


class SnapshotPolicy:
    """Attached to a writable log: after each append, a snapshot when one is due, then retention.

    Counts the bytes appended since the last snapshot, and follows the transaction markers of the
    appended records, so an append that is not due costs a scan of its records' api keys. Whether a
    transaction was open when the log was opened is not known until a marker is appended: a due
    snapshot then finds it out by loading the image (and waits when one is open).
    """

    def __init__(self, config: RetentionConfig, clock_ms: Callable[[], int] = _now_ms) -> None:
        self.config = config
        self.clock_ms = clock_ms
        self.bytes_since = 0
        self.last_snapshot_ms = clock_ms()
        self.last_clean_ms = self.last_snapshot_ms
        self.in_transaction: bool | None = None  # None: not known since the open
        self.snapshots_written = 0
        self.last_error: str | None = None
        self.snapshot_at_next_commit = False  # set by purge_aborted: snapshot the redone copy's commit
        self.held = False  # hold_snapshots: nothing written (nor cleaned) until release_snapshots

    def attach(self, log: MetadataLog) -> SnapshotPolicy:
        log.after_append = self.after_append
        return self

    def after_append(
        self, log: MetadataLog, records: Sequence[MetadataRecord | OpaqueRecord], size: int
    ) -> None:
        """Never raises: the append is durable already; a failed snapshot is retried at the next one."""
        keys = [rec.api_key for rec in records]  # one comprehension: ~20 ns a record
        if _BEGIN in keys or _END in keys or _ABORT in keys:
            for key in reversed(keys):
                if key == _BEGIN:
                    self.in_transaction = True
                    break
                if key in (_END, _ABORT):
                    self.in_transaction = False
                    break
        self.bytes_since += size
        if self.held:
            return
        now = self.clock_ms()
        try:
            if self.in_transaction is not True and self._due(now):
                if snapshot_now(log) is None:
                    self.in_transaction = True  # found open: wait for its marker
                    return
                self.written(log, now)
            elif now - self.last_clean_ms >= _CLEAN_EVERY_MS:
                self.last_clean_ms = now
                clean(log, self.config, now)
        except (ZkKraftError, OSError) as e:
            self.last_error = str(e)

    def written(self, log: MetadataLog, now: int) -> None:
        """A snapshot at the log's end was just written: count afresh, then apply retention."""
        self.in_transaction = False
        self.snapshot_at_next_commit = False
        self.bytes_since = 0
        self.last_snapshot_ms = now
        self.snapshots_written += 1
        self.last_clean_ms = now
        clean(log, self.config, now)

    def _due(self, now: int) -> bool:
        c = self.config
        if self.snapshot_at_next_commit or self.bytes_since >= c.max_bytes_between_snapshots:
            return True
        return c.snapshot_interval_ms > 0 and now - self.last_snapshot_ms >= c.snapshot_interval_ms
