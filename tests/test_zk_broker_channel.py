"""One controller-to-ZK-broker channel over TCP, against simulated brokers that behave and that do not.

A well-behaved peer is zk_fixtures.zk_broker_server (a ZK broker's metadata cache); a bad one answers
garbage, closes mid-response or never answers. The channel must keep order, batch, stop on
STALE_CONTROLLER_EPOCH, and on every failure retry with back-off and resend the full state, while a
channel to a healthy broker is served meanwhile.
"""

from __future__ import annotations

import dataclasses
import socket
import struct
import threading
import uuid
from collections.abc import Callable, Iterator

import pytest
from kio.serial import entity_reader
from kio.static.primitive import i8

from migrator.controller.protocol.fast_writer import encode_fast
from migrator.controller.zk_brokers import zk_broker_messages as Z
from migrator.controller.zk_brokers.zk_broker_channel import BrokerChannel, ZkBrokerTarget, wait_until
from migrator.controller.zk_brokers.zk_broker_requests import (
    LEADER_DURING_DELETE,
    BrokerInfo,
    Header,
    Item,
    PartitionState,
)
from zk_fixtures.zk_broker_server import (
    CachedPartition,
    ZkBrokerCache,
    ZkBrokerServer,
    full_from_kraft,
    request_type,
)

TID = uuid.uuid4()
LIVE = (BrokerInfo(1, (("PLAINTEXT", "127.0.0.1", 1, "PLAINTEXT"),)), BrokerInfo(2, ()))


def state(p: int, leader: int = 1, epoch: int = 1, isr: tuple[int, ...] = (1, 2)) -> PartitionState:
    return PartitionState("t", p, TID, leader, epoch, isr, epoch, (1, 2))


class Flaky(ZkBrokerServer):
    """A broker whose answers can be garbage, cut short, or never come; `mode = "good"` heals it."""

    mode = "good"
    release = threading.Event()

    def _serve(self, conn: socket.socket) -> None:
        self._conns.add(conn)
        try:
            while True:
                head = conn.recv(4)
                if len(head) < 4:
                    return
                (size,) = struct.unpack(">i", head)
                frame = b""
                while len(frame) < size:
                    chunk = conn.recv(size - len(frame))
                    if not chunk:
                        return
                    frame += chunk
                if self.mode == "garbage":
                    conn.sendall(struct.pack(">i", 9) + b"\xff" * 9)
                elif self.mode == "close":
                    conn.sendall(self._answer(frame)[:7])
                    return
                elif self.mode == "silent":
                    self.release.wait(30)
                    return
                else:
                    conn.sendall(self._answer(frame))
        except OSError:
            return
        finally:
            self._conns.discard(conn)


class Controller:
    """What the propagator gives a channel: its header, and the full state on (re)connect."""

    def __init__(self) -> None:
        self.parts = {("t", p): state(p) for p in range(3)}
        self.offset = 10
        self.fulls = 0

    def header(self, target: ZkBrokerTarget) -> Header:
        return Header(3000, 5, target.broker_epoch)

    def full_state(self, broker_id: int, install: Callable[[list[Item], int], None]) -> None:
        self.fulls += 1
        install(
            [
                Item(Z.UPDATE_METADATA, partitions=dict(self.parts), live_brokers=LIVE, full=True),
                Item(Z.LEADER_AND_ISR, partitions=dict(self.parts), full=True),
            ],
            self.offset,
        )


@pytest.fixture
def broker() -> Iterator[tuple[ZkBrokerCache, Flaky]]:
    cache = ZkBrokerCache(1, lambda: 7)
    server = Flaky(cache).start()
    server.mode = "good"
    server.release = threading.Event()
    yield cache, server
    server.release.set()
    server.stop()


def channel(server: ZkBrokerServer, ctl: Controller, version: dict[int, int] | None = None) -> BrokerChannel:
    versions = version or {Z.LEADER_AND_ISR: 7, Z.UPDATE_METADATA: 8, Z.STOP_REPLICA: 4}
    target = ZkBrokerTarget(1, 7, server.address[0], server.address[1], versions)
    return BrokerChannel(target, ctl.header, ctl.full_state, request_timeout=0.5, backoff_ms=20).start()


def cached(cache: ZkBrokerCache) -> dict[tuple[str, int], CachedPartition]:
    with cache.lock:
        return dict(cache.partitions)


def expected(parts: dict[tuple[str, int], PartitionState]) -> dict[tuple[str, int], CachedPartition]:
    return {
        k: CachedPartition(s.leader, s.leader_epoch, s.isr, s.partition_epoch, s.replicas)
        for k, s in parts.items()
    }


@pytest.mark.parametrize("versions", [{4: 7, 6: 8, 5: 4}, {4: 2, 6: 5, 5: 1}, {4: 0, 6: 0, 5: 0}])
def test_full_state_then_changes_in_order(broker, versions):
    cache, server = broker
    ctl = Controller()
    ch = channel(server, ctl, versions)
    try:
        assert wait_until(lambda: cached(cache) == expected(ctl.parts) and ch.idle(), 10), ch.status
        assert cache.controller_epoch == 5 and cache.roles[("t", 0)] == (True, 1, 1)
        # A leader change, then the topic's deletion and re-creation: order between types holds.
        ctl.parts[("t", 0)] = state(0, leader=2, epoch=2)
        ch.enqueue([Item(Z.LEADER_AND_ISR, partitions={("t", 0): ctl.parts[("t", 0)]})], 11)
        gone = {k: PartitionState("t", k[1], TID, LEADER_DURING_DELETE, 0, (), 0, (1, 2)) for k in ctl.parts}
        ch.enqueue([Item(Z.UPDATE_METADATA, partitions=gone, live_brokers=LIVE)], 12)
        ch.enqueue([Item(Z.STOP_REPLICA, stop={k: (-2, True) for k in ctl.parts})], 12)
        ctl.parts = {("t", 0): state(0, epoch=0)}
        ch.enqueue([Item(Z.LEADER_AND_ISR, partitions=dict(ctl.parts), is_new=frozenset(ctl.parts))], 13)
        ch.enqueue([Item(Z.UPDATE_METADATA, partitions=dict(ctl.parts), live_brokers=LIVE)], 13)
        assert wait_until(lambda: ch.status.acked_offset == 13 and ch.idle(), 10), ch.status
        assert cached(cache) == expected(ctl.parts)
        assert cache.roles == {("t", 0): (True, 0, 0)}  # the new topic's replica, after the old one's stop
        assert ch.status.errors == 0 and ctl.fulls == 1
    finally:
        ch.stop()


def test_stale_controller_epoch_stops_the_channel(broker):
    cache, server = broker
    cache.controller_epoch = 6  # a newer controller already spoke to this broker
    ctl = Controller()
    ch = channel(server, ctl)
    try:
        assert wait_until(lambda: ch.status.stopped is not None, 10), ch.status
        assert "STALE_CONTROLLER_EPOCH" in (ch.status.last_error or "")
        ch.enqueue([Item(Z.UPDATE_METADATA, partitions=dict(ctl.parts), live_brokers=LIVE)], 11)
        assert ch.status.queued == 0 and not cached(cache)
        assert cache.refused == {"UpdateMetadata": 1}  # one request, then silence
    finally:
        ch.stop()


def test_a_lower_leader_epoch_is_refused_per_partition(broker):
    cache, server = broker
    ctl = Controller()
    ch = channel(server, ctl)
    try:
        assert wait_until(lambda: ch.idle() and ch.status.acked_offset == 10, 10), ch.status
        ch.enqueue([Item(Z.LEADER_AND_ISR, partitions={("t", 1): state(1, leader=2, epoch=0)})], 11)
        assert wait_until(lambda: ch.status.partition_errors == 1, 10), ch.status
        assert cache.roles[("t", 1)] == (True, 1, 1)  # leader epochs only move forward
    finally:
        ch.stop()


@pytest.mark.parametrize("mode", ["garbage", "close", "silent"])
def test_a_bad_broker_is_retried_and_reported_while_others_are_served(broker, mode):
    cache, server = broker
    good_cache = ZkBrokerCache(2, lambda: 7)
    good = ZkBrokerServer(good_cache).start()
    server.mode = mode
    ctl = Controller()
    bad_ch = channel(server, ctl)
    good_ch = channel(good, ctl)
    try:
        assert wait_until(lambda: bad_ch.status.errors >= 2, 15), bad_ch.status  # retried
        assert bad_ch.status.last_error and bad_ch.status.stopped is None
        assert wait_until(lambda: cached(good_cache) == expected(ctl.parts), 10), good_ch.status
        # The broker heals: the next attempt resends the whole state, changes made meanwhile included.
        ctl.parts[("t", 2)] = state(2, leader=2, epoch=4)
        good_ch.enqueue(
            [Item(Z.UPDATE_METADATA, partitions={("t", 2): ctl.parts[("t", 2)]}, live_brokers=LIVE)], 11
        )
        server.mode = "good"
        server.release.set()
        assert wait_until(lambda: cached(cache) == expected(ctl.parts), 15), bad_ch.status
        assert wait_until(lambda: cached(good_cache) == expected(ctl.parts), 10), good_ch.status
        assert good_ch.status.errors == 0
    finally:
        bad_ch.stop()
        good_ch.stop()
        good.stop()


@pytest.mark.parametrize("version", range(9))
def test_a_shared_update_metadata_is_encoded_once_with_each_brokers_epoch(version):
    from migrator.controller.zk_brokers.zk_broker_requests import encode_body

    item = Item(
        Z.UPDATE_METADATA, partitions={("t", p): state(p) for p in range(3)}, live_brokers=LIVE, shared=True
    )
    for epoch in (7, -1, 2**40 + 3):
        h = Header(3000, 5, epoch)
        alone = Item(Z.UPDATE_METADATA, partitions=item.partitions, live_brokers=LIVE)
        assert encode_body(item, version, h, shared=True) == encode_body(alone, version, h)


@pytest.mark.parametrize("api_key", [Z.LEADER_AND_ISR, Z.STOP_REPLICA, Z.UPDATE_METADATA])
def test_request_frames_are_kio_headers_and_the_body(api_key):
    """The frame's header is encoded once per (apiKey, version, client id) and the correlation id
    patched in: the bytes stay what kio's writer makes of the whole header, in every version."""
    from migrator.controller.zk_brokers.zk_broker_requests import encode_entity, encode_request_frame

    lo, hi, _ = Z.VERSIONS[api_key]
    for version in range(lo, hi + 1):
        hcls = Z.request_header_class(api_key, version)
        for cid, client in ((1, "zk2kraft-controller-3000"), (2**31 - 1, "c"), (7, "é")):
            header = hcls(
                request_api_key=api_key, request_api_version=version, correlation_id=cid, client_id=client
            )
            payload = encode_entity(hcls, header) + b"body"
            want = struct.pack(">i", len(payload)) + payload
            assert encode_request_frame(api_key, version, cid, client, b"body") == want


def test_channels_behind_by_the_same_shared_items_share_one_merge():
    """Each broker's channel merges what queued while its request was in flight; shared items merged
    alike are merged once (so encoded once), and the merge is what merging them apart would give."""
    from migrator.controller.zk_brokers.zk_broker_requests import merge

    a = Item(Z.UPDATE_METADATA, partitions={("t", 0): state(0)}, live_brokers=LIVE, shared=True)
    b = Item(Z.UPDATE_METADATA, partitions={("t", 0): state(0, epoch=2), ("t", 1): state(1)}, shared=True)
    once = merge([a, b])
    assert merge([a, b]) is once and once.shared
    assert merge([b, a]) is not once
    plain = merge([dataclasses.replace(a, shared=False), dataclasses.replace(b, shared=False)])
    assert not plain.shared
    assert (once.partitions, once.live_brokers) == (plain.partitions, plain.live_brokers)
    assert once.partitions[("t", 0)].leader_epoch == 2


def test_a_channel_behind_sends_leadership_first_then_metadata_never_across_a_stop_replica(broker):
    """Rounds queued while a request is in flight go as if they were one round: every LeaderAndIsr
    up to the next StopReplica, then the UpdateMetadatas (pipelined after it); the StopReplica keeps
    its place."""
    _, server = broker
    ctl = Controller()
    ch = channel(server, ctl)
    ch.stop()  # its thread gone: the queue is read below, as the thread would
    ch._needs_full = False
    lai = [
        Item(Z.LEADER_AND_ISR, partitions={("t", p): state(p, epoch=e)}) for e, p in ((2, 0), (3, 1), (4, 0))
    ]
    um = [
        Item(Z.UPDATE_METADATA, partitions={("t", p): state(p, epoch=e)}, shared=True)
        for e, p in ((2, 0), (3, 1))
    ]
    sr = Item(Z.STOP_REPLICA, stop={("t", 2): (-2, True)})
    ch.enqueue([lai[0], um[0]], 11)
    ch.enqueue([lai[1], um[1]], 12)
    ch.enqueue([sr], 13)
    ch.enqueue([lai[2]], 14)
    ch._stop.clear()
    got = []
    while ch._queue:
        got.append(
            [
                (
                    item.api_key,
                    sorted((k, s.leader_epoch) for k, s in item.partitions.items()),
                    oldest,
                    offset,
                )
                for item, oldest, offset in ch._next_batches()
            ]
        )
    assert got == [
        [  # written together, answered in order
            (Z.LEADER_AND_ISR, [(("t", 0), 2), (("t", 1), 3)], 11, 12),
            (Z.UPDATE_METADATA, [(("t", 0), 2), (("t", 1), 3)], 11, 12),
        ],
        [(Z.STOP_REPLICA, [], 13, 13)],
        [(Z.LEADER_AND_ISR, [(("t", 0), 4)], 14, 14)],
    ]


class TypeRecordingCache(ZkBrokerCache):
    """A broker's cache that notes how it read each request's Type (Kafka's AbstractControlRequest.Type)."""

    def __init__(self) -> None:
        super().__init__(1, lambda: 7)
        self.types: list[tuple[str, str]] = []

    def update_metadata(self, version: int, req: object) -> object:
        self.types.append(("UpdateMetadata", request_type(req)))
        return super().update_metadata(version, req)

    def leader_and_isr(self, version: int, req: object) -> object:
        self.types.append(("LeaderAndIsr", request_type(req)))
        return super().leader_and_isr(version, req)


def test_a_full_resend_after_a_reconnect_removes_a_topic_deleted_meanwhile():
    """A topic deleted while the broker's channel was down: the full resend on the new channel is read
    as FULL with Kafka's Type values (UNKNOWN 0, INCREMENTAL 1, FULL 2), so the broker drops the topic
    from its metadata cache and its 8 hosted partitions as strays; the next change is read INCREMENTAL."""
    cache = TypeRecordingCache()
    server = ZkBrokerServer(cache).start()
    ctl = Controller()
    ctl.parts.update(
        {("gone", p): PartitionState("gone", p, uuid.uuid4(), 1, 1, (1, 2), 1, (1, 2)) for p in range(8)}
    )
    first = channel(server, ctl)
    try:
        assert wait_until(lambda: cached(cache) == expected(ctl.parts) and first.idle(), 10), first.status
        assert len([k for k in cache.roles if k[0] == "gone"]) == 8
    finally:
        first.stop()
    ctl.parts = {k: s for k, s in ctl.parts.items() if k[0] != "gone"}  # deleted while no channel ran
    cache.types.clear()
    second = channel(server, ctl)
    try:
        assert wait_until(lambda: cached(cache) == expected(ctl.parts) and second.idle(), 10), (
            second.status,
            sorted(cached(cache)),
        )
        assert set(cache.roles) == set(ctl.parts)  # no stray partition of "gone" hosted any more
        assert sorted(cache.types) == [("LeaderAndIsr", "FULL"), ("UpdateMetadata", "FULL")]
        ctl.parts[("t", 0)] = state(0, leader=2, epoch=2)
        second.enqueue(
            [Item(Z.UPDATE_METADATA, partitions={("t", 0): ctl.parts[("t", 0)]}, live_brokers=LIVE)], 11
        )
        assert wait_until(lambda: second.status.acked_offset == 11 and second.idle(), 10), second.status
        assert cache.types[-1] == ("UpdateMetadata", "INCREMENTAL")
    finally:
        second.stop()
        server.stop()


@pytest.mark.parametrize(
    ("value", "kraft", "read", "full"),
    [
        (0, True, "UNKNOWN", False),
        (1, True, "INCREMENTAL", False),
        (2, True, "FULL", True),
        (2, False, "FULL", False),
        (7, True, "UNKNOWN", False),
    ],
)
def test_the_stand_in_reads_type_as_a_kafka_broker_does(value, kraft, read, full):
    """The ZK-broker stand-in decodes Type from the bytes with Kafka's values, and treats a request as
    full only when it is FULL from a KRaft controller (ZkMetadataCache / ReplicaManager's condition)."""
    cls = Z.UPDATE_METADATA_REQUEST[8]
    wire_bytes = encode_fast(
        cls, cls(controller_id=1, controller_epoch=2, is_k_raft_controller=kraft, type=i8(value))
    )
    req, _ = entity_reader(cls)(wire_bytes, 0)
    assert request_type(req) == read and full_from_kraft(req) is full


def test_a_broker_closing_its_connection_is_said_in_words_and_the_raw_error_kept_for_debug(broker, caplog):
    """Issue 27 item 5: a ZK-mode broker shutting down closes its connection mid-request, and a broker
    that leaves /brokers/ids has its channel stopped while a request waits. Neither is a failure: the
    operator line says what happened in words (once), never `[Errno 9] Bad file descriptor`; the raw
    error stays in the debug log (`-v`)."""
    import logging

    _cache, server = broker
    said: list[str] = []
    ctl = Controller()
    versions = {Z.LEADER_AND_ISR: 7, Z.UPDATE_METADATA: 8, Z.STOP_REPLICA: 4}
    target = ZkBrokerTarget(5, 7, server.address[0], server.address[1], versions)
    server.mode = "silent"  # the broker reads the request and is gone before it answers
    caplog.set_level(logging.DEBUG, logger="migrator.controller.zk_brokers.zk_broker_channel")
    ch = BrokerChannel(
        target, ctl.header, ctl.full_state, request_timeout=30, backoff_ms=20, say=said.append
    ).start()
    try:
        assert wait_until(lambda: bool(server._conns), 10)
        for conn in list(server._conns):  # the broker's side closes
            conn.shutdown(socket.SHUT_RDWR)
        assert wait_until(lambda: bool(said), 10), ch.status
    finally:
        server.release.set()
        ch.stop()
    assert said and all("Errno" not in line for line in said), said
    assert said[0].startswith("ZK broker 5: closed the connection during LeaderAndIsr") or said[0].startswith(
        "ZK broker 5: closed the connection during UpdateMetadata"
    ), said

    # stopped by the controller while a request waits (the broker left /brokers/ids): no line at all
    said.clear()
    server.release = threading.Event()
    ch = BrokerChannel(
        target, ctl.header, ctl.full_state, request_timeout=30, backoff_ms=20, say=said.append
    ).start()
    try:
        assert wait_until(lambda: bool(server._conns), 10)
        assert wait_until(lambda: ch.status.connected, 10)
    finally:
        ch.stop()
        server.release.set()
    assert said == [], said
    assert any("ZK broker 5:" in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)
