"""Three in-process voters (controller.raft.voter_driver) over loopback TCP, each with its own
`quorum-state` file: exactly one leader, and a new one after the leader stops; the old one follows it
when it comes back."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

from migrator.controller.raft import voter_wire as W
from migrator.controller.raft.election import Follower, Leader
from migrator.controller.raft.quorum_config import QuorumConfig
from migrator.controller.raft.quorum_store import FileElectionStore
from migrator.controller.raft.voter import RaftVoter
from migrator.controller.raft.voter_driver import VoterDriver
from migrator.controller.raft.voter_messages import DescribeQuorumRequest, DescribeQuorumResponse

PROPS = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "1000",
    "controller.quorum.election.backoff.max.ms": "300",
    "controller.quorum.request.timeout.ms": "1000",
}


def _listener(port: int = 0) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def _describe(port: int) -> DescribeQuorumResponse:
    """kafka-metadata-quorum's DescribeQuorum v2, sent to one voter."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(W.encode_request(DescribeQuorumRequest((("__cluster_metadata", 0),)), 2, 77))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        cid, resp = W.decode_response(W.DESCRIBE_QUORUM, 2, s.recv(size, socket.MSG_WAITALL))
    assert cid == 77
    return resp


class Quorum:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.listeners = {i: _listener() for i in (1, 2, 3)}
        voters = ",".join(f"{i}@127.0.0.1:{s.getsockname()[1]}" for i, s in self.listeners.items())
        self.config = QuorumConfig.from_properties({"controller.quorum.voters": voters, **PROPS})
        self.drivers: dict[int, VoterDriver] = {}
        for i in self.listeners:
            self.start(i)

    def start(self, i: int, listener: socket.socket | None = None) -> VoterDriver:
        (self.tmp / str(i)).mkdir(exist_ok=True)
        voter = RaftVoter(i, self.config, FileElectionStore(self.tmp / str(i)), lambda: int(time.monotonic() * 1000),
                          lambda: (0, 0), cluster_id="loopback")  # fmt: skip
        d = VoterDriver(voter, listener or self.listeners[i], self.config.voters)
        d.start()
        self.drivers[i] = d
        return d

    def states(self) -> dict[int, tuple[str, int, int]]:
        out = {}
        for i, d in self.drivers.items():
            with d.lock:
                out[i] = (d.voter.state.name, d.voter.epoch, d.voter.leader_id)
        return out

    def wait_for_one_leader(self, among: set[int], timeout_s: float = 15.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            st = {i: s for i, s in self.states().items() if i in among}
            leaders = [i for i, (name, _e, _l) in st.items() if name == "Leader"]
            if len(leaders) == 1:
                epoch = st[leaders[0]][1]
                if all(s == ("Follower", epoch, leaders[0]) for i, s in st.items() if i != leaders[0]):
                    return leaders[0]
            time.sleep(0.05)
        raise AssertionError(f"no single leader among {sorted(among)}: {self.states()}")

    def stop(self) -> None:
        for d in self.drivers.values():
            d.stop()


def test_three_voters_over_tcp_elect_one_leader_and_reelect_when_it_stops(tmp_path):
    q = Quorum(tmp_path)
    try:
        leader = q.wait_for_one_leader({1, 2, 3})
        epoch = q.drivers[leader].voter.epoch
        # it stays the one leader while its followers fetch (check-quorum is satisfied)
        time.sleep(2.0)
        assert q.wait_for_one_leader({1, 2, 3}, 1.0) == leader and q.drivers[leader].voter.epoch == epoch
        for i in (1, 2, 3):
            assert FileElectionStore(tmp_path / str(i)).read().leader_id == leader  # type: ignore[union-attr]
        # DescribeQuorum over the wire: the leader lists every voter, a follower refuses
        got = _describe(q.config.voters[leader].port)
        assert (got.partition_error, got.leader_id, got.leader_epoch) == (0, leader, epoch)
        assert [v.replica_id for v in got.voters] == [1, 2, 3] and all(
            v.last_fetch_ms > 0 for v in got.voters
        )
        assert [n[0] for n in got.nodes] == [1, 2, 3]
        follower = next(i for i in (1, 2, 3) if i != leader)
        assert _describe(q.config.voters[follower].port).partition_error == 6  # NOT_LEADER_OR_FOLLOWER

        port = q.listeners[leader].getsockname()[1]
        q.drivers[leader].stop()
        rest = {1, 2, 3} - {leader}
        new = q.wait_for_one_leader(rest)
        assert new != leader and q.drivers[new].voter.epoch > epoch
        # the old leader comes back on its address: resigned in its epoch, then a follower of the new one
        back = q.start(leader, _listener(port))
        with back.lock:
            assert back.voter.epoch >= epoch
        assert q.wait_for_one_leader({1, 2, 3}) == new
        with back.lock:
            assert isinstance(back.voter.state, Follower) and back.voter.state.leader == new
        assert not any(isinstance(d.voter.state, Leader) for i, d in q.drivers.items() if i != new)
    finally:
        q.stop()


def test_a_leader_stopped_gracefully_hands_over_before_it_goes(tmp_path):
    q = Quorum(tmp_path)
    try:
        leader = q.wait_for_one_leader({1, 2, 3})
        epoch = q.drivers[leader].voter.epoch
        began = time.monotonic()
        q.drivers[leader].stop(graceful_ms=5000)
        took = time.monotonic() - began
        v = q.drivers[leader].voter
        # it returned because another voter leads the next epoch (not because its 5 s ran out)
        assert v.shutdown_complete() and v.leader_id not in (-1, leader) and v.epoch > epoch, took
        assert took < 5.0
        new = q.wait_for_one_leader({1, 2, 3} - {leader})
        assert new == v.leader_id
    finally:
        q.stop()
