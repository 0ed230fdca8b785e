"""`migrate --follow --listen` end to end against a real ZooKeeper, with the brokers' requests made
in-process on the running service: soft start, wait-for-brokers (and its timeout), the copy, then
AlterPartition carried to ZooKeeper. The wire itself is tested by the listener's and races' tests."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import SPEC, assert_consistent, cluster

from migrator import commands
from migrator.controller import core
from migrator.controller.managers.change import AdminChange
from migrator.controller.network.listener_runtime import IN_PROCESS
from migrator.controller.protocol import kafka_errors as E
from migrator.controller.service import ControllerService
from migrator.errors import FindingsError
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import MetadataRecord, uuid_to_kafka
from migrator.migration import driver
from migrator.zk import paths as P

pytestmark = pytest.mark.zk


def _expected_brokers(zk: KazooClient) -> set[int]:
    ids = {int(b) for b in zk.get_children(P.BROKER_IDS)}
    for name in zk.get_children(P.TOPICS):
        for replicas in json.loads(zk.get(P.topic_path(name))[0])["partitions"].values():
            ids.update(replicas)
    return ids


def _register(service: ControllerService, broker_id: int) -> int:
    reply = service.register(
        core.Registration(
            broker_id,
            service.core.config.cluster_id,
            uuid_to_kafka(uuid.uuid4()),
            (core.Listener("PLAINTEXT", f"b{broker_id}", 9092),),
            {"metadata.version": (1, 21)},
            is_migrating_zk_broker=True,
        )
    )
    assert reply.error == E.NONE, reply
    hb = service.heartbeat(core.Heartbeat(broker_id, reply.broker_epoch, service.log.end_offset))
    assert hb.error == E.NONE
    return reply.broker_epoch


def test_soft_start_waits_for_every_broker_then_copies(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    notes: list[str] = []  # what the driver says, in order (its decisions, as an operator reads them)
    with cluster(zk, zk_connect):
        expected = sorted(_expected_brokers(zk))
        assert len(expected) >= 2
        running = commands.start_controller(
            zk_connect,
            str(log_dir),
            listen=IN_PROCESS,
            yes=True,
            broker_wait_timeout=600,
            session_timeout_ms=60_000,
            say=notes.append,
        )
        try:
            service = running.service
            assert service is not None and service.soft_start and running.address == (IN_PROCESS, 0)
            # Soft start: changes are refused, on the protocol and through `zk2kraft admin`.
            req = core.AlterPartition(0, 0, ())
            assert service.alter_partition(req).error in (E.NOT_CONTROLLER,)
            with pytest.raises(FindingsError, match="soft start"):
                commands.admin(
                    zk_connect, str(log_dir), AdminChange(kind="create-topic", topic="x", partitions=1)
                )
            epochs = {b: _register(service, b) for b in expected[:-1]}
            # one broker is missing: the driver has seen the others and waits for it, copying nothing
            waiting = f"waiting for brokers to register with the KRaft controller: {expected[-1]}"
            assert running.wait_until(lambda r: waiting in notes, 60), notes
            assert service.soft_start and running.thread.is_alive()
            assert driver.gather(zk, str(log_dir)).derived.state.public_name == "MigrationIneligible"
            status = commands.status(zk_connect, str(log_dir))
            assert status.migrating_zk_brokers == expected[:-1] and status.writer is not None
            epochs[expected[-1]] = _register(service, expected[-1])
            assert running.wait_until(lambda r: not service.soft_start, 60), running.error
            # Dual-write: a leader's ISR shrink reaches ZooKeeper.
            topic = next(
                t for t in service.image.topics.values() if any(len(p.isr) > 1 for p in t.partitions.values())
            )
            p = next(p for p in topic.partitions.values() if len(p.isr) > 1).model_copy()
            # Registered before the copy, the brokers kept their epochs.
            assert service.image.brokers[p.leader].broker_epoch == epochs[p.leader]
            reply = service.alter_partition(
                core.AlterPartition(
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
            )
            assert reply.topics[0].partitions[0].error == E.NONE
            assert service.flush(10)  # ZooKeeper is written behind the reply
            # A KRaft broker may not take the id of a live ZooKeeper broker; a free id it may.
            live = int(zk.get_children(P.BROKER_IDS)[0])
            kraft = core.Registration(
                live,
                service.core.config.cluster_id,
                uuid_to_kafka(uuid.uuid4()),
                (),
                {"metadata.version": (1, 21)},
            )
            assert service.register(kraft).error == E.DUPLICATE_BROKER_REGISTRATION
            free = core.Registration(
                999,
                service.core.config.cluster_id,
                uuid_to_kafka(uuid.uuid4()),
                (),
                {"metadata.version": (1, 21)},
            )
            assert service.register(free).error == E.NONE
            state = json.loads(zk.get(P.partition_state_path(topic.name, p.partition))[0])
            assert state["isr"] == [p.leader]
        finally:
            result = running.stop()
        assert result is not None and result.state_after == "DualWriteMetadata"
        assert any("registered with the KRaft controller" in a for a in result.actions)
        assert_consistent(zk, log_dir)
        # The registrations precede the copy transaction; the copy wrote none of its own.
        with MetadataLog.open(log_dir) as log:
            names = [(o, r.name) for o, _, r in log.read(0) if isinstance(r, MetadataRecord)]
        begin = next(o for o, n in names if n == "BeginTransactionRecord" and o > 3)
        registers = [o for o, n in names if n == "RegisterBrokerRecord"]
        assert len(registers) == len(expected) + 1  # the ZooKeeper brokers, then KRaft broker 999
        assert max(registers[:-1]) < begin < registers[-1]
        assert result.manifest is not None and "RegisterBrokerRecord" not in result.manifest.records_by_type
        assert SPEC.topics == result.manifest.topics + SPEC.pending_deletions


def test_wait_for_brokers_times_out_naming_the_missing(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        expected = sorted(_expected_brokers(zk))
        running = commands.start_controller(
            zk_connect, str(log_dir), listen=IN_PROCESS, yes=True, broker_wait_timeout=1.5
        )
        assert running.service is not None
        _register(running.service, expected[0])
        running.thread.join(60)  # the driver gives up after its 1.5 s; 60 s only guards against a hang
        assert not running.thread.is_alive()
        with pytest.raises(driver.BrokersNotReadyError) as err:
            running.stop()
        message = str(err.value)
        assert err.value.exit_code == 1
        for b in expected[1:]:
            assert str(b) in message
        assert f"registered: {expected[0]}" in message
        # Nothing was claimed or copied: ZooKeeper mode goes on; a later run starts over.
        facts = driver.gather(zk, str(log_dir))
        assert (
            facts.derived.state.public_name == "MigrationIneligible" and not facts.zk.kraft_holds_controller
        )
        # The log keeps the bootstrap and the registration; a later run copies after them.
        result = commands.migrate(zk_connect, str(log_dir), yes=True, brokers_from_zk=True)
        assert result.state_after == "DualWriteMetadata"
        assert not any("bootstrap" in a for a in result.actions)
        assert commands.status(zk_connect, str(log_dir)).migrating_zk_brokers == [expected[0]]
        assert_consistent(zk, log_dir)
