"""Two drivers with different epochs race over 1,000 topics (Kafka's testControllerFailoverZkRace).

Driver A (`zk2kraft admin apply`, one process, one claim) creates 1,000 topics one by one, each synced
to ZooKeeper before the next. Mid-way driver B, a second controller with a copy of A's log holding
everything ZooKeeper's /migration covers (the replicated log a new leader has), runs `zk2kraft
migrate`: it claims ZooKeeper with a higher epoch while A is alive (log_binding allows a takeover only
to a log holding what ZooKeeper covers). From B's claim on, every write of A fails (A exits 4,
"fenced by a newer controller"), no znode A could have written appears after the claim, B's
reconcile deletes nothing A had acknowledged, and ZooKeeper ends equal to B's log.

A stale copy (behind /migration) is refused instead (exit 4: A is alive): its reconcile would delete changes A
had acknowledged (issue 18.2).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import ROOT, ZK2KRAFT, assert_consistent, cluster, own_server, run_cli

from migrator import commands
from migrator.controller.managers.change import AdminChange
from migrator.kraft.log import MetadataLog
from migrator.migration.facts import gather
from migrator.zk.connection import close, connect
from migrator.zk.reader import read_tree

pytestmark = [pytest.mark.zk, pytest.mark.slow]

TOPICS = 1000


def _created_after(client: KazooClient, zxid: int) -> list[str]:
    """Topic and topic-config znodes created, and partition states changed, after `zxid`."""
    tree = read_tree(client, roots=["/brokers/topics", "/config/topics"])
    return sorted(
        p
        for p, n in tree.nodes.items()
        if p not in ("/brokers/topics", "/config/topics")
        and (n.czxid > zxid or (p.endswith("/state") and n.mzxid > zxid))
    )


def _pause_in_sync(proc: subprocess.Popen[str], zk_connect: str, log_dir: Path) -> None:
    """SIGSTOP `proc` at a moment its log holds nothing ZooKeeper's /migration does not cover."""
    deadline = time.monotonic() + 60
    client = connect(zk_connect)
    try:
        while True:
            proc.send_signal(signal.SIGSTOP)
            if gather(client, log_dir).lag == 0:
                return
            proc.send_signal(signal.SIGCONT)
            assert time.monotonic() < deadline, "A never paused between two changes"
            time.sleep(0.01)
    finally:
        close(client)


def test_two_drivers_race_over_1000_topics(tmp_path: Path) -> None:
    with own_server(tmp_path / "zk") as (zk, zk_connect), cluster(zk, zk_connect):
        log_a, log_b = tmp_path / "a", tmp_path / "b"
        commands.migrate(zk_connect, str(log_a), yes=True, brokers_from_zk=True)
        shutil.copytree(log_a, log_b)  # a stale copy: what A's log held before A's changes
        changes = tmp_path / "changes.jsonl"
        changes.write_text(
            "".join(
                AdminChange(
                    kind="create-topic", topic=f"race-{i:04d}", partitions=1, replication_factor=1
                ).model_dump_json()
                + "\n"
                for i in range(TOPICS)
            )
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}
        driver_a = subprocess.Popen(
            [*ZK2KRAFT, "admin", "apply", str(changes), "--json", "--zk-timeout", "30"]
            + ["-z", zk_connect, "-l", str(log_a)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
            cwd=ROOT,
        )
        try:
            assert driver_a.stdout is not None
            applied = [json.loads(driver_a.stdout.readline()) for _ in range(150)]
            assert all(a["path"] == "direct" for a in applied)
            stale = run_cli(["migrate", "--yes", "--json", "-z", zk_connect, "-l", str(log_b)])
            assert stale.returncode == 4 and "before /migration" in stale.stderr, stale.stderr
            # B's log: a copy of A's holding exactly what ZooKeeper covers (A paused between changes)
            _pause_in_sync(driver_a, zk_connect, log_a)
            shutil.rmtree(log_b)
            shutil.copytree(log_a, log_b, ignore=shutil.ignore_patterns("zk2kraft.lock", ".lock"))
            try:
                driver_b = run_cli(["migrate", "--yes", "--json", "-z", zk_connect, "-l", str(log_b)])
            finally:
                driver_a.send_signal(signal.SIGCONT)
            assert driver_b.returncode == 0, driver_b.stderr
            b = json.loads(driver_b.stdout)
            out, err = driver_a.communicate(timeout=120)
        finally:
            if driver_a.poll() is None:
                driver_a.kill()
                driver_a.communicate()
        applied += [json.loads(line) for line in out.splitlines() if line.strip()]
        assert driver_a.returncode == 4, err
        assert "fenced by a newer controller" in err
        assert 150 <= len(applied) < TOPICS, "A should be stopped mid-way"
        # B's claim is above A's, and B's reconcile deleted nothing A had acknowledged.
        with MetadataLog.open(log_a) as log:
            epoch_a = log.latest_epoch  # A appended its changes in its own claim's epoch
        assert b["claim"]["kraft_epoch"] > epoch_a
        removed = [r for r in b["repairs"] if r["kind"] == "delete"]
        assert not removed, f"B's reconcile deleted what A had acknowledged: {removed[:3]}"
        # Nothing of A landed after B's claim: B's claim is the last change of /controller_epoch.
        claim_zxid = zk.exists("/controller_epoch").mzxid  # type: ignore[union-attr]
        assert _created_after(zk, claim_zxid) == []
        zk_image, _ = assert_consistent(zk, log_b)
        acknowledged = {a["change"].split()[-1] for a in applied if "error" not in a}
        lost = sorted(acknowledged - set(zk_image.topics))
        assert len(acknowledged) >= 150 and not lost, (
            f"acknowledged by A, lost after B's takeover: {lost[:5]}"
        )
        m = zk.get("/migration")[0]
        assert json.loads(m)["kraft_controller_epoch"] == b["claim"]["kraft_epoch"]
