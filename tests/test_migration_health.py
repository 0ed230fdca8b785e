"""`check` and `status` during a migration (issue 17 item 3): the migration's health instead of
eligibility blockers, the writer alive or gone, and never advice that would act against it.
Real processes against the real ZooKeeper."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import ROOT, ZK2KRAFT, cluster, run_cli, wait_for_follower

from zk_fixtures.server import free_port


@pytest.mark.zk
def test_check_reports_health_during_dual_write_and_flags_a_dead_writer(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    with cluster(zk, zk_connect):
        r = run_cli(["migrate", "--yes", "--brokers-from-zk", *where])
        assert r.returncode == 0, r.stderr
        r = run_cli(["check", *where])
        assert r.returncode == 0, r.stdout + r.stderr
        assert "migration in progress (DualWriteMetadata) and healthy" in r.stdout
        assert "controller_epoch" not in r.stdout and "NOT eligible" not in r.stdout
        assert "write-behind lag: 0" in r.stdout
        health = json.loads(run_cli(["check", "--json", *where]).stdout)["migration"]
        assert health["state"] == "DualWriteMetadata" and health["writer"] is None and not health["problems"]
        # Without --log-dir it still never offers to fence the claim; it asks for the log instead.
        r = run_cli(["check", "-z", zk_connect])
        assert r.returncode == 1 and "controller_epoch" not in r.stdout and "--log-dir" in r.stdout

        follower = subprocess.Popen(
            [*ZK2KRAFT, "migrate", "--yes", "--brokers-from-zk", "--follow", *where],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
        )
        try:
            wait_for_follower(follower, log_dir)
            alive = json.loads(run_cli(["status", "--json", *where]).stdout)["writer_info"]
            assert alive["pid"] == follower.pid and alive["alive"]
            follower.kill()  # SIGKILL: the controller dies without releasing anything
            follower.wait(timeout=30)
        finally:
            if follower.poll() is None:
                follower.kill()
                follower.wait()
        r = run_cli(["check", *where])
        assert r.returncode == 1, r.stdout
        assert f"pid {follower.pid}" in r.stdout and "gone" in r.stdout and "restart" in r.stdout
        assert "controller_epoch" not in r.stdout
        text = run_cli(["status", *where]).stdout
        assert "gone" in text and f"pid {follower.pid}" in text and "zk2kraft migrate --follow" in text
        s = json.loads(run_cli(["status", "--json", *where]).stdout)
        assert s["writer_info"]["alive"] is False and "restart" in s["next_action"]
        # A clean stop is not a death: after a run that released the log, nothing is flagged.
        assert run_cli(["migrate", "--yes", "--brokers-from-zk", *where]).returncode == 0
        r = run_cli(["check", *where])
        assert r.returncode == 0 and "gone" not in r.stdout, r.stdout


@pytest.mark.zk
def test_status_while_the_controller_waits_for_brokers_names_it_and_never_says_migrate(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    with cluster(zk, zk_connect):
        waiting = subprocess.Popen(
            [*ZK2KRAFT, "migrate", "--yes", "--listen", f"127.0.0.1:{free_port()}", *where],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                s = json.loads(run_cli(["status", "--json", *where]).stdout)
                if s.get("kafka_state") == "PRE_MIGRATION" and (s.get("writer_info") or {}).get("alive"):
                    break
                assert waiting.poll() is None and time.monotonic() < deadline, s
                time.sleep(0.2)
            assert s["writer_info"]["pid"] == waiting.pid
            assert "zk2kraft check" not in s["next_action"] and "waiting for the brokers" in s["next_action"]
            r = run_cli(["check", *where])
            assert r.returncode == 0 and "migration in progress" in r.stdout, r.stdout
        finally:
            waiting.send_signal(signal.SIGTERM)
            try:
                waiting.communicate(timeout=30)
            finally:
                if waiting.poll() is None:
                    waiting.kill()
                    waiting.communicate()
