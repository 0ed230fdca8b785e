"""ZooKeeper-mode brokers follow the controller over TCP: UpdateMetadata, LeaderAndIsr, StopReplica.

The real controller (`migrate --follow --listen`) on a real ZooKeeper, its brokers simulated with an
inter-broker listener each (zk_fixtures.zk_broker_server): after activation, after an election on
fencing, after AlterPartitions, after a broker's restart (a new broker epoch: a full resend), a topic's
creation and deletion, and a reassignment that moves a partition off its leader, every
live broker's metadata cache equals the controller's image, and no broker leads a partition the
controller gave to another.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from migrate_helpers import cluster, simulated_brokers
from prometheus_client import generate_latest

from migrator import commands
from migrator.controller.client.client import ControllerClient
from migrator.controller.managers.change import AdminChange
from migrator.controller.zk_brokers.zk_broker_channel import wait_until
from migrator.metrics import MigrationMetrics
from migrator.zk import paths as P
from migrator.zk.codec import decode_controller_epoch
from zk_fixtures.broker_sim import BrokerSimulator
from zk_fixtures.zk_broker_server import CachedPartition

pytestmark = [pytest.mark.zk]

SESSION_MS = 3000


@contextmanager
def controller_and_brokers(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> Iterator[tuple[commands.RunningController, BrokerSimulator, MigrationMetrics]]:
    metrics = MigrationMetrics()
    with cluster(zk, zk_connect) as generated:
        running = commands.start_controller(
            zk_connect,
            str(tmp_path / "meta"),
            listen="127.0.0.1:0",
            yes=True,
            broker_wait_timeout=60,
            session_timeout_ms=SESSION_MS,
            metrics=metrics,
        )
        sim = simulated_brokers(running.address, zk_connect, generated, own_timeout_s=2.0, inter_broker=True)
        try:
            sim.start()
            service = running.service
            assert service is not None
            assert running.wait_until(
                lambda r: not service.soft_start and service.zk_propagator is not None, 90
            ), running.error
            yield running, sim, metrics
        finally:
            sim.stop()
            running.stop()


def differences(
    running: commands.RunningController, sim: BrokerSimulator, skip: frozenset[int] = frozenset()
) -> list[str]:
    """How each live broker's cache and roles differ from the controller's image (empty: none);
    brokers in `skip` are not looked at (one a test keeps from following on purpose)."""
    service = running.service
    assert service is not None
    with service.lock:
        image = service.image
        want = {
            (t.name, p): CachedPartition(
                x.leader, x.leader_epoch, tuple(x.isr), x.partition_epoch, tuple(x.replicas)
            )
            for t in image.topics.values()
            for p, x in t.partitions.items()
        }
        live = {b.id for b in image.brokers.values() if not b.fenced}
    out: list[str] = []
    for bid in sorted((live & set(sim.caches)) - skip):
        cache = sim.caches[bid]
        with cache.lock:
            have = dict(cache.partitions)
            roles = dict(cache.roles)
            known_live = set(cache.live_brokers)
        wrong = [k for k in want.keys() | have.keys() if want.get(k) != have.get(k)]
        if wrong:
            k = sorted(wrong)[0]
            out.append(
                f"broker {bid}: {len(wrong)} partitions differ, e.g. {k}: {have.get(k)} != {want.get(k)}"
            )
        if known_live != live:
            out.append(f"broker {bid}: live brokers {sorted(known_live)} != {sorted(live)}")
        mine = {k for k, s in want.items() if bid in s.replicas}
        if set(roles) != mine:
            out.append(f"broker {bid}: replicates {len(roles)} partitions, the image gives it {len(mine)}")
        for k, (leads, epoch, _) in roles.items():
            s = want.get(k)
            if s is not None and (leads != (s.leader == bid) or epoch != s.leader_epoch):
                out.append(
                    f"broker {bid}: {k} role (leader={leads}, epoch {epoch}) but image leader {s.leader}"
                )
                break
    return out


def converged(
    running: commands.RunningController,
    sim: BrokerSimulator,
    timeout: float = 30.0,
    skip: frozenset[int] = frozenset(),
) -> None:
    last: list[str] = []

    def check() -> bool:
        last[:] = differences(running, sim, skip)
        return not last

    assert wait_until(check, timeout), last


def test_zk_brokers_follow_fencing_alter_partition_restart_create_and_delete(zk, zk_connect, tmp_path):
    with controller_and_brokers(zk, zk_connect, tmp_path) as (running, sim, prometheus):
        service = running.service
        assert service is not None
        # Activation: every ZK-mode broker got the full state.
        converged(running, sim)
        propagator = service.zk_propagator
        assert propagator is not None
        assert sorted(propagator.channels) == sorted(sim.brokers)
        # Every request carries the controller epoch the claim wrote to /controller_epoch (not only
        # some epoch): the brokers' caches record exactly ZooKeeper's value.
        zk_epoch = decode_controller_epoch(P.CONTROLLER_EPOCH, zk.get(P.CONTROLLER_EPOCH)[0])
        assert propagator.controller_epoch == zk_epoch
        for cache in sim.caches.values():
            assert cache.controller_epoch == zk_epoch, (cache.broker_id, cache.controller_epoch, zk_epoch)
            assert cache.controller_id == service.core.config.node_id

        # Fencing: a crashed broker's leaderships move; every other broker learns the new leaders.
        image = service.image
        victim = next(
            p.leader for t in image.topics.values() for p in t.partitions.values() if len(p.replicas) >= 2
        )
        led_before = {
            (t.name, n) for t in image.topics.values() for n, p in t.partitions.items() if p.leader == victim
        }
        sim.brokers[victim].crash()
        assert service.wait_for(lambda img: img.brokers[victim].fenced, 20)
        converged(running, sim)
        for bid, cache in sim.caches.items():
            if bid != victim:
                assert not cache.leads() & {
                    k for k in led_before if service.image.topics[k[0]].partitions[k[1]].leader != bid
                }
        assert victim not in propagator.channels  # a fenced broker has no channel

        # Restart with an empty disk: a new broker epoch, the full state again, and the leaders'
        # AlterPartitions taking it back into the ISRs reach every broker.
        alter_before = service.stats.requests.get("AlterPartition", 0)
        assert sim.restart(victim) == 0
        assert service.wait_for(
            lambda img: (
                not img.brokers[victim].fenced
                and any(
                    victim in p.isr
                    for t in img.topics.values()
                    for p in t.partitions.values()
                    if p.leader != victim
                )
            ),
            30,
        )
        converged(running, sim)
        assert service.stats.requests.get("AlterPartition", 0) > alter_before
        assert sim.caches[victim].partitions  # the restarted broker learned everything again

        # A topic created, then deleted, through the admin path: LeaderAndIsr to its replicas, then
        # StopReplica(delete) to them and UpdateMetadata(leader -2) to everyone.
        log_dir = str(tmp_path / "meta")
        commands.admin(
            zk_connect,
            log_dir,
            AdminChange(kind="create-topic", topic="zk-rpc", partitions=3, replication_factor=2),
        )
        converged(running, sim)
        assert sum(1 for c in sim.caches.values() for k in c.roles if k[0] == "zk-rpc") == 6
        commands.admin(zk_connect, log_dir, AdminChange(kind="delete-topic", topic="zk-rpc"))
        converged(running, sim)
        for cache in sim.caches.values():
            assert not any(k[0] == "zk-rpc" for k in (*cache.roles, *cache.partitions))
        assert sum(c.requests.get("StopReplica", 0) for c in sim.caches.values()) >= 2
        assert all(s.stopped is None for s in propagator.status())

        # A reassignment moves a partition away from its leader: the records Kafka's
        # ReplicationControlManager commits (target + removing replicas with Adding/RemovingReplicas,
        # then, once the added replica is in the ISR, the target alone with a new leader) reach every
        # broker; the removed replica gets StopReplica(delete) and leads nothing it lost.
        stops_before = {b: c.requests.get("StopReplica", 0) for b, c in sim.caches.items()}
        key, moved_from, added = reassign(service, sim, running.address)
        converged(running, sim)
        assert not sim.caches[moved_from].replicates(key)
        assert key not in sim.caches[moved_from].leads()
        assert sim.caches[moved_from].requests.get("StopReplica", 0) > stops_before[moved_from]
        assert sim.caches[added].replicates(key)
        assert all(s.stopped is None for s in propagator.status())

        # status and the Prometheus endpoint show each channel: connected, nothing queued, acknowledged
        # up to the offset the controller last propagated.
        offset = propagator._offset
        assert wait_until(propagator.in_sync, 10)

        def reported() -> list[dict] | None:
            rows = commands.status(zk_connect, log_dir).zk_broker_channels
            return rows if rows and all(r.get("acked_offset") == offset for r in rows) else None

        assert wait_until(lambda: reported() is not None, 10), commands.status(
            zk_connect, log_dir
        ).zk_broker_channels
        rows = reported()
        assert rows is not None and sorted(r["broker_id"] for r in rows) == sorted(sim.brokers)
        assert all(r["connected"] and r["queued"] == 0 and r["stopped"] is None for r in rows)
        metrics = generate_latest(prometheus.registry).decode()
        for bid in sim.brokers:
            assert f'zk2kraft_zk_broker_channel_connected{{broker_id="{bid}"}} 1.0' in metrics
            assert f'zk2kraft_zk_broker_channel_acked_offset{{broker_id="{bid}"}} {float(offset)}' in metrics
        assert "kafka_controller_ControllerChannelManager_TotalQueueSize 0.0" in metrics


def reassign(
    service: Any, sim: BrokerSimulator, address: tuple[str, int]
) -> tuple[tuple[str, int], int, int]:
    """Moves a partition off its leader `a` to a broker `c` that held none of it with
    AlterPartitionReassignments over the listener; the leader's AlterPartition completes the move once
    `c` is in the ISR (Kafka's two PartitionChangeRecords). Returns (partition, a, c)."""
    from kio.schema.alter_partition_reassignments.v0 import request as apr

    with service.lock:
        image = service.image
        live = sorted(b.id for b in image.brokers.values() if not b.fenced)
        topic, p, part = next(
            (t, n, x)
            for t in image.topics.values()
            for n, x in sorted(t.partitions.items())
            if len(x.replicas) >= 2 and x.leader in x.isr and set(live) - set(x.replicas)
        )
        a = part.leader
        c = min(set(live) - set(part.replicas))
        target = [c, *(r for r in part.replicas if r != a)]

    move = apr.AlterPartitionReassignmentsRequest(
        topics=(
            apr.ReassignableTopic(
                name=topic.name,
                partitions=(apr.ReassignablePartition(partition_index=p, replicas=tuple(target)),),
            ),
        )
    )
    with ControllerClient(*address, timeout_s=30) as client:
        answer = client.call(45, 0, move)
    assert [int(x.error_code) for t in answer.responses for x in t.partitions] == [0], answer
    # The added replica learns it from LeaderAndIsr, fetches, and its leader adds it to the ISR: that
    # AlterPartition completes the move (replicas = target, the removed leader replaced).
    assert service.wait_for(
        lambda img: (
            img.topics[topic.name].partitions[p].replicas == target
            and not img.topics[topic.name].partitions[p].adding_replicas
        ),
        30,
    ), (
        sim.refusals,
        sim.partitions.get((topic.name, p)),
        service.image.topics[topic.name].partitions[p],
        sim.caches[c].roles.get((topic.name, p)),
        sim.caches[a].roles.get((topic.name, p)),
    )
    return (topic.name, p), a, c
