"""AlterPartitionReassignments, UpdateFeatures, AllocateProducerIds and DescribeQuorum through the
controller listener in DualWriteMetadata, with a real ZooKeeper and kafka-python's admin calls (kio's
entities where kafka-python has no call): Kafka's per-item errors, the records in the log, and what a
ZK-mode broker reads afterwards (the topic znode's adding/removing replicas, `/latest_producer_id_block`).
Soft start answers each of them NOT_CONTROLLER."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka import errors as Errors
from kafka.admin import NewPartitions, NewTopic
from kazoo.client import KazooClient
from migrate_helpers import SPEC, assert_consistent, cluster
from test_admin_protocol import _register_all
from test_admin_protocol_versions import _describe_quorum, _minimal

from migrator import commands
from migrator.controller import core
from migrator.controller.client.client import ControllerClient, ControllerUnreachable
from migrator.controller.protocol import kafka_errors as E
from migrator.zk import paths as P

pytestmark = pytest.mark.zk


def _kio(api_key: int, version: int, kind: str) -> Any:
    from migrator.controller.apis.admin_api import kio_module

    return kio_module(api_key, version, kind)


def _soft_start_refuses(address: tuple[str, int]) -> None:
    apr = _kio(45, 0, "request")
    uf = _kio(57, 1, "request")
    ap = _kio(67, 0, "request")
    move = apr.AlterPartitionReassignmentsRequest(
        topics=(
            apr.ReassignableTopic(
                name="t", partitions=(apr.ReassignablePartition(partition_index=0, replicas=(1, 2)),)
            ),
        )
    )
    feature = uf.UpdateFeaturesRequest(
        feature_updates=(uf.FeatureUpdateKey(feature="metadata.version", max_version_level=21),),
        validate_only=True,
    )
    with ControllerClient(*address, timeout_s=30) as c:
        moved = c.call(45, 0, move)
        assert [int(p.error_code) for t in moved.responses for p in t.partitions] == [E.NOT_CONTROLLER]
        refused = c.call(57, 1, feature)  # Kafka's getErrorResponse: the error at the top, no results
        assert (int(refused.error_code), refused.results) == (E.NOT_CONTROLLER, ())
        assert int(c.call(67, 0, ap.AllocateProducerIdsRequest(broker_id=1, broker_epoch=1)).error_code) == (
            E.NOT_CONTROLLER
        )


def _versions_and_kio_features(address: tuple[str, int], service: Any) -> None:
    """The versions listed, one beyond them refused (the connection closed, as Kafka does), and what
    kafka-python cannot send: UpdateFeatures v0's allow_downgrade and v1's unknown upgrade type."""
    apr1 = _kio(45, 1, "request")
    uf0, uf1 = _kio(57, 0, "request"), _kio(57, 1, "request")
    mv = service.builder.result.feature_levels["metadata.version"]
    with ControllerClient(*address, timeout_s=30) as c:
        served = {a.api_key: (a.min_version, a.max_version) for a in c.api_versions().api_keys}
        assert (served[45], served[46], served[55], served[57], served[67]) == (
            (0, 0),
            (0, 0),
            (0, 2),
            (0, 1),
            (0, 0),
        )
        down = uf0.FeatureUpdateKey(
            feature="metadata.version", max_version_level=mv - 1, allow_downgrade=True
        )
        [r] = c.call(57, 0, uf0.UpdateFeaturesRequest(feature_updates=(down,))).results
        assert (int(r.error_code), r.error_message) == (
            E.INVALID_UPDATE_VERSION,
            f"Invalid metadata.version {mv - 1}. Unable to modify metadata.version while a ZK migration is in "
            "progress.",
        )
        odd = uf1.FeatureUpdateKey(feature="kraft.version", max_version_level=1, upgrade_type=7)
        [r] = c.call(57, 1, uf1.UpdateFeaturesRequest(feature_updates=(odd,))).results
        assert r.error_message == (
            "Invalid update version 1 for feature kraft.version. The controller does not support the given "
            "upgrade type."
        )
        move = apr1.AlterPartitionReassignmentsRequest(topics=())
        with pytest.raises(ControllerUnreachable):
            c.call(45, 1, move)


def _topic_znode(zk: KazooClient, name: str) -> dict[str, Any]:
    return json.loads(zk.get(P.topic_path(name))[0])


def _alter_partition(service: Any, name: str, index: int, isr: list[int]) -> core.AlterPartitionReply:
    """The leader's AlterPartition (v3, with broker epochs), as a broker sends it once a replica caught up."""
    now = service.image.topics[name].partitions[index]
    epoch_of = {b.id: b.broker_epoch for b in service.image.brokers.values()}
    members = tuple(core.IsrMember(r, epoch_of[r]) for r in isr)
    return service.alter_partition(
        core.AlterPartition(
            now.leader,
            epoch_of[now.leader],
            (
                core.TopicAlter(
                    None,
                    service.image.topics[name].topic_id,
                    (core.PartitionAlter(index, now.leader_epoch, members, now.partition_epoch),),
                ),
            ),
            3,
        )
    )


def _reassignments(admin: KafkaAdminClient, zk: KazooClient, service: Any) -> None:
    """Start, complete and cancel reassignments."""
    image = service.image
    live = sorted(image.brokers)
    (name, index), (name2, index2) = [
        (n, i)
        for n, t in sorted(image.topics.items())
        for i, p in sorted(t.partitions.items())
        if 2 <= len(p.replicas) < len(live) and p.leader in p.isr and set(p.replicas) <= set(p.isr)
    ][:2]
    part = image.topics[name].partitions[index]
    a = part.leader
    c = min(set(live) - set(part.replicas))
    target = [c, *(r for r in part.replicas if r != a)]
    tp = TopicPartition(name, index)
    # one request: the good move applied, each bad item with Kafka's error
    got = admin.alter_partition_reassignments(
        {
            tp: target,
            TopicPartition(name, 999): target,
            TopicPartition("no-such-topic", 0): target,
            TopicPartition(name2, index2): [c, 4242],
            TopicPartition(name2, 999 + index2): None,
        }
    )
    assert got[tp] is None
    assert got[TopicPartition(name, 999)] is Errors.UnknownTopicOrPartitionError
    assert got[TopicPartition("no-such-topic", 0)] is Errors.UnknownTopicOrPartitionError
    assert got[TopicPartition(name2, index2)] is Errors.InvalidReplicationAssignmentError
    dup = admin.alter_partition_reassignments({TopicPartition(name2, index2): [c, c]})
    assert dup[TopicPartition(name2, index2)] is Errors.InvalidReplicationAssignmentError
    none = admin.alter_partition_reassignments({TopicPartition(name2, index2): None})
    assert none[TopicPartition(name2, index2)] is Errors.NoReassignmentInProgressError
    assert (
        service.image.topics[name2].partitions[index2].replicas
        == image.topics[name2].partitions[index2].replicas
    )

    # stage 1: target + removing replicas, AddingReplicas/RemovingReplicas, what ZooKeeper's controller reads
    moving = service.image.topics[name].partitions[index]
    assert (moving.replicas, moving.adding_replicas, moving.removing_replicas) == ([*target, a], [c], [a])
    assert service.flush(30)
    znode = _topic_znode(zk, name)
    assert znode["partitions"][str(index)] == [*target, a]
    assert znode["adding_replicas"] == {str(index): [c]} and znode["removing_replicas"] == {str(index): [a]}
    listed = admin.list_partition_reassignments({name: [index]})
    assert listed == {tp: {"replicas": [*target, a], "adding_replicas": [c], "removing_replicas": [a]}}

    # stage 2: the leader's AlterPartition brings c into the ISR: the move completes, a leaves and leads nothing
    isr = [*moving.isr, c]
    reply = _alter_partition(service, name, index, isr)
    [[result]] = [t.partitions for t in reply.topics]
    assert result.error == E.NEW_LEADER_ELECTED  # a no longer leads (Kafka's reply to the old leader)
    done = service.image.topics[name].partitions[index]
    assert (done.replicas, done.adding_replicas, done.removing_replicas) == (target, [], [])
    assert a not in done.isr and done.leader in target and done.leader != a
    assert service.flush(30)
    znode = _topic_znode(zk, name)
    assert znode["partitions"][str(index)] == target
    assert not znode.get("adding_replicas") and not znode.get("removing_replicas")
    assert json.loads(zk.get(P.partition_state_path(name, index))[0])["leader"] == done.leader
    assert admin.list_partition_reassignments({name: [index]}) == {}

    # cancel: started, then reverted to the original replicas before any ISR change
    before = service.image.topics[name2].partitions[index2]
    c2 = min(set(live) - set(before.replicas))
    tp2 = TopicPartition(name2, index2)
    assert admin.alter_partition_reassignments({tp2: [c2, *before.replicas[1:]]}) == {tp2: None}
    assert service.image.topics[name2].partitions[index2].adding_replicas == [c2]
    assert admin.alter_partition_reassignments({tp2: None}) == {tp2: None}
    after = service.image.topics[name2].partitions[index2]
    assert (after.replicas, after.isr, after.adding_replicas, after.removing_replicas) == (
        before.replicas,
        before.isr,
        [],
        [],
    )
    assert service.flush(30)
    assert not _topic_znode(zk, name2).get("adding_replicas")


def _features(admin: KafkaAdminClient, service: Any) -> None:
    node = service.core.config.node_id
    got = admin.update_features({"metadata.version": 21})
    assert (
        "Invalid metadata.version 21. Unable to modify metadata.version while a ZK migration is in progress."
        in (got["metadata.version"])
    )
    assert "InvalidUpdateVersion" in got["metadata.version"] or "update version" in got["metadata.version"]
    got = admin.update_features({"no.such.feature": 1, "kraft.version": 1, "metadata.version": -1})
    assert (
        f"Invalid update version 1 for feature no.such.feature. Local controller {node} does not support"
        in (got["no.such.feature"])
    )
    first = min(service.image.brokers)
    assert f"broker{first} does not support this feature." in got["kraft.version"]
    assert "A feature version cannot be less than 0." in got["metadata.version"]
    end = service.log.end_offset
    # level 0 of a feature nobody finalized: valid (a removal), validateOnly (v1) appends nothing
    assert admin.update_features({"no.such.feature": 0}, validate_only=True) == {"no.such.feature": "OK"}
    assert service.log.end_offset == end
    assert admin.update_features({"no.such.feature": 0}) == {"no.such.feature": "OK"}
    assert service.log.end_offset == end + 1  # one FeatureLevelRecord
    # DescribeFeatures is ApiVersions' feature fields: the image's finalized levels, the controller's ranges
    described = admin.describe_features()
    mv = service.builder.result.feature_levels["metadata.version"]
    assert described["metadata.version"]["supported"] == (1, 21)
    assert described["metadata.version"]["finalized"] == (mv, mv)
    assert described["metadata.version"]["finalized_epoch"] == service.builder.result.last_offset
    assert "no.such.feature" not in described  # level 0: not finalized


def _producer_ids(zk: KazooClient, address: tuple[str, int], service: Any, zk_block: dict[str, Any]) -> None:
    ap = _kio(67, 0, "request")
    before = service.image.producer_id_block
    assert before is not None  # copied from ZooKeeper's /latest_producer_id_block
    assert before.block_end == int(zk_block["block_end"])
    broker = service.image.brokers[min(service.image.brokers)]
    with ControllerClient(*address, timeout_s=30) as c:
        got = c.call(
            67, 0, ap.AllocateProducerIdsRequest(broker_id=broker.id, broker_epoch=broker.broker_epoch)
        )
        assert (int(got.error_code), got.producer_id_start, got.producer_id_len) == (
            0,
            int(zk_block["block_end"]) + 1,  # the first id after the last block ZooKeeper handed out
            1000,
        )
        again = c.call(
            67, 0, ap.AllocateProducerIdsRequest(broker_id=broker.id, broker_epoch=broker.broker_epoch)
        )
        assert again.producer_id_start == got.producer_id_start + 1000
        stale = c.call(
            67, 0, ap.AllocateProducerIdsRequest(broker_id=broker.id, broker_epoch=broker.broker_epoch + 7)
        )
        assert int(stale.error_code) == E.STALE_BROKER_EPOCH and stale.producer_id_len == 0
        unknown = c.call(67, 0, ap.AllocateProducerIdsRequest(broker_id=4242, broker_epoch=1))
        assert int(unknown.error_code) == E.STALE_BROKER_EPOCH
    assert service.flush(30)
    block = json.loads(zk.get(P.LATEST_PRODUCER_ID_BLOCK)[0])
    start = again.producer_id_start
    assert block == {
        "version": 1,
        "broker": broker.id,
        "block_start": str(start),
        "block_end": str(start + 999),
    }


def _manual_assignments(
    admin: KafkaAdminClient, zk: KazooClient, address: tuple[str, int], service: Any
) -> None:
    ids = sorted(service.image.brokers)
    b0, b1, b2 = ids[:3]
    wanted = {0: [b1, b0], 1: [b2, b1], 2: [b0, b2]}
    admin.create_topics(
        [NewTopic("manual", replica_assignments=wanted, topic_configs={"retention.ms": "60000"})]
    )
    topic = service.image.topics["manual"]
    assert {i: p.replicas for i, p in topic.partitions.items()} == wanted
    assert all(p.leader == p.replicas[0] and p.isr == p.replicas for p in topic.partitions.values())
    znode = _topic_znode(zk, "manual")  # answered once synced: ZooKeeper holds it already
    assert znode["partitions"] == {str(i): r for i, r in wanted.items()}

    ct = _kio(19, 7, "request")

    def topic_with(name: str, parts: dict[int, list[int]], *, rf: int = -1, n: int = -1) -> Any:
        return ct.CreatableTopic(
            name=name,
            num_partitions=n,
            replication_factor=rf,
            assignments=tuple(
                ct.CreatableReplicaAssignment(partition_index=i, broker_ids=tuple(r))
                for i, r in parts.items()
            ),
            configs=(),
        )

    bad = [
        topic_with("rf-set", {0: [b0]}, rf=1),
        topic_with("n-set", {0: [b0]}, n=1),
        topic_with("gap", {0: [b0], 2: [b1]}),
        topic_with("unknown-broker", {0: [b0, 4242]}),
        topic_with("twice", {0: [b0, b0]}),
        topic_with("uneven", {0: [b0, b1], 1: [b2]}),
        topic_with("empty", {0: []}),
        topic_with("manual", {0: [b0]}),  # the name's own error first, as Kafka checks names first
    ]
    with ControllerClient(*address, timeout_s=30) as c:
        resp = c.call(
            19, 7, ct.CreateTopicsRequest(topics=tuple(bad), timeout=datetime.timedelta(seconds=30))
        )
    got = {t.name: (int(t.error_code), t.error_message) for t in resp.topics}
    assert got == {
        "rf-set": (
            42,
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        ),
        "n-set": (42, "A manual partition assignment was specified, but numPartitions was not set to -1."),
        "gap": (39, "partitions should be a consecutive 0-based integer sequence"),
        "unknown-broker": (
            39,
            "The manual partition assignment includes broker 4242, but no such broker is registered.",
        ),
        "twice": (39, f"The manual partition assignment includes the broker {b0} more than once."),
        "uneven": (
            39,
            "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent "
            "with previous partitions, which have 2 replica(s).",
        ),
        "empty": (39, "The manual partition assignment includes an empty replica list."),
        "manual": (36, got["manual"][1]),
    }
    assert not set(got) - {"manual"} & set(service.image.topics)

    # CreatePartitions with assignments (kafka-python's NewPartitions), checked as Kafka's
    # createPartitions checks them; a refused topic keeps its partitions.
    admin.create_partitions({"manual": NewPartitions(5, [[b2, b0], [b1, b2]])})
    topic = service.image.topics["manual"]
    assert {i: p.replicas for i, p in topic.partitions.items()} == {**wanted, 3: [b2, b0], 4: [b1, b2]}
    assert topic.partitions[3].leader == b2 and topic.partitions[3].isr == [b2, b0]
    assert _topic_znode(zk, "manual")["partitions"]["4"] == [b1, b2]
    assert zk.exists(P.partition_state_path("manual", 4)) is not None

    cp = _kio(37, 3, "request")

    def grow(count: int, parts: list[list[int]]) -> Any:
        return cp.CreatePartitionsTopic(
            name="manual",
            count=count,
            assignments=tuple(cp.CreatePartitionsAssignment(broker_ids=tuple(r)) for r in parts),
        )

    def refused(topic: Any) -> tuple[int, str | None]:
        with ControllerClient(*address, timeout_s=30) as c:
            resp = c.call(
                37,
                3,
                cp.CreatePartitionsRequest(
                    topics=(topic,), timeout=datetime.timedelta(seconds=30), validate_only=False
                ),
            )
        [result] = resp.results
        return int(result.error_code), result.error_message

    assert refused(grow(7, [[b0, b1]])) == (
        39,
        "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
    )
    assert refused(grow(6, [[b0]])) == (
        39,
        "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent "
        "with previous partitions, which have 2 replica(s).",
    )
    assert refused(grow(6, [[b0, 4242]])) == (
        39,
        "The manual partition assignment includes broker 4242, but no such broker is registered.",
    )
    assert refused(grow(5, [[b0, b1]]))[0] == 37  # not an increase: INVALID_PARTITIONS, before the list
    assert len(service.image.topics["manual"].partitions) == 5


def _quorum(admin: KafkaAdminClient, service: Any) -> None:
    node = service.core.config.node_id
    quorum = admin.describe_metadata_quorum()
    [topic] = quorum["topics"]
    [part] = topic["partitions"]
    assert part["error"] is None and part["leader_id"] == node
    assert [v["replica_id"] for v in part["current_voters"]] == [node]
    assert part["high_watermark"] >= 0


def test_reassignments_features_producer_ids_and_quorum_through_the_listener(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect, SPEC.model_copy(update={"pending_deletions": 0, "topics": 4})):
        ids = sorted(int(b) for b in zk.get_children(P.BROKER_IDS))
        zk_block = json.loads(zk.get(P.LATEST_PRODUCER_ID_BLOCK)[0])  # what ZooKeeper handed out last
        running = commands.start_controller(
            zk_connect, str(log_dir), yes=True, broker_wait_timeout=60, session_timeout_ms=60_000
        )
        try:
            service = running.service
            assert service is not None and service.soft_start
            _soft_start_refuses(running.address)
            # DescribeQuorum too, as every admin API until the copy is committed (the soft start)
            for v in (0, 1, 2):
                early = _describe_quorum(running.address, v, _minimal(55, v, ""))
                assert (int(early.error_code), early.topics) == (E.NOT_CONTROLLER, ())
            _register_all(service, ids)
            assert running.wait_until(lambda r: service.admin is not None, 60), running.error
            host, port = running.address
            admin = KafkaAdminClient(bootstrap_servers=f"{host}:{port}", request_timeout_ms=30_000)
            try:
                _reassignments(admin, zk, service)
                _features(admin, service)
                _producer_ids(zk, running.address, service, zk_block)
                _versions_and_kio_features(running.address, service)
                _quorum(admin, service)
                _manual_assignments(admin, zk, running.address, service)
            finally:
                admin.close()
        finally:
            result = running.stop()
        assert result is not None and result.state_after == "DualWriteMetadata"
        assert_consistent(zk, log_dir)
