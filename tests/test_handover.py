"""The handover to Kafka's own controller (issue 15, deliverable 4): `finalize` leaves the directory as
Kafka 3.9's KRaft controller starts from it, and `log verify --kafka` says what Kafka would refuse or
rebuild. Files are checked by parsing them here, against Kafka's formats, not with zk2kraft's readers."""

from __future__ import annotations

import base64
import json
import struct
import uuid
from pathlib import Path

import pytest
from kafka_image import kafka_image
from kazoo.client import KazooClient
from migrate_helpers import cluster, run_cli

from migrator.kraft import handover
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import record
from migrator.kraft.retention import RetentionConfig, snapshot_now

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
NODE = 3000
NO_RETENTION = RetentionConfig(1 << 40, -1, -1, -1)


def configs(i: int, n: int = 30) -> list:
    return [
        record("ConfigRecord", 0, ResourceType=4, ResourceName="", Name=f"k{i}.{j}", Value="v" * 200)
        for j in range(n)
    ]


def a_log_with_an_aborted_copy(path: Path) -> MetadataLog:
    log = MetadataLog.open(
        path, writable=True, cluster_id=CLUSTER, node_id=NODE, segment_bytes=20_000, retention=NO_RETENTION
    )
    log.append(configs(0), 1)
    log.append([record("BeginTransactionRecord", 0, Name="copy"), *configs(1)], 2)
    log.append([record("AbortTransactionRecord", 0, Reason="crashed")], 2)
    for i in range(2, 8):
        log.append(configs(i), 3)
    return log


def kafka_files(meta_dir: Path) -> dict:
    """The files Kafka reads at start, parsed as Kafka's code does."""
    part = meta_dir / "__cluster_metadata-0"
    props = dict(
        line.split("=", 1)
        for line in (meta_dir / "meta.properties").read_text().splitlines()
        if line and not line.startswith("#")
    )
    qs_line = (part / "quorum-state").read_text().split("\n", 1)[0]
    lec = (part / "leader-epoch-checkpoint").read_text().split("\n")
    return {
        "props": props,
        "quorum_state": json.loads(qs_line),
        "epochs": [tuple(map(int, ln.split())) for ln in lec[2 : 2 + int(lec[1])]],
        "segments": sorted(p.name for p in part.glob("*.log")),
        "snapshots": sorted(p.name for p in part.glob("*.checkpoint")),
        "others": sorted(p.name for p in part.iterdir() if p.suffix not in (".log", ".index", ".timeindex")),
    }


def test_prepare_leaves_what_kafkas_controller_starts_from(tmp_path) -> None:
    log = a_log_with_an_aborted_copy(tmp_path)
    try:
        snapshot_now(log)  # a snapshot above the aborted copy, but the copy's segments are still there
        before = handover.check(tmp_path)
        assert [f.verdict for f in before.refused] == ["refuse"], before.findings
        assert "aborted transaction" in before.refused[0].message
        done = handover.prepare(log)  # puts the aborted copy below the log start, as the copy's commit does
        assert any("aborted transactions put below the log start" in d for d in done), done
        end, epoch = log.end_offset, log.latest_epoch
        assert any("latest snapshot at the log end" in d for d in done)
    finally:
        log.close()
    after = handover.check(tmp_path)
    assert after.ok, after.findings
    files = kafka_files(tmp_path)
    assert files["props"]["version"] == "1" and files["props"]["node.id"] == str(NODE)
    assert files["props"]["cluster.id"] == CLUSTER
    raw = base64.urlsafe_b64decode(files["props"]["directory.id"] + "==")
    assert len(raw) == 16 and int.from_bytes(raw, "big") >= 100  # not one of Kafka's reserved ids
    qs = files["quorum_state"]
    assert qs["data_version"] == 0 and qs["leaderId"] == NODE and qs["leaderEpoch"] == epoch
    assert qs["votedId"] == -1 and qs["currentVoters"] == [{"voterId": NODE}]
    # the latest snapshot at the end; the first segment (Kafka's log start) starts past the aborted copy
    assert files["snapshots"][-1] == f"{end:020d}-{epoch:010d}.checkpoint"
    assert files["segments"][0] >= files["snapshots"][0].split("-")[0]
    with MetadataLog.open(tmp_path) as ro:
        # what Kafka keeps of the checkpoint (LeaderEpochFileCache.truncateFromEnd) is the batches' epochs
        assert ro.leader_epochs == [e for e in files["epochs"] if e[1] < end]
        first = int(files["segments"][0].split(".")[0])
        assert not any(getattr(r, "name", "") == "AbortTransactionRecord" for _o, _e, r in ro.read(first))
    assert "partition.metadata" in files["others"] and not any(
        ".part" in n or "deleted" in n for n in files["others"]
    )
    part = tmp_path / "__cluster_metadata-0"
    assert (part / f"{end:020d}.index").read_bytes() == b"" and (part / f"{end:020d}.timeindex").exists()


def test_check_names_what_kafka_refuses_or_rebuilds(tmp_path) -> None:
    log = a_log_with_an_aborted_copy(tmp_path)
    try:
        handover.prepare(log)
        for i in range(8, 40):  # after the handover: more segments, with index entries
            log.append(configs(i), 3)
    finally:
        log.close()
    part = tmp_path / "__cluster_metadata-0"
    stale = handover.check(tmp_path)  # the appends left the new segments' indexes empty: Kafka rebuilds
    assert not stale.refused and {f.verdict for f in stale.findings} == {"rebuild"}
    segs = sorted(part.glob("*.log"))
    assert len(segs) >= 3
    ro = MetadataLog.open(tmp_path)
    try:
        from migrator.kraft.offset_index import LogIndex, write_index_files

        index = LogIndex(ro)
        for s in ro.segments:
            si = index.segment(s.base_offset)
            assert si is not None and si.offsets  # segments of 20 kB have Kafka index entries
            write_index_files(si)
    finally:
        ro.close()
    assert handover.check(tmp_path).ok
    idx = segs[0].with_suffix(".index")
    entries = list(struct.iter_unpack(">ii", idx.read_bytes()))
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(entries, entries[1:], strict=False))
    idx.write_bytes(idx.read_bytes()[:-3])  # a partial entry
    (part / "quorum-state").write_text(json.dumps({"leaderId": NODE, "leaderEpoch": 3, "data_version": 7}))
    meta = tmp_path / "meta.properties"
    meta.write_text(
        "\n".join(ln for ln in meta.read_text().splitlines() if not ln.startswith("directory.id"))
    )
    report = handover.check(tmp_path)
    got = {(f.verdict, f.file) for f in report.findings}
    assert ("rebuild", idx.name) in got
    assert ("refuse", "quorum-state") in got
    assert ("rebuild", "meta.properties") in got
    assert not report.ok and len(report.refused) == 1


@pytest.mark.zk
def test_finalize_hands_over_and_verify_kafka_says_so(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """Real processes: a copy aborted once (SIGKILL) and redone, finalize, then `log verify --kafka`."""
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    with cluster(zk, zk_connect):
        r = run_cli(
            ["migrate", "--yes", "--brokers-from-zk", *where], env={"ZK2KRAFT_CRASH_AT": "copy.batch:1"}
        )
        assert r.returncode != 0
        r = run_cli(["migrate", "--yes", "--brokers-from-zk", *where])
        assert r.returncode == 0, r.stderr
    r = run_cli(["finalize", "--yes", "--rehearsal", *where])
    assert r.returncode == 0 and "MigrationFinalized" in r.stdout, r.stdout + r.stderr
    r = run_cli(["log", "verify", "--kafka", "--json", "-l", str(log_dir)])
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["refused"] == 0 and out["findings"] == [], out
    files = kafka_files(log_dir)
    status = json.loads(run_cli(["status", "--json", *where]).stdout)
    end = status["log_end_offset"]
    assert files["snapshots"][-1].startswith(f"{end:020d}-")  # the latest snapshot at the log end
    assert status["state"] == "MigrationFinalized", status
    # a quorum-state Kafka cannot read: exit 1, named
    (log_dir / "__cluster_metadata-0" / "quorum-state").write_text("{}")
    r = run_cli(["log", "verify", "--kafka", "-l", str(log_dir)])
    assert r.returncode == 1 and "refuse: quorum-state" in r.stdout, r.stdout + r.stderr


def a_migrated_log_with_a_topic_deleted_during_dual_write(path: Path) -> MetadataLog:
    """The copy's transaction (two topics with configs) and then, during dual-write, one topic deleted."""
    log = MetadataLog.open(path, writable=True, cluster_id=CLUSTER, node_id=NODE, retention=NO_RETENTION)
    copy = [record("BeginTransactionRecord", 0, Name="Migrating ZooKeeper data")]
    copy.append(record("FeatureLevelRecord", 0, Name="metadata.version", FeatureLevel=21))
    for name, tid in (("payments.v2", uuid.UUID(int=11)), ("orders", uuid.UUID(int=12))):
        copy.append(record("TopicRecord", 0, Name=name, TopicId=tid))
        for p in range(2):
            copy.append(
                record("PartitionRecord", 0, PartitionId=p, TopicId=tid, Replicas=[1], Isr=[1], Leader=1)
            )
        copy.append(
            record("ConfigRecord", 0, ResourceType=2, ResourceName=name, Name="retention.ms", Value="1")
        )
    copy += [record("ZkMigrationStateRecord", 0, ZkMigrationState=1), record("EndTransactionRecord", 0)]
    log.append(copy, 2)
    log.append([record("RemoveTopicRecord", 0, TopicId=uuid.UUID(int=11))], 2)  # deleted in dual-write
    return log


def test_the_handover_snapshot_is_the_log_start_so_kafkas_loader_drops_a_deleted_topics_config(
    tmp_path: Path,
) -> None:
    """Kafka's own MetadataBatchLoader on the handed-over directory (tests/kafka_checkers): a Kafka
    observer starting from Kafka's log start must not keep the config of a topic deleted during
    dual-write. Before the handover's log start move, Kafka's log start is 0 and its loader replays the
    copy and the deletion in one delta, keeping the config (ConfigurationsDelta.replay only deletes
    configs of the base image) — `log verify --kafka` refuses that directory."""
    log = a_migrated_log_with_a_topic_deleted_during_dual_write(tmp_path)
    part = tmp_path / "__cluster_metadata-0"
    try:
        snapshot_now(log)  # a snapshot at the end, segments from 0: what Kafka's leader serves from 0
        before = kafka_image(part)
        assert before.log_start == 0 and "payments.v2" not in before.topics
        assert ("TOPIC", "payments.v2", "retention.ms") in before.configs  # Kafka's loader keeps it
        refused = handover.check(tmp_path).refused
        assert any("'payments.v2'" in f.message and "one delta" in f.message for f in refused), refused
        done = handover.prepare(log)
        end = log.end_offset
        assert any("log start moved to that snapshot" in d for d in done), done
    finally:
        log.close()
    after = kafka_image(part)
    assert after.log_start == after.replayed_from == end
    assert after.topics == {"orders": 2}
    assert after.configs == {("TOPIC", "orders", "retention.ms")}
    assert handover.check(tmp_path).ok, handover.check(tmp_path).findings
