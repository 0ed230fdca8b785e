"""One channel per ZooKeeper-mode broker: an in-order queue, batching, retries, a full resend on reconnect.

As Kafka's ControllerChannelManager keeps one RequestSendThread per broker, each channel owns a thread
and a connection to the broker's inter-broker endpoint, secured as the controller's inter-broker
listener settings say (`inter_broker.InterBroker`: TLS, then ApiVersions and SASL PLAIN/SCRAM through
`client_security`, as Kafka's SaslClientAuthenticator does; every reconnect redoes the handshake;
a refused handshake is reported and retried like any lost connection), and sends one round at a time, waiting for
its responses: a request, or a LeaderAndIsr and the UpdateMetadata after it, written together and
answered in order (one round trip per round, not two). What is queued meanwhile is merged: consecutive
items of one type become one request (`zk_broker_requests.merge`), and a channel behind by several
rounds sends their LeaderAndIsrs, then their UpdateMetadatas; nothing crosses a StopReplica (a
StopReplica(delete) queued before a LeaderAndIsr for a re-created topic still goes first).

A lost connection, a timeout or an unreadable answer closes the connection, waits (back-off doubling
from `backoff_ms` to `max_backoff_ms`) and connects; the queue is then dropped for the full state
(`full_state()`, asked of the propagator), because the broker may have seen any prefix of it. A new
broker epoch (the broker re-registered) does the same. STALE_CONTROLLER_EPOCH stops the channel: a newer
controller exists and this one may not speak for the cluster; other errors are counted and logged.
"""

from __future__ import annotations

import errno
import logging
import socket
import ssl
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from migrator.controller.protocol import kafka_errors as E
from migrator.controller.protocol import messages as M
from migrator.controller.protocol import wire
from migrator.controller.security.client_security import ClientSecurity, sasl_authenticate
from migrator.controller.zk_brokers import zk_broker_messages as Z
from migrator.controller.zk_brokers.zk_broker_requests import (
    Header,
    Item,
    decode_response_frame,
    encode_body,
    encode_request_frame,
    merge,
    response_errors,
)
from migrator.controller.zk_brokers.zk_broker_responses import all_clear
from migrator.errors import ZkKraftError

__all__ = ["BrokerChannel", "ChannelStatus", "ZkBrokerTarget"]

log = logging.getLogger(__name__)

#: How a connection ends when the broker closes it (a ZK-mode broker's controlled shutdown or restart
#: does, between or during our requests): expected, said in words; the raw error goes to the debug log.
_PEER_CLOSED = frozenset((errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED, errno.ESHUTDOWN))
_PEER_CLOSED_TEXT = "connection closed by the broker"

STALE_CONTROLLER_EPOCH = 11
_NAMES = {
    Z.LEADER_AND_ISR: "LeaderAndIsr",
    Z.STOP_REPLICA: "StopReplica",
    Z.UPDATE_METADATA: "UpdateMetadata",
}


@dataclass(frozen=True)
class ZkBrokerTarget:
    """Where and as whom to reach one broker."""

    broker_id: int
    broker_epoch: int
    host: str
    port: int
    versions: dict[int, int]  # apiKey → version its IBP gets


@dataclass
class ChannelStatus:
    broker_id: int
    endpoint: str
    connected: bool = False
    queued: int = 0
    sent: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    partition_errors: int = 0
    connects: int = 0
    last_error: str | None = None
    stopped: str | None = None
    acked_offset: int = -1  # the metadata offset of the last state the broker acknowledged
    #: the registered host has no address (DNS says no such name): never contacted; the propagator
    #: says it once for all such brokers, `status` lists them on one line
    unresolved: bool = False


class BrokerChannel:
    """The controller's link to one ZooKeeper-mode broker (see the module docstring)."""

    def __init__(
        self,
        target: ZkBrokerTarget,
        header: Callable[[ZkBrokerTarget], Header],
        full_state: Callable[[int, Callable[[list[Item], int], None]], None],
        *,
        request_timeout: float = 30.0,
        backoff_ms: int = 50,
        max_backoff_ms: int = 2_000,
        client_id: str = "zk2kraft-controller",
        say: Callable[[str], None] | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        self.target = target
        self.security = security if security is not None else ClientSecurity()
        self._ssl_context: ssl.SSLContext | None = None
        self._header = header
        self._full_state = full_state
        self.request_timeout = request_timeout
        self.backoff_ms = backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self.client_id = client_id
        self._say = say
        self._cond = threading.Condition()
        self._queue: deque[tuple[Item, int]] = deque()  # (item, metadata offset it reflects)
        self._needs_full = True
        self._covered = -1  # the newest offset whose changes are queued or sent
        self._sock: socket.socket | None = None
        self._correlation = 0
        self._stop = threading.Event()
        self._busy = False
        self.status = ChannelStatus(target.broker_id, f"{target.host}:{target.port}")
        self._thread = threading.Thread(target=self._run, name=f"zk-broker-{target.broker_id}", daemon=True)

    # -- the propagator's side -----------------------------------------------------------------

    def start(self) -> BrokerChannel:
        self._thread.start()
        return self

    def enqueue(self, items: list[Item], offset: int) -> None:
        """Queue what changed at `offset` (nothing, if the change does not concern this broker)."""
        with self._cond:
            if self.status.stopped or self._needs_full:
                return  # the full state about to be sent covers these
            self._covered = max(self._covered, offset)
            self._queue.extend((it, offset) for it in items if it.size() or it.live_brokers or it.full)
            self.status.queued = len(self._queue)
            if not self._queue and not self._busy:
                self.status.acked_offset = max(self.status.acked_offset, offset)
            self._cond.notify_all()

    def retarget(self, target: ZkBrokerTarget) -> None:
        """The broker re-registered (new epoch) or moved: reconnect and send it everything again."""
        with self._cond:
            moved = (target.host, target.port) != (self.target.host, self.target.port)
            self.target = target
            self._needs_full = True
            self._queue.clear()
            self.status.queued = 0
            self.status.endpoint = f"{target.host}:{target.port}"
            self.status.stopped = None
            self._cond.notify_all()
        if moved:
            self._close()

    def _install_full(self, items: list[Item], offset: int) -> None:
        """The propagator's full state for this broker (called under its lock): replaces the queue."""
        with self._cond:
            self._queue.clear()
            self._queue.extend((it, offset) for it in items)
            self._needs_full = False
            self._covered = max(self._covered, offset)
            self.status.queued = len(self._queue)
            self._cond.notify_all()

    def idle(self) -> bool:
        """Nothing queued, nothing in flight, no full state owed (and connected)."""
        with self._cond:
            return not self._queue and not self._busy and not self._needs_full and self._sock is not None

    def stop(self, wait: bool = True) -> None:
        """Stop sending; with `wait`, until the thread is gone (a peer that never answers holds it at
        most until its socket is closed here)."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._close()
        if wait and self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    # -- the channel's thread ------------------------------------------------------------------

    def _note(self, text: str) -> None:
        if self._say is not None:
            self._say(f"ZK broker {self.target.broker_id}: {text}")

    def _close(self) -> None:
        sock, self._sock = self._sock, None
        self.status.connected = False
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def _run(self) -> None:
        backoff = self.backoff_ms
        while not self._stop.is_set():
            if self._sock is None:
                t = self.target
                try:
                    self._connect(t)
                    self.status.connected = True
                    self.status.unresolved = False
                    self.status.connects += 1
                except (OSError, ValueError, struct.error, ZkKraftError, wire.WireError) as e:
                    self._close()
                    self.status.unresolved = isinstance(e, socket.gaierror)
                    self._failed(
                        f"cannot connect to {t.host}:{t.port} ({self.security.security_protocol}): {e}"
                    )
                    self._stop.wait(backoff / 1000)
                    backoff = min(backoff * 2, self.max_backoff_ms)
                    continue
            batches = self._next_batches()
            if not batches:
                continue
            sent_on = self._sock
            try:
                self._send(batches)
                backoff = self.backoff_ms
            except (OSError, ValueError) as e:
                what = "+".join(_NAMES[b[0].api_key] for b in batches)
                log.debug("ZK broker %s: %s: %r", self.target.broker_id, what, e)
                if self._stop.is_set() or self._sock is not sent_on:
                    # Closed on our side (the broker left /brokers/ids, or re-registered elsewhere):
                    # not the broker's failure, and [Errno 9] Bad file descriptor said nothing useful.
                    pass
                elif _peer_closed(e):
                    self._interrupted(what)
                else:
                    self._failed(f"{what}: {e}")
                self._close()
                with self._cond:
                    self._needs_full = True  # the broker saw some prefix: start again from the whole
                    self._queue.clear()
                    self._busy = False
                self._stop.wait(backoff / 1000)
                backoff = min(backoff * 2, self.max_backoff_ms)

    def _connect(self, t: ZkBrokerTarget) -> None:
        """TCP, then TLS and SASL as the inter-broker listener wants (Kafka's clientChannelBuilder).
        The socket is ours from the start, so `stop` can close it mid-handshake."""
        sec = self.security
        sock = socket.create_connection((t.host, t.port), timeout=self.request_timeout)
        self._sock = sock
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if sec.tls:
            if self._ssl_context is None:
                self._ssl_context = sec.ssl_context()
            sock = self._ssl_context.wrap_socket(sock, server_hostname=t.host)
            self._sock = sock
        if not sec.sasl:
            return

        def round_trip(frame: bytes) -> bytes:
            sock.sendall(frame)
            (size,) = struct.unpack(">i", _recv(sock, 4))
            if size < 4 or size > 1 << 20:
                raise ValueError(f"response size {size} during the SASL handshake")
            return _recv(sock, size)

        def next_id() -> int:
            self._correlation += 1
            return self._correlation

        # Kafka's SaslClientAuthenticator asks ApiVersions first (the SaslHandshake version to use).
        cid = next_id()
        request = M.ApiVersionsRequest("zk2kraft", "1")
        frame = wire.encode_request(M.API_VERSIONS, 3, cid, self.client_id, request)
        got, resp = wire.decode_response(M.API_VERSIONS, 3, round_trip(frame))
        if got != cid or resp.error_code != E.NONE:
            raise ValueError(f"ApiVersions before SASL: error {resp.error_code}, correlation id {got}")
        sasl_authenticate(round_trip, next_id, self.client_id, sec, peer=f"broker {t.broker_id}")

    def _interrupted(self, what: str) -> None:
        """The broker closed the connection mid-request, as a broker shutting down or restarting does:
        one line in words (once per run of them); it gets the whole state again when it is back."""
        text = (
            f"closed the connection during {what} (a broker shutting down or restarting does); "
            "it gets the whole metadata again when it is back"
        )
        first = self.status.last_error != text
        self.status.errors += 1  # still a request that did not land: counted, and retried
        self.status.last_error = text
        if first:
            self._note(text)

    def _failed(self, text: str) -> None:
        first = self.status.last_error != text
        self.status.errors += 1
        self.status.last_error = text
        if first and not self.status.unresolved:
            self._note(text)

    def _next_batches(self) -> list[tuple[Item, int, int]]:
        """Wait for work; the merged run at the head of the queue, and when it is a LeaderAndIsr the
        UpdateMetadata run after it: (item, its oldest offset, its newest offset) each. Both are
        written at once and their responses read in order (a broker answers a connection's requests
        one at a time, in order), so a round costs one round trip, not two."""
        first = self._next_batch()
        if first is None:
            return []
        out = [first]
        if first[0].api_key == Z.LEADER_AND_ISR:
            with self._cond:
                if self._queue and self._queue[0][0].api_key == Z.UPDATE_METADATA:
                    run: list[Item] = []
                    oldest = self._queue[0][1]
                    offset = oldest
                    while self._queue and self._queue[0][0].api_key == Z.UPDATE_METADATA:
                        it, offset = self._queue.popleft()
                        run.append(it)
                    self.status.queued = len(self._queue)
                    out.append((merge(run) if len(run) > 1 else run[0], oldest, offset))
        return out

    def _next_batch(self) -> tuple[Item, int, int] | None:
        """Wait for work; returns the merged run of same-type items at the head of the queue."""
        while not self._stop.is_set():
            with self._cond:
                need_full = self.status.stopped is None and self._needs_full
                ready = bool(self._queue) and self.status.stopped is None
                if not need_full and not ready:
                    self._cond.wait(0.5)
                    continue
            if need_full:
                # Outside our lock: the propagator takes its own lock, then ours (as enqueue does).
                self._full_state(self.target.broker_id, self._install_full)
                continue
            with self._cond:
                if not self._queue or self.status.stopped is not None:
                    continue
                first, offset = self._queue.popleft()
                oldest = offset
                run = [first]
                if first.api_key == Z.LEADER_AND_ISR:
                    offset = self._take_leader_and_isr(run, offset)
                while self._queue and self._queue[0][0].api_key == first.api_key:
                    it, offset = self._queue.popleft()
                    run.append(it)
                self.status.queued = len(self._queue)
                self._busy = True
            return (merge(run) if len(run) > 1 else first), oldest, offset
        return None

    def _take_leader_and_isr(self, run: list[Item], offset: int) -> int:
        """Behind by several rounds ([LAI, UM, LAI, UM, ...]): every LeaderAndIsr queued before the
        next StopReplica joins `run`, so they go as one request, then the UpdateMetadatas as one (as
        if the rounds had been one). Later leadership is thereby sent before older metadata, never
        metadata before its leadership (Kafka's order within a round), and never across a
        StopReplica (a topic deleted and re-created). Returns the newest offset taken."""
        keep: list[tuple[Item, int]] = []
        while self._queue and self._queue[0][0].api_key != Z.STOP_REPLICA:
            it, at = self._queue.popleft()
            if it.api_key == Z.LEADER_AND_ISR:
                run.append(it)
                offset = at
            else:
                keep.append((it, at))
        self._queue.extendleft(reversed(keep))
        return offset

    def _send(self, batches: list[tuple[Item, int, int]]) -> None:
        sock = self._sock
        if sock is None:
            raise OSError("not connected")
        t = self.target
        header = self._header(t)
        frames, sent = [], []
        for item, oldest, offset in batches:
            version = t.versions[item.api_key]
            body = encode_body(item, version, header, shared=item.shared)
            self._correlation += 1
            frames.append(
                encode_request_frame(item.api_key, version, self._correlation, self.client_id, body)
            )
            sent.append((item, version, self._correlation, oldest, offset))
        sock.settimeout(self.request_timeout)
        sock.sendall(b"".join(frames) if len(frames) > 1 else frames[0])
        for n, (item, version, cid, _, offset) in enumerate(sent):
            (size,) = struct.unpack(">i", _recv(sock, 4))
            if size < 4 or size > 64 << 20:
                raise ValueError(f"response size {size}")
            payload = _recv(sock, size)
            # Nothing failed (nearly always): the bytes say so without kio's entity per partition.
            got = all_clear(item.api_key, version, payload)
            if got is not None:
                top, failed = E.NONE, []
            else:
                got, resp = decode_response_frame(item.api_key, version, payload)
                top, failed = response_errors(item.api_key, resp)
            if got != cid:
                raise ValueError(f"correlation id {got}, expected {cid}")
            later = [b[3] for b in sent[n + 1 :]]  # oldest offsets still in flight after this one
            self._answered(item, version, top, failed, offset, later)

    def _answered(
        self,
        item: Item,
        version: int,
        top: int,
        failed: list[tuple[str, int, int]],
        offset: int,
        in_flight: list[int],
    ) -> None:
        name = _NAMES[item.api_key]
        with self._cond:
            self._busy = bool(in_flight)
            self.status.sent[name] = self.status.sent.get(name, 0) + 1
            if top == STALE_CONTROLLER_EPOCH:
                self.status.stopped = "STALE_CONTROLLER_EPOCH: a newer controller exists"
                self._queue.clear()
                self.status.queued = 0
                self._failed(f"{name} v{version}: {self.status.stopped}; channel stopped")
                return
            if top != E.NONE:
                self._failed(f"{name} v{version}: error {top}")
                return
            if failed:
                self.status.partition_errors += len(failed)
                self._failed(f"{name} v{version}: {len(failed)} partition errors, first {failed[0]}")
                return
            # Acknowledged up to `offset`, or to just before the oldest item still in flight or
            # queued (a LeaderAndIsr may have been taken ahead of older UpdateMetadata); with
            # nothing left, up to every offset handed to us.
            pending = in_flight + ([self._queue[0][1]] if self._queue else [])
            done = min(offset, min(pending) - 1) if pending else max(offset, self._covered)
            self.status.acked_offset = max(self.status.acked_offset, done)


def _peer_closed(e: BaseException) -> bool:
    return isinstance(e, OSError) and (e.errno in _PEER_CLOSED or str(e) == _PEER_CLOSED_TEXT)


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError(_PEER_CLOSED_TEXT)
        buf += chunk
    return bytes(buf)


def wait_until(predicate: Callable[[], bool], timeout: float) -> bool:
    """Poll `predicate` until it holds or `timeout` seconds pass (tests and status)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()
