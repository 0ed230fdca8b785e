"""One voter on the network: its poll loop, its listener for the voter APIs, one sender per peer.

Kafka's KafkaRaftClientDriver and KafkaNetworkChannel in small: the `RaftVoter` is single-threaded, so
every call into it holds the driver's lock; the poll thread sleeps until the voter's next deadline or
until an answer or a request wakes it. A peer gets one request at a time on its own connection (as
Kafka's RequestManager allows one in flight), sent at the highest version Kafka 3.9 speaks (Vote,
BeginQuorumEpoch, EndQuorumEpoch v1, Fetch v17); it answers ApiVersions, which Kafka's NetworkClient asks
before anything else, with those ranges. A leader holds a voter's Fetch that has nothing new
for up to its MaxWaitMs, as Kafka's fetch purgatory does, so idle followers do not spin.

Plaintext only, and the log is the caller's: as leader, ``read_log`` decides whether a Fetch's (offset,
epoch) is valid and which record batches go back; as follower, ``append_records`` takes the batches a
Fetch answer brought. Without them the voter has no log (elections only).
"""

from __future__ import annotations

import logging
import queue
import socket
import struct
import threading
from collections.abc import Callable, Mapping
from typing import Any

from migrator.controller.protocol import messages as M
from migrator.controller.protocol import wire
from migrator.controller.protocol.wire_versions import MAX_FRAME_BYTES, WireError
from migrator.controller.raft import voter_wire as W
from migrator.controller.raft.describe import describe_quorum
from migrator.controller.raft.quorum_config import VoterEndpoint
from migrator.controller.raft.voter import Outbound, RaftVoter
from migrator.controller.raft.voter_messages import (
    NONE,
    BeginQuorumEpochRequest,
    DescribeQuorumRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    VoteRequest,
)

__all__ = ["VoterDriver"]

log = logging.getLogger("zk2kraft.controller.raft.driver")

_SIZE = struct.Struct(">i")
_KEY = struct.Struct(">h")
#: the version each request goes out at (the highest of Kafka 3.9's raft client)
_SEND_VERSION = {W.VOTE: 1, W.BEGIN_QUORUM_EPOCH: 1, W.END_QUORUM_EPOCH: 1, W.FETCH: 17}
_MAX_SLEEP_S = 0.1
UNSUPPORTED_VERSION = 35


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return bytes(buf)


def _read_frame(sock: socket.socket) -> bytes:
    (size,) = _SIZE.unpack(_recv(sock, 4))
    if not 8 <= size <= MAX_FRAME_BYTES:
        raise WireError(f"a frame of {size} bytes")
    return _recv(sock, size)


class VoterDriver:
    def __init__(
        self,
        voter: RaftVoter,
        listener: socket.socket,
        peers: Mapping[int, VoterEndpoint],
        read_log: Callable[[FetchRequest], tuple[bool, bytes]] | None = None,
        on_event: Callable[[tuple[Any, ...]], None] | None = None,
        append_records: Callable[[bytes], None] | None = None,
    ) -> None:
        self.voter = voter
        self.listener = listener
        self.peers = {i: p for i, p in peers.items() if i != voter.node_id}
        self.read_log = read_log or (lambda _req: (True, b""))
        self.on_event = on_event
        self.append_records = append_records  # a follower's log: the batches a Fetch answer brought
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._closing = threading.Event()
        self._threads: list[threading.Thread] = []
        self._queues: dict[int, queue.Queue[Outbound | None]] = {i: queue.Queue() for i in self.peers}
        self._sockets: set[socket.socket] = set()

    # -- life -----------------------------------------------------------------------------------------

    def start(self) -> None:
        with self.lock:
            self.voter.start()
        name = f"raft-{self.voter.node_id}"
        self._spawn(self._poll_loop, f"{name}-poll")
        self._spawn(self._accept_loop, f"{name}-accept")
        for peer in self.peers:
            self._spawn(self._send_loop, f"{name}-to-{peer}", peer)

    def _spawn(self, target: Callable[..., None], name: str, *args: Any) -> None:
        t = threading.Thread(target=target, args=args, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def stop(self, graceful_ms: int = 0) -> None:
        """Stop: with ``graceful_ms``, first hand over as Kafka's controlled shutdown does (a leader
        resigns and waits for the next leader, up to that long); without, at once, as a crash would."""
        if graceful_ms > 0 and not self._closing.is_set():
            with self.changed:
                self.voter.shutdown(graceful_ms)
                self.changed.notify_all()
                self.changed.wait_for(self.voter.shutdown_complete, timeout=graceful_ms / 1000 + 1)
        self._closing.set()
        for q in self._queues.values():
            q.put(None)
        for s in [self.listener, *list(self._sockets)]:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        with self.changed:
            self.changed.notify_all()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=5)

    # -- the poll loop ----------------------------------------------------------------------------------

    def _poll_loop(self) -> None:
        while not self._closing.is_set():
            with self.lock:
                epoch = self.voter.epoch
                try:
                    out, wait_ms = self.voter.poll()
                except Exception as e:  # Kafka's raft thread would die here; keep going, loudly
                    log.error("voter %d: poll failed: %s: %s", self.voter.node_id, type(e).__name__, e)
                    out, wait_ms = [], 100
                events = list(self.voter.events)
                self.voter.events.clear()
                if self.voter.epoch != epoch:
                    self.changed.notify_all()  # parked fetches answer now: the epoch changed
            for ev in events:
                if self.on_event is not None:
                    self.on_event(ev)
            for o in out:
                self._queues[o.destination].put(o)
            with self.changed:
                if not self._closing.is_set():
                    self.changed.wait(min(wait_ms / 1000, _MAX_SLEEP_S))

    # -- requests out -------------------------------------------------------------------------------------

    def _send_loop(self, peer: int) -> None:
        sock: socket.socket | None = None
        q = self._queues[peer]
        timeout_s = self.voter.config.request_timeout_ms / 1000
        while True:
            o = q.get()
            if o is None or self._closing.is_set():
                break
            api = W._API_OF[type(o.request)]
            version = _SEND_VERSION[api]
            try:
                if sock is None:
                    ep = self.peers[peer]
                    sock = socket.create_connection((ep.host, ep.port), timeout=timeout_s)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    self._sockets.add(sock)
                sock.sendall(
                    W.encode_request(o.request, version, o.correlation_id, f"raft-{self.voter.node_id}")
                )
                cid, resp = W.decode_response(api, version, _read_frame(sock))
                if cid != o.correlation_id:
                    raise WireError(f"an answer for correlation id {cid}, expected {o.correlation_id}")
            except (OSError, EOFError, WireError) as e:
                log.debug("voter %d: request to %d failed: %s", self.voter.node_id, peer, e)
                if sock is not None:
                    self._sockets.discard(sock)
                    sock.close()
                    sock = None
                with self.changed:
                    self.voter.on_request_failed(peer, o.correlation_id)
                    self.changed.notify_all()
                continue
            with self.changed:
                try:
                    if isinstance(resp, FetchResponse) and resp.records and self.append_records is not None:
                        if resp.partition_error == NONE and resp.leader_epoch == self.voter.epoch:
                            self.append_records(resp.records)  # first: the next Fetch starts past them
                    self.voter.handle_response(peer, cid, resp)
                except Exception as e:  # an answer the state machine refuses (TransitionError): unused
                    log.error("voter %d: answer from %d refused: %s", self.voter.node_id, peer, e)
                    self.voter.on_request_failed(peer, o.correlation_id)
                self.changed.notify_all()
        if sock is not None:
            sock.close()

    # -- requests in ----------------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _addr = self.listener.accept()
            except OSError:
                break
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sockets.add(conn)
            self._spawn(self._serve, f"raft-{self.voter.node_id}-conn", conn)

    def _serve(self, conn: socket.socket) -> None:
        try:
            while not self._closing.is_set():
                frame = _read_frame(conn)
                if _KEY.unpack_from(frame, 0)[0] == M.API_VERSIONS:
                    conn.sendall(self._api_versions(frame))
                    continue
                api, version, cid, req = W.decode_request(frame)
                conn.sendall(W.encode_response(self._answer(req), version, cid))
        except (OSError, EOFError, WireError) as e:
            log.debug("voter %d: closing a connection: %s", self.voter.node_id, e)
        except Exception as e:  # a request the state machine refuses (TransitionError): close, as Kafka would
            log.error("voter %d: closing a connection: %s: %s", self.voter.node_id, type(e).__name__, e)
        finally:
            self._sockets.discard(conn)
            conn.close()

    @staticmethod
    def _api_versions(frame: bytes) -> bytes:
        """Kafka's NetworkClient asks ApiVersions first (discoverBrokerVersions): the voter APIs' ranges.
        A version this side does not read (Kafka 3.9.2's client asks v4) is answered as v0 with
        UNSUPPORTED_VERSION and the ranges, and the client asks again at the highest one (KIP-511)."""
        header, _pos = wire.decode_request_header(frame)
        lo, hi = wire.SUPPORTED[M.API_VERSIONS]
        ranges = wire.supported_ranges({M.API_VERSIONS: (lo, hi), **W.VOTER_VERSIONS})
        if not lo <= header.api_version <= hi:
            header.api_version = 0
            return wire.encode_response(header, M.ApiVersionsResponse(UNSUPPORTED_VERSION, ranges))
        header, _req = wire.decode_request(frame)
        return wire.encode_response(header, M.ApiVersionsResponse(NONE, ranges))

    def _answer(self, req: Any) -> Any:
        with self.changed:
            v = self.voter
            if isinstance(req, VoteRequest):
                resp: Any = v.handle_vote(req)
            elif isinstance(req, BeginQuorumEpochRequest):
                resp = v.handle_begin_quorum_epoch(req)
            elif isinstance(req, EndQuorumEpochRequest):
                resp = v.handle_end_quorum_epoch(req)
            elif isinstance(req, DescribeQuorumRequest):
                return describe_quorum(v.state, v.config, req, v.clock())
            else:
                resp = self._fetch(req)
            self.changed.notify_all()  # the poll loop looks at the new state at once
            return resp

    def _fetch(self, req: FetchRequest) -> FetchResponse:
        """Answer now if there is something to hand out or an error; else hold it up to MaxWaitMs, or
        until the epoch changes or the driver stops (the caller holds the lock)."""
        valid, records = self.read_log(req)
        resp = self.voter.handle_fetch(req, offset_valid=valid)
        if resp.partition_error != NONE or records or not valid or req.max_wait_ms == 0:
            return FetchResponse(**{**_fields(resp), "records": records})
        epoch = self.voter.epoch
        self.changed.wait_for(
            lambda: self._closing.is_set() or self.voter.epoch != epoch or bool(self.read_log(req)[1]),
            timeout=req.max_wait_ms / 1000,
        )
        valid, records = self.read_log(req)
        resp = self.voter.handle_fetch(req, offset_valid=valid)
        return FetchResponse(**{**_fields(resp), "records": records})


def _fields(resp: FetchResponse) -> dict[str, Any]:
    return {name: getattr(resp, name) for name in resp.__dataclass_fields__}
