"""Placement, defaults and atomicity of the admin APIs over the real listener, with a real ZooKeeper.

Brokers register with racks; kafka-python's KafkaAdminClient and confluent-kafka's AdminClient create
topics that the striped placer spreads over the racks; CreateTopics of -1 takes `num.partitions` and
`default.replication.factor` from the controller's properties; one request's valid items land in the
log as ONE record batch while an invalid item gets its own error; UNCLEAN ElectLeaders elects a
leader for a leaderless partition (ELIGIBLE_LEADERS_NOT_AVAILABLE without a live replica); and
DescribeAcls/DeleteAcls filters of pattern types LITERAL, PREFIXED and ANY.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kazoo.client import KazooClient
from migrate_helpers import SPEC, assert_consistent, cluster

from migrator import commands
from migrator.controller import core
from migrator.controller.client.client import ControllerClient
from migrator.controller.network.listener_config import set_default_properties
from migrator.controller.protocol import kafka_errors as E
from migrator.controller.service import ControllerService
from migrator.kraft.batch_decode import decode_batch_records
from migrator.kraft.records import MetadataRecord, uuid_to_kafka
from migrator.zk import paths as P

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

pytestmark = pytest.mark.zk

TIMEOUT = datetime.timedelta(seconds=30)


def rack_of(broker_id: int) -> str:
    return f"r{broker_id % 3}"


def _register_with_racks(service: ControllerService, ids: list[int]) -> dict[int, int]:
    """Every broker registered (rack r0/r1/r2 by id) and unfenced; their broker epochs."""
    epochs = {}
    for broker_id in ids:
        reply = service.register(
            core.Registration(
                broker_id,
                service.core.config.cluster_id,
                uuid_to_kafka(uuid.uuid4()),
                (core.Listener("PLAINTEXT", f"b{broker_id}", 9092),),
                {"metadata.version": (1, 21)},
                rack=rack_of(broker_id),
                is_migrating_zk_broker=True,
            )
        )
        assert reply.error == E.NONE, reply
        beat = service.heartbeat(core.Heartbeat(broker_id, reply.broker_epoch, service.log.end_offset))
        assert beat.error == 0
        epochs[broker_id] = reply.broker_epoch
    return epochs


def _batches_since(service: ControllerService, offset: int) -> Iterator[list[MetadataRecord]]:
    """The data batches the log holds from `offset` on, each as its records."""
    for batch in service.log.batches(offset):
        if not batch.is_control:
            yield [rec for _o, rec in decode_batch_records(batch) if isinstance(rec, MetadataRecord)]


def _one_batch_holds(service: ControllerService, offset: int, wanted: Any) -> list[MetadataRecord]:
    """The one batch since `offset` holding every record `wanted` picks; no other batch holds any."""
    holding = [b for b in _batches_since(service, offset) if any(wanted(r) for r in b)]
    assert len(holding) == 1, [[r.name for r in b] for b in holding]
    return holding[0]


def _topic_znode(zk: KazooClient, name: str) -> dict[str, list[int]]:
    return json.loads(zk.get(P.topic_path(name))[0])["partitions"]


def _placement(admin: KafkaAdminClient, confluent: Any, zk: KazooClient, ids: list[int]) -> None:
    """Rack-aware striped placement through both real clients."""
    admin.create_topics([NewTopic("striped", 12, 3)])
    parts = _topic_znode(zk, "striped")
    assert sorted(parts, key=int) == [str(i) for i in range(12)]
    for replicas in parts.values():
        assert len(set(replicas)) == 3 and set(replicas) <= set(ids)
        assert {rack_of(b) for b in replicas} == {"r0", "r1", "r2"}  # one replica per rack
    # the striped placer gives every broker the same share of replicas (12 * 3 over 6)
    assert set(Counter(b for r in parts.values() for b in r).values()) == {6}
    for p, replicas in parts.items():
        state = json.loads(zk.get(P.partition_state_path("striped", int(p)))[0])
        assert state["leader"] == replicas[0] and state["isr"] == replicas

    futures = confluent.create_topics([admin_mod.NewTopic("striped-two", 9, 2)])
    futures["striped-two"].result(timeout=30)
    parts = _topic_znode(zk, "striped-two")
    assert len(parts) == 9
    assert all(len(r) == 2 and rack_of(r[0]) != rack_of(r[1]) for r in parts.values())
    # more replicas than registered brokers: Kafka's placer message, INVALID_REPLICATION_FACTOR
    futures = confluent.create_topics([admin_mod.NewTopic("too-wide", 1, len(ids) + 1)])
    with pytest.raises(confluent_kafka.KafkaException) as e:
        futures["too-wide"].result(timeout=30)
    err = e.value.args[0]
    assert err.code() == confluent_kafka.KafkaError.INVALID_REPLICATION_FACTOR
    assert (
        f"Unable to replicate the partition {len(ids) + 1} time(s): The target replication factor of "
        f"{len(ids) + 1} cannot be reached because only {len(ids)} broker(s) are registered." in err.str()
    )


def _defaults(address: tuple[str, int], service: ControllerService, zk: KazooClient) -> None:
    """-1 partitions and replication factor take num.partitions=5, default.replication.factor=2."""
    from kio.schema.create_topics.v4 import request as ct4
    from kio.schema.create_topics.v7 import request as ct7

    with ControllerClient(*address, timeout_s=30) as c:
        for version, m, name, parts, rf in (
            (7, ct7, "defaulted", -1, -1),
            (4, ct4, "defaulted-v4", -1, -1),
            (7, ct7, "half-defaulted", 3, -1),
        ):
            topic = m.CreatableTopic(
                name=name, num_partitions=parts, replication_factor=rf, assignments=(), configs=()
            )
            resp = c.call(19, version, m.CreateTopicsRequest(topics=(topic,), timeout=TIMEOUT))
            (result,) = resp.topics
            assert int(result.error_code) == 0, result
            want = 5 if parts == -1 else parts
            if version >= 5:  # the response tells what the defaults made
                assert (result.num_partitions, result.replication_factor) == (want, 2)
            znode = _topic_znode(zk, name)
            assert len(znode) == want and all(len(r) == 2 for r in znode.values())
        refused = c.call(
            19,
            7,
            ct7.CreateTopicsRequest(
                topics=(
                    ct7.CreatableTopic(name="zero", num_partitions=0, replication_factor=-1, assignments=(), configs=()),
                    ct7.CreatableTopic(name="rf0", num_partitions=1, replication_factor=0, assignments=(), configs=()),
                ),
                timeout=TIMEOUT,
            ),
        )  # fmt: skip
        assert [(int(t.error_code), t.error_message) for t in refused.topics] == [
            (37, "Number of partitions was set to an invalid non-positive value."),
            (38, "Replication factor must be larger than 0, or -1 to use the default value."),
        ]
    assert "zero" not in service.image.topics and "rf0" not in service.image.topics


def _one_batch(address: tuple[str, int], service: ControllerService, zk: KazooClient) -> None:
    """Several valid items and invalid ones in one request: the valid ones' records are ONE batch."""
    from kio.schema.create_acls.v3 import request as ca
    from kio.schema.create_topics.v7 import request as ct
    from kio.schema.incremental_alter_configs.v1 import request as iac

    def topic(name: str, parts: int, configs: tuple[Any, ...] = ()) -> Any:
        return ct.CreatableTopic(
            name=name, num_partitions=parts, replication_factor=2, assignments=(), configs=configs
        )

    bad_config = (ct.CreatableTopicConfig(name="no.such.config", value="1"),)
    with ControllerClient(*address, timeout_s=30) as c:
        start = service.log.end_offset
        resp = c.call(
            19,
            7,
            ct.CreateTopicsRequest(
                topics=(
                    topic("batch-a", 3),
                    topic("batch-b", 2),
                    topic("..", 1),
                    topic("batch-c", 4),
                    topic("batch-bad", 1, bad_config),
                ),
                timeout=TIMEOUT,
            ),
        )
        assert [(t.name, int(t.error_code)) for t in resp.topics] == [
            ("batch-a", 0),
            ("batch-b", 0),
            ("..", 17),
            ("batch-c", 0),
            ("batch-bad", 40),
        ]
        batch = _one_batch_holds(service, start, lambda r: r.name in ("TopicRecord", "PartitionRecord"))
        assert [r.fields["Name"] for r in batch if r.name == "TopicRecord"] == [
            "batch-a",
            "batch-b",
            "batch-c",
        ]
        assert sum(r.name == "PartitionRecord" for r in batch) == 9
        for name, parts in (("batch-a", 3), ("batch-b", 2), ("batch-c", 4)):
            assert len(_topic_znode(zk, name)) == parts  # answered once in ZooKeeper, all of them
        assert not {"batch-bad", ".."} & set(zk.get_children(P.TOPICS))

        start = service.log.end_offset
        resp = c.call(
            44,
            1,
            iac.IncrementalAlterConfigsRequest(
                resources=tuple(
                    iac.AlterConfigsResource(
                        resource_type=2,
                        resource_name=name,
                        configs=(iac.AlterableConfig(name=key, config_operation=0, value="7200000"),),
                    )
                    for name, key in (
                        ("batch-a", "retention.ms"),
                        ("batch-b", "no.such.config"),
                        ("batch-c", "retention.ms"),
                    )
                ),
                validate_only=False,
            ),
        )
        assert [int(r.error_code) for r in resp.responses] == [0, 40, 0]
        batch = _one_batch_holds(service, start, lambda r: r.name == "ConfigRecord")
        assert sorted(r.fields["ResourceName"] for r in batch) == ["batch-a", "batch-c"]
        for name in ("batch-a", "batch-c"):
            assert json.loads(zk.get(f"/config/topics/{name}")[0])["config"] == {"retention.ms": "7200000"}

        start = service.log.end_offset

        def creation(principal: str, operation: int, resource_type: int = 2) -> Any:
            return ca.AclCreation(
                resource_type=resource_type,
                resource_name="batch-a",
                resource_pattern_type=3,
                principal=principal,
                host="*",
                operation=operation,
                permission_type=3,
            )

        resp = c.call(
            30,
            3,
            ca.CreateAclsRequest(
                creations=(
                    creation("User:one", 3),
                    creation("User:bad", 1),  # ANY is a filter, not an operation
                    creation("User:two", 4),
                )
            ),
        )
        assert [int(r.error_code) for r in resp.results] == [0, 42, 0]
        batch = _one_batch_holds(service, start, lambda r: r.name == "AccessControlEntryRecord")
        assert sorted(r.fields["Principal"] for r in batch) == ["User:one", "User:two"]
        stored = json.loads(zk.get("/kafka-acl/Topic/batch-a")[0])["acls"]
        assert sorted(a["principal"] for a in stored) == ["User:one", "User:two"]


def _elect(admin: KafkaAdminClient, name: str, partition: int) -> int:
    resp = admin.elect_leaders(1, {name: [partition]}, raise_errors=False)  # 1: UNCLEAN
    (code,) = [r.error_code for t in resp.replica_election_results for r in t.partition_result]
    return code


def _unclean(
    admin: KafkaAdminClient,
    address: tuple[str, int],
    service: ControllerService,
    zk: KazooClient,
    epochs: dict[int, int],
) -> None:
    """A leaderless partition elected uncleanly; another without a live replica refused."""
    from kio.schema.create_topics.v7 import request as ct

    a, b = sorted(epochs)[:2]

    def beat(broker: int, fence: bool) -> None:
        reply = service.heartbeat(
            core.Heartbeat(broker, epochs[broker], service.log.end_offset, want_fence=fence)
        )
        assert reply.error == 0

    def manual(name: str, replicas: tuple[int, ...]) -> Any:
        return ct.CreatableTopic(
            name=name,
            num_partitions=-1,
            replication_factor=-1,
            assignments=(ct.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas),),
            configs=(),
        )

    beat(b, True)  # b fenced: the new partition's ISR is a alone
    with ControllerClient(*address, timeout_s=30) as c:
        resp = c.call(
            19,
            7,
            ct.CreateTopicsRequest(
                topics=(manual("unclean", (a, b)), manual("orphan", (a,))), timeout=TIMEOUT
            ),
        )
        assert [int(t.error_code) for t in resp.topics] == [0, 0]
    assert service.image.topics["unclean"].partitions[0].isr == [a]
    beat(b, False)
    beat(a, True)  # the only ISR member fenced: no leader left for either topic
    for name in ("unclean", "orphan"):
        assert service.image.topics[name].partitions[0].leader == -1
    assert service.flush(30)
    assert _elect(admin, "orphan", 0) == 83  # ELIGIBLE_LEADERS_NOT_AVAILABLE: a is its only replica
    assert _elect(admin, "unclean", 0) == 0
    p = service.image.topics["unclean"].partitions[0]
    assert (p.leader, p.isr, p.leader_recovery_state) == (b, [b], 1)  # RECOVERING, as Kafka marks it
    assert service.flush(30)
    state = json.loads(zk.get(P.partition_state_path("unclean", 0))[0])
    assert (state["leader"], state["isr"]) == (b, [b])
    assert _elect(admin, "unclean", 0) == 84  # led again: ELECTION_NOT_NEEDED
    beat(a, False)


def _acl_filters(admin: KafkaAdminClient, service: ControllerService, zk: KazooClient) -> None:
    """DescribeAcls and DeleteAcls with LITERAL, PREFIXED and ANY filters (MATCH is in test_admin_protocol)."""
    T, G = ResourceType.TOPIC, ResourceType.GROUP
    LIT, PRE, ANY = (
        ACLResourcePatternType.LITERAL,
        ACLResourcePatternType.PREFIXED,
        ACLResourcePatternType.ANY,
    )
    ours = {"User:flt-alice", "User:flt-bob", "User:flt-carol", "User:flt-dave"}

    def acl(principal: str, rtype: ResourceType, name: str, pattern: ACLResourcePatternType) -> ACL:
        return ACL(
            principal, "*", ACLOperation.READ, ACLPermissionType.ALLOW, ResourcePattern(rtype, name, pattern)
        )

    made = admin.create_acls(
        [
            acl("User:flt-alice", T, "flt-orders", LIT),
            acl("User:flt-bob", T, "flt-ord", PRE),
            acl("User:flt-carol", T, "*", LIT),
            acl("User:flt-dave", G, "flt-orders", LIT),
        ]
    )
    assert made["failed"] == [] and len(made["succeeded"]) == 4

    def flt(rtype: ResourceType, name: str | None, pattern: ACLResourcePatternType) -> ACLFilter:
        return ACLFilter(
            None, None, ACLOperation.ANY, ACLPermissionType.ANY, ResourcePatternFilter(rtype, name, pattern)
        )

    def described(f: ACLFilter) -> set[str]:
        found, err = admin.describe_acls(f)
        assert err is None or err.errno == 0
        return {a.principal for a in found} & ours

    assert described(flt(T, "flt-orders", LIT)) == {"User:flt-alice"}  # not the prefix, not the wildcard
    assert described(flt(T, "flt-ord", PRE)) == {"User:flt-bob"}
    assert described(flt(T, "flt-orders", PRE)) == set()  # PREFIXED names the prefix itself
    assert described(flt(ResourceType.ANY, "flt-orders", ANY)) == {"User:flt-alice", "User:flt-dave"}
    assert described(flt(T, None, ANY)) == {"User:flt-alice", "User:flt-bob", "User:flt-carol"}
    assert described(flt(T, None, LIT)) == {"User:flt-alice", "User:flt-carol"}

    start = service.log.end_offset
    deleted = admin.delete_acls([flt(T, "flt-ord", PRE), flt(T, "flt-orders", LIT)])
    assert [{a.principal for a in matched} for _f, matched, _err in deleted] == [
        {"User:flt-bob"},
        {"User:flt-alice"},
    ]
    batch = _one_batch_holds(service, start, lambda r: r.name == "RemoveAccessControlEntryRecord")
    assert len(batch) == 2
    assert (
        not zk.exists("/kafka-acl-extended/prefixed/Topic/flt-ord")
        or json.loads(zk.get("/kafka-acl-extended/prefixed/Topic/flt-ord")[0])["acls"] == []
    )
    assert (
        not zk.exists("/kafka-acl/Topic/flt-orders")
        or json.loads(zk.get("/kafka-acl/Topic/flt-orders")[0])["acls"] == []
    )
    deleted = admin.delete_acls([flt(ResourceType.ANY, "flt-orders", ANY)])
    assert [{a.principal for a in matched} for _f, matched, _err in deleted] == [{"User:flt-dave"}]
    assert described(flt(ResourceType.ANY, None, ANY)) == {"User:flt-carol"}
    assert json.loads(zk.get("/kafka-acl/Topic/*")[0])["acls"][0]["principal"] == "User:flt-carol"


def test_placement_defaults_one_batch_unclean_election_and_acl_filters(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    spec = SPEC.model_copy(update={"brokers": 6, "racks": 3, "pending_deletions": 0})
    set_default_properties({"num.partitions": "5", "default.replication.factor": "2"})
    try:
        with cluster(zk, zk_connect, spec):
            ids = sorted(int(b) for b in zk.get_children(P.BROKER_IDS))
            assert len(ids) == 6
            running = commands.start_controller(
                zk_connect, str(log_dir), yes=True, broker_wait_timeout=60, session_timeout_ms=120_000
            )
            try:
                service = running.service
                assert service is not None
                epochs = _register_with_racks(service, ids)
                assert running.wait_until(lambda r: service.admin is not None, 60), running.error
                host, port = running.address
                admin = KafkaAdminClient(bootstrap_servers=f"{host}:{port}", request_timeout_ms=30_000)
                confluent = admin_mod.AdminClient({"bootstrap.servers": f"{host}:{port}"})
                try:
                    _placement(admin, confluent, zk, ids)
                    _defaults(running.address, service, zk)
                    _one_batch(running.address, service, zk)
                    _acl_filters(admin, service, zk)
                    _unclean(admin, running.address, service, zk, epochs)
                finally:
                    admin.close()
            finally:
                result = running.stop()
            assert result is not None and result.state_after == "DualWriteMetadata"
            assert_consistent(zk, log_dir)
    finally:
        set_default_properties({})
