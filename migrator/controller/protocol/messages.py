"""The controller protocol's requests and responses, one version-independent class each.

Kafka's messages change shape between versions (AlterPartition names topics up to v1 and uses ids from
v2; it carries broker epochs only from v3). The rest of zk2kraft sees one normalised form per message:
`wire` maps every supported version onto it and back, so the controller and the broker simulator never
branch on versions. Field names are Kafka's JSON schema names in snake_case.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

__all__ = [
    "ALTER_PARTITION",
    "ALTER_REPLICA_STATE",
    "API_VERSIONS",
    "BROKER_HEARTBEAT",
    "BROKER_REGISTRATION",
    "AlterPartitionPartition",
    "AlterPartitionPartitionResponse",
    "AlterPartitionRequest",
    "AlterPartitionResponse",
    "AlterPartitionTopic",
    "AlterPartitionTopicResponse",
    "AlterReplicaStatePartitionResponse",
    "AlterReplicaStateRequest",
    "AlterReplicaStateResponse",
    "AlterReplicaStateTopic",
    "AlterReplicaStateTopicResponse",
    "ApiVersionRange",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "BrokerHeartbeatRequest",
    "BrokerHeartbeatResponse",
    "BrokerRegistrationRequest",
    "BrokerRegistrationResponse",
    "BrokerState",
    "Feature",
    "Listener",
]

API_VERSIONS = 18
ALTER_PARTITION = 56
BROKER_REGISTRATION = 62
BROKER_HEARTBEAT = 63
#: KIP-590's Envelope: a broker forwards a client's request with the client's principal and address.
ENVELOPE = 58
#: KIP-589's AlterReplicaState never shipped in Kafka, so it has no apiKey there: zk2kraft serves it on
#: a key far outside Kafka's range (docs/controller-protocol.md).
ALTER_REPLICA_STATE = 10_001

#: KIP-589's one event type.
EVENT_OFFLINE = 1


@dataclass(slots=True)
class ApiVersionRange:
    api_key: int
    min_version: int
    max_version: int


@dataclass(slots=True)
class ApiVersionsRequest:
    client_software_name: str = ""
    client_software_version: str = ""


@dataclass(slots=True)
class ApiVersionsResponse:
    error_code: int
    api_keys: list[ApiVersionRange] = field(default_factory=list)
    throttle_time_ms: int = 0
    # v3+ tagged fields (KIP-584): what DescribeFeatures reads
    supported_features: list[tuple[str, int, int]] = field(default_factory=list)  # name, min, max
    finalized_features: list[tuple[str, int]] = field(default_factory=list)  # name, level
    finalized_features_epoch: int = -1
    zk_migration_ready: bool = False


@dataclass(slots=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: int = (
        0  # Kafka's SecurityProtocol id: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL
    )


@dataclass(slots=True)
class Feature:
    name: str
    min_supported_version: int
    max_supported_version: int


@dataclass(slots=True)
class BrokerRegistrationRequest:
    broker_id: int
    cluster_id: str
    incarnation_id: uuid.UUID
    listeners: list[Listener] = field(default_factory=list)
    features: list[Feature] = field(default_factory=list)
    rack: str | None = None
    is_migrating_zk_broker: bool = False  # v1+
    log_dirs: list[uuid.UUID] = field(default_factory=list)  # v2+
    previous_broker_epoch: int = -1  # v3+


@dataclass(slots=True)
class BrokerRegistrationResponse:
    error_code: int
    broker_epoch: int = -1
    throttle_time_ms: int = 0


@dataclass(slots=True)
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int = -1
    want_fence: bool = False
    want_shut_down: bool = False
    offline_log_dirs: list[uuid.UUID] = field(default_factory=list)  # v1+


@dataclass(slots=True)
class BrokerHeartbeatResponse:
    error_code: int
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False
    throttle_time_ms: int = 0


@dataclass(slots=True)
class BrokerState:
    """An ISR member as AlterPartition v3 names it; ``broker_epoch`` is -1 where the version has none."""

    broker_id: int
    broker_epoch: int = -1


@dataclass(slots=True)
class AlterPartitionPartition:
    partition_index: int
    leader_epoch: int
    new_isr_with_epochs: list[BrokerState]
    partition_epoch: int
    leader_recovery_state: int = 0  # v1+

    @property
    def new_isr(self) -> list[int]:
        return [b.broker_id for b in self.new_isr_with_epochs]


@dataclass(slots=True)
class AlterPartitionTopic:
    topic_name: str | None  # v0-1
    topic_id: uuid.UUID | None  # v2+
    partitions: list[AlterPartitionPartition] = field(default_factory=list)


@dataclass(slots=True)
class AlterPartitionRequest:
    broker_id: int
    broker_epoch: int
    topics: list[AlterPartitionTopic] = field(default_factory=list)


@dataclass(slots=True)
class AlterPartitionPartitionResponse:
    partition_index: int
    error_code: int
    leader_id: int = -1
    leader_epoch: int = -1
    isr: list[int] = field(default_factory=list)
    leader_recovery_state: int = 0
    partition_epoch: int = -1


@dataclass(slots=True)
class AlterPartitionTopicResponse:
    topic_name: str | None
    topic_id: uuid.UUID | None
    partitions: list[AlterPartitionPartitionResponse] = field(default_factory=list)


@dataclass(slots=True)
class AlterPartitionResponse:
    error_code: int
    topics: list[AlterPartitionTopicResponse] = field(default_factory=list)
    throttle_time_ms: int = 0


@dataclass(slots=True)
class AlterReplicaStateTopic:
    name: str
    partitions: list[int] = field(default_factory=list)


@dataclass(slots=True)
class AlterReplicaStateRequest:
    broker_id: int
    broker_epoch: int
    event_type: int = EVENT_OFFLINE
    event_reason: str = ""
    topics: list[AlterReplicaStateTopic] = field(default_factory=list)


@dataclass(slots=True)
class AlterReplicaStatePartitionResponse:
    partition_index: int
    error_code: int


@dataclass(slots=True)
class AlterReplicaStateTopicResponse:
    name: str
    partitions: list[AlterReplicaStatePartitionResponse] = field(default_factory=list)


@dataclass(slots=True)
class AlterReplicaStateResponse:
    error_code: int
    topics: list[AlterReplicaStateTopicResponse] = field(default_factory=list)
    throttle_time_ms: int = 0
