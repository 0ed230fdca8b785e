"""The controller core's values: broker states, requests and replies normalised over versions, the
Decision a request comes to, and the controller's configuration.

Split out of `core` so that the decisions read on their own; `core` re-exports every name here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from migrator.kraft.records import MetadataRecord
from migrator.model import Broker

NO_LEADER = -1
EVENT_OFFLINE = 1  # KIP-589: the one AlterReplicaState event type
#: Kafka's broker.session.timeout.ms default.
DEFAULT_SESSION_TIMEOUT_MS = 9_000


class BrokerState(enum.IntEnum):
    """The seed's broker states (heartbeat design, seed 004)."""

    INITIAL = 0  # has not contacted the controller: no registration
    INACTIVE = 1  # fenced
    ACTIVE = 2
    STOPPING = 3  # controlled shutdown: leaderships are moving away


def state_of(broker: Broker | None) -> BrokerState:
    if broker is None:
        return BrokerState.INITIAL
    if broker.fenced:
        return BrokerState.INACTIVE
    return BrokerState.STOPPING if broker.in_controlled_shutdown else BrokerState.ACTIVE


# --- requests and replies (normalised over versions) -------------------------------------------------


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: int = 0


@dataclass(frozen=True)
class Registration:
    broker_id: int
    cluster_id: str
    incarnation_id: str  # Kafka's base64url Uuid text
    listeners: tuple[Listener, ...] = ()
    features: dict[str, tuple[int, int]] = field(default_factory=dict)
    rack: str | None = None
    is_migrating_zk_broker: bool = False
    log_dirs: tuple[str, ...] = ()
    previous_broker_epoch: int = -1


@dataclass(frozen=True)
class RegistrationReply:
    error: int
    broker_epoch: int = -1
    message: str | None = None


@dataclass(frozen=True)
class Heartbeat:
    """Kafka's BrokerHeartbeat; the seed's target state is `target` (see `Heartbeat.of`)."""

    broker_id: int
    broker_epoch: int
    current_metadata_offset: int = -1
    want_fence: bool = False
    want_shut_down: bool = False

    @classmethod
    def of(cls, broker_id: int, broker_epoch: int, target: BrokerState, offset: int = -1) -> Heartbeat:
        return cls(
            broker_id,
            broker_epoch,
            offset,
            want_fence=target in (BrokerState.INITIAL, BrokerState.INACTIVE),
            want_shut_down=target is BrokerState.STOPPING,
        )

    @property
    def target(self) -> BrokerState:
        if self.want_shut_down:
            return BrokerState.STOPPING
        return BrokerState.INACTIVE if self.want_fence else BrokerState.ACTIVE


@dataclass(frozen=True)
class HeartbeatReply:
    error: int
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False
    message: str | None = None

    @property
    def state(self) -> BrokerState:
        if self.is_fenced:
            return BrokerState.INACTIVE
        return BrokerState.STOPPING if self.should_shut_down else BrokerState.ACTIVE


@dataclass(frozen=True)
class IsrMember:
    broker_id: int
    broker_epoch: int = -1  # -1: not checked (AlterPartition v0-2)


@dataclass(frozen=True)
class PartitionAlter:
    partition: int
    leader_epoch: int
    new_isr: tuple[IsrMember, ...]
    partition_epoch: int
    leader_recovery_state: int = 0


@dataclass(frozen=True)
class TopicAlter:
    name: str | None  # v0-1
    topic_id: str | None  # v2+ (Kafka base64url Uuid text)
    partitions: tuple[PartitionAlter, ...]


@dataclass(frozen=True)
class AlterPartition:
    broker_id: int
    broker_epoch: int
    topics: tuple[TopicAlter, ...]
    version: int = 3


@dataclass(frozen=True)
class PartitionResult:
    partition: int
    error: int
    leader: int = NO_LEADER
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1
    leader_recovery_state: int = 0


@dataclass(frozen=True)
class TopicResult:
    name: str | None
    topic_id: str | None
    partitions: tuple[PartitionResult, ...]


@dataclass(frozen=True)
class AlterPartitionReply:
    error: int
    topics: tuple[TopicResult, ...] = ()
    message: str | None = None


@dataclass(frozen=True)
class AlterReplicaState:
    broker_id: int
    broker_epoch: int
    event_type: int
    reason: str = ""
    topics: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class AlterReplicaStateReply:
    error: int
    topics: tuple[tuple[str, tuple[tuple[int, int], ...]], ...] = ()
    message: str | None = None


@dataclass
class Decision:
    """What a request decided: records to append (in order), and the reply to send once they are."""

    records: list[MetadataRecord]
    reply: object
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ControllerConfig:
    cluster_id: str
    node_id: int
    metadata_version: int  # the finalized level
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    zk_migration: bool = True  # migrating ZooKeeper brokers may register (KIP-866)
