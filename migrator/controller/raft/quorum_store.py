"""The voter's election store on disk: Kafka's ElectionState kept in `quorum-state`.

The file's format lives in one place, `kraft.dirfiles` (the handover and the log write it too); this is
the mapping between the state machine's ElectionState and that file, with the data_version Kafka 3.9
picks for the quorum's kraft.version (KRaftVersion.quorumStateVersion: 0 -> 0, 1 -> 1).
"""

from __future__ import annotations

from pathlib import Path

from migrator.controller.raft.election import ElectionState
from migrator.kraft import dirfiles

__all__ = ["FileElectionStore", "election_from_file", "election_to_file"]


def election_to_file(election: ElectionState, kraft_version: int = 0) -> dirfiles.QuorumState:
    """ElectionState.toQuorumStateData: version 0 names the voters, version 1 the voted directory."""
    return dirfiles.QuorumState(
        leader_id=election.leader_id,
        leader_epoch=election.epoch,
        voted_id=election.voted_id,
        voters=tuple(sorted(election.voters)) if kraft_version == 0 else (),
        data_version=kraft_version,
        voted_directory_id=election.voted_directory_id if kraft_version == 1 else None,
    )


def election_from_file(state: dirfiles.QuorumState) -> ElectionState:
    """ElectionState.fromQuorumStateData."""
    return ElectionState(
        epoch=state.leader_epoch,
        leader_id=state.leader_id if state.leader_id >= 0 else -1,
        voted_id=state.voted_id if state.voted_id >= 0 else -1,
        voted_directory_id=state.voted_directory_id if state.voted_id >= 0 else None,
        voters=frozenset(state.voters),
    )


class FileElectionStore:
    """Kafka's FileQuorumStateStore: `<partition dir>/quorum-state`, written atomically with fsync."""

    def __init__(self, partition_dir: Path, kraft_version: int = 0) -> None:
        if kraft_version not in (0, 1):
            raise ValueError(f"kraft.version {kraft_version}: Kafka 3.9 knows 0 and 1")
        self.path = Path(partition_dir) / dirfiles.QUORUM_STATE
        self.kraft_version = kraft_version

    def read(self) -> ElectionState | None:
        if not self.path.exists():
            return None
        return election_from_file(dirfiles.read_quorum_state(self.path))

    def write(self, election: ElectionState) -> None:
        dirfiles.write_quorum_state(self.path, election_to_file(election, self.kraft_version))
