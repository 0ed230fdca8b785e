"""Parked Raft fetches held by the listener's one long-poll thread (controller/network/long_polls.py), over TCP.

Each test checks what an observer sees on the wire: every append wakes every parked fetch (no wake-up
lost, however close together), requests sent behind a parked fetch are answered after it and in order,
an answer bigger than the socket takes arrives whole, silent and half-sent connections are closed as
the listener's threads close them, a closing listener lets no fetch hang, and all of it over SASL_SSL
with re-authentication on the same connection.
"""

from __future__ import annotations

import io
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_writer
from test_listener_tls_sasl import BROKER_PW, _props, _scram, certs, service  # noqa: F401
from test_raft_leader import CLUSTER, NO_RETENTION, NODE, Fetcher, Handler, configs, offsets_in

from migrator.controller.client.client import _recv as recv_exactly
from migrator.controller.network.listener_config import start_listeners
from migrator.controller.network.listener_runtime import _attach_raft, start_server
from migrator.controller.network.server import ControllerServer
from migrator.controller.security.client_security import sasl_authenticate
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import record
from zk_fixtures.kraft_broker import MetadataFollower


@pytest.fixture
def log(tmp_path: Path) -> Iterator[MetadataLog]:
    mlog = MetadataLog.open(
        tmp_path / "log", writable=True, cluster_id=CLUSTER, node_id=NODE, retention=NO_RETENTION
    )
    for i in range(3):
        mlog.append(configs(i), 1)
    try:
        yield mlog
    finally:
        mlog.close()


def _server(log: MetadataLog, **limits: float) -> ControllerServer:
    from migrator.controller.raft.raft_leader import RAFT_VERSIONS, RaftLeader

    server = ControllerServer(Handler(log, 1), "127.0.0.1", 0, **limits)  # type: ignore[arg-type]
    server.attach_raft(RaftLeader(log, NODE, CLUSTER, lambda: 1), RAFT_VERSIONS)
    return server.start()


def _fetch_frame(cid: int, offset: int, epoch: int, max_wait_ms: int, max_bytes: int = 1 << 20) -> bytes:
    """A Fetch v17 request frame, built with kio (the observer's side, not zk2kraft's)."""
    import datetime
    import importlib

    m = importlib.import_module("kio.schema.fetch.v17.request")
    part = m.FetchPartition(
        partition=0,
        current_leader_epoch=1,
        fetch_offset=offset,
        last_fetched_epoch=epoch,
        log_start_offset=-1,
        partition_max_bytes=max_bytes,
        replica_directory_id=uuid.UUID(int=5),
    )
    req = m.FetchRequest(
        cluster_id=CLUSTER,
        replica_state=m.ReplicaState(replica_id=11, replica_epoch=-1),
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=max_bytes,
        topics=(m.FetchTopic(topic_id=uuid.UUID(int=1), partitions=(part,)),),
        forgotten_topics_data=(),
    )
    return _frame(
        RequestHeader(request_api_key=1, request_api_version=17, correlation_id=cid, client_id="t"), req
    )


def _frame(header: RequestHeader, req: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(RequestHeader)(buf, header)
    entity_writer(type(req))(buf, req)
    return struct.pack(">i", len(buf.getvalue())) + buf.getvalue()


def _read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    return recv_exactly(sock, size)


def _parse_fetch(body: bytes) -> Any:
    """The partition of a Fetch v17 response body (correlation id first), read with kio."""
    from kio.schema.fetch.v17.response import FetchResponse
    from kio.schema.response_header.v1.header import ResponseHeader
    from kio.serial import entity_reader

    _, pos = entity_reader(ResponseHeader)(body, 0)
    resp, _ = entity_reader(FetchResponse)(body, pos)
    return resp.responses[0].partitions[0]


#: MaxWaitMs and loop tick far beyond every hang guard: an answer in time can only be an append's wake-up
_NEVER_MS = 600_000
_HANG_GUARD_S = 60.0


def _wait_for(pred: Any, what: str, timeout: float = _HANG_GUARD_S) -> None:
    """Until ``pred()`` holds; the timeout only keeps a broken build from hanging the suite."""
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.002)


def _parked(server: ControllerServer, n: int) -> None:
    """Until ``n`` fetches wait on the long-poll thread."""
    _wait_for(lambda: server.long_polls is not None and server.long_polls.waiting == n, f"{n} parked fetches")


def _only_wakes(server: ControllerServer) -> None:
    """The long-poll loop's periodic look (1 s) pushed past every guard: what answers a parked fetch in
    time is the wake-up of an append. The loop is woken once so it takes the new tick at once."""
    assert server.long_polls is not None
    server.long_polls.tick_s = _NEVER_MS / 1000
    server.long_polls.wake()


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
        return True
    except TimeoutError:
        return False
    except OSError:
        return True


def test_every_append_wakes_every_parked_fetch_however_close_together(log: MetadataLog) -> None:
    """20 observers long-poll while 150 appends come one after another, with MaxWaitMs and the loop's
    periodic look both beyond the guard: each append reaches all of them, so none of its wake-ups was
    lost. (How fast is bench/raft_fetch.py's long-poll lag.)"""
    server = _server(log)
    _only_wakes(server)
    fetchers = [Fetcher(server.address) for _ in range(20)]
    ends = [log.end_offset] * len(fetchers)
    stop = threading.Event()
    errors: list[BaseException] = []

    def follow(i: int) -> None:
        try:
            while not stop.is_set():
                _, p = fetchers[i].fetch(ends[i], 1, 1, max_wait_ms=_NEVER_MS, replica_id=100 + i)
                offsets = [o for o, _ in offsets_in(p.records)]
                if offsets:
                    ends[i] = offsets[-1] + 1
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            if not stop.is_set():
                errors.append(e)

    threads = [threading.Thread(target=follow, args=(i,), daemon=True) for i in range(len(fetchers))]
    for t in threads:
        t.start()
    try:
        for i in range(150):
            log.append(
                [record("ConfigRecord", 0, ResourceType=4, ResourceName="", Name=f"n{i}", Value="v")], 1
            )
            target = log.end_offset
            _wait_for(
                lambda t=target: bool(errors) or min(ends) >= t,  # type: ignore[misc]
                f"append {i} reaching every observer",
            )
            assert not errors, errors
        # once a wake-up is lost the flag stays up with nothing in the pipe, and every later one is lost
        polls = server.long_polls
        assert polls is not None
        _wait_for(lambda: not polls._woken, "the wake-up flag cleared")  # noqa: SLF001
        assert polls.parked_total > 150
        _parked(server, len(fetchers))  # all parked again, no thread of their own
    finally:
        stop.set()
        server.close()
        for f in fetchers:
            f.close()


def test_requests_behind_a_parked_fetch_are_answered_after_it_in_order(log: MetadataLog) -> None:
    server = _server(log)
    sock = socket.create_connection(server.address, timeout=30)
    try:
        end = log.end_offset
        api_versions = _frame(
            RequestHeader(request_api_key=18, request_api_version=3, correlation_id=2, client_id="t"),
            ApiVersionsRequest(client_software_name="t", client_software_version="1"),
        )
        sock.sendall(_fetch_frame(1, end, 1, _NEVER_MS) + api_versions + _fetch_frame(3, end, 1, 0))
        _parked(server, 1)
        log.append(configs(9, 1), 1)
        first, second, third = (_read_frame(sock) for _ in range(3))
        assert [struct.unpack_from(">i", f, 0)[0] for f in (first, second, third)] == [1, 2, 3]
        assert [o for o, _ in offsets_in(_parse_fetch(first).records)] == [end]
        assert struct.unpack_from(">h", second, 4)[0] == 0  # ApiVersions (header v0): answered, no error
        assert server.long_polls is not None and server.long_polls.resumed_total >= 1
        # the connection goes on: a long poll parks again and is answered by the next append
        sock.sendall(_fetch_frame(4, end + 1, 1, _NEVER_MS))
        _parked(server, 1)
        log.append(configs(10, 1), 1)
        fourth = _read_frame(sock)
        assert struct.unpack_from(">i", fourth, 0)[0] == 4
        assert [o for o, _ in offsets_in(_parse_fetch(fourth).records)] == [end + 1]
    finally:
        sock.close()
        server.close()


def test_an_answer_bigger_than_the_socket_takes_arrives_whole(log: MetadataLog) -> None:
    """The observer does not read while a 4 MB append wakes its fetch: the long-poll thread hands the
    rest to a listener thread, which sends it whole, and the connection goes on."""
    server = _server(log)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(30)
    sock.connect(server.address)
    try:
        end = log.end_offset
        sock.sendall(_fetch_frame(1, end, 1, _NEVER_MS, max_bytes=32 << 20))
        _parked(server, 1)
        big = [
            record("ConfigRecord", 0, ResourceType=4, ResourceName="", Name=f"big{i}", Value="x" * 2000)
            for i in range(2000)
        ]
        log.append(big, 1)
        # the long-poll thread meets a full socket and gives the rest to a listener thread
        _wait_for(lambda: server.long_polls is not None and server.long_polls.resumed_total >= 1, "resumed")
        answer = _parse_fetch(_read_frame(sock))
        assert [o for o, _ in offsets_in(answer.records)] == list(range(end, end + 2000))
        sock.sendall(_fetch_frame(2, end + 2000, 1, 0))
        assert _parse_fetch(_read_frame(sock)).high_watermark == end + 2000
    finally:
        sock.close()
        server.close()


def test_silent_and_half_sent_connections_are_closed_by_the_long_poll_thread(log: MetadataLog) -> None:
    server = _server(log, idle_timeout_s=1.0, request_timeout_s=1.0)
    silent = socket.create_connection(server.address, timeout=30)
    half = socket.create_connection(server.address, timeout=30)
    try:
        end = log.end_offset
        for s, cid in ((silent, 1), (half, 2)):
            s.sendall(_fetch_frame(cid, end, 1, _NEVER_MS))
        _parked(server, 2)
        log.append(configs(11, 1), 1)
        for s in (silent, half):
            assert _parse_fetch(_read_frame(s)).high_watermark == end + 1
        before = server.closed_for_errors
        half.sendall(b"\x00\x00\x01")  # the start of a size, then nothing
        assert _closed_within(silent, _HANG_GUARD_S)
        assert _closed_within(half, _HANG_GUARD_S)
        assert server.closed_for_errors >= before + 2
        _wait_for(lambda: not server._per_ip, "the connection slots given back")  # noqa: SLF001
    finally:
        silent.close()
        half.close()
        server.close()


def test_closing_the_listener_lets_no_parked_fetch_hang(log: MetadataLog) -> None:
    server = _server(log)
    socks = [socket.create_connection(server.address, timeout=30) for _ in range(10)]
    try:
        for i, s in enumerate(socks):
            s.sendall(_fetch_frame(i + 1, log.end_offset, 1, _NEVER_MS))
        _parked(server, len(socks))
        assert server.long_polls is not None
        closing = threading.Thread(target=server.close, daemon=True)
        closing.start()
        closing.join(_HANG_GUARD_S)
        assert not closing.is_alive(), "closing the listener hung on its parked fetches"
        for s in socks:
            s.settimeout(_HANG_GUARD_S)
            try:
                data = s.recv(1 << 16)  # an answer as the leader closes, or the end of the connection
            except OSError:
                data = b""
            assert data == b"" or len(data) >= 4
        assert not server.long_polls.thread.is_alive()
    finally:
        for s in socks:
            s.close()


def test_parked_fetches_over_sasl_ssl_with_reauthentication_on_the_same_connection(
    service: Any,  # noqa: F811
    certs: Any,  # noqa: F811
) -> None:
    props = _props(certs, **{"connections.max.reauth.ms": "60000"})
    running = start_listeners(service, "SECURE://127.0.0.1:0", props)
    _attach_raft(running.servers, service, "SECURE")
    try:
        follower = MetadataFollower(
            running.address,
            21,
            cluster_id=service.log.meta.cluster_id,
            security=_scram(certs, "broker", BROKER_PW),
        )
        follower.catch_up()
        end = service.log.end_offset
        got: list[int] = []
        server = running.servers[0]
        _only_wakes(server)
        t = threading.Thread(target=lambda: got.append(follower.fetch_once(_NEVER_MS)), daemon=True)
        t.start()
        _parked(server, 1)
        service.log.append(configs(12, 1), 1)
        t.join(_HANG_GUARD_S)
        assert got == [1]
        assert follower.fetch_offset == service.log.end_offset > end
        # KIP-368 on the same connection: the handshake goes back to a listener thread, fetches go on
        conn = follower._conn  # noqa: SLF001
        assert conn is not None
        sasl_authenticate(conn._round_trip, conn._next_id, "b", _scram(certs, "broker", BROKER_PW))  # noqa: SLF001
        assert server.security.authenticated["reauthenticated"] == 1
        t = threading.Thread(target=lambda: got.append(follower.fetch_once(_NEVER_MS)), daemon=True)
        t.start()
        _parked(server, 1)
        service.log.append(configs(13, 1), 1)
        t.join(_HANG_GUARD_S)
        assert got == [1, 1] and follower.fetch_offset == service.log.end_offset
        follower.stop()
    finally:
        running.stop()


def test_a_plain_listener_without_raft_has_no_long_poll_thread(tmp_path: Path) -> None:
    class NoLog:
        log = None

        def handle(self, *a: object) -> None:
            raise AssertionError

    running = start_server(NoLog(), "127.0.0.1:0")
    try:
        assert running.server.long_polls is None
    finally:
        running.stop()


def test_requests_pipelined_over_tls_behind_a_parked_fetch_are_not_left_in_tls_buffers(
    service: Any,  # noqa: F811
    certs: Any,  # noqa: F811
) -> None:
    """Both requests arrive in one TLS record: the connection's thread reads the Fetch, TLS keeps the
    ApiVersions decrypted in its own buffer, where no selector sees it; the long-poll thread reads it."""
    import ssl

    props = _props(
        certs,
        **{
            "listeners": "TLS://127.0.0.1:0",
            "listener.name.tls.ssl.client.auth": "none",
            "authorizer.class.name": "",
        },
    )
    running = start_listeners(service, "TLS://127.0.0.1:0", props)
    _attach_raft(running.servers, service, "TLS")
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    sock = ctx.wrap_socket(socket.create_connection(running.address, timeout=30), server_hostname="127.0.0.1")
    try:
        end = service.log.end_offset
        api_versions = _frame(
            RequestHeader(request_api_key=18, request_api_version=3, correlation_id=2, client_id="t"),
            ApiVersionsRequest(client_software_name="t", client_software_version="1"),
        )
        sock.sendall(_fetch_frame(1, end, 1, _NEVER_MS) + api_versions)
        _parked(running.servers[0], 1)
        service.log.append(configs(14, 1), 1)
        first, second = _read_frame(sock), _read_frame(sock)
        assert struct.unpack_from(">i", first, 0)[0] == 1 and struct.unpack_from(">i", second, 0)[0] == 2
        assert _parse_fetch(first).high_watermark == service.log.end_offset
    finally:
        sock.close()
        running.stop()
