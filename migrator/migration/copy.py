"""MigratingZkData: ZooKeeper's metadata into the log as one metadata transaction, and its dry run.

The copy is Kafka's `MigrateMetadataEvent`: `BeginTransactionRecord(Name="ZK Migration")`, every
record `ZkMigrationClient.readAllMetadata` would emit (in its order, via `kraft.image`), then
`ZkMigrationStateRecord(MIGRATION)` and `EndTransactionRecord` in one write. Batches are cut at
Kafka's 10,000 records and each is durable before the next, so a crash leaves a transaction open at
the log's end, which the next run closes with `AbortTransactionRecord` and redoes (invariant 2).
Before the redo the aborted records go below the log start behind a snapshot (`kraft.retention.
purge_aborted`): Kafka's own loader would apply them.
A fresh log first gets the bootstrap records `kafka-storage format` would give a migrating
controller: metadata.version and `ZkMigrationStateRecord(PRE_MIGRATION)`.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path

from kazoo.client import KazooClient

from migrator import stop
from migrator.bulk import without_gc
from migrator.errors import BadInputError
from migrator.kraft import dirfiles
from migrator.kraft.batch_encode import encode_batch, encode_control_batch
from migrator.kraft.control import LeaderChange, Voter, encode_control_record
from migrator.kraft.image import OpenTransaction, records_from_image
from migrator.kraft.log import DEFAULT_MAX_BATCH_RECORDS, MetadataLog
from migrator.kraft.records import MetadataRecord, encode_values, record
from migrator.kraft.retention import purge_aborted
from migrator.kraft.schema import SCHEMAS
from migrator.migration.faults import crash_point
from migrator.model import ClusterImage
from migrator.results import CopyManifest, CopyPlan, TypeCount
from migrator.zk.migration_client import LayoutResult, ZkTree, image_from_tree, read_tree, with_control_from
from state_machine import KafkaMigrationCode

__all__ = [
    "BOOTSTRAP_METADATA_VERSION",
    "COPY_TRANSACTION",
    "MANIFEST_FILE",
    "abort_open_transaction",
    "append_bootstrap",
    "bootstrap_records",
    "copy_zk_data",
    "plan_copy",
    "read_zk_image",
]

COPY_TRANSACTION = "ZK Migration"  # KRaftMigrationDriver's transaction name
BOOTSTRAP_TRANSACTION = "Bootstrap records"  # ActivationRecordsGenerator's
#: metadata.version 3.9-IV0 (Kafka 3.9's LATEST_PRODUCTION); metadata transactions need >= 3.6-IV1.
BOOTSTRAP_METADATA_VERSION = 21
MANIFEST_FILE = "zk2kraft-copy-manifest.json"
# Per-record framing around a value in a batch (length, attributes, deltas, key, headers), for the
# bytes per record type (the total is exact, see plan_copy).
_RECORD_FRAMING = 7
# Write throughput of the append path once the values are encoded (bench/migrate.py, 200k partitions:
# 14.9 MB written and fsynced in 0.23 s on a loaded machine): `plan` measures reading, building and
# encoding itself and adds this, since a dry run may not write anything to measure with.
APPEND_BYTES_PER_SECOND = 60e6
FSYNC_SECONDS = 0.004

Progress = Callable[[int, int], None]  # (records done, records total)


def bootstrap_records() -> list[MetadataRecord]:
    """A fresh migrating controller's first records (ActivationRecordsGenerator.recordsForEmptyLog)."""
    return [
        record("BeginTransactionRecord", 0, Name=BOOTSTRAP_TRANSACTION),
        record("FeatureLevelRecord", 0, Name="metadata.version", FeatureLevel=BOOTSTRAP_METADATA_VERSION),
        record("ZkMigrationStateRecord", 0, ZkMigrationState=int(KafkaMigrationCode.PRE_MIGRATION)),
        record("EndTransactionRecord", 0),
    ]


def append_bootstrap(log: MetadataLog, epoch: int) -> tuple[int, int]:
    """Bootstrap an empty log; one write, so a crash leaves all of it or none."""
    if log.end_offset != 0:
        raise BadInputError(f"{log.log_dir}: bootstrap records go into an empty log only")
    span = log.append(bootstrap_records(), epoch)
    crash_point("copy.bootstrap-written")
    return span


def abort_open_transaction(log: MetadataLog, epoch: int, txn: OpenTransaction, reason: str) -> int:
    """Close an interrupted transaction so its records are never applied; returns the abort's offset."""
    _, offset = log.append([record("AbortTransactionRecord", 0, Reason=reason)], epoch)
    crash_point("copy.abort-written")
    return offset


def read_zk_image(
    client: KazooClient, progress: Callable[[int], None] | None = None
) -> tuple[LayoutResult, int, bool]:
    """The bulk reader's view decoded strictly: (layout, zxid, consistent). A bad znode is one line."""
    layout, zxid, consistent, _ = read_zk_tree_image(client, progress)
    return layout, zxid, consistent


def read_zk_tree_image(
    client: KazooClient, progress: Callable[[int], None] | None = None
) -> tuple[LayoutResult, int, bool, ZkTree]:
    """`read_zk_image` and the tree it decoded, so the first sync reconciles from the same read."""
    return tree_image(read_tree(client, progress=progress))


def tree_image(tree: ZkTree, decoded: LayoutResult | None = None) -> tuple[LayoutResult, int, bool, ZkTree]:
    """A tree read earlier decoded strictly, as `read_zk_tree_image` decodes a fresh one; `decoded`: its
    image decoded already (without problems) before only its control znodes changed."""
    layout = image_from_tree(tree, strict=True) if decoded is None else with_control_from(decoded, tree)
    zxid = tree.read_zxid if tree.consistent else tree.max_zxid
    return layout, zxid, tree.consistent, tree


def _segment_bytes(log: MetadataLog) -> int:
    return sum(s.path.stat().st_size for s in log.segments if s.path.exists())


def migration_records(image: ClusterImage) -> list[MetadataRecord]:
    """The copy's data records (Kafka's order, pending deletions skipped); a topic without id refuses."""
    try:
        with without_gc():  # a record per partition, no cycles (migrator.bulk)
            return list(records_from_image(image))
    except BadInputError as e:
        raise BadInputError(f"cannot copy ZooKeeper: {e} (see `zk2kraft check`, TOPIC_WITHOUT_ID)") from None


def copy_zk_data(
    log: MetadataLog,
    epoch: int,
    layout: LayoutResult,
    *,
    zxid: int = 0,
    consistent: bool = False,
    read_seconds: float = 0.0,
    progress: Progress | None = None,
    batch_records: int = DEFAULT_MAX_BATCH_RECORDS,
    take: bool = False,
) -> CopyManifest:
    """Append the copy transaction for `layout` in `epoch`; returns (and stores) its manifest.

    The log must hold no open transaction and must not have committed a copy already. Records are
    built a batch at a time while a thread encodes, appends and fsyncs the one before (`_Appender`),
    so the build overlaps the disk and no more than a few batches of records exist at once.
    `take`: the caller gives `layout` away; its topics are dropped once the last record is built,
    before the commit's append replays the log for the snapshot it makes due (two whole-cluster
    images at once were the copy's peak: 0.9 GB each at 1M partitions).
    """
    started = time.perf_counter()
    started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    purge_aborted(log)  # an aborted earlier copy goes below the log start before the redo begins
    image = layout.image
    pending = set(image.pending_deletions)
    topics = sum(1 for t in image.topics if t not in pending)
    partitions = sum(len(t.partitions) for n, t in image.topics.items() if n not in pending)
    skipped = sorted(pending & set(image.topics))
    by_key: dict[int, int] = {}
    build_seconds = 0.0
    with without_gc():  # a record per partition, no cycles (migrator.bulk)
        source = _records(image)
        t0 = time.perf_counter()
        chunk = _next_chunk(source, batch_records, by_key)  # a topic without id refuses before Begin
        build_seconds += time.perf_counter() - t0
        before_bytes = _segment_bytes(log)
        appender = _Appender(log, epoch, batch_records)
        first, _ = log.append([record("BeginTransactionRecord", 0, Name=COPY_TRANSACTION)], epoch)
        crash_point("copy.after-begin")
        done = 0
        total = topics + partitions  # most of it; the few config, quota and ACL records come on top
        if progress is not None:
            progress(0, total)
        try:
            while chunk:
                appender.put(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done, max(total, done))
                # A safe point, like the crash point: the transaction stays open and the next run aborts it.
                _stop_point(done, appender, first)
                t0 = time.perf_counter()
                chunk = _next_chunk(source, batch_records, by_key)
                build_seconds += time.perf_counter() - t0
        except BaseException:
            appender.close(raise_error=False)
            raise
        appender.close()
        del chunk, source
        if take:
            image.topics.clear()  # every record is built and appended: the partitions can go
        _stop_point(done, appender, first)
        total = done
        if progress is not None:
            progress(done, total)
        crash_point("copy.before-end")
        t1 = time.perf_counter()
        _, last = log.append(
            [
                record("ZkMigrationStateRecord", 0, ZkMigrationState=int(KafkaMigrationCode.MIGRATION)),
                record("EndTransactionRecord", 0),
            ],
            epoch,
        )
    batches = appender.batches + 2
    append_seconds = appender.seconds + time.perf_counter() - t1
    crash_point("copy.after-end")
    manifest = CopyManifest(
        cluster_id=image.cluster_id,
        epoch=epoch,
        first_offset=first,
        last_offset=last,
        records=total,
        records_by_type={SCHEMAS[key].name: n for key, n in by_key.items()},
        batches=batches,
        bytes=_segment_bytes(log) - before_bytes,
        topics=topics,
        partitions=partitions,
        skipped_pending_deletions=skipped,
        zk_zxid=zxid,
        zk_consistent=consistent,
        read_seconds=round(read_seconds, 3),
        build_seconds=round(build_seconds, 3),
        append_seconds=round(append_seconds, 3),
        duration_seconds=round(read_seconds + time.perf_counter() - started, 3),
        started_at=started_at,
    )
    write_manifest(Path(log.log_dir), manifest)
    crash_point("copy.manifest-written")
    return manifest


def _stop_point(built: int, appender: _Appender, first: int) -> None:
    """A safe point. On a stop request the appender first finishes the chunks it was handed (they are
    appended whatever happens next), so the offsets said are the log's, not those of a moment before."""
    if stop.requested():
        appender.close(raise_error=False)
        stop.check(_stopped_at(built, appender, first))


def _stopped_at(built: int, appender: _Appender, first: int) -> str:
    return (
        f"{built:,} records built, {appender.records:,} records appended at offsets {first}-"
        f"{appender.log.end_offset - 1}"
    )


def _records(image: ClusterImage) -> Iterator[MetadataRecord]:
    try:
        yield from records_from_image(image)
    except BadInputError as e:
        raise BadInputError(f"cannot copy ZooKeeper: {e} (see `zk2kraft check`, TOPIC_WITHOUT_ID)") from None


def _next_chunk(source: Iterator[MetadataRecord], size: int, by_key: dict[int, int]) -> list[MetadataRecord]:
    chunk = list(islice(source, size))
    for r in chunk:
        by_key[r.api_key] = by_key.get(r.api_key, 0) + 1
    return chunk


class _Appender:
    """Appends the copy's chunks in order on one thread, each durable (and a crash point) before the
    next, while the caller builds the following chunk: encoding is CPU, but the write and fsync
    release the GIL. At most two chunks wait; the first error is raised to the caller."""

    def __init__(self, log: MetadataLog, epoch: int, batch_records: int) -> None:
        self.log = log
        self.epoch = epoch
        self.batch_records = batch_records
        self.batches = 0
        self.records = 0
        self.seconds = 0.0
        self._queue: queue.Queue[list[MetadataRecord] | None] = queue.Queue(maxsize=2)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="copy-appender", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            chunk = self._queue.get()
            if chunk is None:
                return
            if self._error is not None:
                continue  # drain: the caller learns of the error at its next put or at close
            try:
                t0 = time.perf_counter()
                self.log.append(chunk, self.epoch, max_batch_records=self.batch_records)
                self.seconds += time.perf_counter() - t0
                self.batches += 1
                self.records += len(chunk)
                crash_point("copy.batch")
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                self._error = e

    def put(self, chunk: list[MetadataRecord]) -> None:
        self._raise()
        self._queue.put(chunk)

    def close(self, raise_error: bool = True) -> None:
        self._queue.put(None)
        self._thread.join()
        if raise_error:
            self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error


def write_manifest(log_dir: Path, manifest: CopyManifest) -> Path:
    path = log_dir / MANIFEST_FILE
    dirfiles.atomic_write(path, (json.dumps(manifest.model_dump(mode="json"), indent=2) + "\n").encode())
    return path


def read_manifest(log_dir: str | Path) -> CopyManifest | None:
    """The stored manifest of the last committed copy, or None (never written, or unreadable)."""
    path = Path(log_dir) / MANIFEST_FILE
    try:
        return CopyManifest.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return None


def plan_copy(
    layout: LayoutResult,
    *,
    fresh_log: bool,
    read_seconds: float = 0.0,
    batch_records: int = DEFAULT_MAX_BATCH_RECORDS,
    node_id: int = 3000,
) -> CopyPlan:
    """What `copy_zk_data` would append for `layout`: records and bytes per type, batches, a time.

    Bytes are exact: the batches the copy would write, encoded (bytes per type count each value with
    its record framing). The estimate adds this run's read and build time to the append time at the
    measured disk throughput (APPEND_BYTES_PER_SECOND) and one fsync per batch.
    """
    image = layout.image
    t0 = time.perf_counter()
    records = migration_records(image)
    markers = [
        record("BeginTransactionRecord", 0, Name=COPY_TRANSACTION),
        record("ZkMigrationStateRecord", 0, ZkMigrationState=int(KafkaMigrationCode.MIGRATION)),
        record("EndTransactionRecord", 0),
    ]
    all_records = [*(bootstrap_records() if fresh_log else []), markers[0], *records, *markers[1:]]
    values = encode_values(all_records)
    build_seconds = time.perf_counter() - t0
    by_type: dict[str, TypeCount] = {}
    for rec, value in zip(all_records, values, strict=True):
        entry = by_type.get(rec.name)
        if entry is None:
            entry = by_type[rec.name] = TypeCount()
        entry.records += 1
        entry.bytes += len(value) + _RECORD_FRAMING
    # The exact bytes: the batches the copy writes, encoded (a LeaderChange opens the new epoch).
    change = encode_control_record(
        LeaderChange(leader_id=node_id, voters=(Voter(node_id),), granting_voters=(Voter(node_id),))
    )
    batches = [encode_control_batch(0, 1, [change], 0)]
    boot = len(bootstrap_records()) if fresh_log else 0
    groups = [values[:boot]] if boot else []
    groups.append(values[boot : boot + 1])  # Begin alone
    data = values[boot + 1 : len(values) - 2]
    groups += [data[i : i + batch_records] for i in range(0, len(data), batch_records)]
    groups.append(values[len(values) - 2 :])  # ZkMigrationStateRecord + End together
    batches += [encode_batch(0, 1, group, 0) for group in groups]
    total_bytes = sum(map(len, batches))
    pending = set(image.pending_deletions)
    estimate = (
        read_seconds + build_seconds + total_bytes / APPEND_BYTES_PER_SECOND + len(batches) * FSYNC_SECONDS
    )
    return CopyPlan(
        cluster_id=image.cluster_id,
        fresh_log=fresh_log,
        records=len(all_records),
        bytes=total_bytes,
        batches=len(batches),
        by_type=dict(sorted(by_type.items(), key=lambda kv: -kv[1].records)),
        topics=sum(1 for t in image.topics if t not in pending),
        partitions=sum(len(t.partitions) for n, t in image.topics.items() if n not in pending),
        skipped_pending_deletions=sorted(pending & set(image.topics)),
        read_seconds=round(read_seconds, 3),
        build_seconds=round(build_seconds, 3),
        estimated_seconds=round(estimate, 2),
    )
