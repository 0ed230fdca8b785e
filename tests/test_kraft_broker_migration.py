"""Phase 3 over TCP: a simulated broker restarted in KRaft mode, next to ZooKeeper-mode brokers, follows
the migration controller's metadata log and holds the controller's image."""

from __future__ import annotations

import time

import pytest
from test_broker_sim import migrated

from zk_fixtures.kraft_broker import KraftSimBroker

pytestmark = [pytest.mark.zk, pytest.mark.slow]


def comparable(image) -> dict:
    # cluster id: from meta.properties, not the log; broker registrations change with every fence
    return image.model_dump(exclude={"cluster_id", "brokers"})


def test_a_broker_restarted_in_kraft_mode_follows_the_log(zk, zk_connect, tmp_path) -> None:
    with migrated(zk, zk_connect, tmp_path) as (running, sim, ids, _):
        service = running.service
        assert service is not None
        zk.delete(f"/brokers/ids/{ids[0]}")  # the ZooKeeper-mode broker stops: its ephemeral znode goes
        with sim._lock:
            kraft = KraftSimBroker.restarted_from(sim.brokers[ids[0]])
            sim.brokers[ids[0]] = kraft  # the simulator's heartbeat loop registers it again
        assert running.wait_until(lambda r: kraft.epoch >= 0, 60), (kraft.register(), kraft.errors)
        follower = kraft.follow(max_wait_ms=500)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if follower.fetch_offset >= service.log.end_offset and comparable(follower.cache()) == comparable(
                service.image
            ):
                break
            time.sleep(0.05)
        assert comparable(follower.cache()) == comparable(service.image), follower.errors
        assert set(follower.cache().brokers) == set(service.image.brokers)
        # the controller registered it as a KRaft broker: no longer migrating
        reg = service.image.brokers[ids[0]]
        assert not getattr(reg, "is_migrating_zk_broker", False)
