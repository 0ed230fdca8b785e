"""Issue 18 item 1: a change whose ZooKeeper write cannot fit is refused before it is appended."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import assert_consistent, cluster, own_server, run_cli

from migrator.controller.managers.change import AdminChange
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import record

# Two of these in one topic config znode exceed ZooKeeper's default jute.maxbuffer (1 MiB - 1).
BIG = ",".join(f"{p}:{b}" for p in range(100_000) for b in (1,))[:600_000].rsplit(",", 1)[0]


def _end(log_dir: Path) -> int:
    with MetadataLog.open(log_dir) as log:
        return log.end_offset


def _error(r: subprocess.CompletedProcess[str]) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zk2kraft: error: "), r.stderr
    return lines[0]


@pytest.mark.zk
def test_oversized_config_apply_is_refused_with_nothing_appended(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    with cluster(zk, zk_connect) as generated:
        topic = sorted(generated.image.topics)[0]
        r = run_cli(["migrate", "--yes", "--brokers-from-zk", *where])
        assert r.returncode == 0, r.stderr
        changes = tmp_path / "changes.jsonl"
        changes.write_text(
            "".join(
                AdminChange(kind="alter-topic-config", topic=topic, configs={name: BIG}).model_dump_json()
                + "\n"
                for name in (
                    "leader.replication.throttled.replicas",
                    "follower.replication.throttled.replicas",
                )
            )
        )
        before = _end(log_dir)
        r = run_cli(["admin", "apply", str(changes), "--json", *where])
        line = _error(r)
        assert r.returncode == 2, r.stderr
        assert (
            f"znode /config/topics/{topic}" in line and "does not fit" in line and "nothing appended" in line
        )
        out = [json.loads(x) for x in r.stdout.splitlines()]
        applied = [x for x in out if "error" not in x]
        assert len(applied) == 1  # the first change fits and is applied; the second is not appended
        assert out[-1]["error"]["exit_code"] == 2  # --json: the refusal as a JSON object too
        # The admin run's claim appends a LeaderChange first; the log ends with the first change.
        assert _end(log_dir) == applied[0]["last_offset"] + 1 > before
        status = json.loads(run_cli(["status", "--json", *where]).stdout)
        assert status["write_behind_lag"] == 0
        # Everything else keeps working.
        r = run_cli(["admin", "create-topic", "after-refusal", "-p", "1", *where])
        assert r.returncode == 0, r.stderr


@pytest.mark.zk
def test_oversized_add_partitions_is_refused_with_nothing_appended(tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    # Its own server: were the partitions written, the shared one would take minutes to clean.
    with own_server(tmp_path / "zk") as (zk, zk_connect), cluster(zk, zk_connect):
        where = ["-z", zk_connect, "-l", str(log_dir)]
        r = run_cli(["migrate", "--yes", "--brokers-from-zk", *where])
        assert r.returncode == 0, r.stderr
        r = run_cli(["admin", "create-topic", "huge", "-p", "1", "-r", "1", *where])
        assert r.returncode == 0, r.stderr
        before = _end(log_dir)
        # 100,000 partitions: /brokers/topics/huge alone is over 1 MiB.
        r = run_cli(["admin", "add-partitions", "huge", "-p", "100000", *where])
        line = _error(r)
        assert r.returncode == 2 and "znode /brokers/topics/huge" in line and "nothing appended" in line
        assert _end(log_dir) <= before + 1  # at most the admin run's LeaderChange, no partition
        with MetadataLog.open(log_dir) as log:
            assert not [rec for offset, _e, rec in log.read(before) if rec.name == "PartitionRecord"]
        status = json.loads(run_cli(["status", "--json", *where]).stdout)
        assert status["write_behind_lag"] == 0 and status["stuck_record"] is None


@pytest.mark.zk
def test_a_lag_that_can_never_drain_is_named_and_truncated(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    with cluster(zk, zk_connect) as generated:
        topic = sorted(generated.image.topics)[0]
        r = run_cli(["migrate", "--yes", "--brokers-from-zk", *where])
        assert r.returncode == 0, r.stderr
        covered = json.loads(run_cli(["status", "--json", *where]).stdout)["migration_znode"]
        # As an older zk2kraft did: the oversized change appended before its ZooKeeper write was tried.
        with MetadataLog.open(log_dir, writable=True) as log:
            first, last = log.append(
                [
                    record("ConfigRecord", 0, ResourceType=2, ResourceName=topic, Name=name, Value=BIG)
                    for name in (
                        "leader.replication.throttled.replicas",
                        "follower.replication.throttled.replicas",
                    )
                ],
                log.latest_epoch,
            )
        assert first == covered["kraft_metadata_offset"] + 1
        status = json.loads(run_cli(["status", "--json", *where]).stdout)
        assert status["write_behind_lag"] == 2
        stuck = status["stuck_record"]
        assert stuck.startswith(f"record {first} (ConfigRecord) (change up to offset {last})"), stuck
        assert f"znode /config/topics/{topic}" in stuck and "does not fit" in stuck
        r = run_cli(["check", "--json", *where])
        found = [f for f in json.loads(r.stdout)["findings"] if f["code"] == "LOG_RECORD_NEVER_SYNCED"]
        assert r.returncode == 1 and len(found) == 1 and found[0]["message"] == stuck, r.stdout
        text = run_cli(["status", *where])
        assert text.returncode == 0 and "truncate-unsynced --yes" in text.stdout
        # The migration is stuck on it...
        r = run_cli(["migrate", "--yes", "--brokers-from-zk", *where])
        line = _error(r)
        assert r.returncode == 2 and f"znode /config/topics/{topic}" in line and "truncate-unsynced" in line
        # ...until the records ZooKeeper never received are cut off.
        r = run_cli(["log", "truncate-unsynced", *where])
        assert r.returncode == 1 and "--yes" in _error(r)
        assert _end(log_dir) == last + 1
        with MetadataLog.open(log_dir, writable=True):  # a writer holds the log: brokers may fetch
            r = run_cli(["log", "truncate-unsynced", "--yes", *where])
            assert r.returncode == 4, r.stderr
        r = run_cli(["log", "truncate-unsynced", "--yes", "--json", *where])
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["dropped_offsets"] == 2
        assert _end(log_dir) == first
        r = run_cli(["log", "truncate-unsynced", "--yes", *where])
        assert r.returncode == 2 and "nothing to truncate" in _error(r)
        r = run_cli(["migrate", "--yes", "--brokers-from-zk", *where])
        assert r.returncode == 0, r.stderr
        r = run_cli(["admin", "alter-topic-config", topic, "--set", "retention.ms=1000", *where])
        assert r.returncode == 0, r.stderr
        status = json.loads(run_cli(["status", "--json", *where]).stdout)
        assert status["write_behind_lag"] == 0 and status["stuck_record"] is None
        assert_consistent(zk, log_dir)
        r = run_cli(["log", "verify", "-l", str(log_dir)])
        assert r.returncode == 0, r.stdout + r.stderr


def test_change_writes_are_the_syncers_znodes() -> None:
    """Creates for a new topic, one set for a changed config: the znodes and bytes the layout writes."""
    from migrate_helpers import SPEC

    from migrator.controller.managers.change import plan_change
    from migrator.migration.zk_fit import change_writes
    from migrator.zk import layout
    from zk_fixtures.generator import generate

    image = generate(SPEC).image
    brokers = {b: None for b in image.brokers}
    planned = plan_change(AdminChange(kind="create-topic", topic="fresh", partitions=2), image, brokers)
    ops = change_writes(image, planned.records, 5)
    assert {op.kind for op in ops} == {"create"}
    topic = sorted(image.topics)[0]
    planned = plan_change(
        AdminChange(kind="alter-topic-config", topic=topic, configs={"retention.ms": "1234"}), image, brokers
    )
    (op,) = change_writes(image, planned.records, 5)
    assert op.kind == "set" and op.path == f"/config/topics/{topic}" and b'"retention.ms":"1234"' in op.data
    assert layout.config_znode(image, "TOPIC", topic) is not None


@pytest.mark.zk
def test_the_refusal_and_the_writer_draw_the_line_at_the_same_byte(zk: KazooClient) -> None:
    from migrator.errors import BadInputError
    from migrator.migration.unsynced import sizing_writer
    from migrator.zk.fenced_writer import OpGroup, ZkOp

    writer = sizing_writer(zk, 7)
    base = len(writer._encode(ZkOp.set("/config/topics/t", b"")))
    hard = writer.jute_maxbuffer - writer._fixed
    fits, too_big = (
        ZkOp.set("/config/topics/t", b"x" * (hard - base)),
        ZkOp.set("/config/topics/t", b"x" * (hard - base + 1)),
    )
    writer.refuse_oversized([fits])
    assert writer.request_bytes([fits]) <= writer.jute_maxbuffer
    with pytest.raises(BadInputError, match="does not fit"):
        writer.refuse_oversized([too_big])
    with pytest.raises(BadInputError, match="does not fit"):
        list(writer._pack([OpGroup([fits, too_big], 5, 7)]))
    assert len(list(writer._pack([OpGroup([fits], 5, 7)]))) == 1
