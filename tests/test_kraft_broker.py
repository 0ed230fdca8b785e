"""KRaft-mode simulated brokers follow the controller's metadata log over Kafka's Raft protocol."""

from __future__ import annotations

import time

import pytest
from test_raft_leader import CLUSTER, NO_RETENTION, NODE, Handler, configs, leader  # noqa: F401 - the fixture

from migrator.controller.network.listener_runtime import start_server
from migrator.kraft.image import replay
from migrator.kraft.log import MetadataLog
from migrator.kraft.retention import snapshot_now
from zk_fixtures.kraft_broker import KraftSimBroker, MetadataFollower
from zk_fixtures.simulated_broker import SimBroker


def leader_image(log: MetadataLog) -> dict:
    """The controller's image, as the directory loads it (snapshot + log), without the cluster id:
    that comes from meta.properties, which a broker has from its own configuration, not from the log."""
    return log.load_image().result.image.model_dump(exclude={"cluster_id"})


def cache_of(f: MetadataFollower) -> dict:
    return f.cache().model_dump(exclude={"cluster_id"})


def wait_until(pred, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.005)
    return pred()


def test_a_follower_from_offset_zero_has_the_leaders_image(leader) -> None:  # noqa: F811
    log, _, address = leader
    f = MetadataFollower(address, replica_id=7, max_bytes=4096)
    try:
        f.catch_up()
        assert f.fetch_offset == log.end_offset and f.snapshots_loaded == 0
        assert f.cache() == replay((o, r) for o, _e, r in log.read(0)).image
        assert cache_of(f) == leader_image(log)
    finally:
        f.stop()


def test_a_follower_behind_the_log_start_loads_the_snapshot(leader) -> None:  # noqa: F811
    log, _, address = leader
    end = snapshot_now(log)
    log.append(configs(99), 1)
    log.advance_start(end)
    f = MetadataFollower(address, replica_id=8, max_bytes=1000)
    try:
        f.catch_up()
        assert f.snapshots_loaded == 1 and f.snapshot is not None and f.snapshot[0] == end
        assert f.fetch_offset == log.end_offset
        assert cache_of(f) == leader_image(log)
    finally:
        f.stop()


def test_a_diverged_follower_truncates_and_converges(leader) -> None:  # noqa: F811
    log, handler, address = leader
    f = MetadataFollower(address, replica_id=9)
    try:
        f.catch_up()
        end1 = log.end_offset
        # records this follower took from a leader of epoch 2 that never committed them
        f.records += [(end1 + i, 2, r) for i, r in enumerate(configs(500, 3))]
        f._end = (end1 + 3, 2)  # its local log now ends in epoch 2
        handler.epoch = 3
        log.append(configs(60), 3)
        f.leader_epoch = 3
        f.catch_up()
        assert f.truncations == 1
        assert [o for o, _e, _r in f.records] == [o for o, _e, _r in log.read(0)]
        assert cache_of(f) == leader_image(log)
    finally:
        f.stop()


@pytest.fixture
def leader_server(tmp_path):
    """The `leader` fixture's log and listener, with the server itself: its parked fetches are visible."""
    log = MetadataLog.open(
        tmp_path,
        writable=True,
        cluster_id=CLUSTER,
        node_id=NODE,
        segment_bytes=16 << 10,
        retention=NO_RETENTION,
    )
    for i in range(5):
        log.append(configs(i), 1)
    server = start_server(Handler(log, 1), "127.0.0.1:0")
    try:
        yield log, server
    finally:
        server.stop()
        log.close()


def polls_waiting(running) -> int:
    """Fetches parked at the leader (its listener's long-poll thread)."""
    polls = running.server.long_polls
    return 0 if polls is None else polls.waiting


#: a long poll's MaxWaitMs far beyond the hang guard: an answer within the guard is the append's wake-up
_NEVER_MS = 600_000
_HANG_GUARD_S = 60.0


def test_a_long_polling_broker_is_woken_by_each_append(leader_server) -> None:
    """Each append answers the parked fetch at once: with a MaxWaitMs of ten minutes, the follower can
    only see the new records within the guard if the append woke its poll. How quickly is measured by
    bench/raft_fetch.py (the long-poll lag), not decided here."""
    log, server = leader_server
    f = MetadataFollower(server.address, replica_id=10, max_wait_ms=_NEVER_MS)
    try:
        f.catch_up()
        f.start()
        for i in range(5):
            assert wait_until(lambda: polls_waiting(server) == 1)
            log.append(configs(1000 + i, 1), 1)
            assert wait_until(lambda: f.high_watermark == log.end_offset, timeout=_HANG_GUARD_S)
        assert wait_until(lambda: f.fetch_offset == log.end_offset)
        assert cache_of(f) == leader_image(log)
    finally:
        f.stop()


def test_a_kraft_broker_registers_without_the_migration_flag() -> None:
    zk_mode = SimBroker(broker_id=1, controller=("127.0.0.1", 1), cluster_id="c", rack="r1")
    assert zk_mode.registration().is_migrating_zk_broker
    kraft = KraftSimBroker.restarted_from(zk_mode)
    reg = kraft.registration()
    assert not reg.is_migrating_zk_broker and reg.broker_id == 1 and reg.rack == "r1"
    assert reg.log_dirs == zk_mode.registration().log_dirs and kraft.incarnation_id != zk_mode.incarnation_id
    assert NODE != kraft.broker_id
