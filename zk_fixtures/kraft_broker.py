"""Simulated KRaft-mode brokers (the runbook's phase 3): a broker restarted out of ZooKeeper mode.

A KRaft broker learns metadata only as an observer of the `__cluster_metadata` Raft partition: it
fetches from the quorum's leader with Fetch v17, truncates when told its log diverged, loads a snapshot
with FetchSnapshot when the leader has deleted the log it needs, and replays what it fetched into its
own metadata cache. This is that fetch loop, written against kio's generated message classes (not the
controller's wire code), so that the controller is tested by a second implementation of the protocol.
Records are applied to the cache only up to the leader's high watermark, as Kafka's MetadataLoader
applies only committed batches.

`KraftSimBroker` is a `SimBroker` that registers without the migration flag and follows the log.
"""

from __future__ import annotations

import datetime
import importlib
import io
import logging
import socket
import struct
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.serial import entity_reader, entity_writer

from migrator.controller.protocol import messages as M
from migrator.controller.security.client_security import ClientSecurity, sasl_authenticate
from migrator.controller.service import ControllerService
from migrator.errors import BadInputError
from migrator.kraft.batch import iter_batches
from migrator.kraft.batch_decode import decode_batch_records
from migrator.kraft.image import ImageBuilder, ReplayResult
from migrator.kraft.records import MetadataRecord, OpaqueRecord
from migrator.model import ClusterImage
from zk_fixtures.broker_sim import BrokerSimulator
from zk_fixtures.brokers import BrokerSessions
from zk_fixtures.simulated_broker import SimBroker

__all__ = [
    "KraftSimBroker",
    "MetadataFollower",
    "as_kraft_brokers",
    "controlled_shutdown",
    "equal_to_controller",
    "report_kraft_brokers",
    "restart_in_kraft_mode",
]

log = logging.getLogger("zk2kraft.kraft_broker")

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER = 74, 75, 6

_FETCH_REQ = importlib.import_module("kio.schema.fetch.v17.request")
_FETCH_RESP = importlib.import_module("kio.schema.fetch.v17.response")
_SNAP_REQ = importlib.import_module("kio.schema.fetch_snapshot.v1.request")
_SNAP_RESP = importlib.import_module("kio.schema.fetch_snapshot.v1.response")

Rec = tuple[int, int, MetadataRecord | OpaqueRecord]  # (offset, epoch, record)


class _Conn:
    """One connection to the leader, kio encoding, one request at a time."""

    def __init__(
        self,
        address: tuple[str, int],
        client_id: str,
        timeout_s: float,
        security: ClientSecurity | None = None,
    ) -> None:
        self.sock = socket.create_connection(address, timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self.cid = 0
        if security is not None and security.tls:
            self.sock = security.ssl_context().wrap_socket(self.sock, server_hostname=address[0])
        if security is not None and security.sasl:  # a broker's controller listener settings
            sasl_authenticate(self._round_trip, self._next_id, client_id, security)

    def _next_id(self) -> int:
        self.cid += 1
        return self.cid

    def _round_trip(self, frame: bytes) -> bytes:
        self.sock.sendall(frame)
        (size,) = struct.unpack(">i", self._recv(4))
        return self._recv(size)

    def call(self, req: Any, resp_cls: type) -> Any:
        self.cid += 1
        buf = io.BytesIO()
        header = RequestHeader(
            request_api_key=req.__api_key__,
            request_api_version=req.__version__,
            correlation_id=self.cid,
            client_id=self.client_id,
        )
        entity_writer(RequestHeader)(buf, header)
        entity_writer(type(req))(buf, req)
        payload = buf.getvalue()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._recv(4))
        data = self._recv(size)
        head, pos = entity_reader(ResponseHeader)(data, 0)
        if head.correlation_id != self.cid:
            raise ConnectionError(f"correlation id {head.correlation_id}, expected {self.cid}")
        return entity_reader(resp_cls)(data, pos)[0]

    def _recv(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("the leader closed the connection")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self.sock.close()


@dataclass
class MetadataFollower:
    """An observer of `__cluster_metadata`: its local log, its cache, and the fetch loop that fills them."""

    leader: tuple[str, int]
    replica_id: int
    cluster_id: str | None = None
    max_wait_ms: int = 500
    max_bytes: int = 8 << 20
    directory_id: uuid.UUID = field(default_factory=uuid.uuid4)
    security: ClientSecurity | None = None
    leader_epoch: int = 0
    high_watermark: int = 0
    #: the loaded snapshot (end offset, epoch, cache at it), then the fetched records after it
    snapshot: tuple[int, int, ReplayResult] | None = None
    records: list[Rec] = field(default_factory=list)
    snapshots_loaded: int = 0
    truncations: int = 0
    errors: list[str] = field(default_factory=list)
    _conn: _Conn | None = None
    _builder: ImageBuilder | None = None
    _applied: int = 0  # records[:_applied] are in the cache
    _end: tuple[int, int] = (0, 0)  # (next offset, epoch of the last batch): control batches count too
    events: int = 0  # epoch changes, truncations, snapshot loads: what a fetch can do besides records
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- position -----------------------------------------------------------------------------------

    @property
    def fetch_offset(self) -> int:
        return self._end[0]

    @property
    def last_fetched_epoch(self) -> int:
        return self._end[1]

    @property
    def applied_offset(self) -> int:
        """The last offset replayed into the cache (what a KRaft broker's heartbeat reports), -1 for none."""
        with self._lock:
            last = min(self._end[0], self.high_watermark) - 1
            return max(last, self.snapshot[0] - 1 if self.snapshot else -1)

    def cache(self) -> ClusterImage:
        """The broker's metadata cache: everything committed it has fetched."""
        with self._lock:
            return self._cache().finish().image.model_copy(deep=True)

    def cache_equals(self, image: ClusterImage) -> bool:
        """Whether the cache equals `image` but for the cluster id (a broker has that from its own
        meta.properties, not from the log); no copy, so it is cheap enough to ask at every step."""
        with self._lock:
            mine = self._cache().finish().image
            return mine.model_copy(update={"cluster_id": image.cluster_id}) == image

    def _cache(self) -> ImageBuilder:
        if self._builder is None:
            self._builder = ImageBuilder(self.snapshot[2] if self.snapshot else None)
            self._applied = 0
        while self._applied < len(self.records) and self.records[self._applied][0] < self.high_watermark:
            offset, _epoch, rec = self.records[self._applied]
            self._builder.replay(offset, rec)
            self._applied += 1
        return self._builder

    # -- one fetch ------------------------------------------------------------------------------------

    def _call(self, req: Any, resp_cls: type) -> Any:
        if self._conn is None:
            self._conn = _Conn(
                self.leader, f"kraft-broker-{self.replica_id}", timeout_s=30, security=self.security
            )
        try:
            return self._conn.call(req, resp_cls)
        except (OSError, ConnectionError, struct.error):
            self._conn.close()
            self._conn = None
            raise

    def fetch_once(self, max_wait_ms: int | None = None) -> int:
        """One Fetch and what it says to do; returns how many records it appended."""
        R = _FETCH_REQ
        part = R.FetchPartition(
            partition=0,
            current_leader_epoch=self.leader_epoch,
            fetch_offset=self.fetch_offset,
            last_fetched_epoch=self.last_fetched_epoch,
            log_start_offset=-1,
            partition_max_bytes=self.max_bytes,
            replica_directory_id=self.directory_id,
        )
        req = R.FetchRequest(
            cluster_id=self.cluster_id,
            replica_state=R.ReplicaState(replica_id=self.replica_id, replica_epoch=-1),
            max_wait=datetime.timedelta(
                milliseconds=self.max_wait_ms if max_wait_ms is None else max_wait_ms
            ),
            min_bytes=1,
            max_bytes=self.max_bytes,
            topics=(R.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=(part,)),),
            forgotten_topics_data=(),
        )
        resp = self._call(req, _FETCH_RESP.FetchResponse)
        if resp.error_code != 0 or not resp.responses:
            raise ConnectionError(f"Fetch refused: error {int(resp.error_code)}")
        p = resp.responses[0].partitions[0]
        code = int(p.error_code)
        if code in (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER):
            if p.current_leader.leader_epoch >= 0:
                self.leader_epoch = int(p.current_leader.leader_epoch)  # the leader names its epoch
                self.events += 1
            return 0
        if code != 0:
            raise ConnectionError(f"Fetch from offset {self.fetch_offset}: error {code}")
        self.leader_epoch = int(p.current_leader.leader_epoch)
        if p.diverging_epoch.epoch >= 0 or p.diverging_epoch.end_offset >= 0:
            self._truncate(int(p.diverging_epoch.end_offset), int(p.diverging_epoch.epoch))
            return 0
        if p.snapshot_id.end_offset >= 0 or p.snapshot_id.epoch >= 0:
            self._load_snapshot(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch))
            return 0
        fetched, end = self._decode(p.records or b"", self.fetch_offset)
        with self._lock:
            self.records.extend(fetched)
            if end is not None:
                self._end = end
            self.high_watermark = max(self.high_watermark, int(p.high_watermark))
        return len(fetched) if end is None else max(1, len(fetched))

    @staticmethod
    def _decode(data: bytes, from_offset: int) -> tuple[list[Rec], tuple[int, int] | None]:
        out: list[Rec] = []
        end = None
        for batch in iter_batches(data, "fetched records"):
            end = (batch.next_offset, batch.partition_leader_epoch)
            if batch.is_control:
                continue
            for offset, rec in decode_batch_records(batch):
                if offset >= from_offset:
                    out.append((offset, batch.partition_leader_epoch, rec))
        return out, end

    def _truncate(self, end_offset: int, epoch: int) -> None:
        """Kafka's follower truncation: drop what the leader says diverged, rebuild the cache."""
        with self._lock:
            keep = [r for r in self.records if r[0] < end_offset]
            self.truncations += 1
            self.events += 1
            self._end = (end_offset, epoch)
            self.records = keep
            self._builder = None  # the cache is rebuilt from the snapshot and what is kept
            self.high_watermark = min(self.high_watermark, end_offset)

    def _load_snapshot(self, end_offset: int, epoch: int) -> None:
        data = bytearray()
        size = None
        while size is None or len(data) < size:
            ps = _SNAP_REQ.PartitionSnapshot(
                partition=0,
                current_leader_epoch=self.leader_epoch,
                snapshot_id=_SNAP_REQ.SnapshotId(end_offset=end_offset, epoch=epoch),
                position=len(data),
                replica_directory_id=self.directory_id,
            )
            req = _SNAP_REQ.FetchSnapshotRequest(
                cluster_id=self.cluster_id,
                replica_id=self.replica_id,
                max_bytes=self.max_bytes,
                topics=(_SNAP_REQ.TopicSnapshot(name=METADATA_TOPIC, partitions=(ps,)),),
            )
            resp = self._call(req, _SNAP_RESP.FetchSnapshotResponse)
            if resp.error_code != 0 or not resp.topics:
                raise ConnectionError(f"FetchSnapshot refused: error {int(resp.error_code)}")
            got = resp.topics[0].partitions[0]
            if got.error_code != 0:
                raise ConnectionError(f"FetchSnapshot {end_offset}-{epoch}: error {int(got.error_code)}")
            size = int(got.size)
            data += got.unaligned_records
        builder = ImageBuilder()
        for batch in iter_batches(bytes(data), f"snapshot {end_offset}-{epoch}"):
            if not batch.is_control:
                for offset, rec in decode_batch_records(batch):
                    builder.replay(offset, rec)
        with self._lock:
            self.snapshot = (end_offset, epoch, builder.finish())
            self._end = (end_offset, epoch)
            self.events += 1
            self.records = []
            self._builder = None
            self.high_watermark = max(self.high_watermark, end_offset)
            self.snapshots_loaded += 1

    # -- the loop ---------------------------------------------------------------------------------------

    def catch_up(self, timeout_s: float = 30.0) -> None:
        """Fetch until at the leader's high watermark (for tests and the simulator's steps)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            events = self.events
            got = self.fetch_once(0)
            if got == 0 and events == self.events and self.fetch_offset >= self.high_watermark:
                return
        raise TimeoutError(f"not caught up within {timeout_s}s: at {self.fetch_offset}, {self.errors[-1:]}")

    def start(self) -> MetadataFollower:
        self._thread = threading.Thread(
            target=self._loop, name=f"kraft-follower-{self.replica_id}", daemon=True
        )
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.fetch_once()
            except Exception as e:  # the leader restarted, the connection broke: back off, fetch again
                self.errors.append(f"{type(e).__name__}: {e}")
                del self.errors[:-20]
                self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        conn = self._conn
        if conn is not None:  # wakes a long poll parked in recv
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@dataclass
class KraftSimBroker(SimBroker):
    """A broker restarted in KRaft mode: registers without the migration flag, follows the metadata log."""

    follower: MetadataFollower | None = None

    def registration(self) -> M.BrokerRegistrationRequest:
        req = super().registration()
        req.is_migrating_zk_broker = False
        return req

    def follow(self, max_wait_ms: int = 500) -> MetadataFollower:
        if self.follower is None:
            self.follower = MetadataFollower(
                self.controller,
                self.broker_id,
                self.cluster_id,
                max_wait_ms=max_wait_ms,
                security=self.security,
            ).start()
        return self.follower

    def metadata_offset(self) -> int:
        """What it replayed: the controller unfences it once that reaches its own registration."""
        return -1 if self.follower is None else self.follower.applied_offset

    def close(self) -> None:
        if self.follower is not None:
            self.follower.stop()
        super().close()

    @classmethod
    def restarted_from(cls, zk_broker: SimBroker) -> KraftSimBroker:
        """The same broker id, listeners, rack and log directories, a new incarnation (a restart)."""
        zk_broker.close()
        return cls(
            broker_id=zk_broker.broker_id,
            controller=zk_broker.controller,
            cluster_id=zk_broker.cluster_id,
            rack=zk_broker.rack,
            log_dirs=zk_broker.log_dirs,
            own_timeout_s=zk_broker.own_timeout_s,
            mv_range=zk_broker.mv_range,
            clock=zk_broker.clock,
            dir_ids=list(zk_broker.dir_ids),
            listeners=list(zk_broker.listeners),
            security=zk_broker.security,
        )


def equal_to_controller(
    service: ControllerService, followers: list[MetadataFollower], timeout_s: float = 60.0
) -> int | None:
    """The committed offset at which every follower's cache equalled the controller's image (waiting up
    to `timeout_s` for a moment when all had fetched exactly that far), or None."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with service.lock:  # the image cannot move while it is compared
            at = service.committed_offset
            if at is not None and all(f.fetch_offset == at == f.high_watermark for f in followers):
                if all(f.cache_equals(service.image) for f in followers):
                    return at
        time.sleep(0.02)
    return None


def controlled_shutdown(broker: SimBroker, deadline: float) -> None:
    """Kafka's controlled shutdown over heartbeats (`SimBroker.controlled_shutdown`): wantShutDown until
    the controller says stop, then the broker sends nothing more and stops serving."""
    broker.controlled_shutdown(deadline)


def restart_in_kraft_mode(
    sim: BrokerSimulator,
    broker_id: int,
    sessions: BrokerSessions | None = None,
    timeout_s: float = 60.0,
) -> KraftSimBroker:
    """The runbook's phase 3 for one broker: controlled shutdown of the ZooKeeper-mode broker (its
    /brokers/ids znode goes with its session), then the same broker in KRaft mode: it starts fetching the
    metadata log, registers without the migration flag and heartbeats until the controller unfences it
    (its replayed offset has reached its registration). Returns once it is unfenced."""
    deadline = time.monotonic() + timeout_s
    old = sim.brokers[broker_id]
    if old.epoch >= 0:
        controlled_shutdown(old, deadline)
    if sessions is not None and broker_id in sessions.sessions:
        sessions.stop_broker(broker_id)
    kraft = KraftSimBroker.restarted_from(old)
    kraft.follow()  # as Kafka's BrokerServer, the Raft client runs before the broker registers
    # one assignment: a simulator round sees the stopped broker (not serving) or the new one
    sim.brokers[broker_id] = kraft
    while kraft.epoch < 0 or kraft.fenced_by_controller:
        kraft.ensure_registered()  # checked under its lifecycle lock: the heartbeat round may register it too
        kraft.heartbeat()
        if kraft.epoch >= 0 and not kraft.fenced_by_controller:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"broker {broker_id} in KRaft mode: not unfenced within {timeout_s:g}s "
                f"(epoch {kraft.epoch}, replayed {kraft.metadata_offset()}, {kraft.errors[-1:]}, fetching: "
                f"{kraft.follower.errors[-1:] if kraft.follower else None})"
            )
        time.sleep(0.05)
    return kraft


def as_kraft_brokers(sim: BrokerSimulator, ids: Sequence[int]) -> None:
    """Make ``ids`` of a simulator not yet started KRaft brokers (phase 3 for brokers already rolled):
    each starts its fetch loop now, so that it can catch up and be unfenced after registering."""
    unknown = sorted(set(ids) - set(sim.brokers))
    if unknown:
        raise BadInputError(f"--kraft-brokers {unknown}: not among the simulated brokers")
    for b in ids:
        kraft = KraftSimBroker.restarted_from(sim.brokers[b])
        kraft.follow()
        sim.brokers[b] = kraft


def report_kraft_brokers(sim: BrokerSimulator, ids: Sequence[int], stop: threading.Event) -> None:
    """Print one line per KRaft broker once the controller has unfenced it: what its cache holds."""
    waiting = set(ids)
    while waiting and not stop.wait(0.1):
        for b in sorted(waiting):
            kraft = sim.brokers[b]
            if kraft.epoch < 0 or kraft.fenced_by_controller or not isinstance(kraft, KraftSimBroker):
                continue
            f = kraft.follower
            assert f is not None
            image = f.cache()
            print(
                f"broker {b} (KRaft): unfenced at broker epoch {kraft.epoch}; its metadata cache, fetched "
                f"over Raft, is at offset {f.applied_offset}: {len(image.topics)} topics, "
                f"{image.partition_count()} partitions, {len(image.brokers)} brokers",
                flush=True,
            )
            waiting.discard(b)
