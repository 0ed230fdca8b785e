"""LeaderAndIsr, StopReplica and UpdateMetadata in every version Kafka 3.9 has, as kio entities.

A controller tells ZooKeeper-mode brokers about leaders, ISRs, deletions and live brokers with these
three requests (KIP-866 "ZK Broker RPCs"). Kafka 4.0 removed them, so kio does not generate them; they
are declared here from Kafka 3.9's `LeaderAndIsrRequest.json` (apiKey 4, v0-7, flexible 4+),
`StopReplicaRequest.json` (5, v0-4, flexible 2+), `UpdateMetadataRequest.json` (6, v0-8, flexible 6+)
and their responses, one factory per message whose class bodies follow the JSON's `versions` ranges
field by field, the way `kio_ext` declares AlterPartition v0/v1. tests/test_zk_broker_messages.py
checks every version's bytes against the JSON's layout with an independent encoder.

No `from __future__ import annotations` here: kio reads these annotations at runtime.
"""

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64

from migrator.controller.protocol.kio_fields import BOOL as _BOOL
from migrator.controller.protocol.kio_fields import INT8 as _INT8
from migrator.controller.protocol.kio_fields import INT16 as _INT16
from migrator.controller.protocol.kio_fields import INT32 as _INT32
from migrator.controller.protocol.kio_fields import INT64 as _INT64
from migrator.controller.protocol.kio_fields import STRING as _STRING
from migrator.controller.protocol.kio_fields import UUID as _UUID

LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6

#: (min, max, first flexible version) per apiKey, from the 3.9 JSON schemas.
VERSIONS: dict[int, tuple[int, int, int]] = {
    LEADER_AND_ISR: (0, 7, 4),
    STOP_REPLICA: (0, 4, 2),
    UPDATE_METADATA: (0, 8, 6),
}

#: LeaderAndIsr v5+ and UpdateMetadata v8's Type (KIP-516 / KIP-866).
TYPE_INCREMENTAL = 1
TYPE_FULL = 2

_ZERO_UUID = uuid.UUID(int=0)


def is_flexible(api_key: int, version: int) -> bool:
    return version >= VERSIONS[api_key][2]


def request_header_class(api_key: int, version: int) -> type:
    return RequestHeaderV2 if is_flexible(api_key, version) else RequestHeaderV1


def response_header_class(api_key: int, version: int) -> type:
    return ResponseHeaderV1 if is_flexible(api_key, version) else ResponseHeaderV0


def _meta(api_key: int, version: int, request: bool) -> dict[str, object]:
    """The ClassVars every kio entity of one (apiKey, version, direction) carries."""
    return {
        "__version__": i16(version),
        "__flexible__": is_flexible(api_key, version),
        "__api_key__": i16(api_key),
        "__header_schema__": request_header_class(api_key, version)
        if request
        else response_header_class(api_key, version),
    }


def _entity(cls: type, meta: dict[str, object], kind: EntityType) -> type:
    """Sets the ClassVars kio reads; the dataclass body only declares the fields."""
    cls.__type__ = kind  # type: ignore[attr-defined]
    for k, v in meta.items():
        setattr(cls, k, v)
    return cls


# --- LeaderAndIsr (apiKey 4) -------------------------------------------------------------------------


def _lai_request(v: int) -> type:
    m = _meta(LEADER_AND_ISR, v, True)

    @dataclass(frozen=True, slots=True, kw_only=True)
    class LeaderAndIsrPartitionState:
        __type__: ClassVar = EntityType.nested
        if v <= 1:
            topic_name: str = field(metadata=_STRING)
        partition_index: i32 = field(metadata=_INT32)
        controller_epoch: i32 = field(metadata=_INT32)
        leader: i32 = field(metadata=_INT32)
        leader_epoch: i32 = field(metadata=_INT32)
        isr: tuple[i32, ...] = field(metadata=_INT32, default=())
        partition_epoch: i32 = field(metadata=_INT32)
        replicas: tuple[i32, ...] = field(metadata=_INT32, default=())
        if v >= 3:
            adding_replicas: tuple[i32, ...] = field(metadata=_INT32, default=())
            removing_replicas: tuple[i32, ...] = field(metadata=_INT32, default=())
        if v >= 1:
            is_new: bool = field(metadata=_BOOL, default=False)
        if v >= 6:
            leader_recovery_state: i8 = field(metadata=_INT8, default=i8(0))

    @dataclass(frozen=True, slots=True, kw_only=True)
    class LeaderAndIsrTopicState:
        __type__: ClassVar = EntityType.nested
        topic_name: str = field(metadata=_STRING)
        if v >= 5:
            topic_id: uuid.UUID = field(metadata=_UUID, default=_ZERO_UUID)
        partition_states: tuple[LeaderAndIsrPartitionState, ...] = ()

    @dataclass(frozen=True, slots=True, kw_only=True)
    class LeaderAndIsrLiveLeader:
        __type__: ClassVar = EntityType.nested
        broker_id: i32 = field(metadata=_INT32)
        host_name: str = field(metadata=_STRING)
        port: i32 = field(metadata=_INT32)

    @dataclass(frozen=True, slots=True, kw_only=True)
    class LeaderAndIsrRequest:
        __type__: ClassVar = EntityType.request
        controller_id: i32 = field(metadata=_INT32)
        if v >= 7:
            is_k_raft_controller: bool = field(metadata=_BOOL, default=False)
        controller_epoch: i32 = field(metadata=_INT32)
        if v >= 2:
            broker_epoch: i64 = field(metadata=_INT64, default=i64(-1))
        if v >= 5:
            # AbstractControlRequest.Type: UNKNOWN 0 (the schema's default), INCREMENTAL 1, FULL 2.
            type: i8 = field(metadata=_INT8, default=i8(0))
        if v <= 1:
            ungrouped_partition_states: tuple[LeaderAndIsrPartitionState, ...] = ()
        if v >= 2:
            topic_states: tuple[LeaderAndIsrTopicState, ...] = ()
        live_leaders: tuple[LeaderAndIsrLiveLeader, ...] = ()

    for cls in (LeaderAndIsrPartitionState, LeaderAndIsrTopicState, LeaderAndIsrLiveLeader):
        _entity(cls, m, EntityType.nested)
    _entity(LeaderAndIsrRequest, m, EntityType.request)
    LeaderAndIsrRequest.PartitionState = LeaderAndIsrPartitionState  # type: ignore[attr-defined]
    LeaderAndIsrRequest.TopicState = LeaderAndIsrTopicState  # type: ignore[attr-defined]
    LeaderAndIsrRequest.LiveLeader = LeaderAndIsrLiveLeader  # type: ignore[attr-defined]
    return LeaderAndIsrRequest


def _lai_response(v: int) -> type:
    m = _meta(LEADER_AND_ISR, v, False)

    @dataclass(frozen=True, slots=True, kw_only=True)
    class LeaderAndIsrPartitionError:
        __type__: ClassVar = EntityType.nested
        if v <= 4:
            topic_name: str = field(metadata=_STRING)
        partition_index: i32 = field(metadata=_INT32)
        error_code: i16 = field(metadata=_INT16, default=i16(0))

    @dataclass(frozen=True, slots=True, kw_only=True)
    class LeaderAndIsrTopicError:
        __type__: ClassVar = EntityType.nested
        topic_id: uuid.UUID = field(metadata=_UUID, default=_ZERO_UUID)
        partition_errors: tuple[LeaderAndIsrPartitionError, ...] = ()

    @dataclass(frozen=True, slots=True, kw_only=True)
    class LeaderAndIsrResponse:
        __type__: ClassVar = EntityType.response
        error_code: i16 = field(metadata=_INT16, default=i16(0))
        if v <= 4:
            partition_errors: tuple[LeaderAndIsrPartitionError, ...] = ()
        else:
            topics: tuple[LeaderAndIsrTopicError, ...] = ()

    for cls in (LeaderAndIsrPartitionError, LeaderAndIsrTopicError):
        _entity(cls, m, EntityType.nested)
    _entity(LeaderAndIsrResponse, m, EntityType.response)
    LeaderAndIsrResponse.PartitionError = LeaderAndIsrPartitionError  # type: ignore[attr-defined]
    LeaderAndIsrResponse.TopicError = LeaderAndIsrTopicError  # type: ignore[attr-defined]
    return LeaderAndIsrResponse


# --- StopReplica (apiKey 5) --------------------------------------------------------------------------


def _sr_request(v: int) -> type:
    m = _meta(STOP_REPLICA, v, True)

    @dataclass(frozen=True, slots=True, kw_only=True)
    class StopReplicaPartitionV0:
        __type__: ClassVar = EntityType.nested
        topic_name: str = field(metadata=_STRING)
        partition_index: i32 = field(metadata=_INT32)

    @dataclass(frozen=True, slots=True, kw_only=True)
    class StopReplicaTopicV1:
        __type__: ClassVar = EntityType.nested
        name: str = field(metadata=_STRING)
        partition_indexes: tuple[i32, ...] = field(metadata=_INT32, default=())

    @dataclass(frozen=True, slots=True, kw_only=True)
    class StopReplicaPartitionState:
        __type__: ClassVar = EntityType.nested
        partition_index: i32 = field(metadata=_INT32)
        leader_epoch: i32 = field(metadata=_INT32, default=i32(-1))
        delete_partition: bool = field(metadata=_BOOL, default=False)

    @dataclass(frozen=True, slots=True, kw_only=True)
    class StopReplicaTopicState:
        __type__: ClassVar = EntityType.nested
        topic_name: str = field(metadata=_STRING)
        partition_states: tuple[StopReplicaPartitionState, ...] = ()

    @dataclass(frozen=True, slots=True, kw_only=True)
    class StopReplicaRequest:
        __type__: ClassVar = EntityType.request
        controller_id: i32 = field(metadata=_INT32)
        if v >= 4:
            is_k_raft_controller: bool = field(metadata=_BOOL, default=False)
        controller_epoch: i32 = field(metadata=_INT32)
        if v >= 1:
            broker_epoch: i64 = field(metadata=_INT64, default=i64(-1))
        if v <= 2:
            delete_partitions: bool = field(metadata=_BOOL, default=False)
        if v == 0:
            ungrouped_partitions: tuple[StopReplicaPartitionV0, ...] = ()
        if 1 <= v <= 2:
            topics: tuple[StopReplicaTopicV1, ...] = ()
        if v >= 3:
            topic_states: tuple[StopReplicaTopicState, ...] = ()

    for cls in (StopReplicaPartitionV0, StopReplicaTopicV1, StopReplicaPartitionState, StopReplicaTopicState):
        _entity(cls, m, EntityType.nested)
    _entity(StopReplicaRequest, m, EntityType.request)
    StopReplicaRequest.PartitionV0 = StopReplicaPartitionV0  # type: ignore[attr-defined]
    StopReplicaRequest.TopicV1 = StopReplicaTopicV1  # type: ignore[attr-defined]
    StopReplicaRequest.PartitionState = StopReplicaPartitionState  # type: ignore[attr-defined]
    StopReplicaRequest.TopicState = StopReplicaTopicState  # type: ignore[attr-defined]
    return StopReplicaRequest


def _sr_response(v: int) -> type:
    m = _meta(STOP_REPLICA, v, False)

    @dataclass(frozen=True, slots=True, kw_only=True)
    class StopReplicaPartitionError:
        __type__: ClassVar = EntityType.nested
        topic_name: str = field(metadata=_STRING)
        partition_index: i32 = field(metadata=_INT32)
        error_code: i16 = field(metadata=_INT16, default=i16(0))

    @dataclass(frozen=True, slots=True, kw_only=True)
    class StopReplicaResponse:
        __type__: ClassVar = EntityType.response
        error_code: i16 = field(metadata=_INT16, default=i16(0))
        partition_errors: tuple[StopReplicaPartitionError, ...] = ()

    _entity(StopReplicaPartitionError, m, EntityType.nested)
    _entity(StopReplicaResponse, m, EntityType.response)
    StopReplicaResponse.PartitionError = StopReplicaPartitionError  # type: ignore[attr-defined]
    return StopReplicaResponse


# --- UpdateMetadata (apiKey 6) -----------------------------------------------------------------------


def _um_request(v: int) -> type:
    m = _meta(UPDATE_METADATA, v, True)

    @dataclass(frozen=True, slots=True, kw_only=True)
    class UpdateMetadataPartitionState:
        __type__: ClassVar = EntityType.nested
        if v <= 4:
            topic_name: str = field(metadata=_STRING)
        partition_index: i32 = field(metadata=_INT32)
        controller_epoch: i32 = field(metadata=_INT32)
        leader: i32 = field(metadata=_INT32)
        leader_epoch: i32 = field(metadata=_INT32)
        isr: tuple[i32, ...] = field(metadata=_INT32, default=())
        zk_version: i32 = field(metadata=_INT32)
        replicas: tuple[i32, ...] = field(metadata=_INT32, default=())
        if v >= 4:
            offline_replicas: tuple[i32, ...] = field(metadata=_INT32, default=())

    @dataclass(frozen=True, slots=True, kw_only=True)
    class UpdateMetadataTopicState:
        __type__: ClassVar = EntityType.nested
        topic_name: str = field(metadata=_STRING)
        if v >= 7:
            topic_id: uuid.UUID = field(metadata=_UUID, default=_ZERO_UUID)
        partition_states: tuple[UpdateMetadataPartitionState, ...] = ()

    @dataclass(frozen=True, slots=True, kw_only=True)
    class UpdateMetadataEndpoint:
        __type__: ClassVar = EntityType.nested
        port: i32 = field(metadata=_INT32)
        host: str = field(metadata=_STRING)
        if v >= 3:
            listener: str = field(metadata=_STRING)
        security_protocol: i16 = field(metadata=_INT16)

    @dataclass(frozen=True, slots=True, kw_only=True)
    class UpdateMetadataBroker:
        __type__: ClassVar = EntityType.nested
        id: i32 = field(metadata=_INT32)
        if v == 0:
            v0_host: str = field(metadata=_STRING)
            v0_port: i32 = field(metadata=_INT32)
        if v >= 1:
            endpoints: tuple[UpdateMetadataEndpoint, ...] = ()
        if v >= 2:
            rack: str | None = field(metadata=_STRING, default=None)

    @dataclass(frozen=True, slots=True, kw_only=True)
    class UpdateMetadataRequest:
        __type__: ClassVar = EntityType.request
        controller_id: i32 = field(metadata=_INT32)
        if v >= 8:
            is_k_raft_controller: bool = field(metadata=_BOOL, default=False)
            # A tagged field (tag 0) whose schema default is UNKNOWN (0): INCREMENTAL (1) and FULL (2)
            # are both on the wire; only an UNKNOWN request leaves it out.
            type: i8 = field(metadata={"kafka_type": "int8", "tag": 0}, default=i8(0))
        controller_epoch: i32 = field(metadata=_INT32)
        if v >= 5:
            broker_epoch: i64 = field(metadata=_INT64, default=i64(-1))
        if v <= 4:
            ungrouped_partition_states: tuple[UpdateMetadataPartitionState, ...] = ()
        if v >= 5:
            topic_states: tuple[UpdateMetadataTopicState, ...] = ()
        live_brokers: tuple[UpdateMetadataBroker, ...] = ()

    for cls in (
        UpdateMetadataPartitionState,
        UpdateMetadataTopicState,
        UpdateMetadataEndpoint,
        UpdateMetadataBroker,
    ):
        _entity(cls, m, EntityType.nested)
    _entity(UpdateMetadataRequest, m, EntityType.request)
    UpdateMetadataRequest.PartitionState = UpdateMetadataPartitionState  # type: ignore[attr-defined]
    UpdateMetadataRequest.TopicState = UpdateMetadataTopicState  # type: ignore[attr-defined]
    UpdateMetadataRequest.Endpoint = UpdateMetadataEndpoint  # type: ignore[attr-defined]
    UpdateMetadataRequest.Broker = UpdateMetadataBroker  # type: ignore[attr-defined]
    return UpdateMetadataRequest


def _um_response(v: int) -> type:
    @dataclass(frozen=True, slots=True, kw_only=True)
    class UpdateMetadataResponse:
        __type__: ClassVar = EntityType.response
        error_code: i16 = field(metadata=_INT16, default=i16(0))

    return _entity(UpdateMetadataResponse, _meta(UPDATE_METADATA, v, False), EntityType.response)


LEADER_AND_ISR_REQUEST: dict[int, type] = {v: _lai_request(v) for v in range(8)}
LEADER_AND_ISR_RESPONSE: dict[int, type] = {v: _lai_response(v) for v in range(8)}
STOP_REPLICA_REQUEST: dict[int, type] = {v: _sr_request(v) for v in range(5)}
STOP_REPLICA_RESPONSE: dict[int, type] = {v: _sr_response(v) for v in range(5)}
UPDATE_METADATA_REQUEST: dict[int, type] = {v: _um_request(v) for v in range(9)}
UPDATE_METADATA_RESPONSE: dict[int, type] = {v: _um_response(v) for v in range(9)}

_CLASSES: dict[int, tuple[dict[int, type], dict[int, type]]] = {
    LEADER_AND_ISR: (LEADER_AND_ISR_REQUEST, LEADER_AND_ISR_RESPONSE),
    STOP_REPLICA: (STOP_REPLICA_REQUEST, STOP_REPLICA_RESPONSE),
    UPDATE_METADATA: (UPDATE_METADATA_REQUEST, UPDATE_METADATA_RESPONSE),
}


def request_class(api_key: int, version: int) -> type:
    return _CLASSES[api_key][0][version]


def response_class(api_key: int, version: int) -> type:
    return _CLASSES[api_key][1][version]


def versions_for_ibp(ibp: str) -> dict[int, int]:
    """The version of each request Kafka 3.9's controller sends to a broker of this inter.broker.protocol.version.

    ControllerChannelManager's choice (`metadataVersion.isAtLeast(IBP_x)`), so a broker gets exactly the
    version a ZooKeeper controller would send it; migration needs 3.4-IV0 or later, which means 7/8/4.
    """
    have = ibp_tuple(ibp)
    lai = _pick(have, _LAI_SINCE)
    um = _pick(have, _UM_SINCE)
    sr = _pick(have, _SR_SINCE)
    return {LEADER_AND_ISR: lai, UPDATE_METADATA: um, STOP_REPLICA: sr}


# (IBP as (major, minor, patch, IV), version) newest first, from ControllerChannelManager (3.9).
_LAI_SINCE = [
    ((3, 4, 0, 0), 7),
    ((3, 2, 0, 0), 6),
    ((2, 8, 0, 1), 5),
    ((2, 4, 0, 1), 4),
    ((2, 4, 0, 0), 3),
    ((2, 2, 0, 0), 2),
    ((1, 0, 0, 0), 1),
]
_UM_SINCE = [
    ((3, 4, 0, 0), 8),
    ((2, 8, 0, 1), 7),
    ((2, 4, 0, 1), 6),
    ((2, 2, 0, 0), 5),
    ((1, 0, 0, 0), 4),
    ((0, 10, 2, 0), 3),
    ((0, 10, 0, 1), 2),
    ((0, 9, 0, 0), 1),
]
_SR_SINCE = [((3, 4, 0, 0), 4), ((2, 6, 0, 0), 3), ((2, 4, 0, 1), 2), ((2, 2, 0, 0), 1)]


def ibp_tuple(ibp: str) -> tuple[int, int, int, int]:
    """ "3.9-IV0" → (3, 9, 0, 0); "2.8" → (2, 8, 0, 99) (a bare release means its last IV, as in Kafka);
    "0.10.2-IV0" → (0, 10, 2, 0). Unparseable → the newest, so a broker is never sent an older shape
    than it can read."""
    head, _, iv = ibp.strip().partition("-")
    try:
        nums = [int(p) for p in head.split(".")]
        n_iv = int(iv[2:]) if iv.upper().startswith("IV") else 99
    except ValueError:
        return (99, 0, 0, 0)
    nums = (nums + [0, 0, 0])[:3]
    return (nums[0], nums[1], nums[2], n_iv)


def _pick(have: tuple[int, int, int, int], table: list[tuple[tuple[int, int, int, int], int]]) -> int:
    for since, version in table:
        if have >= since:
            return version
    return 0


__all__ = [
    "LEADER_AND_ISR",
    "LEADER_AND_ISR_REQUEST",
    "LEADER_AND_ISR_RESPONSE",
    "STOP_REPLICA",
    "STOP_REPLICA_REQUEST",
    "STOP_REPLICA_RESPONSE",
    "TYPE_FULL",
    "TYPE_INCREMENTAL",
    "UPDATE_METADATA",
    "UPDATE_METADATA_REQUEST",
    "UPDATE_METADATA_RESPONSE",
    "VERSIONS",
    "ibp_tuple",
    "is_flexible",
    "request_class",
    "request_header_class",
    "response_class",
    "response_header_class",
    "versions_for_ibp",
]
