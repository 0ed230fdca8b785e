"""kafka-python's KafkaAdminClient against the controller listener of `migrate --follow --listen`, with
a real ZooKeeper: Metadata bootstraps from the controller, CreateTopics and DeleteTopics are applied
through the dual-write path, and ZooKeeper then holds what a ZK-mode broker reads."""

from __future__ import annotations

import datetime
import json
import uuid
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode
from migrate_helpers import assert_audit_clean, assert_consistent, cluster

from migrator import commands
from migrator.controller import core
from migrator.controller.client.client import ControllerClient
from migrator.controller.protocol import kafka_errors as E
from migrator.controller.service import ControllerService
from migrator.kraft.records import uuid_to_kafka
from migrator.zk import codec
from migrator.zk import paths as P
from zk_fixtures.simulated_broker import SECURITY_PROTOCOLS

pytestmark = pytest.mark.zk


def _register_all(service: ControllerService, ids: list[int], zk: KazooClient | None = None) -> None:
    """Every broker registers and heartbeats; with ``zk``, with the endpoints and rack of its ZooKeeper
    registration, as a real ZK-mode broker does (the audit compares the two)."""
    for broker_id in ids:
        listeners, rack = (
            _zk_registration(zk, broker_id)
            if zk is not None
            else ((core.Listener("PLAINTEXT", f"b{broker_id}", 9092),), None)
        )
        reply = service.register(
            core.Registration(
                broker_id,
                service.core.config.cluster_id,
                uuid_to_kafka(uuid.uuid4()),
                listeners,
                {"metadata.version": (1, 21)},
                rack=rack,
                is_migrating_zk_broker=True,
            )
        )
        assert reply.error == E.NONE, reply
        assert (
            service.heartbeat(core.Heartbeat(broker_id, reply.broker_epoch, service.log.end_offset)).error
            == 0
        )


def _raw_bad_input(address: tuple[str, int], service: ControllerService) -> None:
    """kio's entities over the listener: what kafka-python cannot send (duplicates, ids, KIP-919)."""
    from kio.schema.create_topics.v7 import request as ct
    from kio.schema.delete_topics.v6 import request as dt
    from kio.schema.describe_cluster.v1 import request as dc

    with ControllerClient(*address, timeout_s=30) as c:
        cluster = c.call(
            60, 1, dc.DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2)
        )
        assert cluster.error_code == 0 and cluster.controller_id == service.core.config.node_id
        assert [(b.host, b.port) for b in cluster.brokers] == [address]
        # Kafka 3.9's controller (AuthHelper.computeDescribeClusterResponse) serves CONTROLLER only.
        brokers_kind = c.call(60, 1, dc.DescribeClusterRequest(include_cluster_authorized_operations=False))
        assert brokers_kind.error_code == ErrorCode.mismatched_endpoint_type
        assert brokers_kind.error_message == (
            "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint of type BROKER"
        )
        unknown_kind = c.call(
            60, 1, dc.DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=7)
        )
        assert unknown_kind.error_code == ErrorCode.unsupported_endpoint_type
        assert unknown_kind.error_message == "Unsupported endpoint type 7"

        def topic(name: str) -> ct.CreatableTopic:
            return ct.CreatableTopic(
                name=name, num_partitions=1, replication_factor=1, assignments=(), configs=()
            )

        bad_config = ct.CreatableTopic(
            name="fine-but-bad-config",
            num_partitions=1,
            replication_factor=1,
            assignments=(),
            configs=(ct.CreatableTopicConfig(name="no.such.config", value="1"),),
        )
        resp = c.call(
            19,
            7,
            ct.CreateTopicsRequest(
                topics=(topic("twice"), topic("twice"), topic("once"), topic(".."), bad_config),
                timeout=datetime.timedelta(seconds=30),
            ),
        )
        codes = [(t.name, int(t.error_code)) for t in resp.topics]
        assert codes == [("twice", 42), ("twice", 42), ("once", 0), ("..", 17), ("fine-but-bad-config", 40)]
        assert "twice" not in service.image.topics and "fine-but-bad-config" not in service.image.topics
        once_id = resp.topics[2].topic_id
        assert uuid_to_kafka(once_id) == service.image.topics["once"].topic_id
        gone = c.call(
            20,
            6,
            dt.DeleteTopicsRequest(
                topics=(dt.DeleteTopicState(topic_id=uuid.uuid4()), dt.DeleteTopicState(topic_id=once_id)),
                timeout=datetime.timedelta(seconds=30),
            ),
        )
        assert [int(r.error_code) for r in gone.responses] == [100, 0]  # UNKNOWN_TOPIC_ID, then deleted by id
        assert gone.responses[1].name == "once" and "once" not in service.image.topics


def _admin(address: tuple[str, int]) -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=f"{address[0]}:{address[1]}",
        client_id="zk2kraft-test",
        request_timeout_ms=30_000,
    )


def _zk_registration(zk: KazooClient, broker_id: int) -> tuple[tuple[core.Listener, ...], str | None]:
    """The endpoints and rack of the broker's ZooKeeper registration, read by zk2kraft's own codec."""
    path = f"{P.BROKER_IDS}/{broker_id}"
    broker = codec.decode_broker(path, zk.get(path)[0], broker_id)
    listeners = tuple(
        core.Listener(e.listener, e.host, e.port, SECURITY_PROTOCOLS.get(e.security_protocol, 0))
        for e in broker.endpoints
    )
    return listeners, broker.rack


def test_kafka_python_admin_creates_and_deletes_topics_through_dual_write(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        ids = sorted(int(b) for b in zk.get_children(P.BROKER_IDS))
        running = commands.start_controller(
            zk_connect, str(log_dir), yes=True, broker_wait_timeout=60, session_timeout_ms=60_000
        )
        try:
            service = running.service
            assert service is not None and service.soft_start
            # Soft start: Metadata answers (the controller, no topics); changes are NOT_CONTROLLER.
            admin = _admin(running.address)
            try:
                assert admin.list_topics() == []
                # kafka-python retries a NOT_CONTROLLER once, then gives up with this
                with pytest.raises(RuntimeError, match="active controller"):
                    admin.create_topics([NewTopic("early", 1, 1)])
            finally:
                admin.close()
            from kio.schema.describe_cluster.v1 import request as dc

            with ControllerClient(*running.address, timeout_s=30) as c:
                ask = dc.DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2)
                assert c.call(60, 1, ask).error_code == E.NOT_CONTROLLER
            _register_all(service, ids, zk)
            assert running.wait_until(lambda r: not service.soft_start, 60), running.error
            assert running.wait_until(lambda r: service.admin is not None, 30), running.error

            admin = _admin(running.address)
            try:
                before = set(admin.list_topics())
                assert before and before <= set(service.image.topics)
                admin.create_topics(
                    [NewTopic("orders", 4, 2, topic_configs={"retention.ms": "3600000"})], validate_only=True
                )
                assert "orders" not in zk.get_children(P.TOPICS)  # validate only: nothing written
                admin.create_topics([NewTopic("orders", 4, 2, topic_configs={"retention.ms": "3600000"})])
                # Answered once durable and synced: ZooKeeper already holds it.
                znode = json.loads(zk.get(P.topic_path("orders"))[0])
                assert znode["topic_id"] == service.image.topics["orders"].topic_id
                assert sorted(znode["partitions"]) == ["0", "1", "2", "3"]
                assert all(len(r) == 2 and set(r) <= set(ids) for r in znode["partitions"].values())
                state = json.loads(zk.get(P.partition_state_path("orders", 0))[0])
                assert state["leader"] in znode["partitions"]["0"]
                assert json.loads(zk.get("/config/topics/orders")[0])["config"] == {"retention.ms": "3600000"}
                assert "orders" in admin.list_topics()

                # IncrementalAlterConfigs: a SET and a DELETE, then a config Kafka does not know.
                changes_before = len(zk.get_children("/config/changes"))
                res = ConfigResource(
                    ConfigResourceType.TOPIC,
                    "orders",
                    configs={"cleanup.policy": "compact", "retention.ms": ("DELETE", None)},
                )
                admin.alter_configs([res], raise_on_unknown=False, incremental=True)
                assert json.loads(zk.get("/config/topics/orders")[0])["config"] == {
                    "cleanup.policy": "compact"
                }
                assert len(zk.get_children("/config/changes")) > changes_before  # brokers are told
                bad = ConfigResource(ConfigResourceType.TOPIC, "orders", configs={"no.such.config": "1"})
                refused = admin.alter_configs([bad], raise_on_unknown=False, incremental=True)
                assert "InvalidConfigurationError" in str(refused["topic"]["orders"])
                assert json.loads(zk.get("/config/topics/orders")[0])["config"] == {
                    "cleanup.policy": "compact"
                }
                # CreatePartitions: 4 -> 6, and a decrease refused.
                admin.create_partitions({"orders": NewPartitions(6)})
                znode = json.loads(zk.get(P.topic_path("orders"))[0])
                assert sorted(znode["partitions"], key=int) == [str(i) for i in range(6)]
                assert zk.exists(P.partition_state_path("orders", 5))
                with pytest.raises(InvalidPartitionsError):
                    admin.create_partitions({"orders": NewPartitions(2)})

                # ACLs: create, describe, delete by filter; ZooKeeper's /kafka-acl follows each step.
                acl = ACL(
                    "User:alice",
                    "*",
                    ACLOperation.READ,
                    ACLPermissionType.ALLOW,
                    ResourcePattern(ResourceType.TOPIC, "orders", ACLResourcePatternType.LITERAL),
                )
                made = admin.create_acls([acl])
                assert made["failed"] == [] and len(made["succeeded"]) == 1
                stored = json.loads(zk.get("/kafka-acl/Topic/orders")[0])["acls"]
                assert stored == [
                    {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
                ]
                assert zk.get_children("/kafka-acl-changes")
                every_on_orders = ACLFilter(
                    None,
                    None,
                    ACLOperation.ANY,
                    ACLPermissionType.ANY,
                    ResourcePatternFilter(ResourceType.TOPIC, "orders", ACLResourcePatternType.MATCH),
                )
                described, err = admin.describe_acls(every_on_orders)
                assert err is None or err.errno == 0
                assert [(a.principal, a.operation) for a in described] == [("User:alice", ACLOperation.READ)]
                deleted = admin.delete_acls([every_on_orders])
                assert len(deleted[0][1]) == 1 and getattr(deleted[0][2], "errno", 0) == 0
                assert (
                    not zk.exists("/kafka-acl/Topic/orders")
                    or json.loads(zk.get("/kafka-acl/Topic/orders")[0])["acls"] == []
                )
                assert admin.describe_acls(every_on_orders)[0] == []

                _raw_bad_input(running.address, service)

                # Kafka's per-topic errors, nothing half-applied.
                with pytest.raises(TopicAlreadyExistsError):
                    admin.create_topics([NewTopic("orders", 1, 1)])
                with pytest.raises(InvalidTopicError):
                    admin.create_topics([NewTopic("bad/name", 1, 1)])
                with pytest.raises(InvalidReplicationFactorError):
                    admin.create_topics([NewTopic("too-wide", 1, len(ids) + 1)])
                with pytest.raises(UnknownTopicOrPartitionError):
                    admin.delete_topics(["no-such-topic"])
                children = set(zk.get_children(P.TOPICS))
                assert not {"bad/name", "too-wide"} & children

                admin.delete_topics(["orders"])
                assert "orders" not in service.image.topics
                assert "orders" not in zk.get_children(P.TOPICS)
                assert "orders" not in admin.list_topics()
            finally:
                admin.close()
        finally:
            result = running.stop()
        assert result is not None and result.state_after == "DualWriteMetadata"
        assert_consistent(zk, log_dir)
        assert_audit_clean(zk_connect, log_dir)  # what `zk2kraft audit` says after the admin steps
