"""Snapshot cadence and retention as Kafka's controller applies them, and every reader after them."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient
from migrate_helpers import assert_consistent, cluster, run_cli
from test_kraft_image import comparable

from cli.log_cmds import log as log_cmd
from migrator.errors import BadInputError
from migrator.kraft import dirfiles, handover
from migrator.kraft.image import replay
from migrator.kraft.log import MetadataLog, OffsetOutOfRangeError
from migrator.kraft.log_verify import verify_log
from migrator.kraft.records import record
from migrator.kraft.retention import RetentionConfig, SnapshotPolicy, clean, purge_aborted, snapshot_now
from migrator.kraft.snapshot import list_snapshots
from spark_audit.inputs import load_kraft

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
NO_RETENTION = {"retention_bytes": -1, "retention_ms": -1}


def new_log(path, config: RetentionConfig, segment_bytes: int = 1 << 30) -> MetadataLog:
    return MetadataLog.open(
        path, writable=True, cluster_id=CLUSTER, node_id=3000, segment_bytes=segment_bytes, retention=config
    )


def configs(i: int, n: int = 20) -> list:
    return [
        record("ConfigRecord", 0, ResourceType=4, ResourceName="", Name=f"k{i}.{j}", Value="v" * 40)
        for j in range(n)
    ]


def full_replay(log: MetadataLog):
    return replay((o, r) for o, _e, r in log.read(0))


def test_properties_set_the_four_settings_with_kafkas_defaults() -> None:
    assert RetentionConfig() == RetentionConfig(20 << 20, 3_600_000, 100 << 20, 604_800_000)
    got = RetentionConfig.from_properties(
        {
            "metadata.log.max.record.bytes.between.snapshots": "4096",
            "metadata.log.max.snapshot.interval.ms": "0",
            "metadata.max.retention.bytes": "-1",
            "metadata.max.retention.ms": " 1000 ",
            "process.roles": "controller",
        }
    )
    assert got == RetentionConfig(4096, 0, -1, 1000)
    with pytest.raises(BadInputError, match="metadata.max.retention.bytes='lots': not an integer"):
        RetentionConfig.from_properties({"metadata.max.retention.bytes": "lots"})
    with pytest.raises(BadInputError, match="at least 1"):
        RetentionConfig.from_properties({"metadata.log.max.record.bytes.between.snapshots": "0"})


def test_segment_bytes_with_kafkas_bounds() -> None:
    """metadata.log.segment.bytes is read, and refused below Kafka's 8 MiB minimum in one line unless
    Kafka's internal metadata.log.segment.min.bytes lowers the bound (KafkaMetadataLog.apply)."""
    assert RetentionConfig().segment_bytes == 1 << 30 and RetentionConfig().segment_min_bytes == 8 << 20
    assert (
        RetentionConfig.from_properties({"metadata.log.segment.bytes": "16777216"}).segment_bytes == 16 << 20
    )
    with pytest.raises(BadInputError) as refused:
        RetentionConfig.from_properties({"metadata.log.segment.bytes": "1048576"})
    assert str(refused.value).startswith("Cannot set metadata.log.segment.bytes below 8388608: 1048576")
    assert "\n" not in str(refused.value)
    lowered = RetentionConfig.from_properties(
        {"metadata.log.segment.bytes": "1048576", "metadata.log.segment.min.bytes": "65536"}
    )
    assert (lowered.segment_bytes, lowered.segment_min_bytes) == (1 << 20, 65536)
    with pytest.raises(BadInputError, match="must be at least 12"):
        RetentionConfig.from_properties(
            {"metadata.log.segment.bytes": "8", "metadata.log.segment.min.bytes": "8"}
        )


def test_a_log_opened_with_the_config_rolls_at_its_segment_bytes(tmp_path) -> None:
    config = RetentionConfig(1 << 30, 0, **NO_RETENTION, segment_bytes=4096, segment_min_bytes=4096)
    with MetadataLog.open(
        tmp_path / "m", writable=True, cluster_id=CLUSTER, node_id=3000, retention=config
    ) as log:
        _grow(log, 12)  # ~15 kB
        assert len(log.segments) >= 4
        assert all(os.path.getsize(sg.path) <= 4096 for sg in log.segments)


def test_retention_inside_one_segment_survives_a_reopen(tmp_path) -> None:
    """The wedge of a long migration: retention moves the log start inside the only segment, past the
    copy's commit. Reopened, the log starts where it was (log-start-offset-checkpoint), the epoch
    checkpoint still covers the segment's batches, and the commit's epoch is still known."""
    config = RetentionConfig(2500, 0, 1, -1)  # a snapshot every ~2 appends, keep the newest only
    with new_log(tmp_path / "m", config) as log:
        _, commit = log.append(configs(0, 5), 6)
        for i in range(10):  # the next controller's epoch
            log.append(configs(i), 7, timestamp_ms=1_000_000 + i)
        start = log.log_start_offset
        epochs = log.leader_epochs
        assert len(log.segments) == 1 and 0 < commit < start and epochs[0] == (6, 0) and len(epochs) == 2
        assert log.epoch_for_offset(commit) == 6
        assert dirfiles.read_leader_epochs(log.partition_dir / "leader-epoch-checkpoint") == epochs
        expected = comparable(log.load_image().result.image)
    with MetadataLog.open(tmp_path / "m") as log:
        assert log.log_start_offset == start and log.segments[0].base_offset == 0
        assert log.leader_epochs == epochs
        assert log.epoch_for_offset(commit) == 6
        assert comparable(log.load_image().result.image) == expected
    # A directory left by the earlier versions: the checkpoint cut from the start inside the segment,
    # no durable start. The epochs are rebuilt from the batches rather than leaving offset `commit`
    # without one.
    (tmp_path / "m" / "log-start-offset-checkpoint").unlink()
    dirfiles.write_leader_epochs(
        tmp_path / "m" / "__cluster_metadata-0" / "leader-epoch-checkpoint", [(6, commit), *epochs[1:]]
    )
    # what Kafka's recovery keeps too (LogSegment.recover only adds later epochs): log verify --kafka says so
    cut = [f for f in handover.check(tmp_path / "m").refused if f.file == "leader-epoch-checkpoint"]
    assert cut and f"starts at offset {commit} (epoch 6) but the segments hold batches from offset 0" in (
        cut[0].message
    )
    with new_log(tmp_path / "m", config) as log:
        assert log.log_start_offset == 0 and log.leader_epochs == epochs
        assert log.epoch_for_offset(commit) == 6
    assert not [f for f in handover.check(tmp_path / "m").findings if f.file == "leader-epoch-checkpoint"]


def test_a_snapshot_every_n_bytes_and_never_inside_a_transaction(tmp_path) -> None:
    with new_log(tmp_path / "m", RetentionConfig(2400, 0, **NO_RETENTION)) as log:
        log.append(configs(0), 1)
        assert list_snapshots(log.partition_dir) == []  # 1251 bytes: not due
        log.append(configs(1), 1)  # 2400 bytes crossed: a snapshot at the end
        first = list_snapshots(log.partition_dir)
        assert [s.end_offset for s in first] == [log.end_offset]
        begin, _ = log.append([record("BeginTransactionRecord", 0, Name="t")], 1)
        for i in range(2, 6):
            log.append(configs(i), 1)  # due, but inside the transaction: no snapshot
        assert list_snapshots(log.partition_dir) == first
        _, end = log.append([record("EndTransactionRecord", 0)], 1)
        snaps = list_snapshots(log.partition_dir)
        assert [s.end_offset for s in snaps] == [first[0].end_offset, end + 1]
        expected = comparable(full_replay(log).image)
        loaded = log.load_image()
        assert loaded.snapshot_end_offset == end + 1 and comparable(loaded.result.image) == expected
        assert begin < end


def test_a_snapshot_after_the_interval_when_something_was_committed(tmp_path) -> None:
    now = [1_000_000]
    with new_log(tmp_path / "m", RetentionConfig(1 << 30, 60_000, **NO_RETENTION)) as log:
        policy = SnapshotPolicy(
            log_config := RetentionConfig(1 << 30, 60_000, **NO_RETENTION), lambda: now[0]
        )
        policy.attach(log)
        log.append(configs(0, 2), 1)
        now[0] += 59_999
        log.append(configs(1, 2), 1)
        assert list_snapshots(log.partition_dir) == []
        now[0] += 1
        log.append(configs(2, 2), 1)
        assert [s.end_offset for s in list_snapshots(log.partition_dir)] == [log.end_offset]
        assert policy.snapshots_written == 1 and log_config.snapshot_interval_ms == 60_000


def test_a_transaction_open_at_the_open_is_found_before_snapshotting(tmp_path) -> None:
    config = RetentionConfig(500, 0, **NO_RETENTION)
    with new_log(tmp_path / "m", RetentionConfig(1 << 30, 0, **NO_RETENTION)) as log:
        log.append([record("BeginTransactionRecord", 0, Name="t"), *configs(0)], 1)
    with new_log(tmp_path / "m", config) as log:
        log.append(configs(1), 1)  # due, and the transaction begun before the open is still open
        assert list_snapshots(log.partition_dir) == []
        log.append([record("EndTransactionRecord", 0)], 1)
        assert [s.end_offset for s in list_snapshots(log.partition_dir)] == [log.end_offset]


def _grow(log: MetadataLog, rounds: int) -> None:
    for i in range(rounds):
        log.append(configs(i), 1, timestamp_ms=1_000_000 + i)


def test_retention_by_size_moves_the_log_start_to_the_oldest_snapshot(tmp_path) -> None:
    # 1.3 kB per append, a segment per ~2 appends, a snapshot per ~3 appends, keep ~10 kB.
    config = RetentionConfig(3500, 0, 10_000, -1)
    with new_log(tmp_path / "m", config, segment_bytes=2800) as log:
        reference = new_log(tmp_path / "ref", RetentionConfig(1 << 30, 0, **NO_RETENTION))
        for i in range(30):
            log.append(configs(i), 1, timestamp_ms=1_000_000 + i)
            reference.append(configs(i), 1, timestamp_ms=1_000_000 + i)
            clean(log, config)
        snaps = list_snapshots(log.partition_dir)
        assert len(snaps) >= 1
        start = log.log_start_offset
        assert start == snaps[0].end_offset > 0  # Kafka: the log start is the oldest snapshot's end
        assert all(s.end_offset >= start for s in snaps)
        assert log.segments[0].base_offset <= start  # segments wholly below it are gone
        assert len(log.segments) == 1 or log.segments[1].base_offset > start
        size = sum(os.path.getsize(s.path) for s in log.segments) + sum(
            os.path.getsize(s.path) for s in snaps
        )
        assert size <= 10_000 or len(snaps) == 1
        assert all(o >= start for o, _e, _r in log.read(0))  # reads start at the log start
        with pytest.raises(OffsetOutOfRangeError, match=f"offset 1 is below the log start offset {start}"):
            next(log.read(1))  # a reader overtaken by retention is told, never handed a gap
        # the epoch checkpoint keeps what the segments still hold (Kafka serves from their base)
        assert log.leader_epochs[0][1] == log.segments[0].base_offset
        expected = comparable(full_replay(reference).image)
        reference.close()
        assert comparable(log.load_image().result.image) == expected
    # Reopened: the log start is where retention left it (log-start-offset-checkpoint, as Kafka keeps a
    # partition's), readers go through the snapshot; the epochs cover every batch the segments hold.
    with MetadataLog.open(tmp_path / "m") as log:
        assert log.log_start_offset == start >= log.segments[0].base_offset
        assert (
            tmp_path / "m" / "log-start-offset-checkpoint"
        ).read_text() == f"0\n1\n__cluster_metadata 0 {start}\n"
        assert log.leader_epochs[0][1] == log.segments[0].base_offset
        assert comparable(log.load_image().result.image) == expected
    assert verify_log(tmp_path / "m").ok
    result, ident = load_kraft(tmp_path / "m")
    assert comparable(result.image) == expected and ident["snapshot"] is not None
    out = CliRunner().invoke(log_cmd, ["dump", "-l", str(tmp_path / "m"), "--json"])
    assert out.exit_code == 0, out.output
    offsets = [json.loads(line)["offset"] for line in out.output.splitlines()]
    assert all(o is None or o >= start for o in offsets)  # nothing below the durable log start


def test_retention_waits_for_a_reader_behind_the_next_snapshot(tmp_path) -> None:
    config = RetentionConfig(1 << 30, 0, 0, -1)
    with new_log(tmp_path / "m", config, segment_bytes=2800) as log:
        _grow(log, 2)
        first = snapshot_now(log)
        _grow(log, 2)
        second = snapshot_now(log)
        reader = [first]
        log.retain_from = lambda: reader[0]
        assert not clean(log, config) and log.log_start_offset == 0
        reader[0] = second
        assert clean(log, config) and log.log_start_offset == second


def test_retention_by_age_keeps_the_newest_snapshot(tmp_path) -> None:
    config = RetentionConfig(1 << 30, 0, -1, 1000)
    with new_log(tmp_path / "m", config, segment_bytes=2800) as log:
        ends = []
        for _i in range(3):
            _grow(log, 2)
            ends.append(snapshot_now(log))
        # every snapshot's last record was appended at ~1_000_000 ms
        assert not clean(log, config, now_ms=1_000_000 + 1000)  # not older than 1000 ms yet
        assert clean(log, config, now_ms=1_000_000 + 5000)
        assert [s.end_offset for s in list_snapshots(log.partition_dir)] == [ends[-1]]
        assert log.log_start_offset == ends[-1]
        assert not clean(log, config, now_ms=10**13)  # the newest snapshot never goes


def test_purge_aborted_rolls_so_the_aborted_records_go_physically(tmp_path) -> None:
    with new_log(tmp_path / "m", RetentionConfig(1 << 30, 0, **NO_RETENTION)) as log:
        log.append(configs(0, 3), 1)
        log.append([record("BeginTransactionRecord", 0, Name="x"), *configs(1, 3)], 1)
        _, abort_at = log.append([record("AbortTransactionRecord", 0, Reason="test")], 1)
        assert len(log.segments) == 1
        assert purge_aborted(log) == abort_at + 1
        assert purge_aborted(log) is None  # nothing aborted at or after the start any more
        assert log.log_start_offset == log.segments[0].base_offset == abort_at + 1
        assert log.latest_epoch == 1
        log.append(configs(2, 1), 1)
    with MetadataLog.open(tmp_path / "m") as log:
        assert log.log_start_offset == abort_at + 1
        names = [r.name for _o, _e, r in log.read(0)]
        assert names == ["ConfigRecord"]
        image = log.load_image().result.image
        assert {c[1] for c in image.configs} == {""} and image.configs


@pytest.mark.zk
def test_config_file_sets_the_cadence_of_a_migration(zk: KazooClient, zk_connect: str, tmp_path) -> None:
    """`--config` with Kafka's keys: the migration's log snapshots at its commits and keeps one."""
    props = tmp_path / "controller.properties"
    props.write_text(
        "process.roles=controller\n"
        "metadata.log.max.record.bytes.between.snapshots=1\n"
        "metadata.max.retention.bytes=0\n"
    )
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        r = run_cli(
            [
                "-v",
                "--config",
                str(props),
                "migrate",
                "--yes",
                "--brokers-from-zk",
                "-z",
                zk_connect,
                "-l",
                str(log_dir),
            ]
        )
        assert r.returncode == 0, r.stderr[-3000:]
        with MetadataLog.open(log_dir) as log:
            snaps = list_snapshots(log.partition_dir)
            # every committed append was due; retention 0 kept the newest snapshot only
            assert len(snaps) == 1 and snaps[0].end_offset == log.end_offset
            # the log start where retention left it (durable), inside the one segment
            assert log.segments[0].base_offset <= log.log_start_offset <= snaps[0].end_offset
        assert_consistent(zk, log_dir)
    bad = tmp_path / "bad.properties"
    bad.write_text("metadata.max.retention.ms=soon\n")
    r = run_cli(["--config", str(bad), "status", "-z", zk_connect, "-l", str(log_dir)])
    assert r.returncode == 2 and "--config: metadata.max.retention.ms='soon': not an integer" in r.stderr


@pytest.mark.parametrize("due_at_commit", [True, False])
def test_the_image_kept_after_a_snapshot_is_what_a_reader_of_the_directory_loads(
    tmp_path, due_at_commit
) -> None:
    """snapshot_now keeps the image it snapshotted (MetadataLog.snapshot_written) instead of replaying
    the new snapshot: what it keeps must be, field for field, what a fresh load of the directory gives."""
    from migrator.migration import copy
    from migrator.zk.layout import LayoutResult
    from zk_fixtures.generator import ClusterSpec, generate

    generated = generate(ClusterSpec(topics=12, partitions=5, legacy_topics=0, acls=10, tokens=2))
    threshold = 1 if due_at_commit else 1 << 30  # the copy's commit makes a snapshot due, or not
    config = RetentionConfig(max_bytes_between_snapshots=threshold, snapshot_interval_ms=0, **NO_RETENTION)
    with new_log(tmp_path / "meta", config) as log:
        reloads = []
        full_load = log._images._load
        log._images._load = lambda: reloads.append(1) or full_load()  # type: ignore[method-assign]
        copy.append_bootstrap(log, 1)
        copy.copy_zk_data(log, 1, LayoutResult(generated.image, generated.control), take=True)
        if not due_at_commit:
            log.append(configs(1), 1)
            log.load_image()  # the image continued to the end, then snapshotted
            assert snapshot_now(log) == log.end_offset
        reloads.clear()
        kept = log.load_image()
        assert kept.snapshot_end_offset == log.end_offset and not reloads  # kept, not replayed again
    with MetadataLog.open(tmp_path / "meta") as reread:
        fresh = reread.load_image()
    assert fresh.snapshot_end_offset == kept.snapshot_end_offset and fresh.snapshot == kept.snapshot
    assert kept.result.model_dump() == fresh.result.model_dump()
    assert kept == fresh
