"""The metadata log directory as Kafka lays it out: `<log-dir>/__cluster_metadata-0/%020d.log` segments.

One writer at a time holds `WriterLock`; readers need no lock and never modify a file. A writable open
recovers the last segment: a torn tail (a batch cut short by a crash, or zero/garbage bytes after the
last valid batch) is truncated and the dropped bytes are reported. A damaged batch with valid data after
it is never skipped: it raises CorruptLogError naming the file and byte offset.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from migrator.errors import BadInputError, FencedError, UnreachableError
from migrator.kraft import dirfiles
from migrator.kraft.batch import CorruptLogError, RecordBatch, iter_batches
from migrator.kraft.batch_decode import decode_batch_records
from migrator.kraft.batch_encode import encode_control_batch, encode_record_batches, with_base_offset
from migrator.kraft.control import LeaderChange, Voter, encode_control_record
from migrator.kraft.dirfiles import MetaProperties
from migrator.kraft.lock import WriterLock
from migrator.kraft.log_image import ImageCache, LoadedImage
from migrator.kraft.records import MetadataRecord, OpaqueRecord
from migrator.kraft.retention import RetentionConfig, SnapshotPolicy, default_config
from migrator.kraft.segments import (
    SEGMENT_RE,
    OffsetOrderError,
    Segment,
    delete_file,
    list_segments,
    load_segment,
    remove_deleted_files,
    scan_segment,
    segment_name,
)
from migrator.kraft.snapshot import (
    SnapshotId,
    list_snapshots,
    remove_partial_snapshots,
)

__all__ = [
    "DEFAULT_MAX_BATCH_RECORDS",
    "DEFAULT_SEGMENT_BYTES",
    "MAX_BATCH_BYTES",
    "METADATA_PARTITION",
    "LoadedImage",
    "MetadataLog",
    "OffsetOrderError",
    "OffsetOutOfRangeError",
    "OpenReport",
    "Segment",
]

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = f"{METADATA_TOPIC}-0"
#: metadata.log.segment.bytes default (1 GiB).
DEFAULT_SEGMENT_BYTES = 1 << 30
#: QuorumController.MAX_RECORDS_PER_BATCH.
DEFAULT_MAX_BATCH_RECORDS = 10_000
#: KafkaRaftClient.MAX_BATCH_SIZE_BYTES.
MAX_BATCH_BYTES = 8 << 20

# `log truncate-unsynced` in progress: the offset the log is being cut back to.
TRUNCATE_INTENT = "zk2kraft-truncate-to"


class OffsetOutOfRangeError(BadInputError):
    """A read below the log start offset (Kafka's OFFSET_OUT_OF_RANGE)."""


class SplitBatchError(ValueError):
    """Records that were to be one batch need more (over the records or bytes limit of a batch)."""


@dataclass
class OpenReport:
    """What opening the log found and did."""

    log_dir: str
    created: bool
    segments: int
    log_start_offset: int
    end_offset: int
    truncated_bytes: int = 0  # torn-tail bytes dropped (writable) or that would be dropped (read-only)
    truncated_file: str | None = None
    truncated_at: int | None = None  # byte position of the torn tail in truncated_file


class MetadataLog:
    """A `__cluster_metadata-0` partition directory: append (writer), read and recover."""

    def __init__(self) -> None:
        self.log_dir: Path
        self.partition_dir: Path
        self.writable = False
        self.meta: MetaProperties | None = None
        self.segment_bytes = DEFAULT_SEGMENT_BYTES
        self.segments: list[Segment] = []
        self.report: OpenReport
        self._end_offset = 0
        self._images = ImageCache(self)  # load_image's last answer and how it goes on
        self._active_end = 0  # valid bytes in the last segment
        self._epochs: list[tuple[int, int]] = []
        self._last_timestamp: int | None = None
        self._lock: WriterLock | None = None
        self._active_file: BinaryIO | None = None
        self._single = False
        self._quorum_epoch = -1
        self._start_floor = 0  # log start moved inside a segment by retention (Kafka keeps it in memory)
        self._snapshot_epoch = -1  # the newest snapshot's epoch: the last epoch when the log is empty
        self._closed = False
        # Called after each durable append with (log, records, bytes written): the snapshot policy.
        self.after_append: (
            Callable[[MetadataLog, Sequence[MetadataRecord | OpaqueRecord], int], None] | None
        ) = None
        # The lowest offset a reader of this process still has to read (e.g. the dual-write syncer's
        # position): retention never moves the log start past it. None: no such reader.
        self.retain_from: Callable[[], int] | None = None

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        log_dir: str | os.PathLike[str],
        writable: bool = False,
        cluster_id: str | None = None,
        node_id: int | None = None,
        segment_bytes: int | None = None,
        retention: RetentionConfig | None = None,
    ) -> MetadataLog:
        """Open `log_dir` (the metadata log dir, its `__cluster_metadata-0`, or one `.log` segment).

        A writable open takes the writer lock, formats a missing directory (needs `cluster_id` and
        `node_id`) and recovers a torn tail; from then on it writes snapshots and applies retention as
        `retention` (default: `retention.default_config()`, Kafka's defaults unless `--config` set them) says. A read-only open changes nothing on disk.
        """
        config = retention or default_config()
        if segment_bytes is None:  # metadata.log.segment.bytes of --config, Kafka's 1 GiB without it
            segment_bytes = config.segment_bytes
        if segment_bytes < 1:
            raise BadInputError(f"segment size must be positive, got {segment_bytes}")
        log = cls()
        log.segment_bytes = segment_bytes
        log.writable = writable
        path = Path(log_dir)
        single: Path | None = None
        if path.is_file() or path.suffix == ".log":
            if writable:
                raise BadInputError(f"{path}: a single segment can only be opened for reading")
            if not path.is_file():
                raise UnreachableError(f"{path}: no such segment file")
            single = path
            log.partition_dir = path.parent
            log.log_dir = path.parent.parent
        elif path.name == METADATA_PARTITION or (path / dirfiles.PARTITION_METADATA).exists():
            log.partition_dir = path
            log.log_dir = path.parent
        else:
            log.log_dir = path
            log.partition_dir = path / METADATA_PARTITION
        try:
            log._open(single, cluster_id, node_id)
        except BaseException:
            log.close()
            raise
        if writable:
            SnapshotPolicy(config).attach(log)
        return log

    def _open(self, single: Path | None, cluster_id: str | None, node_id: int | None) -> None:
        created = False
        if single is not None:
            match = SEGMENT_RE.match(single.name)
            if not match:
                raise BadInputError(f"{single}: not a segment file name (expected %020d.log)")
            self.segments = [Segment(int(match.group(1)), single)]
            self._single = True
        elif self.writable:
            created = self._prepare_writable(cluster_id, node_id)
            self.segments = self._list_segments()
        else:
            if not self.log_dir.exists() and not self.partition_dir.exists():
                raise UnreachableError(f"log directory {self.log_dir} does not exist")
            if not self.partition_dir.is_dir():
                raise BadInputError(
                    f"{self.log_dir} is not a KRaft metadata log directory (no {METADATA_PARTITION}/ in it)"
                )
            meta_path = self.log_dir / dirfiles.META_PROPERTIES
            if meta_path.exists():
                self.meta = dirfiles.read_meta_properties(meta_path)
            self.segments = self._list_segments()
        snaps = [] if single is not None else list_snapshots(self.partition_dir)
        snapshot_end = snaps[-1].end_offset if snaps else 0
        self._snapshot_epoch = snaps[-1].epoch if snaps else -1
        if not self.segments and self.writable:
            self._create_segment(snapshot_end)
        report = OpenReport(
            log_dir=str(self.log_dir),
            created=created,
            segments=len(self.segments),
            log_start_offset=self.segments[0].base_offset if self.segments else snapshot_end,
            end_offset=snapshot_end,
        )
        if self.segments:
            last = self.segments[-1]
            buf = load_segment(last.path)
            scan = scan_segment(last.path, buf, last.base_offset, None, last=True)
            del buf
            self._end_offset = max(scan.next_offset, last.base_offset)
            self._active_end = scan.valid_end
            self._last_timestamp = scan.last_timestamp
            if scan.torn_at is not None:
                report.truncated_bytes = scan.torn_bytes
                report.truncated_file = str(last.path)
                report.truncated_at = scan.torn_at
                if self.writable:
                    self._truncate(last.path, scan.valid_end)
        else:
            self._end_offset = snapshot_end
        report.end_offset = self._end_offset
        self.report = report
        if single is None:
            self._load_epochs()
            self._start_floor = self._durable_start(snaps)
            report.log_start_offset = self.log_start_offset
        if self.writable:
            self._active_file = open(self.segments[-1].path, "ab")  # noqa: SIM115 - held until close()
            self._finish_truncation()

    def _prepare_writable(self, cluster_id: str | None, node_id: int | None) -> bool:
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UnreachableError(f"cannot create log directory {self.log_dir}: {e.strerror}") from None
        self._lock = WriterLock(self.log_dir).acquire()
        meta_path = self.log_dir / dirfiles.META_PROPERTIES
        created = False
        if meta_path.exists():
            meta = dirfiles.read_meta_properties(meta_path)
            if cluster_id is not None and meta.cluster_id not in (None, cluster_id):
                raise BadInputError(
                    f"{meta_path}: log directory belongs to cluster {meta.cluster_id}, not {cluster_id}"
                )
            if node_id is not None and meta.node_id != node_id:
                raise BadInputError(
                    f"{meta_path}: log directory belongs to node {meta.node_id}, not {node_id}"
                )
        else:
            if cluster_id is None or node_id is None:
                raise BadInputError(
                    f"{self.log_dir} is not formatted (no meta.properties): a cluster id and a node id are "
                    "needed to create it"
                )
            meta = MetaProperties(version=1, node_id=node_id, cluster_id=cluster_id)
            dirfiles.write_meta_properties(meta_path, meta)
            meta = dirfiles.read_meta_properties(meta_path)
            created = True
        self.meta = meta
        self.partition_dir.mkdir(exist_ok=True)
        remove_partial_snapshots(self.partition_dir)
        remove_deleted_files(self.partition_dir)
        dirfiles.remove_stale_temporaries(self.log_dir)
        dirfiles.remove_stale_temporaries(self.partition_dir)
        pm = self.partition_dir / dirfiles.PARTITION_METADATA
        if pm.exists():
            topic_id = dirfiles.read_partition_metadata(pm)
            if topic_id != dirfiles.METADATA_TOPIC_ID:
                raise BadInputError(f"{pm}: topic id {topic_id} is not the metadata topic's")
        else:
            dirfiles.write_partition_metadata(pm)
        qs = self.partition_dir / dirfiles.QUORUM_STATE
        if qs.exists():
            self._quorum_epoch = dirfiles.read_quorum_state(qs).leader_epoch
        return created

    def _list_segments(self) -> list[Segment]:
        return list_segments(self.partition_dir)

    def _truncate(self, path: Path, size: int) -> None:
        with open(path, "r+b") as f:
            f.truncate(size)
            f.flush()
            os.fsync(f.fileno())

    def _load_epochs(self) -> None:
        """The leader-epoch cache: the checkpoint cut at the end offset, or rebuilt from batch headers."""
        path = self.partition_dir / dirfiles.LEADER_EPOCH_CHECKPOINT
        entries: list[tuple[int, int]] | None = None
        if path.exists():
            entries = [(e, o) for e, o in dirfiles.read_leader_epochs(path) if o < self._end_offset]
        if entries is None or (
            self.segments
            and self._end_offset > self.segments[0].base_offset
            and (not entries or self.first_batch_offset() < entries[0][1])
        ):
            # missing, or cut from the start past what the segments still hold (retention inside a
            # segment, before the checkpoint kept to the segments): the batches' own epochs
            entries = self._rebuild_epochs()
        self._epochs = entries
        if self.writable and (not path.exists() or dirfiles.read_leader_epochs(path) != entries):
            dirfiles.write_leader_epochs(path, entries)

    def first_batch_offset(self) -> int:
        """The base offset of the first batch the segments hold (the end offset when they hold none)."""
        for i, seg in enumerate(self.segments):
            if i == len(self.segments) - 1 and self._active_end == 0:
                break
            buf = load_segment(seg.path)
            try:
                for batch in iter_batches(buf, str(seg.path), verify_crc=False):
                    return batch.base_offset
            except (CorruptLogError, ValueError):
                return seg.base_offset
        return self._end_offset

    def _durable_start(self, snaps: Sequence[SnapshotId]) -> int:
        """The log start retention moved inside the first segment, from `log-start-offset-checkpoint`.

        Kafka keeps a partition's log start there (OffsetCheckpointFile in the log dir); an entry is
        believed only where Kafka's invariant holds: inside the log, with a snapshot at or after it
        for what is below (KafkaMetadataLog.recoverSnapshots). Otherwise the first segment's base.
        """
        try:
            entries = dirfiles.read_log_start_offsets(self.log_dir / dirfiles.LOG_START_OFFSET_CHECKPOINT)
        except BadInputError:
            return 0
        start = entries.get((METADATA_TOPIC, 0), 0)
        base = self.segments[0].base_offset if self.segments else self._end_offset
        if not base < start <= self._end_offset or not any(sn.end_offset >= start for sn in snaps):
            return 0
        return start

    def _rebuild_epochs(self) -> list[tuple[int, int]]:
        entries: list[tuple[int, int]] = []
        for batch in self.batches(verify_crc=False):
            if not entries or batch.partition_leader_epoch > entries[-1][0]:
                entries.append((batch.partition_leader_epoch, batch.base_offset))
        return entries

    # -- state --------------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        """The offset the next record gets (one past the last record)."""
        return self._end_offset

    @property
    def active_end(self) -> int:
        """Valid bytes in the last (active) segment: where the next batch goes."""
        return self._active_end

    @property
    def log_start_offset(self) -> int:
        """The first offset the log holds: the first segment's base offset, as Kafka derives it when it
        opens the log, or further on where retention moved it inside that segment (until a reopen)."""
        base = self.segments[0].base_offset if self.segments else self._end_offset
        return min(max(base, self._start_floor), self._end_offset)

    @property
    def latest_epoch(self) -> int:
        """The epoch of the last record, or of the newest snapshot when the log holds none after it."""
        return self._epochs[-1][0] if self._epochs else self._snapshot_epoch

    @property
    def leader_epochs(self) -> list[tuple[int, int]]:
        """(epoch, start offset) entries, as in `leader-epoch-checkpoint`."""
        return list(self._epochs)

    @property
    def recovered_bytes(self) -> int:
        """Torn-tail bytes the open dropped (writable) or found (read-only)."""
        return self.report.truncated_bytes

    @property
    def last_timestamp(self) -> int | None:
        """Append time of the last batch in the log, if any."""
        return self._last_timestamp

    def epoch_for_offset(self, offset: int) -> int:
        """The leader epoch that wrote `offset` (-1 before the first epoch).

        Below the records the log holds, a snapshot ending right after `offset` knows it exactly (its
        epoch is its last record's); else the newest snapshot's epoch stands in.
        """
        epoch = -1
        if offset < self.log_start_offset or (self._epochs and offset < self._epochs[0][1]):
            epoch = self._snapshot_epoch
            if not self._single:
                exact = [sn.epoch for sn in list_snapshots(self.partition_dir) if sn.end_offset == offset + 1]
                epoch = exact[0] if exact else epoch
        for e, start in self._epochs:
            if start <= offset:
                epoch = e
            else:
                break
        return epoch

    # -- reading ------------------------------------------------------------------------------

    def batches(self, from_offset: int = 0, verify_crc: bool = True) -> Iterator[RecordBatch]:
        """Every batch (control ones too) whose records reach `from_offset` or later, in order.

        Offsets below the log start are not part of the log: reading from 0 starts at the log start (a
        reader needs the snapshot for what comes before it). A reader that had got further, and was
        overtaken by retention here, gets Kafka's OFFSET_OUT_OF_RANGE as an error rather than a gap.
        """
        if 0 < from_offset < self._start_floor:
            raise OffsetOutOfRangeError(
                f"{self.partition_dir}: offset {from_offset} is below the log start offset "
                f"{self._start_floor} (retention deleted it): load the snapshot at the log start"
            )
        from_offset = max(from_offset, self._start_floor)
        segs = self.segments
        expect = 0
        for i, seg in enumerate(segs):
            if i + 1 < len(segs) and segs[i + 1].base_offset <= from_offset:
                continue
            last = i == len(segs) - 1
            buf = load_segment(seg.path)
            limit = self._active_end if last else len(buf)
            if last and limit < len(buf):
                buf = buf[:limit]
            expect = max(expect, seg.base_offset)
            for batch in iter_batches(buf, str(seg.path), verify_crc=verify_crc):
                if batch.base_offset < expect:
                    raise OffsetOrderError(
                        str(seg.path),
                        batch.position,
                        f"batch base offset {batch.base_offset} is below the expected offset {expect} "
                        "(offsets must increase across batches and segments)",
                    )
                expect = batch.next_offset
                if batch.next_offset > from_offset:
                    yield batch

    def read(self, from_offset: int = 0) -> Iterator[tuple[int, int, MetadataRecord | OpaqueRecord]]:
        """(offset, epoch, record) of every metadata record from `from_offset`; control batches skipped."""
        for batch in self.batches(from_offset):
            if batch.is_control:
                continue
            epoch = batch.partition_leader_epoch
            recs = decode_batch_records(batch)
            # whole batches through one list: resuming this generator per record cost ~10% of a read
            if batch.base_offset >= from_offset:
                yield from [(offset, epoch, rec) for offset, rec in recs]
            else:
                yield from [(offset, epoch, rec) for offset, rec in recs if offset >= from_offset]

    def timestamp_of(self, offset: int) -> int | None:
        """Append time of the batch holding `offset`, or None when the log does not hold it."""
        if not self.log_start_offset <= offset < self._end_offset:
            return None
        for batch in self.batches(offset):
            if batch.base_offset <= offset <= batch.last_offset:
                return batch.max_timestamp
            break
        return None

    def as_kafka_opens(self) -> None:
        """Read this (read-only) log as Kafka 3.9 opens it: from the first segment's base offset, which
        KafkaMetadataLog takes as the log start whatever log-start-offset-checkpoint says."""
        if self.writable:
            raise BadInputError(f"{self.log_dir}: only a read-only log can be read as Kafka opens it")
        self._start_floor = 0
        self._images.forget()

    def forget_image(self) -> None:
        """Drop `load_image`'s kept answer: its caller takes that image over to change it (the first
        sync's syncer, instead of copying a whole cluster), so it must not be handed out again."""
        self._images.forget()

    def snapshot_written(self, loaded: LoadedImage, path: Path, counts: dict[str, int]) -> None:
        """`loaded` (the image at the log's end) was just snapshotted at `path`: see ImageCache."""
        self._images.snapshot_written(loaded, path, counts)

    def identity(self) -> tuple[int | None, ...]:
        """What tells this directory's log apart from any other state of it without reading it: its
        start, end, active segment and bytes, last epoch and append time, newest snapshot."""
        snaps = self.snapshot_ids()
        base = self.segments[-1].base_offset if self.segments else None
        return (
            self.log_start_offset,
            self._end_offset,
            base,
            self._active_end,
            self.latest_epoch,
            self._last_timestamp,
            snaps[-1].end_offset if snaps else None,
        )

    def adopt_image(self, loaded: LoadedImage, identity: tuple[int | None, ...]) -> bool:
        """Keep `loaded`, another open's `load_image` answer for this directory when it had `identity`,
        as this log's, if the directory is still as it was (`migrate` gathers its facts read-only,
        then opens the log to write: a second replay of an interrupted copy). Returns whether kept."""
        if self.identity() != identity:
            return False
        self._images.kept = loaded
        return True

    def load_image(self) -> LoadedImage:
        """The image at the end of the log: the newest snapshot, then the records after it (kept: see
        `log_image.ImageCache`)."""
        return self._images.load()

    def snapshot_ids(self) -> list[SnapshotId]:
        """The snapshots of the partition directory, oldest first ([] for a single segment file)."""
        return [] if self._single else list_snapshots(self.partition_dir)

    # -- writing ------------------------------------------------------------------------------

    def append(
        self,
        records: Sequence[MetadataRecord | OpaqueRecord],
        epoch: int,
        timestamp_ms: int | None = None,
        max_batch_records: int = DEFAULT_MAX_BATCH_RECORDS,
        single_batch: bool = False,
    ) -> tuple[int, int]:
        """Append `records` in leader epoch `epoch`; returns (first offset, last offset).

        `single_batch`: the records must be one batch (an atomic request); if they do not fit one,
        SplitBatchError is raised before anything is written.

        Records become batches of at most `max_batch_records` records and 8 MiB; the segment rolls
        before a batch that would push it past `segment_bytes`. One fsync covers the whole call. The
        first append of a new epoch is preceded by a LeaderChangeMessage control batch, as a Kafka
        Raft leader writes one at the start of its epoch.
        """
        if not self.writable or self._active_file is None:
            raise BadInputError(f"{self.log_dir}: log opened read-only")
        if not records:
            raise ValueError("append needs at least one record")
        if max_batch_records < 1:
            raise ValueError("max_batch_records must be positive")
        if epoch < self.latest_epoch:
            raise FencedError(
                f"{self.partition_dir}: cannot append in epoch {epoch}: the log is already at epoch "
                f"{self.latest_epoch} (a newer leader wrote it)"
            )
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        # encoded in full first: a record that cannot be encoded fails the append before a byte is written
        batches = encode_record_batches(records, epoch, ts, max_batch_records, MAX_BATCH_BYTES)
        if single_batch and len(batches) > 1:
            raise SplitBatchError(f"{len(records)} records need {len(batches)} batches")
        before = (len(self.segments), self._active_end, self._end_offset, list(self._epochs))
        written = sum(len(data) for data, _count in batches)
        try:
            if epoch > self.latest_epoch:
                self._begin_epoch(epoch, ts)
            first = self._end_offset
            for data, count in batches:
                self._write_batch(with_base_offset(data, self._end_offset), count)
            self._sync()
        except OSError as e:
            self._undo(before)
            raise UnreachableError(f"cannot append to {self.segments[-1].path}: {e.strerror}") from None
        self._last_timestamp = ts
        last = self._end_offset - 1
        if self.after_append is not None:
            self.after_append(self, records, written)
        return first, last

    def _begin_epoch(self, epoch: int, ts: int) -> None:
        node = self.meta.node_id if self.meta else -1
        self._epochs.append((epoch, self._end_offset))
        dirfiles.write_leader_epochs(self.partition_dir / dirfiles.LEADER_EPOCH_CHECKPOINT, self._epochs)
        if epoch > self._quorum_epoch:
            state = dirfiles.QuorumState(leader_id=node, leader_epoch=epoch, voted_id=-1, voters=(node,))
            dirfiles.write_quorum_state(self.partition_dir / dirfiles.QUORUM_STATE, state)
            self._quorum_epoch = epoch
        change = LeaderChange(leader_id=node, voters=(Voter(node),), granting_voters=(Voter(node),))
        self._write_batch(
            encode_control_batch(self._end_offset, epoch, [encode_control_record(change)], ts), 1
        )

    def _write_batch(self, data: bytes, count: int) -> None:
        if self._active_end > 0 and self._active_end + len(data) > self.segment_bytes:
            self._roll()
        f = self._active_file
        assert f is not None
        f.write(data)
        self._active_end += len(data)
        self._end_offset += count

    def _sync(self) -> None:
        f = self._active_file
        assert f is not None
        f.flush()
        os.fsync(f.fileno())

    def _roll(self) -> None:
        self._sync()
        if self._active_file is not None:
            self._active_file.close()
        self._active_file = None
        self._create_segment(self._end_offset)
        self._active_file = open(self.segments[-1].path, "ab")  # noqa: SIM115 - held until close()
        self._active_end = 0

    def roll(self) -> None:
        """Start a new segment at the end offset (nothing to do if the active segment is empty)."""
        if not self.writable or self._active_file is None:
            raise BadInputError(f"{self.log_dir}: log opened read-only")
        if self._active_end > 0:
            self._roll()

    def advance_start(self, offset: int) -> int:
        """Move the log start to `offset` and delete the segments wholly below it; returns how many.

        Kafka's `UnifiedLog.maybeIncrementLogStartOffset` + `deleteOldSegments`: a segment goes when the
        next one starts at or below the new start, so the active segment always stays; the leader-epoch
        cache is cut from the start (`LeaderEpochFileCache.truncateFromStart`). Only ever called with a
        snapshot at `offset` or later on disk: a reader of the directory needs it for what went.
        """
        if not self.writable or self._active_file is None:
            raise BadInputError(f"{self.log_dir}: log opened read-only")
        if offset <= self.log_start_offset:
            return 0
        if offset > self._end_offset:
            raise BadInputError(f"log start {offset} would be past the log end offset {self._end_offset}")
        # durable first (a snapshot at or after `offset` is on disk already): a reopen starts here too
        dirfiles.write_log_start_offset(
            self.log_dir / dirfiles.LOG_START_OFFSET_CHECKPOINT, METADATA_TOPIC, 0, offset
        )
        self._start_floor = offset
        deleted = 0
        while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
            seg = self.segments.pop(0)
            for p in (seg.path, seg.path.with_suffix(".index"), seg.path.with_suffix(".timeindex")):
                delete_file(p)
            deleted += 1
        if deleted:
            dirfiles.fsync_dir(self.partition_dir)
        # The epochs are cut at what the segments still hold (the first segment's base), not at the
        # log start: Kafka takes its log start from that base when it opens the directory, and the
        # checkpoint must give an epoch for every batch it then serves.
        base = self.segments[0].base_offset
        below = [e for e in self._epochs if e[1] <= base]
        if below and below[-1][1] < base:
            self._epochs = [(below[-1][0], base), *(e for e in self._epochs if e[1] > base)]
            dirfiles.write_leader_epochs(self.partition_dir / dirfiles.LEADER_EPOCH_CHECKPOINT, self._epochs)
        snaps = list_snapshots(self.partition_dir)
        if snaps:
            self._snapshot_epoch = snaps[-1].epoch
        return deleted

    def _create_segment(self, base_offset: int) -> None:
        """A new empty segment with the empty `.index`/`.timeindex` Kafka keeps beside it (it rebuilds them)."""
        path = self.partition_dir / segment_name(base_offset)
        for p in (path, path.with_suffix(".index"), path.with_suffix(".timeindex")):
            with open(p, "ab") as f:
                os.fsync(f.fileno())
        dirfiles.fsync_dir(self.partition_dir)
        self.segments.append(Segment(base_offset, path))

    def _undo(self, before: tuple[int, int, int, list[tuple[int, int]]]) -> None:
        """Best effort after a failed write: drop what this append call wrote so the tail stays clean."""
        n_segments, active_end, end_offset, epochs = before
        try:
            if self._active_file is not None:
                self._active_file.close()
            for seg in self.segments[n_segments:]:
                for p in (seg.path, seg.path.with_suffix(".index"), seg.path.with_suffix(".timeindex")):
                    p.unlink(missing_ok=True)
            del self.segments[n_segments:]
            self._truncate(self.segments[-1].path, active_end)
            self._active_file = open(self.segments[-1].path, "ab")  # noqa: SIM115
        except OSError:
            self._active_file = None  # the next append fails loudly; a reopen recovers the tail
        self._active_end, self._end_offset, self._epochs = active_end, end_offset, epochs
        self._images.forget()

    def truncate_to(self, offset: int, step: Callable[[], None] | None = None) -> None:
        """Drop every batch from `offset` on (a batch boundary), newest first, each step fsynced.

        Crash-safe by order: whole segments go from the highest down, then the segment holding
        `offset` is cut, so after a crash at any step the log is a valid prefix of what it was, ending
        at or after `offset`; running the truncation again finishes it. Snapshots past `offset` go first.
        `step` runs after each durable step (the crash tests kill the process there).
        An intent file (`TRUNCATE_INTENT`) is written first and removed last: a writable open that
        finds it finishes the cut, so no writer ever syncs a half-cut change.
        """
        if not self.writable or self._active_file is None:
            raise BadInputError(f"{self.log_dir}: log opened read-only")
        intent = self.partition_dir / TRUNCATE_INTENT
        if offset >= self._end_offset:  # nothing (left) to cut
            intent.unlink(missing_ok=True)
            return
        if not self.log_start_offset <= offset:
            raise BadInputError(
                f"cannot truncate to offset {offset}: the log holds {self.log_start_offset}..{self._end_offset}"
            )
        cut: tuple[int, int] | None = None  # (segment index, byte position)
        for batch in self.batches(offset, verify_crc=False):
            if batch.base_offset < offset:
                raise BadInputError(
                    f"offset {offset} is inside the batch {batch.base_offset}..{batch.next_offset - 1}: "
                    "the log can only be cut at a batch boundary"
                )
            seg = max(i for i, sg in enumerate(self.segments) if sg.base_offset <= batch.base_offset)
            cut = (seg, batch.position)
            break
        if cut is None:
            return
        dirfiles.atomic_write(intent, f"{offset}\n".encode())
        for snap in list_snapshots(self.partition_dir):
            if snap.end_offset > offset:
                snap.path.unlink(missing_ok=True)
        self._active_file.close()
        self._active_file = None
        for seg in reversed(self.segments[cut[0] + 1 :]):
            for p in (seg.path, seg.path.with_suffix(".index"), seg.path.with_suffix(".timeindex")):
                p.unlink(missing_ok=True)
            dirfiles.fsync_dir(self.partition_dir)
            if step is not None:
                step()
        del self.segments[cut[0] + 1 :]
        self._truncate(self.segments[-1].path, cut[1])
        self._active_end = cut[1]
        self._end_offset = offset
        self._images.forget()
        self._epochs = [(e, o) for e, o in self._epochs if o < offset]
        dirfiles.write_leader_epochs(self.partition_dir / dirfiles.LEADER_EPOCH_CHECKPOINT, self._epochs)
        self._active_file = open(self.segments[-1].path, "ab")  # noqa: SIM115 - held until close()
        intent.unlink()
        dirfiles.fsync_dir(self.partition_dir)

    def _finish_truncation(self) -> None:
        """A cut interrupted by a crash (the intent file is still there) is finished before any use."""
        intent = self.partition_dir / TRUNCATE_INTENT
        if intent.exists():
            try:
                target = int(intent.read_text().strip())
            except ValueError:
                raise BadInputError(
                    f"{intent}: not an offset; remove it by hand after checking the log"
                ) from None
            self.truncate_to(target)

    # -- closing ------------------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        f = self._active_file
        self._active_file = None
        if f is not None:
            f.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> MetadataLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
