"""A mistyped --log-dir never acts (issue 17.1): ZooKeeper's claim is bound to one log directory.

With a controller following on the real log, every writing command given another directory refuses
with one line naming both sides (exit 4: a live writer holds the claim) and changes nothing in
ZooKeeper; with no writer alive it is exit 2. `status` and `check` show the mismatch first.
A lost disk is taken over only on purpose (`rollback --force-orphaned`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import ROOT, ZK2KRAFT, cluster, run_cli, wait_for_follower

from migrator import commands
from migrator.migration import log_binding
from migrator.zk import paths as P

pytestmark = pytest.mark.zk

MIGRATE = ["migrate", "--yes", "--brokers-from-zk"]


def control_znodes(zk: KazooClient) -> dict[str, bytes | None]:
    """What a writer changes when it claims or releases ZooKeeper, with versions."""
    out: dict[str, bytes | None] = {}
    for path in (P.CONTROLLER, P.CONTROLLER_EPOCH, P.MIGRATION, log_binding.BINDING):
        node = zk.exists(path)
        out[path] = None if node is None else zk.get(path)[0] + f"@{node.mzxid}".encode()
    return out


@contextmanager
def follower(zk_connect: str, log_dir: Path) -> Iterator[subprocess.Popen[str]]:
    """`zk2kraft migrate --follow` on `log_dir`, ready once it serves its inbox; stopped by SIGTERM."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}
    proc = subprocess.Popen(
        [*ZK2KRAFT, *MIGRATE, "--follow", "-z", zk_connect, "-l", str(log_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        wait_for_follower(proc, log_dir, timeout=90)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)


def refused(args: list[str], code: int, *names: str) -> str:
    r = run_cli(args)
    assert r.returncode == code, f"{args[0]}: exit {r.returncode} (wanted {code}): {r.stderr[-800:]}"
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    for name in names:
        assert name in lines[0], f"{name!r} not named: {lines[0]}"

    return lines[0]


def test_a_mistyped_log_dir_never_acts(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    real = tmp_path / "kraft-big"
    typo = tmp_path / "kraft-bgi"
    with cluster(zk, zk_connect):
        commands.migrate(zk_connect, str(real), yes=True, brokers_from_zk=True)
        with follower(zk_connect, real):
            before = control_znodes(zk)
            z = ["-z", zk_connect, "-l", str(typo)]
            # a live writer holds the claim: exit 4, naming it and the mistyped directory
            refused(["rollback", "--yes", *z], 4, str(real), str(typo))
            refused([*MIGRATE, *z], 4, str(real), str(typo))
            refused(["finalize", "--yes", *z], 4, str(real), str(typo))
            refused(["admin", "create-topic", "typo-topic", "-p", "1", *z], 4, str(real), str(typo))
            refused(["rollback", "--yes", "--force-orphaned", *z], 4, str(real))
            assert not typo.exists(), "the mistyped directory was formatted"
            status = run_cli(["status", "--json", *z])
            assert status.returncode == 1, status.stderr  # not the migration's log (issue 31)
            first = json.loads(status.stdout)["anomalies"][0]
            assert "another live writer" in first and str(real) in first and str(typo) in first
            text = run_cli(["status", *z])
            assert text.stdout.lstrip().startswith("not this log") and "another live writer" in text.stdout
            check = run_cli(["check", "--json", *z])
            findings = json.loads(check.stdout)["findings"]
            assert check.returncode == 1 and findings[0]["code"] == "LOG_NOT_BOUND", check.stdout[-800:]
            # the real log is still the controller's: status there shows nothing amiss
            assert not any("live writer" in a for a in commands.status(zk_connect, str(real)).anomalies)
            assert control_znodes(zk) == before, "a refused command changed ZooKeeper"
        # no writer alive now: the same typo is bad input (exit 2), naming both sides
        before = control_znodes(zk)
        refused(["rollback", "--yes", *z], 2, str(real), str(typo))
        refused([*MIGRATE, *z], 2, str(real), str(typo))
        assert not typo.exists() and control_znodes(zk) == before
        # the real log resumes as before
        result = commands.migrate(zk_connect, str(real), yes=True, brokers_from_zk=True)
        assert result.state_after == "DualWriteMetadata" and result.lag == 0


def test_rollback_force_orphaned_releases_a_lost_log(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    lost = tmp_path / "lost"
    replacement = tmp_path / "new-disk"
    with cluster(zk, zk_connect):
        commands.migrate(zk_connect, str(lost), yes=True, brokers_from_zk=True)
        lost.rename(tmp_path / "gone")  # the disk died
        z = ["-z", zk_connect, "-l", str(replacement)]
        refused(["rollback", "--yes", *z], 2, str(lost), str(replacement))
        r = run_cli(["rollback", "--yes", "--force-orphaned", *z])
        assert r.returncode == 0, r.stderr
        assert "taking over from log directory" in r.stdout and str(lost) in r.stdout
        assert zk.exists(P.CONTROLLER) is None and zk.exists(P.MIGRATION) is None
        assert zk.exists(log_binding.ROOT) is None
        assert not replacement.exists()


@pytest.mark.zk
def test_a_log_shorter_than_what_zookeeper_covers_is_damage_in_status_and_check(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """A zero-length last segment while /migration names a later offset: never "lag 0"."""
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    with cluster(zk, zk_connect):
        r = run_cli(["migrate", "--yes", "--brokers-from-zk", *where])
        assert r.returncode == 0, r.stderr
        before = json.loads(run_cli(["status", "--json", *where]).stdout)
        assert before["write_behind_lag"] == 0
        segments = sorted((log_dir / "__cluster_metadata-0").glob("*.log"))
        segments[-1].write_bytes(b"")  # the disk lost the tail
        status = run_cli(["status", "--json", *where])
        s = json.loads(status.stdout)
        said = json.dumps(s)
        assert "before /migration at offset" in s["log_binding"], said  # named, and first
        assert s["anomalies"][0] == s["log_binding"] and s["next_action"].startswith("check --log-dir")
        check = run_cli(["check", "--json", *where])
        assert check.returncode != 0 and "LOG_NOT_BOUND" in check.stdout, check.stdout
        assert control_znodes(zk)  # nothing was changed in ZooKeeper by looking
