"""DescribeQuorum as Kafka 3.9's leader answers it (KafkaRaftClient.handleDescribeQuorumRequest): every
voter and every recent observer with its end offset and fetch times, and (v2) each voter's listener;
NOT_LEADER_OR_FOLLOWER from a voter that does not lead, UNKNOWN_TOPIC_OR_PARTITION for another partition."""

from __future__ import annotations

from migrator.controller.raft.election import EpochState, Leader
from migrator.controller.raft.leader_progress import describe
from migrator.controller.raft.quorum_config import QuorumConfig
from migrator.controller.raft.voter_messages import (
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_TOPIC_OR_PARTITION,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
)

__all__ = ["describe_quorum"]

METADATA_PARTITION = ("__cluster_metadata", 0)


def describe_quorum(
    state: EpochState, config: QuorumConfig, req: DescribeQuorumRequest, now_ms: int
) -> DescribeQuorumResponse:
    if req.partitions != (METADATA_PARTITION,):
        return DescribeQuorumResponse(req.partitions, UNKNOWN_TOPIC_OR_PARTITION)
    if not isinstance(state, Leader) or state.progress is None:
        return DescribeQuorumResponse((METADATA_PARTITION,), NOT_LEADER_OR_FOLLOWER)
    voters, observers = describe(state.progress, now_ms)
    hw = state.progress.high_watermark
    nodes = tuple((v, config.listener_name, ep.host, ep.port) for v, ep in sorted(config.voters.items()))
    return DescribeQuorumResponse(
        (METADATA_PARTITION,),
        0,
        state.local_id,
        state.epoch,
        -1 if hw is None else hw,
        tuple(voters),
        tuple(observers),
        nodes,
    )
