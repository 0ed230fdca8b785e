"""Kafka's ZooKeeper layout: tree → image, image → znodes, round trips in memory and through ZooKeeper."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from kazoo.client import KazooClient

from migrator.errors import BadInputError
from migrator.model import (
    Acl,
    Broker,
    ClientQuota,
    ClusterImage,
    ConfigEntity,
    ControllerZnode,
    DelegationToken,
    Endpoint,
    FeatureRange,
    FeatureZnode,
    MigrationZnode,
    Partition,
    ProducerIdBlock,
    Reassignment,
    ScramCredential,
    Topic,
    ZkControlState,
)
from migrator.zk import codec, config_codec
from migrator.zk import paths as P
from migrator.zk.layout import LayoutProblem, broker_znodes, image_from_tree, znodes_from_image
from migrator.zk.tree import ZkTree, ZNode

SESSION = 0x1234


def tree_of(
    znodes: Mapping[str, bytes | None], stats: Mapping[str, Mapping[str, int]] | None = None
) -> ZkTree:
    """A ZkTree as the bulk reader returns it: children lists, and per-node stats where given."""
    stats = stats or {}
    children: dict[str, list[str]] = {}
    for path in znodes:
        children.setdefault(P.parent(path), []).append(path.rsplit("/", 1)[1])
    tree = ZkTree()
    for n, (path, data) in enumerate(znodes.items(), start=1):
        fields = {"czxid": n, "mzxid": n, **stats.get(path, {})}
        kids = children.get(path)
        tree.add(ZNode(path=path, data=data, num_children=len(kids or ()), **fields), kids)
    return tree


def partition(pid: int, replicas: list[int], **kw: Any) -> Partition:
    return Partition(
        partition=pid,
        replicas=replicas,
        isr=kw.pop("isr", replicas),
        leader=kw.pop("leader", replicas[0]),
        **kw,
    )


def rich_image() -> tuple[ClusterImage, ZkControlState]:
    """Every kind of metadata, in the order image_from_tree yields lists (documented canonical order)."""
    plaintext = Endpoint(
        listener="PLAINTEXT", host="b1.example.com", port=9092, security_protocol="PLAINTEXT"
    )
    brokers = {
        1: Broker(
            id=1,
            endpoints=[
                plaintext,
                Endpoint(listener="SSL", host="b1.example.com", port=9093, security_protocol="SSL"),
            ],
            rack="rack-a",
            features={"metadata.version": FeatureRange(min_version=1, max_version=21)},
            timestamp=1700000000001,
            zk_epoch=101,
        ),
        2: Broker(
            id=2,
            endpoints=[Endpoint(listener="INTERNAL", host="::1", port=9094, security_protocol="SASL_SSL")],
            json_version=4,
            jmx_port=9999,
            timestamp=1700000000002,
            zk_epoch=102,
        ),
    }
    topics = {
        "orders": Topic(
            name="orders",
            topic_id="Zq2m0cV2R8m5-mT3y0Bq8g",
            partitions={
                0: partition(0, [1, 2, 3], isr=[1, 2], leader_epoch=4, partition_epoch=5, controller_epoch=7),
                1: partition(
                    1,
                    [2, 3, 1, 4],
                    isr=[2],
                    leader_epoch=9,
                    partition_epoch=2,
                    controller_epoch=7,
                    leader_recovery_state=1,
                    adding_replicas=[4],
                    removing_replicas=[1],
                ),
                2: partition(2, [3, 1, 2], has_state=False),  # how Kafka migrates a missing state znode
            },
        ),
        "legacy": Topic(
            name="legacy",
            topic_id=None,
            json_version=2,
            partitions={
                0: partition(0, [1, 2, 3], adding_replicas=[3], leader=2, isr=[2, 1], controller_epoch=3)
            },
        ),
        "ancient": Topic(
            name="ancient",
            topic_id=None,
            json_version=1,
            partitions={0: partition(0, [2], controller_epoch=1)},
        ),
        "doomed": Topic(
            name="doomed",
            topic_id="AAAAAAAAAAAAAAAAAAAAAQ",
            partitions={0: partition(0, [1], leader=-1, isr=[], controller_epoch=7)},
        ),
    }
    configs = {
        ("TOPIC", "orders"): ConfigEntity(
            resource_type="TOPIC",
            name="orders",
            configs={"retention.ms": "86400000", "cleanup.policy": "compact"},
        ),
        ("TOPIC", "ghost"): ConfigEntity(resource_type="TOPIC", name="ghost", configs={"retention.ms": "1"}),
        ("BROKER", ""): ConfigEntity(resource_type="BROKER", name="", configs={"log.cleaner.threads": "2"}),
        ("BROKER", "1"): ConfigEntity(
            resource_type="BROKER", name="1", configs={"ssl.keystore.location": "/etc/k.jks"}
        ),
    }
    client_quotas = [
        ClientQuota(entity={"user": None}, values={"producer_byte_rate": 1048576.0}),
        ClientQuota(
            entity={"user": "alice@example.com"},
            values={"consumer_byte_rate": 2097152.0, "request_percentage": 50.5},
        ),
        ClientQuota(entity={"client-id": None}, values={"controller_mutation_rate": 10.0}),
        ClientQuota(entity={"client-id": "app 1"}, values={"producer_byte_rate": 1024.0}),
        ClientQuota(entity={"user": None, "client-id": None}, values={"request_percentage": 200.0}),
        ClientQuota(
            entity={"user": "alice@example.com", "client-id": "app1"}, values={"producer_byte_rate": 4096.0}
        ),
        ClientQuota(entity={"ip": "10.0.0.1"}, values={"connection_creation_rate": 100.0}),
        ClientQuota(entity={"ip": None}, values={"connection_creation_rate": 10.0}),
    ]
    scram = {
        (user, mech): ScramCredential(
            user=user,
            mechanism=mech,
            salt=b"salt" + mech.encode(),
            stored_key=b"\x00stored",
            server_key=b"\xffserver",
            iterations=4096,
        )
        for user, mech in [
            ("alice@example.com", "SCRAM-SHA-256"),
            ("alice@example.com", "SCRAM-SHA-512"),
            ("bob", "SCRAM-SHA-512"),
        ]
    }

    def acl(
        rtype: str, name: str, pattern: str, principal: str, op: str, perm: str = "ALLOW", host: str = "*"
    ) -> Acl:
        return Acl(
            resource_type=rtype,
            resource_name=name,
            pattern_type=pattern,
            principal=principal,
            host=host,
            operation=op,
            permission_type=perm,
        )

    acls = [
        acl("CLUSTER", "kafka-cluster", "LITERAL", "User:admin", "CLUSTER_ACTION"),
        acl("DELEGATION_TOKEN", "tok-1", "LITERAL", "User:alice", "DESCRIBE"),
        acl("TOPIC", "orders", "LITERAL", "User:alice", "READ"),
        acl("TOPIC", "orders", "LITERAL", "User:mallory", "WRITE", "DENY", "10.0.0.66"),
        acl("TRANSACTIONAL_ID", "tx-1", "LITERAL", "User:alice", "WRITE"),
        acl("USER", "alice", "LITERAL", "User:admin", "CREATE_TOKENS"),
        acl("GROUP", "app-", "PREFIXED", "User:alice", "READ"),
        acl("TOPIC", "*", "PREFIXED", "User:*", "DESCRIBE_CONFIGS"),
    ]
    tokens = {
        "tok-1": DelegationToken(
            token_id="tok-1",
            owner="User:alice",
            requester="User:admin",
            renewers=["User:bob", "User:carol@example.com"],
            issue_timestamp=1700000000000,
            max_timestamp=1700604800000,
            expiry_timestamp=1700086400000,
        ),
        "tok-old": DelegationToken(
            token_id="tok-old",
            owner="User:bob",
            requester="User:bob",
            issue_timestamp=1,
            max_timestamp=3,
            expiry_timestamp=2,
            json_version=1,
        ),
    }
    image = ClusterImage(
        cluster_id="MkU3OEVBNTcwNTJENDM2Qg",
        brokers=brokers,
        topics=topics,
        configs=configs,
        client_quotas=client_quotas,
        scram_credentials=scram,
        acls=acls,
        producer_id_block=ProducerIdBlock(broker=2, block_start=5000, block_end=5999),
        delegation_tokens=tokens,
        features=FeatureZnode(
            json_version=2, status=1, features={"metadata.version": {"max_version_level": 7}}
        ),
        pending_deletions=["doomed"],
        reassignments=[Reassignment(topic="orders", partition=1, replicas=[2, 3, 4])],
    )
    control = ZkControlState(
        controller=ControllerZnode(
            broker_id=3000, timestamp=1700000000000, kraft_controller_epoch=12, is_kraft=True, ephemeral=False
        ),
        controller_zk_version=0,
        controller_epoch=8,
        controller_epoch_zk_version=3,
        migration=MigrationZnode(
            kraft_controller_id=3000,
            kraft_controller_epoch=12,
            kraft_metadata_offset=52341,
            kraft_metadata_epoch=12,
            zk_version=6,
        ),
    )
    return image, control


def stats_for(image: ClusterImage, control: ZkControlState) -> dict[str, dict[str, int]]:
    """The stats ZooKeeper would report for this image: epochs are znode versions."""
    stats: dict[str, dict[str, int]] = {}
    for t in image.topics.values():
        for p in t.partitions.values():
            stats[P.partition_state_path(t.name, p.partition)] = {"version": p.partition_epoch}
    for b in image.brokers.values():
        stats[P.broker_path(b.id)] = {"czxid": b.zk_epoch or 0, "ephemeral_owner": SESSION}
    assert control.migration is not None and control.controller_epoch_zk_version is not None
    stats[P.MIGRATION] = {"version": control.migration.zk_version}
    stats[P.CONTROLLER_EPOCH] = {"version": control.controller_epoch_zk_version}
    stats[P.CONTROLLER] = {"version": control.controller_zk_version or 0}
    return stats


def test_round_trip_of_a_rich_image() -> None:
    image, control = rich_image()
    znodes = {**znodes_from_image(image, control), **broker_znodes(image)}
    tree = tree_of(znodes, stats_for(image, control))
    result = image_from_tree(tree)
    assert result.problems == []
    assert result.image == image
    assert result.control == control.model_copy(update={"zxid": tree.max_zxid})
    # and back to the very same bytes
    assert {**znodes_from_image(result.image, result.control), **broker_znodes(result.image)} == znodes


def test_znodes_are_kafkas_layout() -> None:
    image, control = rich_image()
    znodes = znodes_from_image(image, control)
    order = list(znodes)
    for i, path in enumerate(order):  # parents first
        parent = P.parent(path)
        assert parent == "/" or order.index(parent) < i, path
    assert order[:3] == ["/consumers", "/brokers", "/brokers/ids"]
    for path in P.PERSISTENT_PATHS:
        assert path in znodes
    assert (
        znodes[P.LATEST_PRODUCER_ID_BLOCK]
        == b'{"version":1,"broker":2,"block_start":"5000","block_end":"5999"}'
    )
    assert znodes["/brokers/topics/orders/partitions/0/state"] == (
        b'{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":4,"isr":[1,2]}'
    )
    assert (
        "/brokers/topics/orders/partitions/2" in znodes
        and "/brokers/topics/orders/partitions/2/state" not in znodes
    )
    assert znodes["/config/topics/ancient"] == b'{"version":1,"config":{}}'  # every topic has a config znode
    assert znodes["/config/topics/ghost"] == b'{"version":1,"config":{"retention.ms":"1"}}'
    assert json.loads(znodes["/config/brokers/<default>"])["config"] == {"log.cleaner.threads": "2"}
    alice = json.loads(znodes["/config/users/alice%40example.com"])["config"]
    assert alice["consumer_byte_rate"] == "2097152" and alice["request_percentage"] == "50.5"
    assert alice["SCRAM-SHA-256"].startswith("salt=") and alice["SCRAM-SHA-256"].endswith(",iterations=4096")
    assert set(json.loads(znodes["/config/users/bob"])["config"]) == {"SCRAM-SHA-512"}
    assert (
        znodes["/config/users/<default>/clients/<default>"]
        == b'{"version":1,"config":{"request_percentage":"200"}}'
    )
    assert (
        "/config/clients/app%201" in znodes
        and "/config/ips/10.0.0.1" in znodes
        and "/config/ips/<default>" in znodes
    )
    for resource_type in P.ACL_RESOURCE_TYPES:  # createAclPaths
        assert (
            P.acl_type_path("LITERAL", resource_type) in znodes
            and P.acl_type_path("PREFIXED", resource_type) in znodes
        )
    assert P.LITERAL_ACL_CHANGES in znodes and P.EXTENDED_ACL_CHANGES in znodes
    orders_acls = json.loads(znodes["/kafka-acl/Topic/orders"])["acls"]
    assert [a["principal"] for a in orders_acls] == ["User:alice", "User:mallory"]
    assert "/kafka-acl-extended/prefixed/Group/app-" in znodes
    assert json.loads(znodes["/delegation_token/tokens/tok-1"])["owner"] == "User%3Aalice"
    assert P.TOKEN_CHANGES in znodes
    assert znodes["/admin/delete_topics/doomed"] == b""
    assert json.loads(znodes[P.REASSIGN_PARTITIONS])["partitions"] == [
        {"topic": "orders", "partition": 1, "replicas": [2, 3, 4]}
    ]
    assert znodes[P.CONTROLLER_EPOCH] == b"8"
    assert json.loads(znodes[P.CONTROLLER])["isKRaft"] is True
    assert json.loads(znodes[P.MIGRATION])["kraft_metadata_offset"] == 52341
    assert all(not p.startswith(P.BROKER_IDS + "/") for p in znodes)  # ephemeral: broker_znodes only
    assert set(broker_znodes(image)) == {"/brokers/ids/1", "/brokers/ids/2"}


def test_znodes_of_a_bare_image() -> None:
    znodes = znodes_from_image(ClusterImage())
    assert list(znodes) == [
        "/consumers",
        "/brokers",
        "/brokers/ids",
        "/brokers/topics",
        "/config",
        "/config/changes",
        "/admin",
        "/admin/delete_topics",
        "/brokers/seqid",
        "/isr_change_notification",
        "/log_dir_event_notification",
        "/config/topics",
        "/config/clients",
        "/config/users",
        "/config/brokers",
        "/config/ips",
    ]
    assert set(znodes.values()) == {b""}  # /latest_producer_id_block: Kafka would choke on empty data
    result = image_from_tree(tree_of(znodes))
    assert result.image == ClusterImage() and result.problems == []
    assert result.control.controller is None and result.control.migration is None


def test_state_controller_epoch_of_partitions_from_kraft() -> None:
    """A partition that came from KRaft has no ZK controller epoch; Kafka writes the KRaft one."""
    p = partition(0, [1, 2])  # controller_epoch None
    image = ClusterImage(topics={"t": Topic(name="t", topic_id="AAAAAAAAAAAAAAAAAAAAAQ", partitions={0: p})})
    state = "/brokers/topics/t/partitions/0/state"
    assert json.loads(znodes_from_image(image)[state])["controller_epoch"] == 0
    zk_only = ZkControlState(controller=ControllerZnode(broker_id=1, json_version=2), controller_epoch=5)
    assert json.loads(znodes_from_image(image, zk_only)[state])["controller_epoch"] == 5
    kraft = ZkControlState(
        controller=ControllerZnode(broker_id=3000, kraft_controller_epoch=12, ephemeral=False),
        controller_epoch=6,
    )
    assert json.loads(znodes_from_image(image, kraft)[state])["controller_epoch"] == 12
    assert P.CONTROLLER not in znodes_from_image(image, zk_only)  # a ZK controller's znode is ephemeral


def test_missing_state_is_migrated_as_kafka_does() -> None:
    topic = codec.encode_topic(
        Topic(
            name="t",
            topic_id="AAAAAAAAAAAAAAAAAAAAAQ",
            partitions={3: partition(3, [5, 6, 7]), 4: partition(4, [6], adding_replicas=[7])},
        )
    )
    tree = tree_of(
        {
            "/brokers": b"",
            "/brokers/topics": b"",
            "/brokers/topics/t": topic,
            "/brokers/topics/t/partitions": b"",
        }
    )
    parts = image_from_tree(tree).image.topics["t"].partitions
    assert parts[3] == Partition(partition=3, replicas=[5, 6, 7], isr=[5, 6, 7], leader=5, has_state=False)
    assert parts[4].adding_replicas == [7] and parts[4].isr == [6] and not parts[4].has_state


def test_partitions_are_real_models() -> None:
    """The hot loop builds partitions without validation; they must behave like validated ones."""
    image, control = rich_image()
    tree = tree_of({**znodes_from_image(image, control), **broker_znodes(image)}, stats_for(image, control))
    got = image_from_tree(tree).image.topics["orders"].partitions[1]
    same = Partition.model_validate(got.model_dump())
    assert got == same and same == got and repr(got) == repr(same)
    assert got.model_dump_json() == same.model_dump_json()
    assert got.model_fields_set == same.model_fields_set
    got.leader = 3  # assignment works and is tracked as on any model
    assert got.leader == 3 and got != same
    assert got.model_copy(update={"leader": 2}) == same


def test_quota_entity_names_and_defaults() -> None:
    config = config_codec.encode_config
    tree = tree_of(
        {
            "/config": b"",
            "/config/users": b"",
            "/config/users/CN%3DAlice%2COU%3Dx": config(
                {
                    "producer_byte_rate": "10",
                    "SCRAM-SHA-256": "salt=YQ==,stored_key=Yg==,server_key=Yw==,iterations=4096",
                }
            ),
            "/config/users/CN%3DAlice%2COU%3Dx/clients": b"",
            "/config/users/CN%3DAlice%2COU%3Dx/clients/my+app": config({"consumer_byte_rate": "20"}),
            "/config/users/only-a-parent": None,  # created by createRecursive with null data
            "/config/users/only-a-parent/clients": None,
            "/config/users/only-a-parent/clients/c": config({"request_percentage": "12.5"}),
            "/config/clients": b"",
            "/config/clients/<default>": config({"producer_byte_rate": "1"}),
            "/config/ips": b"",
            "/config/ips/%3A%3A1": config({"connection_creation_rate": "5"}),
            "/config/brokers": b"",
            "/config/brokers/<default>": config({"a": "b"}),
            "/config/brokers/7": config({}),  # an emptied entity carries nothing
            "/config/topics": b"",
        }
    )
    image = image_from_tree(tree).image
    assert [q.entity for q in image.client_quotas] == [
        {"user": "CN=Alice,OU=x"},
        {"client-id": None},
        {"user": "CN=Alice,OU=x", "client-id": "my app"},
        {"user": "only-a-parent", "client-id": "c"},
        {"ip": "::1"},
    ]
    assert image.client_quotas[0].values == {"producer_byte_rate": 10.0}
    assert list(image.scram_credentials) == [("CN=Alice,OU=x", "SCRAM-SHA-256")]
    assert image.scram_credentials[("CN=Alice,OU=x", "SCRAM-SHA-256")].salt == b"a"
    assert image.configs == {
        ("BROKER", ""): ConfigEntity(resource_type="BROKER", name="", configs={"a": "b"})
    }


def test_strict_raises_the_first_problem_and_lenient_collects_them() -> None:
    good_state = codec.encode_partition_state(1, 0, [1], 1)
    topic = codec.encode_topic(
        Topic(
            name="t",
            topic_id="AAAAAAAAAAAAAAAAAAAAAQ",
            partitions={0: partition(0, [1]), 1: partition(1, [1])},
        )
    )
    broker = codec.encode_broker(
        Broker(
            id=1, endpoints=[Endpoint(listener="PLAINTEXT", host="h", port=1, security_protocol="PLAINTEXT")]
        )
    )
    znodes: dict[str, bytes | None] = {
        "/cluster": b"",
        "/cluster/id": b'{"version":"1","id":"x"',
        "/brokers": b"",
        "/brokers/ids": b"",
        "/brokers/ids/1": broker,
        "/brokers/ids/abc": broker,
        "/brokers/ids/2": b'{"version":6}',
        "/brokers/topics": b"",
        "/brokers/topics/t": topic,
        "/brokers/topics/t/partitions": b"",
        "/brokers/topics/t/partitions/0": b"",
        "/brokers/topics/t/partitions/0/state": good_state,
        "/brokers/topics/t/partitions/1": b"",
        "/brokers/topics/t/partitions/1/state": b'{"leader":"one"}',
        "/brokers/topics/future": b'{"version":4,"partitions":{}}',
        "/brokers/topics/empty": b'{"version":3,"partitions":{"0":[]}}',
        "/config": b"",
        "/config/users": b"",
        "/config/users/alice": config_codec.encode_config({"SCRAM-SHA-256": "salt=nope"}),
        "/config/users/bad%zz": config_codec.encode_config({"producer_byte_rate": "1"}),
        "/config/clients": b"",
        "/config/clients/c": config_codec.encode_config({"producer_byte_rate": "lots"}),
        "/config/topics": b"",
        "/config/topics/t": b"not json",
        "/latest_producer_id_block": b"",
        "/kafka-acl": b"",
        "/kafka-acl/Planet": b"",
        "/kafka-acl/Planet/earth": b"",
        "/kafka-acl/Topic": b"",
        "/kafka-acl/Topic/t": b'{"version":1,"acls":[{"principal":"User:a"}]}',
        "/delegation_token": b"",
        "/delegation_token/tokens": b"",
        "/delegation_token/tokens/x": b"{}",
        "/feature": b'{"version":3}',
        "/admin": b"",
        "/admin/reassign_partitions": b"[]",
        "/controller": b"{",
        "/controller_epoch": b"eight",
        "/migration": b'{"version":1}',
    }
    with pytest.raises(BadInputError) as e:
        image_from_tree(tree_of(znodes))
    assert str(e.value).startswith("/cluster/id: malformed cluster id JSON at byte 23")
    result = image_from_tree(tree_of(znodes), strict=False)
    by_path = {p.path: p.message for p in result.problems}
    assert all(isinstance(p, LayoutProblem) for p in result.problems)
    assert set(by_path) == {
        "/cluster/id",
        "/brokers/ids/abc",
        "/brokers/ids/2",
        "/brokers/topics/empty",
        "/brokers/topics/future",
        "/brokers/topics/t/partitions/1/state",
        "/config/topics/t",
        "/config/users/alice",
        "/config/users/bad%zz",
        "/config/clients/c",
        "/latest_producer_id_block",
        "/kafka-acl/Planet",
        "/kafka-acl/Topic/t",
        "/delegation_token/tokens/x",
        "/feature",
        "/admin/reassign_partitions",
        "/controller",
        "/controller_epoch",
        "/migration",
    }
    assert (
        by_path["/brokers/ids/2"]
        == "unknown broker registration version 6 (zk2kraft reads version 1, 2, 3, 4, 5)"
    )
    assert "unknown topic version 4" in by_path["/brokers/topics/future"]
    assert "salt=nope" not in by_path["/config/users/alice"]
    assert all("\n" not in m for m in by_path.values())
    image = result.image
    assert list(image.brokers) == [1]  # the good ones are still read
    t = image.topics["t"]
    assert t.partitions[0].has_state and not t.partitions[1].has_state  # a bad state counts as missing
    assert set(image.topics) == {"t", "empty"} and image.topics["empty"].partitions == {}
    assert image.cluster_id is None and image.features is None and image.producer_id_block is None
    assert image.scram_credentials == {} and image.client_quotas == [] and image.acls == []
    assert result.control.controller is None and result.control.controller_epoch is None
    assert result.control.migration is None and result.control.zxid == len(znodes)


def test_control_state() -> None:
    zk_controller = b'{"version":2,"brokerid":1,"timestamp":"1600000000000","kraftControllerEpoch":-1}'
    tree = tree_of(
        {
            P.CONTROLLER: zk_controller,
            P.CONTROLLER_EPOCH: b"8",
            P.MIGRATION: codec.encode_migration(MigrationZnode()),
        },
        {
            P.CONTROLLER: {"version": 0, "ephemeral_owner": SESSION, "mzxid": 40},
            P.CONTROLLER_EPOCH: {"version": 7, "mzxid": 41},
            P.MIGRATION: {"version": 2, "mzxid": 42},
        },
    )
    control = image_from_tree(tree).control
    assert control.controller == ControllerZnode(broker_id=1, timestamp=1600000000000, ephemeral=True)
    assert (control.controller_zk_version, control.controller_epoch, control.controller_epoch_zk_version) == (
        0,
        8,
        7,
    )
    assert control.migration == MigrationZnode(zk_version=2)
    assert control.zxid == 42


@pytest.mark.zk
def test_round_trip_through_zookeeper(zk: KazooClient) -> None:
    """Write the image with kazoo, read it back with plain kazoo get/get_children, decode it."""
    image, control = rich_image()
    for path, data in znodes_from_image(image, control).items():
        zk.create(path, data)
    for path, data in broker_znodes(image).items():
        zk.create(path, data, ephemeral=True)
    # Epochs are znode versions: rewrite to reach them, as controllers and brokers do.
    bumps = {
        P.partition_state_path(t.name, p.partition): p.partition_epoch
        for t in image.topics.values()
        for p in t.partitions.values()
        if p.has_state
    }
    assert control.migration is not None and control.controller_epoch_zk_version is not None
    bumps[P.MIGRATION] = control.migration.zk_version
    bumps[P.CONTROLLER_EPOCH] = control.controller_epoch_zk_version
    for path, version in bumps.items():
        data, _ = zk.get(path)
        for _ in range(version):
            zk.set(path, data)

    tree = ZkTree()
    stack = ["/"]
    while stack:
        path = stack.pop()
        data, stat = zk.get(path)
        kids = zk.get_children(path)
        tree.add(
            ZNode(
                path=path,
                data=data,
                version=stat.version,
                czxid=stat.czxid,
                mzxid=stat.mzxid,
                ephemeral_owner=stat.ephemeralOwner,
                num_children=stat.numChildren,
                data_length=stat.dataLength,
                pzxid=stat.pzxid,
            ),
            kids,
        )
        stack.extend(f"{'' if path == '/' else path}/{k}" for k in kids)

    result = image_from_tree(tree)
    assert result.problems == []
    expected = image.model_copy(deep=True)
    for broker in expected.brokers.values():
        broker.zk_epoch = zk.exists(P.broker_path(broker.id)).czxid  # the registration's czxid
    assert result.image == expected
    assert result.control == control.model_copy(update={"zxid": tree.max_zxid})
    assert tree.max_zxid > 0 and not result.control.controller.ephemeral  # type: ignore[union-attr]
