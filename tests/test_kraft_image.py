"""records ↔ model: Kafka's migration order, replay semantics and round trips (migrator.kraft.image)."""

from __future__ import annotations

import time
import uuid

import pytest

from migrator.errors import BadInputError
from migrator.kraft.image import (
    ImageBuilder,
    ReplayResult,
    broker_registration_record,
    records_from_image,
    replay,
    snapshot_records,
)
from migrator.kraft.records import (
    MetadataRecord,
    decode_value,
    encode_value,
    kafka_to_uuid,
    record,
    uuid_to_kafka,
)
from migrator.model import (
    Acl,
    Broker,
    ClientQuota,
    ClusterImage,
    ConfigEntity,
    DelegationToken,
    Endpoint,
    FeatureRange,
    Partition,
    ProducerIdBlock,
    ScramCredential,
    Topic,
    replayed_partition,
)

ORDERS_ID = "Zq2m0cV2R8m5-mT3y0Bq8g"
PAYMENTS_ID = uuid_to_kafka(uuid.UUID(int=0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0))
GONE_ID = uuid_to_kafka(uuid.UUID(int=77))


def rich_image() -> ClusterImage:
    """One of every kind of metadata a ZooKeeper cluster holds."""
    return ClusterImage(
        cluster_id="MkU3OEVBNTcwNTJENDM2Qg",
        brokers={
            1: Broker(
                id=1,
                endpoints=[
                    Endpoint(listener="PLAINTEXT", host="h1", port=9092, security_protocol="PLAINTEXT")
                ],
                rack="r1",
                zk_epoch=4242,
            )
        },
        topics={
            "orders": Topic(
                name="orders",
                topic_id=ORDERS_ID,
                partitions={
                    0: Partition(
                        partition=0,
                        replicas=[1, 2, 3],
                        isr=[1, 2],
                        leader=1,
                        leader_epoch=4,
                        partition_epoch=7,
                        controller_epoch=3,
                    ),
                    1: Partition(
                        partition=1,
                        replicas=[2, 3, 1, 4],
                        isr=[2, 3],
                        leader=2,
                        leader_epoch=1,
                        partition_epoch=2,
                        adding_replicas=[4],
                        removing_replicas=[1],
                    ),
                    2: Partition(
                        partition=2,
                        replicas=[3, 1],
                        isr=[3],
                        leader=3,
                        leader_recovery_state=1,
                        leader_epoch=9,
                        partition_epoch=12,
                    ),
                },
            ),
            "payments": Topic(
                name="payments",
                topic_id=PAYMENTS_ID,
                partitions={0: Partition(partition=0, replicas=[2], isr=[2], leader=-1, leader_epoch=3)},
            ),
            "being-deleted": Topic(
                name="being-deleted",
                topic_id=GONE_ID,
                partitions={0: Partition(partition=0, replicas=[1], isr=[1], leader=1)},
            ),
        },
        configs={
            ("TOPIC", "orders"): ConfigEntity(
                resource_type="TOPIC",
                name="orders",
                configs={"retention.ms": "86400000", "cleanup.policy": "compact"},
            ),
            ("BROKER", "1"): ConfigEntity(
                resource_type="BROKER",
                name="1",
                configs={"log.cleaner.threads": "2", "ssl.key.password": "hunter2"},
            ),
            ("BROKER", ""): ConfigEntity(resource_type="BROKER", name="", configs={"num.io.threads": "16"}),
        },
        client_quotas=[
            ClientQuota(entity={"user": "alice"}, values={"producer_byte_rate": 1048576.0}),
            ClientQuota(entity={"user": "alice", "client-id": "app1"}, values={"consumer_byte_rate": 2048.0}),
            ClientQuota(entity={"client-id": None}, values={"request_percentage": 50.0}),
            ClientQuota(
                entity={"user": None}, values={"producer_byte_rate": 10.0, "consumer_byte_rate": 20.0}
            ),
            ClientQuota(entity={"ip": "10.0.0.1"}, values={"connection_creation_rate": 5.0}),
        ],
        scram_credentials={
            ("alice", "SCRAM-SHA-256"): ScramCredential(
                user="alice",
                mechanism="SCRAM-SHA-256",
                salt=b"salt-a",
                stored_key=b"sk-a" * 8,
                server_key=b"srv-a" * 6,
                iterations=8192,
            ),
            ("bob", "SCRAM-SHA-512"): ScramCredential(
                user="bob",
                mechanism="SCRAM-SHA-512",
                salt=b"salt-b",
                stored_key=b"sk-b" * 16,
                server_key=b"srv-b" * 12,
                iterations=4096,
            ),
        },
        acls=[
            Acl(
                resource_type="TOPIC",
                resource_name="orders",
                pattern_type="LITERAL",
                principal="User:alice",
                host="*",
                operation="READ",
                permission_type="ALLOW",
            ),
            Acl(
                resource_type="GROUP",
                resource_name="app-",
                pattern_type="PREFIXED",
                principal="User:bob",
                host="10.0.0.2",
                operation="ALL",
                permission_type="DENY",
            ),
            Acl(
                resource_type="CLUSTER",
                resource_name="kafka-cluster",
                pattern_type="LITERAL",
                principal="User:admin",
                host="*",
                operation="IDEMPOTENT_WRITE",
                permission_type="ALLOW",
            ),
            Acl(
                resource_type="TRANSACTIONAL_ID",
                resource_name="tx",
                pattern_type="LITERAL",
                principal="User:app",
                host="*",
                operation="DESCRIBE",
                permission_type="ALLOW",
                acl_id="AAAAAAAAAAAAAAAAAAAAKg",
            ),
        ],
        producer_id_block=ProducerIdBlock(broker=2, block_start=5000, block_end=5999),
        delegation_tokens={
            "tok1": DelegationToken(
                token_id="tok1",
                owner="User:alice",
                requester="User:alice",
                renewers=["User:bob"],
                issue_timestamp=1700000000000,
                max_timestamp=1700604800000,
                expiry_timestamp=1700086400000,
            )
        },
        pending_deletions=["being-deleted"],
    )


def comparable(image: ClusterImage) -> ClusterImage:
    """Drop what a migration does not carry: brokers, ZooKeeper-only fields, ACL ids, pending deletions."""
    out = image.model_copy(deep=True)
    out.brokers = {}
    out.cluster_id = None
    for name in list(out.pending_deletions):
        out.topics.pop(name, None)
    out.pending_deletions = []
    for topic in out.topics.values():
        topic.json_version = 3
        for p in topic.partitions.values():
            p.controller_epoch = None
            p.has_state = True
    for acl in out.acls:
        acl.acl_id = None
    for token in out.delegation_tokens.values():
        token.json_version = 3
    out.client_quotas.sort(key=lambda q: sorted((k, v or "") for k, v in q.entity.items()))
    out.acls.sort(key=lambda a: a.key())
    return out


def names(records: list) -> list[str]:
    return [r.name for r in records]


def test_migration_order_matches_kafka():
    recs = list(records_from_image(rich_image()))
    seq = names(recs)
    # Per topic: TopicRecord, its ConfigRecords, then all its PartitionRecords.
    assert seq[:6] == [
        "TopicRecord",
        "ConfigRecord",
        "ConfigRecord",
        "PartitionRecord",
        "PartitionRecord",
        "PartitionRecord",
    ]
    assert seq[6:8] == ["TopicRecord", "PartitionRecord"]
    # Then broker configs, quotas, SCRAM, producer ids, ACLs, tokens.
    rest = seq[8:]
    kinds = [k for i, k in enumerate(rest) if i == 0 or rest[i - 1] != k]
    assert kinds == [
        "ConfigRecord",
        "ClientQuotaRecord",
        "UserScramCredentialRecord",
        "ProducerIdsRecord",
        "AccessControlEntryRecord",
        "DelegationTokenRecord",
    ]
    assert "being-deleted" not in {r.fields.get("Name") for r in recs}
    assert all(r.version == 0 for r in recs)
    # Every record survives the codec.
    for r in recs:
        assert decode_value(encode_value(r)) == r


def test_record_field_values():
    recs = list(records_from_image(rich_image()))
    topic = recs[0]
    assert topic.fields == {"Name": "orders", "TopicId": kafka_to_uuid(ORDERS_ID)}
    broker_default = [r for r in recs if r.name == "ConfigRecord" and r.fields["ResourceType"] == 4]
    assert {(r.fields["ResourceName"], r.fields["Name"]) for r in broker_default} >= {("", "num.io.threads")}
    pid = next(r for r in recs if r.name == "ProducerIdsRecord")
    assert pid.fields == {"BrokerId": 2, "BrokerEpoch": -1, "NextProducerId": 6000}
    quota = [r for r in recs if r.name == "ClientQuotaRecord"]
    assert quota[1].fields["Entity"] == [
        {"EntityType": "user", "EntityName": "alice"},
        {"EntityType": "client-id", "EntityName": "app1"},
    ]
    assert quota[2].fields["Entity"] == [{"EntityType": "client-id", "EntityName": None}]
    acls = [r for r in recs if r.name == "AccessControlEntryRecord"]
    assert [
        (a.fields["ResourceType"], a.fields["PatternType"], a.fields["Operation"], a.fields["PermissionType"])
        for a in acls
    ] == [
        (2, 3, 3, 3),
        (3, 4, 2, 2),
        (4, 3, 12, 3),
        (5, 3, 8, 3),
    ]
    assert len({a.fields["Id"] for a in acls}) == 4
    assert acls[3].fields["Id"] == kafka_to_uuid("AAAAAAAAAAAAAAAAAAAAKg")
    assert acls[0].fields["Id"].version == 4
    scram = next(r for r in recs if r.name == "UserScramCredentialRecord")
    assert scram.fields["Mechanism"] == 1 and scram.fields["Iterations"] == 8192


def test_partition_without_state_uses_kafka_defaults():
    image = ClusterImage(
        topics={
            "t": Topic(
                name="t",
                topic_id=ORDERS_ID,
                partitions={
                    0: Partition(
                        partition=0, replicas=[3, 1], isr=[], leader=-1, leader_epoch=5, has_state=False
                    )
                },
            )
        }
    )
    part = list(records_from_image(image))[1]
    assert (
        part.fields["Isr"],
        part.fields["Leader"],
        part.fields["LeaderEpoch"],
        part.fields["PartitionEpoch"],
    ) == (
        [3, 1],
        3,
        0,
        0,
    )


def test_topic_without_id_is_refused_by_name():
    image = rich_image()
    image.topics["legacy"] = Topic(name="legacy", topic_id=None)
    with pytest.raises(BadInputError, match="legacy"):
        list(records_from_image(image))


def test_unknown_enum_name_is_refused():
    image = ClusterImage(
        acls=[
            Acl(
                resource_type="TOPIC",
                resource_name="x",
                pattern_type="LITERAL",
                principal="User:a",
                host="*",
                operation="READ_ALL",
                permission_type="ALLOW",
            )
        ]
    )
    with pytest.raises(BadInputError, match="READ_ALL"):
        list(records_from_image(image))


def test_round_trip_image_records_replay():
    image = rich_image()
    recs = list(records_from_image(image))
    result = replay(enumerate(recs))
    assert comparable(result.image) == comparable(image)
    assert result.last_offset == len(recs) - 1
    assert result.counts["PartitionRecord"] == 4
    # Through the byte codec as well.
    again = replay((i, decode_value(encode_value(r))) for i, r in enumerate(recs))
    assert comparable(again.image) == comparable(image)
    # Replay gives ACLs the ids the records carried.
    ids = {uuid_to_kafka(r.fields["Id"]) for r in recs if r.name == "AccessControlEntryRecord"}
    assert {a.acl_id for a in result.image.acls} == ids


def test_snapshot_records_rebuild_everything():
    image = rich_image()
    recs = [
        record("FeatureLevelRecord", 0, Name="metadata.version", FeatureLevel=21),
        record("ZkMigrationStateRecord", 0, ZkMigrationState=2),
        broker_registration_record(image.brokers[1]),
        record("FenceBrokerRecord", 0, Id=1, Epoch=-1),
        record(
            "RegisterControllerRecord",
            0,
            ControllerId=3000,
            IncarnationId=uuid.uuid4(),
            ZkMigrationReady=True,
            EndPoints=[{"Name": "CONTROLLER", "Host": "c", "Port": 9093, "SecurityProtocol": 0}],
            Features=[{"Name": "metadata.version", "MinSupportedVersion": 1, "MaxSupportedVersion": 21}],
        ),
        *records_from_image(image),
    ]
    result = replay(enumerate(recs))
    rebuilt = replay(enumerate(snapshot_records(result)))
    assert names(list(snapshot_records(result)))[:2] == ["FeatureLevelRecord", "ZkMigrationStateRecord"]
    assert rebuilt.image == result.image
    assert rebuilt.feature_levels == {"metadata.version": 21}
    assert rebuilt.migration_state == 2
    assert rebuilt.controllers == result.controllers


def test_broker_registration_record_v3_round_trip():
    broker = Broker(
        id=7,
        endpoints=[
            Endpoint(listener="PLAINTEXT", host="h", port=9092, security_protocol="PLAINTEXT"),
            Endpoint(listener="SSL", host="h", port=9093, security_protocol="SSL"),
        ],
        rack=None,
        features={"metadata.version": FeatureRange(min_version=1, max_version=21)},
        incarnation_id="J8aAPcfLQt2bqs1JT_rMgQ",
        broker_epoch=55,
        fenced=False,
        is_migrating_zk_broker=True,
        log_dirs=["ExUFlBSkTjmc52J83W4EKg"],
    )
    rec = broker_registration_record(broker)
    assert rec.name == "RegisterBrokerRecord" and rec.version == 3
    assert rec.fields["EndPoints"][1] == {"Name": "SSL", "Host": "h", "Port": 9093, "SecurityProtocol": 1}
    result = replay([(0, decode_value(encode_value(rec)))])
    assert result.image.brokers[7] == broker
    with pytest.raises(BadInputError, match="BOGUS"):
        broker_registration_record(
            Broker(id=1, endpoints=[Endpoint(listener="X", host="h", port=1, security_protocol="BOGUS")])
        )


# -- replay semantics ------------------------------------------------------------------------------

TID = uuid.UUID(int=99)


def base_records() -> list:
    return [
        record("TopicRecord", 0, Name="t", TopicId=TID),
        record(
            "PartitionRecord",
            0,
            PartitionId=0,
            TopicId=TID,
            Replicas=[1, 2, 3],
            Isr=[1, 2, 3],
            Leader=1,
            LeaderEpoch=5,
            PartitionEpoch=10,
        ),
    ]


def part(result):
    return result.image.topics["t"].partitions[0]


def test_partition_change_isr_only_bumps_partition_epoch():
    recs = base_records() + [record("PartitionChangeRecord", 0, PartitionId=0, TopicId=TID, Isr=[1, 2])]
    p = part(replay(enumerate(recs)))
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ([1, 2], 1, 5, 11)
    assert p.replicas == [1, 2, 3]


def test_partition_change_leader_bumps_both_epochs_and_minus_one_means_no_leader():
    recs = base_records() + [
        record("PartitionChangeRecord", 0, PartitionId=0, TopicId=TID, Leader=2, Isr=[2, 3]),
        record("PartitionChangeRecord", 0, PartitionId=0, TopicId=TID, Leader=-1, LeaderRecoveryState=1),
    ]
    p = part(replay(enumerate(recs)))
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch, p.leader_recovery_state) == (
        -1,
        [2, 3],
        7,
        12,
        1,
    )


def test_partition_change_reassignment_fields():
    recs = base_records() + [
        record(
            "PartitionChangeRecord",
            0,
            PartitionId=0,
            TopicId=TID,
            Replicas=[1, 2, 3, 4],
            AddingReplicas=[4],
            RemovingReplicas=[1],
        ),
        record(
            "PartitionChangeRecord",
            0,
            PartitionId=0,
            TopicId=TID,
            Replicas=[2, 3, 4],
            AddingReplicas=[],
            RemovingReplicas=[],
        ),
    ]
    result = replay(enumerate(recs[:3]))
    assert (part(result).adding_replicas, part(result).removing_replicas) == ([4], [1])
    p = part(replay(enumerate(recs)))
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.partition_epoch) == ([2, 3, 4], [], [], 12)


def test_partition_change_for_unknown_partition_names_offset():
    recs = base_records() + [record("PartitionChangeRecord", 0, PartitionId=9, TopicId=TID, Isr=[1])]
    with pytest.raises(BadInputError, match="offset 2.*t-9"):
        replay(enumerate(recs))
    with pytest.raises(BadInputError, match="unknown topic id"):
        replay([(0, record("PartitionRecord", 0, PartitionId=0, TopicId=uuid.uuid4()))])


def test_remove_topic_drops_partitions_and_configs():
    recs = base_records() + [
        record("ConfigRecord", 0, ResourceType=2, ResourceName="t", Name="retention.ms", Value="1"),
        record("RemoveTopicRecord", 0, TopicId=TID),
        record("TopicRecord", 0, Name="t", TopicId=uuid.UUID(int=100)),
    ]
    result = replay(enumerate(recs))
    assert result.image.topics["t"].topic_id == uuid_to_kafka(uuid.UUID(int=100))
    assert result.image.topics["t"].partitions == {}
    assert ("TOPIC", "t") not in result.image.configs


def test_config_null_value_deletes_and_empty_entity_disappears():
    recs = [
        record("ConfigRecord", 0, ResourceType=4, ResourceName="", Name="a", Value="1"),
        record("ConfigRecord", 0, ResourceType=4, ResourceName="", Name="b", Value="2"),
        record("ConfigRecord", 0, ResourceType=4, ResourceName="", Name="a", Value=None),
        record("ConfigRecord", 0, ResourceType=16, ResourceName="metrics", Name="interval.ms", Value="5"),
    ]
    result = replay(enumerate(recs))
    assert result.image.configs[("BROKER", "")].configs == {"b": "2"}
    assert result.image.configs[("CLIENT_METRICS", "metrics")].configs == {"interval.ms": "5"}
    result = replay(
        enumerate(
            recs[:2]
            + [record("ConfigRecord", 0, ResourceType=4, ResourceName="", Name=n, Value=None) for n in "ab"]
        )
    )
    assert result.image.configs == {}


def test_brokers_register_fence_unfence_change_unregister():
    reg = broker_registration_record(Broker(id=1, broker_epoch=10, fenced=True))
    recs = [
        reg,
        record("UnfenceBrokerRecord", 0, Id=1, Epoch=10),
    ]
    assert replay(enumerate(recs)).image.brokers[1].fenced is False
    recs += [
        record(
            "BrokerRegistrationChangeRecord", 1, BrokerId=1, BrokerEpoch=10, Fenced=1, InControlledShutdown=1
        )
    ]
    b = replay(enumerate(recs)).image.brokers[1]
    assert (b.fenced, b.in_controlled_shutdown) == (True, True)
    recs += [record("BrokerRegistrationChangeRecord", 0, BrokerId=1, BrokerEpoch=10, Fenced=-1)]
    assert replay(enumerate(recs)).image.brokers[1].fenced is False
    recs += [record("FenceBrokerRecord", 0, Id=1, Epoch=10)]
    assert replay(enumerate(recs)).image.brokers[1].fenced is True
    with pytest.raises(BadInputError, match="epoch 11"):
        replay(enumerate(recs + [record("UnregisterBrokerRecord", 0, BrokerId=1, BrokerEpoch=11)]))
    assert (
        replay(
            enumerate(recs + [record("UnregisterBrokerRecord", 0, BrokerId=1, BrokerEpoch=10)])
        ).image.brokers
        == {}
    )


def test_quota_scram_acl_token_removals():
    image = rich_image()
    recs = list(records_from_image(image))
    acl_id = next(r.fields["Id"] for r in recs if r.name == "AccessControlEntryRecord")
    recs += [
        record(
            "ClientQuotaRecord",
            0,
            Entity=[{"EntityType": "user", "EntityName": None}],
            Key="producer_byte_rate",
            Value=0.0,
            Remove=True,
        ),
        record(
            "ClientQuotaRecord",
            0,
            Entity=[{"EntityType": "ip", "EntityName": "10.0.0.1"}],
            Key="connection_creation_rate",
            Value=0.0,
            Remove=True,
        ),
        record("RemoveUserScramCredentialRecord", 0, Name="alice", Mechanism=1),
        record("RemoveAccessControlEntryRecord", 0, Id=acl_id),
        record("RemoveDelegationTokenRecord", 0, TokenId="tok1"),
    ]
    img = replay(enumerate(recs)).image
    quotas = {tuple(sorted(q.entity.items(), key=str)): q.values for q in img.client_quotas}
    assert quotas[(("user", None),)] == {"consumer_byte_rate": 20.0}
    assert (("ip", "10.0.0.1"),) not in quotas
    assert set(img.scram_credentials) == {("bob", "SCRAM-SHA-512")}
    assert len(img.acls) == 3 and uuid_to_kafka(acl_id) not in {a.acl_id for a in img.acls}
    assert img.delegation_tokens == {}


def test_features_migration_state_noop_controllers():
    recs = [
        record("FeatureLevelRecord", 0, Name="metadata.version", FeatureLevel=21),
        record("FeatureLevelRecord", 0, Name="kraft.version", FeatureLevel=1),
        record("FeatureLevelRecord", 0, Name="kraft.version", FeatureLevel=0),
        record("ZkMigrationStateRecord", 0, ZkMigrationState=2),
        record("NoOpRecord", 0),
        record(
            "RegisterControllerRecord",
            0,
            ControllerId=3000,
            IncarnationId=uuid.UUID(int=5),
            ZkMigrationReady=True,
        ),
        record("ProducerIdsRecord", 0, BrokerId=3, BrokerEpoch=-1, NextProducerId=12000),
    ]
    result = replay(enumerate(recs))
    assert result.feature_levels == {"metadata.version": 21}
    assert (result.migration_state, result.migration_state_offset, result.migration_state_name) == (
        2,
        3,
        "PRE_MIGRATION",
    )
    assert result.counts["NoOpRecord"] == 1 and result.last_offset == 6
    assert result.controllers[3000].zk_migration_ready is True
    assert result.image.producer_id_block == ProducerIdBlock(broker=3, block_start=11000, block_end=11999)


# -- KIP-868 transactions --------------------------------------------------------------------------


def test_committed_transaction_applies_at_end():
    builder = ImageBuilder()
    builder.replay(0, record("ZkMigrationStateRecord", 0, ZkMigrationState=2))
    builder.replay(1, record("BeginTransactionRecord", 0, Name="ZK Migration"))
    for i, r in enumerate(base_records(), start=2):
        builder.replay(i, r)
    builder.replay(4, record("ZkMigrationStateRecord", 0, ZkMigrationState=1))
    mid = builder.finish()
    assert mid.image.topics == {} and mid.migration_state == 2
    assert mid.open_transaction is not None and mid.open_transaction.pending_records == 3
    builder.replay(5, record("EndTransactionRecord", 0))
    done = builder.finish()
    assert "t" in done.image.topics and done.migration_state == 1 and done.migration_state_offset == 4
    assert done.open_transaction is None and done.committed_transactions == 1 and done.last_offset == 5


def test_aborted_transaction_is_discarded_and_redone():
    recs = [
        record("BeginTransactionRecord", 0, Name="ZK Migration"),
        *base_records(),
        record("AbortTransactionRecord", 0, Reason="Controller failover"),
        record("BeginTransactionRecord", 0, Name="ZK Migration"),
        record("TopicRecord", 0, Name="other", TopicId=uuid.UUID(int=5)),
        record("ZkMigrationStateRecord", 0, ZkMigrationState=1),
        record("EndTransactionRecord", 0),
    ]
    result = replay(enumerate(recs))
    assert set(result.image.topics) == {"other"}
    assert (result.aborted_transactions, result.committed_transactions) == (1, 1)
    assert result.counts["TopicRecord"] == 2 and result.migration_state == 1


def test_open_transaction_at_end_is_reported_not_applied():
    recs = [
        record("NoOpRecord", 0),
        record("BeginTransactionRecord", 0, Name="ZK Migration"),
        *base_records(),
    ]
    result = replay(enumerate(recs))
    assert result.image.topics == {}
    assert result.open_transaction is not None
    assert result.open_transaction.model_dump() == {
        "name": "ZK Migration",
        "begin_offset": 1,
        "pending_records": 2,
    }
    assert result.last_offset == 0


def test_the_bet_that_transactions_commit_gives_the_buffered_result_or_refuses(tmp_path, monkeypatch):
    """ImageBuilder(committed=True) applies a transaction's records as they come: a committed one
    ends exactly as the buffered replay; an aborted or open one, or one whose record does not
    apply, rolls back to the image kept at its BeginTransactionRecord and ends as the buffered
    replay too; where the image was too large to keep, it raises Uncommitted, and
    MetadataLog.load_image then replays buffered."""
    from migrator.kraft import image as image_mod
    from migrator.kraft.image import Uncommitted
    from migrator.kraft.log import MetadataLog

    committed = [
        record("ZkMigrationStateRecord", 0, ZkMigrationState=2),
        record("BeginTransactionRecord", 0, Name="ZK Migration"),
        *base_records(),
        record("ZkMigrationStateRecord", 0, ZkMigrationState=1),
        record("EndTransactionRecord", 0),
    ]
    bet = ImageBuilder(committed=True)
    for i, r in enumerate(committed):
        bet.replay(i, r)
    assert bet.finish().model_dump() == replay(enumerate(committed)).model_dump()
    aborted = [*committed[:-1], record("AbortTransactionRecord", 0, Reason="failover")]
    unknown_topic = record("PartitionRecord", 0, PartitionId=0, TopicId=uuid.UUID(int=77), Replicas=[1],
                           Isr=[1], Leader=1, LeaderEpoch=0, PartitionEpoch=0)  # fmt: skip
    bad_then_aborted = [*committed[:2], unknown_topic, record("AbortTransactionRecord", 0, Reason="x")]
    after = [record("TopicRecord", 0, Name="after", TopicId=uuid.UUID(int=9))]
    for recs in (aborted, committed[:-1], bad_then_aborted, aborted + after, bad_then_aborted + after):
        bet = ImageBuilder(committed=True)  # the image at Begin is small: kept, and rolled back to
        for i, r in enumerate(recs):
            bet.replay(i, r)
        assert bet.finish().model_dump() == replay(enumerate(recs)).model_dump()
    bad_then_committed = [*bad_then_aborted[:-1], record("EndTransactionRecord", 0)]
    with pytest.raises(Uncommitted):  # its records were not kept: the buffered replay names the error
        ImageBuilder(committed=True).replay_all(enumerate(bad_then_committed))
    monkeypatch.setattr(image_mod, "ROLLBACK_MAX_PARTITIONS", -1)  # nothing is small enough to keep
    for recs, end in [(aborted, True), (committed[:-1], False), (bad_then_aborted, True)]:
        bet = ImageBuilder(committed=True)
        with pytest.raises(Uncommitted):
            for i, r in enumerate(recs):
                bet.replay(i, r)
            bet.finish()
        assert end or recs == committed[:-1]
        with MetadataLog.open(
            tmp_path / str(len(recs)) / str(end), writable=True, cluster_id="c", node_id=1
        ) as log:
            log.append(recs, 1)
            loaded = log.load_image().result
        buffered = replay(enumerate(recs))
        buffered.image.cluster_id = "c"  # the log's own, set by load_image
        # (offsets apart: the log's first batch is its LeaderChangeMessage)
        for field in ("image", "open_transaction", "aborted_transactions", "committed_transactions"):
            assert getattr(loaded, field) == getattr(buffered, field) or field == "open_transaction"
        assert (loaded.open_transaction is None) == (buffered.open_transaction is None)


def test_a_kept_image_with_an_open_transaction_goes_on_past_its_abort_without_a_replay(tmp_path):
    """An interrupted copy's image (its transaction open) continues past the AbortTransactionRecord
    appended later from the records after it only, as a fresh load of the directory gives it."""
    from migrator.kraft.log import MetadataLog

    recs = [
        record("ZkMigrationStateRecord", 0, ZkMigrationState=2),
        record("BeginTransactionRecord", 0, Name="ZK Migration"),
        *base_records(),
    ]
    with MetadataLog.open(tmp_path / "l", writable=True, cluster_id="c", node_id=1) as log:
        log.append(recs, 1)
        first = log.load_image().result
        assert first.open_transaction is not None and first.open_transaction.pending_records == 2
        log.append([record("AbortTransactionRecord", 0, Reason="x")], 1)
        log.append([record("TopicRecord", 0, Name="after", TopicId=uuid.UUID(int=9))], 1)
        reads: list[int] = []
        real_read = log.read

        def counted(from_offset: int = 0):  # type: ignore[no-untyped-def]
            reads.append(from_offset)
            return real_read(from_offset)

        log.read = counted  # type: ignore[method-assign]
        went_on = log.load_image().result
        assert reads == [first.last_offset + 1 + 3]  # from the abort on, not from the Begin
    with MetadataLog.open(tmp_path / "l") as fresh:
        again = fresh.load_image().result
    assert went_on.model_dump() == again.model_dump()


def test_transaction_marker_misuse_names_offset():
    with pytest.raises(BadInputError, match="offset 1: BeginTransactionRecord while"):
        replay(enumerate([record("BeginTransactionRecord", 0), record("BeginTransactionRecord", 0)]))
    with pytest.raises(BadInputError, match="offset 0: EndTransactionRecord without"):
        replay([(0, record("EndTransactionRecord", 0))])
    with pytest.raises(BadInputError, match="AbortTransactionRecord without"):
        replay([(3, record("AbortTransactionRecord", 0))])


def test_unknown_records_are_counted_not_applied():
    from migrator.kraft.records import OpaqueRecord

    result = replay([(0, OpaqueRecord(api_key=99, version=0, body=b"\x00"))])
    assert result.unknown_records == 1 and result.counts == {"UnknownRecord": 1}


def test_deep_copy_equals_and_shares_nothing_mutable() -> None:
    """ClusterImage.deep_copy (ImageBuilder's start) is model_copy(deep=True), only faster."""
    image = rich_image()
    image.topics["orders"].partitions[0].adding_replicas = [3]
    copied = image.deep_copy()
    assert copied == image and copied.model_dump() == image.model_dump()
    # Every list or dict inside a partition is its own: a new list field must join _PARTITION_LISTS.
    for name, topic in image.topics.items():
        assert copied.topics[name] is not topic
        for i, p in topic.partitions.items():
            c = copied.topics[name].partitions[i]
            assert c is not p
            for field, value in p.__dict__.items():
                if isinstance(value, list | dict | set):
                    assert c.__dict__[field] is not value, f"Partition.{field} is shared by the copy"
    copied.topics["orders"].partitions[0].isr.append(99)
    copied.brokers[next(iter(copied.brokers))].endpoints.clear()
    copied.acls.clear()
    assert 99 not in image.topics["orders"].partitions[0].isr
    assert all(b.endpoints for b in image.brokers.values()) and image.acls
    replay = ReplayResult(image=image, feature_levels={"metadata.version": 21})
    again = replay.deep_copy()
    assert again == replay and again.image is not image and again.feature_levels is not replay.feature_levels


@pytest.mark.parametrize(
    "fields",
    [
        dict(replicas=[1, 2, 3], isr=[1, 2], leader=1, leader_epoch=0, partition_epoch=0, leader_recovery_state=0,
             adding_replicas=[], removing_replicas=[]),
        dict(replicas=[4, 5, 6, 7], isr=[6], leader=-1, leader_epoch=9, partition_epoch=31, leader_recovery_state=1,
             adding_replicas=[7], removing_replicas=[4]),
    ],
)  # fmt: skip
def test_replayed_partition_is_the_validated_partition(fields: dict) -> None:
    """The replay builds partitions without pydantic's validation: the same object, fields set included."""
    fast = replayed_partition(3, **fields)
    slow = Partition(partition=3, **fields)
    assert fast == slow and fast.model_dump() == slow.model_dump()
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.model_dump(exclude_unset=True) == slow.model_dump(exclude_unset=True)


def _quota_records(n: int, start: int = 0) -> list[MetadataRecord]:
    return [
        record(
            "ClientQuotaRecord",
            0,
            Entity=[{"EntityType": "client-id", "EntityName": f"c{i}"}],
            Key="producer_byte_rate",
            Value=float(i),
        )
        for i in range(start, start + n)
    ]


def _acl_records(n: int) -> list[MetadataRecord]:
    return [
        record(
            "AccessControlEntryRecord",
            0,
            Id=uuid.UUID(int=i + 1),
            ResourceType=2,
            ResourceName=f"t{i}",
            PatternType=3,
            Principal="User:alice",
            Host="*",
            Operation=3,
            PermissionType=3,
        )
        for i in range(n)
    ]


def test_quota_and_acl_replay_keeps_each_entity_once_through_removals_and_re_adds():
    """The replay's position maps (ACLs by id, quotas by entity) against the plain semantics: a
    removal moves the later entries, a re-add appends, a second key lands on the same entity."""
    recs = _quota_records(50)
    recs += [
        record(
            "ClientQuotaRecord",
            0,
            Entity=[{"EntityType": "client-id", "EntityName": f"c{i}"}],
            Key="producer_byte_rate",
            Value=0.0,
            Remove=True,
        )
        for i in range(0, 50, 3)
    ]
    recs += _quota_records(10)  # c0..c9 again: some removed above, some still there
    recs.append(
        record(
            "ClientQuotaRecord",
            0,
            Entity=[{"EntityType": "client-id", "EntityName": "c49"}],
            Key="consumer_byte_rate",
            Value=7.0,
        )
    )
    recs += _acl_records(20)
    recs.append(record("RemoveAccessControlEntryRecord", 0, Id=uuid.UUID(int=5)))
    recs += _acl_records(20)[::-1]  # each id again (id 5 comes back): replaced in place or re-added
    img = replay(enumerate(recs)).image
    names = [q.entity["client-id"] for q in img.client_quotas]
    assert (
        len(names)
        == len(set(names))
        == 50 - len(range(0, 50, 3)) + len([i for i in range(0, 10) if i % 3 == 0])
    )
    by_name = {q.entity["client-id"]: q.values for q in img.client_quotas}
    assert by_name["c49"] == {"producer_byte_rate": 49.0, "consumer_byte_rate": 7.0}
    assert by_name["c3"] == {"producer_byte_rate": 3.0}  # removed, then added again
    ids = [a.acl_id for a in img.acls]
    assert len(ids) == len(set(ids)) == 20


def test_a_replay_of_many_quota_entities_and_acls_is_linear():
    """Each record scanned the whole list for its key: 20,000 client-quota entities took 110 s in the
    copy's commit (the real-Kafka bench). Four times the records must cost about four times the CPU,
    not sixteen (the quadratic scan); the best of three runs each, in CPU time, against the load."""

    def cpu(n: int) -> float:
        recs = list(enumerate(_quota_records(n) + _acl_records(n)))
        best = float("inf")
        for _ in range(3):
            t = time.process_time()
            replay(recs)
            best = min(best, time.process_time() - t)
        return best

    small, large = cpu(2000), cpu(8000)
    assert large / small < 8, f"2,000 entities: {small:.3f}s CPU, 8,000: {large:.3f}s ({large / small:.1f}x)"
