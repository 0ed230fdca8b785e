"""Phase 3 over TCP: simulated brokers restarted one by one in KRaft mode, next to ZooKeeper-mode
brokers, follow the migration controller's metadata log and hold the controller's image; once every
broker is a KRaft broker, finalize succeeds."""

from __future__ import annotations

import time

import pytest
from test_broker_sim import migrated

from migrator import commands
from zk_fixtures.kraft_broker import KraftSimBroker

pytestmark = [pytest.mark.zk, pytest.mark.slow]


def comparable(image) -> dict:
    # cluster id: from meta.properties, not the log; broker registrations change with every fence
    return image.model_dump(exclude={"cluster_id", "brokers"})


def test_brokers_restarted_in_kraft_mode_follow_the_log_then_finalize(zk, zk_connect, tmp_path) -> None:
    with migrated(zk, zk_connect, tmp_path) as (running, sim, ids, _):
        service = running.service
        assert service is not None
        followers = []
        for n, broker_id in enumerate(ids):
            zk.delete(
                f"/brokers/ids/{broker_id}"
            )  # the ZooKeeper-mode broker stops: its ephemeral znode goes
            with sim._lock:
                kraft = KraftSimBroker.restarted_from(sim.brokers[broker_id])
                sim.brokers[broker_id] = kraft  # the simulator's heartbeat loop registers it again
            assert running.wait_until(lambda r, k=kraft: k.epoch >= 0, 60), (kraft.register(), kraft.errors)
            followers.append(kraft.follow(max_wait_ms=500))
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                want = (service.log.end_offset, comparable(service.image))
                if all((f.fetch_offset, comparable(f.cache())) == want for f in followers):
                    break
                time.sleep(0.05)
            for f in followers:
                assert comparable(f.cache()) == comparable(service.image), f.errors
                assert set(f.cache().brokers) == set(service.image.brokers)
            image = service.image
            assert not image.brokers[broker_id].is_migrating_zk_broker
            migrating = {b for b, reg in image.brokers.items() if reg.is_migrating_zk_broker}
            assert migrating <= set(ids[n + 1 :])  # the ones not yet restarted may still be ZK-mode
        sim.stop()
        running.stop()
        result = commands.finalize(zk_connect, str(tmp_path / "meta"), yes=True)
        assert result.state_after == "MigrationFinalized", result
