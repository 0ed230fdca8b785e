"""The controller as the leader of a single-voter KRaft quorum: Kafka's Raft APIs on its listener.

KRaft brokers (and later standbys) learn metadata only by fetching `__cluster_metadata` from the
quorum's leader. This module answers Fetch (v13-17), FetchSnapshot (v0-1), DescribeQuorum (v0-2) and
Vote / BeginQuorumEpoch / EndQuorumEpoch (v0-1), the versions Kafka 3.9's KafkaRaftClient sends, with
kio's generated classes for the bytes and Kafka 3.9's leader rules for the answers (`raft_fetch`).

Raft requests are answered on the listener's connection thread, outside the controller's request
lock: a Fetch long-polls up to its MaxWaitMs, and must never hold up registrations or AlterPartition.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import importlib
import logging
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2

from migrator.controller.protocol import kafka_errors as E
from migrator.controller.protocol import wire
from migrator.controller.raft.raft_fetch import LogView
from migrator.controller.raft.raft_slices import MARKER, SlicedAnswer, read_file_slice
from migrator.kraft.log import MetadataLog

__all__ = ["METADATA_TOPIC", "METADATA_TOPIC_UUID", "RAFT_VERSIONS", "LongPoll", "RaftLeader"]

log = logging.getLogger("zk2kraft.controller.raft")

FETCH, VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, DESCRIBE_QUORUM, FETCH_SNAPSHOT = 1, 52, 53, 54, 55, 59

#: apiKey -> (min, max): what Kafka 3.9's KafkaRaftClient and kafka-metadata-quorum send.
RAFT_VERSIONS: dict[int, tuple[int, int]] = {
    FETCH: (13, 17),
    VOTE: (0, 1),
    BEGIN_QUORUM_EPOCH: (0, 1),
    END_QUORUM_EPOCH: (0, 1),
    DESCRIBE_QUORUM: (0, 2),
    FETCH_SNAPSHOT: (0, 1),
}
#: apiKey -> (kio module, class prefix) of each Raft API: the one table the leader and the voter read.
RAFT_MODULES: dict[int, tuple[str, str]] = {
    FETCH: ("fetch", "Fetch"),
    VOTE: ("vote", "Vote"),
    BEGIN_QUORUM_EPOCH: ("begin_quorum_epoch", "BeginQuorumEpoch"),
    END_QUORUM_EPOCH: ("end_quorum_epoch", "EndQuorumEpoch"),
    DESCRIBE_QUORUM: ("describe_quorum", "DescribeQuorum"),
    FETCH_SNAPSHOT: ("fetch_snapshot", "FetchSnapshot"),
}

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_UUID = uuid.UUID(int=1)  # Uuid.METADATA_TOPIC_ID

SNAPSHOT_NOT_FOUND = 98
POSITION_OUT_OF_RANGE = 99
UNKNOWN_LEADER_EPOCH = 75
INCONSISTENT_VOTER_SET = 94

_KEY = struct.Struct(">h")
_NO_THROTTLE = datetime.timedelta(0)
_CACHED_BODY_BYTES = 64 << 10
_FRAME_HEAD = struct.Struct(">ii")  # frame size, then ResponseHeader v1's correlation id


#: KafkaRaftClient.MAX_FETCH_SIZE_BYTES: what Kafka's own leader reads per Fetch (KafkaMetadataLog.read
#: passes `maxFetchSizeInBytes`, 8 MiB, whatever the request says).
MAX_FETCH_BYTES = 8 << 20


def fetch_bytes(max_bytes: int, partition_max_bytes: int) -> int:
    """How much one Fetch answer carries: up to the request's MaxBytes and the partition's max bytes,
    a zero or negative one meaning "not set" (Kafka's observer sends MaxBytes 8 MiB and leaves
    PartitionMaxBytes at its default 0), never past Kafka's leader's 8 MiB, and at least one batch."""
    limits = [b for b in (max_bytes, partition_max_bytes) if b > 0]
    return max(1, min([MAX_FETCH_BYTES, *limits]))


@dataclass(slots=True)
class ReplicaState:
    """A fetcher as LeaderState tracks it: DescribeQuorum's observers."""

    replica_id: int
    directory_id: uuid.UUID | None
    log_end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1


@dataclass(slots=True)
class LongPoll:
    """A valid Fetch with nothing to hand out yet, waiting for the high watermark to pass ``offset``
    until ``deadline`` (monotonic seconds); `RaftLeader.complete` answers it."""

    version: int
    mod: Any
    offset: int
    last_epoch: int
    max_bytes: int
    deadline: float
    replica_id: int
    directory_id: uuid.UUID | None
    correlation_id: int = 0


def _frame(correlation_id: int, body: bytes) -> bytes:
    """ResponseHeader v1 (the correlation id, an empty tagged-field section) and ``body``, size-prefixed;
    packed here, since kio's generic encoder for it was a fifth of a woken long poll's answer."""
    return _FRAME_HEAD.pack(len(body) + 5, correlation_id) + b"\x00" + body


def _now_ms() -> int:
    return int(time.time() * 1000)


@functools.cache
def _mod(api_key: int, version: int, kind: str) -> Any:
    """kio's module for one version of one API (cached: every fetch asks for two)."""
    return importlib.import_module(f"kio.schema.{RAFT_MODULES[api_key][0]}.v{version}.{kind}")


def _mk(cls: type, **kw: Any) -> Any:
    """An instance of a kio class from whatever of ``kw`` that version has (fields differ by version)."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in kw.items() if k in names})


class RaftLeader:
    """Leader of the `__cluster_metadata` partition 0 quorum whose only voter is ``node_id``."""

    def __init__(
        self,
        metadata_log: MetadataLog,
        node_id: int,
        cluster_id: str | None = None,
        epoch: Callable[[], int] | None = None,
        indexed: bool = True,
    ) -> None:
        self.view = LogView(metadata_log, indexed)
        self.node_id = node_id
        self.cluster_id = cluster_id
        self._epoch = epoch or (lambda: max(metadata_log.latest_epoch, 0))
        self.endpoint: tuple[str, str, int] | None = None  # (listener name, host, port)
        # True until the copy is committed: DescribeQuorum is an admin API and answers NOT_CONTROLLER
        # then, as the others do (KIP-866); set by the listener from its service's soft start.
        self.soft_start: Callable[[], bool] = lambda: False
        self.replicas: dict[tuple[int, uuid.UUID | None], ReplicaState] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.fetches = 0
        # (replica id, error name, message) of a refused fetcher: the service's RefusedBrokers.refuse
        self.on_refused: Callable[[int, str, str], None] | None = None
        self._warned_own_id = False
        # Encoded Fetch response bodies by everything they depend on: the observers one append wakes
        # all ask for the same (offset, epoch) and get the same bytes, encoded once (kio's encoder was
        # most of a woken fetch's cost). Bounded: cleared when full.
        self._bodies: dict[tuple[Any, ...], bytes] = {}

    @property
    def epoch(self) -> int:
        return self._epoch()

    @property
    def closing(self) -> bool:
        return self._closing.is_set()

    def close(self) -> None:
        """Wake every long poll so that the listener's threads can end."""
        self._closing.set()
        self.view.wake()

    # -- framing ------------------------------------------------------------------------------------

    @staticmethod
    def serves(frame: bytes | memoryview) -> bool:
        return len(frame) >= 2 and _KEY.unpack_from(frame, 0)[0] in RAFT_VERSIONS

    def answer(
        self, frame: bytes | memoryview, park: bool = False, sliced: bool = False
    ) -> bytes | SlicedAnswer | LongPoll | None:
        """The response frame to one Raft request, or None to close the connection (as Kafka does on
        an unsupported version or bytes that are not the request they claim to be).

        A Fetch that has to wait long-polls on this thread, unless ``park``: then it comes back as a
        `LongPoll` for the listener's `long_polls.LongPolls` to answer (`complete_framed`) when the
        high watermark moves or its time is up, so that parked fetches hold no thread. ``sliced``: see
        `complete` (the caller must send the `SlicedAnswer` or close it)."""
        try:
            api_key, version = struct.unpack_from(">hh", frame, 0)
            lo, hi = RAFT_VERSIONS[api_key]
            if not lo <= version <= hi:
                log.info("closing a connection: Raft apiKey %d v%d is not supported", api_key, version)
                return None
            wire._check_request_header(frame, True)
            header, pos = wire._read(RequestHeaderV2, frame, 0)
            req_cls = getattr(_mod(api_key, version, "request"), RAFT_MODULES[api_key][1] + "Request")
            wire._check_body(req_cls, frame, pos)
            request, size = wire._read(req_cls, frame, pos)
            if pos + size != len(frame):
                raise wire.WireError("bytes after the request body")
        except (wire.WireError, struct.error) as e:
            log.info("closing a connection: a malformed Raft request: %s", e)
            return None
        resp_mod = _mod(api_key, version, "response")
        handler = {
            FETCH: self._fetch,
            FETCH_SNAPSHOT: self._fetch_snapshot,
            DESCRIBE_QUORUM: self._describe_quorum,
            VOTE: self._vote,
            BEGIN_QUORUM_EPOCH: self._quorum_epoch_notice,
            END_QUORUM_EPOCH: self._quorum_epoch_notice,
        }[api_key]
        try:
            response = handler(version, request, resp_mod)
            if isinstance(response, LongPoll):
                response.correlation_id = header.correlation_id
                first = self.complete(response, sliced)
                if isinstance(first, SlicedAnswer):
                    return first.framed(header.correlation_id)
                if first is None and park:
                    return response
                response = first if first is not None else self._wait(response)
            body = response if isinstance(response, bytes) else wire._write(type(response), response)
        except Exception as e:  # a bug here must not take the listener down: close this connection
            log.error("Raft apiKey %d v%d failed: %s: %s", api_key, version, type(e).__name__, e)
            return None
        return _frame(header.correlation_id, body)

    # -- shared checks --------------------------------------------------------------------------------

    def _leader_error(self, request_epoch: int) -> int:
        """KafkaRaftClient.validateLeaderOnlyRequest."""
        epoch = self.epoch
        if request_epoch < epoch:
            return E.FENCED_LEADER_EPOCH
        if request_epoch > epoch:
            return UNKNOWN_LEADER_EPOCH
        if self._closing.is_set():
            return 8  # BROKER_NOT_AVAILABLE: shutting down
        return E.NONE

    def _cluster_ok(self, cluster_id: str | None) -> bool:
        return cluster_id is None or self.cluster_id is None or cluster_id == self.cluster_id

    def _note_fetch(self, replica_id: int, directory_id: uuid.UUID | None, offset: int, hw: int) -> None:
        if replica_id < 0:
            return
        now = _now_ms()
        with self._lock:
            st = self.replicas.get((replica_id, directory_id))
            if st is None:
                st = self.replicas[(replica_id, directory_id)] = ReplicaState(replica_id, directory_id)
            st.log_end_offset = offset
            st.last_fetch_ms = now
            if offset >= hw:
                st.last_caught_up_ms = now

    # -- Fetch ------------------------------------------------------------------------------------------

    def _fetch(self, version: int, req: Any, mod: Any) -> Any:
        """The answer, or a `LongPoll` when a valid fetch finds nothing past its offset and may wait."""
        self.fetches += 1

        if not self._cluster_ok(req.cluster_id):
            if self.on_refused is not None:  # a broker of another cluster: named by `zk2kraft status`
                rid = int(req.replica_state.replica_id) if version >= 15 else int(req.replica_id)
                self.on_refused(rid, "INCONSISTENT_CLUSTER_ID",
                                f"Fetch: expected cluster ID {self.cluster_id}, but got cluster ID {req.cluster_id}")  # fmt: skip
            return self._fetch_response(mod, E.INCONSISTENT_CLUSTER_ID)
        topics = req.topics
        if (
            len(topics) != 1
            or topics[0].topic_id != METADATA_TOPIC_UUID
            or len(topics[0].partitions) != 1
            or topics[0].partitions[0].partition != 0
        ):
            return self._fetch_response(mod, E.INVALID_REQUEST)  # no multi-raft: a mismatch is invalid
        fp = topics[0].partitions[0]
        max_wait_ms = int(req.max_wait.total_seconds() * 1000)
        if (
            max_wait_ms < 0
            or fp.fetch_offset < 0
            or fp.last_fetched_epoch < 0
            or fp.last_fetched_epoch > fp.current_leader_epoch
        ):
            return self._fetch_response(mod, E.INVALID_REQUEST, self._fetch_partition(mod, E.INVALID_REQUEST))
        error = self._leader_error(fp.current_leader_epoch)
        if error:
            return self._fetch_response(mod, E.NONE, self._fetch_partition(mod, error))
        replica_id = int(req.replica_state.replica_id) if version >= 15 else int(req.replica_id)
        if replica_id == self.node_id:
            # LeaderState.updateReplicaState: a remote replica with the leader's own id is an
            # IllegalStateException, answered as UNKNOWN_SERVER_ERROR by tryCompleteFetchRequest
            if not self._warned_own_id:  # once: a flood of these must not flood the log too
                self._warned_own_id = True
                log.warning("a Fetch claims to come from this leader's own id %d", replica_id)
            return self._fetch_response(mod, E.NONE, self._fetch_partition(mod, E.UNKNOWN_SERVER_ERROR))
        poll = LongPoll(
            version,
            mod,
            int(fp.fetch_offset),
            int(fp.last_fetched_epoch),
            fetch_bytes(int(req.max_bytes), int(fp.partition_max_bytes)),
            time.monotonic() + max_wait_ms / 1000,
            replica_id,
            getattr(fp, "replica_directory_id", None),
        )
        return poll  # `answer` completes it at once if it can

    def complete(self, poll: LongPoll, sliced: bool = False) -> bytes | SlicedAnswer | None:
        """The Fetch response body for ``poll``, or None while it should go on waiting: nothing past its
        offset yet, time left, and the leader not closing (KafkaRaftClient.tryCompleteFetchRequest).
        Only with ``sliced``, more than `raft_fetch.SLICE_MIN_BYTES` of records left in the segment."""
        got = self.view.read(poll.offset, poll.last_epoch, poll.max_bytes, sliced)
        part = got.slice  # the records left in the segment: encoded as `MARKER`, never cached
        if (
            not (got.records or part)
            and got.verdict.kind == "valid"
            and time.monotonic() < poll.deadline
            and not self._closing.is_set()
        ):
            return None
        if got.verdict.kind == "valid":
            self._note_fetch(poll.replica_id, poll.directory_id, poll.offset, got.high_watermark)
        key = (
            poll.version,
            poll.offset,
            poll.last_epoch,
            poll.max_bytes,
            got.verdict.kind,
            got.verdict.offset,
            got.verdict.epoch,
            got.high_watermark,
            got.log_start_offset,
            self.epoch,
            len(got.records),
        )
        body = self._bodies.get(key) if part is None else None
        if body is not None:
            return body
        mod = poll.mod
        kw: dict[str, Any] = dict(high_watermark=got.high_watermark, log_start_offset=got.log_start_offset)
        if got.verdict.kind == "diverging":
            kw["diverging_epoch"] = mod.EpochEndOffset(epoch=got.verdict.epoch, end_offset=got.verdict.offset)
        elif got.verdict.kind == "snapshot":
            kw["snapshot_id"] = mod.SnapshotId(end_offset=got.verdict.offset, epoch=got.verdict.epoch)
        kw["records"] = got.records if part is None else MARKER
        resp = self._fetch_response(mod, E.NONE, self._fetch_partition(mod, E.NONE, **kw))
        body = wire._write(type(resp), resp)
        if part is not None:
            return SlicedAnswer.around(body, part)
        if len(body) <= _CACHED_BODY_BYTES:  # long-poll answers; catch-up reads of 8 MiB are not kept
            if len(self._bodies) >= 64:
                self._bodies.clear()
            self._bodies[key] = body
        return body

    def complete_framed(self, poll: LongPoll) -> bytes | None:
        """``complete`` as a response frame (b"" when answering failed: close the connection)."""
        try:
            body = self.complete(poll)
        except Exception as e:  # as in `answer`: close this connection, keep the listener
            log.error("Raft Fetch v%d failed: %s: %s", poll.version, type(e).__name__, e)
            return b""
        return None if body is None else _frame(poll.correlation_id, body)

    def _wait(self, poll: LongPoll) -> bytes:
        """Long-poll on the calling thread (callers without the listener's `LongPolls`)."""
        while True:
            body = self.complete(poll)
            if body is not None:
                return body
            self.view.wait_beyond(poll.offset, poll.deadline - time.monotonic(), self._closing)

    def _fetch_partition(self, mod: Any, error: int, **kw: Any) -> Any:
        base: dict[str, Any] = dict(
            partition_index=0,
            error_code=ErrorCode(error),
            high_watermark=-1,
            log_start_offset=self.view.log.log_start_offset,
            current_leader=mod.LeaderIdAndEpoch(leader_id=self.node_id, leader_epoch=self.epoch),
            aborted_transactions=None,
            records=None,
        )
        base.update(kw)
        return mod.PartitionData(**base)

    @staticmethod
    def _fetch_response(mod: Any, error: int, part: Any = None) -> Any:
        topics = (
            (mod.FetchableTopicResponse(topic_id=METADATA_TOPIC_UUID, partitions=(part,)),)
            if part is not None
            else ()
        )
        return _mk(
            mod.FetchResponse,
            throttle_time=_NO_THROTTLE,
            error_code=ErrorCode(error),
            session_id=0,
            responses=topics,
        )

    # -- FetchSnapshot ------------------------------------------------------------------------------------

    def _fetch_snapshot(self, version: int, req: Any, mod: Any) -> Any:
        def response(error: int, part: Any = None) -> Any:
            topics = (mod.TopicSnapshot(name=METADATA_TOPIC, partitions=(part,)),) if part is not None else ()
            return _mk(
                mod.FetchSnapshotResponse,
                throttle_time=_NO_THROTTLE,
                error_code=ErrorCode(error),
                topics=topics,
            )

        def part(error: int, sid: Any, size: int = -1, position: int = -1, data: bytes = b"") -> Any:
            return mod.PartitionSnapshot(
                index=0,
                error_code=ErrorCode(error),
                snapshot_id=mod.SnapshotId(end_offset=sid.end_offset, epoch=sid.epoch),
                current_leader=mod.LeaderIdAndEpoch(leader_id=self.node_id, leader_epoch=self.epoch),
                size=size,
                position=position,
                unaligned_records=data,
            )

        if not self._cluster_ok(req.cluster_id):
            return response(E.INCONSISTENT_CLUSTER_ID)
        if len(req.topics) != 1 or len(req.topics[0].partitions) != 1:
            return response(E.INVALID_REQUEST)
        ps = req.topics[0].partitions[0]
        if req.topics[0].name != METADATA_TOPIC or ps.partition != 0:
            return response(E.NONE, part(E.UNKNOWN_TOPIC_OR_PARTITION, ps.snapshot_id))
        error = self._leader_error(ps.current_leader_epoch)
        if error:
            return response(E.NONE, part(error, ps.snapshot_id))
        path = self.view.snapshot_path(int(ps.snapshot_id.end_offset), int(ps.snapshot_id.epoch))
        found = None if path is None else read_file_slice(path, int(ps.position), int(req.max_bytes))
        if found is None:  # none, or retention deleted it between the listing and the open
            return response(E.NONE, part(SNAPSHOT_NOT_FOUND, ps.snapshot_id))
        size, data = found
        if not 0 <= ps.position < size:
            return response(E.NONE, part(POSITION_OUT_OF_RANGE, ps.snapshot_id))
        return response(E.NONE, part(E.NONE, ps.snapshot_id, size, int(ps.position), data))

    # -- DescribeQuorum -----------------------------------------------------------------------------------

    def _describe_quorum(self, version: int, req: Any, mod: Any) -> Any:
        if self.soft_start():  # Kafka's getErrorResponse: the top-level error, no topics
            return _mk(
                mod.DescribeQuorumResponse,
                error_code=ErrorCode(E.NOT_CONTROLLER),
                error_message=None,
                topics=(),
                nodes=(),
            )
        ok = (
            len(req.topics) == 1
            and req.topics[0].topic_name == METADATA_TOPIC
            and len(req.topics[0].partitions) == 1
            and req.topics[0].partitions[0].partition_index == 0
        )
        hw = self.view.high_watermark
        now = _now_ms()
        if not ok:
            part = _mk(
                mod.PartitionData,
                partition_index=0,
                error_code=ErrorCode(E.UNKNOWN_TOPIC_OR_PARTITION),
                error_message=None,
                leader_id=-1,
                leader_epoch=-1,
                high_watermark=-1,
                current_voters=(),
                observers=(),
            )
        else:
            voter = _mk(
                mod.ReplicaState,
                replica_id=self.node_id,
                replica_directory_id=self.directory_id(),
                log_end_offset=hw,
                last_fetch_timestamp=now,
                last_caught_up_timestamp=now,
            )
            with self._lock:
                observers = tuple(
                    _mk(
                        mod.ReplicaState,
                        replica_id=s.replica_id,
                        replica_directory_id=s.directory_id or uuid.UUID(int=0),
                        log_end_offset=s.log_end_offset,
                        last_fetch_timestamp=s.last_fetch_ms,
                        last_caught_up_timestamp=s.last_caught_up_ms,
                    )
                    for s in self.replicas.values()
                    if s.replica_id != self.node_id
                )
            part = _mk(
                mod.PartitionData,
                partition_index=0,
                error_code=ErrorCode(E.NONE),
                error_message=None,
                leader_id=self.node_id,
                leader_epoch=self.epoch,
                high_watermark=hw,
                current_voters=(voter,),
                observers=observers,
            )
        topic = mod.TopicData(topic_name=METADATA_TOPIC, partitions=(part,))
        nodes: tuple[Any, ...] = ()
        if version >= 2 and self.endpoint is not None and ok:
            name, host, port = self.endpoint
            nodes = (
                mod.Node(node_id=self.node_id, listeners=(mod.Listener(name=name, host=host, port=port),)),
            )
        return _mk(
            mod.DescribeQuorumResponse,
            error_code=ErrorCode(E.NONE),
            error_message=None,
            topics=(topic,),
            nodes=nodes,
        )

    def directory_id(self) -> uuid.UUID:
        meta = self.view.log.meta
        raw = getattr(meta, "directory_id", None) if meta is not None else None
        if isinstance(raw, uuid.UUID):
            return raw
        return uuid.UUID(int=0)

    # -- Vote, BeginQuorumEpoch, EndQuorumEpoch -----------------------------------------------------------

    def _vote(self, version: int, req: Any, mod: Any) -> Any:
        """A single-voter leader never grants a vote: no other node is a voter of its quorum, and its own
        epoch stands. A lower epoch is fenced; anything else is refused with the current leader named."""
        if not self._cluster_ok(req.cluster_id):
            return _mk(mod.VoteResponse, error_code=ErrorCode(E.INCONSISTENT_CLUSTER_ID), topics=())
        parts = []
        for t in req.topics:
            for p in t.partitions:
                if t.topic_name != METADATA_TOPIC or p.partition_index != 0:
                    err = E.UNKNOWN_TOPIC_OR_PARTITION
                elif getattr(p, "candidate_epoch", getattr(p, "replica_epoch", -1)) < self.epoch:
                    err = E.FENCED_LEADER_EPOCH
                else:
                    err = INCONSISTENT_VOTER_SET  # the candidate is not a voter of this quorum
                parts.append(
                    (
                        t.topic_name,
                        mod.PartitionData(
                            partition_index=p.partition_index,
                            error_code=ErrorCode(err),
                            leader_id=self.node_id,
                            leader_epoch=self.epoch,
                            vote_granted=False,
                        ),
                    )
                )
        topics = tuple(mod.TopicData(topic_name=name, partitions=(pd,)) for name, pd in parts)
        return _mk(mod.VoteResponse, error_code=ErrorCode(E.NONE), topics=topics)

    def _quorum_epoch_notice(self, version: int, req: Any, mod: Any) -> Any:
        """Another node claiming leadership of this quorum: fenced if its epoch is older, otherwise it is
        not a voter here (the only voter is this node), as Kafka's INCONSISTENT_VOTER_SET says."""
        name = type(req).__name__.replace("Request", "Response")
        resp_cls = getattr(mod, name)
        if not self._cluster_ok(req.cluster_id):
            return _mk(resp_cls, error_code=ErrorCode(E.INCONSISTENT_CLUSTER_ID), topics=())
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                if t.topic_name != METADATA_TOPIC or p.partition_index != 0:
                    err = E.UNKNOWN_TOPIC_OR_PARTITION
                elif p.leader_epoch < self.epoch:
                    err = E.FENCED_LEADER_EPOCH
                elif p.leader_id == self.node_id and p.leader_epoch == self.epoch:
                    err = E.NONE
                else:
                    err = INCONSISTENT_VOTER_SET
                parts.append(
                    mod.PartitionData(
                        partition_index=p.partition_index,
                        error_code=ErrorCode(err),
                        leader_id=self.node_id,
                        leader_epoch=self.epoch,
                    )
                )
            topics.append(mod.TopicData(topic_name=t.topic_name, partitions=tuple(parts)))
        return _mk(resp_cls, error_code=ErrorCode(E.NONE), topics=tuple(topics))
