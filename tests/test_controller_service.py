"""The controller service against a real ZooKeeper: decisions appended to the log, replayed, and carried
by the dual-write syncer to the partition state znodes ZooKeeper-mode brokers read."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import assert_consistent, cluster

from migrator import commands
from migrator.controller import core
from migrator.controller.protocol import kafka_errors as E
from migrator.controller.service import ControllerService
from migrator.kraft.image import ImageBuilder
from migrator.kraft.records import uuid_to_kafka
from migrator.migration import driver
from migrator.model import Partition, Topic
from migrator.zk import paths as P

pytestmark = pytest.mark.zk


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


@contextmanager
def dual_write_service(zk: KazooClient, log_dir: Path, clock: Clock) -> Iterator[ControllerService]:
    """What `migrate --follow --listen` runs once the copy is committed, without the socket."""
    facts = driver.gather(zk, str(log_dir))
    log = driver._open_log(str(log_dir), facts.zk.cluster_id, facts.log.node_id or driver.DEFAULT_NODE_ID)
    try:
        facts = driver.gather(zk, str(log_dir), log)
        node = facts.log.node_id or driver.DEFAULT_NODE_ID
        claim, migration = driver._claim(zk, log, facts, node, driver._covered(facts, log))
        syncer = driver._syncer(zk, log, claim, migration, facts)
        syncer.reconcile(driver._replay_of(facts))
        config = core.ControllerConfig(
            cluster_id=facts.zk.cluster_id or "", node_id=node, metadata_version=21, session_timeout_ms=1000
        )
        service = ControllerService(
            log, ImageBuilder(driver._replay_of(facts)), config, claim.kraft_epoch, syncer=syncer, clock=clock
        )
        yield service
    finally:
        log.close()


def _register_all(service: ControllerService) -> dict[int, int]:
    ids = sorted(
        {r for t in service.image.topics.values() for p in t.partitions.values() for r in p.replicas}
    )
    epochs = {}
    for b in ids:
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
        epochs[b] = reply.broker_epoch
        hb = service.heartbeat(core.Heartbeat(b, reply.broker_epoch, service.log.end_offset))
        assert hb.error == E.NONE and not hb.is_fenced
    return epochs


def _zk_state(zk: KazooClient, topic: str, pid: int) -> tuple[dict[str, object], int]:
    data, stat = zk.get(P.partition_state_path(topic, pid))
    return json.loads(data), stat.version


def _a_partition(service: ControllerService, min_isr: int = 2) -> tuple[Topic, Partition]:
    for t in service.image.topics.values():
        for p in t.partitions.values():
            if len(p.isr) >= min_isr and p.leader in p.isr:
                return t, p.model_copy()  # the image's own object changes as records replay
    raise AssertionError("no partition with a multi-member ISR")


def test_alter_partition_reaches_the_partition_state_znode(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    clock = Clock()
    with cluster(zk, zk_connect):
        commands.migrate(zk_connect, str(log_dir), yes=True, brokers_from_zk=True)
        with dual_write_service(zk, log_dir, clock) as service:
            assert not service.soft_start
            epochs = _register_all(service)
            topic, p = _a_partition(service)
            before, version = _zk_state(zk, topic.name, p.partition)
            req = core.AlterPartition(
                p.leader,
                epochs[p.leader],
                (
                    core.TopicAlter(
                        None,
                        topic.topic_id,
                        (
                            core.PartitionAlter(
                                p.partition,
                                p.leader_epoch,
                                (core.IsrMember(p.leader, epochs[p.leader]),),
                                p.partition_epoch,
                            ),
                        ),
                    ),
                ),
            )
            reply = service.alter_partition(req)
            res = reply.topics[0].partitions[0]
            assert reply.error == E.NONE and res.error == E.NONE
            assert res.isr == (p.leader,) and res.partition_epoch == p.partition_epoch + 1
            state, new_version = _zk_state(zk, topic.name, p.partition)
            assert state["isr"] == [p.leader] and state["leader"] == p.leader
            assert state["leader_epoch"] == res.leader_epoch == before["leader_epoch"] + 1  # type: ignore[operator]
            assert state["controller_epoch"] == service.syncer.inner.state_epoch  # type: ignore[union-attr]
            assert new_version == version + 1
            m = json.loads(zk.get(P.MIGRATION)[0])
            assert m["kraft_metadata_offset"] == service.log.end_offset - 1
            # The same request again is stale now (the partition epoch moved): nothing is written.
            again = service.alter_partition(req).topics[0].partitions[0]
            assert again.error in (E.FENCED_LEADER_EPOCH, E.INVALID_UPDATE_VERSION)
            assert _zk_state(zk, topic.name, p.partition)[1] == new_version
            # Written behind (as Kafka's driver does): the reply precedes ZooKeeper, flush waits for it.
            service.start_timer()
            try:
                cur = service.image.topics[topic.name].partitions[p.partition].model_copy()
                members = tuple(core.IsrMember(b, epochs[b]) for b in p.isr)
                grow = core.AlterPartition(
                    p.leader,
                    epochs[p.leader],
                    (
                        core.TopicAlter(
                            None,
                            topic.topic_id,
                            (
                                core.PartitionAlter(
                                    p.partition, cur.leader_epoch, members, cur.partition_epoch
                                ),
                            ),
                        ),
                    ),
                )
                assert service.alter_partition(grow).topics[0].partitions[0].error == E.NONE
                assert service.flush(10)
                assert _zk_state(zk, topic.name, p.partition)[0]["isr"] == p.isr
            finally:
                service.stop()
        assert_consistent(zk, log_dir)


def test_session_timeout_fences_and_zookeeper_follows(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    clock = Clock()
    with cluster(zk, zk_connect):
        commands.migrate(zk_connect, str(log_dir), yes=True, brokers_from_zk=True)
        with dual_write_service(zk, log_dir, clock) as service:
            epochs = _register_all(service)
            topic, p = _a_partition(service)
            victim = p.leader
            clock.ms += 600
            for b, e in epochs.items():
                if b != victim:
                    assert service.heartbeat(core.Heartbeat(b, e, service.log.end_offset)).error == E.NONE
            clock.ms += 600
            assert service.tick() == [victim]
            assert service.image.brokers[victim].fenced
            state, _ = _zk_state(zk, topic.name, p.partition)
            assert victim not in state["isr"] and state["leader"] != victim  # type: ignore[operator]
            # Every partition it led has a new leader or, where it was the last ISR member, none.
            for t in service.image.topics.values():
                for q in t.partitions.values():
                    assert q.leader != victim
                    if q.isr == [victim]:
                        assert q.leader == -1
            assert service.tick() == []
            # Its heartbeat brings it back (unfenced), and it may rejoin ISRs by AlterPartition.
            hb = service.heartbeat(core.Heartbeat(victim, epochs[victim], service.log.end_offset))
            assert not hb.is_fenced and not service.image.brokers[victim].fenced
        assert_consistent(zk, log_dir)


def test_soft_start_refuses_all_but_registration(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    """Before the copy commits, the service registers brokers and refuses changes with NOT_CONTROLLER."""
    log_dir = tmp_path / "meta"
    clock = Clock()
    with cluster(zk, zk_connect):
        commands.migrate(zk_connect, str(log_dir), yes=True, brokers_from_zk=True)
        with dual_write_service(zk, log_dir, clock) as service:
            service.core.active = False  # as in soft start
            epochs = _register_all(service)
            topic, p = _a_partition(service)
            req = core.AlterPartition(
                p.leader,
                epochs[p.leader],
                (
                    core.TopicAlter(
                        None,
                        topic.topic_id,
                        (
                            core.PartitionAlter(
                                p.partition, p.leader_epoch, (core.IsrMember(p.leader),), p.partition_epoch
                            ),
                        ),
                    ),
                ),
            )
            assert service.alter_partition(req).error == E.NOT_CONTROLLER
            ars = core.AlterReplicaState(
                p.leader, epochs[p.leader], core.EVENT_OFFLINE, "", ((topic.name, (p.partition,)),)
            )
            assert service.alter_replica_state(ars).error == E.NOT_CONTROLLER


def test_handle_maps_wire_messages(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    """The server's entry point: messages in every version shape, through the service, and back."""
    from migrator.controller.protocol import messages as M
    from migrator.kraft.records import kafka_to_uuid

    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        commands.migrate(zk_connect, str(log_dir), yes=True, brokers_from_zk=True)
        with dual_write_service(zk, log_dir, Clock()) as service:
            versions = service.handle(M.API_VERSIONS, 3, M.ApiVersionsRequest(), "t")
            assert {k.api_key for k in versions.api_keys} >= {56, 62, 63, M.ALTER_REPLICA_STATE}
            ids = sorted(
                {r for t in service.image.topics.values() for p in t.partitions.values() for r in p.replicas}
            )
            epochs = {}
            for b in ids:
                reg = M.BrokerRegistrationRequest(
                    b,
                    service.core.config.cluster_id,
                    uuid.uuid4(),
                    [M.Listener("PLAINTEXT", f"b{b}", 9092)],
                    [M.Feature("metadata.version", 1, 21)],
                    is_migrating_zk_broker=True,
                )
                reply = service.handle(M.BROKER_REGISTRATION, 3, reg, f"broker-{b}")
                assert reply.error_code == E.NONE
                epochs[b] = reply.broker_epoch
                hb = service.handle(
                    M.BROKER_HEARTBEAT, 1, M.BrokerHeartbeatRequest(b, epochs[b], service.log.end_offset), "x"
                )
                assert hb.error_code == E.NONE and not hb.is_fenced and hb.is_caught_up
            bad = M.BrokerRegistrationRequest(ids[0], "wrong", uuid.uuid4())
            assert service.handle(M.BROKER_REGISTRATION, 0, bad, "x").error_code == E.INCONSISTENT_CLUSTER_ID
            topic, p = _a_partition(service)
            # v1: by name, no member epochs.
            v1 = M.AlterPartitionRequest(
                p.leader,
                epochs[p.leader],
                [
                    M.AlterPartitionTopic(
                        topic.name,
                        None,
                        [
                            M.AlterPartitionPartition(
                                p.partition, p.leader_epoch, [M.BrokerState(p.leader)], p.partition_epoch
                            )
                        ],
                    )
                ],
            )
            out = service.handle(M.ALTER_PARTITION, 1, v1, "x")
            res = out.topics[0].partitions[0]
            assert (
                out.topics[0].topic_name == topic.name and res.error_code == E.NONE and res.isr == [p.leader]
            )
            # v3: by id, with epochs; a stale member epoch is INELIGIBLE_REPLICA.
            cur = service.image.topics[topic.name].partitions[p.partition]
            other = next(b for b in p.isr if b != p.leader)
            tid = kafka_to_uuid(topic.topic_id or "")
            v3 = M.AlterPartitionRequest(
                p.leader,
                epochs[p.leader],
                [
                    M.AlterPartitionTopic(
                        None,
                        tid,
                        [
                            M.AlterPartitionPartition(
                                p.partition,
                                cur.leader_epoch,
                                [
                                    M.BrokerState(p.leader, epochs[p.leader]),
                                    M.BrokerState(other, epochs[other] - 1),
                                ],
                                cur.partition_epoch,
                            )
                        ],
                    )
                ],
            )
            out = service.handle(M.ALTER_PARTITION, 3, v3, "x")
            assert (
                out.topics[0].topic_id == tid
                and out.topics[0].partitions[0].error_code == E.INELIGIBLE_REPLICA
            )
            unknown = M.AlterPartitionRequest(
                p.leader,
                epochs[p.leader],
                [M.AlterPartitionTopic(None, uuid.uuid4(), v3.topics[0].partitions)],
            )
            assert (
                service.handle(M.ALTER_PARTITION, 2, unknown, "x").topics[0].partitions[0].error_code
                == E.UNKNOWN_TOPIC_ID
            )
            ars = M.AlterReplicaStateRequest(
                other,
                epochs[other],
                M.EVENT_OFFLINE,
                "disk",
                [M.AlterReplicaStateTopic(topic.name, [p.partition, 999])],
            )
            out = service.handle(M.ALTER_REPLICA_STATE, 0, ars, "x")
            assert out.error_code == E.NONE
            assert [(x.partition_index, x.error_code) for x in out.topics[0].partitions] == [
                (p.partition, E.NONE),
                (999, E.UNKNOWN_TOPIC_OR_PARTITION),
            ]
            ars.event_type = 7
            assert service.handle(M.ALTER_REPLICA_STATE, 0, ars, "x").error_code == E.UNKNOWN_EVENT_TYPE
        assert_consistent(zk, log_dir)


def test_concurrent_alter_partitions_on_one_epoch_one_wins(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """KIP-497's race through the service's lock: requests built on one partition epoch, sent at once."""
    import threading

    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        commands.migrate(zk_connect, str(log_dir), yes=True, brokers_from_zk=True)
        with dual_write_service(zk, log_dir, Clock()) as service:
            epochs = _register_all(service)
            topic, p = _a_partition(service, min_isr=3)
            others = [b for b in p.isr if b != p.leader]
            # Expansions keep the leader epoch, so only the partition epoch tells the requests apart.
            shrink = core.AlterPartition(
                p.leader,
                epochs[p.leader],
                (
                    core.TopicAlter(
                        None,
                        topic.topic_id,
                        (
                            core.PartitionAlter(
                                p.partition,
                                p.leader_epoch,
                                (core.IsrMember(p.leader, epochs[p.leader]),),
                                p.partition_epoch,
                            ),
                        ),
                    ),
                ),
            )
            assert service.alter_partition(shrink).topics[0].partitions[0].error == E.NONE
            cur = service.image.topics[topic.name].partitions[p.partition].model_copy()
            barrier = threading.Barrier(len(others))
            errors: dict[int, int] = {}

            def grow(b: int) -> None:
                members = (core.IsrMember(p.leader, epochs[p.leader]), core.IsrMember(b, epochs[b]))
                req = core.AlterPartition(
                    p.leader,
                    epochs[p.leader],
                    (
                        core.TopicAlter(
                            None,
                            topic.topic_id,
                            (
                                core.PartitionAlter(
                                    p.partition, cur.leader_epoch, members, cur.partition_epoch
                                ),
                            ),
                        ),
                    ),
                )
                barrier.wait()
                errors[b] = service.alter_partition(req).topics[0].partitions[0].error

            threads = [threading.Thread(target=grow, args=(b,)) for b in others]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert sorted(errors.values()) == sorted(
                [E.NONE] + [E.INVALID_UPDATE_VERSION] * (len(others) - 1)
            )
            winner = next(b for b, e in errors.items() if e == E.NONE)
            after = service.image.topics[topic.name].partitions[p.partition]
            assert after.isr == [p.leader, winner] and after.partition_epoch == cur.partition_epoch + 1
            state, _ = _zk_state(zk, topic.name, p.partition)
            assert state["isr"] == [p.leader, winner]
        assert_consistent(zk, log_dir)


def test_a_log_written_in_a_newer_epoch_stops_the_service(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """Records decided but not appended (a newer leader epoch in the log) are never acknowledged, and the
    service answers nothing after: its image is ahead of its log."""
    from migrator.errors import FencedError
    from migrator.kraft.records import record

    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        commands.migrate(zk_connect, str(log_dir), yes=True, brokers_from_zk=True)
        with dual_write_service(zk, log_dir, Clock()) as service:
            epochs = _register_all(service)
            service.log.append([record("NoOpRecord", 0)], service.epoch + 1)  # a newer writer's epoch
            b = next(iter(epochs))
            hb = service.heartbeat(core.Heartbeat(b, epochs[b], service.log.end_offset, want_fence=True))
            assert hb.error == E.NOT_CONTROLLER
            assert service.fenced and isinstance(service.failure, FencedError)
            assert (
                service.register(
                    core.Registration(b, service.core.config.cluster_id, uuid_to_kafka(uuid.uuid4()))
                ).error
                == E.NOT_CONTROLLER
            )


def test_activate_catches_up_with_requests_served_after_the_callers_read(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        commands.migrate(zk_connect, str(log_dir), yes=True, brokers_from_zk=True)
        with dual_write_service(zk, log_dir, Clock()) as service:
            stale = ImageBuilder(driver._replay_of(driver.gather(zk, str(log_dir))))
            epochs = _register_all(service)  # served after the read above
            assert service.syncer is not None
            service.activate(stale, service.syncer, service.epoch)
            assert {b: service.image.brokers[b].broker_epoch for b in epochs} == epochs
            assert all(not service.image.brokers[b].fenced for b in epochs)


def test_session_timer_wakes_at_the_oldest_sessions_expiry(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """Kafka's controller checks for a stale broker when the oldest session expires
    (QuorumController.rescheduleMaybeFenceStaleBrokers); a fixed round of a quarter timeout fenced a
    killed broker up to that much later, and every failover waited for it (bench/real_kafka.py)."""
    log_dir = tmp_path / "meta"
    clock = Clock()
    with cluster(zk, zk_connect):
        commands.migrate(zk_connect, str(log_dir), yes=True, brokers_from_zk=True)
        with dual_write_service(zk, log_dir, clock) as service:  # session timeout 1000 ms
            epochs = _register_all(service)
            victim = sorted(epochs)[0]
            clock.ms += 300
            for b, e in epochs.items():
                if b != victim:
                    assert service.heartbeat(core.Heartbeat(b, e, service.log.end_offset)).error == E.NONE
            assert service.timer_wait(5.0) == pytest.approx(0.701)  # the victim's session, not 5 s
            assert service.timer_wait(0.25) == 0.25
            clock.ms += 701
            assert service.timer_wait(5.0) == 0.01
            assert service.tick() == [victim]
            assert service.timer_wait(5.0) == pytest.approx(
                0.3
            )  # now the others' sessions (heartbeat at +300)
