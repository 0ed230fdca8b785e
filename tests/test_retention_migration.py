"""A long migration under aggressive snapshots and retention (issue 32 item 1), real processes throughout.

The controller's properties make Kafka's snapshot cadence and retention aggressive
(`metadata.log.max.record.bytes.between.snapshots=65536`, `metadata.log.max.snapshot.interval.ms=2000`,
`metadata.max.retention.bytes=1`, `metadata.max.retention.ms=1000`) while kafka-python drives admin load
through `migrate --follow`'s listener (160 topics created, 80 deleted, 80 config changes), so retention
moves the log start past the copy's commit. After a SIGTERM the same directory must restart, then
finalize (one migration) or roll back (another); the finalized directory must be what Kafka's own
classes read: `kafka-dump-log` decodes every file, `log verify --kafka` agrees, and Kafka's loader
(tests/kafka_checkers) holds ZooKeeper's topics and no config of the topic deleted during dual-write.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka_image import kafka_image
from migrate_helpers import (
    ROOT,
    ZK2KRAFT,
    assert_consistent,
    cluster,
    own_server,
    run_cli,
    simulated_brokers,
    wait_for_follower,
)

from migrator.kraft.log import MetadataLog
from migrator.kraft.snapshot import list_snapshots
from migrator.migration.log_binding import BINDING
from zk_fixtures.kafka import kafka_tool
from zk_fixtures.server import free_port

pytestmark = [pytest.mark.zk, pytest.mark.slow]

PROFILE = {
    "process.roles": "controller",
    "metadata.log.max.record.bytes.between.snapshots": "65536",
    "metadata.log.max.snapshot.interval.ms": "2000",
    "metadata.max.retention.bytes": "1",
    "metadata.max.retention.ms": "1000",
}


def _wait_for_line(log: Path, proc: subprocess.Popen[bytes], needle: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while needle not in log.read_text():
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"no {needle!r} in:\n{log.read_text()[-3000:]}"
        time.sleep(0.1)


@contextmanager
def follower(args: list[str], stderr: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`zk2kraft ARGS` (a `migrate --follow --listen`), stopped with SIGTERM at the end (exit 0)."""
    with stderr.open("ab") as sink:
        proc = subprocess.Popen(
            [*ZK2KRAFT, *args], stdout=subprocess.DEVNULL, stderr=sink, stdin=subprocess.DEVNULL, cwd=ROOT
        )
    try:
        yield proc
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, stderr.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def admin_load(port: int) -> None:
    """160 topics created, 80 deleted, 80 config changes, through kafka-python; `payments.v2` gets a
    config and is deleted among them."""
    admin = KafkaAdminClient(
        bootstrap_servers=f"127.0.0.1:{port}", client_id="retention-load", request_timeout_ms=60_000
    )
    try:
        names = [f"load-{i:03d}" for i in range(159)] + ["payments.v2"]
        for i in range(0, len(names), 20):
            admin.create_topics([NewTopic(n, 2, 1) for n in names[i : i + 20]], timeout_ms=60_000)
        changed = names[80:]
        for i in range(0, len(changed), 20):
            admin.alter_configs(
                [
                    ConfigResource(ConfigResourceType.TOPIC, n, configs={"retention.ms": str(3_600_000 + j)})
                    for j, n in enumerate(changed[i : i + 20])
                ]
            )
        deleted = names[:79] + ["payments.v2"]
        for i in range(0, len(deleted), 20):
            admin.delete_topics(deleted[i : i + 20], timeout_ms=60_000)
    finally:
        admin.close()


def start_past_copy(zk, log_dir: Path, port: int, timeout: float = 120) -> tuple[int, int]:
    """Until retention has moved the log start past the copy's commit: (commit offset, log start).
    A config change a second meanwhile: retention is applied after appends, as the load goes on."""
    binding = json.loads(zk.get(BINDING)[0])
    commit = int(binding["copy_offset"])
    deadline = time.monotonic() + timeout
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=60_000)
    try:
        for i in range(10**6):
            with MetadataLog.open(log_dir) as log:
                start = log.log_start_offset
            if start > commit:
                return commit, start
            assert time.monotonic() < deadline, f"the log start stayed at {start} (copy commit {commit})"
            admin.alter_configs(
                [
                    ConfigResource(
                        ConfigResourceType.TOPIC, "load-150", configs={"retention.ms": str(1000 + i)}
                    )
                ]
            )
            time.sleep(1)
    finally:
        admin.close()
    raise AssertionError("unreachable")


def migrate_under_load(
    zk, zk_connect: str, generated, log_dir: Path, tmp_path: Path, extra: dict
) -> tuple[Path, int]:
    """Migrate with the profile, run the admin load, wait for retention past the copy, SIGTERM, then
    restart `migrate --follow` on the same directory and stop it again; returns the properties file
    and the copy's commit offset."""
    props = tmp_path / "controller.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in {**PROFILE, **extra}.items()))
    where = ["-z", zk_connect, "-l", str(log_dir)]
    port = free_port()
    args = ["--config", str(props), "migrate", "--yes", "--follow", "--listen", f"127.0.0.1:{port}", *where]
    stderr = tmp_path / "controller.log"
    with follower(args, stderr) as proc:
        _wait_for_line(stderr, proc, "controller listening on")
        with simulated_brokers(("127.0.0.1", port), zk_connect, generated) as sim:
            sim.start()
            _wait_for_line(stderr, proc, "→ DualWriteMetadata")
            admin_load(port)
            commit, start = start_past_copy(zk, log_dir, port)
    # stopped cleanly with the log start past the copy's commit: status sees no anomaly
    with MetadataLog.open(log_dir) as log:
        assert log.log_start_offset == start > commit
        assert log.epoch_for_offset(commit) == json.loads(zk.get(BINDING)[0])["copy_epoch"]
    r = run_cli(["--config", str(props), "status", "--json", *where])
    assert r.returncode == 0, r.stdout + r.stderr
    status = json.loads(r.stdout)
    assert status["state"] == "DualWriteMetadata", status
    assert "use `migrate --recopy`" not in r.stdout + r.stderr
    # restarted on the same directory: it resumes (it used to refuse with exit 2)
    stderr.write_text("")
    with follower(args, stderr) as proc:
        wait_for_follower(proc, log_dir, timeout=120)
        _wait_for_line(stderr, proc, "DualWriteMetadata → DualWriteMetadata")
        with simulated_brokers(("127.0.0.1", port), zk_connect, generated) as sim:
            sim.start()
            admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=60_000)
            try:
                admin.create_topics([NewTopic("after-restart", 1, 1)], timeout_ms=60_000)
            finally:
                admin.close()
    assert_consistent(zk, log_dir)
    return props, commit


def test_a_migration_under_aggressive_retention_restarts_and_finalizes(tmp_path: Path) -> None:
    """One segment (Kafka's default 1 GiB): retention moves the log start inside it, past the copy."""
    log_dir = tmp_path / "meta"
    with own_server(tmp_path / "zk") as (zk, zk_connect):
        with cluster(zk, zk_connect) as generated:
            props, _ = migrate_under_load(zk, zk_connect, generated, log_dir, tmp_path, {})
        where = ["-z", zk_connect, "-l", str(log_dir)]  # the ZK-mode brokers are gone (rolled)
        r = run_cli(["--config", str(props), "finalize", "--yes", "--rehearsal", *where])
        assert r.returncode == 0 and "MigrationFinalized" in r.stdout, r.stdout + r.stderr
        zk_topics = set(zk.get_children("/brokers/topics"))
    part = log_dir / "__cluster_metadata-0"
    # log verify --kafka and Kafka's own decoder agree: nothing to refuse, every file decodes
    r = run_cli(["log", "verify", "--kafka", "--json", "-l", str(log_dir)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["findings"] == []
    files = sorted(part.glob("*.log")) + [s.path for s in list_snapshots(part)]
    dumped = kafka_tool("kafka-dump-log", "--cluster-metadata-decoder", "--files", ",".join(map(str, files)))
    assert "Exception" not in dumped.stdout + dumped.stderr and "invalid" not in dumped.stdout.lower()
    assert "ZkMigrationStateRecord" in dumped.stdout or "ZK_MIGRATION_STATE" in dumped.stdout.upper()
    image = kafka_image(part)
    assert image.replayed_from == image.log_start > 0  # Kafka's log start is the handover snapshot
    assert set(image.topics) == zk_topics and "payments.v2" not in image.topics
    assert not any(name == "payments.v2" for _t, name, _k in image.configs)
    assert ("TOPIC", "load-100", "retention.ms") in image.configs


def test_a_migration_under_aggressive_retention_with_small_segments_restarts_and_rolls_back(
    tmp_path: Path,
) -> None:
    """Small segments (Kafka's internal minimum lowered): retention deletes the copy's segments."""
    log_dir = tmp_path / "meta"
    small = {"metadata.log.segment.bytes": "8192", "metadata.log.segment.min.bytes": "4096"}
    with own_server(tmp_path / "zk") as (zk, zk_connect), cluster(zk, zk_connect) as generated:
        props, commit = migrate_under_load(zk, zk_connect, generated, log_dir, tmp_path, small)
        with MetadataLog.open(log_dir) as log:
            assert log.segments[0].base_offset > commit  # the copy's segments went
            assert all(sg.path.stat().st_size <= 8192 for sg in log.segments[:-1])
        where = ["-z", zk_connect, "-l", str(log_dir)]
        r = run_cli(["--config", str(props), "rollback", "--yes", *where])
        assert r.returncode == 0, r.stdout + r.stderr
        r = run_cli(["status", "--json", *where])
        assert json.loads(r.stdout)["state"] == "MigrationIneligible", r.stdout
        assert "after-restart" in zk.get_children("/brokers/topics")
        assert "payments.v2" not in zk.get_children("/brokers/topics")
    bad = tmp_path / "bad.properties"
    bad.write_text("metadata.log.segment.bytes=1048576\n")
    r = run_cli(["--config", str(bad), "status", "-z", "127.0.0.1:1", "-l", str(log_dir)])
    assert r.returncode == 2
    assert (
        r.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "Cannot set metadata.log.segment.bytes below 8388608: 1048576 (Kafka's bound; its internal "
            "metadata.log.segment.min.bytes lowers it, for testing only)"
        )
    ), r.stderr
