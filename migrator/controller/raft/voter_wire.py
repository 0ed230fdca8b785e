"""The voter APIs' bytes: `voter_messages` to and from kio's entities of the versions Kafka 3.9 speaks.

Kafka 3.9 serves Vote, BeginQuorumEpoch and EndQuorumEpoch v0-1 and a KafkaRaftClient sends the highest
version both ends support (its NetworkClient learns them from ApiVersions): v1 between 3.9 voters, also
with static voters (kraft.version 0), where the directory ids of the voted-for node are Uuid.ZERO_UUID.
v0 stays for a peer that offers only it. Vote is flexible from v0, BeginQuorumEpoch and EndQuorumEpoch
from v1 only, so their v0 travels with request header v1 and response header v0. A voter's Fetch goes as
v17 (ReplicaState carries the replica id).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import importlib
import struct
import uuid
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1

from migrator.controller.protocol.wire_versions import WireError, _read, _write
from migrator.controller.raft.leader_progress import ReplicaView
from migrator.controller.raft.raft_leader import (
    BEGIN_QUORUM_EPOCH,
    DESCRIBE_QUORUM,
    END_QUORUM_EPOCH,
    FETCH,
    METADATA_TOPIC,
    METADATA_TOPIC_UUID,
    RAFT_MODULES,
    RAFT_VERSIONS,
    VOTE,
)
from migrator.controller.raft.voter_messages import (
    MESSAGES,
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

__all__ = [
    "VOTER_VERSIONS",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "negotiate",
]

ZERO_UUID = uuid.UUID(int=0)

#: apiKey -> (min, max) of what Kafka 3.9's raft client speaks (the leader's table); a voter sends the
#: highest both serve
VOTER_VERSIONS: dict[int, tuple[int, int]] = {
    k: RAFT_VERSIONS[k] for k in (VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, FETCH, DESCRIBE_QUORUM)
}
_API_OF = {
    VoteRequest: VOTE, VoteResponse: VOTE, BeginQuorumEpochRequest: BEGIN_QUORUM_EPOCH,
    BeginQuorumEpochResponse: BEGIN_QUORUM_EPOCH, EndQuorumEpochRequest: END_QUORUM_EPOCH,
    EndQuorumEpochResponse: END_QUORUM_EPOCH, FetchRequest: FETCH, FetchResponse: FETCH,
    DescribeQuorumRequest: DESCRIBE_QUORUM, DescribeQuorumResponse: DESCRIBE_QUORUM,
}  # fmt: skip
_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")


def negotiate(api_key: int, peer: tuple[int, int] | None) -> int:
    """The version to send: the highest both serve (ApiVersions), or this side's highest if unknown."""
    lo, hi = VOTER_VERSIONS[api_key]
    if peer is None:
        return hi
    top = min(hi, peer[1])
    if top < max(lo, peer[0]):
        raise WireError(f"apiKey {api_key}: no version in common ({lo}-{hi} here, {peer[0]}-{peer[1]} there)")
    return top


@cache
def _mod(api_key: int, version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.{RAFT_MODULES[api_key][0]}.v{version}.{kind}")


def _cls(api_key: int, version: int, kind: str) -> type:
    lo, hi = VOTER_VERSIONS[api_key]
    if not lo <= version <= hi:
        raise WireError(
            f"apiKey {api_key} v{version} is not a version Kafka 3.9's raft client speaks ({lo}-{hi})"
        )
    return getattr(_mod(api_key, version, kind), RAFT_MODULES[api_key][1] + kind.capitalize())


def _uuid(text: str | None) -> uuid.UUID:
    if not text:
        return ZERO_UUID
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def _text(value: uuid.UUID | None) -> str | None:
    if value is None or value == ZERO_UUID:
        return None
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def _only_partition(topics: Any, by_id: bool = False) -> Any:
    """The one partition of `__cluster_metadata`; anything else is Kafka's INVALID_REQUEST."""
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        raise WireError("a voter request names exactly one topic partition")
    topic = topics[0]
    if (topic.topic_id != METADATA_TOPIC_UUID) if by_id else (topic.topic_name != METADATA_TOPIC):
        raise WireError("a voter request is for __cluster_metadata only")
    part = topic.partitions[0]
    if getattr(part, "partition_index", getattr(part, "partition", 0)) != 0:
        raise WireError("a voter request is for partition 0 only")
    return part


# --- requests ----------------------------------------------------------------------------------------


def _request_entity(msg: Any, version: int) -> Any:
    api = _API_OF[type(msg)]
    m = _mod(api, version, "request")
    if isinstance(msg, VoteRequest):
        kw: dict[str, Any] = dict(partition_index=0, replica_epoch=msg.candidate_epoch, replica_id=msg.candidate_id,
                                  last_offset_epoch=msg.last_offset_epoch, last_offset=msg.last_offset)  # fmt: skip
        top: dict[str, Any] = {}
        if version >= 1:
            kw.update(
                replica_directory_id=_uuid(msg.candidate_directory_id),
                voter_directory_id=_uuid(msg.voter_directory_id),
            )
            top["voter_id"] = msg.voter_id
        topic = m.TopicData(topic_name=METADATA_TOPIC, partitions=(m.PartitionData(**kw),))
        return m.VoteRequest(cluster_id=msg.cluster_id, topics=(topic,), **top)
    if isinstance(msg, BeginQuorumEpochRequest):
        kw = dict(partition_index=0, leader_id=msg.leader_id, leader_epoch=msg.leader_epoch)
        top = {}
        if version >= 1:
            kw["voter_directory_id"] = _uuid(msg.voter_directory_id)
            top = dict(voter_id=msg.voter_id, leader_endpoints=tuple(
                m.LeaderEndpoint(name=n, host=h, port=p) for n, h, p in msg.leader_endpoints))  # fmt: skip
        topic = m.TopicData(topic_name=METADATA_TOPIC, partitions=(m.PartitionData(**kw),))
        return m.BeginQuorumEpochRequest(cluster_id=msg.cluster_id, topics=(topic,), **top)
    if isinstance(msg, EndQuorumEpochRequest):
        kw = dict(partition_index=0, leader_id=msg.leader_id, leader_epoch=msg.leader_epoch)
        top = {}
        if version >= 1:
            kw["preferred_candidates"] = tuple(
                m.ReplicaInfo(candidate_id=c, candidate_directory_id=ZERO_UUID)
                for c in msg.preferred_successors
            )
            top["leader_endpoints"] = tuple(
                m.LeaderEndpoint(name=n, host=h, port=p) for n, h, p in msg.leader_endpoints
            )
        else:
            kw["preferred_successors"] = tuple(msg.preferred_successors)
        topic = m.TopicData(topic_name=METADATA_TOPIC, partitions=(m.PartitionData(**kw),))
        return m.EndQuorumEpochRequest(cluster_id=msg.cluster_id, topics=(topic,), **top)
    if isinstance(msg, DescribeQuorumRequest):
        topics: dict[str, list[int]] = {}
        for name, index in msg.partitions:
            topics.setdefault(name, []).append(index)
        return m.DescribeQuorumRequest(topics=tuple(
            m.TopicData(topic_name=n, partitions=tuple(m.PartitionData(partition_index=i) for i in ps))
            for n, ps in topics.items()))  # fmt: skip
    assert isinstance(msg, FetchRequest)
    part = _fields(m.FetchPartition, partition=0, current_leader_epoch=msg.current_leader_epoch,
                   fetch_offset=msg.fetch_offset, last_fetched_epoch=msg.last_fetched_epoch, log_start_offset=-1,
                   partition_max_bytes=0, replica_directory_id=_uuid(msg.replica_directory_id))  # fmt: skip
    return _fields(
        m.FetchRequest, cluster_id=msg.cluster_id, replica_id=msg.replica_id,
        replica_state=m.ReplicaState(replica_id=msg.replica_id, replica_epoch=-1) if version >= 15 else None,
        max_wait=datetime.timedelta(milliseconds=msg.max_wait_ms), min_bytes=0, max_bytes=8 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, topics=(m.FetchTopic(topic_id=METADATA_TOPIC_UUID, partitions=(part,)),),
        forgotten_topics_data=(), rack_id="",
    )  # fmt: skip


def _fields(cls: Any, **kw: Any) -> Any:
    """An instance of a kio class from whatever of ``kw`` its version has (Fetch's fields differ)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in kw.items() if k in names})


def encode_request(msg: Any, version: int, correlation_id: int, client_id: str = "zk2kraft-raft") -> bytes:
    """A size-prefixed request frame of ``version``."""
    api = _API_OF[type(msg)]
    cls = _cls(api, version, "request")
    hcls = RequestHeaderV2 if cls.__flexible__ else RequestHeaderV1  # type: ignore[attr-defined]
    header = _write(
        hcls,
        hcls(
            request_api_key=api,
            request_api_version=version,
            correlation_id=correlation_id,
            client_id=client_id,
        ),
    )
    body = header + _write(cls, _request_entity(msg, version))
    return _SIZE.pack(len(body)) + body


def decode_request(frame: bytes | memoryview) -> tuple[int, int, int, Any]:
    """(apiKey, version, correlation id, message) of a request frame without its size prefix."""
    if len(frame) < 8:
        raise WireError("a request shorter than its header")
    api, version = _KEY_VERSION.unpack_from(frame, 0)
    if api not in VOTER_VERSIONS:
        raise WireError(f"apiKey {api} is not a voter API")
    cls = _cls(api, version, "request")
    header, pos = _read(RequestHeaderV2 if cls.__flexible__ else RequestHeaderV1, frame, 0)  # type: ignore[attr-defined]
    req, size = _read(cls, frame, pos)
    if pos + size != len(frame):
        raise WireError("bytes after the request body")
    if api == DESCRIBE_QUORUM:
        asked = tuple((t.topic_name, int(p.partition_index)) for t in req.topics for p in t.partitions)
        return api, version, int(header.correlation_id), DescribeQuorumRequest(asked)
    if api == FETCH:
        p = _only_partition(req.topics, by_id=version >= 13)
        rid = int(req.replica_state.replica_id) if version >= 15 else int(req.replica_id)
        msg: Any = FetchRequest(req.cluster_id, rid, int(p.fetch_offset), int(p.last_fetched_epoch),
                                int(p.current_leader_epoch), int(req.max_wait.total_seconds() * 1000),
                                _text(getattr(p, "replica_directory_id", None)))  # fmt: skip
        return api, version, int(header.correlation_id), msg
    p = _only_partition(req.topics)
    if api == VOTE:
        msg = VoteRequest(req.cluster_id, int(p.replica_epoch), int(p.replica_id), int(p.last_offset_epoch),
                          int(p.last_offset), int(getattr(req, "voter_id", -1)),
                          _text(getattr(p, "replica_directory_id", None)), _text(getattr(p, "voter_directory_id", None)))  # fmt: skip
    elif api == BEGIN_QUORUM_EPOCH:
        eps = tuple((e.name, e.host, int(e.port)) for e in getattr(req, "leader_endpoints", ()))
        msg = BeginQuorumEpochRequest(req.cluster_id, int(p.leader_id), int(p.leader_epoch), int(getattr(req, "voter_id", -1)),
                                      _text(getattr(p, "voter_directory_id", None)), eps)  # fmt: skip
    else:
        if version >= 1:
            successors = tuple(int(c.candidate_id) for c in p.preferred_candidates)
        else:
            successors = tuple(int(c) for c in p.preferred_successors)
        eps = tuple((e.name, e.host, int(e.port)) for e in getattr(req, "leader_endpoints", ()))
        msg = EndQuorumEpochRequest(req.cluster_id, int(p.leader_id), int(p.leader_epoch), successors, eps)
    return api, version, int(header.correlation_id), msg


# --- responses ---------------------------------------------------------------------------------------


def _response_entity(msg: Any, version: int) -> Any:
    api = _API_OF[type(msg)]
    m = _mod(api, version, "response")
    top: dict[str, Any] = {}
    if api == DESCRIBE_QUORUM:
        return _describe_quorum_entity(m, msg, version)
    if api == FETCH:
        part = m.PartitionData(partition_index=0, error_code=ErrorCode(msg.partition_error), high_watermark=msg.high_watermark,
                               log_start_offset=-1, current_leader=m.LeaderIdAndEpoch(leader_id=msg.leader_id, leader_epoch=msg.leader_epoch),
                               aborted_transactions=None, records=msg.records or None)  # fmt: skip
        if version >= 16 and msg.leader_endpoint is not None and msg.leader_id >= 0:
            host, port = msg.leader_endpoint
            top["node_endpoints"] = (m.NodeEndpoint(node_id=msg.leader_id, host=host, port=port, rack=None),)
        topics = (m.FetchableTopicResponse(topic_id=METADATA_TOPIC_UUID, partitions=(part,)),)
        return m.FetchResponse(throttle_time=datetime.timedelta(0), error_code=ErrorCode(msg.error_code), session_id=0,
                               responses=topics if msg.error_code == 0 else (), **top)  # fmt: skip
    kw: dict[str, Any] = dict(partition_index=0, error_code=ErrorCode(msg.partition_error), leader_id=msg.leader_id,
                              leader_epoch=msg.leader_epoch)  # fmt: skip
    if api == VOTE:
        kw["vote_granted"] = msg.vote_granted
    if version >= 1 and msg.leader_endpoint is not None and msg.leader_id >= 0:
        host, port = msg.leader_endpoint
        top["node_endpoints"] = (m.NodeEndpoint(node_id=msg.leader_id, host=host, port=port),)
    topics = (
        (m.TopicData(topic_name=METADATA_TOPIC, partitions=(m.PartitionData(**kw),)),)
        if msg.error_code == 0
        else ()
    )
    return getattr(m, RAFT_MODULES[api][1] + "Response")(
        error_code=ErrorCode(msg.error_code), topics=topics, **top
    )


def _describe_quorum_entity(m: Any, msg: DescribeQuorumResponse, version: int) -> Any:
    """RaftUtil.singletonDescribeQuorumResponse, or the error answer for each asked partition."""

    def replica(r: ReplicaView) -> Any:
        return _fields(m.ReplicaState, replica_id=r.replica_id, replica_directory_id=_uuid(r.directory_id),
                       log_end_offset=r.log_end_offset, last_fetch_timestamp=r.last_fetch_ms,
                       last_caught_up_timestamp=r.last_caught_up_ms)  # fmt: skip

    parts: dict[str, list[Any]] = {}
    for name, index in msg.partitions:
        parts.setdefault(name, []).append(_fields(
            m.PartitionData, partition_index=index, error_code=ErrorCode(msg.partition_error),
            error_message=MESSAGES.get(msg.partition_error), leader_id=msg.leader_id, leader_epoch=msg.leader_epoch,
            high_watermark=msg.high_watermark, current_voters=tuple(replica(r) for r in msg.voters),
            observers=tuple(replica(r) for r in msg.observers)))  # fmt: skip
    nodes = tuple(
        m.Node(node_id=n, listeners=(m.Listener(name=name, host=host, port=port),)) for n, name, host, port in msg.nodes
    ) if version >= 2 else ()  # fmt: skip
    topics = tuple(m.TopicData(topic_name=n, partitions=tuple(ps)) for n, ps in parts.items())
    return _fields(
        m.DescribeQuorumResponse, error_code=ErrorCode(0), error_message=None, topics=topics, nodes=nodes
    )


def encode_response(msg: Any, version: int, correlation_id: int) -> bytes:
    """A size-prefixed response frame: header v1 for flexible versions, v0 otherwise."""
    api = _API_OF[type(msg)]
    cls = _cls(api, version, "response")
    if cls.__flexible__:  # type: ignore[attr-defined]
        header = _write(ResponseHeaderV1, ResponseHeaderV1(correlation_id=correlation_id))
    else:
        header = _write(ResponseHeaderV0, ResponseHeaderV0(correlation_id=correlation_id))
    body = header + _write(cls, _response_entity(msg, version))
    return _SIZE.pack(len(body)) + body


def decode_response(api_key: int, version: int, frame: bytes | memoryview) -> tuple[int, Any]:
    """(correlation id, message) of a response frame without its size prefix."""
    cls = _cls(api_key, version, "response")
    header, pos = _read(ResponseHeaderV1 if cls.__flexible__ else ResponseHeaderV0, frame, 0)  # type: ignore[attr-defined]
    resp, size = _read(cls, frame, pos)
    if pos + size != len(frame):
        raise WireError("bytes after the response body")
    cid = int(header.correlation_id)
    if api_key == DESCRIBE_QUORUM:
        return cid, _describe_quorum_message(resp)
    endpoints = {int(e.node_id): (e.host, int(e.port)) for e in getattr(resp, "node_endpoints", ())}
    parts = resp.responses if api_key == FETCH else resp.topics
    if resp.error_code != 0 or not parts:
        # a top-level error (Kafka answers those without topics); none at all would be INVALID_REQUEST
        empty: dict[int, type] = {VOTE: VoteResponse, BEGIN_QUORUM_EPOCH: BeginQuorumEpochResponse,
                                  END_QUORUM_EPOCH: EndQuorumEpochResponse, FETCH: FetchResponse}  # fmt: skip
        return cid, empty[api_key](int(resp.error_code) or 42)
    if api_key == FETCH:
        p = _only_partition(resp.responses, by_id=True)
        leader = int(p.current_leader.leader_id)
        return cid, FetchResponse(0, int(p.error_code), leader, int(p.current_leader.leader_epoch), int(p.high_watermark),
                                  endpoints.get(leader), bytes(p.records or b""))  # fmt: skip
    p = _only_partition(resp.topics)
    leader = int(p.leader_id)
    if api_key == VOTE:
        return cid, VoteResponse(
            0, int(p.error_code), leader, int(p.leader_epoch), bool(p.vote_granted), endpoints.get(leader)
        )
    out = BeginQuorumEpochResponse if api_key == BEGIN_QUORUM_EPOCH else EndQuorumEpochResponse
    return cid, out(0, int(p.error_code), leader, int(p.leader_epoch), endpoints.get(leader))


def _describe_quorum_message(resp: Any) -> DescribeQuorumResponse:
    def view(r: Any) -> ReplicaView:
        return ReplicaView(int(r.replica_id), _text(getattr(r, "replica_directory_id", None)), int(r.log_end_offset),
                           int(getattr(r, "last_fetch_timestamp", -1)), int(getattr(r, "last_caught_up_timestamp", -1)))  # fmt: skip

    asked = tuple((t.topic_name, int(p.partition_index)) for t in resp.topics for p in t.partitions)
    if not asked:
        return DescribeQuorumResponse((), int(resp.error_code))
    p = resp.topics[0].partitions[0]
    nodes = tuple(
        (int(n.node_id), lst.name, lst.host, int(lst.port))
        for n in getattr(resp, "nodes", ())
        for lst in n.listeners
    )
    return DescribeQuorumResponse(asked, int(p.error_code), int(p.leader_id), int(p.leader_epoch), int(p.high_watermark),
                                  tuple(view(r) for r in p.current_voters), tuple(view(r) for r in p.observers), nodes)  # fmt: skip
