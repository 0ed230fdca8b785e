"""The copy: one metadata transaction in Kafka's order, batches of 10,000, abort and redo, manifest, plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import normalise

from migrator.errors import BadInputError
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import record
from migrator.kraft.snapshot import list_snapshots
from migrator.migration import copy
from migrator.model import ClusterImage, Partition, Topic
from migrator.zk.layout import LayoutResult
from zk_fixtures.generator import ClusterSpec, generate, load_cluster

SPEC = ClusterSpec(topics=10, partitions=4, legacy_topics=0, pending_deletions=2, acls=10, tokens=2)
# Kafka's readAllMetadata order: topics (Topic, its Configs, its Partitions), broker configs, quotas,
# SCRAM, producer ids, ACLs, delegation tokens.
_GROUP = {
    "TopicRecord": 0,
    "PartitionRecord": 0,
    "ConfigRecord": 0,
    "ClientQuotaRecord": 2,
    "UserScramCredentialRecord": 3,
    "ProducerIdsRecord": 4,
    "AccessControlEntryRecord": 5,
    "DelegationTokenRecord": 6,
}


def _layout(spec: ClusterSpec = SPEC) -> tuple[LayoutResult, ClusterImage]:
    generated = generate(spec)
    return LayoutResult(generated.image, generated.control), generated.image


def _log(path: Path, cluster_id: str | None) -> MetadataLog:
    return MetadataLog.open(path, writable=True, cluster_id=cluster_id, node_id=3000)


def _records(path: Path) -> list[tuple[int, str, dict[str, object]]]:
    with MetadataLog.open(path) as log:
        return [(offset, rec.name, rec.fields) for offset, _epoch, rec in log.read()]  # type: ignore[union-attr]


def test_copy_is_one_transaction_in_kafkas_order(tmp_path: Path) -> None:
    layout, image = _layout()
    with _log(tmp_path / "meta", image.cluster_id) as log:
        copy.append_bootstrap(log, 7)
        manifest = copy.copy_zk_data(log, 7, layout)
        loaded = log.load_image().result
    recs = _records(tmp_path / "meta")
    names = [n for _, n, _ in recs]
    # Bootstrap (its own transaction), then the copy transaction.
    assert names[:4] == [
        "BeginTransactionRecord",
        "FeatureLevelRecord",
        "ZkMigrationStateRecord",
        "EndTransactionRecord",
    ]
    assert recs[1][2] == {"Name": "metadata.version", "FeatureLevel": copy.BOOTSTRAP_METADATA_VERSION}
    assert recs[2][2] == {"ZkMigrationState": 2}
    assert names[4] == "BeginTransactionRecord" and recs[4][2]["Name"] == "ZK Migration"
    assert names[-2:] == ["ZkMigrationStateRecord", "EndTransactionRecord"] and recs[-2][2] == {
        "ZkMigrationState": 1
    }
    assert (manifest.first_offset, manifest.last_offset) == (recs[4][0], recs[-1][0])
    body = recs[5:-2]
    assert len(body) == manifest.records == sum(manifest.records_by_type.values())
    groups = [_GROUP[n] if n != "ConfigRecord" or f["ResourceType"] == 2 else 1 for _, n, f in body]
    assert groups == sorted(groups)
    # Per topic: its TopicRecord, then its configs, then its partitions in order.
    current = None
    for _, name, f in body:
        if name == "TopicRecord":
            current, last_pid, seen_partition = f["TopicId"], -1, False
        elif name == "ConfigRecord" and f["ResourceType"] == 2:
            assert not seen_partition
        elif name == "PartitionRecord":
            assert f["TopicId"] == current and f["PartitionId"] == last_pid + 1
            last_pid, seen_partition = f["PartitionId"], True
    # Pending deletions are not migrated; everything else is, exactly once.
    assert manifest.skipped_pending_deletions == sorted(image.pending_deletions)
    assert not set(image.pending_deletions) & set(loaded.image.topics)
    assert loaded.migration_state == 1 and loaded.committed_transactions == 2
    assert normalise(loaded.image) == normalise(image)
    stored = copy.read_manifest(tmp_path / "meta")
    assert stored == manifest
    assert json.loads((tmp_path / "meta" / copy.MANIFEST_FILE).read_text())["epoch"] == 7


def test_batches_are_cut_at_10000_records(tmp_path: Path) -> None:
    layout, image = _layout(ClusterSpec(topics=50, partitions=500, legacy_topics=0, pending_deletions=0))
    seen: list[tuple[int, int]] = []
    with _log(tmp_path / "meta", image.cluster_id) as log:
        manifest = copy.copy_zk_data(log, 1, layout, progress=lambda done, total: seen.append((done, total)))
        counts = [(b.is_control, b.records_count) for b in log.batches()]
    data = [n for control, n in counts if not control]
    assert data[0] == 1 and data[-1] == 2  # Begin alone; State + End together
    assert data[1:-1] == [10_000, 10_000, manifest.records - 20_000]
    assert manifest.batches == len(data) == 5
    # the total is topics + partitions until the last few records are built, then exact
    assert seen[0] == (0, manifest.topics + manifest.partitions)
    assert seen[-1] == (manifest.records, manifest.records)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_topic_without_id_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    image = ClusterImage(
        cluster_id="MkU3OEVBNTcwNTJENDM2Qg",
        topics={
            "legacy": Topic(
                name="legacy",
                topic_id=None,
                partitions={0: Partition(partition=0, replicas=[1], isr=[1], leader=1)},
            )
        },
    )
    layout = LayoutResult(image, generate(SPEC).control)
    with _log(tmp_path / "meta", image.cluster_id) as log:
        with pytest.raises(BadInputError, match="topics without a topic_id cannot be migrated: legacy"):
            copy.copy_zk_data(log, 1, layout)
        assert log.end_offset == 0
    with pytest.raises(BadInputError, match="TOPIC_WITHOUT_ID"):
        copy.plan_copy(layout, fresh_log=True)


def test_interrupted_copy_is_aborted_and_redone_once(tmp_path: Path) -> None:
    layout, image = _layout()
    with _log(tmp_path / "meta", image.cluster_id) as log:
        copy.append_bootstrap(log, 1)
        # A copy cut short: Begin and part of the records, no End.
        log.append([record("BeginTransactionRecord", 0, Name=copy.COPY_TRANSACTION)], 1)
        partial = copy.migration_records(image)[:25]
        log.append(partial, 1)
        interrupted = log.load_image().result
        assert interrupted.open_transaction is not None and interrupted.open_transaction.pending_records == 25
        assert not interrupted.image.topics
        abort_at = copy.abort_open_transaction(
            log, 2, interrupted.open_transaction, "test: controller failover"
        )
        aborted = log.load_image().result
        assert (
            aborted.open_transaction is None
            and aborted.aborted_transactions == 1
            and not aborted.image.topics
        )
        manifest = copy.copy_zk_data(log, 2, layout)
        # The redo put the aborted copy below the log start, behind a snapshot of the state before it.
        assert log.log_start_offset == abort_at + 1 == manifest.first_offset
    with MetadataLog.open(tmp_path / "meta") as reread:
        assert reread.log_start_offset == abort_at + 1
        loaded = reread.load_image()
    done = loaded.result
    # ... and the redo's commit got a snapshot of its own
    assert loaded.snapshot_end_offset == manifest.last_offset + 1
    snaps = [s.end_offset for s in list_snapshots(tmp_path / "meta" / "__cluster_metadata-0")]
    assert snaps == [abort_at + 1, manifest.last_offset + 1]
    assert done.migration_state == 1 and done.aborted_transactions == 0
    assert normalise(done.image) == normalise(image)
    names = [n for _, n, _f in _records(tmp_path / "meta")]
    assert "AbortTransactionRecord" not in names and names.count("BeginTransactionRecord") == 1


@pytest.mark.parametrize("fresh", [True, False])
def test_plan_bytes_are_what_the_copy_writes(tmp_path: Path, fresh: bool) -> None:
    layout, image = _layout()
    plan = copy.plan_copy(layout, fresh_log=fresh)
    with _log(tmp_path / "meta", image.cluster_id) as log:
        if fresh:
            copy.append_bootstrap(log, 1)
        manifest = copy.copy_zk_data(log, 1, layout)
    size = sum(p.stat().st_size for p in (tmp_path / "meta" / "__cluster_metadata-0").glob("*.log"))
    assert plan.bytes == size
    assert plan.records == manifest.records + 3 + (4 if fresh else 0)
    assert plan.by_type["PartitionRecord"].records == manifest.records_by_type["PartitionRecord"]
    assert plan.topics == manifest.topics and plan.partitions == manifest.partitions
    assert plan.skipped_pending_deletions == manifest.skipped_pending_deletions
    assert plan.estimated_seconds > 0


@pytest.mark.zk
@pytest.mark.zk_matrix
def test_read_zk_image_is_one_consistent_view(zk: KazooClient) -> None:
    generated = load_cluster(zk, SPEC)
    layout, zxid, consistent = copy.read_zk_image(zk)
    assert consistent and zxid > 0
    assert set(layout.image.topics) == set(generated.image.topics)
    assert normalise(layout.image) == normalise(generated.image)
