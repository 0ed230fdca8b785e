"""The log's fold as a map-reduce (`spark_audit.logfold`) gives exactly the rows of the whole replay.

Without Spark: the plan's pieces are mapped one by one, the rows dealt to reducers by group and
sorted by (offset, seq) as Spark's shuffle does, and each reducer folds its share; the union of the
reducers' rows must equal `rows.image_batches` of `inputs.load_kraft` (today's fold) at every cut of
logs with aborted and open transactions, re-created topics, removed configs and a snapshot mid-log.
The Spark pipeline (`spark_audit.spread`) is compared the same way in tests/test_audit_spark.py.
"""

from __future__ import annotations

import uuid
import zlib
from collections import Counter
from pathlib import Path

import pytest

from migrator.errors import BadInputError
from migrator.kraft.image import records_from_image
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import kafka_to_uuid, record
from migrator.kraft.snapshot import write_snapshot
from migrator.model import ClusterImage
from spark_audit import rows as R
from spark_audit.inputs import load_kraft
from spark_audit.logfold import LogPlan, fold_rows, map_piece, plan_log
from zk_fixtures.generator import ClusterSpec, generate

SPEC = ClusterSpec(topics=8, partitions=5, legacy_topics=0, reassignments=1, offline_partitions=0, tokens=2)


def _rows(batches: object) -> Counter[tuple[str | None, ...]]:
    out: Counter[tuple[str | None, ...]] = Counter()
    for batch in batches:  # type: ignore[attr-defined]
        for row in batch.to_pylist():
            out[tuple(row[c] for c in R.COLUMNS)] += 1
    return out


def spread_rows(
    path: Path, cut: int | None, tasks: int = 3, reducers: int = 3
) -> Counter[tuple[str | None, ...]]:
    """The map-reduce without Spark: map every piece, shuffle by group, sort, fold per reducer."""
    plan = LogPlan.from_json(plan_log(path, cut, tasks).to_json())  # as the tasks receive it
    shares: list[list[tuple[int, int, str, bytes]]] = [[] for _ in range(reducers)]
    for piece in plan.pieces:
        for batch in map_piece(plan, piece):
            cols = batch.to_pydict()
            for g, o, s, v in zip(cols["group"], cols["offset"], cols["seq"], cols["value"], strict=True):
                shares[zlib.crc32(g.encode()) % reducers].append((o, s, g, v))
    out: Counter[tuple[str | None, ...]] = Counter()
    import pyarrow as pa

    for share in shares:
        share.sort(key=lambda r: (r[0], r[1]))
        batch = pa.RecordBatch.from_pydict({"offset": [r[0] for r in share], "value": [r[3] for r in share]})
        out += _rows(fold_rows(iter([batch])))
    return out


def whole_rows(path: Path, cut: int | None) -> Counter[tuple[str | None, ...]]:
    result, _ = load_kraft(path, cut)
    return _rows(R.image_batches(result.image, side="kraft"))


def _copy(log_dir: Path, image: ClusterImage) -> int:
    with MetadataLog.open(log_dir, writable=True, cluster_id=image.cluster_id, node_id=3000) as log:
        log.append([record("ZkMigrationStateRecord", 0, ZkMigrationState=2)], 1)
        log.append([record("BeginTransactionRecord", 0, Name="ZK Migration")], 1)
        log.append(list(records_from_image(image)), 1, max_batch_records=7)
        _, end = log.append(
            [record("ZkMigrationStateRecord", 0, ZkMigrationState=1), record("EndTransactionRecord", 0)], 1
        )
    return end


def _changes(log_dir: Path, image: ClusterImage, *, snapshot_mid_log: bool) -> None:
    """Dual-write era changes: every kind of cross-record dependency, transactions of each outcome."""
    names = sorted(n for n in image.topics if n not in image.pending_deletions)
    a, b, c = (image.topics[n] for n in names[:3])
    a_id, b_id, c_id = (kafka_to_uuid(t.topic_id) for t in (a, b, c))
    new_a = uuid.UUID(int=0xA11CE)
    acl = load_kraft(log_dir)[0].image.acls[0]  # its id is the one the copy gave it
    with MetadataLog.open(log_dir, writable=True) as log:
        log.append(
            [
                record("PartitionChangeRecord", 0, PartitionId=0, TopicId=a_id, Leader=-1, Isr=[]),
                record(
                    "ConfigRecord",
                    0,
                    ResourceType=2,
                    ResourceName=a.name,
                    Name="cleanup.policy",
                    Value="compact",
                ),
                record("NoOpRecord", 0),
            ],
            2,
        )
        # topic a removed (its configs with it) and re-created under a new id, in one transaction
        log.append([record("BeginTransactionRecord", 0, Name="recreate")], 2)
        log.append(
            [
                record("RemoveTopicRecord", 0, TopicId=a_id),
                record("TopicRecord", 0, Name=a.name, TopicId=new_a),
            ],
            2,
        )
        log.append(
            [
                record(
                    "PartitionRecord",
                    0,
                    PartitionId=0,
                    TopicId=new_a,
                    Replicas=[1, 2],
                    Isr=[1],
                    RemovingReplicas=[],
                    AddingReplicas=[],
                    Leader=1,
                    LeaderRecoveryState=0,
                    LeaderEpoch=0,
                    PartitionEpoch=0,
                ),
                record(
                    "ConfigRecord", 0, ResourceType=2, ResourceName=a.name, Name="retention.ms", Value="1"
                ),
            ],
            2,
        )
        log.append([record("EndTransactionRecord", 0)], 2)
        if snapshot_mid_log:
            end = log.end_offset
            write_snapshot(log, load_kraft(log_dir)[0])
            log.roll()
            log.advance_start(end)
        # an aborted transaction removing b and an ACL: nothing of it applies
        log.append(
            [
                record("BeginTransactionRecord", 0, Name="x"),
                record("RemoveTopicRecord", 0, TopicId=b_id),
                record("RemoveAccessControlEntryRecord", 0, Id=kafka_to_uuid(acl.acl_id)),
            ],
            3,
        )
        log.append([record("AbortTransactionRecord", 0, Reason="test")], 3)
        log.append(
            [
                record("RemoveTopicRecord", 0, TopicId=c_id),
                record(
                    "ConfigRecord", 0, ResourceType=4, ResourceName="", Name="log.retention.ms", Value=None
                ),
                record("PartitionChangeRecord", 0, PartitionId=1, TopicId=b_id, Isr=[1]),
            ],
            3,
        )
        # an open transaction at the end: left out
        log.append(
            [
                record("BeginTransactionRecord", 0, Name="open"),
                record("RemoveTopicRecord", 0, TopicId=b_id),
                record("ZkMigrationStateRecord", 0, ZkMigrationState=3),
            ],
            3,
        )


@pytest.mark.parametrize("snapshot_mid_log", [False, True], ids=["segments", "snapshot-mid-log"])
def test_map_reduce_equals_the_whole_fold_at_every_cut(tmp_path: Path, snapshot_mid_log: bool) -> None:
    generated = generate(SPEC)
    log_dir = tmp_path / "meta"
    copy_end = _copy(log_dir, generated.image)
    _changes(log_dir, generated.image, snapshot_mid_log=snapshot_mid_log)
    with MetadataLog.open(log_dir) as log:
        end = log.end_offset
        start = log.log_start_offset
    assert (start > 0) == snapshot_mid_log
    cuts = [None, copy_end - 3, copy_end, *range(max(copy_end + 1, start - 1), end)]
    for cut in cuts:
        try:
            expected = whole_rows(log_dir, cut)
        except BadInputError as e:  # a cut below the snapshot with the segments gone: the same error
            with pytest.raises(BadInputError, match="missing"):
                spread_rows(log_dir, cut)
            assert "missing" in str(e)
            continue
        assert spread_rows(log_dir, cut) == expected, f"cut {cut}"
        assert spread_rows(log_dir, cut, tasks=1, reducers=1) == expected, f"cut {cut}, one task"
    # the identity the plan gives the report matches today's fold's
    plan = plan_log(log_dir, None, 2)
    _, identity = load_kraft(log_dir)
    for key in (
        "last_applied_offset",
        "migration_state",
        "migration_state_offset",
        "open_transaction",
        "committed_transactions",
        "aborted_transactions",
        "records",
        "cut_offset",
        "snapshot",
        "cluster_id",
    ):
        assert plan.identity[key] == identity[key], key


def test_snapshot_file_input_and_many_pieces(tmp_path: Path) -> None:
    generated = generate(SPEC)
    log_dir = tmp_path / "meta"
    _copy(log_dir, generated.image)
    _changes(log_dir, generated.image, snapshot_mid_log=False)
    with MetadataLog.open(log_dir, writable=True) as log:
        snap = write_snapshot(log, load_kraft(log_dir)[0])
    plan = plan_log(snap, None, 8)
    assert len(plan.pieces) > 1  # a snapshot is split at batch boundaries too
    assert spread_rows(snap, None, tasks=8) == whole_rows(snap, None)
    plan = plan_log(log_dir, None, 50)
    assert len(plan.pieces) > 10
    assert spread_rows(log_dir, None, tasks=50, reducers=7) == whole_rows(log_dir, None)


def test_a_partition_of_an_unknown_topic_fails_as_the_whole_fold_does(tmp_path: Path) -> None:
    generated = generate(SPEC)
    log_dir = tmp_path / "meta"
    _copy(log_dir, generated.image)
    with MetadataLog.open(log_dir, writable=True) as log:
        log.append([record("PartitionChangeRecord", 0, PartitionId=0, TopicId=uuid.UUID(int=7), Isr=[1])], 2)
    with pytest.raises(BadInputError, match="unknown topic id") as whole:
        whole_rows(log_dir, None)
    with pytest.raises(BadInputError, match="unknown topic id") as spread:
        spread_rows(log_dir, None)
    assert str(spread.value) == str(whole.value)


# --- on Spark: the shuffle and sort are Spark's ---------------------------------------------------


@pytest.fixture(scope="module")
def spark() -> object:
    import spark_session

    return spark_session.get()


def _frame_rows(df: object) -> Counter[tuple[str | None, ...]]:
    rows = df.where(f"kind != '{R.INPUT_KIND}'").collect()  # type: ignore[attr-defined]
    return Counter(tuple(r[c] for c in R.COLUMNS) for r in rows)


def test_spark_map_reduce_equals_the_whole_fold(spark: object, tmp_path: Path) -> None:
    from spark_audit.spread import kraft_rows

    generated = generate(SPEC)
    log_dir = tmp_path / "meta"
    _copy(log_dir, generated.image)
    _changes(log_dir, generated.image, snapshot_mid_log=True)
    # the log's end: an aborted transaction, an open one left out, a snapshot mid-log (every cut is
    # compared without Spark above; Spark adds only the shuffle and the sort)
    df, identity = kraft_rows(spark, str(log_dir), None, tasks=4, reducers=3)
    assert _frame_rows(df) == whole_rows(log_dir, None)
    assert identity["map_tasks"] > 1 and identity["open_transaction"]["name"] == "open"
    with MetadataLog.open(log_dir, writable=True) as log:
        log.append([record("AbortTransactionRecord", 0, Reason="end the open one")], 4)
        log.append([record("PartitionChangeRecord", 0, PartitionId=0, TopicId=uuid.UUID(int=7), Isr=[1])], 4)
    # a task's operator error reaches the driver as the one marked line `spark_audit.errors` reads
    with pytest.raises(Exception, match=r"ZK2KRAFT\[2\].*unknown topic id"):
        kraft_rows(spark, str(log_dir), None, tasks=2, reducers=2)[0].collect()  # type: ignore[attr-defined]
