"""An aborted copy redone under a soft-started controller: brokers register between the abort and the
redo, and still no Kafka reader of the log can see a record of the aborted copy (issue 15)."""

from __future__ import annotations

import signal
import uuid
from collections import Counter
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import assert_consistent, cluster, run_cli
from test_crash import assert_aborted_copy_gone

from migrator import commands
from migrator.controller import core
from migrator.controller.network.listener_runtime import IN_PROCESS
from migrator.controller.protocol import kafka_errors as E
from migrator.kraft.image import ImageBuilder
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import uuid_to_kafka
from migrator.kraft.snapshot import list_snapshots, read_snapshot
from migrator.zk import paths as P

pytestmark = pytest.mark.zk


def test_a_restart_after_a_mid_copy_kill_replays_each_record_once(
    zk: KazooClient, zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29: the interrupted copy was replayed six times by the next run (a read-only and a
    writable open each replayed it twice, betting on a commit, and the purge's snapshot twice more
    from offset 0). Counted at ImageBuilder.replay, every replay of the run goes through it."""
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        args = ["migrate", "--yes", "--brokers-from-zk", "-z", zk_connect, "-l", str(log_dir)]
        r = run_cli(args, env={"ZK2KRAFT_CRASH_AT": "copy.batch:1"})
        assert r.returncode == -signal.SIGKILL, r.stderr[-800:]
        with MetadataLog.open(log_dir) as log:
            crashed_end = log.end_offset
        replayed: Counter[int] = Counter()
        real_replay = ImageBuilder.replay

        def counted(self: ImageBuilder, offset: int, rec: object) -> None:
            replayed[offset] += 1
            real_replay(self, offset, rec)  # type: ignore[arg-type]

        monkeypatch.setattr(ImageBuilder, "replay", counted)
        result = commands.migrate(zk_connect, str(log_dir), yes=True, brokers_from_zk=True)
        monkeypatch.undo()
        assert result.state_after == "DualWriteMetadata" and result.aborted_transaction is not None
        again = {o: n for o, n in replayed.items() if o < crashed_end and n > 1}
        assert not again, f"replayed more than once (offset: times): {again}"
        assert sum(1 for o in replayed if o < crashed_end) > 10  # the interrupted copy was read
        assert_aborted_copy_gone(log_dir, crashed_end)
        assert_consistent(zk, log_dir)


def test_soft_start_registrations_after_an_abort_land_in_the_snapshot(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        args = ["migrate", "--yes", "--brokers-from-zk", "-z", zk_connect, "-l", str(log_dir)]
        r = run_cli(args, env={"ZK2KRAFT_CRASH_AT": "copy.batch:1"})
        assert r.returncode == -signal.SIGKILL, r.stderr[-800:]
        with MetadataLog.open(log_dir) as log:
            aborted_end = log.end_offset
            assert log.load_image().result.open_transaction is not None
        brokers = sorted(int(b) for b in zk.get_children(P.BROKER_IDS))
        running = commands.start_controller(
            zk_connect,
            str(log_dir),
            listen=IN_PROCESS,
            yes=True,
            broker_wait_timeout=60,
            session_timeout_ms=60_000,
        )
        try:
            service = running.service
            assert service is not None and service.soft_start
            for b in brokers:  # registered after the abort, before the redo (soft start)
                reply = service.register(
                    core.Registration(
                        b,
                        service.core.config.cluster_id,
                        uuid_to_kafka(uuid.uuid4()),
                        (core.Listener("PLAINTEXT", f"b{b}", 9092),),
                        {"metadata.version": (1, 21)},
                        is_migrating_zk_broker=True,
                    )
                )
                assert reply.error == E.NONE, reply
            assert running.wait_until(lambda _r: not service.soft_start, 60), running.error
        finally:
            result = running.stop()
        assert result is not None and result.state_after == "DualWriteMetadata", result
        t = result.timings  # with --listen the window ends at the activation (issue 29)
        assert t["dark_window"] >= t["activation"] and t["dark_window"] >= t["reconcile"]
        assert_aborted_copy_gone(log_dir, aborted_end)
        with MetadataLog.open(log_dir) as log:
            snaps = list_snapshots(log.partition_dir)
            snap = snaps[0]
            assert snap.end_offset == log.log_start_offset
            assert result.manifest is not None and snaps[-1].end_offset == result.manifest.last_offset + 1
            image = log.load_image().result.image
        registered = [r for _o, r in read_snapshot(snap.path).records if r.name == "RegisterBrokerRecord"]
        assert sorted(r.fields["BrokerId"] for r in registered) == brokers  # type: ignore[union-attr]
        assert sorted(image.brokers) == brokers
        assert_consistent(zk, log_dir)
