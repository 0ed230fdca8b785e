"""KafkaRaftClient's checks of a voter API request, before any state changes: pure functions of the
request and this voter's epoch, so each answer's error is decided in one place."""

from __future__ import annotations

from migrator.controller.raft.quorum_config import VoterEndpoint
from migrator.controller.raft.voter_messages import (
    BROKER_NOT_AVAILABLE,
    FENCED_LEADER_EPOCH,
    INVALID_REQUEST,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_LEADER_EPOCH,
    Endpoint,
)

__all__ = ["cluster_ok", "leader_endpoints", "leader_only_error", "valid_voter_key", "voter_only_error"]


def cluster_ok(request_cluster: str | None, own: str | None) -> bool:
    """KafkaRaftClient.hasValidClusterId: a request without a cluster id is accepted."""
    return request_cluster is None or own is None or request_cluster == own


def voter_only_error(remote_id: int, request_epoch: int, epoch: int) -> int:
    """KafkaRaftClient.validateVoterOnlyRequest (Vote, BeginQuorumEpoch, EndQuorumEpoch)."""
    if request_epoch < epoch:
        return FENCED_LEADER_EPOCH
    if remote_id < 0:
        return INVALID_REQUEST
    return NONE


def leader_only_error(request_epoch: int, epoch: int, is_leader: bool, shutting_down: bool) -> int:
    """KafkaRaftClient.validateLeaderOnlyRequest (Fetch, FetchSnapshot)."""
    if request_epoch < epoch:
        return FENCED_LEADER_EPOCH
    if request_epoch > epoch:
        return UNKNOWN_LEADER_EPOCH
    if not is_leader:
        return NOT_LEADER_OR_FOLLOWER
    if shutting_down:
        return BROKER_NOT_AVAILABLE
    return NONE


def valid_voter_key(voter_id: int, voter_dir: str | None, node_id: int, directory_id: str | None) -> bool:
    """KafkaRaftClient.isValidVoterKey: the request was meant for this node (v1's VoterId and
    VoterDirectoryId, when given; a static voter's directory is not given)."""
    if voter_id < 0:
        return True
    if voter_id != node_id:
        return False
    return voter_dir is None or voter_dir == directory_id


def leader_endpoints(
    given: tuple[tuple[str, str, int], ...] | Endpoint | None, configured: VoterEndpoint | None
) -> tuple[Endpoint, ...]:
    """The leader's endpoint from the message when it carries one (a request's LeaderEndpoints, a
    response's NodeEndpoints), else from `controller.quorum.voters`."""
    if (
        isinstance(given, tuple)
        and len(given) == 2
        and isinstance(given[0], str)
        and isinstance(given[1], int)
    ):
        return ((given[0], given[1]),)
    own = (configured.host, configured.port) if configured is not None else None
    if given:
        listed = [(h, p) for _name, h, p in given]  # type: ignore[misc]
        return (own,) if own is not None and own in listed else (listed[0],)
    return (own,) if own is not None else ()
