"""Issue 18 item 1: a change whose ZooKeeper write cannot fit is refused before it is appended."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import cluster, run_cli

from migrator.kraft.log import MetadataLog
from migrator.migration.admin import AdminChange

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
        applied = [json.loads(x) for x in r.stdout.splitlines()]
        assert len(applied) == 1  # the first change fits and is applied; the second is not appended
        # The admin run's claim appends a LeaderChange first; the log ends with the first change.
        assert _end(log_dir) == applied[0]["last_offset"] + 1 > before
        status = json.loads(run_cli(["status", "--json", *where]).stdout)
        assert status["write_behind_lag"] == 0
        # Everything else keeps working.
        r = run_cli(["admin", "create-topic", "after-refusal", "-p", "1", *where])
        assert r.returncode == 0, r.stderr
