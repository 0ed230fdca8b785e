"""Metadata record values: reference bytes, kio cross-checks for every record type, round trips, errors.

The kio entities below are declared by hand from Kafka 3.9's JSON schemas, independently of
`migrator/kraft/schema.py`, so a wrong declaration there shows up as a byte mismatch here. (No
``from __future__ import annotations``: kio introspects real annotation objects.)
"""

import io
import re
import struct
import uuid
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, ClassVar, get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer
from kio.static.constants import EntityType

from migrator.errors import BadInputError
from migrator.kraft import record_codecs
from migrator.kraft import records as R
from migrator.kraft.records import (
    UNKNOWN_TAGGED_FIELDS,
    CorruptRecordError,
    InvalidUuidError,
    MetadataRecord,
    OpaqueRecord,
    decode_value,
    encode_value,
    kafka_to_uuid,
    record,
    uuid_to_kafka,
)
from migrator.kraft.schema import SCHEMAS, Field, schema_by_name

# ----------------------------------------------------------------------------------------------
# kio-style declarations (hand-written from apache/kafka 3.9 metadata/src/main/resources/common/metadata)


def k(kafka_type: str | None = None, tag: int | None = None, **kw: Any) -> Any:
    meta: dict[str, Any] = {}
    if kafka_type is not None:
        meta["kafka_type"] = kafka_type
    if tag is not None:
        meta["tag"] = tag
    return field(metadata=meta, **kw)


def entity(version: int = 0, nested: bool = False):
    def wrap(cls):
        cls.__type__ = EntityType.nested if nested else EntityType.data
        cls.__version__ = version
        cls.__flexible__ = True
        cls.__annotations__.update(
            {"__type__": ClassVar, "__version__": ClassVar[int], "__flexible__": ClassVar[bool]}
        )
        return dataclass(frozen=True, slots=True, kw_only=True)(cls)

    return wrap


U = uuid.UUID
I32s = tuple[int, ...]


@entity(nested=True)
class BrokerEndpoint:
    name: str = k("string")
    host: str = k("string")
    port: int = k("uint16")
    security_protocol: int = k("int16")


@entity(nested=True)
class BrokerFeature:
    name: str = k("string")
    min_supported_version: int = k("int16")
    max_supported_version: int = k("int16")


@entity(0)
class RegisterBrokerRecordV0:
    broker_id: int = k("int32")
    incarnation_id: U = k("uuid")
    broker_epoch: int = k("int64")
    end_points: tuple[BrokerEndpoint, ...] = k()
    features: tuple[BrokerFeature, ...] = k()
    rack: str | None = k("string")
    fenced: bool = k("bool")


@entity(1)
class RegisterBrokerRecordV1:
    broker_id: int = k("int32")
    incarnation_id: U = k("uuid")
    broker_epoch: int = k("int64")
    end_points: tuple[BrokerEndpoint, ...] = k()
    features: tuple[BrokerFeature, ...] = k()
    rack: str | None = k("string")
    fenced: bool = k("bool")
    in_controlled_shutdown: bool = k("bool")


@entity(2)
class RegisterBrokerRecordV2:
    broker_id: int = k("int32")
    is_migrating_zk_broker: bool = k("bool")
    incarnation_id: U = k("uuid")
    broker_epoch: int = k("int64")
    end_points: tuple[BrokerEndpoint, ...] = k()
    features: tuple[BrokerFeature, ...] = k()
    rack: str | None = k("string")
    fenced: bool = k("bool")
    in_controlled_shutdown: bool = k("bool")


@entity(3)
class RegisterBrokerRecordV3:
    broker_id: int = k("int32")
    is_migrating_zk_broker: bool = k("bool")
    incarnation_id: U = k("uuid")
    broker_epoch: int = k("int64")
    end_points: tuple[BrokerEndpoint, ...] = k()
    features: tuple[BrokerFeature, ...] = k()
    rack: str | None = k("string")
    fenced: bool = k("bool")
    in_controlled_shutdown: bool = k("bool")
    log_dirs: tuple[U, ...] = k("uuid", tag=0, default=())


@entity()
class UnregisterBrokerRecord:
    broker_id: int = k("int32")
    broker_epoch: int = k("int64")


@entity()
class TopicRecord:
    name: str = k("string")
    topic_id: U = k("uuid")


@entity(0)
class PartitionRecordV0:
    partition_id: int = k("int32")
    topic_id: U = k("uuid")
    replicas: I32s = k("int32")
    isr: I32s = k("int32")
    removing_replicas: I32s = k("int32")
    adding_replicas: I32s = k("int32")
    leader: int = k("int32")
    leader_recovery_state: int = k("int8", tag=0, default=0)
    leader_epoch: int = k("int32")
    partition_epoch: int = k("int32")


@entity(1)
class PartitionRecordV1:
    partition_id: int = k("int32")
    topic_id: U = k("uuid")
    replicas: I32s = k("int32")
    isr: I32s = k("int32")
    removing_replicas: I32s = k("int32")
    adding_replicas: I32s = k("int32")
    leader: int = k("int32")
    leader_recovery_state: int = k("int8", tag=0, default=0)
    leader_epoch: int = k("int32")
    partition_epoch: int = k("int32")
    directories: tuple[U, ...] = k("uuid")


@entity(2)
class PartitionRecordV2:
    partition_id: int = k("int32")
    topic_id: U = k("uuid")
    replicas: I32s = k("int32")
    isr: I32s = k("int32")
    removing_replicas: I32s = k("int32")
    adding_replicas: I32s = k("int32")
    leader: int = k("int32")
    leader_recovery_state: int = k("int8", tag=0, default=0)
    leader_epoch: int = k("int32")
    partition_epoch: int = k("int32")
    directories: tuple[U, ...] = k("uuid")
    eligible_leader_replicas: I32s | None = k("int32", tag=1, default=None)
    last_known_elr: I32s | None = k("int32", tag=2, default=None)


@entity()
class ConfigRecord:
    resource_type: int = k("int8")
    resource_name: str = k("string")
    name: str = k("string")
    value: str | None = k("string")


@entity(0)
class PartitionChangeRecordV0:
    partition_id: int = k("int32")
    topic_id: U = k("uuid")
    isr: I32s | None = k("int32", tag=0, default=None)
    leader: int = k("int32", tag=1, default=-2)
    replicas: I32s | None = k("int32", tag=2, default=None)
    removing_replicas: I32s | None = k("int32", tag=3, default=None)
    adding_replicas: I32s | None = k("int32", tag=4, default=None)
    leader_recovery_state: int = k("int8", tag=5, default=-1)


@entity(1)
class PartitionChangeRecordV1:
    partition_id: int = k("int32")
    topic_id: U = k("uuid")
    isr: I32s | None = k("int32", tag=0, default=None)
    leader: int = k("int32", tag=1, default=-2)
    replicas: I32s | None = k("int32", tag=2, default=None)
    removing_replicas: I32s | None = k("int32", tag=3, default=None)
    adding_replicas: I32s | None = k("int32", tag=4, default=None)
    leader_recovery_state: int = k("int8", tag=5, default=-1)
    directories: tuple[U, ...] | None = k("uuid", tag=8, default=None)


@entity(2)
class PartitionChangeRecordV2:
    partition_id: int = k("int32")
    topic_id: U = k("uuid")
    isr: I32s | None = k("int32", tag=0, default=None)
    leader: int = k("int32", tag=1, default=-2)
    replicas: I32s | None = k("int32", tag=2, default=None)
    removing_replicas: I32s | None = k("int32", tag=3, default=None)
    adding_replicas: I32s | None = k("int32", tag=4, default=None)
    leader_recovery_state: int = k("int8", tag=5, default=-1)
    directories: tuple[U, ...] | None = k("uuid", tag=8, default=None)
    eligible_leader_replicas: I32s | None = k("int32", tag=6, default=None)
    last_known_elr: I32s | None = k("int32", tag=7, default=None)


@entity()
class FenceBrokerRecord:
    id: int = k("int32")
    epoch: int = k("int64")


@entity()
class UnfenceBrokerRecord:
    id: int = k("int32")
    epoch: int = k("int64")


@entity()
class RemoveTopicRecord:
    topic_id: U = k("uuid")


@entity()
class DelegationTokenRecord:
    owner: str = k("string")
    requester: str = k("string")
    renewers: tuple[str, ...] = k("string")
    issue_timestamp: int = k("int64")
    max_timestamp: int = k("int64")
    expiration_timestamp: int = k("int64")
    token_id: str = k("string")


@entity()
class UserScramCredentialRecord:
    name: str = k("string")
    mechanism: int = k("int8")
    salt: bytes = k("bytes")
    stored_key: bytes = k("bytes")
    server_key: bytes = k("bytes")
    iterations: int = k("int32")


@entity()
class FeatureLevelRecord:
    name: str = k("string")
    feature_level: int = k("int16")


@entity(nested=True)
class EntityData:
    entity_type: str = k("string")
    entity_name: str | None = k("string")


@entity()
class ClientQuotaRecord:
    entity: tuple[EntityData, ...] = k()
    key: str = k("string")
    value: float = k("float64")
    remove: bool = k("bool")


@entity()
class ProducerIdsRecord:
    broker_id: int = k("int32")
    broker_epoch: int = k("int64")
    next_producer_id: int = k("int64")


@entity(0)
class BrokerRegistrationChangeRecordV0:
    broker_id: int = k("int32")
    broker_epoch: int = k("int64")
    fenced: int = k("int8", tag=0, default=0)


@entity(1)
class BrokerRegistrationChangeRecordV1:
    broker_id: int = k("int32")
    broker_epoch: int = k("int64")
    fenced: int = k("int8", tag=0, default=0)
    in_controlled_shutdown: int = k("int8", tag=1, default=0)


@entity(2)
class BrokerRegistrationChangeRecordV2:
    broker_id: int = k("int32")
    broker_epoch: int = k("int64")
    fenced: int = k("int8", tag=0, default=0)
    in_controlled_shutdown: int = k("int8", tag=1, default=0)
    log_dirs: tuple[U, ...] = k("uuid", tag=2, default=())


@entity()
class AccessControlEntryRecord:
    id: U = k("uuid")
    resource_type: int = k("int8")
    resource_name: str = k("string")
    pattern_type: int = k("int8")
    principal: str = k("string")
    host: str = k("string")
    operation: int = k("int8")
    permission_type: int = k("int8")


@entity()
class RemoveAccessControlEntryRecord:
    id: U = k("uuid")


@entity()
class NoOpRecord:
    pass


@entity()
class ZkMigrationStateRecord:
    zk_migration_state: int = k("int8")


@entity()
class RemoveUserScramCredentialRecord:
    name: str = k("string")
    mechanism: int = k("int8")


@entity()
class BeginTransactionRecord:
    name: str | None = k("string", tag=0, default=None)


@entity()
class EndTransactionRecord:
    pass


@entity()
class AbortTransactionRecord:
    reason: str | None = k("string", tag=0, default=None)


@entity()
class RemoveDelegationTokenRecord:
    token_id: str = k("string")


@entity(nested=True)
class ControllerEndpoint:
    name: str = k("string")
    host: str = k("string")
    port: int = k("uint16")
    security_protocol: int = k("int16")


@entity(nested=True)
class ControllerFeature:
    name: str = k("string")
    min_supported_version: int = k("int16")
    max_supported_version: int = k("int16")


@entity()
class RegisterControllerRecord:
    controller_id: int = k("int32")
    incarnation_id: U = k("uuid")
    zk_migration_ready: bool = k("bool")
    end_points: tuple[ControllerEndpoint, ...] = k()
    features: tuple[ControllerFeature, ...] = k()


# ----------------------------------------------------------------------------------------------
# Sample values, Kafka-realistic and non-default so that every field is on the wire

T1 = uuid.UUID("7d4c4d3e-8f0a-4a7e-9a43-2c1e8d5b6f01")
T2 = uuid.UUID("00000000-0000-0000-0000-000000000001")  # DirectoryId.MIGRATING
T3 = uuid.UUID("f0e1d2c3-b4a5-9687-7869-5a4b3c2d1e0f")
ENDPOINTS = [
    {"Name": "PLAINTEXT", "Host": "broker-1.example.com", "Port": 9092, "SecurityProtocol": 0},
    {"Name": "SSL", "Host": "broker-1.example.com", "Port": 65535, "SecurityProtocol": 1},
]
FEATURES = [{"Name": "metadata.version", "MinSupportedVersion": 1, "MaxSupportedVersion": 21}]

SAMPLES: list[tuple[str, int, dict[str, Any], type]] = [
    (
        "RegisterBrokerRecord",
        0,
        dict(
            BrokerId=1,
            IncarnationId=T1,
            BrokerEpoch=17,
            EndPoints=ENDPOINTS,
            Features=FEATURES,
            Rack="r1",
            Fenced=False,
        ),
        RegisterBrokerRecordV0,
    ),
    (
        "RegisterBrokerRecord",
        1,
        dict(
            BrokerId=2,
            IncarnationId=T1,
            BrokerEpoch=1 << 40,
            EndPoints=ENDPOINTS,
            Features=[],
            Rack=None,
            Fenced=True,
            InControlledShutdown=True,
        ),
        RegisterBrokerRecordV1,
    ),
    (
        "RegisterBrokerRecord",
        2,
        dict(
            BrokerId=3,
            IsMigratingZkBroker=True,
            IncarnationId=T3,
            BrokerEpoch=-1,
            EndPoints=ENDPOINTS[:1],
            Features=FEATURES,
            Rack="",
            Fenced=False,
            InControlledShutdown=False,
        ),
        RegisterBrokerRecordV2,
    ),
    (
        "RegisterBrokerRecord",
        3,
        dict(
            BrokerId=4,
            IsMigratingZkBroker=True,
            IncarnationId=T3,
            BrokerEpoch=99,
            EndPoints=ENDPOINTS,
            Features=FEATURES,
            Rack="rack-é",
            Fenced=True,
            InControlledShutdown=False,
            LogDirs=[T1, T3],
        ),
        RegisterBrokerRecordV3,
    ),
    ("UnregisterBrokerRecord", 0, dict(BrokerId=5, BrokerEpoch=6), UnregisterBrokerRecord),
    ("TopicRecord", 0, dict(Name="orders", TopicId=T1), TopicRecord),
    (
        "PartitionRecord",
        0,
        dict(
            PartitionId=7,
            TopicId=T1,
            Replicas=[1, 2, 3],
            Isr=[1, 3],
            RemovingReplicas=[3],
            AddingReplicas=[4],
            Leader=1,
            LeaderRecoveryState=1,
            LeaderEpoch=12,
            PartitionEpoch=40,
        ),
        PartitionRecordV0,
    ),
    (
        "PartitionRecord",
        1,
        dict(
            PartitionId=0,
            TopicId=T1,
            Replicas=[1, 2, 3],
            Isr=[1, 2, 3],
            RemovingReplicas=[],
            AddingReplicas=[],
            Leader=2,
            LeaderRecoveryState=0,
            LeaderEpoch=0,
            PartitionEpoch=0,
            Directories=[T2, T2, T2],
        ),
        PartitionRecordV1,
    ),
    (
        "PartitionRecord",
        2,
        dict(
            PartitionId=3,
            TopicId=T3,
            Replicas=[5, 6],
            Isr=[5],
            RemovingReplicas=[],
            AddingReplicas=[],
            Leader=5,
            LeaderRecoveryState=1,
            LeaderEpoch=8,
            PartitionEpoch=9,
            Directories=[T1, T3],
            EligibleLeaderReplicas=[6],
            LastKnownElr=[],
        ),
        PartitionRecordV2,
    ),
    (
        "ConfigRecord",
        0,
        dict(ResourceType=2, ResourceName="orders", Name="retention.ms", Value=None),
        ConfigRecord,
    ),
    (
        "PartitionChangeRecord",
        0,
        dict(
            PartitionId=1,
            TopicId=T1,
            Isr=[1, 2],
            Leader=2,
            Replicas=None,
            RemovingReplicas=[],
            AddingReplicas=None,
            LeaderRecoveryState=0,
        ),
        PartitionChangeRecordV0,
    ),
    (
        "PartitionChangeRecord",
        1,
        dict(
            PartitionId=1,
            TopicId=T1,
            Isr=None,
            Leader=-1,
            Replicas=[1, 2, 3],
            RemovingReplicas=None,
            AddingReplicas=[3],
            LeaderRecoveryState=-1,
            Directories=[T2, T1, T3],
        ),
        PartitionChangeRecordV1,
    ),
    (
        "PartitionChangeRecord",
        2,
        dict(
            PartitionId=9,
            TopicId=T3,
            Isr=[4],
            Leader=-2,
            Replicas=None,
            RemovingReplicas=None,
            AddingReplicas=None,
            LeaderRecoveryState=1,
            Directories=None,
            EligibleLeaderReplicas=[5, 6],
            LastKnownElr=[7],
        ),
        PartitionChangeRecordV2,
    ),
    ("FenceBrokerRecord", 0, dict(Id=3, Epoch=1 << 33), FenceBrokerRecord),
    ("UnfenceBrokerRecord", 0, dict(Id=3, Epoch=4), UnfenceBrokerRecord),
    ("RemoveTopicRecord", 0, dict(TopicId=T3), RemoveTopicRecord),
    (
        "DelegationTokenRecord",
        0,
        dict(
            Owner="User:alice",
            Requester="User:admin",
            Renewers=["User:bob", "User:carol"],
            IssueTimestamp=1700000000000,
            MaxTimestamp=1700604800000,
            ExpirationTimestamp=1700086400000,
            TokenId="H7x0ZfjNQv6i9mD2",
        ),
        DelegationTokenRecord,
    ),
    (
        "UserScramCredentialRecord",
        0,
        dict(
            Name="alice",
            Mechanism=1,
            Salt=b"\x01\x02salt",
            StoredKey=bytes(range(32)),
            ServerKey=bytes(range(32, 64)),
            Iterations=4096,
        ),
        UserScramCredentialRecord,
    ),
    ("FeatureLevelRecord", 0, dict(Name="metadata.version", FeatureLevel=21), FeatureLevelRecord),
    (
        "ClientQuotaRecord",
        0,
        dict(
            Entity=[
                {"EntityType": "user", "EntityName": "alice"},
                {"EntityType": "client-id", "EntityName": None},
            ],
            Key="producer_byte_rate",
            Value=1048576.5,
            Remove=False,
        ),
        ClientQuotaRecord,
    ),
    ("ProducerIdsRecord", 0, dict(BrokerId=1, BrokerEpoch=-1, NextProducerId=5000), ProducerIdsRecord),
    (
        "BrokerRegistrationChangeRecord",
        0,
        dict(BrokerId=1, BrokerEpoch=2, Fenced=-1),
        BrokerRegistrationChangeRecordV0,
    ),
    (
        "BrokerRegistrationChangeRecord",
        1,
        dict(BrokerId=1, BrokerEpoch=2, Fenced=0, InControlledShutdown=1),
        BrokerRegistrationChangeRecordV1,
    ),
    (
        "BrokerRegistrationChangeRecord",
        2,
        dict(BrokerId=1, BrokerEpoch=2, Fenced=1, InControlledShutdown=1, LogDirs=[T1]),
        BrokerRegistrationChangeRecordV2,
    ),
    (
        "AccessControlEntryRecord",
        0,
        dict(
            Id=T1,
            ResourceType=2,
            ResourceName="orders",
            PatternType=3,
            Principal="User:alice",
            Host="*",
            Operation=3,
            PermissionType=3,
        ),
        AccessControlEntryRecord,
    ),
    ("RemoveAccessControlEntryRecord", 0, dict(Id=T3), RemoveAccessControlEntryRecord),
    ("NoOpRecord", 0, dict(), NoOpRecord),
    ("ZkMigrationStateRecord", 0, dict(ZkMigrationState=1), ZkMigrationStateRecord),
    ("RemoveUserScramCredentialRecord", 0, dict(Name="alice", Mechanism=2), RemoveUserScramCredentialRecord),
    ("BeginTransactionRecord", 0, dict(Name="zk-migration"), BeginTransactionRecord),
    ("EndTransactionRecord", 0, dict(), EndTransactionRecord),
    ("AbortTransactionRecord", 0, dict(Reason="controller failover"), AbortTransactionRecord),
    ("RemoveDelegationTokenRecord", 0, dict(TokenId="H7x0ZfjNQv6i9mD2"), RemoveDelegationTokenRecord),
    (
        "RegisterControllerRecord",
        0,
        dict(
            ControllerId=3000, IncarnationId=T1, ZkMigrationReady=True, EndPoints=ENDPOINTS, Features=FEATURES
        ),
        RegisterControllerRecord,
    ),
]


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def to_kio(cls: type, values: dict[str, Any]) -> Any:
    """Build a kio entity from CamelCase field values (lists become tuples, struct dicts entities)."""
    by_snake = {snake(name): value for name, value in values.items()}
    kwargs = {}
    for f in fields(cls):
        if f.name not in by_snake:
            continue
        value = by_snake[f.name]
        inner = [a for a in get_args(f.type) if a is not Ellipsis and a is not type(None)]
        element = get_args(inner[0])[0] if inner and get_args(inner[0]) else (inner[0] if inner else None)
        if isinstance(value, list):
            if element is not None and is_dataclass(element):
                value = tuple(to_kio(element, v) for v in value)
            else:
                value = tuple(value)
        kwargs[f.name] = value
    return cls(**kwargs)


def kio_bytes(obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


# ----------------------------------------------------------------------------------------------
# Reference examples (reference §3)


def test_noop_record_value_matches_reference_bytes():
    assert encode_value(record("NoOpRecord")) == bytes.fromhex("01140000")


def test_zk_migration_state_record_value_matches_reference_bytes():
    assert encode_value(record("ZkMigrationStateRecord", ZkMigrationState=1)) == bytes.fromhex("0115000100")


def test_reference_bytes_decode_back():
    rec = decode_value(bytes.fromhex("0115000100"))
    assert rec == MetadataRecord(21, 0, {"ZkMigrationState": 1})
    assert rec.name == "ZkMigrationStateRecord"


def test_every_record_type_has_a_kio_sample():
    covered = {(name, version) for name, version, _, _ in SAMPLES}
    for schema in SCHEMAS.values():
        assert (schema.name, schema.max_version) in covered, schema.name
    for name in ("RegisterBrokerRecord", "PartitionRecord", "PartitionChangeRecord"):
        for version in range(schema_by_name(name).max_version + 1):
            assert (name, version) in covered


@pytest.mark.parametrize(
    ("name", "version", "values", "kio_cls"), SAMPLES, ids=[f"{s[0]}-v{s[1]}" for s in SAMPLES]
)
def test_body_equals_kio_encoding(name, version, values, kio_cls):
    rec = record(name, version, **values)
    value = encode_value(rec)
    schema = schema_by_name(name)
    assert value[:3] == bytes([1, schema.api_key, version])
    assert value[3:] == kio_bytes(to_kio(kio_cls, values))
    assert decode_value(value) == rec


@pytest.mark.parametrize(
    ("name", "version", "kio_cls"),
    [(s[0], s[1], s[3]) for s in SAMPLES],
    ids=[f"{s[0]}-v{s[1]}-defaults" for s in SAMPLES],
)
def test_defaults_equal_kio_encoding_with_tagged_fields_omitted(name, version, kio_cls):
    """All defaults: tagged fields must be left out exactly as kio (and Kafka) leave them out."""
    rec = record(name, version)
    schema = schema_by_name(name)
    values = {}
    for f in schema.fields_in(version):
        value = rec.fields[f.name]
        if isinstance(value, list) and f.is_struct:
            value = []
        values[f.name] = value
    assert encode_value(rec)[3:] == kio_bytes(to_kio(kio_cls, values))


# ----------------------------------------------------------------------------------------------
# record(): defaults and validation


def test_record_fills_kafka_defaults_and_picks_highest_version():
    rec = record("PartitionRecord", TopicId=T1)
    assert rec.version == 2
    assert rec.fields["PartitionId"] == -1
    assert rec.fields["Leader"] == -1
    assert rec.fields["LeaderEpoch"] == -1
    assert rec.fields["LeaderRecoveryState"] == 0
    assert rec.fields["Replicas"] == [] and rec.fields["EligibleLeaderReplicas"] is None
    change = record("PartitionChangeRecord", version=0)
    assert change.fields["Leader"] == -2 and change.fields["LeaderRecoveryState"] == -1
    assert change.fields["Isr"] is None
    broker = record("RegisterBrokerRecord", version=0)
    assert broker.fields["Fenced"] is True and broker.fields["Rack"] == ""
    assert record("ProducerIdsRecord").fields["BrokerEpoch"] == -1


def test_record_defaults_are_fresh_lists():
    a = record("PartitionRecord")
    b = record("PartitionRecord")
    a.fields["Replicas"].append(1)
    assert b.fields["Replicas"] == []


def test_record_version_zero_has_only_its_fields():
    rec = record("PartitionRecord", version=0)
    assert "Directories" not in rec.fields and "LastKnownElr" not in rec.fields


def test_record_rejects_unknown_field_name():
    with pytest.raises(ValueError, match="has no field 'Leadr'"):
        record("PartitionRecord", Leadr=1)


def test_record_rejects_field_from_another_version_unless_default():
    with pytest.raises(ValueError, match="exists in other versions"):
        record("PartitionRecord", version=0, Directories=[T1])
    assert "Directories" not in record("PartitionRecord", version=0, Directories=[]).fields


def test_record_rejects_unknown_version_and_name():
    with pytest.raises(ValueError, match="no version 3"):
        record("PartitionRecord", version=3)
    with pytest.raises(ValueError, match="unknown metadata record type"):
        record("PartitonRecord")


def test_record_fills_struct_defaults_and_rejects_unknown_struct_fields():
    rec = record("RegisterBrokerRecord", EndPoints=[{"Name": "PLAINTEXT", "Host": "h", "Port": 9092}])
    assert rec.fields["EndPoints"] == [
        {"Name": "PLAINTEXT", "Host": "h", "Port": 9092, "SecurityProtocol": 0}
    ]
    with pytest.raises(ValueError, match="unknown field"):
        record("RegisterBrokerRecord", EndPoints=[{"Name": "x", "Hots": "h"}])


def test_encode_names_a_missing_or_bad_field():
    with pytest.raises(ValueError, match="missing field 'Leader"):
        encode_value(
            MetadataRecord(
                3,
                0,
                {
                    "PartitionId": 1,
                    "TopicId": T1,
                    "Replicas": [],
                    "Isr": [],
                    "RemovingReplicas": [],
                    "AddingReplicas": [],
                },
            )
        )
    with pytest.raises(ValueError, match="cannot encode TopicRecord v0"):
        encode_value(record("TopicRecord", Name=None, TopicId=T1))
    with pytest.raises(ValueError, match="cannot encode PartitionRecord"):
        encode_value(record("PartitionRecord", PartitionId=1 << 40))


def test_encode_values_matches_encode_value_and_handles_opaque_and_generators():
    recs = [record("TopicRecord", Name="a", TopicId=T1), OpaqueRecord(99, 1, b"\x00"), record("NoOpRecord")]
    expected = [encode_value(r) for r in recs]
    assert R.encode_values(recs) == expected
    assert R.encode_values(r for r in recs) == expected
    assert R.encode_values(recs[::2]) == expected[::2]
    with pytest.raises(ValueError, match="cannot encode TopicRecord"):
        R.encode_values([record("TopicRecord", Name=None)])


def test_schema_lookup():
    schema = schema_by_name("PartitionRecord")
    assert (schema.api_key, schema.name, schema.max_version) == (3, "PartitionRecord", 2)
    assert SCHEMAS[21].name == "ZkMigrationStateRecord"
    assert set(SCHEMAS) == {
        0,
        1,
        2,
        3,
        4,
        5,
        7,
        8,
        9,
        10,
        11,
        12,
        14,
        15,
        17,
        18,
        19,
        20,
        21,
        22,
        23,
        24,
        25,
        26,
        27,
    }


# ----------------------------------------------------------------------------------------------
# Unknown record types, versions and tagged fields


def test_unknown_api_key_is_opaque_and_reencodes_identically():
    raw = bytes([1, 99, 0]) + b"\x05\x06\x07"
    rec = decode_value(raw)
    assert rec == OpaqueRecord(99, 0, b"\x05\x06\x07")
    assert encode_value(rec) == raw


def test_unknown_version_of_known_record_is_opaque():
    body = encode_value(record("TopicRecord", Name="t", TopicId=T1))[3:]
    raw = bytes([1, 2, 7]) + body
    rec = decode_value(raw)
    assert isinstance(rec, OpaqueRecord) and rec.version == 7
    assert encode_value(rec) == raw


def test_multi_byte_frame_varints_decode():
    # apiKey 200 and version 300 need two-byte varints; they are unknown, so opaque.
    raw = b"\x01" + bytes([0xC8, 0x01]) + bytes([0xAC, 0x02]) + b"xyz"
    rec = decode_value(raw)
    assert rec == OpaqueRecord(200, 300, b"xyz")
    assert encode_value(rec) == raw


def test_unknown_tagged_fields_are_kept_and_written_back_in_order():
    base = encode_value(record("PartitionRecord", version=0, TopicId=T1, Replicas=[1], Isr=[1], Leader=1))
    # Replace the empty tagged section by: tag 0 (LeaderRecoveryState=1), tag 9 (unknown, 2 bytes).
    raw = base[:-1] + bytes([2, 0, 1, 1, 9, 2, 0xAB, 0xCD])
    rec = decode_value(raw)
    assert rec.fields["LeaderRecoveryState"] == 1
    assert rec.fields[UNKNOWN_TAGGED_FIELDS] == {9: b"\xab\xcd"}
    assert encode_value(rec) == raw


# ----------------------------------------------------------------------------------------------
# Uuids


def test_uuid_kafka_string_conversion():
    assert uuid_to_kafka(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert kafka_to_uuid("AAAAAAAAAAAAAAAAAAAAAQ") == uuid.UUID(int=1)
    # A topic id as ZooKeeper stores it (base64url, no padding, '-' and '_' allowed).
    s = "vB-r3_0jT4CZ6x8bk2LqKw"
    assert uuid_to_kafka(kafka_to_uuid(s)) == s
    assert len(uuid_to_kafka(T3)) == 22


@pytest.mark.parametrize(
    "bad", ["", "AAAA", "AAAAAAAAAAAAAAAAAAAAA=", "AAAAAAAAAAAAAAAAAAAA+/", "AAAAAAAAAAAAAAAAAAAAAR"]
)
def test_invalid_kafka_uuid_strings(bad):
    with pytest.raises(InvalidUuidError) as info:
        kafka_to_uuid(bad)
    assert isinstance(info.value, BadInputError) and isinstance(info.value, ValueError)
    assert repr(bad) in str(info.value)


@settings(deadline=None)
@given(st.uuids())
def test_uuid_string_round_trip(u):
    assert kafka_to_uuid(uuid_to_kafka(u)) == u


# ----------------------------------------------------------------------------------------------
# Corrupt values


PARTITION_VALUE = encode_value(
    record(
        "PartitionRecord",
        version=2,
        PartitionId=1,
        TopicId=T1,
        Replicas=[1, 2],
        Isr=[1],
        Leader=1,
        Directories=[T2, T2],
        LastKnownElr=[2],
    )
)


@pytest.mark.parametrize("cut", range(len(PARTITION_VALUE)))
def test_every_truncation_is_a_corrupt_record_naming_where(cut):
    with pytest.raises(CorruptRecordError) as info:
        decode_value(PARTITION_VALUE[:cut], where="seg.log offset 42")
    assert str(info.value).startswith("seg.log offset 42: corrupt metadata record: ")
    assert info.value.where == "seg.log offset 42"
    assert isinstance(info.value, BadInputError)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (PARTITION_VALUE + b"\x00", "1 bytes left over"),
        (b"\x02\x03\x00", "unknown frame version 2"),
        (b"\x00\x14\x00\x00", "frame version 0"),
        (b"\x01\x14", "shorter than its frame"),
        (b"\x01\x02\x00\x80\x80\x80\x80\x80\x01", "longer than 5 bytes"),
        (b"\x01\x02\x00\xff\xff\xff\xff\x7f", "exceeds 32 bits"),
        (b"\x01\x02\x00\x03\xff\xfe" + bytes(17), "not valid UTF-8"),
        (b"\x01\x02\x00\x00" + bytes(17), "non-nullable field TopicRecord.Name is null"),
        (b"\x01\x03\x00" + bytes(20) + b"\x7f", "claims 126 elements"),
        (
            encode_value(record("TopicRecord", Name="a", TopicId=T1))[:-1] + b"\x01\x03\x05\x00",
            "4 bytes past the end",
        ),
        (
            encode_value(record("PartitionRecord", version=0, TopicId=T1))[:-1] + b"\x01\x00\x02\x01\x00",
            "tagged field 0 of PartitionRecord declares 2 bytes but holds 1",
        ),
        (encode_value(record("TopicRecord", Name="a", TopicId=T1))[:-1] + b"\x7f", "tagged field count 127"),
    ],
)
def test_corrupt_values_give_one_clear_line(raw, reason):
    with pytest.raises(CorruptRecordError, match=re.escape(reason)) as info:
        decode_value(raw, where="00000000000000000000.log: record at offset 7")
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("00000000000000000000.log: record at offset 7: ")


def test_decode_accepts_memoryview_and_bytearray():
    assert decode_value(memoryview(PARTITION_VALUE)) == decode_value(bytearray(PARTITION_VALUE))


# ----------------------------------------------------------------------------------------------
# Shape-specialised decoding agrees with the general decoder


def test_shapes_with_equal_length_but_different_layout_decode_correctly():
    a = record("PartitionRecord", version=0, TopicId=T1, Replicas=[1, 2, 3], Isr=[1, 2])
    b = record("PartitionRecord", version=0, TopicId=T1, Replicas=[1, 2], Isr=[1, 2, 3])
    c = record("PartitionRecord", version=0, TopicId=T1, Replicas=[1, 2], Isr=[1, 2], AddingReplicas=[3])
    va, vb, vc = encode_value(a), encode_value(b), encode_value(c)
    assert len(va) == len(vb) == len(vc)
    for _ in range(3):
        for rec, raw in ((a, va), (b, vb), (c, vc), (a, va)):
            assert decode_value(raw) == rec


def test_shape_path_handles_tagged_fields_and_unknown_tags():
    plain = record("PartitionRecord", version=0, TopicId=T1, Replicas=[1], Isr=[1])
    tagged = record("PartitionRecord", version=0, TopicId=T1, Replicas=[1], Isr=[1], LeaderRecoveryState=1)
    for rec in (plain, tagged, plain, tagged):
        assert decode_value(encode_value(rec)) == rec


# ----------------------------------------------------------------------------------------------
# Property: encode -> decode is the identity for every record type and version

_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
}


def value_strategy(f: Field, version: int) -> st.SearchStrategy[Any]:
    t = f.element_type
    if f.is_struct:
        elem: st.SearchStrategy[Any] = st.fixed_dictionaries(
            {g.name: value_strategy(g, version) for g in f.fields if g.exists_in(version)}
        )
    elif t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        elem = st.integers(lo, hi)
    elif t == "float64":
        elem = st.floats(allow_nan=False)
    elif t == "bool":
        elem = st.booleans()
    elif t == "string":
        elem = st.text(max_size=40)
    elif t == "bytes":
        elem = st.binary(max_size=40)
    elif t == "uuid":
        elem = st.uuids()
    else:
        raise AssertionError(t)
    strategy = st.lists(elem, max_size=6) if f.is_array else elem
    if f.is_nullable_in(version):
        strategy = st.none() | strategy
    return strategy


ALL_VERSIONS = [(s.name, v) for s in SCHEMAS.values() for v in range(s.min_version, s.max_version + 1)]


@st.composite
def any_record(draw: Any) -> MetadataRecord:
    name, version = draw(st.sampled_from(ALL_VERSIONS))
    schema = schema_by_name(name)
    values = {f.name: draw(value_strategy(f, version)) for f in schema.fields_in(version)}
    return record(name, version, **values)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_record())
def test_encode_decode_is_identity_for_every_record_type_and_version(rec):
    raw = encode_value(rec)
    back = decode_value(raw)
    assert back == rec
    assert encode_value(back) == raw
    key = (rec.api_key << 16) | rec.version
    assert record_codecs.GENERAL_DECODERS[key](raw, 3, len(raw)) == rec.fields


@pytest.mark.parametrize(("name", "version"), ALL_VERSIONS, ids=[f"{n}-v{v}" for n, v in ALL_VERSIONS])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_each_version(name, version, data):
    schema = schema_by_name(name)
    values = {f.name: data.draw(value_strategy(f, version)) for f in schema.fields_in(version)}
    rec = record(name, version, **values)
    assert decode_value(encode_value(rec)) == rec


def test_big_arrays_and_long_strings_round_trip():
    rec = record(
        "PartitionRecord", version=0, TopicId=T1, Replicas=list(range(300)), Isr=list(range(100)), Leader=0
    )
    assert decode_value(encode_value(rec)) == rec
    long_name = "t" * 20000
    topic = record("TopicRecord", Name=long_name, TopicId=T1)
    raw = encode_value(topic)
    assert raw[3:6] == bytes([0xA1, 0x9C, 0x01])  # uvarint(20001)
    assert decode_value(raw) == topic


def test_int_fields_are_big_endian():
    raw = encode_value(record("FenceBrokerRecord", Id=0x01020304, Epoch=0x05060708090A0B0C))
    assert raw == b"\x01\x07\x00" + struct.pack(">iq", 0x01020304, 0x05060708090A0B0C) + b"\x00"
