"""`quorum-state` as Kafka 3.9 keeps it: the bytes its FileQuorumStateStore writes, read and written back
by `kraft.dirfiles` and the voter's store, and checked against Kafka's own class
(tests/kafka_checkers/QuorumStateFile.java, run with the cached Kafka jars)."""

from __future__ import annotations

import pytest
from kafka_java import run_checker

from migrator.controller.raft.election import ElectionState
from migrator.controller.raft.quorum_store import FileElectionStore
from migrator.errors import BadInputError
from migrator.kraft import dirfiles

#: What Kafka 3.9.2's FileQuorumStateStore wrote (QuorumStateFile.java): kraft.version 0, then 1.
KAFKA_V0_LEADER = (
    b'{"clusterId":"","leaderId":3000,"leaderEpoch":5,"votedId":-1,"appliedOffset":0,'
    b'"currentVoters":[{"voterId":3000}],"data_version":0}'
)
KAFKA_V0_VOTED = (
    b'{"clusterId":"","leaderId":-1,"leaderEpoch":7,"votedId":2,"appliedOffset":0,'
    b'"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}'
)
KAFKA_V1_VOTED = b'{"leaderId":-1,"leaderEpoch":9,"votedId":2,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAQ","data_version":1}'
KAFKA_V1_LEADER = b'{"leaderId":2,"leaderEpoch":9,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}'


@pytest.mark.parametrize("raw", [KAFKA_V0_LEADER, KAFKA_V0_VOTED, KAFKA_V1_VOTED, KAFKA_V1_LEADER])
def test_kafkas_file_reads_and_writes_back_byte_for_byte(tmp_path, raw):
    path = tmp_path / "quorum-state"
    path.write_bytes(raw)
    state = dirfiles.read_quorum_state(path)
    assert dirfiles.quorum_state_bytes(state) == raw
    dirfiles.write_quorum_state(tmp_path / "again", state)
    assert (tmp_path / "again").read_bytes() == raw
    assert not (tmp_path / "again.tmp").exists()


def test_the_voter_store_maps_elections_as_kafkas_election_state(tmp_path):
    (tmp_path / "quorum-state").write_bytes(KAFKA_V0_VOTED)
    store = FileElectionStore(tmp_path)
    assert store.read() == ElectionState(7, voted_id=2, voters=frozenset({1, 2, 3}))
    store.write(ElectionState(5, leader_id=3000, voters=frozenset({3000})))
    assert (tmp_path / "quorum-state").read_bytes() == KAFKA_V0_LEADER
    v1 = FileElectionStore(tmp_path, kraft_version=1)
    v1.write(
        ElectionState(9, voted_id=2, voted_directory_id="AAAAAAAAAAAAAAAAAAAAAQ", voters=frozenset({1, 2, 3}))
    )
    assert (tmp_path / "quorum-state").read_bytes() == KAFKA_V1_VOTED
    assert v1.read() == ElectionState(9, voted_id=2, voted_directory_id="AAAAAAAAAAAAAAAAAAAAAQ")
    assert FileElectionStore(tmp_path / "none").read() is None


@pytest.mark.parametrize(
    "text, words",
    [
        ('{"leaderEpoch":3}', "no data_version"),
        ('{"leaderEpoch":3,"data_version":2}', "data_version 2"),
        ('{"leaderEpoch":3,"data_version":0}', "requires clusterId"),
        (
            '{"clusterId":"","leaderId":1,"leaderEpoch":3,"votedId":-1,"appliedOffset":0,"currentVoters":null,"data_version":0}',
            "currentVoters is None",
        ),
        ('{"leaderId":1,"leaderEpoch":3,"votedId":-1,"data_version":1}', "requires votedDirectoryId"),
        (
            '{"leaderId":"1","leaderEpoch":3,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}',
            "not an integer",
        ),
        ("not json", "not JSON"),
    ],
)
def test_what_kafka_refuses_is_refused_in_one_line(tmp_path, text, words):
    path = tmp_path / "quorum-state"
    path.write_text(text)
    with pytest.raises(BadInputError) as e:
        dirfiles.read_quorum_state(path)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_only_the_first_line_counts_as_in_kafka(tmp_path):
    path = tmp_path / "quorum-state"
    path.write_bytes(KAFKA_V0_LEADER + b"\ntrailing garbage")
    assert dirfiles.read_quorum_state(path).leader_id == 3000


# --- against Kafka's own FileQuorumStateStore --------------------------------------------------------


def _kafka(*args: str) -> str:
    return run_checker("QuorumStateFile", *args)


@pytest.mark.slow
def test_kafka_reads_what_zk2kraft_writes_and_zk2kraft_reads_what_kafka_writes(tmp_path):
    ours = FileElectionStore(tmp_path)
    cases = [
        (
            ElectionState(7, voted_id=2, voters=frozenset({3, 1, 2})),
            "epoch=7 leader=-1 voted=2 votedDirectory=-",
        ),
        (
            ElectionState(8, leader_id=3, voters=frozenset({1, 2, 3})),
            "epoch=8 leader=3 voted=-1 votedDirectory=-",
        ),
        (ElectionState(9, voters=frozenset({1, 2, 3})), "epoch=9 leader=-1 voted=-1 votedDirectory=-"),
    ]
    for election, expected in cases:
        ours.write(election)
        line = _kafka("read", str(ours.path))
        assert line.startswith(expected + " ") and "voters=[1, 2, 3]" in line, line
    # Kafka writes; zk2kraft reads the same election, and writes the same bytes back
    _kafka("write", str(ours.path), "0", "11", "-1", "3", "-", "1,2,3")
    kafka_bytes = ours.path.read_bytes()
    assert ours.read() == ElectionState(11, voted_id=3, voters=frozenset({1, 2, 3}))
    ours.write(ours.read())  # type: ignore[arg-type]
    assert ours.path.read_bytes() == kafka_bytes
