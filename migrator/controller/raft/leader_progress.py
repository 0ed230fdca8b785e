"""What a quorum leader knows of its voters: their fetch offsets, the high watermark they make, and
whether a majority still fetches (check-quorum), as Kafka 3.9's LeaderState keeps it.

A record is committed when a majority of voters have it: the high watermark is the end offset that
half the voters (rounded down) are ahead of or at, the leader's own log end counting as its offset.
It moves only forward, and only past the new epoch's start offset, so a new leader exposes nothing of
an older epoch before a majority holds a record of its own epoch. A leader that has not heard a Fetch
from a majority within 1.5 x `controller.quorum.fetch.timeout.ms` resigns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["LeaderProgress", "ReplicaProgress", "ReplicaView", "describe", "majority_high_watermark"]

#: LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR: the fetch timeout plus room for the network and the disk.
CHECK_QUORUM_TIMEOUT_FACTOR = 1.5
#: LeaderState.OBSERVER_SESSION_TIMEOUT_MS: an observer silent this long leaves DescribeQuorum.
OBSERVER_SESSION_TIMEOUT_MS = 300_000
NEVER = 1 << 62


def majority_high_watermark(end_offsets: Mapping[int, int | None]) -> int | None:
    """The offset a majority of voters has reached: voters by descending end offset (unknown last), the
    one at index len // 2 (LeaderState.maybeUpdateHighWatermark). None while that voter is unknown."""
    if not end_offsets:
        return None
    ordered = sorted(end_offsets.values(), key=lambda o: (o is None, -(o or 0)))
    return ordered[len(ordered) // 2]


@dataclass(slots=True)
class ReplicaProgress:
    """LeaderState.ReplicaState: one voter or observer as the leader tracks it."""

    replica_id: int
    directory_id: str | None = None
    end_offset: int | None = None
    last_fetch_ms: int = -1
    last_fetch_leader_end: int = -1
    last_caught_up_ms: int = -1
    acknowledged: bool = False

    def matches(self, replica_id: int, directory_id: str | None) -> bool:
        """A static voter has no directory id: any directory of that id is that voter."""
        return self.replica_id == replica_id and (
            self.directory_id is None or self.directory_id == directory_id
        )

    def on_fetch(self, now_ms: int, fetch_offset: int, leader_end: int | None) -> None:
        """ReplicaState.updateFollowerState: caught up when it fetched from the leader's end, or from
        where the leader's end was at its previous fetch (then caught up as of that fetch)."""
        if leader_end is not None:
            if fetch_offset >= leader_end:
                self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
            elif self.last_fetch_leader_end > 0 and fetch_offset >= self.last_fetch_leader_end:
                self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
            self.last_fetch_leader_end = leader_end
        self.last_fetch_ms = max(self.last_fetch_ms, now_ms)
        self.end_offset = fetch_offset
        self.acknowledged = True


class LeaderProgress:
    """The leader's view of its epoch: voters' progress, the high watermark and the check-quorum timer."""

    def __init__(
        self,
        local_id: int,
        epoch_start_offset: int,
        voters: Iterable[int],
        fetch_timeout_ms: int,
        now_ms: int,
    ) -> None:
        self.local_id = local_id
        self.epoch_start_offset = epoch_start_offset
        self.voters: dict[int, ReplicaProgress] = {
            v: ReplicaProgress(v, acknowledged=v == local_id) for v in sorted(voters)
        }
        self.observers: dict[tuple[int, str | None], ReplicaProgress] = {}
        self.high_watermark: int | None = None
        self.check_quorum_timeout_ms = int(fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR)
        self._check_quorum_deadline = now_ms + self.check_quorum_timeout_ms
        self._fetched: set[int] = set()
        #: LeaderState.beginQuorumEpochTimeoutMs: BeginQuorumEpoch goes to every voter this often
        self.begin_quorum_epoch_timeout_ms = fetch_timeout_ms // 2
        self.begin_quorum_epoch_deadline = now_ms  # Kafka's timer(0): the first round goes out at once

    # -- offsets and the high watermark ---------------------------------------------------------------

    def update_local(self, end_offset: int) -> bool:
        """The leader's own log end moved (after its append is flushed); True if the high watermark did."""
        me = self.voters.get(self.local_id)
        if me is None:
            raise ValueError(f"the leader {self.local_id} is not one of the voters {sorted(self.voters)}")
        if me.end_offset is not None and end_offset < me.end_offset:
            raise ValueError(f"non-monotonic local end offset {me.end_offset} -> {end_offset}")
        me.end_offset = end_offset
        return self._maybe_advance()

    def update_replica(
        self, replica_id: int, directory_id: str | None, fetch_offset: int, now_ms: int
    ) -> bool:
        """A valid Fetch from ``replica_id`` at ``fetch_offset`` (LeaderState.updateReplicaState); True if
        the high watermark moved. A negative id is a consumer: ignored."""
        if replica_id < 0:
            return False
        if replica_id == self.local_id:
            raise ValueError(f"remote replica id {replica_id} matches the local leader id")
        state = self.voters.get(replica_id)
        is_voter = state is not None and state.matches(replica_id, directory_id)
        if not is_voter:
            state = self.observers.setdefault(
                (replica_id, directory_id), ReplicaProgress(replica_id, directory_id)
            )
        assert state is not None
        state.on_fetch(now_ms, fetch_offset, self.voters[self.local_id].end_offset)
        if is_voter:
            self._fetched.add(replica_id)
            needed = len(self.voters) // 2 + 1 - 1  # the leader counts itself
            if len(self._fetched) >= needed:
                self._fetched.clear()
                self._check_quorum_deadline = now_ms + self.check_quorum_timeout_ms
        return is_voter and self._maybe_advance()

    def _maybe_advance(self) -> bool:
        candidate = majority_high_watermark({v: s.end_offset for v, s in self.voters.items()})
        if candidate is None or candidate <= self.epoch_start_offset:
            return False
        if self.high_watermark is not None and candidate <= self.high_watermark:
            return False  # never backwards (a lower one means the voter set changed or data was lost)
        self.high_watermark = candidate
        return True

    # -- check-quorum and BeginQuorumEpoch ------------------------------------------------------------

    def time_until_check_quorum_expires(self, now_ms: int) -> int:
        """0 once no majority fetched within the check-quorum timeout; a lone voter never expires."""
        if len(self.voters) == 1:
            return NEVER
        return max(0, self._check_quorum_deadline - now_ms)

    def acknowledge(self, voter_id: int) -> None:
        """A voter answered BeginQuorumEpoch without an error."""
        if voter_id not in self.voters:
            raise ValueError(f"unexpected acknowledgement from non-voter {voter_id}")
        self.voters[voter_id].acknowledged = True

    def voters_by_descending_offset(self) -> list[int]:
        """The other voters, most caught up first: the resigning leader's preferred successors."""
        others = [s for v, s in self.voters.items() if v != self.local_id]
        others.sort(key=lambda s: (s.end_offset is None, -(s.end_offset or 0), s.replica_id))
        return [s.replica_id for s in others]

    def active_observers(self, now_ms: int) -> list[ReplicaProgress]:
        """Observers that fetched within Kafka's observer session (5 minutes), for DescribeQuorum."""
        for key in [
            k for k, s in self.observers.items() if now_ms - s.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS
        ]:
            del self.observers[key]
        return list(self.observers.values())


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One row of DescribeQuorum's CurrentVoters or Observers (DescribeQuorumResponseData.ReplicaState)."""

    replica_id: int
    directory_id: str | None
    log_end_offset: int
    last_fetch_ms: int
    last_caught_up_ms: int


def describe(progress: LeaderProgress, now_ms: int) -> tuple[list[ReplicaView], list[ReplicaView]]:
    """(voters, observers) as RaftUtil.singletonDescribeQuorumResponse lists them: an unknown end offset
    is -1, and the leader's own fetch and caught-up times are now."""

    def view(s: ReplicaProgress) -> ReplicaView:
        mine = s.replica_id == progress.local_id
        return ReplicaView(
            s.replica_id,
            s.directory_id,
            -1 if s.end_offset is None else s.end_offset,
            now_ms if mine else s.last_fetch_ms,
            now_ms if mine else s.last_caught_up_ms,
        )

    return [view(s) for s in progress.voters.values()], [view(s) for s in progress.active_observers(now_ms)]
