"""The voter APIs' bytes (controller.raft.voter_wire): every message at every version Kafka 3.9 speaks,
encoded and read back by our decoder and by kio's own readers (the schema's field names and values)."""

from __future__ import annotations

import importlib
import struct
import uuid

import pytest
from kafka_java import run_checker
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader

from migrator.controller.protocol.wire_versions import WireError
from migrator.controller.raft import voter_wire as W
from migrator.controller.raft.leader_progress import ReplicaView
from migrator.controller.raft.raft_leader import RAFT_MODULES
from migrator.controller.raft.voter_messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)

DIR = "AAAAAAAAAAAAAAAAAAAAAQ"  # Uuid(0, 1) as Kafka prints it

REQUESTS = [
    (VoteRequest("c1", 7, 2, 6, 120, voter_id=3, candidate_directory_id=DIR), (0, 1)),
    (BeginQuorumEpochRequest("c1", 2, 7, voter_id=3, leader_endpoints=(("CONTROLLER", "h2", 9102),)), (0, 1)),
    (EndQuorumEpochRequest("c1", 2, 7, (3, 1), (("CONTROLLER", "h2", 9102),)), (0, 1)),
    (FetchRequest("c1", 3, 120, 6, 7, 500, DIR), (15, 16, 17)),
]
RESPONSES = [
    (VoteResponse(0, 0, 2, 7, True, ("h2", 9102)), (0, 1)),
    (BeginQuorumEpochResponse(0, 0, 2, 7, ("h2", 9102)), (0, 1)),
    (EndQuorumEpochResponse(0, 74, 2, 8, ("h2", 9102)), (0, 1)),
    (FetchResponse(0, 0, 2, 7, 118, ("h2", 9102)), (16, 17)),
]


def _kio(api: int, version: int, kind: str) -> type:
    mod = importlib.import_module(f"kio.schema.{RAFT_MODULES[api][0]}.v{version}.{kind}")
    return getattr(mod, RAFT_MODULES[api][1] + kind.capitalize())


def _expected(msg, version):
    """What survives ``version``: v0 has no voter key, directories nor endpoints."""
    if isinstance(msg, VoteRequest) and version == 0:
        return VoteRequest(
            msg.cluster_id, msg.candidate_epoch, msg.candidate_id, msg.last_offset_epoch, msg.last_offset
        )
    if isinstance(msg, BeginQuorumEpochRequest) and version == 0:
        return BeginQuorumEpochRequest(msg.cluster_id, msg.leader_id, msg.leader_epoch)
    if isinstance(msg, EndQuorumEpochRequest) and version == 0:
        return EndQuorumEpochRequest(
            msg.cluster_id, msg.leader_id, msg.leader_epoch, msg.preferred_successors
        )
    if isinstance(msg, FetchRequest) and version < 17:
        return FetchRequest(msg.cluster_id, msg.replica_id, msg.fetch_offset, msg.last_fetched_epoch,
                            msg.current_leader_epoch, msg.max_wait_ms)  # fmt: skip
    if isinstance(msg, VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse) and version == 0:
        return type(msg)(*[getattr(msg, f) for f in msg.__dataclass_fields__ if f != "leader_endpoint"])
    return msg


@pytest.mark.parametrize("msg, versions", REQUESTS)
def test_requests_round_trip_and_read_as_kio_reads_them(msg, versions):
    api = W._API_OF[type(msg)]
    for version in versions:
        frame = W.encode_request(msg, version, 42)
        assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
        body = frame[4:]
        got_api, got_version, cid, decoded = W.decode_request(body)
        assert (got_api, got_version, cid) == (api, version, 42)
        assert decoded == _expected(msg, version)
        # kio's own reader on the same bytes: the header version follows the body's flexibility
        cls = _kio(api, version, "request")
        hcls = RequestHeaderV2 if cls.__flexible__ else RequestHeaderV1
        header, pos = entity_reader(hcls)(body, 0)
        assert (header.request_api_key, header.request_api_version, header.correlation_id) == (
            api,
            version,
            42,
        )
        req, size = entity_reader(cls)(body, pos)
        assert pos + size == len(body)
        assert req.cluster_id == "c1"
        topic = req.topics[0]
        if api == W.FETCH:
            assert topic.topic_id == uuid.UUID(int=1) and topic.partitions[0].fetch_offset == 120
            assert req.replica_state.replica_id == 3
            if version == 17:
                assert topic.partitions[0].replica_directory_id == uuid.UUID(int=1)
            continue
        assert topic.topic_name == "__cluster_metadata" and topic.partitions[0].partition_index == 0
        part = topic.partitions[0]
        if api == W.VOTE:
            assert (part.replica_epoch, part.replica_id, part.last_offset_epoch, part.last_offset) == (
                7,
                2,
                6,
                120,
            )
            if version == 1:
                assert req.voter_id == 3 and part.replica_directory_id == uuid.UUID(int=1)
                assert (
                    part.voter_directory_id is None
                )  # Uuid.ZERO_UUID (kio reads it as None): a static voter
        else:
            assert (part.leader_id, part.leader_epoch) == (2, 7)
        if api == W.END_QUORUM_EPOCH:
            if version == 0:
                assert part.preferred_successors == (3, 1)
            else:
                assert [c.candidate_id for c in part.preferred_candidates] == [3, 1]
        if api in (W.BEGIN_QUORUM_EPOCH, W.END_QUORUM_EPOCH) and version == 1:
            assert [(e.name, e.host, e.port) for e in req.leader_endpoints] == [("CONTROLLER", "h2", 9102)]


@pytest.mark.parametrize("msg, versions", RESPONSES)
def test_responses_round_trip_and_read_as_kio_reads_them(msg, versions):
    api = W._API_OF[type(msg)]
    for version in versions:
        frame = W.encode_response(msg, version, 9)
        body = frame[4:]
        cid, decoded = W.decode_response(api, version, body)
        assert cid == 9 and decoded == _expected(msg, version)
        cls = _kio(api, version, "response")
        hcls = ResponseHeaderV1 if cls.__flexible__ else ResponseHeaderV0
        header, pos = entity_reader(hcls)(body, 0)
        resp, size = entity_reader(cls)(body, pos)
        assert header.correlation_id == 9 and pos + size == len(body)
        if api == W.FETCH:
            p = resp.responses[0].partitions[0]
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch, p.high_watermark) == (
                2,
                7,
                118,
            )
        else:
            p = resp.topics[0].partitions[0]
            assert (p.error_code, p.leader_id, p.leader_epoch) == (msg.partition_error, 2, msg.leader_epoch)
        if version >= 1 and api != W.FETCH or api == W.FETCH:
            assert [(e.node_id, e.host, e.port) for e in resp.node_endpoints] == [(2, "h2", 9102)]


DQ = DescribeQuorumResponse(
    (("__cluster_metadata", 0),), 0, 2, 7, 118,
    (ReplicaView(1, None, 118, 1700, 1690), ReplicaView(2, None, 120, 1800, 1800), ReplicaView(3, None, -1, -1, -1)),
    (ReplicaView(9, DIR, 100, 1750, 1700),),
    ((1, "CONTROLLER", "h1", 9101), (2, "CONTROLLER", "h2", 9102), (3, "CONTROLLER", "h3", 9103)),
)  # fmt: skip


def _dq_at(version: int) -> DescribeQuorumResponse:
    """What DescribeQuorum ``version`` carries of DQ: v0 no fetch times, v0-1 no directories or nodes."""

    def at(r: ReplicaView) -> ReplicaView:
        return ReplicaView(r.replica_id, r.directory_id if version >= 2 else None, r.log_end_offset,
                           r.last_fetch_ms if version >= 1 else -1, r.last_caught_up_ms if version >= 1 else -1)  # fmt: skip

    return DescribeQuorumResponse(DQ.partitions, 0, 2, 7, 118, tuple(at(r) for r in DQ.voters),
                                  tuple(at(r) for r in DQ.observers), DQ.nodes if version >= 2 else ())  # fmt: skip


def test_describe_quorum_round_trips_at_every_version():
    req = DescribeQuorumRequest((("__cluster_metadata", 0),))
    for version in (0, 1, 2):
        assert W.decode_request(W.encode_request(req, version, 3)[4:]) == (W.DESCRIBE_QUORUM, version, 3, req)
        assert W.decode_response(W.DESCRIBE_QUORUM, version, W.encode_response(DQ, version, 4)[4:]) == (
            4,
            _dq_at(version),
        )
    refused = DescribeQuorumResponse((("__cluster_metadata", 0),), 6)
    cid, got = W.decode_response(W.DESCRIBE_QUORUM, 2, W.encode_response(refused, 2, 5)[4:])
    assert got == refused


def test_a_top_level_error_comes_back_without_topics():
    cid, got = W.decode_response(W.VOTE, 1, W.encode_response(VoteResponse(104), 1, 5)[4:])
    assert cid == 5 and got == VoteResponse(104)
    cid, got = W.decode_response(W.FETCH, 17, W.encode_response(FetchResponse(104), 17, 6)[4:])
    assert got == FetchResponse(104)


def test_version_choice_and_refusals():
    assert W.negotiate(W.VOTE, None) == 1
    assert W.negotiate(W.VOTE, (0, 0)) == 0  # a peer before KIP-853
    assert W.negotiate(W.BEGIN_QUORUM_EPOCH, (0, 5)) == 1
    with pytest.raises(WireError):
        W.negotiate(W.VOTE, (2, 3))
    with pytest.raises(WireError):
        W.encode_request(VoteRequest("c", 1, 1, 0, 0), 2, 1)  # Vote v2 (pre-vote) is Kafka 4's
    other = W.encode_request(VoteRequest("c", 1, 1, 0, 0), 1, 1)[4:].replace(
        b"__cluster_metadata", b"__cluster_metadatb"
    )
    with pytest.raises(WireError, match="__cluster_metadata only"):
        W.decode_request(other)
    with pytest.raises(WireError):
        W.decode_request(W.encode_request(VoteRequest("c", 1, 1, 0, 0), 1, 1)[4:] + b"\x00")


# --- against Kafka 3.9's own protocol classes (tests/kafka_checkers/RaftWire.java) -------------------


@pytest.mark.slow
def test_kafka_reads_the_voter_frames_zk2kraft_writes(tmp_path):
    cases = [
        (W.encode_request(REQUESTS[0][0], 1, 42), "candidateEpoch=7, candidateId=2, candidateDirectoryId=AAAAAAAAAAAAAAAAAAAAAQ, voterDirectoryId=AAAAAAAAAAAAAAAAAAAAAA, lastOffsetEpoch=6, lastOffset=120"),
        (W.encode_request(REQUESTS[0][0], 0, 42), "voterId=-1, topics=[TopicData(topicName='__cluster_metadata', partitions=[PartitionData(partitionIndex=0, candidateEpoch=7, candidateId=2, candidateDirectoryId=AAAAAAAAAAAAAAAAAAAAAA"),
        (W.encode_request(REQUESTS[1][0], 0, 42), "leaderId=2, leaderEpoch=7)])], leaderEndpoints=[]"),
        (W.encode_request(REQUESTS[1][0], 1, 42), "leaderEndpoints=[LeaderEndpoint(name='CONTROLLER', host='h2', port=9102)]"),
        (W.encode_request(REQUESTS[2][0], 0, 42), "preferredSuccessors=[3, 1]"),
        (W.encode_request(REQUESTS[2][0], 1, 42), "preferredCandidates=[ReplicaInfo(candidateId=3, candidateDirectoryId=AAAAAAAAAAAAAAAAAAAAAA), ReplicaInfo(candidateId=1"),
        (W.encode_request(REQUESTS[3][0], 17, 42), "replicaState=ReplicaState(replicaId=3, replicaEpoch=-1), maxWaitMs=500"),
        (W.encode_request(DescribeQuorumRequest((("__cluster_metadata", 0),)), 2, 42), "DescribeQuorumRequestData(topics=[TopicData(topicName='__cluster_metadata', partitions=[PartitionData(partitionIndex=0)])])"),
    ]  # fmt: skip
    for frame, expected in cases:
        (tmp_path / "frame").write_bytes(frame[4:])
        out = run_checker("RaftWire", "request", str(tmp_path / "frame"))
        assert (
            out.startswith("42 ") and ("clusterId='c1'" in out or "DescribeQuorum" in out) and expected in out
        ), out
    for msg, version, expected in [
        (RESPONSES[0][0], 1, "leaderId=2, leaderEpoch=7, voteGranted=true)])], nodeEndpoints=[NodeEndpoint(nodeId=2, host='h2', port=9102)]"),
        (RESPONSES[0][0], 0, "leaderEpoch=7, voteGranted=true)])], nodeEndpoints=[])"),
        (RESPONSES[1][0], 0, "partitions=[PartitionData(partitionIndex=0, errorCode=0, leaderId=2, leaderEpoch=7)])]"),
        (RESPONSES[2][0], 1, "errorCode=74, leaderId=2, leaderEpoch=8"),
        (RESPONSES[3][0], 17, "highWatermark=118"),
        (DQ, 2, "leaderId=2, leaderEpoch=7, highWatermark=118, currentVoters=[ReplicaState(replicaId=1, replicaDirectoryId=AAAAAAAAAAAAAAAAAAAAAA, logEndOffset=118, lastFetchTimestamp=1700, lastCaughtUpTimestamp=1690)"),
        (DQ, 2, "observers=[ReplicaState(replicaId=9, replicaDirectoryId=AAAAAAAAAAAAAAAAAAAAAQ, logEndOffset=100"),
        (DQ, 2, "nodes=[Node(nodeId=1, listeners=[Listener(name='CONTROLLER', host='h1', port=9101)]), Node(nodeId=2"),
        (DQ, 0, "currentVoters=[ReplicaState(replicaId=1, replicaDirectoryId=AAAAAAAAAAAAAAAAAAAAAA, logEndOffset=118, lastFetchTimestamp=-1"),
        (DescribeQuorumResponse((("__cluster_metadata", 0),), 6), 2, "errorCode=6, errorMessage='For requests intended only for the leader"),
    ]:  # fmt: skip
        api = W._API_OF[type(msg)]
        (tmp_path / "frame").write_bytes(W.encode_response(msg, version, 9)[4:])
        out = run_checker("RaftWire", "response", str(api), str(version), str(tmp_path / "frame"))
        assert out.startswith("9 ") and expected in out, out


@pytest.mark.slow
def test_zk2kraft_reads_the_voter_frames_kafkas_raft_client_builds(tmp_path):
    for kind, version, expected in [
        ("vote", 0, VoteRequest("c1", 7, 2, 6, 120)),
        ("vote", 1, VoteRequest("c1", 7, 2, 6, 120, voter_id=3, candidate_directory_id=DIR)),
        ("begin", 0, BeginQuorumEpochRequest("c1", 2, 7)),
        (
            "begin",
            1,
            BeginQuorumEpochRequest("c1", 2, 7, voter_id=3, leader_endpoints=(("CONTROLLER", "h2", 9102),)),
        ),
        ("end", 0, EndQuorumEpochRequest("c1", 2, 7, (3, 1))),
        ("end", 1, EndQuorumEpochRequest("c1", 2, 7, (3, 1))),
    ]:
        path = tmp_path / f"{kind}{version}"
        run_checker("RaftWire", "build", kind, str(version), str(path))
        api, got_version, cid, msg = W.decode_request(path.read_bytes())
        assert (got_version, cid, msg) == (version, 42, expected)
