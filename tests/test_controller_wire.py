"""The controller protocol: every message at every version, exact bytes, and the listener's bad inputs."""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable

import pytest
from kafka.protocol.metadata.api_versions import ApiVersionsResponse as KpApiVersionsResponse

from migrator.controller.client.client import ControllerClient, ControllerUnreachable
from migrator.controller.network.server import ControllerServer
from migrator.controller.protocol import messages as M
from migrator.controller.protocol import wire
from migrator.errors import BadInputError

TID = uuid.UUID("5b1c8e4a-7f3d-4c2a-9e61-0d9a3b2c1f00")
INC = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")
DIR = uuid.UUID("11111111-2222-3333-4444-555555555555")


def registration(version: int) -> M.BrokerRegistrationRequest:
    return M.BrokerRegistrationRequest(
        broker_id=3,
        cluster_id="IkVxGlLZRmuXqG3Cw8RQ3w",
        incarnation_id=INC,
        listeners=[M.Listener("PLAINTEXT", "broker-3", 9092, 0), M.Listener("SSL", "broker-3", 9093, 1)],
        features=[M.Feature("metadata.version", 1, 21)],
        rack="rack-a" if version % 2 else None,
        is_migrating_zk_broker=version >= 1,
        log_dirs=[DIR] if version >= 2 else [],
        previous_broker_epoch=17 if version >= 3 else -1,
    )


def alter_partition(version: int) -> M.AlterPartitionRequest:
    epochs = version >= 3
    isr = [M.BrokerState(1, 101 if epochs else -1), M.BrokerState(2, 202 if epochs else -1)]
    topic = M.AlterPartitionTopic(
        "orders" if version <= 1 else None,
        TID if version >= 2 else None,
        [M.AlterPartitionPartition(4, 7, isr, 12, 1 if version >= 1 else 0)],
    )
    return M.AlterPartitionRequest(1, 101, [topic])


def alter_partition_response(version: int) -> M.AlterPartitionResponse:
    part = M.AlterPartitionPartitionResponse(4, 0, 1, 7, [1, 2], 1 if version >= 1 else 0, 13)
    bad = M.AlterPartitionPartitionResponse(5, 107 if version >= 2 else 95, -1, -1, [], 0, -1)
    topic = M.AlterPartitionTopicResponse(
        "orders" if version <= 1 else None, TID if version >= 2 else None, [part, bad]
    )
    return M.AlterPartitionResponse(0, [topic])


REQUESTS = [
    (M.API_VERSIONS, v, M.ApiVersionsRequest("zk2kraft", "1") if v >= 3 else M.ApiVersionsRequest())
    for v in range(4)
]
REQUESTS += [(M.BROKER_REGISTRATION, v, registration(v)) for v in range(4)]
REQUESTS += [
    (M.BROKER_HEARTBEAT, v, M.BrokerHeartbeatRequest(3, 55, 1234, False, True, [DIR] if v else []))
    for v in range(2)
]
REQUESTS += [(M.ALTER_PARTITION, v, alter_partition(v)) for v in range(4)]
REQUESTS += [
    (
        M.ALTER_REPLICA_STATE,
        0,
        M.AlterReplicaStateRequest(
            3, 55, 1, "disk /data/2 failed", [M.AlterReplicaStateTopic("orders", [0, 4])]
        ),
    )
]

RESPONSES = [(M.API_VERSIONS, v, M.ApiVersionsResponse(0, wire.supported_ranges())) for v in range(4)]
RESPONSES += [(M.BROKER_REGISTRATION, v, M.BrokerRegistrationResponse(0, 88)) for v in range(4)]
RESPONSES += [(M.BROKER_HEARTBEAT, v, M.BrokerHeartbeatResponse(0, True, False, True)) for v in range(2)]
RESPONSES += [(M.ALTER_PARTITION, v, alter_partition_response(v)) for v in range(4)]
RESPONSES += [
    (
        M.ALTER_REPLICA_STATE,
        0,
        M.AlterReplicaStateResponse(
            0,
            [M.AlterReplicaStateTopicResponse("orders", [M.AlterReplicaStatePartitionResponse(0, 0)])],
        ),
    )
]


@pytest.mark.parametrize(("api_key", "version", "request_"), REQUESTS, ids=lambda x: str(x)[:30])
def test_every_request_version_round_trips(api_key, version, request_):
    data = wire.encode_request(api_key, version, 77, "broker-3", request_)
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    header, back = wire.decode_request(data[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api_key,
        version,
        77,
        "broker-3",
    )
    assert back == request_


@pytest.mark.parametrize(("api_key", "version", "response"), RESPONSES, ids=lambda x: str(x)[:30])
def test_every_response_version_round_trips(api_key, version, response):
    header = wire.RequestHeader(api_key, version, 5, None)
    data = wire.encode_response(header, response)
    cid, back = wire.decode_response(api_key, version, data[4:])
    assert cid == 5
    assert back == response


def test_alter_partition_v0_bytes_follow_kafkas_schema():
    """AlterPartitionRequest v0 (flexible, header v2), written out by hand from Kafka 3.9's JSON schema."""
    req = M.AlterPartitionRequest(
        1,
        5,
        [
            M.AlterPartitionTopic(
                "t", None, [M.AlterPartitionPartition(0, 2, [M.BrokerState(1), M.BrokerState(2)], 3)]
            )
        ],
    )
    data = wire.encode_request(M.ALTER_PARTITION, 0, 9, "c", req)
    expected_header = bytes.fromhex("0038 0000 00000009 0001 63 00")  # key 56, v0, cid 9, client "c", no tags
    expected_body = bytes.fromhex(
        "00000001"  # BrokerId
        "0000000000000005"  # BrokerEpoch
        "02"  # Topics: compact array of 1
        "0274"  # TopicName "t"
        "02"  # Partitions: 1
        "00000000"  # PartitionIndex
        "00000002"  # LeaderEpoch
        "03"
        "00000001"
        "00000002"  # NewIsr [1, 2]
        "00000003"  # PartitionEpoch
        "00"
        "00"
        "00"  # tagged fields: partition, topic, request
    )
    assert (
        data == struct.pack(">i", len(expected_header) + len(expected_body)) + expected_header + expected_body
    )


def test_alter_partition_v3_carries_broker_epochs_and_topic_ids():
    data = wire.encode_request(M.ALTER_PARTITION, 3, 1, None, alter_partition(3))
    assert TID.bytes in data
    assert struct.pack(">iq", 2, 202) in data  # BrokerState(2, 202)
    _, back = wire.decode_request(data[4:])
    assert [b.broker_epoch for b in back.topics[0].partitions[0].new_isr_with_epochs] == [101, 202]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_api_versions_response_reads_with_kafka_python(version):
    header = wire.RequestHeader(M.API_VERSIONS, version, 42, None)
    data = wire.encode_response(header, M.ApiVersionsResponse(0, wire.supported_ranges()))
    parsed = KpApiVersionsResponse.decode(data, version=version, header=True, framed=True)
    got = {(k.api_key, k.min_version, k.max_version) for k in parsed.api_keys}
    assert got == {(k, lo, hi) for k, (lo, hi) in wire.SUPPORTED.items()}
    assert parsed.error_code == 0


def test_a_topic_without_the_versions_key_is_refused_before_sending():
    with pytest.raises(wire.WireError, match="topic_id is missing"):
        wire.encode_request(M.ALTER_PARTITION, 2, 1, None, alter_partition(0))
    with pytest.raises(wire.WireError, match="topic_name is missing"):
        wire.encode_request(M.ALTER_PARTITION, 0, 1, None, alter_partition(2))


def damaged(rng: random.Random, frame: bytes) -> bytearray:
    """``frame`` with 1-4 random flips, truncations or appended garbage (the fuzz tests' mutation)."""
    data = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        action = rng.random()
        if action < 0.4 and data:
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif action < 0.7:
            del data[rng.randrange(len(data) + 1) :]
        else:
            data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    return data


def test_decoders_raise_only_wire_error_on_random_damage():
    rng = random.Random(866)
    frames = [wire.encode_request(k, v, 1, "x", r)[4:] for k, v, r in REQUESTS]
    for _ in range(3000):
        data = damaged(rng, rng.choice(frames))
        try:
            wire.decode_request(bytes(data))
        except wire.WireError:
            pass


# --- the listener -------------------------------------------------------------------------------


class Echo:
    """A handler that answers from the request alone (the controller's logic is tested elsewhere)."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int, str | None]] = []
        self.fail = False

    def handle(self, api_key, api_version, request, client_id):
        self.seen.append((api_key, api_version, client_id))
        if self.fail:
            raise RuntimeError("boom")
        if api_key == M.BROKER_REGISTRATION:
            return M.BrokerRegistrationResponse(0, 100 + request.broker_id)
        if api_key == M.BROKER_HEARTBEAT:
            return M.BrokerHeartbeatResponse(0, True, request.want_fence, request.want_shut_down)
        if api_key == M.ALTER_PARTITION:
            return M.AlterPartitionResponse(
                0,
                [
                    M.AlterPartitionTopicResponse(
                        t.topic_name,
                        t.topic_id,
                        [
                            M.AlterPartitionPartitionResponse(
                                p.partition_index,
                                0,
                                request.broker_id,
                                p.leader_epoch,
                                p.new_isr,
                                0,
                                p.partition_epoch + 1,
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in request.topics
                ],
            )
        return M.AlterReplicaStateResponse(0, [])


@pytest.fixture
def listener():
    handler = Echo()
    with ControllerServer(handler, "127.0.0.1", 0) as server:
        yield server, handler


def raw(server: ControllerServer) -> socket.socket:
    s = socket.create_connection(server.address, timeout=5)
    return s


def read_frame(s: socket.socket) -> bytes:
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            raise EOFError
        head += chunk
    (size,) = struct.unpack(">i", head)
    body = b""
    while len(body) < size:
        chunk = s.recv(size - len(body))
        if not chunk:
            raise EOFError
        body += chunk
    return body


#: how long a test waits for what must happen at once; only a hang guard, never the verdict
GUARD_S = 60.0


def closed(s: socket.socket) -> bool:
    """The server closed ``s`` (EOF or reset); a connection still open raises TimeoutError at the guard."""
    s.settimeout(GUARD_S)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def test_client_negotiates_and_calls_each_api(listener):
    server, handler = listener
    with ControllerClient(*server.address, client_id="broker-3") as c:
        assert c.versions == wire.SUPPORTED
        assert c.register_broker(registration(3)).broker_epoch == 103
        assert c.register_broker(registration(0), version=0).broker_epoch == 103
        hb = c.heartbeat(M.BrokerHeartbeatRequest(3, 103, 5, True, False))
        assert (hb.error_code, hb.is_fenced) == (0, True)
        for v in range(4):
            got = c.alter_partition(alter_partition(v), version=v)
            assert got.topics[0].partitions[0].partition_epoch == 13
        assert c.alter_replica_state(REQUESTS[-1][2]).error_code == 0
    assert (M.ALTER_PARTITION, 0, "broker-3") in handler.seen


def test_api_versions_of_an_unknown_version_gets_unsupported_version_as_v0(listener):
    server, _ = listener
    with raw(server) as s:
        header = struct.pack(">hhi", M.API_VERSIONS, 9, 31) + b"\x00\x01x" + b"\x00"
        s.sendall(struct.pack(">i", len(header) + 1) + header + b"\x00")
        body = read_frame(s)
        cid, resp = wire.decode_response(M.API_VERSIONS, 9 if False else 0, body)
        assert cid == 31
        assert resp.error_code == 35
        assert {(a.api_key, a.min_version, a.max_version) for a in resp.api_keys} >= {(56, 0, 3)}


@pytest.mark.parametrize(
    "payload",
    [
        struct.pack(">hhi", 999, 0, 1) + b"\xff\xff",  # unknown apiKey
        struct.pack(">hhi", M.ALTER_PARTITION, 9, 1) + b"\xff\xff\x00",  # unsupported version
        struct.pack(">hhi", M.BROKER_HEARTBEAT, 0, 1) + b"\xff\xff\x00" + b"\x01\x02",  # truncated body
        b"\x00\x01",  # shorter than a header
    ],
    ids=["unknown-api", "unknown-version", "truncated-body", "short"],
)
def test_bad_requests_close_the_connection_and_the_listener_goes_on(listener, payload):
    server, _ = listener
    with raw(server) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        assert closed(s)
    with ControllerClient(*server.address) as c:
        assert c.register_broker(registration(1)).error_code == 0
    assert server.closed_for_errors >= 1


@pytest.mark.parametrize("size", [-1, 0, wire.MAX_FRAME_BYTES + 1, 2**31 - 1])
def test_oversized_or_negative_frames_are_closed_without_reading_them(listener, size):
    server, _ = listener
    with raw(server) as s:
        s.sendall(struct.pack(">i", size))
        assert closed(s)


def test_a_handler_error_is_unknown_server_error_not_a_crash(listener):
    server, handler = listener
    handler.fail = True
    with ControllerClient(*server.address) as c:
        got = c.alter_partition(alter_partition(3))
        assert got.error_code == -1
        assert got.topics[0].partitions[0].error_code == -1
        handler.fail = False
        assert c.register_broker(registration(2)).error_code == 0


def test_a_stalled_client_does_not_hold_up_others():
    """Five half-sent frames stay open for the whole test (a ten-minute request timeout); another
    client is served meanwhile: its answers cannot have waited for the stalled ones to be cut off."""
    with ControllerServer(Echo(), "127.0.0.1", 0, request_timeout_s=600) as server:
        stalled = [raw(server) for _ in range(5)]
        for s in stalled:
            s.sendall(struct.pack(">i", 100) + b"\x00\x3f")  # half a header of a 100-byte frame, then silence
        with ControllerClient(*server.address, timeout_s=GUARD_S) as c:
            for _ in range(20):
                assert c.heartbeat(M.BrokerHeartbeatRequest(1, 2, 3, False, False)).error_code == 0
        assert server.closed_for_errors == 0  # the stalled ones are all still held
        for s in stalled:
            s.close()


def test_many_connections_at_once(listener):
    server, _ = listener
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            with ControllerClient(*server.address, client_id=f"b{i}") as c:
                for _ in range(5):
                    assert c.register_broker(registration(3)).broker_epoch == 103
        except BaseException as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(GUARD_S)
    assert not [t for t in threads if t.is_alive()], "a client never finished"
    assert not errors


def test_requests_are_answered_in_order_on_one_connection(listener):
    server, _ = listener
    with raw(server) as s:
        frames = [
            wire.encode_request(M.BROKER_REGISTRATION, 3, cid, "p", registration(3)) for cid in range(10)
        ]
        s.sendall(b"".join(frames))  # pipelined
        cids = [wire.decode_response(M.BROKER_REGISTRATION, 3, read_frame(s))[0] for _ in range(10)]
    assert cids == list(range(10))


def test_client_reports_an_unreachable_controller_in_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ControllerUnreachable, match=f"cannot reach the controller at 127.0.0.1:{port}"):
        ControllerClient("127.0.0.1", port, timeout_s=1)


def test_close_stops_every_connection_thread():
    server = ControllerServer(Echo()).start()
    clients = [ControllerClient(*server.address) for _ in range(3)]
    server.close()
    for c in clients:
        with pytest.raises(ControllerUnreachable):
            c.heartbeat(M.BrokerHeartbeatRequest(1, 2, 3, False, False))
    assert not [t for t in threading.enumerate() if t.name in ("zk2kraft-conn", "zk2kraft-listener")]


def test_alter_replica_state_v0_bytes_follow_the_documented_schema():
    """AlterReplicaState v0 as docs/controller-protocol.md documents it, written out by hand."""
    req = M.AlterReplicaStateRequest(3, 55, 1, "io", [M.AlterReplicaStateTopic("t", [0, 4])])
    data = wire.encode_request(M.ALTER_REPLICA_STATE, 0, 9, None, req)
    expected = bytes.fromhex(
        "2711 0000 00000009 ffff 00"  # apiKey 10001, v0, cid 9, null client id, header tags
        "00000003"  # BrokerId
        "0000000000000037"  # BrokerEpoch 55
        "01"  # EventType offline
        "03696f"  # EventReason "io"
        "02"  # Topics: 1
        "0274"  # Name "t"
        "03"
        "00000000"
        "00000004"  # Partitions [0, 4]
        "00"
        "00"  # tagged fields: topic, request
    )
    assert data == struct.pack(">i", len(expected)) + expected
    resp = M.AlterReplicaStateResponse(
        0, [M.AlterReplicaStateTopicResponse("t", [M.AlterReplicaStatePartitionResponse(4, 3)])]
    )
    out = wire.encode_response(wire.RequestHeader(M.ALTER_REPLICA_STATE, 0, 9, None), resp)
    expected = bytes.fromhex(
        "00000009 00"  # response header v1: cid, tags
        "00000000"  # ThrottleTimeMs
        "0000"  # ErrorCode
        "02"
        "0274"  # Topics: 1, Name "t"
        "02"
        "00000004"
        "0003"
        "00"  # Partitions: (4, UNKNOWN_TOPIC_OR_PARTITION), tags
        "00"
        "00"  # tagged fields: topic, response
    )
    assert out == struct.pack(">i", len(expected)) + expected


def test_stalled_half_frames_are_closed_and_free_their_slots():
    """A slow-loris that fills every connection slot is cut off after request_timeout_s."""
    with ControllerServer(Echo(), max_connections=4, request_timeout_s=0.5) as server:
        stalled = [raw(server) for _ in range(4)]
        for s in stalled:
            s.sendall(b"\x00\x00")  # half a size prefix, then silence
        assert all(closed(s) for s in stalled)  # by the request timeout: the idle one is ten minutes
        assert server.closed_for_errors >= 4
        with ControllerClient(*server.address, timeout_s=2) as c:
            assert c.heartbeat(M.BrokerHeartbeatRequest(1, 2, 3, False, False)).error_code == 0
        for s in stalled:
            s.close()


def test_error_numbers_are_kafkas():
    """Every Kafka code the controller uses has the number kio generated from Kafka's Errors.java."""
    from kio.schema.errors import ErrorCode

    from migrator.controller.protocol import kafka_errors as E

    ours = {name: code for code, name in E.NAMES.items() if name != "UNKNOWN_EVENT_TYPE"}
    assert ours, "no codes found"
    for name, code in ours.items():
        assert ErrorCode[name.lower()].value == code, name
    assert E.UNKNOWN_EVENT_TYPE not in {e.value for e in ErrorCode}  # outside Kafka's numbers


def test_unknown_event_type_survives_the_wire():
    """KIP-589's own error code (not a Kafka one) reaches the broker as itself, not as UNKNOWN_SERVER_ERROR."""
    from migrator.controller.protocol import kafka_errors as E

    resp = M.AlterReplicaStateResponse(E.UNKNOWN_EVENT_TYPE, [])
    data = wire.encode_response(wire.RequestHeader(M.ALTER_REPLICA_STATE, 0, 1, None), resp)
    assert wire.decode_response(M.ALTER_REPLICA_STATE, 0, data[4:])[1].error_code == E.UNKNOWN_EVENT_TYPE


@pytest.mark.parametrize("dirs", [[], [DIR]])
def test_broker_heartbeat_v1_bytes_follow_kafkas_schema(dirs):
    """BrokerHeartbeatRequest v1 by hand from Kafka's JSON: OfflineLogDirs is tagged field 0, absent when empty."""
    data = wire.encode_request(
        M.BROKER_HEARTBEAT, 1, 2, "b", M.BrokerHeartbeatRequest(3, 55, 1234, False, True, dirs)
    )
    tags = "00" if not dirs else "01001102" + DIR.hex  # 1 tag: tag 0, 17 bytes, array of 1 uuid
    expected = bytes.fromhex(
        "003f 0001 00000002 0001 62 00"  # apiKey 63, v1, cid 2, client "b", header tags
        "00000003"  # BrokerId
        "0000000000000037"  # BrokerEpoch 55
        "00000000000004d2"  # CurrentMetadataOffset 1234
        "00"
        "01" + tags  # WantFence, WantShutDown
    )
    assert data == struct.pack(">i", len(expected)) + expected
    assert wire.decode_request(data[4:])[1].offline_log_dirs == dirs


def test_response_decoders_raise_only_wire_error_on_random_damage():
    """The client decodes what a controller sends; a damaged answer is a WireError, nothing else."""
    rng = random.Random(589)
    frames = [(k, v, wire.encode_response(wire.RequestHeader(k, v, 1, None), r)[4:]) for k, v, r in RESPONSES]
    failures = 0
    for _ in range(3000):
        k, v, good = rng.choice(frames)
        data = damaged(rng, good)
        try:
            wire.decode_response(k, v, bytes(data))
        except wire.WireError:
            failures += 1
    assert failures > 100  # the damage was real


# Frames found by fuzzing: each claims an array far longer than the frame. kio's native reader
# allocates the claimed length first (hundreds of GB) and aborts the process; wire must refuse them.
HUGE_ARRAY_FRAMES = [
    "003800030000000100017800000000010000000000000065025b1c8e4a7f3d4c2a9e610d9a3b2c1f001e00000004"
    "0000000703000000010000000000000065000000000200000000000000ca00010000000c000000ee7177d82d6a98d6aa8a0df62c",
    "003e000000000001000178000000000317496b5678476c4c5a526d7558714733437738525133770f0e0d0c0b0a09080706"
    "050403020100cbfd8fc7716935d3f83a7efa",
]


@pytest.mark.parametrize("hex_frame", HUGE_ARRAY_FRAMES)
def test_a_huge_claimed_length_is_a_wire_error_not_an_abort(hex_frame):
    import subprocess
    import sys

    code = (
        "from migrator.controller.protocol import wire\n"
        f"try:\n    wire.decode_request(bytes.fromhex({hex_frame!r}))\n"
        "except wire.WireError as e:\n    print('WireError', e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.startswith("WireError")


def test_the_listener_survives_a_huge_claimed_length(listener):
    server, _ = listener
    for hex_frame in HUGE_ARRAY_FRAMES:
        payload = bytes.fromhex(hex_frame)
        with raw(server) as s:
            s.sendall(struct.pack(">i", len(payload)) + payload)
            assert closed(s)
    with ControllerClient(*server.address) as c:
        assert c.register_broker(registration(3)).error_code == 0


def _answers(s: socket.socket) -> bool:
    """``s`` was accepted: a request on it gets its answer (a refused one was closed by the server)."""
    s.settimeout(GUARD_S)
    try:
        s.sendall(wire.encode_request(M.BROKER_REGISTRATION, 3, 1, "p", registration(3)))
        return wire.decode_response(M.BROKER_REGISTRATION, 3, read_frame(s))[0] == 1
    except (EOFError, ConnectionResetError, BrokenPipeError):
        return False


def _wait_for(pred: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + GUARD_S
    while not pred():
        assert time.monotonic() < deadline, f"not within {GUARD_S} s: {what}"
        time.sleep(0.01)


def test_one_ip_cannot_take_every_connection_slot():
    """Kafka's max.connections.per.ip: idle sockets from 127.0.0.1 leave room for 127.0.0.2."""
    with ControllerServer(Echo(), "0.0.0.0", 0, max_connections=8, max_connections_per_ip=3) as server:
        port = server.address[1]
        hogs = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(5)]
        assert [_answers(s) for s in hogs] == [True, True, True, False, False]
        assert server.refused_per_ip == 2
        other = socket.socket()
        other.bind(("127.0.0.2", 0))  # loopback picks 127.0.0.1 as the source unless told otherwise
        other.settimeout(5)
        other.connect(("127.0.0.1", port))
        assert _answers(other) and server._per_ip.get("127.0.0.2") == 1
        other.close()
        for s in hogs:
            s.close()
        _wait_for(lambda: not server._per_ip, "every slot freed as its connection closes")


def test_connection_limits_come_from_kafkas_properties():
    """max.connections.per.ip and connections.max.idle.ms, per listener first, as Kafka reads them."""
    from migrator.controller.network.listener_config import connection_limits, start_listeners

    props = {
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
        "max.connections.per.ip": "2",
        "listener.name.controller.connections.max.idle.ms": "300",
    }
    assert connection_limits(props, "CONTROLLER") == {
        "max_request_bytes": 104_857_600,  # Kafka's socket.request.max.bytes default
        "max_connections": 1024,
        "max_connections_per_ip": 2,
        "idle_timeout_s": 0.3,
    }
    with pytest.raises(BadInputError, match="max_connections_per_ip must be positive"):
        connection_limits({"max.connections.per.ip": "0"})
    running = start_listeners(Echo(), "CONTROLLER://127.0.0.1:0", props)
    try:
        port = running.address[1]
        socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
        assert closed(socks[2])  # the third from one address
        # idle ones closed after 300 ms: within the guard, where the default would take 10 minutes
        assert closed(socks[0])
        for s in socks:
            s.close()
    finally:
        running.stop()


def test_socket_request_max_bytes_from_the_properties_bounds_each_request():
    """Kafka's socket.request.max.bytes: a frame above it is refused unread (connection closed,
    counted); one within it is served. The server's default is Kafka's 100 MiB."""
    from migrator.controller.network.listener_config import start_listeners

    assert ControllerServer.__init__.__kwdefaults__["max_request_bytes"] == 104_857_600
    props = {"listener.security.protocol.map": "CONTROLLER:PLAINTEXT", "socket.request.max.bytes": "512"}
    running = start_listeners(Echo(), "CONTROLLER://127.0.0.1:0", props)
    try:
        [server] = running.servers
        assert server.max_request_bytes == 512
        body = wire.encode_request(M.BROKER_REGISTRATION, 0, 1, "x" * 300, registration(4))[4:]
        assert 8 < len(body) <= 512
        with raw(server) as s:  # within the limit: answered
            s.sendall(struct.pack(">i", len(body)) + body)
            assert read_frame(s)
        with raw(server) as s:  # 600 bytes: over the limit, closed before the body is read
            before = server.closed_for_errors
            padded = wire.encode_request(M.BROKER_REGISTRATION, 0, 2, "x" * 600, registration(4))
            assert len(padded) - 4 > 512
            s.sendall(padded)
            assert closed(s)
            assert server.closed_for_errors == before + 1
    finally:
        running.stop()
