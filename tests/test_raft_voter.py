"""The KRaft voter's state machine (controller.raft), driven deterministically: a fake clock, seeded
randomness and an in-memory router between three voters, each with an in-memory log of record epochs."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from migrator.controller.raft.describe import describe_quorum
from migrator.controller.raft.election import (
    Candidate,
    ElectionState,
    Follower,
    Leader,
    MemoryElectionStore,
    Resigned,
    TransitionError,
    Unattached,
    Voted,
    strict_exponential_backoff_ms,
)
from migrator.controller.raft.leader_progress import LeaderProgress, describe, majority_high_watermark
from migrator.controller.raft.quorum_config import QuorumConfig, parse_voters
from migrator.controller.raft.voter import RaftVoter
from migrator.controller.raft.voter_messages import (
    FENCED_LEADER_EPOCH,
    INVALID_REQUEST,
    INVALID_VOTER_KEY,
    NONE,
    BeginQuorumEpochRequest,
    DescribeQuorumRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    VoteRequest,
)
from migrator.errors import BadInputError

VOTERS = "1@localhost:9101,2@localhost:9102,3@localhost:9103"


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


@dataclass
class Node:
    voter: RaftVoter
    store: MemoryElectionStore
    log: list[int] = field(default_factory=list)  # the epoch of each record
    up: bool = True

    def end(self) -> tuple[int, int]:
        return len(self.log), (self.log[-1] if self.log else 0)


class Cluster:
    """Three voters and a router: requests are answered at once (or lost when either end is down)."""

    def __init__(
        self, seed: int = 7, props: dict[str, str] | None = None, ids: tuple[int, ...] = (1, 2, 3)
    ) -> None:
        self.clock = Clock()
        voters = ",".join(f"{i}@localhost:{9100 + i}" for i in ids)
        self.config = QuorumConfig.from_properties({"controller.quorum.voters": voters, **(props or {})})
        self.nodes: dict[int, Node] = {}
        for i in ids:
            self.nodes[i] = self._node(i, MemoryElectionStore(), [], seed)

    def _node(self, i: int, store: MemoryElectionStore, log: list[int], seed: int) -> Node:
        holder: dict[str, Node] = {}
        voter = RaftVoter(
            i,
            self.config,
            store,
            self.clock,
            lambda: holder["n"].end(),
            random.Random(seed * 100 + i),
            "cluster-x",
        )
        holder["n"] = node = Node(voter, store, log)
        return node

    def start(self) -> None:
        for n in self.nodes.values():
            n.voter.start()
            self._events(n)

    def restart(self, i: int, seed: int = 99) -> Node:
        old = self.nodes[i]
        self.nodes[i] = node = self._node(i, old.store, old.log, seed)
        node.voter.start()
        self._events(node)
        return node

    def _events(self, n: Node) -> None:
        """A new leader starts its epoch in its log (Kafka's LeaderChange record) and reports the end."""
        while n.voter.events:
            ev = n.voter.events.pop(0)
            if ev[0] == "leader":
                n.log.append(ev[1])
                n.voter.on_local_append(len(n.log))

    def step(self) -> int:
        """One poll of every live voter, its requests delivered; the smallest wait they asked for."""
        wait = 1 << 62
        for i, n in self.nodes.items():
            if not n.up:
                continue
            out, w = n.voter.poll()
            self._events(n)
            wait = min(wait, w)
            for o in out:
                self.deliver(i, o.destination, o.correlation_id, o.request)
        return wait

    def deliver(self, src: int, dst: int, cid: int, req: object) -> None:
        target, source = self.nodes[dst], self.nodes[src]
        if not target.up:
            source.voter.on_request_failed(dst, cid)
            return
        v = target.voter
        if isinstance(req, VoteRequest):
            resp: object = v.handle_vote(req)
        elif isinstance(req, BeginQuorumEpochRequest):
            resp = v.handle_begin_quorum_epoch(req)
        elif isinstance(req, EndQuorumEpochRequest):
            resp = v.handle_end_quorum_epoch(req)
        else:
            assert isinstance(req, FetchRequest)
            resp = self._fetch(target, source, req)
        self._events(target)
        source.voter.handle_response(dst, cid, resp)  # type: ignore[arg-type]
        self._events(source)

    def _fetch(self, leader: Node, follower: Node, req: FetchRequest) -> FetchResponse:
        """The log's part of a Fetch: valid when the follower's log is a prefix of the leader's; then it
        gets the rest; otherwise it is truncated to the common prefix (Kafka's diverging epoch)."""
        off = req.fetch_offset
        valid = off <= len(leader.log) and leader.log[:off] == follower.log[:off]
        resp = leader.voter.handle_fetch(req, offset_valid=valid)
        if resp.partition_error == NONE:
            if valid:
                follower.log[off:] = leader.log[off:]
            else:
                common = 0
                while common < min(off, len(leader.log)) and leader.log[common] == follower.log[common]:
                    common += 1
                del follower.log[common:]
        return resp

    def run(self, ms: int, tick: int = 10) -> None:
        end = self.clock.ms + ms
        while self.clock.ms < end:
            self.step()
            self.clock.ms += tick

    def leaders(self) -> list[int]:
        return [i for i, n in self.nodes.items() if n.up and isinstance(n.voter.state, Leader)]


# --- configuration --------------------------------------------------------------------------------


def test_quorum_config_reads_kafkas_property_names_and_defaults():
    c = QuorumConfig.from_properties({"controller.quorum.voters": VOTERS})
    assert sorted(c.voters) == [1, 2, 3] and c.voters[2].host == "localhost" and c.voters[2].port == 9102
    assert (c.election_timeout_ms, c.fetch_timeout_ms, c.election_backoff_max_ms, c.request_timeout_ms) == (
        1000,
        2000,
        1000,
        2000,
    )
    c = QuorumConfig.from_properties(
        {
            "controller.quorum.voters": VOTERS,
            "controller.quorum.election.timeout.ms": "300",
            "controller.quorum.fetch.timeout.ms": "600",
            "controller.quorum.election.backoff.max.ms": "200",
            "controller.quorum.request.timeout.ms": "700",
        }
    )
    assert (c.election_timeout_ms, c.fetch_timeout_ms, c.election_backoff_max_ms, c.request_timeout_ms) == (
        300,
        600,
        200,
        700,
    )
    assert parse_voters("3000@[::1]:9093")[3000].host == "::1"


@pytest.mark.parametrize(
    "text, words",
    [
        ("1@a:1,x@b:2", "voter ID"),
        ("1@a", "host name"),
        ("1@a:x", "host port"),
        ("1:a:1", "{id}@{host}:{port}"),
        ("1@0.0.0.0:9093", "routeable"),
        ("1@a:1,1@b:2", "twice"),
        ("", "not set"),
    ],
)
def test_quorum_config_refuses_what_kafka_refuses_with_one_line(text, words):
    with pytest.raises(BadInputError, match="controller.quorum.voters") as e:
        QuorumConfig.from_properties({"controller.quorum.voters": text})
    assert words in str(e.value)
    with pytest.raises(BadInputError, match="election.timeout.ms"):
        QuorumConfig.from_properties(
            {"controller.quorum.voters": VOTERS, "controller.quorum.election.timeout.ms": "1s"}
        )


# --- the high watermark ---------------------------------------------------------------------------


def test_majority_high_watermark_is_what_half_the_voters_have_reached():
    assert majority_high_watermark({1: 10, 2: 7, 3: 3}) == 7
    assert majority_high_watermark({1: 10, 2: None, 3: None}) is None
    assert majority_high_watermark({1: 10, 2: 4, 3: None}) == 4
    assert majority_high_watermark({1: 10, 2: 9, 3: 8, 4: 2, 5: 1}) == 8
    assert majority_high_watermark({1: 10, 2: 9, 3: 8, 4: 2}) == 8  # 4 voters: 3 needed
    assert majority_high_watermark({1: 5}) == 5


def test_leader_high_watermark_waits_for_its_epoch_and_never_goes_back():
    p = LeaderProgress(1, epoch_start_offset=10, voters=[1, 2, 3], fetch_timeout_ms=2000, now_ms=0)
    assert not p.update_local(11)  # only the leader has the epoch's first record
    assert not p.update_replica(2, None, 10, 5)  # a majority at 10 = the epoch start: not yet
    assert p.high_watermark is None
    assert p.update_replica(2, None, 11, 6) and p.high_watermark == 11
    assert not p.update_replica(3, None, 4, 7)  # a lagging voter moves nothing
    p.update_local(20)
    assert not p.update_replica(2, None, 9, 8) and p.high_watermark == 11  # never backwards
    assert p.update_replica(3, None, 15, 9) and p.high_watermark == 15
    assert not p.update_replica(7, None, 20, 10)  # an observer counts for nothing
    assert [o.replica_id for o in p.active_observers(10)] == [7]
    with pytest.raises(ValueError):
        p.update_replica(1, None, 5, 11)
    assert p.voters_by_descending_offset() == [3, 2]


# --- elections -------------------------------------------------------------------------------------


def test_three_voters_elect_exactly_one_leader_and_persist_it():
    c = Cluster()
    c.start()
    assert all(isinstance(n.voter.state, Unattached) for n in c.nodes.values())
    c.run(3000)
    assert len(c.leaders()) == 1
    leader = c.leaders()[0]
    epoch = c.nodes[leader].voter.epoch
    for i, n in c.nodes.items():
        assert n.voter.epoch == epoch
        assert n.store.current is not None and n.store.current.epoch == epoch
        if i == leader:
            assert n.store.current.leader_id == leader
        else:
            assert isinstance(n.voter.state, Follower) and n.voter.state.leader == leader
            assert n.store.current.leader_id == leader
    # followers replicate, and the high watermark follows a majority
    assert all(n.log == c.nodes[leader].log for n in c.nodes.values())
    assert c.nodes[leader].voter.high_watermark == len(c.nodes[leader].log)


def test_a_stopped_leader_is_replaced_and_rejoins_as_follower():
    c = Cluster(seed=3)
    c.start()
    c.run(3000)
    (old,) = c.leaders()
    old_epoch = c.nodes[old].voter.epoch
    c.nodes[old].up = False
    c.run(6000)
    (new,) = c.leaders()
    assert new != old and c.nodes[new].voter.epoch > old_epoch
    # the old leader restarts: resigned in its own epoch, then it learns the new one and follows
    node = c.restart(old)
    assert isinstance(node.voter.state, Resigned) and node.voter.epoch == old_epoch
    c.run(3000)
    assert c.leaders() == [new]
    assert isinstance(node.voter.state, Follower) and node.voter.state.leader == new
    assert node.log == c.nodes[new].log


def test_a_split_vote_backs_off_and_one_candidate_wins_a_later_epoch():
    c = Cluster(seed=11)
    c.start()
    c.nodes[3].up = False
    # both remaining voters stand in epoch 1 at the same instant
    c.clock.ms += 5000
    for i in (1, 2):
        c.nodes[i].voter.poll()
        assert isinstance(c.nodes[i].voter.state, Candidate) and c.nodes[i].voter.epoch == 1
    c.step()  # each asks the other: a candidate never grants a vote in its own epoch
    for i in (1, 2):
        st = c.nodes[i].voter.state
        # voter 3 may still answer: a majority is possible, so no backoff before the election timeout
        assert isinstance(st, Candidate) and st.rejected == {3 - i} and st.backoff_deadline is None
        assert c.nodes[i].store.current.voted_id == i  # each voted for itself, durably
    c.clock.ms += 2000  # past both election timeouts (1000 + random < 1000)
    for i in (1, 2):
        c.nodes[i].voter.poll()
        st = c.nodes[i].voter.state
        assert isinstance(st, Candidate) and st.epoch == 1 and st.backoff_deadline is not None
    c.run(5000)
    (leader,) = c.leaders()
    assert c.nodes[leader].voter.epoch >= 2
    other = 3 - leader
    assert isinstance(c.nodes[other].voter.state, Follower)


def test_a_single_voter_elects_itself_at_start():
    c = Cluster(ids=(1,))
    c.start()
    assert c.leaders() == [1] and c.nodes[1].voter.epoch == 1
    assert c.nodes[1].voter.high_watermark == 1  # its LeaderChange is committed by itself
    c.run(10_000)
    assert c.leaders() == [1] and c.nodes[1].voter.epoch == 1  # check-quorum never fires alone


# --- votes -----------------------------------------------------------------------------------------


def _voter(log: list[int] | None = None, store: MemoryElectionStore | None = None) -> tuple[RaftVoter, Clock]:
    clock = Clock()
    entries = log if log is not None else []
    cfg = QuorumConfig.from_properties({"controller.quorum.voters": VOTERS})
    v = RaftVoter(
        1, cfg, store or MemoryElectionStore(), clock, lambda: (len(entries), entries[-1] if entries else 0),
        random.Random(1), "cluster-x",
    )  # fmt: skip
    v.start()
    return v, clock


def test_one_vote_per_epoch_written_before_the_answer():
    store = MemoryElectionStore()
    v, _ = _voter([1, 1, 2], store)
    got = v.handle_vote(VoteRequest("cluster-x", 3, 2, 2, 3, voter_id=1))
    assert got.vote_granted and got.partition_error == NONE and got.leader_epoch == 3
    assert store.current == ElectionState(3, voted_id=2, voters=frozenset({1, 2, 3}))
    assert isinstance(v.state, Voted)
    assert not v.handle_vote(VoteRequest("cluster-x", 3, 3, 2, 5)).vote_granted  # another candidate
    assert v.handle_vote(VoteRequest("cluster-x", 3, 2, 2, 3)).vote_granted  # the same one, again
    # the vote survives a restart: still refused to the other candidate in that epoch
    v2, _ = _voter([1, 1, 2], store)
    assert isinstance(v2.state, Voted) and v2.epoch == 3
    assert not v2.handle_vote(VoteRequest("cluster-x", 3, 3, 2, 5)).vote_granted


def test_a_vote_is_refused_to_a_candidate_with_a_stale_log():
    store = MemoryElectionStore()
    v, _ = _voter([1, 1, 2, 2], store)
    # last epoch 1 < 2: stale whatever its offset
    got = v.handle_vote(VoteRequest("cluster-x", 3, 2, 1, 100))
    assert not got.vote_granted and got.partition_error == NONE
    # same last epoch, shorter log: stale
    assert not v.handle_vote(VoteRequest("cluster-x", 3, 3, 2, 3)).vote_granted
    # the higher epoch was still taken on, durably, without a vote
    assert v.epoch == 3 and isinstance(v.state, Unattached) and store.current.voted_id == -1
    # as up to date (epoch 2, offset 4): granted
    assert v.handle_vote(VoteRequest("cluster-x", 3, 2, 2, 4)).vote_granted


def test_vote_request_errors_are_kafkas():
    v, _ = _voter([1])
    assert v.handle_vote(VoteRequest("other", 5, 2, 1, 1)).error_code == 104  # INCONSISTENT_CLUSTER_ID
    assert v.handle_vote(VoteRequest("cluster-x", 5, 2, 5, 1)).partition_error == INVALID_REQUEST
    assert v.handle_vote(VoteRequest("cluster-x", 5, 2, 1, -1)).partition_error == INVALID_REQUEST
    v.handle_vote(VoteRequest("cluster-x", 5, 2, 1, 1))
    assert v.handle_vote(VoteRequest("cluster-x", 4, 3, 1, 1)).partition_error == FENCED_LEADER_EPOCH
    wrong = v.handle_vote(VoteRequest("cluster-x", 6, 3, 1, 1, voter_id=2))
    assert wrong.partition_error == INVALID_VOTER_KEY and not wrong.vote_granted and v.epoch == 6


def test_a_leader_that_sees_a_higher_epoch_steps_down():
    c = Cluster(seed=5)
    c.start()
    c.run(3000)
    (leader,) = c.leaders()
    v = c.nodes[leader].voter
    e = v.epoch
    # a candidate of a higher epoch with an up-to-date log: the leader becomes unattached and votes
    end, last = c.nodes[leader].end()
    got = v.handle_vote(VoteRequest("cluster-x", e + 1, 9 if leader != 9 else 8, last, end))
    assert got.vote_granted and isinstance(v.state, Voted) and v.epoch == e + 1
    # a BeginQuorumEpoch of a higher epoch makes it a follower of that leader
    other = next(i for i in c.nodes if i != leader)
    got2 = v.handle_begin_quorum_epoch(BeginQuorumEpochRequest("cluster-x", other, e + 2, voter_id=leader))
    assert got2.partition_error == NONE and isinstance(v.state, Follower) and v.state.leader == other
    assert c.nodes[leader].store.current == ElectionState(e + 2, leader_id=other, voters=frozenset({1, 2, 3}))
    # a stale one is fenced
    assert (
        v.handle_begin_quorum_epoch(BeginQuorumEpochRequest("cluster-x", 3, e)).partition_error
        == FENCED_LEADER_EPOCH
    )


def test_a_fetch_answer_of_a_higher_epoch_moves_a_follower():
    c = Cluster(seed=2)
    c.start()
    c.run(3000)
    (leader,) = c.leaders()
    f = next(i for i in c.nodes if i != leader)
    v = c.nodes[f].voter
    out, _ = v.poll()
    assert out and isinstance(out[0].request, FetchRequest)
    third = next(i for i in c.nodes if i not in (leader, f))
    v.handle_response(
        out[0].destination,
        out[0].correlation_id,
        FetchResponse(NONE, FENCED_LEADER_EPOCH, third, v.epoch + 1),
    )
    assert isinstance(v.state, Follower) and v.state.leader == third


# --- check-quorum and resignation ------------------------------------------------------------------


def test_a_leader_cut_from_its_followers_resigns_after_one_and_a_half_fetch_timeouts():
    c = Cluster(seed=4)
    c.start()
    c.run(3000)
    (leader,) = c.leaders()
    lv = c.nodes[leader].voter
    for i, n in c.nodes.items():
        if i != leader:
            n.up = False
    cut = c.clock.ms
    while isinstance(lv.state, Leader):
        c.step()
        c.clock.ms += 10
    waited = c.clock.ms - cut
    assert 2900 <= waited <= 3010 + 10, waited  # 1.5 x controller.quorum.fetch.timeout.ms (2000)
    st = lv.state
    assert isinstance(st, Resigned) and st.epoch == c.nodes[leader].store.current.epoch
    assert c.nodes[leader].store.current.leader_id == leader  # Resigned is not written
    assert not lv.handle_vote(VoteRequest("cluster-x", st.epoch, 2, 99, 99)).vote_granted
    # it asks the others to end its epoch, then stands again (and never leads alone)
    out, _ = lv.poll()
    assert {type(o.request) for o in out} == {EndQuorumEpochRequest}
    c.run(10_000)
    assert c.leaders() == []


def test_one_fetching_follower_keeps_a_leader_of_three():
    c = Cluster(seed=4)
    c.start()
    c.run(3000)
    (leader,) = c.leaders()
    down = next(i for i in c.nodes if i != leader)
    c.nodes[down].up = False
    c.run(10_000)
    assert c.leaders() == [leader]


def test_end_quorum_epoch_lets_the_first_successor_stand_at_once():
    c = Cluster(seed=8)
    c.start()
    c.run(3000)
    (leader,) = c.leaders()
    lv = c.nodes[leader].voter
    successors = [i for i in sorted(c.nodes) if i != leader]
    lv.resign()
    c.step()
    assert isinstance(lv.state, Resigned)
    c.run(3000)
    (new,) = c.leaders()
    assert new in successors and c.nodes[new].voter.epoch == lv.epoch
    assert strict_exponential_backoff_ms(0, 2, 1000) == 0
    assert strict_exponential_backoff_ms(1, 2, 1000) == 500
    assert strict_exponential_backoff_ms(2, 2, 1000) == 1000


# --- restarts --------------------------------------------------------------------------------------


def test_restart_resumes_from_quorum_state_as_kafka_does():
    vs = frozenset({1, 2, 3})
    # a leader resumes resigned in its epoch; a candidate stays a candidate of its epoch
    v, _ = _voter([1], MemoryElectionStore(ElectionState(4, leader_id=1, voters=vs)))
    assert isinstance(v.state, Resigned) and v.epoch == 4
    v, _ = _voter([1], MemoryElectionStore(ElectionState(4, voted_id=1, voters=vs)))
    assert isinstance(v.state, Candidate) and v.epoch == 4 and v.state.granted == {1}
    # a follower resumes following; an epoch below the log's last record's starts unattached there
    v, _ = _voter([1], MemoryElectionStore(ElectionState(4, leader_id=2, voters=vs)))
    assert isinstance(v.state, Follower) and v.state.leader == 2
    v, _ = _voter([1, 7], MemoryElectionStore(ElectionState(4, leader_id=2, voters=vs)))
    assert isinstance(v.state, Unattached) and v.epoch == 7
    # a leader that is not a voter: unattached, its id kept
    v, _ = _voter([1], MemoryElectionStore(ElectionState(4, leader_id=9, voters=vs)))
    assert isinstance(v.state, Unattached) and v.leader_id == 9
    assert not v.handle_vote(VoteRequest("cluster-x", 4, 2, 1, 1)).vote_granted


def test_illegal_transitions_are_refused():
    v, _ = _voter([1])
    with pytest.raises(TransitionError):
        v.quorum.to_leader(1)
    with pytest.raises(TransitionError):
        v.quorum.to_follower(0, 1, (("localhost", 9101),))  # itself
    with pytest.raises(TransitionError):
        v.quorum.to_unattached(0)
    with pytest.raises(TransitionError):
        v.quorum.to_resigned([])


def test_describe_quorum_lists_every_voter_and_observer_as_kafka_does():
    c = Cluster(seed=6)
    c.start()
    c.run(3000)
    (leader,) = c.leaders()
    st = c.nodes[leader].voter.state
    st.progress.update_replica(7, "AAAAAAAAAAAAAAAAAAAAAQ", 1, c.clock.ms)  # a KRaft broker: an observer
    voters, observers = describe(st.progress, c.clock.ms)
    assert [v.replica_id for v in voters] == [1, 2, 3]
    me = next(v for v in voters if v.replica_id == leader)
    assert me.last_fetch_ms == me.last_caught_up_ms == c.clock.ms and me.log_end_offset == len(
        c.nodes[leader].log
    )
    assert all(v.last_fetch_ms > 0 and v.log_end_offset >= 0 for v in voters)
    assert [(o.replica_id, o.directory_id, o.log_end_offset) for o in observers] == [
        (7, "AAAAAAAAAAAAAAAAAAAAAQ", 1)
    ]
    c.clock.ms += 300_000  # Kafka forgets an observer silent for 5 minutes
    assert describe(st.progress, c.clock.ms)[1] == []


def test_a_leader_that_shuts_down_hands_over_at_once():
    c = Cluster(seed=9)
    c.start()
    c.run(3000)
    (leader,) = c.leaders()
    lv = c.nodes[leader].voter
    epoch = lv.epoch
    lv.shutdown(5000)
    assert not lv.shutdown_complete()
    start = c.clock.ms
    while not lv.shutdown_complete():
        c.step()
        c.clock.ms += 10
    # its first successor stood at once (EndQuorumEpoch), far sooner than a fetch timeout (2000 ms)
    assert c.clock.ms - start < 500
    (new,) = c.leaders()
    assert new != leader and c.nodes[new].voter.epoch == epoch + 1
    assert isinstance(lv.state, Follower) and lv.state.leader == new
    # a shutting-down voter still votes, so one other voter is enough for a successor; with none up,
    # the shutdown's timeout ends it
    lv2 = c.nodes[new].voter
    for i in c.nodes:
        c.nodes[i].up = i == new
    lv2.shutdown(1000)
    begun = c.clock.ms
    while not lv2.shutdown_complete():
        c.step()
        c.clock.ms += 10
    assert 1000 <= c.clock.ms - begun <= 1020 and not isinstance(lv2.state, Leader)


def test_describe_quorum_answers_as_kafkas_leader_and_refuses_elsewhere():
    c = Cluster(seed=6, props={"controller.listener.names": "CTRL,OTHER"})
    c.start()
    c.run(3000)
    (leader,) = c.leaders()
    follower = next(i for i in c.nodes if i != leader)
    req = DescribeQuorumRequest((("__cluster_metadata", 0),))
    got = describe_quorum(c.nodes[leader].voter.state, c.config, req, c.clock.ms)
    assert (got.partition_error, got.leader_id, got.leader_epoch) == (0, leader, c.nodes[leader].voter.epoch)
    assert got.high_watermark == c.nodes[leader].voter.high_watermark and [
        v.replica_id for v in got.voters
    ] == [1, 2, 3]
    assert got.nodes == tuple((i, "CTRL", "localhost", 9100 + i) for i in (1, 2, 3))
    refused = describe_quorum(c.nodes[follower].voter.state, c.config, req, c.clock.ms)
    assert refused.partition_error == 6 and refused.voters == ()  # NOT_LEADER_OR_FOLLOWER
    other = describe_quorum(
        c.nodes[leader].voter.state, c.config, DescribeQuorumRequest((("t", 0),)), c.clock.ms
    )
    assert other.partition_error == 3 and other.partitions == (("t", 0),)  # UNKNOWN_TOPIC_OR_PARTITION
