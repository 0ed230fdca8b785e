"""A voter's epoch state machine, as Kafka 3.9's QuorumState and its EpochState classes decide it.

Unattached -> Voted, Candidate, Follower, Unattached (higher epoch)
Voted      -> Candidate (election timeout), Follower, Unattached (higher epoch)
Candidate  -> Leader (majority granted), Candidate (timeout, after a backoff), Follower, Unattached
Leader     -> Resigned (check-quorum, shutdown, resign), Unattached or Follower (higher epoch)
Follower   -> Candidate (fetch timeout), Follower (higher epoch), Unattached (higher epoch)
Resigned   -> Candidate (election timeout), Follower, Unattached (higher epoch)

Kafka 3.9 keeps "Voted" as an UnattachedState with a voted key; here it is its own class, with the same
rules: one vote per epoch, kept in `quorum-state` before the answer goes out. Every transition except to
Resigned is durable: the store is written first. Pure logic: the clock (ms) and the randomness are
injected, the store is any object with ``read`` and ``write``, so tests decide every timeout.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from migrator.controller.raft.leader_progress import NEVER, LeaderProgress

__all__ = [
    "Candidate",
    "ElectionState",
    "EpochState",
    "Follower",
    "Leader",
    "MemoryElectionStore",
    "QuorumState",
    "Resigned",
    "TransitionError",
    "Unattached",
    "Voted",
    "binary_exponential_backoff_ms",
    "strict_exponential_backoff_ms",
]


class TransitionError(RuntimeError):
    """A transition Kafka's QuorumState refuses (its IllegalStateException): a bug or a broken peer."""


@dataclass(frozen=True, slots=True)
class ElectionState:
    """What `quorum-state` holds (Kafka's ElectionState): the epoch and its leader or vote, and the
    voters (written only in data_version 0)."""

    epoch: int
    leader_id: int = -1
    voted_id: int = -1
    voted_directory_id: str | None = None
    voters: frozenset[int] = frozenset()

    def is_leader(self, node_id: int) -> bool:
        return self.leader_id >= 0 and self.leader_id == node_id

    def is_voted_candidate(self, node_id: int, directory_id: str | None) -> bool:
        """ElectionState.isVotedCandidate: no voted directory (kraft.version 0) matches any directory."""
        if self.voted_id < 0 or self.voted_id != node_id:
            return False
        return self.voted_directory_id is None or self.voted_directory_id == directory_id


class ElectionStore(Protocol):
    def read(self) -> ElectionState | None: ...

    def write(self, election: ElectionState) -> None: ...


class MemoryElectionStore:
    """An in-memory store: what a test reads back, and every state written, in order."""

    def __init__(self, initial: ElectionState | None = None) -> None:
        self.current = initial
        self.written: list[ElectionState] = []

    def read(self) -> ElectionState | None:
        return self.current

    def write(self, election: ElectionState) -> None:
        self.current = election
        self.written.append(election)


#: KafkaRaftClient.RETRY_BACKOFF_BASE_MS: the unit of the randomised election backoff
RETRY_BACKOFF_BASE_MS = 50


def binary_exponential_backoff_ms(retries: int, rng: random.Random, max_ms: int) -> int:
    """KafkaRaftClient.binaryExponentialElectionBackoffMs: a random wait before standing again, its
    range doubling with each failed candidacy, so that split votes do not repeat forever."""
    if retries <= 0:
        raise ValueError(f"retries {retries} should be larger than zero")
    return min(RETRY_BACKOFF_BASE_MS * rng.randrange(2 << min(20, retries - 1)), max_ms)


def strict_exponential_backoff_ms(position: int, total: int, max_ms: int) -> int:
    """KafkaRaftClient.strictExponentialElectionBackoffMs: after EndQuorumEpoch the resigned leader's
    first preferred successor stands at once, the next ones later, a non-successor last."""
    if position == 0:
        return 0
    if position < 0 or position >= total:
        return max_ms
    return min(max_ms, (max_ms >> (total - 1)) << (position - 1))


# --- the epoch states ------------------------------------------------------------------------------


@dataclass(slots=True)
class EpochState:
    epoch: int
    high_watermark: int | None = None

    name = "EpochState"

    def election(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(self.epoch, voters=voters)

    @property
    def leader_id(self) -> int:
        return -1

    def can_grant_vote(self, candidate_id: int, candidate_dir: str | None, log_up_to_date: bool) -> bool:
        return False  # Candidate, Leader, Follower, Resigned: never in their own epoch


@dataclass(slots=True)
class Unattached(EpochState):
    """No leader known (or a leader whose endpoint is not: Kafka's start with an unknown leader)."""

    election_deadline: int = NEVER
    known_leader: int = -1

    name = "Unattached"

    def election(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(self.epoch, leader_id=self.known_leader, voters=voters)

    @property
    def leader_id(self) -> int:
        return self.known_leader

    def can_grant_vote(self, candidate_id: int, candidate_dir: str | None, log_up_to_date: bool) -> bool:
        return self.known_leader < 0 and log_up_to_date


@dataclass(slots=True)
class Voted(EpochState):
    """Unattached with this epoch's one vote cast for ``voted_id``."""

    election_deadline: int = NEVER
    voted_id: int = -1
    voted_directory_id: str | None = None

    name = "Voted"

    def election(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(
            self.epoch, voted_id=self.voted_id, voted_directory_id=self.voted_directory_id, voters=voters
        )

    def can_grant_vote(self, candidate_id: int, candidate_dir: str | None, log_up_to_date: bool) -> bool:
        """Again to the same candidate (a retry), never to another (UnattachedState.canGrantVote)."""
        if candidate_id != self.voted_id:
            return False
        return self.voted_directory_id is None or self.voted_directory_id == candidate_dir


@dataclass(slots=True)
class Candidate(EpochState):
    local_id: int = -1
    local_directory_id: str | None = None
    retries: int = 1
    election_deadline: int = NEVER
    voters: frozenset[int] = frozenset()
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    backoff_deadline: int | None = None  # set while backing off before the next candidacy

    name = "Candidate"

    def election(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(
            self.epoch, voted_id=self.local_id, voted_directory_id=self.local_directory_id, voters=voters
        )

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def is_vote_granted(self) -> bool:
        return len(self.granted) >= self.majority

    def is_vote_rejected(self) -> bool:
        """No majority is possible any more: granted plus unanswered is short of one."""
        unrecorded = len(self.voters) - len(self.granted) - len(self.rejected)
        return len(self.granted) + unrecorded < self.majority

    def unrecorded(self) -> list[int]:
        return sorted(self.voters - self.granted - self.rejected)

    def record(self, voter_id: int, granted: bool) -> bool:
        """CandidateState.recordGrantedVote / recordRejectedVote; True if it was not recorded before."""
        if voter_id not in self.voters:
            raise TransitionError(f"a vote from non-voter {voter_id}")
        if voter_id in (self.rejected if granted else self.granted):
            raise TransitionError(f"voter {voter_id} answered both ways in epoch {self.epoch}")
        target = self.granted if granted else self.rejected
        new = voter_id not in target
        target.add(voter_id)
        return new


@dataclass(slots=True)
class Leader(EpochState):
    local_id: int = -1
    granting: frozenset[int] = frozenset()
    progress: LeaderProgress | None = None
    resign_requested: bool = False

    name = "Leader"

    def election(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(self.epoch, leader_id=self.local_id, voters=voters)

    @property
    def leader_id(self) -> int:
        return self.local_id


@dataclass(slots=True)
class Follower(EpochState):
    leader: int = -1
    endpoints: tuple[tuple[str, int], ...] = ()
    fetch_deadline: int = NEVER

    name = "Follower"

    def election(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(self.epoch, leader_id=self.leader, voters=voters)

    @property
    def leader_id(self) -> int:
        return self.leader


@dataclass(slots=True)
class Resigned(EpochState):
    """A leader that fenced itself: no writes, no vote in its epoch; EndQuorumEpoch to the unacked."""

    local_id: int = -1
    election_deadline: int = NEVER
    unacked: set[int] = field(default_factory=set)
    preferred_successors: tuple[int, ...] = ()

    name = "Resigned"

    def election(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(self.epoch, leader_id=self.local_id, voters=voters)

    @property
    def leader_id(self) -> int:
        return self.local_id


# --- QuorumState -----------------------------------------------------------------------------------


class QuorumState:
    """Kafka's QuorumState for static voters: the current epoch state and its legal transitions."""

    def __init__(
        self,
        local_id: int,
        voters: dict[int, tuple[str, int]],
        store: ElectionStore,
        clock: Callable[[], int],
        rng: random.Random,
        election_timeout_ms: int = 1000,
        fetch_timeout_ms: int = 2000,
        local_directory_id: str | None = None,
    ) -> None:
        self.local_id = local_id
        self.local_directory_id = local_directory_id
        self.voter_endpoints = dict(voters)
        self.voters = frozenset(voters)
        self.store = store
        self.clock = clock
        self.rng = rng
        self.election_timeout_ms = election_timeout_ms
        self.fetch_timeout_ms = fetch_timeout_ms
        self.state: EpochState = Unattached(0)

    # -- queries ----------------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        return self.state.leader_id

    @property
    def is_voter(self) -> bool:
        return self.local_id in self.voters

    def is_only_voter(self) -> bool:
        return self.voters == {self.local_id}

    def endpoints_of(self, node_id: int) -> tuple[tuple[str, int], ...]:
        """The voter set's listeners of ``node_id``: one for a static voter, none for a non-voter."""
        ep = self.voter_endpoints.get(node_id)
        return (ep,) if ep is not None else ()

    def leader_endpoints(self) -> tuple[tuple[str, int], ...]:
        if isinstance(self.state, Follower):
            return self.state.endpoints
        if isinstance(self.state, Leader | Resigned):
            return self.endpoints_of(self.local_id)
        return ()

    def random_election_timeout_ms(self) -> int:
        """QuorumState.randomElectionTimeoutMs: uniform in [timeout, 2 x timeout)."""
        if self.election_timeout_ms == 0:
            return 0
        return self.election_timeout_ms + self.rng.randrange(self.election_timeout_ms)

    # -- start ------------------------------------------------------------------------------------

    def initialize(self, log_end_offset: int, log_end_epoch: int) -> None:
        """QuorumState.initialize: resume in the state `quorum-state` and the log's last epoch allow."""
        election = self.store.read() or ElectionState(0, voters=self.voters)
        now = self.clock()
        timeout = now + self.random_election_timeout_ms()
        state: EpochState
        if election.epoch < log_end_epoch:
            state = Unattached(log_end_epoch, election_deadline=timeout)
        elif election.is_leader(self.local_id):
            # a leader restarts resigned in its epoch: it must not vote in it, nor reuse its offsets
            state = Resigned(
                election.epoch,
                local_id=self.local_id,
                election_deadline=timeout,
                unacked=set(self.voters - {self.local_id}),
            )
        elif election.is_voted_candidate(self.local_id, self.local_directory_id):
            state = self._candidate(election.epoch, retries=1, deadline=timeout)
        elif election.voted_id >= 0:
            state = Voted(
                election.epoch,
                election_deadline=timeout,
                voted_id=election.voted_id,
                voted_directory_id=election.voted_directory_id,
            )
        elif election.leader_id >= 0:
            endpoints = self.endpoints_of(election.leader_id)
            if endpoints:
                state = Follower(
                    election.epoch,
                    leader=election.leader_id,
                    endpoints=endpoints,
                    fetch_deadline=now + self.fetch_timeout_ms,
                )
            else:
                state = Unattached(election.epoch, election_deadline=timeout, known_leader=election.leader_id)
        else:
            state = Unattached(election.epoch, election_deadline=timeout)
        if not self.is_voter and isinstance(state, Unattached):
            state.election_deadline = NEVER
        self._durable(state)

    # -- transitions ------------------------------------------------------------------------------

    def _candidate(self, epoch: int, retries: int, deadline: int) -> Candidate:
        return Candidate(
            epoch,
            self._hw(),
            local_id=self.local_id,
            local_directory_id=self.local_directory_id,
            retries=retries,
            election_deadline=deadline,
            voters=self.voters,
            granted={self.local_id},
        )

    def _hw(self) -> int | None:
        """The high watermark the next state starts from (Kafka's state.highWatermark())."""
        st = self.state
        if isinstance(st, Leader) and st.progress is not None:
            return st.progress.high_watermark
        return st.high_watermark

    def _remaining_election_ms(self) -> int:
        st = self.state
        if isinstance(st, Candidate | Unattached | Voted):
            return max(0, st.election_deadline - self.clock())
        return self.random_election_timeout_ms()

    def to_unattached(self, epoch: int) -> None:
        """A higher epoch seen without its leader. Keeps the election timer of a candidate or an
        unattached voter (a vote request must not postpone its own election), else starts one."""
        if epoch <= self.epoch:
            raise TransitionError(
                f"cannot go Unattached in epoch {epoch} from {self.state.name} in epoch {self.epoch}"
            )
        if not self.is_voter:
            deadline = NEVER
        else:
            deadline = self.clock() + self._remaining_election_ms()
        self._durable(Unattached(epoch, self._hw(), election_deadline=deadline))

    def to_voted(self, epoch: int, candidate_id: int, candidate_dir: str | None) -> None:
        """Grant this epoch's vote; the election timer restarts (the candidate is as likely to win)."""
        if candidate_id == self.local_id:
            raise TransitionError(f"cannot vote for the local id {candidate_id}")
        if epoch < self.epoch:
            raise TransitionError(f"cannot vote in epoch {epoch}: the current epoch {self.epoch} is larger")
        if epoch == self.epoch and not (isinstance(self.state, Unattached) and self.state.known_leader < 0):
            raise TransitionError(f"cannot vote in epoch {epoch} from {self.state.name}")
        deadline = self.clock() + self.random_election_timeout_ms()
        self._durable(
            Voted(
                epoch,
                self._hw(),
                election_deadline=deadline,
                voted_id=candidate_id,
                voted_directory_id=candidate_dir,
            )
        )

    def to_follower(self, epoch: int, leader_id: int, endpoints: tuple[tuple[str, int], ...]) -> None:
        if not endpoints:
            raise TransitionError(f"cannot follow leader {leader_id} in epoch {epoch} without its endpoint")
        if leader_id == self.local_id:
            raise TransitionError(f"cannot follow leader {leader_id}: it is the local node")
        if epoch < self.epoch:
            raise TransitionError(f"cannot follow in epoch {epoch}: the current epoch {self.epoch} is larger")
        if epoch == self.epoch:
            st = self.state
            if isinstance(st, Follower) and len(st.endpoints) >= len(endpoints):
                raise TransitionError(f"already following {st.leader} in epoch {epoch}")
            if isinstance(st, Leader):
                raise TransitionError(f"cannot follow {leader_id} in epoch {epoch}: this node leads it")
        self._durable(
            Follower(
                epoch,
                self._hw(),
                leader=leader_id,
                endpoints=endpoints,
                fetch_deadline=self.clock() + self.fetch_timeout_ms,
            )
        )

    def to_candidate(self) -> None:
        if not self.is_voter:
            raise TransitionError(f"node {self.local_id} is not one of the voters {sorted(self.voters)}")
        if isinstance(self.state, Leader):
            raise TransitionError("cannot become a candidate: this node is the leader")
        retries = self.state.retries + 1 if isinstance(self.state, Candidate) else 1
        deadline = self.clock() + self.random_election_timeout_ms()
        self._durable(self._candidate(self.epoch + 1, retries, deadline))

    def to_leader(self, epoch_start_offset: int) -> Leader:
        """Won: a majority granted. The high watermark starts unknown (it may not go back)."""
        st = self.state
        if not self.is_voter or not isinstance(st, Candidate):
            raise TransitionError(f"cannot become the leader from {st.name}")
        if not st.is_vote_granted():
            raise TransitionError("cannot become the leader without a majority of votes")
        progress = LeaderProgress(
            self.local_id, epoch_start_offset, self.voters, self.fetch_timeout_ms, self.clock()
        )
        leader = Leader(
            st.epoch, None, local_id=self.local_id, granting=frozenset(st.granted), progress=progress
        )
        self._durable(leader)
        return leader

    def to_resigned(self, preferred_successors: list[int]) -> None:
        """A soft state: not written (a leader always restarts as Resigned)."""
        if not isinstance(self.state, Leader):
            raise TransitionError(f"cannot resign from {self.state.name}")
        self.state = Resigned(
            self.epoch,
            local_id=self.local_id,
            election_deadline=self.clock() + self.random_election_timeout_ms(),
            unacked=set(self.voters - {self.local_id}),
            preferred_successors=tuple(preferred_successors),
        )

    def _durable(self, state: EpochState) -> None:
        """Write the election first: a vote or an epoch exists only once it is on disk."""
        self.store.write(state.election(self.voters))
        self.state = state

    # -- votes --------------------------------------------------------------------------------------

    def can_grant_vote(self, candidate_id: int, candidate_dir: str | None, log_up_to_date: bool) -> bool:
        return self.state.can_grant_vote(candidate_id, candidate_dir, log_up_to_date)

    def is_unattached_not_voted(self) -> bool:
        return isinstance(self.state, Unattached)
