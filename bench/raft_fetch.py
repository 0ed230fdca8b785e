"""Raft Fetch benchmark: observers catching up on `__cluster_metadata` from the controller, and a new
record reaching every long-polling observer.

The controller's listener (with its Raft leader) runs in a child process over a log of --records
ConfigRecords; the observers are threads of this process, each on its own connection, encoding Fetch
v17 with kio and walking the returned batch headers (no record decoding: a broker's decode cost is its
own). Side by side in the same run:

  direct read     MetadataLog.batches() of the same directory in this process, raw batch bytes (what
                  the leader reads for a fetch, without the network): the baseline.
  1 observer      one observer fetching from offset 0 to the end.
  N observers     --observers observers at once, aggregate records/s.
  long poll       every observer parked at the end; the controller appends one record; the time from
                  before the append (fsync included) to each observer's response, over --rounds rounds.

Each measurement runs twice, side by side: the leader reading with Kafka's offset index
(`migrator.kraft.offset_index`, what the controller uses) and with the old scan of the fetch offset's
segment from its first batch (``LogView(indexed=False)``, the baseline).

First, the long poll by log size: the same long-poll rounds against a leader of --records records and
one of a tenth of that, alternating round by round (what grows with the log shows as the ratio).

First of all, one Kafka-shaped observer (the Fetch exactly as Kafka 3.9's KafkaRaftClient sends it: MaxBytes
8 MiB, PartitionMaxBytes 0) catching up a --kafka-observer-records log from offset 0: Fetch answers,
records per answer and catch-up time, beside an observer that sets PartitionMaxBytes to 8 MiB, and
beside Kafka 3.9's own leader in the same rounds; --decompose splits each catch-up into the request, the
leader's time to the answer's first byte, the transfer and the observer's decode.

Usage: .venv/bin/python bench/raft_fetch.py [--records N] [--observers K] [--rounds R] [--long-poll-only]
       [--kafka-observer-records N] [--kafka-observer-only] [--decompose] [--observer-rcvbuf BYTES]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import os
import selectors
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kio.schema.fetch.v17 import request as FR  # noqa: E402
from kio.schema.fetch.v17 import response as FP  # noqa: E402
from kio.schema.fetch_snapshot.v1 import request as SR  # noqa: E402
from kio.schema.fetch_snapshot.v1 import response as SP  # noqa: E402
from kio.schema.request_header.v2.header import RequestHeader  # noqa: E402
from kio.schema.response_header.v1.header import ResponseHeader  # noqa: E402
from kio.serial import entity_reader, entity_writer  # noqa: E402

from migrator.kraft.log import MetadataLog  # noqa: E402
from migrator.kraft.records import record  # noqa: E402
from migrator.kraft.retention import RetentionConfig  # noqa: E402

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
NODE = 3000
NO_SNAPSHOTS = RetentionConfig(1 << 50, -1, -1, -1)
_WRITE_HEADER = entity_writer(RequestHeader)
_WRITE_FETCH = entity_writer(FR.FetchRequest)
_READ_HEADER = entity_reader(ResponseHeader)
_READ_FETCH = entity_reader(FP.FetchResponse)
_WRITE_SNAP = entity_writer(SR.FetchSnapshotRequest)
_READ_SNAP = entity_reader(SP.FetchSnapshotResponse)


def build_log(path: str, n: int, snapshot_at: int = 0) -> None:
    """n ConfigRecords (distinct keys); with ``snapshot_at``, a snapshot there and the log start moved to it
    (the segments below deleted), so that a fetcher from offset 0 must load the snapshot first."""
    log = MetadataLog.open(path, writable=True, cluster_id=CLUSTER, node_id=NODE, retention=NO_SNAPSHOTS)
    chunk = 20_000
    for start in range(0, n, chunk):
        if snapshot_at and start == snapshot_at:
            from migrator.kraft.retention import snapshot_now

            end = snapshot_now(log)
            assert end is not None
            log.roll()
            log.advance_start(end)
        recs = [
            record(
                "ConfigRecord", 0, ResourceType=2, ResourceName=f"t{i // 100}", Name=f"k{i}", Value="v" * 16
            )
            for i in range(start, min(n, start + chunk))
        ]
        log.append(recs, 1)
    log.close()


def serve(path: str, indexed: bool) -> None:
    """The child: a controller listener (Raft leader) over the log; appends one record per stdin line."""
    from migrator.controller.network.listener_config import connection_limits, default_properties
    from migrator.controller.network.server import ControllerServer
    from migrator.controller.raft.raft_leader import RAFT_VERSIONS, RaftLeader

    log = MetadataLog.open(path, writable=True, cluster_id=CLUSTER, node_id=NODE, retention=NO_SNAPSHOTS)

    class Handler:
        def __init__(self) -> None:
            self.log = log
            self.epoch = 1

        def supported_apis(self) -> dict[int, tuple[int, int]]:
            return {18: (0, 3)}

        def handle(self, *a: object) -> None:
            raise RuntimeError("Raft only")

    server = ControllerServer(Handler(), "127.0.0.1", 0, **connection_limits(default_properties()))
    server.attach_raft(RaftLeader(log, NODE, CLUSTER, lambda: 1, indexed=indexed), RAFT_VERSIONS)
    server.start()
    print(server.address[1], flush=True)
    i = 0
    for _line in sys.stdin:
        t0 = time.monotonic()
        log.append([record("ConfigRecord", 0, ResourceType=2, ResourceName="x", Name=f"n{i}", Value="v")], 1)
        i += 1
        print(f"{t0:.9f} {time.monotonic():.9f}", flush=True)  # before the append, after its fsync
    server.close()
    log.close()


def fetch_request(
    cid: int,
    offset: int,
    epoch: int,
    max_wait_ms: int,
    replica: int,
    leader_epoch: int = 1,
    partition_max_bytes: int = 8 << 20,
    min_bytes: int = 1,
) -> bytes:
    part = FR.FetchPartition(
        partition=0,
        current_leader_epoch=leader_epoch,
        fetch_offset=offset,
        last_fetched_epoch=epoch,
        log_start_offset=-1,
        partition_max_bytes=partition_max_bytes,
    )
    req = FR.FetchRequest(
        replica_state=FR.ReplicaState(replica_id=replica, replica_epoch=-1),
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=8 << 20,
        topics=(FR.FetchTopic(topic_id=uuid.UUID(int=1), partitions=(part,)),),
        forgotten_topics_data=(),
    )
    buf = io.BytesIO()
    _WRITE_HEADER(
        buf, RequestHeader(request_api_key=1, request_api_version=17, correlation_id=cid, client_id="bench")
    )
    _WRITE_FETCH(buf, req)
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


def _recv(sock: socket.socket, n: int) -> memoryview:
    """n bytes, read straight into one buffer of that size, as Kafka's NetworkReceive reads a response
    (a chunk per recv joined afterwards was three copies of each answer, the observer's cost)."""
    out = bytearray(n)
    view = memoryview(out)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if not k:
            raise ConnectionError("closed")
        got += k
    return view.toreadonly()  # (kio decodes read-only buffers)


#: SO_RCVBUF of the Kafka-shaped observers (--observer-rcvbuf); 0: the system's autotuning. Kafka's
#: observer sets `socket.receive.buffer.bytes` (102400 by default) on its Raft connection
#: (KafkaRaftManager.buildNetworkClient passes it to its NetworkClient; the send buffer is left alone).
OBSERVER_RCVBUF = 0


class Observer:
    """A Fetch v17 client. ``kafka_shaped``: the request exactly as Kafka 3.9's KafkaRaftClient builds it
    (buildFetchRequest: MaxBytes 8 MiB, PartitionMaxBytes and MinBytes left at their default 0), on a
    socket with `OBSERVER_RCVBUF`."""

    def __init__(self, port: int, replica: int, host: str = "127.0.0.1", kafka_shaped: bool = False) -> None:
        if kafka_shaped and OBSERVER_RCVBUF > 0:
            self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, OBSERVER_RCVBUF)  # before connect
            self.sock.connect((host, port))
        else:
            self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.replica = replica
        self.offset, self.epoch, self.cid = 0, 0, 0
        self.leader_epoch, self.hw = 1, -1  # learnt from FENCED/UNKNOWN_LEADER_EPOCH answers
        self.loaded = 0  # records loaded from snapshots
        self.partition_max_bytes, self.min_bytes = (0, 0) if kafka_shaped else (8 << 20, 1)
        self.answers: list[tuple[int, int]] = []  # (records, bytes) of each Fetch answer with records
        # per Fetch of `fetch` while ``timed``: (request, leader, transfer, decode) seconds
        self.timed = False
        self.split: list[tuple[float, float, float, float]] = []

    def _round_trip(self, payload: bytes) -> memoryview:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", _recv(self.sock, 4))
        return _recv(self.sock, size)

    def load_snapshot(self, end_offset: int, epoch: int) -> int:
        """FetchSnapshot until the whole file is here; returns its records (walked by batch headers)."""
        data = bytearray()
        size = None
        while size is None or len(data) < size:
            self.cid += 1
            ps = SR.PartitionSnapshot(
                partition=0,
                current_leader_epoch=self.leader_epoch,
                snapshot_id=SR.SnapshotId(end_offset=end_offset, epoch=epoch),
                position=len(data),
                replica_directory_id=uuid.UUID(int=self.replica + 7),
            )
            req = SR.FetchSnapshotRequest(
                cluster_id=None,  # as the Fetch requests: the bench also observes other clusters' controllers
                replica_id=self.replica,
                max_bytes=8 << 20,
                topics=(SR.TopicSnapshot(name="__cluster_metadata", partitions=(ps,)),),
            )
            buf = io.BytesIO()
            _WRITE_HEADER(
                buf,
                RequestHeader(
                    request_api_key=59, request_api_version=1, correlation_id=self.cid, client_id="bench"
                ),
            )
            _WRITE_SNAP(buf, req)
            body = self._round_trip(buf.getvalue())
            _head, pos = _READ_HEADER(body, 0)
            answer = _READ_SNAP(body, pos)[0]
            if answer.error_code or not answer.topics:
                raise RuntimeError(f"FetchSnapshot error {int(answer.error_code)}")
            got = answer.topics[0].partitions[0]
            if got.error_code:
                raise RuntimeError(f"FetchSnapshot error {int(got.error_code)}")
            size = got.size
            data += got.unaligned_records
        records, pos = 0, 0
        while pos + 61 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            (count,) = struct.unpack_from(">i", data, pos + 57)
            (attrs,) = struct.unpack_from(">h", data, pos + 21)
            records += 0 if attrs & 0x20 else count  # control batches (header/footer) are not records
            pos += 12 + length
        self.offset, self.epoch = end_offset, epoch
        return records

    def send_fetch(self, max_wait_ms: int) -> None:
        self.cid += 1
        self.sock.sendall(
            fetch_request(
                self.cid,
                self.offset,
                self.epoch,
                max_wait_ms,
                self.replica,
                self.leader_epoch,
                self.partition_max_bytes,
                self.min_bytes,
            )
        )

    def receive(self) -> memoryview:
        (size,) = struct.unpack(">i", _recv(self.sock, 4))
        return _recv(self.sock, size)

    def fetch(self, max_wait_ms: int = 0) -> int:
        """One fetch; returns the records it advanced over (batches walked by their headers).

        Timed in four parts (`split`): encoding and sending the request; from its last byte sent to the
        response's first byte in (the leader's work, plus loopback's one-way latency); from there to its
        last byte in (the transfer, the observer's receive included); the observer's decode and walk."""
        t_start = time.perf_counter()
        self.send_fetch(max_wait_ms)
        t_sent = time.perf_counter()
        head = self.sock.recv(4)  # returns as soon as the response's first bytes are here
        t_first = time.perf_counter()
        if not head:
            raise ConnectionError("closed")
        head += bytes(_recv(self.sock, 4 - len(head))) if len(head) < 4 else b""
        (size,) = struct.unpack(">i", head)
        body = _recv(self.sock, size)
        t_last = time.perf_counter()
        got = self.apply(body)
        if self.timed:  # (not the long-polling observers of `observe`: their list would only grow)
            t_done = time.perf_counter()
            self.split.append((t_sent - t_start, t_first - t_sent, t_last - t_first, t_done - t_last))
        return got

    def apply(self, body: bytes | bytearray) -> int:
        before = self.offset
        _head, pos = _READ_HEADER(body, 0)
        resp, _ = _READ_FETCH(body, pos)
        part = resp.responses[0].partitions[0]
        if part.error_code in (74, 75):  # FENCED / UNKNOWN_LEADER_EPOCH: the leader names its epoch
            self.leader_epoch = int(part.current_leader.leader_epoch)
            return 0
        if part.error_code:
            raise RuntimeError(f"Fetch error {int(part.error_code)}")
        self.hw = int(part.high_watermark)
        sid = part.snapshot_id
        if sid is not None and sid.end_offset >= 0:  # below the log start: load the snapshot first
            self.loaded += self.load_snapshot(sid.end_offset, sid.epoch)
            return self.offset - before
        records = part.records or b""
        pos = 0
        while pos + 61 <= len(records):
            base, length = struct.unpack_from(">qi", records, pos)
            if pos + 12 + length > len(records):
                break  # a partial batch at the end (Kafka's leader cuts its answer at 8 MiB): fetched again
            (epoch,) = struct.unpack_from(">i", records, pos + 12)
            (last_delta,) = struct.unpack_from(">i", records, pos + 23)
            self.offset, self.epoch = base + last_delta + 1, epoch
            pos += 12 + length
        if self.offset > before:
            self.answers.append((self.offset - before, pos))
        return self.offset - before


def catch_up(observers: list[Observer], end: int) -> float:
    def run(o: Observer) -> None:
        while o.offset < end:
            o.fetch()

    t = time.perf_counter()
    threads = [threading.Thread(target=run, args=(o,)) for o in observers]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.perf_counter() - t


def long_poll_round(
    child: subprocess.Popen[str], many: list[Observer], durable: list[float] | None = None
) -> list[float]:
    """Every observer parks in a long poll at the end; the leader child appends one record; the time
    from before the append (fsync included) to each observer's response, in seconds.

    One selector thread reads all the responses and stamps each when its last byte is in, before any
    decoding: with a thread per observer, this process's own 100 threads queueing for its GIL were
    timed as the leader's latency (brokers are separate machines). Responses are checked afterwards.
    """
    assert child.stdin is not None and child.stdout is not None
    sel = selectors.DefaultSelector()
    bufs: dict[int, bytearray] = {}
    got: list[float] = []
    bodies: list[tuple[Observer, bytes]] = []
    for i, o in enumerate(many):
        o.send_fetch(10_000)
        o.sock.setblocking(False)
        bufs[i] = bytearray()
        sel.register(o.sock, selectors.EVENT_READ, i)

    def receive() -> None:
        left = len(many)
        while left:
            events = sel.select(timeout=30)
            if not events:
                raise TimeoutError("a long poll was not answered within 30 s")
            for key, _mask in events:
                i = key.data
                chunk = many[i].sock.recv(1 << 16)
                if not chunk:
                    raise ConnectionError("the leader closed a connection")
                buf = bufs[i]
                buf += chunk
                if len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                    got.append(time.monotonic())
                    bodies.append((many[i], bytes(buf[4:])))
                    sel.unregister(many[i].sock)
                    left -= 1

    reader = threading.Thread(target=receive)
    reader.start()
    time.sleep(0.3)  # let every observer park in its long poll
    child.stdin.write("append\n")
    child.stdin.flush()
    t0, t1 = map(float, child.stdout.readline().split())
    reader.join()
    sel.close()
    for o in many:
        o.sock.setblocking(True)
    if len(bodies) != len(many):
        raise RuntimeError("not every long poll was answered")
    for o, body in bodies:
        if o.apply(body) != 1:
            raise RuntimeError("a long poll ended without the new record")
    if durable is not None:  # from the durable append (the high watermark moved): the wake-up path alone
        durable += [x - t1 for x in got]
    return [x - t0 for x in got]


def _leader_child(d: str, mode: str = "index") -> tuple[subprocess.Popen[str], int]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", d, "--mode", mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    return child, int(child.stdout.readline())


def long_poll_by_size(
    dirs: dict[str, str], observers: int, rounds: int
) -> dict[str, tuple[list[float], list[float]]]:
    """Long-poll lags against leaders of logs of different sizes, one round on each in turn (so the
    machine's load falls on all alike). Observers start at the log end (a Fetch at the end is the path
    measured; how they got there does not change what the leader does on the next append)."""
    children = {label: _leader_child(d) for label, d in dirs.items()}
    lags: dict[str, list[float]] = {label: [] for label in dirs}
    durable: dict[str, list[float]] = {label: [] for label in dirs}
    try:
        parked: dict[str, list[Observer]] = {}
        for label, d in dirs.items():
            ro = MetadataLog.open(d)
            end, epoch = ro.end_offset, ro.latest_epoch
            ro.close()
            parked[label] = [Observer(children[label][1], 10 + i) for i in range(observers)]
            for o in parked[label]:
                o.offset, o.epoch = end, epoch
        for label in dirs:  # a first append after the open is not what is measured
            long_poll_round(children[label][0], parked[label])
        for _ in range(rounds):
            for label in dirs:
                lags[label] += long_poll_round(children[label][0], parked[label], durable[label])
        for many in parked.values():
            for o in many:
                o.sock.close()
    finally:
        for child, _port in children.values():
            assert child.stdin is not None
            child.stdin.close()
            child.wait(60)
    return {label: (sorted(x), sorted(durable[label])) for label, x in lags.items()}


def measure(
    d: str, end: int, observers: int, rounds: int, indexed: bool
) -> tuple[float, float, list[float], list[float]]:
    """(1-observer records/s, aggregate records/s, long-poll lags in s) against one leader child."""
    mode = "index" if indexed else "scan"
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", d, "--mode", mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    port = int(child.stdout.readline())
    lags: list[float] = []
    durable: list[float] = []
    try:
        one = end / catch_up([Observer(port, 1)], end)
        many = [Observer(port, 10 + i) for i in range(observers)]
        agg = end * len(many) / catch_up(many, end)
        long_poll_round(child, many)  # warm-up: the first append after the open is not what is measured
        for _ in range(rounds):
            lags += long_poll_round(child, many, durable)
        for o in many:
            o.sock.close()
    finally:
        child.stdin.close()
        child.wait(60)
    return one, agg, sorted(lags), sorted(durable)


def through_snapshot(d: str, observers: int) -> tuple[int, int, float]:
    """(snapshot records, log records after it, aggregate records/s) for observers from offset 0."""
    ro = MetadataLog.open(d)
    end, start = ro.end_offset, ro.log_start_offset
    ro.close()
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", d, "--mode", "index"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    port = int(child.stdout.readline())
    try:
        many = [Observer(port, 10 + i) for i in range(observers)]
        elapsed = catch_up(many, end)
        loaded = many[0].loaded
        assert all(o.loaded == loaded and o.offset == end for o in many)
        for o in many:
            o.sock.close()
    finally:
        child.stdin.close()
        child.wait(60)
    return loaded, end - start, (loaded + end - start) * observers / elapsed


@dataclass
class Row:
    """One leader's catch-ups: the answers of the last run, and per run its time and its Fetches'
    (request, leader, transfer, decode) seconds summed (`Observer.split`)."""

    answers: list[tuple[int, int]] = field(default_factory=list)
    fetches: int = 0  # of the last run, those that did not advance too
    times: list[float] = field(default_factory=list)
    splits: list[tuple[float, ...]] = field(default_factory=list)

    def add(self, o: Observer, elapsed: float) -> None:
        self.answers = o.answers
        self.fetches = len(o.split)  # (``timed``: every Fetch of the run)
        self.times.append(elapsed)
        self.splits.append(tuple(sum(x) for x in zip(*o.split, strict=True)))

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    def split_median(self) -> list[float]:
        """The median of each part, and of what the catch-up spent outside the Fetches (its thread)."""
        parts = [statistics.median(x) for x in zip(*self.splits, strict=True)]
        return [*parts, statistics.median(t - sum(x) for t, x in zip(self.times, self.splits, strict=True))]


@contextlib.contextmanager
def kafka_leader(d: str, end: int) -> Iterator[tuple[int, int] | None]:
    """Kafka 3.9's own KRaft controller started on a copy of the directory (its single voter, so its
    leader): yields (port, leader epoch) once it answers a Fetch with records, or None when Kafka's
    jars cannot be had or it never answers."""
    import shutil

    from migrator.kraft import dirfiles
    from zk_fixtures.kafka import KafkaNode, free_ports
    from zk_fixtures.kafka_dist import KafkaFetchError

    with tempfile.TemporaryDirectory() as k:
        data = Path(k) / "data"
        shutil.copytree(d, data)
        meta = dirfiles.read_meta_properties(data / dirfiles.META_PROPERTIES)
        dirfiles.write_meta_properties(
            data / dirfiles.META_PROPERTIES,
            dirfiles.MetaProperties(1, NODE, meta.cluster_id, dirfiles.random_kafka_uuid(), dict(meta.extra)),
        )
        (port,) = free_ports(1)
        node = KafkaNode(
            Path(k) / "node",
            {
                "process.roles": "controller",
                "node.id": NODE,
                "controller.quorum.voters": f"{NODE}@127.0.0.1:{port}",
                "listeners": f"CONTROLLER://127.0.0.1:{port}",
                "controller.listener.names": "CONTROLLER",
                "metadata.log.dir": str(data),
                "log.dirs": str(data),
            },
            heap="768m",
        )
        try:
            node.start(wait_port="CONTROLLER", timeout=120)
        except (KafkaFetchError, OSError) as e:
            print(f"  (Kafka's leader not measured: {e})")
            yield None
            return
        try:
            deadline = time.monotonic() + 120
            while True:  # until Kafka's controller leads its epoch and answers a Fetch with records
                o = Observer(port, 88, kafka_shaped=True)
                try:
                    while o.offset == 0 and time.monotonic() < deadline:
                        try:
                            o.fetch()
                        except RuntimeError:
                            time.sleep(0.2)
                finally:
                    o.sock.close()
                if o.offset > 0 or time.monotonic() > deadline:
                    break
            if o.offset == 0:
                print(f"  (Kafka's leader never answered: {node.last_lines()})")
                yield None
                return
            yield port, o.leader_epoch
        finally:
            node.stop()


def kafka_observer(
    d: str, end: int, with_kafka: bool = True, repeat: int = 41, warm: int = 100
) -> dict[str, Row]:
    """One observer catching up from offset 0, side by side in the same rounds: shaped as Kafka's
    KafkaRaftClient sends it and with PartitionMaxBytes 8 MiB (the other rows' observer) against a
    zk2kraft leader child, and Kafka-shaped against Kafka's own leader on a copy of the directory.

    Each leader first serves ``warm`` catch-ups (the page cache, and Kafka's JIT, are not what is
    measured), then the rows take turns, ``repeat`` rounds."""
    child, port = _leader_child(d)
    targets: dict[str, tuple[int, int, bool]] = {  # label -> (port, leader epoch, Kafka-shaped)
        "Kafka-shaped": (port, 1, True),
        "PartitionMaxBytes 8 MiB": (port, 1, False),
    }
    try:
        with contextlib.ExitStack() as stack:
            if with_kafka:
                kafka = stack.enter_context(kafka_leader(d, end))
                if kafka is not None:
                    targets["Kafka-shaped, Kafka leader"] = (kafka[0], kafka[1], True)
            rows = {label: Row() for label in targets}
            for label, (p, epoch, _shaped) in targets.items():
                if label == "PartitionMaxBytes 8 MiB":
                    continue  # the same leader as the first row
                for _ in range(warm):
                    o = Observer(p, 89, kafka_shaped=True)
                    o.leader_epoch = epoch
                    catch_up([o], end)
                    o.sock.close()
            for _round in range(repeat):  # alternating, the median of each
                for label, (p, epoch, shaped) in targets.items():
                    o = Observer(p, 90 if shaped else 91, kafka_shaped=shaped)
                    o.leader_epoch, o.timed = epoch, True
                    rows[label].add(o, catch_up([o], end))
                    o.sock.close()
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(60)
    return rows


def kafka_observer_report(records: int, with_kafka: bool = True, decompose: bool = False) -> None:
    with tempfile.TemporaryDirectory() as d:
        build_log(d, records)
        ro = MetadataLog.open(d)
        end, nbytes = ro.end_offset, sum(os.path.getsize(s.path) for s in ro.segments)
        ro.close()
        print(f"one observer catching up a {end:,}-record log ({nbytes / 1e6:.1f} MB) from offset 0:")
        print(f"  load average before {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        rows = kafka_observer(d, end, with_kafka)
        print(
            f"  {'':26}{'answers':>8}{'fetches':>8}{'records/answer':>16}{'max':>9}{'MB/answer':>11}"
            f"{'catch-up':>10}"
        )
        for label, row in rows.items():
            answers = row.answers
            n = len(answers)
            per = sum(a for a, _ in answers) / n
            print(
                f"  {label:26}{n:>8}{row.fetches:>8}{per:>16,.0f}{max(a for a, _ in answers):>9,}"
                f"{sum(b for _, b in answers) / n / 1e6:>11.2f}{row.median * 1000:>8.1f}ms"
            )
        kafka = rows.get("Kafka-shaped, Kafka leader")
        if kafka is not None:
            print(
                f"  Kafka's leader / zk2kraft's (Kafka-shaped): {kafka.median / rows['Kafka-shaped'].median:.2f}x"
            )
        if decompose:
            print(
                "  per catch-up, summed over its Fetches, median of the runs. request: encoding and sending"
                " it; leader: from its last byte sent to the response's first byte in; transfer: to the"
                " response's last byte in; decode: the observer's; other: the catch-up's thread, the rest"
            )
            heads = ("request", "leader", "transfer", "decode", "other", "catch-up")
            print(f"  {'':26}" + "".join(f"{h:>10}" for h in heads))
            for label, row in rows.items():
                parts = [*row.split_median(), row.median]
                print(f"  {label:26}" + "".join(f"{x * 1000:>8.2f}ms" for x in parts))
        print(f"  load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def observe(address: str, observers: int, max_wait_ms: int = 500, nice: int = 0) -> None:
    """The child of `attached_observers`: ``observers`` observers catch up on the log at ``address``,
    print ``ready``, then long-poll (fetch, wait for the next append, fetch again) until stdin closes;
    print how many fetches they made."""
    if nice:
        os.nice(nice)
    host, _, port = address.rpartition(":")
    many = [Observer(int(port), 1000 + i, host) for i in range(observers)]
    stop = threading.Event()
    fetches = [0] * observers

    def run(i: int, o: Observer) -> None:
        while o.fetch(0) > 0 or o.hw < 0 or o.offset < o.hw:  # catch up (a snapshot first if told)
            pass
        caught_up.wait()
        while not stop.is_set():
            try:
                o.fetch(max_wait_ms)
            except (OSError, ConnectionError):
                return
            fetches[i] += 1

    caught_up = threading.Barrier(observers + 1)
    threads = [threading.Thread(target=run, args=(i, o), daemon=True) for i, o in enumerate(many)]
    for th in threads:
        th.start()
    caught_up.wait()
    print("ready", flush=True)
    sys.stdin.read()
    stop.set()
    print(sum(fetches), flush=True)
    for o in many:
        o.sock.close()


class attached_observers:  # noqa: N801 - used as a context manager, like open()
    """``observers`` Raft observers of the controller at ``address`` in a child process (their work
    must not share the controller's GIL, as brokers run elsewhere), fetching while the block runs;
    ``fetches`` is how many long polls they made (set on exit). bench/controller.py --observers uses it."""

    def __init__(self, address: tuple[str, int], observers: int, nice: int = 0) -> None:
        self.address, self.observers, self.fetches, self.nice = address, observers, 0, nice
        self.child: subprocess.Popen[str] | None = None

    def __enter__(self) -> attached_observers:
        host, port = self.address
        self.child = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--observe",
                f"{host}:{port}",
                "--observers",
                str(self.observers),
                "--nice",
                str(self.nice),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.child.stdout is not None
        if self.child.stdout.readline().strip() != "ready":
            raise RuntimeError("the observers did not catch up")
        return self

    def __exit__(self, *exc: object) -> None:
        child = self.child
        assert child is not None and child.stdin is not None and child.stdout is not None
        child.stdin.close()
        self.fetches = int(child.stdout.readline() or 0)
        child.wait(60)


def _lag_line(lags: list[float]) -> str:
    return (
        f"p50 {statistics.median(lags) * 1000:7.1f} ms   p99 {_pct(lags, 0.99):7.1f} ms"
        f"   max {lags[-1] * 1000:7.1f} ms"
    )


def _pct(lags: list[float], q: float) -> float:
    return lags[min(len(lags) - 1, int(len(lags) * q))] * 1000


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--observers", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--nice", type=int, default=0, help="with --observe: the observers' niceness")
    ap.add_argument("--long-poll-only", action="store_true", help="only the long poll by log size")
    ap.add_argument("--serve")
    ap.add_argument("--observe", help="HOST:PORT: run observers against a controller (attached_observers)")
    ap.add_argument("--mode", choices=("index", "scan"), default="index")
    ap.add_argument(
        "--kafka-observer-records", type=int, default=200_000, help="the Kafka-shaped observer's log"
    )
    ap.add_argument("--kafka-observer-only", action="store_true", help="only the Kafka-shaped observer")
    ap.add_argument("--no-kafka", action="store_true", help="not beside Kafka 3.9's own leader")
    ap.add_argument(
        "--observer-rcvbuf",
        type=int,
        default=0,
        help="SO_RCVBUF of the Kafka-shaped observers (Kafka's socket.receive.buffer.bytes: 102400); 0: autotuned",
    )
    ap.add_argument(
        "--decompose", action="store_true", help="split each catch-up into leader / transfer / decode time"
    )
    args = ap.parse_args()
    if args.observe:
        observe(args.observe, args.observers, nice=args.nice)
        return 0
    if args.serve:
        serve(args.serve, args.mode == "index")
        return 0
    global OBSERVER_RCVBUF
    OBSERVER_RCVBUF = args.observer_rcvbuf
    kafka_observer_report(args.kafka_observer_records, not args.no_kafka, args.decompose)
    if args.kafka_observer_only:
        return 0
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        build_log(d, args.records)
        print(f"log of {args.records:,} records built in {time.perf_counter() - t:.1f}s")
        small = max(20_000, args.records // 10 // 20_000 * 20_000)
        with tempfile.TemporaryDirectory() as d_small:
            build_log(d_small, small)
            by_size = long_poll_by_size(
                {f"{args.records:,} records": d, f"{small:,} records": d_small}, args.observers, args.rounds
            )
        print(f"long poll by log size, {args.observers} observers x {args.rounds} rounds, alternating:")
        for label, (lags, durable) in by_size.items():
            print(f"  {label:26} {_lag_line(lags)}")
            print(f"  {'  after the fsync':26} {_lag_line(durable)}")
        (big, big_d), (base, base_d) = by_size.values()
        print(
            f"  p99 ratio {args.records:,} / {small:,} records: {_pct(big, 0.99) / _pct(base, 0.99):.2f}x, "
            f"after the fsync {_pct(big_d, 0.99) / _pct(base_d, 0.99):.2f}x"
        )
        if args.long_poll_only:
            return 0
        ro = MetadataLog.open(d)
        end = ro.end_offset
        t = time.perf_counter()
        nbytes = sum(len(b.raw()) for b in ro.batches(0, verify_crc=False))
        direct = end / (time.perf_counter() - t)
        ro.close()
        results = {
            mode: measure(d, end, args.observers, args.rounds, mode == "index") for mode in ("scan", "index")
        }
        k = args.observers
        half = args.records // 2 // 20_000 * 20_000
        with tempfile.TemporaryDirectory() as d2:
            build_log(d2, args.records, snapshot_at=half)
            snap_records, log_records, snap_rate = through_snapshot(d2, k)
        print(f"{'':34}{'records/s':>14}{'vs direct':>11}")
        print(
            f"{'direct read (baseline)':34}{direct:>14,.0f}{1.0:>10.2f}x   ({nbytes / end:.1f} bytes/record)"
        )
        for mode, label in (("scan", "no index (segment scan)"), ("index", "offset index")):
            one, agg, _, _ = results[mode]
            print(f"{f'1 observer, {label}':34}{one:>14,.0f}{one / direct:>10.2f}x")
            print(f"{f'{k} observers total, {label}':34}{agg:>14,.0f}{agg / direct:>10.2f}x")
        print(
            f"{f'{k} observers, through a snapshot':34}{snap_rate:>14,.0f}{snap_rate / direct:>10.2f}x   "
            f"(each: a snapshot of {snap_records:,} records, then {log_records:,} log records)"
        )
        print(
            f"long poll, {k} observers x {args.rounds} rounds (from before the append's fsync to each response):"
        )
        for mode, label in (("scan", "no index (segment scan)"), ("index", "offset index")):
            print(f"  {label:26} {_lag_line(results[mode][2])}")
            print(f"  {'  after the fsync':26} {_lag_line(results[mode][3])}")
        base, new = results["scan"][2], results["index"][2]
        print(f"  p99 ratio scan / index: {_pct(base, 0.99) / max(_pct(new, 0.99), 1e-3):.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
