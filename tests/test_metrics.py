"""The controller's Prometheus endpoint, scraped over HTTP from a real `migrate --follow` process."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import ROOT, SPEC, ZK2KRAFT, cluster, register_migrating_broker, run_cli
from prometheus_client.parser import text_string_to_metric_families

from migrator import commands
from migrator.controller.network.listener_runtime import IN_PROCESS
from migrator.errors import BadInputError
from migrator.metrics import PREFIX, MigrationMetrics, parse_listen
from migrator.zk.connection import close, connect
from zk_fixtures.generator import generate
from zk_fixtures.server import ZkServer, free_port

K = PREFIX  # kafka_controller_KafkaController_


def scrape(port: int) -> dict[str, float]:
    """Every sample of the endpoint by name (histograms as _count/_sum/_bucket{le})."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = s.name + (f"{{le={s.labels['le']}}}" if "le" in s.labels else "")
            out[key] = s.value
    return out


def wait_for(port: int, proc: subprocess.Popen[str], pred, timeout: float = 60.0) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    last: dict[str, float] = {}
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        try:
            last = scrape(port)
        except OSError:
            last = {}
        if last and pred(last):
            return last
        time.sleep(0.1)
    raise AssertionError(f"metrics never matched; last scrape {last}")


@pytest.mark.zk
def test_migrate_follow_serves_kafkas_migration_metrics(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    port = free_port()
    with cluster(zk, zk_connect):
        proc = subprocess.Popen(
            [
                *ZK2KRAFT,
                "migrate",
                "--yes",
                "--brokers-from-zk",
                "--follow",
                "--json",
                *where,
                "--metrics-listen",
                f"127.0.0.1:{port}",
                "--listen",
                f"127.0.0.1:{free_port()}",
            ],  # fmt: skip
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
        )
        try:
            # --brokers-from-zk: no broker registered with the KRaft controller, so Kafka's gauge is 0.
            m = wait_for(port, proc, lambda m: m.get(K + "ZkMigrationState") == 1)
            assert m[K + "MigratingZkBrokerCount"] == 0
            # The copy: every record counted, and one full reconcile into ZooKeeper timed.
            assert m["zk2kraft_copy_records_total"] > 0
            assert m["zk2kraft_copy_records_copied"] == m["zk2kraft_copy_records_total"]
            assert m[K + "ZkWriteSnapshotTimeMs_count"] == 1 and m[K + "ZkWriteSnapshotTimeMs_sum"] > 0
            assert m[K + "ZkWriteBehindLag"] == 0
            deltas = m[K + "ZkWriteDeltaTimeMs_count"]
            written = m.get("zk2kraft_dual_write_records_total", 0.0)

            # An admin change goes to the follower's listener: records written behind, one more delta timed.
            r = run_cli(["admin", "create-topic", "metered", "-p", "3", "--json", *where])
            assert r.returncode == 0, r.stderr
            assert json.loads(r.stdout)["path"] == "protocol"
            records = 1 + 3  # TopicRecord, a PartitionRecord each
            m = wait_for(port, proc, lambda m: m[K + "ZkWriteDeltaTimeMs_count"] > deltas)
            assert m["zk2kraft_dual_write_records_total"] == written + records
            assert m[K + "ZkWriteBehindLag"] == 0
            assert m[K + "ZkWriteDeltaTimeMs_sum"] > 0

            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, err
    with pytest.raises(OSError):
        scrape(port)  # the endpoint ends with the controller


@pytest.mark.zk
def test_registered_brokers_are_counted_once_the_controller_follows(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """MigratingZkBrokerCount counts KRaft registrations with isMigratingZkBroker (Kafka's gauge)."""
    metrics = MigrationMetrics()
    _, port = metrics.serve("127.0.0.1:0")
    try:
        m = scrape(port)
        assert m[K + "ZkMigrationState"] == -1  # nothing loaded yet, as Kafka's gauge
        with cluster(zk, zk_connect):
            expected = sorted(b.id for b in generate(SPEC).image.brokers.values())
            running = commands.start_controller(
                zk_connect, str(tmp_path / "meta"), listen=IN_PROCESS, yes=True, broker_wait_timeout=60,
                session_timeout_ms=60_000, metrics=metrics,
            )  # fmt: skip
            try:
                service = running.service
                assert service is not None
                # The soft start bootstrapped the log with PRE_MIGRATION: the gauge says so (issue 17).
                assert scrape(port)[K + "ZkMigrationState"] == 2
                for broker_id in expected:
                    register_migrating_broker(service, broker_id)
                assert running.wait_until(lambda r: not service.soft_start, 60), running.error
                # The service leaves soft start at activation; the driver sets the state gauge a moment
                # later, after the first sync: wait for both rather than read them in between.
                deadline = time.monotonic() + 30
                m = scrape(port)
                while m[K + "MigratingZkBrokerCount"] != len(expected) or m[K + "ZkMigrationState"] != 1:
                    assert time.monotonic() < deadline, m
                    time.sleep(0.05)
                    m = scrape(port)
                assert m["zk2kraft_copy_records_total"] > 0
            finally:
                running.stop()
    finally:
        metrics.close()


def test_metrics_listen_bad_address_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(BadInputError):
        parse_listen("nonsense")
    busy = MigrationMetrics()
    host, port = busy.serve("127.0.0.1:0")
    try:
        r = run_cli(["migrate", "-z", "127.0.0.1:1", "-l", str(tmp_path / "l"), "--yes", "--brokers-from-zk",
                     "--metrics-listen", f"{host}:{port}"])  # fmt: skip
        assert r.returncode == 3 and r.stderr.strip().count("\n") == 0, r.stderr
        assert "cannot serve metrics" in r.stderr
        r = run_cli(["migrate", "-z", "127.0.0.1:1", "-l", str(tmp_path / "l"), "--metrics-listen", "x"])
        assert r.returncode == 2 and "--metrics-listen" in r.stderr
    finally:
        busy.close()


@pytest.mark.zk
def test_status_watch_refreshes_without_a_terminal_and_on_one(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    with cluster(zk, zk_connect):
        r = run_cli(["migrate", "--yes", "--brokers-from-zk", *where])
        assert r.returncode == 0, r.stderr
    # No terminal: one snapshot per refresh, as a log would want them.
    t0 = time.monotonic()
    r = run_cli(["status", *where, "--watch", "--interval", "0.3", "--count", "3"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("Ctrl-C to stop") == 3 and r.stdout.count("DualWriteMetadata (3)") == 3
    assert time.monotonic() - t0 >= 0.6
    r = run_cli(["status", *where, "--watch", "0.2", "--count", "2", "--json"])
    lines = r.stdout.strip().splitlines()
    assert r.returncode == 0 and [json.loads(x)["state"] for x in lines] == ["DualWriteMetadata"] * 2
    # ZooKeeper away: shown and retried, and the last look decides the exit code.
    r = run_cli(["status", "-z", "127.0.0.1:1", "-l", str(log_dir), "--zk-timeout", "0.5", "--watch", "0.2",
                 "--count", "2"])  # fmt: skip
    assert r.returncode == 3 and r.stdout.count("unavailable: cannot reach ZooKeeper") == 2, r.stdout
    # A terminal: rich's live view, redrawn in place, ended by the count (or Ctrl-C).
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*ZK2KRAFT, "status", *where, "--watch", "0.2", "--count", "3"],
        stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, close_fds=True,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}, "TERM": "xterm", "COLUMNS": "120"},
    )  # fmt: skip
    os.close(slave)
    seen = b""
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        assert proc.wait(timeout=30) == 0
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    text = seen.decode(errors="replace")
    assert "DualWriteMetadata (3)" in text and "\x1b[" in text  # cursor movement: redrawn in place
    # Ctrl-C ends a watch cleanly.
    proc = subprocess.Popen([*ZK2KRAFT, "status", *where, "--watch", "0.2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)  # fmt: skip
    assert proc.stdout is not None
    first = ""
    deadline = time.monotonic() + 60
    while "DualWriteMetadata" not in first:  # the watch is running (a loaded machine imports slowly)
        assert proc.poll() is None and time.monotonic() < deadline, first
        if select.select([proc.stdout], [], [], 0.5)[0]:
            first += proc.stdout.readline()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    out = first + out
    assert proc.returncode == 0 and "DualWriteMetadata" in out and "Traceback" not in err, err


@pytest.mark.zk
@pytest.mark.slow
def test_write_behind_lag_builds_up_while_zookeeper_is_down(tmp_path: Path) -> None:
    """The lag gauge is the alert: records the controller appends while ZooKeeper is gone show up in
    it, and it returns to 0 once ZooKeeper is back and the syncer caught up."""
    server = ZkServer(tmp_path / "zk").start()
    client = connect(server.connect_string)
    metrics = MigrationMetrics()
    _, port = metrics.serve("127.0.0.1:0")
    try:
        with cluster(client, server.connect_string):
            expected = sorted(b.id for b in generate(SPEC).image.brokers.values())
            running = commands.start_controller(
                server.connect_string, str(tmp_path / "meta"), listen=IN_PROCESS, yes=True,
                broker_wait_timeout=60, session_timeout_ms=600_000, metrics=metrics,
            )  # fmt: skip
            try:
                service = running.service
                assert service is not None
                for broker_id in expected:
                    register_migrating_broker(service, broker_id)
                assert running.wait_until(lambda r: not service.soft_start, 60), running.error
                _wait_metric(port, K + "ZkMigrationState", lambda v: v == 1)
                # set by the follow loop: the controller is following, the first sync is done
                _wait_metric(port, K + "MigratingZkBrokerCount", lambda v: v == len(expected))
                _wait_metric(port, K + "ZkWriteBehindLag", lambda v: v == 0)
                server.kill()
                # A new broker registers: a record in the log that ZooKeeper cannot get.
                register_migrating_broker(service, max(expected) + 100)
                lag = _wait_metric(port, K + "ZkWriteBehindLag", lambda v: v > 0)
                assert lag >= 1
                server.start()
                _wait_metric(port, K + "ZkWriteBehindLag", lambda v: v == 0, timeout=90)
            finally:
                running.stop()
    finally:
        metrics.close()
        close(client)
        server.stop()


def _wait_metric(port: int, name: str, pred, timeout: float = 30.0) -> float:
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = scrape(port).get(name)
        if value is not None and pred(value):
            return value
        time.sleep(0.1)
    raise AssertionError(f"{name} stayed at {value}")
