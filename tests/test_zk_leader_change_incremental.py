"""A controlled shutdown reaches the ZooKeeper-mode brokers as incremental requests, and stays done.

bench/kafka_side_by_side.py measured 41 s (Kafka's controller: 7.7 s) at 20,000 partitions for another
ZK-mode broker to learn a leader change from a controlled shutdown. The simulated broker kept
heartbeating after the controller told it to shut down, without wantShutDown (its heartbeat round went
on), so the controller unfenced it as Kafka's does a FENCED broker that heartbeats (BrokerHeartbeatManager:
a fence ends the controlled shutdown): it got the full state again (UpdateMetadata of every partition,
LeaderAndIsr of every replica), and each fence and unfence sent every other broker an UpdateMetadata of
every partition it hosts. Kafka's broker does not do that: its BrokerLifecycleManager asks wantShutDown
on every heartbeat of PENDING_CONTROLLED_SHUTDOWN and, told shouldShutDown, shuts its queue down and sends
nothing more; it comes back only with a new registration. The simulator now does the same.

Checked by what the brokers receive, not by a stopwatch (timing is the bench's): on a cluster of a few
thousand partitions, the other broker learns the new leader from an INCREMENTAL LeaderAndIsr, and
after the shutdown no broker receives a FULL request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from migrate_helpers import SPEC, simulated_brokers
from test_zk_broker_rpcs import converged
from test_zk_broker_triggers import (
    active,
    cached,
    image_partitions,
    leader_and_isr_partitions,
    start_controller,
    update_metadata_partitions,
)

from migrator.controller.zk_brokers.zk_broker_channel import wait_until
from migrator.metrics import MigrationMetrics
from zk_fixtures.brokers import BrokerSessions
from zk_fixtures.generator import load_cluster
from zk_fixtures.simulated_broker import SHUTTING_DOWN

pytestmark = [pytest.mark.zk]

Key = tuple[str, int]

#: 6 brokers, 2,900 partitions (one topic of the 30 pending deletion): enough for the fan-out to matter
SPEC_6 = SPEC.model_copy(update={"brokers": 6, "topics": 30, "partitions": 100})
INCREMENTAL, FULL = 1, 2  # AbstractControlRequest.Type


@contextmanager
def running_cluster(zk: KazooClient, zk_connect: str, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    generated = load_cluster(zk, SPEC_6)
    sessions = BrokerSessions(zk_connect, generated.image, generated.control).start()
    log_dir = str(tmp_path / "meta")
    running = sim = None
    try:
        running = start_controller(zk_connect, log_dir, MigrationMetrics(), "127.0.0.1:0")
        sim = simulated_brokers(running.address, zk_connect, generated, own_timeout_s=5.0, inter_broker=True)
        sim.start()
        active(running, log_dir)
        converged(running, sim, timeout=90)
        yield running, sim
    finally:
        if sim is not None:
            sim.stop()
        if running is not None:
            running.stop()
        sessions.close()


def record(cache: Any) -> list[tuple[str, int, Any]]:
    """Every control request `cache`'s broker answers from now on: (name, type, decoded request)."""
    seen: list[tuple[str, int, Any]] = []
    for name in ("leader_and_isr", "update_metadata", "stop_replica"):
        handler = getattr(cache, name)

        def wrapped(version: int, req: Any, handler: Any = handler, name: str = name) -> Any:
            seen.append((name, version, req))
            return handler(version, req)

        setattr(cache, name, wrapped)
    return seen


def test_a_controlled_shutdown_reaches_zk_brokers_incrementally_and_stays_done(zk, zk_connect, tmp_path):
    with running_cluster(zk, zk_connect, tmp_path) as (running, sim):
        service = running.service
        before = image_partitions(service)
        counts: dict[int, int] = {}
        for p in before.values():
            counts[p.leader] = counts.get(p.leader, 0) + 1
        victim = max(counts, key=lambda b: counts[b])
        key, part = next((k, p) for k, p in before.items() if p.leader == victim and len(p.isr) >= 2)
        other = next(r for r in part.isr if r != victim)
        seen = {b: record(cache) for b, cache in sim.caches.items()}

        # As the bench: wantShutDown until the other broker's cache names a new leader.
        def moved() -> bool:
            got = cached(sim.caches[other], key)
            if got is None or got.leader == victim:
                sim.brokers[victim].heartbeat(want_shut_down=True)
                return False
            return True

        assert wait_until(moved, 60), cached(sim.caches[other], key)
        learned = [
            (v, r)
            for name, v, r in seen[other]
            if name == "leader_and_isr" and key in leader_and_isr_partitions(v, r)
        ]
        assert learned and learned[0][1].type == INCREMENTAL, [(v, r.type) for v, r in learned]
        assert len(leader_and_isr_partitions(*learned[0])) < len(before)

        # It leads nothing now: a wantShutDown heartbeat lets it stop (fenced), and it stops talking.
        assert wait_until(lambda: sim.brokers[victim].state == SHUTTING_DOWN, 20), sim.brokers[victim]
        assert service.wait_for(lambda img: img.brokers[victim].fenced, 20)
        # As Kafka's lifecycle manager after shouldShutDown: no heartbeat, whoever asks (the simulator's
        # heartbeat round goes on meanwhile), and the controller keeps it fenced.
        for _ in range(3):
            assert sim.brokers[victim].heartbeat() is None
            time.sleep(sim.interval_s)
        with service.lock:
            assert service.image.brokers[victim].fenced
        assert wait_until(lambda: service.zk_propagator.in_sync(), 60)
        full = {
            b: [(name, v) for name, v, r in requests if getattr(r, "type", INCREMENTAL) == FULL]
            for b, requests in seen.items()
        }
        assert not any(full.values()), full


def delivered(service: Any) -> bool:
    """The propagator has taken the committed image and every channel delivered it."""
    prop = service.zk_propagator
    return prop._offset == service.committed_offset and prop.in_sync()


def leadership(p: Any) -> tuple[Any, ...]:
    return (p.leader, p.leader_epoch, tuple(p.isr), p.partition_epoch, tuple(p.replicas))


def test_a_broker_coming_back_tells_the_others_only_what_changed(zk, zk_connect, tmp_path):
    """Kafka 3.9's MigrationPropagator on a change of brokers: the ZK brokers that did not change get an
    UpdateMetadata naming the live brokers (`addUpdateMetadataRequestForBrokers(oldZkBrokers)`, no
    partition), plus the partitions whose state changed; only the broker that came back gets every
    partition. zk2kraft sent every other broker each partition with a replica on the broker that came
    back (its OfflineReplicas had changed): thousands of partition states to each, for every unfence."""
    with running_cluster(zk, zk_connect, tmp_path) as (running, sim):
        service = running.service
        victim = max(sim.brokers)
        hosted = {k for k, p in image_partitions(service).items() if victim in p.replicas}
        sim.pause()  # no AlterPartition from here (the image changes only by the fence and unfence)
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(0.3):
                sim.heartbeats()

        beats = threading.Thread(target=beat, daemon=True)
        beats.start()
        try:
            sim.brokers[victim].crash()
            assert service.wait_for(lambda img: img.brokers[victim].fenced, 30)
            assert wait_until(lambda: delivered(service), 60)
            before = image_partitions(service)
            seen = {b: record(cache) for b, cache in sim.caches.items() if b != victim}
            assert sim.restart(victim, empty_disk=False) == 0
            assert service.wait_for(lambda img: not img.brokers[victim].fenced, 30)
            assert wait_until(lambda: delivered(service), 60)
            after = image_partitions(service)
        finally:
            stop.set()
            beats.join(10)
        changed = {k for k, p in after.items() if k not in before or leadership(before[k]) != leadership(p)}
        for b, requests in seen.items():
            ums = [(v, r) for name, v, r in requests if name == "update_metadata"]
            assert ums and victim in {int(x.id) for x in ums[-1][1].live_brokers}, b  # it learned the broker
            told: set[Key] = set().union(*(update_metadata_partitions(v, r) for v, r in ums))
            assert told <= changed, (b, len(told - changed), len(hosted))
