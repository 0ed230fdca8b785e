"""A KRaft voter's decisions, as Kafka 3.9's KafkaRaftClient makes them for static voters.

Requests in (Vote, BeginQuorumEpoch, EndQuorumEpoch, a voter's Fetch) are answered from the epoch
state; answers to this voter's own requests move it; `poll` says what to send now and how long nothing
needs doing. No sockets, no disk: the caller moves the messages, the election store keeps
`quorum-state`, ``log_end`` tells the log's end offset and epoch, and the events list says when this
node became leader (the caller then starts the epoch in the log: LeaderChange at the epoch start offset).
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from migrator.controller.raft.election import (
    Candidate,
    ElectionStore,
    Follower,
    Leader,
    QuorumState,
    Resigned,
    TransitionError,
    Unattached,
    Voted,
    binary_exponential_backoff_ms,
    strict_exponential_backoff_ms,
)
from migrator.controller.raft.leader_progress import NEVER
from migrator.controller.raft.quorum_config import QuorumConfig
from migrator.controller.raft.request_manager import RequestManager
from migrator.controller.raft.validation import (
    cluster_ok,
    leader_endpoints,
    leader_only_error,
    valid_voter_key,
    voter_only_error,
)
from migrator.controller.raft.voter_messages import (
    BROKER_NOT_AVAILABLE,
    FENCED_LEADER_EPOCH,
    INCONSISTENT_CLUSTER_ID,
    INVALID_REQUEST,
    INVALID_VOTER_KEY,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_LEADER_EPOCH,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    Endpoint,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)

__all__ = ["Outbound", "RaftVoter"]

log = logging.getLogger("zk2kraft.controller.raft.voter")

#: KafkaRaftClient.MAX_FETCH_WAIT_MS: how long a voter's Fetch may wait at the leader
MAX_FETCH_WAIT_MS = 500

Request = VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest
Response = VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse


@dataclass(frozen=True, slots=True)
class Outbound:
    """A request to send to voter ``destination``; its answer comes back with ``correlation_id``."""

    destination: int
    correlation_id: int
    request: Request


class RaftVoter:
    """One voter of `__cluster_metadata`'s quorum (static voters, kraft.version 0)."""

    def __init__(
        self,
        node_id: int,
        config: QuorumConfig,
        store: ElectionStore,
        clock: Callable[[], int],
        log_end: Callable[[], tuple[int, int]],
        rng: random.Random | None = None,
        cluster_id: str | None = None,
        directory_id: str | None = None,
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.clock = clock
        self.log_end = log_end  # (end offset, epoch of the last record) of the local log
        self.rng = rng or random.Random()
        self.cluster_id = cluster_id
        self.directory_id = directory_id
        self.quorum = QuorumState(
            node_id,
            {v: (e.host, e.port) for v, e in config.voters.items()},
            store,
            clock,
            self.rng,
            config.election_timeout_ms,
            config.fetch_timeout_ms,
            directory_id,
        )
        self.requests = RequestManager(config.retry_backoff_ms, config.request_timeout_ms)
        self._ids = itertools.count(1)
        self.shutting_down = False
        self._shutdown_deadline = NEVER
        #: ("leader" | "follower" | "candidate" | "unattached" | "voted" | "resigned", epoch, ...)
        self.events: list[tuple[Any, ...]] = []

    # -- state ----------------------------------------------------------------------------------------

    @property
    def state(self) -> Any:
        return self.quorum.state

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    @property
    def leader_id(self) -> int:
        return self.quorum.leader_id

    @property
    def high_watermark(self) -> int | None:
        st = self.quorum.state
        if isinstance(st, Leader) and st.progress is not None:
            return st.progress.high_watermark
        return st.high_watermark

    def start(self) -> None:
        """KafkaRaftClient.initialize: resume from `quorum-state` and the log's last epoch."""
        offset, epoch = self.log_end()
        self.quorum.initialize(offset, epoch)
        if isinstance(self.state, Leader):
            raise TransitionError("a voter cannot start as the leader")
        if isinstance(self.state, Candidate):
            self._on_candidate()
        self._event()
        if self.quorum.is_only_voter() and not isinstance(self.state, Candidate | Leader):
            self._to_candidate()

    def _event(self) -> None:
        st = self.quorum.state
        self.events.append((st.name.lower(), st.epoch, st.leader_id))

    # -- transitions with KafkaRaftClient's side effects -------------------------------------------------

    def _to_candidate(self) -> None:
        self.quorum.to_candidate()
        self._event()
        self._on_candidate()

    def _on_candidate(self) -> None:
        st = self.quorum.state
        assert isinstance(st, Candidate)
        if not self._maybe_lead(st):
            self.requests.reset_all()

    def _maybe_lead(self, st: Candidate) -> bool:
        if not st.is_vote_granted():
            return False
        offset, _ = self.log_end()
        leader = self.quorum.to_leader(offset)
        assert leader.progress is not None
        leader.progress.update_local(offset)
        self.requests.reset_all()
        self.events.append(("leader", leader.epoch, self.node_id, offset))
        return True

    def _to_unattached(self, epoch: int) -> None:
        self.quorum.to_unattached(epoch)
        self._event()
        self.requests.reset_all()

    def _to_follower(self, epoch: int, leader: int, endpoints: tuple[Endpoint, ...]) -> None:
        self.quorum.to_follower(epoch, leader, endpoints)
        self._event()
        self.requests.reset_all()

    def _to_resigned(self, successors: list[int]) -> None:
        self.quorum.to_resigned(successors)
        self._event()
        self.requests.reset_all()

    def shutdown(self, timeout_ms: int) -> None:
        """KafkaRaftClient.shutdown: a leader resigns and tells the others (EndQuorumEpoch) so that its
        first successor stands at once; nobody stands for election any more."""
        if not self.shutting_down:
            self.shutting_down = True
            self._shutdown_deadline = self.clock() + timeout_ms

    def shutdown_complete(self) -> bool:
        """KafkaRaftClient.maybeCompleteShutdown: another leader took over, or nobody needs this voter
        to hand over (not a voter, the only voter), or the timeout passed."""
        if not self.shutting_down:
            return False
        if self.clock() >= self._shutdown_deadline or not self.quorum.is_voter or self.quorum.is_only_voter():
            return True
        return 0 <= self.leader_id != self.node_id

    def resign(self) -> None:
        """RaftClient.resign for the current epoch: a leader steps down at its next poll."""
        st = self.quorum.state
        if isinstance(st, Leader):
            st.resign_requested = True

    # -- shared checks ----------------------------------------------------------------------------------

    def _has_consistent_leader(self, epoch: int, leader: int) -> bool:
        if leader >= 0 and leader == self.node_id:
            return isinstance(self.state, Leader)
        return epoch != self.epoch or leader < 0 or self.leader_id < 0 or leader == self.leader_id

    def _maybe_transition(self, leader: int, epoch: int, endpoints: tuple[Endpoint, ...]) -> None:
        """KafkaRaftClient.maybeTransition: follow a newer epoch, or this epoch's newly known leader."""
        if not self._has_consistent_leader(epoch, leader):
            raise TransitionError(
                f"leader {leader} in epoch {epoch} is inconsistent with leader {self.leader_id} of epoch {self.epoch}"
            )
        if epoch > self.epoch:
            if leader >= 0:
                self._to_follower(epoch, leader, endpoints)
            else:
                self._to_unattached(epoch)
        elif leader >= 0 and (self.leader_id < 0 or len(endpoints) > len(self.quorum.leader_endpoints())):
            self._to_follower(epoch, leader, endpoints)

    def _leader_endpoint(self) -> Endpoint | None:
        eps = self.quorum.leader_endpoints()
        return eps[0] if eps else None

    # -- Vote ---------------------------------------------------------------------------------------------

    def _vote_answer(self, error: int, granted: bool) -> VoteResponse:
        return VoteResponse(NONE, error, self.leader_id, self.epoch, granted, self._leader_endpoint())

    def handle_vote(self, req: VoteRequest) -> VoteResponse:
        """KafkaRaftClient.handleVoteRequest: the vote is granted at most once per epoch, to a candidate
        whose last (epoch, offset) is at least this log's, and written before the answer goes out."""
        if not cluster_ok(req.cluster_id, self.cluster_id):
            return VoteResponse(INCONSISTENT_CLUSTER_ID)
        if req.last_offset < 0 or req.last_offset_epoch < 0 or req.last_offset_epoch >= req.candidate_epoch:
            return self._vote_answer(INVALID_REQUEST, False)
        error = voter_only_error(req.candidate_id, req.candidate_epoch, self.epoch)
        if error:
            return self._vote_answer(error, False)
        if req.candidate_epoch > self.epoch:
            self._to_unattached(req.candidate_epoch)
        if not valid_voter_key(req.voter_id, req.voter_directory_id, self.node_id, self.directory_id):
            return self._vote_answer(INVALID_VOTER_KEY, False)
        end_offset, end_epoch = self.log_end()
        up_to_date = (req.last_offset_epoch, req.last_offset) >= (end_epoch, end_offset)
        granted = self.quorum.can_grant_vote(req.candidate_id, req.candidate_directory_id, up_to_date)
        if granted and self.quorum.is_unattached_not_voted():
            self.quorum.to_voted(req.candidate_epoch, req.candidate_id, req.candidate_directory_id)
            self._event()
        log.info(
            "vote for %d in epoch %d %s",
            req.candidate_id,
            req.candidate_epoch,
            "granted" if granted else "rejected",
        )
        return self._vote_answer(NONE, granted)

    # -- BeginQuorumEpoch -------------------------------------------------------------------------------------

    def _bqe_answer(self, error: int) -> BeginQuorumEpochResponse:
        return BeginQuorumEpochResponse(NONE, error, self.leader_id, self.epoch, self._leader_endpoint())

    def handle_begin_quorum_epoch(self, req: BeginQuorumEpochRequest) -> BeginQuorumEpochResponse:
        """A leader announcing its epoch: follow it (KafkaRaftClient.handleBeginQuorumEpochRequest)."""
        if not cluster_ok(req.cluster_id, self.cluster_id):
            return BeginQuorumEpochResponse(INCONSISTENT_CLUSTER_ID)
        error = voter_only_error(req.leader_id, req.leader_epoch, self.epoch)
        if error:
            return self._bqe_answer(error)
        self._maybe_transition(
            req.leader_id,
            req.leader_epoch,
            leader_endpoints(req.leader_endpoints, self.config.voters.get(req.leader_id)),
        )
        if not valid_voter_key(req.voter_id, req.voter_directory_id, self.node_id, self.directory_id):
            return self._bqe_answer(INVALID_VOTER_KEY)
        return self._bqe_answer(NONE)

    # -- EndQuorumEpoch ---------------------------------------------------------------------------------------

    def _eqe_answer(self, error: int) -> EndQuorumEpochResponse:
        return EndQuorumEpochResponse(NONE, error, self.leader_id, self.epoch, self._leader_endpoint())

    def handle_end_quorum_epoch(self, req: EndQuorumEpochRequest) -> EndQuorumEpochResponse:
        """The leader resigned: its followers stand for election after a backoff that is shorter the
        earlier they are in its preferred successors (KafkaRaftClient.handleEndQuorumEpochRequest)."""
        if not cluster_ok(req.cluster_id, self.cluster_id):
            return EndQuorumEpochResponse(INCONSISTENT_CLUSTER_ID)
        error = voter_only_error(req.leader_id, req.leader_epoch, self.epoch)
        if error:
            return self._eqe_answer(error)
        self._maybe_transition(
            req.leader_id,
            req.leader_epoch,
            leader_endpoints(req.leader_endpoints, self.config.voters.get(req.leader_id)),
        )
        st = self.state
        if isinstance(st, Follower) and st.leader == req.leader_id:
            st.fetch_deadline = self.clock() + self.end_epoch_backoff_ms(list(req.preferred_successors))
        return self._eqe_answer(NONE)

    def end_epoch_backoff_ms(self, successors: list[int]) -> int:
        """This node's wait after EndQuorumEpoch, by its place among the resigned leader's successors."""
        position = successors.index(self.node_id) if self.node_id in successors else len(successors)
        return strict_exponential_backoff_ms(position, len(successors), self.config.election_backoff_max_ms)

    def election_backoff_ms(self, retries: int) -> int:
        return binary_exponential_backoff_ms(retries, self.rng, self.config.election_backoff_max_ms)

    # -- Fetch (the leader's side) ----------------------------------------------------------------------------

    def handle_fetch(self, req: FetchRequest, offset_valid: bool = True) -> FetchResponse:
        """A Fetch as the leader's state machine sees it (KafkaRaftClient.handleFetchRequest and
        tryCompleteFetchRequest): the epoch checked, and a voter's offset counted towards the high
        watermark and check-quorum when the log found (offset, last epoch) valid (``offset_valid``)."""
        if not cluster_ok(req.cluster_id, self.cluster_id):
            return FetchResponse(INCONSISTENT_CLUSTER_ID)
        if (
            req.max_wait_ms < 0
            or req.fetch_offset < 0
            or req.last_fetched_epoch < 0
            or req.last_fetched_epoch > req.current_leader_epoch
        ):
            return self._fetch_answer(INVALID_REQUEST)
        error = leader_only_error(
            req.current_leader_epoch, self.epoch, isinstance(self.state, Leader), self.shutting_down
        )
        if error:
            return self._fetch_answer(error)
        st = self.state
        assert isinstance(st, Leader) and st.progress is not None
        if offset_valid:
            st.progress.update_replica(
                req.replica_id, req.replica_directory_id, req.fetch_offset, self.clock()
            )
        return self._fetch_answer(NONE)

    def _fetch_answer(self, error: int) -> FetchResponse:
        hw = self.high_watermark
        return FetchResponse(
            NONE, error, self.leader_id, self.epoch, -1 if hw is None else hw, self._leader_endpoint()
        )

    def on_local_append(self, end_offset: int) -> bool:
        """The leader's log end after a flushed append; True if the high watermark moved."""
        st = self.state
        if not isinstance(st, Leader) or st.progress is None:
            return False
        return st.progress.update_local(end_offset)

    # -- answers to this voter's requests -----------------------------------------------------------------

    def handle_response(self, source: int, correlation_id: int, response: Response) -> None:
        """An answer from ``source``; dropped unless it answers that peer's in-flight request."""
        if not self.requests.is_expected(source, correlation_id):
            log.debug("dropping an answer from %d no longer expected: %s", source, response)
            return
        now = self.clock()
        ok = self._handle_response(source, response)
        self.requests.on_result(source, correlation_id, ok, now)

    def on_request_failed(self, source: int, correlation_id: int) -> None:
        """The connection failed or the request timed out: back off from that peer."""
        self.requests.on_result(source, correlation_id, False, self.clock())

    def _handle_response(self, source: int, response: Response) -> bool:
        if response.error_code != NONE:
            if response.error_code != BROKER_NOT_AVAILABLE:
                log.error(
                    "unexpected error %d in %s from %d", response.error_code, type(response).__name__, source
                )
            return False
        endpoints = (
            leader_endpoints(response.leader_endpoint, self.config.voters.get(response.leader_id))
            if response.leader_id >= 0
            else ()
        )
        handled = self._common_response(
            response.partition_error, response.leader_id, response.leader_epoch, endpoints
        )
        if handled is not None:
            return handled
        error = response.partition_error
        if error != NONE:
            log.error("unexpected error %d in %s from %d", error, type(response).__name__, source)
            return False
        st = self.state
        if isinstance(response, VoteResponse):
            if isinstance(st, Candidate):
                st.record(source, response.vote_granted)
                if response.vote_granted:
                    self._maybe_lead(st)
                elif st.is_vote_rejected() and st.backoff_deadline is None:
                    st.backoff_deadline = self.clock() + self.election_backoff_ms(st.retries)
        elif isinstance(response, BeginQuorumEpochResponse):
            if isinstance(st, Leader) and st.progress is not None:
                st.progress.acknowledge(source)
        elif isinstance(response, EndQuorumEpochResponse):
            if isinstance(st, Resigned):
                st.unacked.discard(source)
        elif isinstance(st, Follower):  # FetchResponse: the records went to the log
            if response.high_watermark >= 0:
                hw = min(self.log_end()[0], response.high_watermark)
                if st.high_watermark is None or hw > st.high_watermark:
                    st.high_watermark = hw
            st.fetch_deadline = self.clock() + self.config.fetch_timeout_ms
        return True

    def _common_response(
        self, error: int, leader: int, epoch: int, endpoints: tuple[Endpoint, ...]
    ) -> bool | None:
        """KafkaRaftClient.maybeHandleCommonResponse: None when the API's own handling goes on."""
        if epoch < self.epoch or error == UNKNOWN_LEADER_EPOCH:
            return True  # an answer about an older epoch
        if epoch > self.epoch or error in (FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER):
            self._maybe_transition(leader, epoch, endpoints)
            return True
        if epoch == self.epoch and leader >= 0 and self.leader_id < 0:
            self._to_follower(epoch, leader, endpoints)
            return None if error == NONE else True
        if error == BROKER_NOT_AVAILABLE:
            return False
        if error == INVALID_VOTER_KEY:
            return True
        if error == INVALID_REQUEST:
            raise TransitionError("a peer answered INVALID_REQUEST to this voter's request")
        return None

    # -- poll -------------------------------------------------------------------------------------------------

    def poll(self) -> tuple[list[Outbound], int]:
        """What to send now, and the milliseconds until the next poll is due (KafkaRaftClient.poll)."""
        now = self.clock()
        out: list[Outbound] = []
        st = self.state
        if isinstance(st, Leader):
            wait = self._poll_leader(st, now, out)
        elif isinstance(st, Candidate):
            wait = self._poll_candidate(st, now, out)
        elif isinstance(st, Follower):
            wait = self._poll_follower(st, now, out)
        elif isinstance(st, Unattached | Voted):
            if self.shutting_down or not self.quorum.is_voter:
                wait = NEVER
            elif now >= st.election_deadline:
                self._to_candidate()
                wait = 0
            else:
                wait = st.election_deadline - now
        elif isinstance(st, Resigned):
            wait = self._poll_resigned(st, now, out)
        else:
            raise TransitionError(f"unexpected state {st}")
        return out, max(0, wait)

    def _send(self, out: list[Outbound], peer: int, now: int, build: Callable[[int], Request]) -> int:
        """KafkaRaftClient.maybeSendRequest: the time to wait before that peer can be asked again."""
        if self.requests.is_backing_off(peer, now):
            return self.requests.remaining_ms(peer, now)
        if self.requests.is_ready(peer, now):
            cid = next(self._ids)
            out.append(Outbound(peer, cid, build(peer)))
            self.requests.on_sent(peer, cid, now)
        return self.requests.remaining_ms(peer, now)

    def _others(self) -> list[int]:
        return sorted(self.quorum.voters - {self.node_id})

    def _poll_leader(self, st: Leader, now: int, out: list[Outbound]) -> int:
        assert st.progress is not None
        check = st.progress.time_until_check_quorum_expires(now)
        if self.shutting_down or st.resign_requested or check == 0:
            if check == 0:
                log.info("epoch %d: no Fetch from a majority of the voters within %d ms: resigning",
                         st.epoch, st.progress.check_quorum_timeout_ms)  # fmt: skip
            self._to_resigned(st.progress.voters_by_descending_offset())
            return 0
        until_bqe = st.progress.begin_quorum_epoch_deadline - now
        if until_bqe <= 0:
            ep = self.config.voters[self.node_id]
            until_bqe = NEVER
            for peer in self._others():
                until_bqe = min(until_bqe, self._send(out, peer, now, lambda p: BeginQuorumEpochRequest(
                    self.cluster_id, self.node_id, st.epoch, p, None, ((self.config.listener_name, ep.host, ep.port),))))  # fmt: skip
            st.progress.begin_quorum_epoch_deadline = now + st.progress.begin_quorum_epoch_timeout_ms
        return min(until_bqe, check)

    def _vote_request(self, peer: int) -> VoteRequest:
        offset, epoch = self.log_end()
        return VoteRequest(self.cluster_id, self.epoch, self.node_id, epoch, offset, peer, self.directory_id)

    def _poll_candidate(self, st: Candidate, now: int, out: list[Outbound]) -> int:
        if self.shutting_down:
            return self._send_votes(st, now, out)
        if st.backoff_deadline is not None:
            if now >= st.backoff_deadline:
                log.info("epoch %d: election backoff over: standing again", st.epoch)
                self._to_candidate()
                return 0
            return st.backoff_deadline - now
        if now >= st.election_deadline:
            backoff = self.election_backoff_ms(st.retries)
            log.info("epoch %d: election timed out: backing off %d ms", st.epoch, backoff)
            st.backoff_deadline = now + backoff
            return backoff
        return min(self._send_votes(st, now, out), st.election_deadline - now)

    def _send_votes(self, st: Candidate, now: int, out: list[Outbound]) -> int:
        if st.is_vote_rejected():
            return NEVER
        wait = NEVER
        for peer in st.unrecorded():
            if peer != self.node_id:
                wait = min(wait, self._send(out, peer, now, self._vote_request))
        return wait

    def fetch_request(self) -> FetchRequest:
        """KafkaRaftClient.buildFetchRequest: from the local log end, in the current epoch."""
        offset, epoch = self.log_end()
        return FetchRequest(
            self.cluster_id, self.node_id, offset, epoch, self.epoch, MAX_FETCH_WAIT_MS, self.directory_id
        )

    def _poll_follower(self, st: Follower, now: int, out: list[Outbound]) -> int:
        if self.shutting_down:
            return max(0, self._shutdown_deadline - now)  # a follower has nothing to hand over
        if now >= st.fetch_deadline:
            log.info(
                "epoch %d: no answer from leader %d within the fetch timeout: standing", st.epoch, st.leader
            )
            self._to_candidate()
            return 0
        wait = self._send(out, st.leader, now, lambda _p: self.fetch_request())
        return min(wait, st.fetch_deadline - now)

    def _poll_resigned(self, st: Resigned, now: int, out: list[Outbound]) -> int:
        wait = NEVER
        ep = self.config.voters.get(self.node_id)
        endpoints = ((self.config.listener_name, ep.host, ep.port),) if ep is not None else ()
        for peer in sorted(st.unacked):
            wait = min(wait, self._send(out, peer, now, lambda _p: EndQuorumEpochRequest(
                self.cluster_id, self.node_id, st.epoch, st.preferred_successors, endpoints)))  # fmt: skip
        if self.shutting_down:
            return wait
        if now >= st.election_deadline:
            if self.quorum.is_voter:
                self._to_candidate()
            else:
                self._to_unattached(self.epoch + 1)
            return 0
        return min(wait, st.election_deadline - now)
