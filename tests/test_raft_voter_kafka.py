"""A zk2kraft voter in one quorum with two Kafka 3.9 controllers (static voters, kraft.version 0).

Kafka's raft client speaks to it as to any voter: ApiVersions, BeginQuorumEpoch, Vote, Fetch. The
zk2kraft voter (controller.raft.voter_driver over an in-memory log of whole batches) follows Kafka's
leader and replicates its batches. When that leader is killed, the two voters left need each other:
whichever wins the election (a Kafka controller with zk2kraft's vote, or zk2kraft with Kafka's), the
other follows it, and the winner's epoch commits with the follower's fetches as its majority."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from migrator.controller.raft.election import Follower, Leader
from migrator.controller.raft.quorum_config import QuorumConfig
from migrator.controller.raft.quorum_store import FileElectionStore
from migrator.controller.raft.voter import RaftVoter
from migrator.controller.raft.voter_driver import VoterDriver
from migrator.controller.raft.voter_messages import FetchRequest
from migrator.kraft.batch import iter_batches
from migrator.kraft.batch_encode import encode_control_batch
from migrator.kraft.control import LeaderChange, Voter, encode_control_record
from migrator.kraft.dirfiles import random_kafka_uuid
from zk_fixtures.kafka import KafkaNode, free_ports, kafka_tool
from zk_fixtures.kafka_migration import format_storage

pytestmark = pytest.mark.slow


class MemoryLog:
    """An in-memory log of whole batches: (base offset, next offset, epoch, bytes). As follower it takes
    the batches a Fetch answer brought; as leader it starts its epoch with a LeaderChange batch (as
    Kafka's leader does) and hands out the batches from a Fetch's offset."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, int, int, bytes]] = []

    def end(self) -> tuple[int, int]:
        return (self.batches[-1][1], self.batches[-1][2]) if self.batches else (0, 0)

    def append(self, records: bytes) -> None:
        for b in iter_batches(records):
            if b.base_offset >= self.end()[0]:
                assert b.base_offset == self.end()[0], (b.base_offset, self.end())
                self.batches.append((b.base_offset, b.next_offset, b.partition_leader_epoch, bytes(b.raw())))

    def lead(self, epoch: int, leader: int, voters: list[int]) -> None:
        change = LeaderChange(
            leader_id=leader, voters=tuple(Voter(v) for v in voters), granting_voters=(Voter(leader),)
        )
        self.append(
            encode_control_batch(
                self.end()[0], epoch, [encode_control_record(change)], int(time.time() * 1000)
            )
        )

    def read(self, req: FetchRequest) -> tuple[bool, bytes]:
        """Valid when the fetcher's (offset, last epoch) is a batch boundary of this log's."""
        if req.fetch_offset == 0:
            valid = True
        else:
            valid = any(
                nxt == req.fetch_offset and ep == req.last_fetched_epoch for _b, nxt, ep, _r in self.batches
            )
        if not valid:
            return False, b""
        return True, b"".join(raw for base, _n, _e, raw in self.batches if base >= req.fetch_offset)


def _status(port: int) -> dict[str, str]:
    out = kafka_tool(
        "kafka-metadata-quorum", "--bootstrap-controller", f"127.0.0.1:{port}", "describe", "--status"
    )
    return dict(re.findall(r"^(\w+):\s+(.*)$", out.stdout, re.M))


def _wait(what: str, check: Any, timeout: float = 120.0, why: Any = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}" + (f": {why()}" if why else ""))


def test_a_zk2kraft_voter_follows_votes_for_and_acknowledges_kafka_controllers(tmp_path: Path):
    p1, p2 = free_ports(2)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    p3 = listener.getsockname()[1]
    voters = f"1@127.0.0.1:{p1},2@127.0.0.1:{p2},3@127.0.0.1:{p3}"
    cluster_id = random_kafka_uuid()
    kafka: dict[int, KafkaNode] = {}
    for i, port in ((1, p1), (2, p2)):
        node = KafkaNode(
            tmp_path / f"kafka-{i}",
            {
                "process.roles": "controller",
                "node.id": i,
                "controller.quorum.voters": voters,
                "listeners": f"CONTROLLER://127.0.0.1:{port}",
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
                "log.dirs": str(tmp_path / f"kafka-{i}" / "data"),
            },
            heap="256m",
        )
        format_storage(node, cluster_id)
        kafka[i] = node
    log = MemoryLog()
    events: list[tuple[Any, ...]] = []
    config = QuorumConfig.from_properties({"controller.quorum.voters": voters})
    (tmp_path / "zk2kraft").mkdir()
    store = FileElectionStore(tmp_path / "zk2kraft")
    voter = RaftVoter(3, config, store, lambda: int(time.time() * 1000), log.end, cluster_id=cluster_id)

    def on_event(ev: tuple[Any, ...]) -> None:
        events.append(ev)
        if ev[0] == "leader":  # zk2kraft won: it starts its epoch in its log, as Kafka's leader does
            with driver.lock:
                log.lead(ev[1], 3, [1, 2, 3])
                voter.on_local_append(log.end()[0])

    driver = VoterDriver(
        voter, listener, config.voters, read_log=log.read, on_event=on_event, append_records=log.append
    )
    try:
        for node in kafka.values():
            node.start(wait_port="CONTROLLER", timeout=180)

        def kafka_leader() -> int | None:
            for i, node in kafka.items():
                if node.running and re.search(
                    r"Completed transition to Leader\(", node.log_path.read_text(errors="replace")
                ):
                    return i
            return None

        first = _wait("a Kafka leader", kafka_leader)
        driver.start()

        def following(leader: int) -> bool:
            with driver.lock:
                st = voter.state
                return isinstance(st, Follower) and st.leader == leader and log.end()[0] > 0

        _wait(f"zk2kraft following Kafka's leader {first}", lambda: following(first), 60)
        status = _wait("Kafka's quorum status", lambda: _status(kafka[first].listener_port("CONTROLLER")), 60)
        assert status["LeaderId"] == str(first) and status["LeaderEpoch"] == str(voter.epoch)
        assert "3" in re.findall(r"\d+", status["CurrentVoters"])
        old_epoch = voter.epoch

        # Kafka's leader dies: the two voters left, Kafka's and zk2kraft, need each other's vote, and
        # each other's fetches to commit; whichever wins, the other follows it and its epoch commits
        kafka[first].kill()
        survivor = 3 - first
        follows_zk2kraft = re.compile(
            r"Completed transition to FollowerState\(fetchTimeoutMs=\d+, epoch=(\d+), leader=3,"
        )

        def settled() -> tuple[str, int] | None:
            with driver.lock:
                st, epoch = voter.state, voter.epoch
                hw = voter.high_watermark
            if epoch <= old_epoch:
                return None
            if isinstance(st, Follower) and st.leader == survivor and log.end()[1] == epoch:
                return ("kafka", epoch)  # it replicates the new Kafka leader's epoch
            if isinstance(st, Leader) and hw is not None and hw > st.progress.epoch_start_offset:  # type: ignore[union-attr]
                epochs = follows_zk2kraft.findall(kafka[survivor].log_path.read_text(errors="replace"))
                if str(epoch) in epochs:
                    return ("zk2kraft", epoch)  # Kafka's controller follows it and acknowledged its epoch
            return None

        def why() -> str:
            with driver.lock:
                return f"zk2kraft {voter.state} log end {log.end()}, events {events[-6:]}; {kafka[survivor].last_lines(6)}"

        winner, epoch = _wait("one leader of the two voters left", settled, 90, why)
        cast = [e for e in events if e[0] in ("voted", "candidate") and e[1] > old_epoch]
        assert cast, events  # zk2kraft took part in the election: it voted or stood
        election = store.read()
        assert election is not None and election.epoch == epoch
        if winner == "kafka":
            assert election.leader_id == survivor
            port = kafka[survivor].listener_port("CONTROLLER")
            status = _wait("the new leader's status", lambda: _status(port), 60)
            assert status["LeaderId"] == str(survivor) and status["LeaderEpoch"] == str(epoch)
            first_hw = int(status["HighWatermark"])
            # its high watermark moves: the majority of two, Kafka's leader and zk2kraft, has its records
            _wait(
                "the high watermark to move", lambda: int(_status(port)["HighWatermark"]) > first_hw, 60, why
            )
        else:
            assert election.leader_id == 3
        time.sleep(3)  # longer than check-quorum: the winner keeps leading, the other keeps following
        assert settled() == (winner, epoch), why()
    finally:
        driver.stop()
        for node in kafka.values():
            node.kill()
