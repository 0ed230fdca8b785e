"""What makes the controller talk to ZooKeeper-mode brokers, one trigger at a time, over TCP.

The real controller (`migrate --follow --listen`) on a real ZooKeeper, its brokers the simulator's
ZK-mode brokers (zk_fixtures.zk_broker_server behind each): a controlled shutdown and an
AlterReplicaState (KIP-589) move leaders and every broker's cache learns it; a topic deletion sends
StopReplica(delete) to each old replica; a restarted controller resends everything with its new
controller epoch and the brokers then refuse the old one; a ZK broker registering under a KRaft broker's
id is fenced (gets nothing) and reported; and one broker answering garbage, closing mid-response or never
answering holds no other broker back, is retried, and shows in `status` and on the Prometheus endpoint.
test_zk_broker_rpcs.py covers fencing, AlterPartition, a restart, create/delete and a reassignment.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from migrate_helpers import SPEC, run_cli, simulated_brokers
from prometheus_client import generate_latest
from test_zk_broker_channel import Flaky
from test_zk_broker_rpcs import SESSION_MS, converged

from migrator import commands
from migrator.controller.client.client import ControllerClient
from migrator.controller.follower import read_follower
from migrator.controller.managers.change import AdminChange
from migrator.controller.network.listener_config import set_default_properties
from migrator.controller.protocol import messages as M
from migrator.controller.zk_brokers import zk_broker_messages as Z
from migrator.controller.zk_brokers.zk_broker_channel import BrokerChannel, ZkBrokerTarget, wait_until
from migrator.controller.zk_brokers.zk_broker_requests import Header, Item
from migrator.metrics import MigrationMetrics
from migrator.model import Broker, Endpoint
from migrator.zk import paths as P
from migrator.zk.codec import decode_controller_epoch, encode_broker
from migrator.zk.connection import close, connect
from zk_fixtures.broker_sim import BrokerSimulator
from zk_fixtures.brokers import BrokerSessions
from zk_fixtures.generator import GeneratedCluster, load_cluster
from zk_fixtures.kraft_broker import restart_in_kraft_mode
from zk_fixtures.simulated_broker import DUPLICATE_BROKER_REGISTRATION, SimBroker
from zk_fixtures.zk_broker_server import ZkBrokerCache, ZkBrokerServer

pytestmark = [pytest.mark.zk]

Key = tuple[str, int]


@dataclass
class Cluster:
    """A running controller, its simulated ZK-mode brokers and their ZooKeeper sessions."""

    running: commands.RunningController
    sim: BrokerSimulator
    metrics: MigrationMetrics
    sessions: BrokerSessions
    generated: GeneratedCluster
    zk_connect: str
    log_dir: str
    extra: list[Any] = field(default_factory=list)  # stopped or closed at the end (servers, sessions)

    @property
    def service(self) -> Any:
        assert self.running.service is not None
        return self.running.service

    @property
    def propagator(self) -> Any:
        assert self.service.zk_propagator is not None
        return self.service.zk_propagator


def start_controller(
    zk_connect: str, log_dir: str, metrics: MigrationMetrics, listen: str
) -> commands.RunningController:
    running = commands.start_controller(
        zk_connect,
        log_dir,
        listen=listen,
        yes=True,
        broker_wait_timeout=60,
        session_timeout_ms=SESSION_MS,
        metrics=metrics,
    )
    assert running.service is not None
    return running


def active(running: commands.RunningController, log_dir: str) -> None:
    """Until the controller serves in full: activated, propagating, and announcing its listener (the
    follow loop's start, where `zk2kraft admin` finds it)."""
    service = running.service
    assert service is not None
    assert running.wait_until(
        lambda r: (
            not service.soft_start
            and service.zk_propagator is not None
            and bool((f := read_follower(log_dir)) and f.pid == os.getpid() and f.listeners)
        ),
        90,
    ), running.error


@contextmanager
def cluster_running(zk: KazooClient, zk_connect: str, tmp_path: Path) -> Iterator[Cluster]:
    generated = load_cluster(zk, SPEC)
    sessions = BrokerSessions(zk_connect, generated.image, generated.control).start()
    metrics = MigrationMetrics()
    log_dir = str(tmp_path / "meta")
    running: commands.RunningController | None = None
    sim: BrokerSimulator | None = None
    c: Cluster | None = None
    try:
        running = start_controller(zk_connect, log_dir, metrics, "127.0.0.1:0")
        sim = simulated_brokers(running.address, zk_connect, generated, own_timeout_s=2.0, inter_broker=True)
        sim.start()
        active(running, log_dir)
        c = Cluster(running, sim, metrics, sessions, generated, zk_connect, log_dir)
        converged(running, sim)
        yield c
    finally:
        if sim is not None:
            sim.stop()
        for x in c.extra if c is not None else ():
            if isinstance(x, KazooClient):
                close(x)  # its ephemeral znodes go with it
            else:
                x.stop()
        end = c.running if c is not None else running
        if end is not None:
            end.stop()
        sessions.close()


def record_requests(cache: ZkBrokerCache) -> list[tuple[str, int, Any]]:
    """Every request `cache`'s broker answers from now on: (name, version, decoded request)."""
    seen: list[tuple[str, int, Any]] = []
    for name in ("leader_and_isr", "update_metadata", "stop_replica"):
        handler = getattr(cache, name)

        def wrapped(version: int, req: Any, handler: Any = handler, name: str = name) -> Any:
            seen.append((name, version, req))
            return handler(version, req)

        setattr(cache, name, wrapped)
    return seen


def stopped_partitions(version: int, req: Any) -> dict[Key, tuple[int, bool]]:
    """A StopReplica's partitions, each with (leader epoch, -1 before v3; delete?)."""
    if version == 0:
        return {
            (p.topic_name, p.partition_index): (-1, req.delete_partitions) for p in req.ungrouped_partitions
        }
    if version <= 2:
        return {(t.name, p): (-1, req.delete_partitions) for t in req.topics for p in t.partition_indexes}
    return {
        (t.topic_name, p.partition_index): (p.leader_epoch, p.delete_partition)
        for t in req.topic_states
        for p in t.partition_states
    }


def leader_and_isr_partitions(version: int, req: Any) -> dict[Key, Any]:
    if version <= 1:
        return {(s.topic_name, s.partition_index): s for s in req.ungrouped_partition_states}
    return {(t.topic_name, s.partition_index): s for t in req.topic_states for s in t.partition_states}


def update_metadata_partitions(version: int, req: Any) -> dict[Key, Any]:
    if version <= 4:
        return {(s.topic_name, s.partition_index): s for s in req.ungrouped_partition_states}
    return {(t.topic_name, s.partition_index): s for t in req.topic_states for s in t.partition_states}


def image_partitions(service: Any) -> dict[Key, Any]:
    with service.lock:
        return {
            (t.name, n): p.model_copy()
            for t in service.image.topics.values()
            for n, p in t.partitions.items()
        }


def cached(cache: ZkBrokerCache, key: Key) -> Any:
    with cache.lock:
        return cache.partitions.get(key)


# -- 1. the triggers ---------------------------------------------------------------------------------


def test_controlled_shutdown_moves_leaders_and_every_zk_broker_learns_them(zk, zk_connect, tmp_path):
    """A heartbeat with wantShutDown: the broker's led partitions get new leaders at once (it is still
    live, in controlled shutdown), and every broker's cache, its own included, shows them; LeaderAndIsr
    went to each of those partitions' replicas. Once it leads nothing it may stop: fenced, no channel."""
    with cluster_running(zk, zk_connect, tmp_path) as c:
        service, sim = c.service, c.sim
        before = image_partitions(service)
        counts: dict[int, int] = {}
        for p in before.values():
            if len(p.isr) >= 2:
                counts[p.leader] = counts.get(p.leader, 0) + 1
        victim = max(counts, key=lambda b: counts[b])
        led = {k: p for k, p in before.items() if p.leader == victim}
        lai_before = {b: cache.requests.get("LeaderAndIsr", 0) for b, cache in sim.caches.items()}
        seen = {b: record_requests(cache) for b, cache in sim.caches.items()}

        req = M.BrokerHeartbeatRequest(
            victim,
            sim.brokers[victim].epoch,
            current_metadata_offset=sim.brokers[victim].epoch,
            want_shut_down=True,
        )
        with ControllerClient(*c.running.address, timeout_s=10) as client:
            resp = client.heartbeat(req)
        assert resp.error_code == 0 and not resp.should_shut_down and not resp.is_fenced, resp
        assert service.wait_for(
            lambda img: (
                img.brokers[victim].in_controlled_shutdown
                and not img.brokers[victim].fenced
                and not any(p.leader == victim for t in img.topics.values() for p in t.partitions.values())
            ),
            20,
        )
        converged(c.running, sim)  # the stopping broker is still live: its cache is checked too
        after = image_partitions(service)
        moved = {k for k, p in led.items() if after[k].leader not in (victim, -1)}
        assert moved, (led, after)
        for b, cache in sim.caches.items():
            for k in led:
                got = cached(cache, k)
                assert got is not None and got.leader == after[k].leader != victim, (b, k, got)
                assert got.leader_epoch > led[k].leader_epoch
            assert cache.leads() & set(led) == {k for k in led if after[k].leader == b}
            assert victim in cache.live_brokers  # in controlled shutdown, not gone
        # LeaderAndIsr to the replicas of the changed partitions, and to no one else for them.
        for b in sim.caches:
            told = {
                k
                for name, v, r in seen[b]
                if name == "leader_and_isr"
                for k in leader_and_isr_partitions(v, r)
            }
            mine = {k for k in led if b in after[k].replicas}
            assert mine <= told and not (told & set(led)) - mine, (b, sorted(mine), sorted(told & set(led)))
            if mine:
                assert sim.caches[b].requests.get("LeaderAndIsr", 0) > lai_before[b]
        assert victim in c.propagator.channels

        # The broker leads nothing now: the next wantShutDown heartbeat lets it stop (fenced).
        sim.brokers[victim].alive = False  # the simulator's own heartbeats leave it alone
        with ControllerClient(*c.running.address, timeout_s=10) as client:
            assert wait_until(lambda: client.heartbeat(req).should_shut_down, 10)
        assert service.wait_for(lambda img: img.brokers[victim].fenced, 10)
        converged(c.running, sim)
        assert wait_until(lambda: victim not in c.propagator.channels, 10)
        for b, cache in sim.caches.items():
            if b != victim:
                assert victim not in cache.live_brokers


def test_alter_replica_state_offline_replicas_reach_every_zk_broker(zk, zk_connect, tmp_path):
    """KIP-589: a broker's log directory fails; its replicas there go offline, leaders move off it and
    it leaves the ISRs; every broker's cache and the broker's own roles follow."""
    with cluster_running(zk, zk_connect, tmp_path) as c:
        service, sim = c.service, c.sim
        before = image_partitions(service)
        pick = None
        for b, sb in sorted(sim.brokers.items()):
            for index in range(len(sb.dir_ids)):
                lost = {
                    k: p
                    for k, p in before.items()
                    if b in p.replicas and sb.dir_of(k) == index and p.leader == b and len(p.isr) >= 2
                }
                if lost:
                    pick = (b, index)
                    break
            if pick:
                break
        assert pick is not None
        broker_id, index = pick
        failing = sim.brokers[broker_id]
        offline = {k for k, p in before.items() if broker_id in p.replicas and failing.dir_of(k) == index}
        with sim._lock:  # the simulator's round shares the broker's data-plane connection
            resp = failing.lose_log_dir(index, list(sim.refresh().values()))
        assert resp is not None and resp.error_code == 0, resp
        assert all(p.error_code == 0 for t in resp.topics for p in t.partitions), resp

        def moved(img: Any) -> bool:
            parts = {(t.name, n): p for t in img.topics.values() for n, p in t.partitions.items()}
            # (an ISR never shrinks to nothing: a sole member stays, leaderless)
            return all(
                parts[k].leader != broker_id
                and (broker_id not in parts[k].isr or parts[k].isr == [broker_id])
                for k in offline
            )

        assert service.wait_for(moved, 20)
        converged(c.running, sim)
        after = image_partitions(service)
        for b, cache in sim.caches.items():
            for k in offline:
                got = cached(cache, k)
                assert got is not None and got.leader == after[k].leader != broker_id, (b, k, got)
                assert broker_id not in got.isr or got.isr == (broker_id,)
        assert not sim.caches[broker_id].leads() & offline
        assert any(before[k].leader == broker_id for k in offline)
        assert service.image.brokers[broker_id].fenced is False  # only its replicas there went offline


def test_topic_deletion_sends_stop_replica_delete_to_every_old_replica(zk, zk_connect, tmp_path):
    """A topic created then deleted: each old replica gets StopReplica(delete=true, leader epoch -2)
    for its partitions, no other broker any, and every broker's cache drops the topic (leader -2)."""
    with cluster_running(zk, zk_connect, tmp_path) as c:
        service, sim = c.service, c.sim
        commands.admin(
            c.zk_connect,
            c.log_dir,
            AdminChange(kind="create-topic", topic="doomed", partitions=4, replication_factor=2),
        )
        converged(c.running, sim)
        replicas = {k: set(p.replicas) for k, p in image_partitions(service).items() if k[0] == "doomed"}
        assert len(replicas) == 4
        seen = {b: record_requests(cache) for b, cache in sim.caches.items()}
        commands.admin(c.zk_connect, c.log_dir, AdminChange(kind="delete-topic", topic="doomed"))
        converged(c.running, sim)
        for b, cache in sim.caches.items():
            stops: dict[Key, tuple[int, bool]] = {}
            for name, v, r in seen[b]:
                if name == "stop_replica":
                    stops.update({k: s for k, s in stopped_partitions(v, r).items() if k[0] == "doomed"})
                    assert v < 3 or all(e == -2 for k, (e, _) in stopped_partitions(v, r).items())
            mine = {k for k, rs in replicas.items() if b in rs}
            assert set(stops) == mine, (b, sorted(stops), sorted(mine))
            assert all(delete for _, delete in stops.values()), (b, stops)  # v3+: epoch -2 (above)
            assert not any(k[0] == "doomed" for k in (*cache.roles, *cache.partitions))
            deleted = {
                k
                for name, v, r in seen[b]
                if name == "update_metadata"
                for k, s in update_metadata_partitions(v, r).items()
                if s.leader == -2
            }
            assert set(replicas) <= deleted, (b, deleted)  # every broker, replica or not


# -- 2./3. re-activation and the claim's epoch ---------------------------------------------------------


def test_a_restarted_controller_resends_everything_with_its_new_epoch(zk, zk_connect, tmp_path):
    """The controller stops and a new one starts on the same log (a restart): it claims again with a
    higher /controller_epoch and sends every ZK broker the full UpdateMetadata and LeaderAndIsr with it;
    the caches equal the image after, and a request still carrying the old epoch is refused as stale."""
    with cluster_running(zk, zk_connect, tmp_path) as c:
        sim = c.sim
        old_epoch = decode_controller_epoch(P.CONTROLLER_EPOCH, zk.get(P.CONTROLLER_EPOCH)[0])
        assert all(cache.controller_epoch == old_epoch for cache in sim.caches.values())
        seen = {b: record_requests(cache) for b, cache in sim.caches.items()}
        port = c.running.address[1]
        c.running.stop()
        c.running = start_controller(c.zk_connect, c.log_dir, MigrationMetrics(), f"127.0.0.1:{port}")
        active(c.running, c.log_dir)
        new_epoch = decode_controller_epoch(P.CONTROLLER_EPOCH, zk.get(P.CONTROLLER_EPOCH)[0])
        assert new_epoch > old_epoch and c.propagator.controller_epoch == new_epoch
        converged(c.running, sim)
        image = image_partitions(c.service)
        for b, cache in sim.caches.items():
            assert cache.controller_epoch == new_epoch
            fulls = {
                name
                for name, v, r in seen[b]
                if r.controller_epoch == new_epoch and getattr(r, "type", None) == Z.TYPE_FULL
            }
            assert fulls == {"update_metadata", "leader_and_isr"}, (b, [(n, v) for n, v, _ in seen[b]])
            v, full_um = next(
                (v, r) for n, v, r in seen[b] if n == "update_metadata" and r.controller_epoch == new_epoch
            )
            assert update_metadata_partitions(v, full_um).keys() == image.keys()
            assert all(r.controller_epoch in (old_epoch, new_epoch) for _, _, r in seen[b])

        # The old controller's epoch is stale now: a channel still speaking with it is refused.
        b = min(sim.caches)
        cache, server = sim.caches[b], sim.servers[b]
        target = ZkBrokerTarget(
            b,
            sim.brokers[b].epoch,
            *server.address,
            {Z.LEADER_AND_ISR: 7, Z.UPDATE_METADATA: 8, Z.STOP_REPLICA: 4},
        )
        node_id = c.service.core.config.node_id
        some = dict(list(c.propagator._snap.parts.items())[:1])

        def full(broker_id: int, install: Any) -> None:
            install([Item(Z.UPDATE_METADATA, partitions=some, live_brokers=(), full=True)], 0)

        refused = cache.refused.get("UpdateMetadata", 0)
        old = BrokerChannel(
            target, lambda t: Header(node_id, old_epoch, t.broker_epoch), full, request_timeout=5
        )
        old.start()
        try:
            assert wait_until(lambda: old.status.stopped is not None, 10), old.status
            assert "STALE_CONTROLLER_EPOCH" in (old.status.last_error or "")
        finally:
            old.stop()
        assert cache.refused.get("UpdateMetadata", 0) == refused + 1
        assert cache.controller_epoch == new_epoch
        converged(c.running, sim)  # the stale full UpdateMetadata changed nothing


# -- 4. the errant ZK broker -------------------------------------------------------------------------


def test_a_zk_broker_registering_under_a_kraft_brokers_id_is_fenced(zk, zk_connect, tmp_path):
    """KIP-866: broker X rolls to KRaft mode; then a ZK-mode broker comes up with id X (it registers in
    /brokers/ids and asks the controller to register). The controller refuses its registration, sends it
    no UpdateMetadata/LeaderAndIsr, names it once and reports it in `status`; the others go on."""
    said: list[str] = []
    with cluster_running(zk, zk_connect, tmp_path) as c:
        service, sim = c.service, c.sim
        c.propagator.say = _tee(c.propagator.say, said)
        x = max(sim.brokers)
        restart_in_kraft_mode(sim, x, c.sessions)
        assert not service.image.brokers[x].is_migrating_zk_broker
        assert wait_until(lambda: x not in c.propagator.channels, 10)
        skip = frozenset({x})  # its old ZK-mode cache stays behind
        converged(c.running, sim, skip=skip)

        # The errant ZK broker: a listener of its own, a ZooKeeper session holding /brokers/ids/X.
        errant = ZkBrokerCache(x, lambda: -1)
        server = ZkBrokerServer(errant).start()
        c.extra.append(server)
        host, port = server.address
        session = connect(c.zk_connect)
        c.extra.append(session)
        reg = Broker(
            id=x,
            endpoints=[Endpoint(listener="PLAINTEXT", host=host, port=port, security_protocol="PLAINTEXT")],
        )
        session.create(P.broker_path(x), encode_broker(reg), ephemeral=True)
        zk_broker = SimBroker(
            x,
            c.running.address,
            c.generated.image.cluster_id or "",
            listeners=[M.Listener("PLAINTEXT", host, port, 0)],
        )
        try:
            assert zk_broker.register() == DUPLICATE_BROKER_REGISTRATION
        finally:
            zk_broker.close()
        assert not service.image.brokers[x].is_migrating_zk_broker  # the KRaft registration stands

        # The controller names it, reports it, and gives it no channel.
        assert wait_until(lambda: x in c.propagator.errant, 15), (
            service.core.zk_broker_ids,
            c.propagator.errant,
        )
        assert sum(f"ZK broker {x}: errant" in s for s in said) == 1, said
        rows = {r["broker_id"]: r for r in c.propagator.status_rows()}
        assert "errant" in rows[x]["last_error"] and not rows[x]["connected"]
        assert wait_until(lambda: _status_row(c, x) is not None, 10)
        assert "errant" in (_status_row(c, x) or {}).get("last_error", "")
        metrics = generate_latest(c.metrics.registry).decode()
        assert f'zk2kraft_zk_broker_channel_connected{{broker_id="{x}"}} 0.0' in metrics

        # The others go on: a broker crashes, leaders move, every ZK-mode broker but X learns it.
        victim = min(b for b in sim.brokers if b != x)
        sim.brokers[victim].crash()
        assert service.wait_for(lambda img: img.brokers[victim].fenced, 20)
        converged(c.running, sim, skip=skip)
        commands.admin(
            c.zk_connect, c.log_dir, AdminChange(kind="create-topic", topic="after-errant", partitions=2)
        )
        converged(c.running, sim, skip=skip)
        assert errant.requests == {} and not errant.partitions and errant.controller_epoch == -1
        assert x not in c.propagator.channels
        assert sum(f"ZK broker {x}: errant" in s for s in said) == 1  # named once, not per round


def _tee(say: Any, into: list[str]) -> Any:
    def both(text: str) -> None:
        into.append(text)
        if say is not None:
            say(text)

    return both


def _status_row(c: Cluster, broker_id: int) -> dict[str, Any] | None:
    rows = commands.status(c.zk_connect, c.log_dir).zk_broker_channels or []
    return next((r for r in rows if r.get("broker_id") == broker_id), None)


# -- 5. a bad broker through the whole controller -------------------------------------------------------


@pytest.mark.parametrize("mode", ["garbage", "close", "silent"])
def test_a_bad_zk_broker_holds_no_other_back_and_is_reported(zk, zk_connect, tmp_path, mode):
    """One broker's inter-broker listener turns bad (garbage answers, closes mid-response, or never
    answers) with the whole controller running: the other brokers' caches still converge after a
    change, the bad broker's channel is retried (errors grow) and `status`, `status --json` and the
    Prometheus endpoint show its last error, queue and lag; healed, it gets the full state again."""
    # A broker that never answers costs a request timeout per attempt (Kafka's 30 s by default):
    # short here, through the controller's own property, so that the retries are seen.
    set_default_properties({"controller.socket.timeout.ms": "1000"})
    try:
        cm = cluster_running(zk, zk_connect, tmp_path)
        c = cm.__enter__()
    finally:
        set_default_properties({})
    with contextlib.ExitStack() as stack:
        stack.push(cm)
        service, sim, prop = c.service, c.sim, c.propagator
        assert prop.request_timeout == 1.0 and all(ch.request_timeout == 1.0 for ch in prop.channels.values())
        bad = min(sim.brokers)
        server = sim.servers[bad]
        server.mode = mode  # type: ignore[attr-defined]
        server.release = threading.Event()  # type: ignore[attr-defined]
        server._serve = types.MethodType(Flaky._serve, server)  # type: ignore[method-assign]
        c.extra.append(types.SimpleNamespace(stop=server.release.set))
        server.drop_connections()  # its next connection is served the bad way
        skip = frozenset({bad})
        errors_before = prop.channels[bad].status.errors

        queued_seen = False
        made = 0
        deadline = time.monotonic() + 40
        while True:  # changes keep coming while the broker is bad; the others follow each one
            commands.admin(
                c.zk_connect, c.log_dir, AdminChange(kind="create-topic", topic=f"bad-{made}", partitions=2)
            )
            made += 1
            queued_seen = queued_seen or prop.channels[bad].status.queued > 0
            converged(c.running, sim, skip=skip)
            if prop.channels[bad].status.errors >= errors_before + 2 and (queued_seen or mode != "silent"):
                break
            assert time.monotonic() < deadline, prop.channels[bad].status
            time.sleep(0.3)
        status = prop.channels[bad].status
        assert status.errors >= errors_before + 2, status  # retried
        assert status.stopped is None and status.last_error
        expected = {"garbage": "malformed response", "close": "closed", "silent": "timed out"}[mode]
        assert expected in status.last_error, status.last_error
        assert status.acked_offset < prop._offset
        assert wait_until(
            lambda: all(
                ch.status.acked_offset >= prop._offset for b, ch in prop.channels.items() if b != bad
            ),
            10,
        )
        assert all(ch.status.errors == 0 for b, ch in prop.channels.items() if b != bad)
        if mode == "silent":
            assert queued_seen  # what changed while it did not answer waited in its queue

        # status (in process, the CLI and --json) and the Prometheus endpoint show it.
        assert wait_until(lambda: ((_status_row(c, bad) or {}).get("errors") or 0) >= 2, 10)
        row = _status_row(c, bad)
        assert row is not None and row["last_error"] and row["acked_offset"] < prop._offset
        assert "queued" in row
        r = run_cli(["status", "-z", c.zk_connect, "-l", c.log_dir, "--json"])
        assert r.returncode == 0, r.stderr[-2000:]
        rows = {x["broker_id"]: x for x in json.loads(r.stdout)["zk_broker_channels"]}
        assert rows[bad]["last_error"] and rows[bad]["errors"] >= 2 and "queued" in rows[bad]
        assert all(rows[b]["last_error"] is None for b in rows if b != bad)
        r = run_cli(["status", "-z", c.zk_connect, "-l", c.log_dir])
        assert r.returncode == 0, r.stderr[-2000:]
        line = next(x for x in r.stdout.splitlines() if f"ZK broker {bad}" in x)
        assert "queued" in line and "errors" in line and "last:" in r.stdout, r.stdout
        metrics = generate_latest(c.metrics.registry).decode()
        errors = _gauge(metrics, "zk2kraft_zk_broker_channel_errors", bad)
        assert errors is not None and errors >= 2
        assert _gauge(metrics, "kafka_controller_ControllerChannelManager_QueueSize", bad) is not None
        acked = _gauge(metrics, "zk2kraft_zk_broker_channel_acked_offset", bad)
        assert acked is not None and acked < prop._offset
        for b in sim.brokers:
            if b != bad:
                assert _gauge(metrics, "zk2kraft_zk_broker_channel_errors", b) == 0.0

        # Healed: the full state reaches it, changes made meanwhile included.
        server.mode = "good"  # type: ignore[attr-defined]
        server.release.set()  # type: ignore[attr-defined]
        converged(c.running, sim, timeout=40)
        assert wait_until(prop.in_sync, 20)
        assert sum(1 for k in sim.caches[bad].partitions if k[0].startswith("bad-")) == 2 * made
        assert service.image.brokers[bad].fenced is False  # its heartbeats never depended on it


def _gauge(metrics: str, name: str, broker_id: int) -> float | None:
    prefix = f'{name}{{broker_id="{broker_id}"}} '
    for line in metrics.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix) :])
    return None
