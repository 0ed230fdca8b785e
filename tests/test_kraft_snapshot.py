"""Snapshots: file layout, atomic writing, reading back, and loading the image from snapshot + tail."""

from __future__ import annotations

import uuid

import pytest
from test_kraft_image import comparable, rich_image

from migrator.errors import BadInputError
from migrator.kraft.batch import CorruptLogError, iter_batches
from migrator.kraft.control import ControlType, SnapshotHeader, decode_control_record
from migrator.kraft.image import records_from_image, replay
from migrator.kraft.log import METADATA_PARTITION, MetadataLog
from migrator.kraft.log_verify import verify_log
from migrator.kraft.records import record
from migrator.kraft.snapshot import (
    list_snapshots,
    parse_snapshot_name,
    read_snapshot,
    snapshot_name,
    write_snapshot,
)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def new_log(path, **kw) -> MetadataLog:
    return MetadataLog.open(path, writable=True, cluster_id=CLUSTER, node_id=3000, **kw)


def migration_records() -> list:
    return [
        record("FeatureLevelRecord", 0, Name="metadata.version", FeatureLevel=21),
        record("ZkMigrationStateRecord", 0, ZkMigrationState=2),
        record("BeginTransactionRecord", 0, Name="ZK Migration"),
        *records_from_image(rich_image()),
        record("ZkMigrationStateRecord", 0, ZkMigrationState=1),
        record("EndTransactionRecord", 0),
    ]


def test_names():
    assert snapshot_name(123, 7) == "00000000000000000123-0000000007.checkpoint"
    assert parse_snapshot_name("00000000000000000123-0000000007.checkpoint") == (123, 7)
    assert parse_snapshot_name("00000000000000000123-0000000007-99.checkpoint.part") is None
    assert parse_snapshot_name("bootstrap.checkpoint") is None


def test_snapshot_file_layout(tmp_path):
    with new_log(tmp_path / "m") as log:
        log.append(migration_records(), epoch=4, timestamp_ms=1_700_000_000_123)
        result = log.load_image().result
        path = write_snapshot(log, result)
    assert path.name == snapshot_name(log.end_offset, 4)
    assert not list(path.parent.glob("*.part"))
    batches = list(iter_batches(path.read_bytes(), str(path)))
    assert batches[0].is_control and batches[-1].is_control
    assert all(not b.is_control for b in batches[1:-1])
    assert all(b.partition_leader_epoch == 4 for b in batches)
    assert batches[0].base_offset == 0
    assert [b.base_offset for b in batches[1:]] == [b.next_offset for b in batches[:-1]]
    ((ctype, value),) = batches[0].control_records()
    assert ctype == ControlType.SNAPSHOT_HEADER
    assert decode_control_record(ctype, value) == SnapshotHeader(1_700_000_000_123)
    assert [t for t, _ in batches[-1].control_records()] == [ControlType.SNAPSHOT_FOOTER]
    snap = read_snapshot(path)
    assert (snap.end_offset, snap.epoch, snap.last_contained_log_timestamp) == (
        log.end_offset,
        4,
        1_700_000_000_123,
    )
    assert snap.records[0][0] == 1
    rebuilt = replay((o, r) for o, r in snap.records).image
    rebuilt.cluster_id = CLUSTER
    assert rebuilt == result.image


def test_snapshot_plus_tail_equals_full_replay(tmp_path):
    root = tmp_path / "m"
    with new_log(root) as log:
        log.append(migration_records(), epoch=1)
        write_snapshot(log, log.load_image().result)
        tid = uuid.UUID(int=500)
        log.append(
            [
                record("TopicRecord", 0, Name="late", TopicId=tid),
                record(
                    "PartitionRecord",
                    0,
                    PartitionId=0,
                    TopicId=tid,
                    Replicas=[1],
                    Isr=[1],
                    Leader=1,
                    LeaderEpoch=0,
                    PartitionEpoch=0,
                ),
                record("PartitionChangeRecord", 0, PartitionId=0, TopicId=tid, Leader=-1),
                record("ZkMigrationStateRecord", 0, ZkMigrationState=3),
            ],
            epoch=2,
        )
    with MetadataLog.open(root) as log:
        loaded = log.load_image()
        full = replay((o, r) for o, _, r in log.read())
    assert loaded.snapshot is not None and loaded.snapshot_end_offset == len(migration_records()) + 1
    assert loaded.result.image.topics["late"].partitions[0].leader_epoch == 1
    full.image.cluster_id = CLUSTER
    assert loaded.result.image == full.image
    assert loaded.result.migration_state == 3 and loaded.result.feature_levels == {"metadata.version": 21}
    assert loaded.result.last_offset == full.last_offset == loaded.end_offset - 1
    assert comparable(loaded.result.image).topics["orders"] == comparable(rich_image()).topics["orders"]


def test_snapshot_lets_old_segments_go(tmp_path):
    root = tmp_path / "m"
    with new_log(root, segment_bytes=600) as log:
        log.append(migration_records(), epoch=1, max_batch_records=5)
        expected = log.load_image().result
        write_snapshot(log, expected)
        log.append([record("NoOpRecord", 0)], epoch=1)
    part = root / METADATA_PARTITION
    segments = sorted(part.glob("*.log"))
    assert len(segments) >= 3
    assert int(segments[1].name[:20]) <= list_snapshots(part)[-1].end_offset
    segments[0].unlink()  # retention deleted the oldest segment; the snapshot covers it
    with MetadataLog.open(root) as log:
        assert log.log_start_offset > 0
        got = log.load_image().result
        assert got.image.topics == expected.image.topics and got.counts["NoOpRecord"] == 1
    for s in list_snapshots(part):
        s.path.unlink()
    with MetadataLog.open(root) as log, pytest.raises(BadInputError, match="offsets 0..\\d+ are missing"):
        log.load_image()


def test_incomplete_or_damaged_snapshots_are_rejected(tmp_path):
    with new_log(tmp_path / "m") as log:
        log.append(migration_records(), epoch=1)
        path = write_snapshot(log, log.load_image().result)
    data = path.read_bytes()
    footer = list(iter_batches(data))[-1]
    cut = tmp_path / snapshot_name(5, 1)
    cut.write_bytes(data[: footer.position])
    with pytest.raises(CorruptLogError, match="no SnapshotFooterRecord"):
        read_snapshot(cut)
    flipped = bytearray(data)
    flipped[200] ^= 0x04
    bad = tmp_path / snapshot_name(6, 1)
    bad.write_bytes(bytes(flipped))
    with pytest.raises(CorruptLogError, match="CRC mismatch") as err:
        read_snapshot(bad)
    assert err.value.file == str(bad)
    headless = tmp_path / snapshot_name(7, 1)
    first = list(iter_batches(data))[1]
    headless.write_bytes(data[first.position :])
    with pytest.raises(CorruptLogError, match="does not start with a SnapshotHeaderRecord"):
        read_snapshot(headless)
    empty = tmp_path / snapshot_name(8, 1)
    empty.write_bytes(b"")
    with pytest.raises(CorruptLogError, match="empty"):
        read_snapshot(empty)


def test_write_rules(tmp_path):
    root = tmp_path / "m"
    with new_log(root) as log:
        log.append([record("NoOpRecord", 0)], epoch=1)
        path = write_snapshot(log, [record("NoOpRecord", 0)])
        with pytest.raises(BadInputError, match="already exists"):
            write_snapshot(log, [record("NoOpRecord", 0)])
        with pytest.raises(BadInputError, match="outside the log"):
            write_snapshot(log, [], end_offset=log.end_offset + 1)
    assert path.name == snapshot_name(2, 1)
    with MetadataLog.open(root) as log, pytest.raises(BadInputError, match="writer lock"):
        write_snapshot(log, [])
    stale = root / METADATA_PARTITION / "00000000000000000009-0000000001-123.checkpoint.part"
    stale.write_bytes(b"half")
    MetadataLog.open(root).close()
    assert stale.exists()  # read-only opens never touch files
    new_log(root).close()
    assert not stale.exists()  # the writer clears a crashed snapshot writer's leftovers


def test_verify_covers_snapshots(tmp_path):
    root = tmp_path / "m"
    with new_log(root) as log:
        log.append(migration_records(), epoch=1)
        path = write_snapshot(log, log.load_image().result)
    assert verify_log(root).ok
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    report = verify_log(root)
    assert [(d.file, d.kind) for d in report.damage] == [(str(path), "snapshot")]
    with MetadataLog.open(root) as log, pytest.raises(CorruptLogError, match=str(path)):
        log.load_image()
