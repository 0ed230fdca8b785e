"""`rollback` compares ZooKeeper with the log first and refuses to carry drift back silently
(issue 17 item 3). Real processes, real ZooKeeper."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import cluster, run_cli


@pytest.mark.zk
def test_rollback_refuses_when_zookeeper_differs_from_the_log_unless_accepted(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    with cluster(zk, zk_connect) as generated:
        r = run_cli(["migrate", "--yes", "--brokers-from-zk", *where])
        assert r.returncode == 0, r.stderr
        topic = sorted(t for t in generated.image.topics if t not in generated.image.pending_deletions)[0]
        # Someone edits ZooKeeper behind the controller's back during dual-write.
        zk.set(f"/config/topics/{topic}", b'{"version":1,"config":{"retention.ms":"1"}}')
        r = run_cli(["rollback", "--yes", *where])
        assert r.returncode == 1, r.stdout + r.stderr
        assert (
            "ZooKeeper differs from the log" in r.stderr
            and topic in r.stderr
            and "--accept-drift" in r.stderr
        )
        assert json.loads(run_cli(["status", "--json", *where]).stdout)["state"] == "DualWriteMetadata"
        assert log_dir.is_dir()  # nothing was archived or released

        r = run_cli(["rollback", "--yes", "--accept-drift", "--json", *where])
        assert r.returncode == 0, r.stdout + r.stderr
        result = json.loads(r.stdout)
        assert result["state_after"] == "MigrationIneligible"
        assert any("--accept-drift" in a and topic in a for a in result["actions"]), result["actions"]
        assert zk.get(f"/config/topics/{topic}")[0] == b'{"version":1,"config":{"retention.ms":"1"}}'


@pytest.mark.zk
def test_rollback_without_drift_needs_no_flag(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    where = ["-z", zk_connect, "-l", str(tmp_path / "meta")]
    with cluster(zk, zk_connect):
        assert run_cli(["migrate", "--yes", "--brokers-from-zk", *where]).returncode == 0
        r = run_cli(["rollback", "--yes", *where])
        assert r.returncode == 0, r.stdout + r.stderr
