"""Message schemas kio does not ship, declared as kio entities so kio's own serializer handles them.

kio 0.6 generates AlterPartition only from v2 (Kafka 4.0 removed v0 and v1) and has no AlterReplicaState
(KIP-589 never shipped). ZooKeeper-mode brokers of Kafka 3.x still send AlterPartition v0/v1, so zk2kraft
declares those versions from Kafka 3.9's AlterPartitionRequest/Response.json, and AlterReplicaState from
the KIP's RPC, as flexible version 0 (docs/controller-protocol.md).

No `from __future__ import annotations` here: kio reads these annotations at runtime.
"""

import datetime
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64

from migrator.controller.protocol.messages import ALTER_PARTITION, ALTER_REPLICA_STATE

_AP = i16(ALTER_PARTITION)
_ARS = i16(ALTER_REPLICA_STATE)


def _ap_request(version: int) -> type:
    """AlterPartitionRequest v0 or v1: topics by name, NewIsr as broker ids (v1 adds LeaderRecoveryState)."""

    @dataclass(frozen=True, slots=True, kw_only=True)
    class PartitionData:
        __type__: ClassVar = EntityType.nested
        __version__: ClassVar[i16] = i16(version)
        __flexible__: ClassVar[bool] = True
        __api_key__: ClassVar[i16] = _AP
        __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
        partition_index: i32 = field(metadata={"kafka_type": "int32"})
        leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
        new_isr: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
        if version >= 1:
            leader_recovery_state: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
        partition_epoch: i32 = field(metadata={"kafka_type": "int32"})

    @dataclass(frozen=True, slots=True, kw_only=True)
    class TopicData:
        __type__: ClassVar = EntityType.nested
        __version__: ClassVar[i16] = i16(version)
        __flexible__: ClassVar[bool] = True
        __api_key__: ClassVar[i16] = _AP
        __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
        topic_name: str = field(metadata={"kafka_type": "string"})
        partitions: tuple[PartitionData, ...]

    @dataclass(frozen=True, slots=True, kw_only=True)
    class AlterPartitionRequest:
        __type__: ClassVar = EntityType.request
        __version__: ClassVar[i16] = i16(version)
        __flexible__: ClassVar[bool] = True
        __api_key__: ClassVar[i16] = _AP
        __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
        broker_id: i32 = field(metadata={"kafka_type": "int32"})
        broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
        topics: tuple[TopicData, ...]

    AlterPartitionRequest.TopicData = TopicData  # type: ignore[attr-defined]
    AlterPartitionRequest.PartitionData = PartitionData  # type: ignore[attr-defined]
    return AlterPartitionRequest


def _ap_response(version: int) -> type:
    @dataclass(frozen=True, slots=True, kw_only=True)
    class PartitionData:
        __type__: ClassVar = EntityType.nested
        __version__: ClassVar[i16] = i16(version)
        __flexible__: ClassVar[bool] = True
        __api_key__: ClassVar[i16] = _AP
        __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
        partition_index: i32 = field(metadata={"kafka_type": "int32"})
        error_code: i16 = field(metadata={"kafka_type": "int16"})
        leader_id: i32 = field(metadata={"kafka_type": "int32"})
        leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
        isr: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
        if version >= 1:
            leader_recovery_state: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
        partition_epoch: i32 = field(metadata={"kafka_type": "int32"})

    @dataclass(frozen=True, slots=True, kw_only=True)
    class TopicData:
        __type__: ClassVar = EntityType.nested
        __version__: ClassVar[i16] = i16(version)
        __flexible__: ClassVar[bool] = True
        __api_key__: ClassVar[i16] = _AP
        __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
        topic_name: str = field(metadata={"kafka_type": "string"})
        partitions: tuple[PartitionData, ...]

    @dataclass(frozen=True, slots=True, kw_only=True)
    class AlterPartitionResponse:
        __type__: ClassVar = EntityType.response
        __version__: ClassVar[i16] = i16(version)
        __flexible__: ClassVar[bool] = True
        __api_key__: ClassVar[i16] = _AP
        __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
        throttle_time: datetime.timedelta = field(metadata={"kafka_type": "timedelta_i32"})
        error_code: i16 = field(metadata={"kafka_type": "int16"})
        topics: tuple[TopicData, ...]

    AlterPartitionResponse.TopicData = TopicData  # type: ignore[attr-defined]
    AlterPartitionResponse.PartitionData = PartitionData  # type: ignore[attr-defined]
    return AlterPartitionResponse


AlterPartitionRequestV0 = _ap_request(0)
AlterPartitionRequestV1 = _ap_request(1)
AlterPartitionResponseV0 = _ap_response(0)
AlterPartitionResponseV1 = _ap_response(1)


# --- AlterReplicaState v0 (KIP-589), flexible ------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaStateTopic:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _ARS
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: str = field(metadata={"kafka_type": "string"})
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterReplicaStateRequestV0:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _ARS
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    broker_id: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"})
    event_type: i8 = field(metadata={"kafka_type": "int8"})
    event_reason: str = field(metadata={"kafka_type": "string"})
    topics: tuple[ReplicaStateTopic, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaStatePartitionResult:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _ARS
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaStateTopicResult:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _ARS
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: str = field(metadata={"kafka_type": "string"})
    partitions: tuple[ReplicaStatePartitionResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterReplicaStateResponseV0:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _ARS
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: datetime.timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    topics: tuple[ReplicaStateTopicResult, ...]


__all__ = [
    "AlterPartitionRequestV0",
    "AlterPartitionRequestV1",
    "AlterPartitionResponseV0",
    "AlterPartitionResponseV1",
    "AlterReplicaStateRequestV0",
    "AlterReplicaStateResponseV0",
    "ReplicaStatePartitionResult",
    "ReplicaStateTopic",
    "ReplicaStateTopicResult",
]
