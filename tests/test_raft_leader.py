"""The controller's listener as a KRaft quorum leader, seen by an independent fetcher over TCP.

The fetcher encodes requests with kio's generated classes and parses record batches with kafka-python,
never with zk2kraft's wire or batch code, so the bytes are checked against two other implementations.
"""

from __future__ import annotations

import datetime
import importlib
import io
import os
import socket
import struct
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.record import MemoryRecords
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.serial import entity_reader, entity_writer

from migrator.controller.network.listener_runtime import start_server
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import record
from migrator.kraft.retention import RetentionConfig, snapshot_now

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
NODE = 3000
TOPIC_ID = uuid.UUID(int=1)
NO_RETENTION = RetentionConfig(1 << 40, -1, -1, -1)


def configs(i: int, n: int = 20) -> list:
    return [
        record("ConfigRecord", 0, ResourceType=4, ResourceName="", Name=f"k{i}.{j}", Value="v" * 40)
        for j in range(n)
    ]


class Handler:
    """What the listener serves besides Raft: nothing (the Raft APIs come from the log it holds)."""

    def __init__(self, log: MetadataLog, epoch: int) -> None:
        self.log = log
        self.epoch = epoch

    def supported_apis(self) -> dict[int, tuple[int, int]]:
        return {18: (0, 3)}

    def handle(self, api_key: int, api_version: int, request: Any, client_id: str | None) -> Any:
        raise AssertionError("only ApiVersions and Raft requests are sent here")


class Fetcher:
    """A Raft observer's client side, built on kio only."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=30)
        self.cid = 0

    def close(self) -> None:
        self.sock.close()

    def call(self, api: str, version: int, **body: Any) -> Any:
        req_mod = importlib.import_module(f"kio.schema.{api}.v{version}.request")
        resp_mod = importlib.import_module(f"kio.schema.{api}.v{version}.response")
        name = "".join(w.capitalize() for w in api.split("_"))
        req_cls = getattr(req_mod, name + "Request")
        resp_cls = getattr(resp_mod, name + "Response")
        self.cid += 1
        buf = io.BytesIO()
        entity_writer(RequestHeader)(
            buf,
            RequestHeader(
                request_api_key=req_cls.__api_key__,
                request_api_version=version,
                correlation_id=self.cid,
                client_id="test-observer",
            ),
        )
        entity_writer(req_cls)(buf, req_cls(**body))
        payload = buf.getvalue()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._recv(4))
        data = self._recv(size)
        header, pos = entity_reader(ResponseHeader)(data, 0)
        assert header.correlation_id == self.cid
        resp, _ = entity_reader(resp_cls)(data, pos)
        return resp

    def _recv(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise EOFError("the controller closed the connection")
            out += chunk
        return out

    def fetch(
        self,
        offset: int,
        last_epoch: int,
        leader_epoch: int,
        *,
        version: int = 17,
        max_wait_ms: int = 0,
        max_bytes: int = 1 << 20,
        partition_max_bytes: int | None = None,
        topic_id: uuid.UUID = TOPIC_ID,
        partition: int = 0,
        replica_id: int = 7,
    ) -> Any:
        m = importlib.import_module(f"kio.schema.fetch.v{version}.request")
        part: dict[str, Any] = dict(
            partition=partition,
            current_leader_epoch=leader_epoch,
            fetch_offset=offset,
            last_fetched_epoch=last_epoch,
            log_start_offset=-1,
            partition_max_bytes=max_bytes if partition_max_bytes is None else partition_max_bytes,
        )
        if version >= 17:
            part["replica_directory_id"] = uuid.UUID(int=77)
        body: dict[str, Any] = dict(
            cluster_id=CLUSTER,
            max_wait=datetime.timedelta(milliseconds=max_wait_ms),
            min_bytes=0,
            max_bytes=max_bytes,
            topics=(m.FetchTopic(topic_id=topic_id, partitions=(m.FetchPartition(**part),)),),
            forgotten_topics_data=(),
        )
        if version >= 15:
            body["replica_state"] = m.ReplicaState(replica_id=replica_id, replica_epoch=-1)
        else:
            body["replica_id"] = replica_id
        resp = self.call("fetch", version, **body)
        if not resp.responses:
            return resp, None
        return resp, resp.responses[0].partitions[0]


def offsets_in(records: bytes | None) -> Iterator[tuple[int, int]]:
    """(offset, leader epoch) of every record, parsed by kafka-python."""
    mem = MemoryRecords(records or b"")
    while mem.has_next():
        batch = mem.next_batch()
        for rec in batch:
            yield rec.offset, batch.leader_epoch  # type: ignore[attr-defined]


@pytest.fixture
def leader(tmp_path):
    log = MetadataLog.open(
        tmp_path,
        writable=True,
        cluster_id=CLUSTER,
        node_id=NODE,
        segment_bytes=16 << 10,
        retention=NO_RETENTION,
    )
    for i in range(5):
        log.append(configs(i), 1)
    handler = Handler(log, 1)
    server = start_server(handler, "127.0.0.1:0")
    try:
        yield log, handler, server.address
    finally:
        server.stop()
        log.close()


def test_fetch_from_offset_zero_reads_the_whole_log_in_order(leader) -> None:
    log, _, address = leader
    f = Fetcher(address)
    try:
        seen: list[int] = []
        offset, epoch = 0, 0
        while offset < log.end_offset:
            resp, p = f.fetch(offset, epoch, 1, max_bytes=4096)
            assert resp.error_code == 0 and p.error_code == 0
            assert p.high_watermark == log.end_offset and p.log_start_offset == 0
            assert p.current_leader.leader_id == NODE and p.current_leader.leader_epoch == 1
            got = list(offsets_in(p.records))
            assert got, "a fetch below the high watermark returns at least one batch"
            assert len(p.records) <= 4096 or len(got) <= 20  # MaxBytes, or one whole first batch
            seen += [o for o, _ in got]
            offset, epoch = got[-1][0] + 1, got[-1][1]
        assert seen == list(range(log.end_offset))
        # older fetch versions (a 3.7 broker sends v15/16; v13 is the first with topic ids)
        for v in (13, 15, 16):
            _, p = f.fetch(0, 0, 1, version=v)
            assert p.error_code == 0 and next(offsets_in(p.records))[0] == 0
    finally:
        f.close()


def test_a_kafka_shaped_fetch_is_answered_with_everything_up_to_its_max_bytes(leader) -> None:
    """Kafka's observer (KafkaRaftClient.buildFetchRequest) sends MaxBytes 8 MiB and leaves the
    partition's max bytes at 0: the answer carries every batch up to the high watermark (as Kafka's own
    leader reads 8 MiB per Fetch), not one batch; a positive partition max bytes still bounds it."""
    log, _, address = leader
    assert len(log.segments) == 1
    f = Fetcher(address)
    try:
        _, p = f.fetch(0, 0, 1, max_bytes=8 << 20, partition_max_bytes=0)
        assert p.error_code == 0
        assert [o for o, _ in offsets_in(p.records)] == list(range(log.end_offset))
        _, p = f.fetch(0, 0, 1, max_bytes=8 << 20, partition_max_bytes=2000)
        got = list(offsets_in(p.records))
        assert got and len(got) < log.end_offset and len(p.records) <= 2000
    finally:
        f.close()


def test_below_the_log_start_gets_the_snapshot_id_then_fetch_snapshot(leader) -> None:
    log, _, address = leader
    end = snapshot_now(log)
    assert end == log.end_offset
    log.append(configs(99), 1)
    log.advance_start(end)
    assert log.log_start_offset > 0
    f = Fetcher(address)
    try:
        for offset, epoch in ((0, 0), (5, 1), (end, 0)):
            _, p = f.fetch(offset, epoch, 1)
            assert p.error_code == 0
            assert (p.snapshot_id.end_offset, p.snapshot_id.epoch) == (end, 1)
            assert not p.records
        m = importlib.import_module("kio.schema.fetch_snapshot.v1.request")
        data = b""
        size = None
        while size is None or len(data) < size:
            resp = f.call(
                "fetch_snapshot",
                1,
                cluster_id=CLUSTER,
                replica_id=7,
                max_bytes=1000,
                topics=(
                    m.TopicSnapshot(
                        name="__cluster_metadata",
                        partitions=(
                            m.PartitionSnapshot(
                                partition=0,
                                current_leader_epoch=1,
                                snapshot_id=m.SnapshotId(end_offset=end, epoch=1),
                                position=len(data),
                            ),
                        ),
                    ),
                ),
            )
            ps = resp.topics[0].partitions[0]
            assert ps.error_code == 0 and len(ps.unaligned_records) <= 1000
            size = ps.size
            data += ps.unaligned_records
        on_disk = next(p for p in log.partition_dir.iterdir() if p.name.endswith(".checkpoint")).read_bytes()
        assert data == on_disk
        # and the log after the snapshot is fetched from its end
        _, p = f.fetch(end, 1, 1)
        assert [o for o, _ in offsets_in(p.records)][0] == end
        # a snapshot that is not there, a position past its end
        for sid, pos, code in (((end + 1, 1), 0, 98), ((end, 1), size, 99)):
            resp = f.call(
                "fetch_snapshot",
                1,
                cluster_id=CLUSTER,
                replica_id=7,
                max_bytes=1000,
                topics=(
                    m.TopicSnapshot(
                        name="__cluster_metadata",
                        partitions=(
                            m.PartitionSnapshot(
                                partition=0,
                                current_leader_epoch=1,
                                snapshot_id=m.SnapshotId(end_offset=sid[0], epoch=sid[1]),
                                position=pos,
                            ),
                        ),
                    ),
                ),
            )
            assert resp.topics[0].partitions[0].error_code == code
    finally:
        f.close()


def test_a_diverged_last_fetched_epoch_gets_the_diverging_epoch(leader) -> None:
    log, handler, address = leader
    epoch1_end = log.end_offset
    handler.epoch = 3
    log.append(configs(50), 3)  # epoch 3 starts at epoch1_end (after its LeaderChange)
    f = Fetcher(address)
    try:
        # a follower that wrote in epoch 2 past where epoch 1 ended: truncate to (epoch 1, its end)
        _, p = f.fetch(epoch1_end + 10, 2, 3)
        assert p.error_code == 0 and not p.records
        assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (1, epoch1_end)
        # epoch 1 but past its end
        _, p = f.fetch(epoch1_end + 3, 1, 3)
        assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (1, epoch1_end)
        # consistent: records, no divergence
        _, p = f.fetch(epoch1_end, 1, 3)
        assert p.diverging_epoch.epoch == -1 and [e for _, e in offsets_in(p.records)][0] == 3
    finally:
        f.close()


def test_a_long_poll_sees_the_next_append(leader) -> None:
    log, _, address = leader
    f = Fetcher(address)
    try:
        end = log.end_offset
        started = time.monotonic()
        _, p = f.fetch(end, 1, 1, max_wait_ms=200)  # nothing new: answered empty after MaxWaitMs
        assert not p.records and time.monotonic() - started >= 0.15
        got: dict[str, Any] = {}

        def poll() -> None:
            got["t0"] = time.monotonic()
            got["p"] = f.fetch(end, 1, 1, max_wait_ms=20_000)[1]
            got["t1"] = time.monotonic()

        t = threading.Thread(target=poll)
        t.start()
        time.sleep(0.2)  # let the poll park (the check below does not depend on it)
        appended = time.monotonic()
        log.append(configs(7, 1), 1)
        t.join(timeout=30)
        assert not t.is_alive()
        assert [o for o, _ in offsets_in(got["p"].records)] == [end]
        assert got["p"].high_watermark == end + 1
        assert got["t1"] - appended < 5.0  # woken by the append, far before the 20 s MaxWaitMs
    finally:
        f.close()


def test_bad_fetches_get_kafkas_error_codes(leader) -> None:
    _, _, address = leader
    f = Fetcher(address)
    try:
        resp, p = f.fetch(0, 0, 1, topic_id=uuid.uuid4())
        assert resp.error_code == 42 and p is None  # INVALID_REQUEST: no multi-raft
        resp, p = f.fetch(0, 0, 1, partition=1)
        assert resp.error_code == 42
        resp, p = f.fetch(-1, 0, 1)
        assert p.error_code == 42
        resp, p = f.fetch(5, -1, 1)
        assert p.error_code == 42
        resp, p = f.fetch(0, 0, 0)
        assert p.error_code == 74  # FENCED_LEADER_EPOCH
        resp, p = f.fetch(0, 2, 2)
        assert p.error_code == 75  # UNKNOWN_LEADER_EPOCH: an epoch from the future
        resp, p = f.fetch(0, 0, 1, replica_id=NODE)
        assert p.error_code == -1  # the leader's own id from a remote fetcher: Kafka's IllegalStateException
        # the listener stays up for the next well-formed fetch
        _, p = f.fetch(0, 0, 1)
        assert p.error_code == 0
    finally:
        f.close()


def test_describe_quorum_lists_the_voter_and_observers_and_votes_are_refused(leader) -> None:
    log, _, address = leader
    f = Fetcher(address)
    try:
        f.fetch(log.end_offset, 1, 1)
        m = importlib.import_module("kio.schema.describe_quorum.v2.request")
        for v in (0, 1, 2):
            m = importlib.import_module(f"kio.schema.describe_quorum.v{v}.request")
            resp = f.call(
                "describe_quorum",
                v,
                topics=(
                    m.TopicData(
                        topic_name="__cluster_metadata", partitions=(m.PartitionData(partition_index=0),)
                    ),
                ),
            )
            p = resp.topics[0].partitions[0]
            assert p.error_code == 0 and p.leader_id == NODE and p.leader_epoch == 1
            assert p.high_watermark == log.end_offset
            assert [r.replica_id for r in p.current_voters] == [NODE]
            assert [(r.replica_id, r.log_end_offset) for r in p.observers] == [(7, log.end_offset)]
        assert resp.nodes[0].node_id == NODE and resp.nodes[0].listeners[0].port == address[1]
        m = importlib.import_module("kio.schema.vote.v1.request")
        resp = f.call(
            "vote",
            1,
            cluster_id=CLUSTER,
            voter_id=NODE,
            topics=(
                m.TopicData(
                    topic_name="__cluster_metadata",
                    partitions=(
                        m.PartitionData(
                            partition_index=0,
                            replica_epoch=0,
                            replica_id=9,
                            replica_directory_id=None,
                            voter_directory_id=None,
                            last_offset_epoch=0,
                            last_offset=0,
                        ),
                    ),
                ),
            ),
        )
        p = resp.topics[0].partitions[0]
        assert p.error_code == 74 and not p.vote_granted and p.leader_id == NODE
    finally:
        f.close()


def test_a_vote_or_epoch_claim_from_a_non_voter_is_kafkas_inconsistent_voter_set(leader) -> None:
    """The only voter is this node: a candidate or a claimed leader at the current or a later epoch is
    not in its voter set. The expected code is kio's (Kafka's Errors.INCONSISTENT_VOTER_SET = 94)."""
    _, _, address = leader
    f = Fetcher(address)
    try:
        vote = importlib.import_module("kio.schema.vote.v0.request")
        resp = f.call(
            "vote",
            0,
            cluster_id=CLUSTER,
            topics=(
                vote.TopicData(
                    topic_name="__cluster_metadata",
                    partitions=(
                        vote.PartitionData(
                            partition_index=0,
                            replica_epoch=2,
                            replica_id=9,
                            last_offset_epoch=1,
                            last_offset=0,
                        ),
                    ),
                ),
            ),
        )
        p = resp.topics[0].partitions[0]
        assert (p.error_code, p.vote_granted) == (ErrorCode.inconsistent_voter_set, False)
        for api in ("begin_quorum_epoch", "end_quorum_epoch"):
            m = importlib.import_module(f"kio.schema.{api}.v0.request")
            part = m.PartitionData(partition_index=0, leader_id=9, leader_epoch=2)
            resp = f.call(
                api,
                0,
                cluster_id=CLUSTER,
                topics=(m.TopicData(topic_name="__cluster_metadata", partitions=(part,)),),
            )
            assert resp.topics[0].partitions[0].error_code == ErrorCode.inconsistent_voter_set, api
    finally:
        f.close()


def test_the_snapshot_policy_keeps_working_under_the_leader(tmp_path) -> None:
    """Retention snapshots and deletes while observers fetch; purge_aborted still finds the policy."""
    from migrator.kraft.retention import SnapshotPolicy

    config = RetentionConfig(4096, -1, 1, -1)  # a snapshot every 4 KiB, keep only the newest
    log = MetadataLog.open(
        tmp_path, writable=True, cluster_id=CLUSTER, node_id=NODE, segment_bytes=4096, retention=config
    )
    handler = Handler(log, 1)
    server = start_server(handler, "127.0.0.1:0")
    f = Fetcher(server.address)
    try:
        assert isinstance(getattr(log.after_append, "__self__", None), SnapshotPolicy)
        offset, epoch = 0, 0
        for i in range(30):
            log.append(configs(i), 1)
            _, p = f.fetch(offset, epoch, 1)
            assert p.error_code == 0
            if p.snapshot_id.end_offset >= 0:
                offset, epoch = p.snapshot_id.end_offset, p.snapshot_id.epoch
                continue
            got = list(offsets_in(p.records))
            if got:
                offset, epoch = got[-1][0] + 1, got[-1][1]
        assert log.log_start_offset > 0, "retention moved the log start"
        assert p.high_watermark == log.end_offset
    finally:
        f.close()
        server.stop()
        log.close()


def test_a_fetcher_of_another_cluster_is_refused_and_named(tmp_path, monkeypatch) -> None:
    """A real ZooKeeper broker of another cluster pointed at zk2kraft never gets as far as
    BrokerRegistration: its Raft client's Fetch is answered INCONSISTENT_CLUSTER_ID (as Kafka's raft
    answers it), so that refusal is what `zk2kraft status` names (tests/test_real_kafka_migration.py)."""
    from migrator.controller.refused_brokers import RefusedBrokers, read_refused

    log = MetadataLog.open(tmp_path, writable=True, cluster_id=CLUSTER, node_id=NODE, retention=NO_RETENTION)
    log.append(configs(0), 1)
    handler = Handler(log, 1)
    handler.refused = RefusedBrokers(tmp_path)  # type: ignore[attr-defined] - as the service carries it
    server = start_server(handler, "127.0.0.1:0")
    try:
        monkeypatch.setattr(sys.modules[__name__], "CLUSTER", "AAAAAAAAAAAAAAAAAAAAAQ")
        f = Fetcher(server.address)
        try:
            for _ in range(3):  # retried as Kafka's raft client does: named once
                resp, p = f.fetch(0, 0, 1, replica_id=4)
                assert int(resp.error_code) == 104 and p is None  # INCONSISTENT_CLUSTER_ID
        finally:
            f.close()
    finally:
        server.stop()
        log.close()
    (row,) = read_refused(tmp_path, os.getpid())
    assert row["broker_id"] == 4 and row["error"] == "INCONSISTENT_CLUSTER_ID"
    assert "AAAAAAAAAAAAAAAAAAAAAQ" in row["message"]
