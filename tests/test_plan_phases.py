"""`plan` estimates every phase of `migrate`, and `migrate` without a terminal prints periodic progress
lines per phase (issue 17 item 3). Real processes, real ZooKeeper."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import cluster, run_cli

from zk_fixtures.generator import ClusterSpec

STILL = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} zk2kraft: still (.+) \((\d+)s\)")
SPEC = ClusterSpec(topics=600, partitions=4, legacy_topics=0, reassignments=0, offline_partitions=0, acls=20)


@pytest.mark.zk
def test_plan_estimates_each_phase_and_migrate_reports_progress_without_a_terminal(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    where = ["-z", zk_connect, "-l", str(tmp_path / "meta")]
    with cluster(zk, zk_connect, SPEC):
        r = run_cli(["plan", "--json", *where])
        assert r.returncode == 0, r.stderr
        phases = json.loads(r.stdout)["phases"]
        for name in ("preflight_seconds", "copy_seconds", "first_sync_seconds"):
            assert phases[name] > 0, phases
        # Pre-flight and first sync each read ZooKeeper once more than the copy alone.
        assert phases["preflight_seconds"] >= phases["read_seconds"] > 0
        assert phases["first_sync_seconds"] >= phases["read_seconds"]
        total = phases["preflight_seconds"] + phases["copy_seconds"] + phases["first_sync_seconds"]
        assert phases["total_seconds"] == pytest.approx(total, abs=0.01)
        text = run_cli(["plan", *where]).stdout
        assert "pre-flight" in text and "first sync" in text and "copy" in text

        r = run_cli(
            ["migrate", "--yes", "--brokers-from-zk", *where], env={"ZK2KRAFT_PROGRESS_INTERVAL": "0.01"}
        )
        assert r.returncode == 0, r.stderr
        still = [m.group(1) for m in map(STILL.match, r.stderr.splitlines()) if m]
        assert still, r.stderr
        known = ("checking eligibility", "claiming", "reading ZooKeeper", "copying", "reconciling")
        assert all(p.startswith(known) for p in still), still
        # Without the test's interval (the default, 10 s), a run this short prints no periodic line.
        r = run_cli(["migrate", "--yes", "--brokers-from-zk", *where])
        assert r.returncode == 0 and "still " not in r.stderr, r.stderr
