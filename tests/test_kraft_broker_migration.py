"""Phase 3 over TCP: simulated brokers restarted one by one in KRaft mode, next to ZooKeeper-mode
brokers, follow the migration controller's metadata log and hold the controller's image; once every
broker is a KRaft broker, finalize succeeds."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
from migrate_helpers import ZK2KRAFT, simulated_brokers
from test_broker_sim import migrated

from migrator import commands
from migrator.kraft import handover
from zk_fixtures.kraft_broker import controlled_shutdown, equal_to_controller, restart_in_kraft_mode

pytestmark = [pytest.mark.zk, pytest.mark.slow]


def test_brokers_restarted_in_kraft_mode_follow_the_log_then_finalize(zk, zk_connect, tmp_path) -> None:
    """At every step (after each restart) every KRaft broker's cache equals the controller's whole image,
    broker registrations included, at one committed offset; ZooKeeper-mode brokers stay registered."""
    with migrated(zk, zk_connect, tmp_path) as (running, sim, ids, _):
        service = running.service
        assert service is not None
        followers = []
        for n, broker_id in enumerate(ids):
            zk.delete(f"/brokers/ids/{broker_id}")  # the ZooKeeper-mode broker's session goes
            kraft = restart_in_kraft_mode(sim, broker_id)  # controlled shutdown, KRaft, unfenced
            assert kraft.follower is not None and kraft.epoch >= 0 and not kraft.fenced_by_controller
            followers.append(kraft.follower)
            at = equal_to_controller(service, followers)
            assert at is not None, [f.errors for f in followers]
            assert all(f.applied_offset == at - 1 for f in followers)
            image = service.image
            assert not image.brokers[broker_id].is_migrating_zk_broker
            migrating = {b for b, reg in image.brokers.items() if reg.is_migrating_zk_broker}
            assert migrating == set(ids[n + 1 :])  # ZooKeeper-mode and KRaft brokers side by side
        # the same roll with `zk2kraft fixtures simulate-brokers --kraft-brokers` (a real process): the
        # last broker restarts once more, now run by the command, and says what its cache holds
        last = sim.brokers[ids[-1]]
        controlled_shutdown(last, time.monotonic() + 30)
        last.close()
        proc = subprocess.Popen(
            [*ZK2KRAFT, "fixtures", "simulate-brokers", "-z", zk_connect, "--controller", running.connect,
             "--brokers", str(ids[-1]), "--kraft-brokers", str(ids[-1])],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
            line = proc.stdout.readline()
            assert line.startswith(f"broker {ids[-1]} (KRaft): unfenced") and "topics" in line, line
            assert running.wait_until(lambda _r: not service.image.brokers[ids[-1]].fenced, 30)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        sim.stop()
        running.stop()
        result = commands.finalize(zk_connect, str(tmp_path / "meta"), yes=True)
        assert result.state_after == "MigrationFinalized", result
        report = handover.check(tmp_path / "meta")  # the directory Kafka's own controller starts from
        assert report.ok, report.findings


def test_after_an_aborted_copy_is_redone_a_kraft_broker_never_sees_it(zk, zk_connect, tmp_path) -> None:
    """Kafka's MetadataBatchLoader would keep an aborted copy's records; a fetcher from offset 0 gets the
    snapshot at the redone copy's commit instead, and its cache equals the controller's and ZooKeeper's."""
    import signal

    from migrate_helpers import assert_consistent, cluster, run_cli
    from test_crash import assert_aborted_copy_gone

    from migrator.kraft.log import MetadataLog
    from zk_fixtures.kraft_broker import MetadataFollower

    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect) as generated:
        args = ["migrate", "--yes", "--brokers-from-zk", "-z", zk_connect, "-l", str(log_dir)]
        r = run_cli(args, env={"ZK2KRAFT_CRASH_AT": "copy.batch:1"})
        assert r.returncode == -signal.SIGKILL, r.stderr[-800:]
        with MetadataLog.open(log_dir) as log:
            aborted_end = log.end_offset
        running = commands.start_controller(
            zk_connect, str(log_dir), listen="127.0.0.1:0", yes=True, broker_wait_timeout=60
        )
        sim = simulated_brokers(running.address, zk_connect, generated)
        follower = None
        try:
            sim.start()
            service = running.service
            assert service is not None
            assert running.wait_until(lambda _r: not service.soft_start, 90), running.error
            assert service.flush(20)
            follower = MetadataFollower(running.address, replica_id=100)
            follower.catch_up()
            assert follower.snapshots_loaded == 1 and follower.snapshot is not None
            assert follower.snapshot[0] > aborted_end
            assert all(o >= follower.snapshot[0] for o, _e, _r in follower.records)
            assert follower.cache().model_dump(exclude={"cluster_id"}) == service.image.model_dump(
                exclude={"cluster_id"}
            )
        finally:
            if follower is not None:
                follower.stop()
            sim.stop()
            running.stop()
        assert_aborted_copy_gone(log_dir, aborted_end)
        assert_consistent(zk, log_dir)
