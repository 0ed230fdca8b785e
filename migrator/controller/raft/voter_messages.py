"""The voter APIs' messages for `__cluster_metadata` partition 0, independent of their versions.

The state machine (`voter`) reads and writes these; `voter_wire` turns them into kio's entities of
the version a peer speaks. One partition per message: KRaft has no multi-raft, and Kafka refuses a
request for another topic or partition as INVALID_REQUEST before any of this.
"""

from __future__ import annotations

from dataclasses import dataclass

from migrator.controller.protocol.kafka_errors import (  # Kafka's codes these APIs answer with, re-exported
    BROKER_NOT_AVAILABLE,
    FENCED_LEADER_EPOCH,
    INCONSISTENT_CLUSTER_ID,
    INVALID_REQUEST,
    INVALID_VOTER_KEY,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_LEADER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from migrator.controller.raft.leader_progress import ReplicaView

__all__ = [
    "BROKER_NOT_AVAILABLE",
    "FENCED_LEADER_EPOCH",
    "INCONSISTENT_CLUSTER_ID",
    "INVALID_REQUEST",
    "INVALID_VOTER_KEY",
    "NONE",
    "NOT_LEADER_OR_FOLLOWER",
    "UNKNOWN_LEADER_EPOCH",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "DescribeQuorumRequest",
    "DescribeQuorumResponse",
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "Endpoint",
    "FetchRequest",
    "FetchResponse",
    "VoteRequest",
    "VoteResponse",
]

#: Errors.message(): what Kafka's DescribeQuorum error answers carry as ErrorMessage (v2)
MESSAGES = {
    NOT_LEADER_OR_FOLLOWER: "For requests intended only for the leader, this error indicates that the broker is "
    "not the current leader. For requests intended for any replica, this error indicates that the broker is not "
    "a replica of the topic partition.",
    UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
}

#: (host, port) of a voter's controller listener
Endpoint = tuple[str, int]


@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: str | None
    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    voter_id: int = -1  # v1: the voter this is meant for (-1: not said)
    candidate_directory_id: str | None = None  # Kafka Uuid text; None: Uuid.ZERO_UUID
    voter_directory_id: str | None = None


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: int  # top level
    partition_error: int = 0
    leader_id: int = -1
    leader_epoch: int = -1
    vote_granted: bool = False
    leader_endpoint: Endpoint | None = None  # v1 NodeEndpoints of the leader


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    voter_id: int = -1
    voter_directory_id: str | None = None
    leader_endpoints: tuple[tuple[str, str, int], ...] = ()  # v1: (listener name, host, port)


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: int
    partition_error: int = 0
    leader_id: int = -1
    leader_epoch: int = -1
    leader_endpoint: Endpoint | None = None


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...] = ()  # v0 PreferredSuccessors, v1 PreferredCandidates
    leader_endpoints: tuple[tuple[str, str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: int
    partition_error: int = 0
    leader_id: int = -1
    leader_epoch: int = -1
    leader_endpoint: Endpoint | None = None


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """What the quorum's state machine reads of a Fetch: who, from where, in which epoch."""

    cluster_id: str | None
    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    max_wait_ms: int = 500
    replica_directory_id: str | None = None


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """What a follower's state machine reads of a Fetch answer (records go to the log, not here)."""

    error_code: int
    partition_error: int = 0
    leader_id: int = -1
    leader_epoch: int = -1
    high_watermark: int = -1
    leader_endpoint: Endpoint | None = None
    records: bytes = b""  # the batches, for the log; the state machine never reads them


@dataclass(frozen=True, slots=True)
class DescribeQuorumRequest:
    """The (topic, partition) pairs asked about; only `__cluster_metadata` 0 has a quorum."""

    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class DescribeQuorumResponse:
    """One partition's answer, or ``partition_error`` for each asked partition (Kafka's
    getPartitionLevelErrorResponse / singletonErrorResponse: the other fields 0)."""

    partitions: tuple[tuple[str, int], ...]
    partition_error: int = 0
    leader_id: int = 0
    leader_epoch: int = 0
    high_watermark: int = 0
    voters: tuple[ReplicaView, ...] = ()
    observers: tuple[ReplicaView, ...] = ()
    nodes: tuple[tuple[int, str, str, int], ...] = ()  # v2: (node id, listener, host, port) of each voter
