"""Every version of LeaderAndIsr/StopReplica/UpdateMetadata, checked byte for byte against Kafka 3.9's schema.

The independent encoder is kafka-python's JSON-schema message codec (kafka.protocol.api_message), fed
the field lists of Kafka 3.9's `LeaderAndIsrRequest.json`, `StopReplicaRequest.json`,
`UpdateMetadataRequest.json` and their responses, written out below in the JSON's own shape (names,
types, versions, tags; the `about` texts left out). zk2kraft's declarations (kio entities in
`controller.zk_brokers.zk_broker_messages`) must produce the same bytes for the same values in every version, and
read them back.
"""

from __future__ import annotations

import dataclasses
import io
import uuid
from typing import Any

import pytest
from kafka_schema_codec import F, kafka_python_classes, kio_value, kp_value
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8

from migrator.controller.protocol.fast_writer import encode_fast
from migrator.controller.zk_brokers import zk_broker_messages as Z

# kafka-python reads its schema resources with importlib.resources.read_text, deprecated in 3.11.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


LAI_PARTITION_STATE = [
    F("TopicName", "string", "0-1"),
    F("PartitionIndex", "int32", "0+"),
    F("ControllerEpoch", "int32", "0+"),
    F("Leader", "int32", "0+"),
    F("LeaderEpoch", "int32", "0+"),
    F("Isr", "[]int32", "0+"),
    F("PartitionEpoch", "int32", "0+"),
    F("Replicas", "[]int32", "0+"),
    F("AddingReplicas", "[]int32", "3+"),
    F("RemovingReplicas", "[]int32", "3+"),
    F("IsNew", "bool", "1+", default="false"),
    F("LeaderRecoveryState", "int8", "6+", default="0"),
]
UM_PARTITION_STATE = [
    F("TopicName", "string", "0-4"),
    F("PartitionIndex", "int32", "0+"),
    F("ControllerEpoch", "int32", "0+"),
    F("Leader", "int32", "0+"),
    F("LeaderEpoch", "int32", "0+"),
    F("Isr", "[]int32", "0+"),
    F("ZkVersion", "int32", "0+"),
    F("Replicas", "[]int32", "0+"),
    F("OfflineReplicas", "[]int32", "4+"),
]
LAI_PARTITION_ERROR = [
    F("TopicName", "string", "0-4"),
    F("PartitionIndex", "int32", "0+"),
    F("ErrorCode", "int16", "0+"),
]

SCHEMAS: dict[str, dict[str, Any]] = {
    "LeaderAndIsrRequest": {
        "apiKey": 4,
        "type": "request",
        "validVersions": "0-7",
        "flexibleVersions": "4+",
        "fields": [
            F("ControllerId", "int32", "0+"),
            F("isKRaftController", "bool", "7+", default="false"),
            F("ControllerEpoch", "int32", "0+"),
            F("BrokerEpoch", "int64", "2+", default="-1"),
            F("Type", "int8", "5+"),
            F("UngroupedPartitionStates", "[]LeaderAndIsrPartitionState", "0-1"),
            F(
                "TopicStates",
                "[]LeaderAndIsrTopicState",
                "2+",
                fields=[
                    F("TopicName", "string", "2+"),
                    F("TopicId", "uuid", "5+"),
                    F("PartitionStates", "[]LeaderAndIsrPartitionState", "2+"),
                ],
            ),
            F(
                "LiveLeaders",
                "[]LeaderAndIsrLiveLeader",
                "0+",
                fields=[
                    F("BrokerId", "int32", "0+"),
                    F("HostName", "string", "0+"),
                    F("Port", "int32", "0+"),
                ],
            ),
        ],
        "commonStructs": [
            {"name": "LeaderAndIsrPartitionState", "versions": "0+", "fields": LAI_PARTITION_STATE}
        ],
    },
    "LeaderAndIsrResponse": {
        "apiKey": 4,
        "type": "response",
        "validVersions": "0-7",
        "flexibleVersions": "4+",
        "fields": [
            F("ErrorCode", "int16", "0+"),
            F("PartitionErrors", "[]LeaderAndIsrPartitionError", "0-4"),
            F(
                "Topics",
                "[]LeaderAndIsrTopicError",
                "5+",
                fields=[
                    F("TopicId", "uuid", "5+"),
                    F("PartitionErrors", "[]LeaderAndIsrPartitionError", "5+"),
                ],
            ),
        ],
        "commonStructs": [
            {"name": "LeaderAndIsrPartitionError", "versions": "0+", "fields": LAI_PARTITION_ERROR}
        ],
    },
    "StopReplicaRequest": {
        "apiKey": 5,
        "type": "request",
        "validVersions": "0-4",
        "flexibleVersions": "2+",
        "fields": [
            F("ControllerId", "int32", "0+"),
            F("isKRaftController", "bool", "4+", default="false"),
            F("ControllerEpoch", "int32", "0+"),
            F("BrokerEpoch", "int64", "1+", default="-1"),
            F("DeletePartitions", "bool", "0-2"),
            F(
                "UngroupedPartitions",
                "[]StopReplicaPartitionV0",
                "0",
                fields=[F("TopicName", "string", "0"), F("PartitionIndex", "int32", "0")],
            ),
            F(
                "Topics",
                "[]StopReplicaTopicV1",
                "1-2",
                fields=[F("Name", "string", "1-2"), F("PartitionIndexes", "[]int32", "1-2")],
            ),
            F(
                "TopicStates",
                "[]StopReplicaTopicState",
                "3+",
                fields=[
                    F("TopicName", "string", "3+"),
                    F(
                        "PartitionStates",
                        "[]StopReplicaPartitionState",
                        "3+",
                        fields=[
                            F("PartitionIndex", "int32", "3+"),
                            F("LeaderEpoch", "int32", "3+", default="-1"),
                            F("DeletePartition", "bool", "3+"),
                        ],
                    ),
                ],
            ),
        ],
    },
    "StopReplicaResponse": {
        "apiKey": 5,
        "type": "response",
        "validVersions": "0-4",
        "flexibleVersions": "2+",
        "fields": [
            F("ErrorCode", "int16", "0+"),
            F(
                "PartitionErrors",
                "[]StopReplicaPartitionError",
                "0+",
                fields=[
                    F("TopicName", "string", "0+"),
                    F("PartitionIndex", "int32", "0+"),
                    F("ErrorCode", "int16", "0+"),
                ],
            ),
        ],
    },
    "UpdateMetadataRequest": {
        "apiKey": 6,
        "type": "request",
        "validVersions": "0-8",
        "flexibleVersions": "6+",
        "fields": [
            F("ControllerId", "int32", "0+"),
            F("isKRaftController", "bool", "8+", default="false"),
            F("Type", "int8", "8+", default=0, tag=0, taggedVersions="8+"),
            F("ControllerEpoch", "int32", "0+"),
            F("BrokerEpoch", "int64", "5+", default="-1"),
            F("UngroupedPartitionStates", "[]UpdateMetadataPartitionState", "0-4"),
            F(
                "TopicStates",
                "[]UpdateMetadataTopicState",
                "5+",
                fields=[
                    F("TopicName", "string", "5+"),
                    F("TopicId", "uuid", "7+"),
                    F("PartitionStates", "[]UpdateMetadataPartitionState", "5+"),
                ],
            ),
            F(
                "LiveBrokers",
                "[]UpdateMetadataBroker",
                "0+",
                fields=[
                    F("Id", "int32", "0+"),
                    F("V0Host", "string", "0"),
                    F("V0Port", "int32", "0"),
                    F(
                        "Endpoints",
                        "[]UpdateMetadataEndpoint",
                        "1+",
                        fields=[
                            F("Port", "int32", "1+"),
                            F("Host", "string", "1+"),
                            F("Listener", "string", "3+"),
                            F("SecurityProtocol", "int16", "1+"),
                        ],
                    ),
                    F("Rack", "string", "2+", nullableVersions="0+"),
                ],
            ),
        ],
        "commonStructs": [
            {"name": "UpdateMetadataPartitionState", "versions": "0+", "fields": UM_PARTITION_STATE}
        ],
    },
    "UpdateMetadataResponse": {
        "apiKey": 6,
        "type": "response",
        "validVersions": "0-8",
        "flexibleVersions": "6+",
        "fields": [F("ErrorCode", "int16", "0+")],
    },
}

TOPIC_ID = uuid.UUID("6c1b2a4e-5d3f-4e8a-9b7c-0123456789ab")


def _lai_partition(topic: str, p: int) -> dict[str, Any]:
    return {
        "topic_name": topic,
        "partition_index": p,
        "controller_epoch": 7,
        "leader": 2,
        "leader_epoch": 11 + p,
        "isr": [2, 3],
        "partition_epoch": 40 + p,
        "replicas": [2, 3, 1],
        "adding_replicas": [1],
        "removing_replicas": [],
        "is_new": True,
        "leader_recovery_state": 1,
    }


def _um_partition(topic: str, p: int) -> dict[str, Any]:
    return {
        "topic_name": topic,
        "partition_index": p,
        "controller_epoch": 7,
        "leader": 3,
        "leader_epoch": 5,
        "isr": [3],
        "zk_version": 9,
        "replicas": [3, 1],
        "offline_replicas": [1],
    }


def sample(name: str, v: int) -> dict[str, Any]:
    """One value per message with every field of every version set away from its default."""
    if name == "LeaderAndIsrRequest":
        parts = [_lai_partition("orders", 0), _lai_partition("orders", 1)]
        return {
            "controller_id": 3000,
            "is_k_raft_controller": True,
            "controller_epoch": 7,
            "broker_epoch": 1234567890123,
            "type": Z.TYPE_FULL,
            "ungrouped_partition_states": parts,
            "topic_states": [{"topic_name": "orders", "topic_id": TOPIC_ID, "partition_states": parts}],
            "live_leaders": [{"broker_id": 2, "host_name": "b2.example", "port": 9093}],
        }
    if name == "LeaderAndIsrResponse":
        errs = [{"topic_name": "orders", "partition_index": 1, "error_code": 11}]
        return {
            "error_code": 0,
            "partition_errors": errs,
            "topics": [{"topic_id": TOPIC_ID, "partition_errors": errs}],
        }
    if name == "StopReplicaRequest":
        return {
            "controller_id": 3000,
            "is_k_raft_controller": True,
            "controller_epoch": 7,
            "broker_epoch": 99,
            "delete_partitions": True,
            "ungrouped_partitions": [{"topic_name": "gone", "partition_index": 4}],
            "topics": [{"name": "gone", "partition_indexes": [0, 4]}],
            "topic_states": [
                {
                    "topic_name": "gone",
                    "partition_states": [{"partition_index": 4, "leader_epoch": 8, "delete_partition": True}],
                }
            ],
        }
    if name == "StopReplicaResponse":
        return {
            "error_code": 11,
            "partition_errors": [{"topic_name": "gone", "partition_index": 4, "error_code": 0}],
        }
    if name == "UpdateMetadataRequest":
        parts = [_um_partition("orders", 0), _um_partition("orders", 1)]
        return {
            "controller_id": 3000,
            "is_k_raft_controller": True,
            "type": Z.TYPE_FULL,
            "controller_epoch": 7,
            "broker_epoch": 42,
            "ungrouped_partition_states": parts,
            "topic_states": [{"topic_name": "orders", "topic_id": TOPIC_ID, "partition_states": parts}],
            "live_brokers": [
                {
                    "id": 1,
                    "v0_host": "b1.example",
                    "v0_port": 9092,
                    "endpoints": [
                        {"port": 9092, "host": "b1.example", "listener": "PLAINTEXT", "security_protocol": 0},
                        {"port": 9093, "host": "b1.example", "listener": "INTERNAL", "security_protocol": 1},
                    ],
                    "rack": "rack-a",
                },
                {"id": 2, "v0_host": "b2", "v0_port": 1, "endpoints": [], "rack": None},
            ],
        }
    assert name == "UpdateMetadataResponse"
    return {"error_code": 0}


@pytest.fixture(scope="module")
def kp_classes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return kafka_python_classes(tmp_path_factory.mktemp("schemas"), "zk2kraft_k39_schemas", SCHEMAS)


CASES = [
    (name, api_key, v)
    for name, api_key in [
        ("LeaderAndIsrRequest", Z.LEADER_AND_ISR),
        ("LeaderAndIsrResponse", Z.LEADER_AND_ISR),
        ("StopReplicaRequest", Z.STOP_REPLICA),
        ("StopReplicaResponse", Z.STOP_REPLICA),
        ("UpdateMetadataRequest", Z.UPDATE_METADATA),
        ("UpdateMetadataResponse", Z.UPDATE_METADATA),
    ]
    for v in range(Z.VERSIONS[api_key][0], Z.VERSIONS[api_key][1] + 1)
]


@pytest.mark.parametrize(("name", "api_key", "version"), CASES, ids=[f"{n}-v{v}" for n, _, v in CASES])
def test_bytes_match_kafka_39_schema(
    kp_classes: dict[str, Any], name: str, api_key: int, version: int
) -> None:
    value = sample(name, version)
    kp_cls = kp_classes[name]
    expected = bytes(kp_value(kp_cls, kp_cls, value).encode(version=version))

    kio_cls = (
        Z.request_class(api_key, version) if name.endswith("Request") else Z.response_class(api_key, version)
    )
    entity = kio_value(kio_cls, value)
    buf = io.BytesIO()
    entity_writer(kio_cls)(buf, entity)
    assert buf.getvalue() == expected
    assert encode_fast(kio_cls, entity) == expected  # the compiled writer the channels use

    decoded, size = entity_reader(kio_cls)(expected, 0)
    assert size == len(expected)
    assert decoded == entity


def test_update_metadata_v8_type_is_tagged_with_kafkas_values(kp_classes: dict[str, Any]) -> None:
    """Type is tag 0 of UpdateMetadata v8 with schema default 0 (AbstractControlRequest.Type UNKNOWN):
    FULL (2) and INCREMENTAL (1) are both on the wire, bytes equal to Kafka 3.9's schema encoded by
    kafka-python; only UNKNOWN has no tags."""
    cls = Z.UPDATE_METADATA_REQUEST[8]
    kp_cls = kp_classes["UpdateMetadataRequest"]
    assert (Z.TYPE_INCREMENTAL, Z.TYPE_FULL) == (1, 2)
    for value, tail in [(Z.TYPE_FULL, b"\x01\x00\x01\x02"), (Z.TYPE_INCREMENTAL, b"\x01\x00\x01\x01")]:
        fields = {"controller_id": 1, "controller_epoch": 2, "type": value}
        expected = bytes(kp_value(kp_cls, kp_cls, fields).encode(version=8))
        buf = io.BytesIO()
        entity_writer(cls)(buf, cls(controller_id=1, controller_epoch=2, type=i8(value)))
        assert (
            buf.getvalue()
            == expected
            == encode_fast(cls, cls(controller_id=1, controller_epoch=2, type=i8(value)))
        )
        assert expected.endswith(tail)  # one tagged field: tag 0, size 1, the value
    unknown = io.BytesIO()
    entity_writer(cls)(unknown, cls(controller_id=1, controller_epoch=2))
    assert unknown.getvalue().endswith(b"\x00")
    assert len(unknown.getvalue()) + 3 == len(expected)


@pytest.mark.parametrize(
    ("ibp", "lai", "um", "sr"),
    [
        ("3.9-IV0", 7, 8, 4),
        ("3.4-IV0", 7, 8, 4),
        ("3.3-IV3", 6, 7, 3),
        ("2.8-IV0", 4, 6, 3),
        ("2.8", 5, 7, 3),
        ("2.4-IV0", 3, 5, 1),
        ("2.4-IV1", 4, 6, 2),
        ("0.10.2-IV0", 0, 3, 0),
        ("0.9.0", 0, 1, 0),
    ],
)
def test_versions_follow_inter_broker_protocol(ibp: str, lai: int, um: int, sr: int) -> None:
    """As Kafka 3.9's ControllerChannelManager picks them from the broker's metadata version."""
    assert Z.versions_for_ibp(ibp) == {Z.LEADER_AND_ISR: lai, Z.UPDATE_METADATA: um, Z.STOP_REPLICA: sr}


@pytest.mark.parametrize("version", range(8))
def test_leader_and_isr_with_shared_partition_states_encodes_as_kio(version: int) -> None:
    """encode_body shares each partition state's bytes between requests (one per replica); the bytes
    are still what kio's writer makes of the whole request, IsNew included, on a cache hit too."""
    import uuid as _uuid

    from migrator.controller.zk_brokers.zk_broker_requests import (
        Header,
        Item,
        PartitionState,
        build_request,
        encode_body,
        encode_entity,
    )

    tid = _uuid.UUID(int=7)
    parts = {
        ("t", p): PartitionState("t", p, tid, 1, 3, (1, 2), 5, (1, 2, 3), (3,), (), 0, ()) for p in range(3)
    }
    cls = Z.request_class(Z.LEADER_AND_ISR, version)
    h = Header(3000, 4, 99)
    for is_new in (frozenset(), frozenset({("t", 1)}), frozenset(parts)):
        item = Item(Z.LEADER_AND_ISR, partitions=parts, leaders={1: ("h", 9092)}, is_new=is_new)
        want = encode_entity(cls, build_request(item, version, h))
        assert encode_body(item, version, h) == want
        assert encode_body(item, version, h) == want  # from the shared states


@pytest.mark.parametrize("version", range(9))
def test_update_metadata_with_encoded_live_brokers_encodes_as_kio(version: int) -> None:
    """encode_body writes each live broker's bytes, encoded once per broker and version; the request
    is still what kio's writer makes of it, shared (epoch patched) or not."""
    from migrator.controller.zk_brokers.zk_broker_requests import (
        BrokerInfo,
        Header,
        Item,
        PartitionState,
        build_request,
        encode_body,
        encode_entity,
    )

    parts = {("t", p): PartitionState("t", p, uuid.UUID(int=7), 1, 3, (1, 2), 5, (1, 2, 3)) for p in range(3)}
    live = (
        BrokerInfo(1, (("PLAINTEXT", "h1", 9092, "PLAINTEXT"), ("SSL", "h1", 9093, "SSL")), "r1"),
        BrokerInfo(2, (("INTERNAL", "h2", 9094, "SASL_PLAINTEXT"),)),
    )
    cls = Z.request_class(Z.UPDATE_METADATA, version)
    h = Header(3000, 4, 99)
    for _ in range(2):  # the second time from the cached brokers
        item = Item(Z.UPDATE_METADATA, partitions=parts, live_brokers=live)
        want = encode_entity(cls, build_request(item, version, h))
        assert encode_body(item, version, h) == want
        assert encode_body(dataclasses.replace(item, shared=True), version, h, shared=True) == want
