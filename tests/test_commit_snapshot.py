"""The snapshot the copy's commit makes due is written after the dark window, never inside it (issue 29).

With `metadata.log.max.record.bytes.between.snapshots` below the copy's size, the commit makes a
snapshot due. It is held until the first sync is done and written from the first sync's image; a
kill -9 before it (`sync.before-snapshot`) leaves a log without it that still loads and migrates,
since the log is the truth and the snapshot an optimisation.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import assert_consistent, cluster, run_cli

from migrator.kraft.log import MetadataLog
from migrator.kraft.snapshot import list_snapshots
from migrator.migration.copy import read_manifest

pytestmark = pytest.mark.zk


def _migrate(zk_connect: str, log_dir: Path, props: Path, crash_at: str | None = None) -> int:
    args = [
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
    r = run_cli(args, env={"ZK2KRAFT_CRASH_AT": crash_at} if crash_at else None)
    if crash_at is None:
        assert r.returncode == 0, r.stderr[-1500:]
    return r.returncode


def _snapshot_ends(log_dir: Path) -> list[int]:
    with MetadataLog.open(log_dir) as log:
        return [s.end_offset for s in list_snapshots(log.partition_dir)]


@pytest.fixture
def props(tmp_path: Path) -> Path:
    path = tmp_path / "controller.properties"
    path.write_text("metadata.log.max.record.bytes.between.snapshots=1024\n")
    return path


def test_no_snapshot_is_written_inside_the_dark_window(
    zk: KazooClient, zk_connect: str, tmp_path: Path, props: Path
) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        # killed right after the first sync: the dark window is over, no snapshot was written in it
        assert _migrate(zk_connect, log_dir, props, "sync.after-sync") == -signal.SIGKILL
        assert _snapshot_ends(log_dir) == []
        _migrate(zk_connect, log_dir, props)
        assert_consistent(zk, log_dir)


def test_the_commits_snapshot_is_written_from_the_first_syncs_image(
    zk: KazooClient, zk_connect: str, tmp_path: Path, props: Path
) -> None:
    fresh = tmp_path / "fresh"
    with cluster(zk, zk_connect):
        _migrate(zk_connect, fresh, props)
        manifest = read_manifest(fresh)
        assert manifest is not None
        with MetadataLog.open(fresh) as log:
            end = log.end_offset
        assert manifest.last_offset < end and _snapshot_ends(fresh) == [end]
        assert_consistent(zk, fresh)


def test_a_crash_before_the_commits_snapshot_leaves_a_log_that_recovers(
    zk: KazooClient, zk_connect: str, tmp_path: Path, props: Path
) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        assert _migrate(zk_connect, log_dir, props, "sync.before-snapshot") == -signal.SIGKILL
        assert _snapshot_ends(log_dir) == []
        _migrate(zk_connect, log_dir, props)
        assert_consistent(zk, log_dir)
