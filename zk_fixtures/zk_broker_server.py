"""A simulated ZooKeeper-mode broker's inter-broker listener: LeaderAndIsr, UpdateMetadata, StopReplica.

What a Kafka 3.9 ZK-mode broker does with its controller's requests, for the parts the controller can
observe: the metadata cache (ZkMetadataCache: partition states and live brokers; UpdateMetadata of Type
FULL from a KRaft controller replaces it, a partition whose leader is -2 is deleted) and the replica roles
(ReplicaManager's becomeLeaderOrFollower: a partition's leader epoch only moves forward, and an equal one
only from a KRaft controller, which sends ISR changes; LeaderAndIsr of Type FULL from a KRaft controller
first drops, as stray, partitions it omits or names under another topic id; StopReplica(delete) removes
the replica). Type is read from the request's bytes with Kafka's own values (AbstractControlRequest.Type:
UNKNOWN 0, INCREMENTAL 1, FULL 2, anything else UNKNOWN), written out here rather than taken from the
controller's constants, so a wrong value on the controller's side shows. A request from an older controller epoch than the newest seen
is refused with STALE_CONTROLLER_EPOCH, one naming an older broker epoch than the broker's own with
STALE_BROKER_EPOCH, as KafkaApis does.

The listener is served as a broker's `listeners` entry of that name is: PLAINTEXT, or with a
`ListenerSecurity` (`BrokerSimulator(inter_broker_props=...)`: built from broker-style properties by the controller's
own listener code) over SSL and/or SASL (ApiVersions, SaslHandshake, SaslAuthenticate first; SCRAM
credentials looked up as a ZooKeeper-mode broker finds them, in ZooKeeper's /config/users).
"""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kio.serial import entity_reader

from migrator.controller.protocol import messages as M
from migrator.controller.protocol import wire
from migrator.controller.protocol.fast_writer import encode_fast
from migrator.controller.security.listener_security import ConnectionSecurity, ListenerSecurity
from migrator.controller.security.sasl_session import Accept
from migrator.controller.zk_brokers import zk_broker_messages as Z
from migrator.controller.zk_brokers.zk_broker_requests import LEADER_DURING_DELETE, bulk
from migrator.controller.zk_brokers.zk_broker_requests import encode_entity as write_entity

__all__ = ["CachedPartition", "ZkBrokerCache", "ZkBrokerServer"]

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
STALE_CONTROLLER_EPOCH = 11
FENCED_LEADER_EPOCH = 74
STALE_BROKER_EPOCH = 77
Key = tuple[str, int]

# Kafka 3.9's AbstractControlRequest.Type, written out here rather than taken from the controller's
# constants so that this stand-in cannot share a mistake with the controller it checks.
REQUEST_UNKNOWN = "UNKNOWN"
REQUEST_INCREMENTAL = "INCREMENTAL"
REQUEST_FULL = "FULL"
_REQUEST_TYPES = {1: REQUEST_INCREMENTAL, 2: REQUEST_FULL}


def request_type(req: Any) -> str:
    """`AbstractControlRequest.Type.fromByte` of a request's Type field (0 when the version has none);
    a byte Kafka does not know is UNKNOWN, as `fromByte` reads it."""
    return _REQUEST_TYPES.get(int(getattr(req, "type", 0)), REQUEST_UNKNOWN)


def full_from_kraft(req: Any) -> bool:
    """A request a ZK-mode broker in migration treats as full: Type FULL from a KRaft controller (the
    condition of ZkMetadataCache.updateMetadata and ReplicaManager.becomeLeaderOrFollower)."""
    return request_type(req) == REQUEST_FULL and bool(getattr(req, "is_k_raft_controller", False))


class CachedPartition(NamedTuple):
    """A partition as the metadata cache holds it (a tuple: a FULL UpdateMetadata makes 100,000)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]


@dataclass
class ZkBrokerCache:
    """One broker's view: metadata cache, replica roles, and the controller it follows."""

    broker_id: int
    broker_epoch: Callable[[], int]
    controller_epoch: int = -1
    controller_id: int = -1
    partitions: dict[Key, CachedPartition] = field(default_factory=dict)
    topic_ids: dict[str, Any] = field(default_factory=dict)
    live_brokers: dict[int, tuple[tuple[str, str, int], ...]] = field(default_factory=dict)
    #: partitions this broker replicates: key → (leader?, leader epoch, partition epoch)
    roles: dict[Key, tuple[bool, int, int]] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        """An empty disk: nothing known, nothing replicated (the controller's epoch too)."""
        with self.lock:
            self.partitions.clear()
            self.roles.clear()
            self.live_brokers.clear()
            self.controller_epoch = -1

    def told_to_lead(self, key: Key, leader_epoch: int) -> bool:
        """LeaderAndIsr made this broker the leader of `key`, at `leader_epoch` or later."""
        with self.lock:
            role = self.roles.get(key)
            return role is not None and role[0] and role[1] >= leader_epoch

    def replicates(self, key: Key) -> bool:
        with self.lock:
            return key in self.roles

    def leads(self) -> set[Key]:
        with self.lock:
            return {k for k, (lead, _, _) in self.roles.items() if lead}

    def _control(self, name: str, req: Any) -> int:
        """KafkaApis' checks before any request is applied; the top-level error."""
        self.requests[name] = self.requests.get(name, 0) + 1
        if req.controller_epoch < self.controller_epoch:
            self.refused[name] = self.refused.get(name, 0) + 1
            return STALE_CONTROLLER_EPOCH
        own = self.broker_epoch()
        sent = getattr(req, "broker_epoch", -1)
        if sent != -1 and sent < own:
            self.refused[name] = self.refused.get(name, 0) + 1
            return STALE_BROKER_EPOCH
        self.controller_epoch = req.controller_epoch
        self.controller_id = req.controller_id
        return NONE

    def leader_and_isr(self, version: int, req: Any) -> Any:
        resp_cls = Z.LEADER_AND_ISR_RESPONSE[version]
        with self.lock:
            top = self._control("LeaderAndIsr", req)
            states: list[tuple[str, Any, Any]] = []  # (topic, topic id, state)
            if version <= 1:
                states = [(s.topic_name, None, s) for s in req.ungrouped_partition_states]
            else:
                for t in req.topic_states:
                    tid = getattr(t, "topic_id", None)
                    states += [(t.topic_name, tid, s) for s in t.partition_states]
            errors: list[tuple[str, Any, int, int]] = []
            if top == NONE:
                if full_from_kraft(req):
                    # LogManager.findStrayReplicas, before anything else: a hosted partition the request
                    # omits, or names under another topic id, is stray and leaves the broker.
                    named = {(t, int(s.partition_index)): tid for t, tid, s in states}
                    for key in list(self.roles):
                        if key not in named or named[key] != self.topic_ids.get(key[0], named[key]):
                            del self.roles[key]
                for topic, tid, s in states:
                    kraft = bool(getattr(req, "is_k_raft_controller", False))
                    errors.append((topic, tid, s.partition_index, self._become(topic, tid, s, kraft)))
            else:
                errors = [(t, tid, s.partition_index, top) for t, tid, s in states]
        if version <= 4:
            return resp_cls(
                error_code=top,
                partition_errors=tuple(
                    resp_cls.PartitionError(topic_name=t, partition_index=p, error_code=e)
                    for t, _, p, e in errors
                ),
            )
        by_id: dict[Any, list[Any]] = {}
        for _, tid, p, e in errors:
            by_id.setdefault(tid, []).append(resp_cls.PartitionError(partition_index=p, error_code=e))
        return resp_cls(
            error_code=top,
            topics=tuple(
                resp_cls.TopicError(topic_id=tid, partition_errors=tuple(ps)) for tid, ps in by_id.items()
            ),
        )

    def _become(self, topic: str, tid: Any, s: Any, kraft: bool) -> int:
        """ReplicaManager.becomeLeaderOrFollower for one partition (Kafka 3.9): a newer leader epoch, or
        the same one from a KRaft controller (an ISR change), is applied; an older one is refused."""
        key = (topic, int(s.partition_index))
        current = self.roles.get(key)
        epoch = int(s.leader_epoch)
        have = current[1] if current is not None else -1
        if epoch > have or (epoch == have and kraft):
            if self.broker_id not in s.replicas:
                return UNKNOWN_TOPIC_OR_PARTITION
            self.roles[key] = (int(s.leader) == self.broker_id, epoch, int(s.partition_epoch))
            if tid is not None:
                self.topic_ids[topic] = tid
            return NONE
        return STALE_CONTROLLER_EPOCH  # the leader epoch only moves forward

    def update_metadata(self, version: int, req: Any) -> Any:
        with self.lock:
            top = self._control("UpdateMetadata", req)
            if top == NONE:
                if version <= 4:
                    states = [(s.topic_name, s) for s in req.ungrouped_partition_states]
                else:
                    states = [(t.topic_name, s) for t in req.topic_states for s in t.partition_states]
                if full_from_kraft(req):
                    # transformKRaftControllerFullMetadataRequest: every topic and partition the full
                    # request omits is deleted from the cache, so the request's states are all that stay.
                    self.partitions.clear()
                parts = self.partitions
                for topic, s in states:  # decoded values are ints and tuples already
                    key = (topic, s.partition_index)
                    if s.leader == LEADER_DURING_DELETE:
                        parts.pop(key, None)
                    else:
                        parts[key] = CachedPartition(
                            s.leader, s.leader_epoch, s.isr, s.zk_version, s.replicas
                        )
                self.live_brokers = {
                    int(b.id): tuple((e.listener, e.host, int(e.port)) for e in getattr(b, "endpoints", ()))
                    for b in req.live_brokers
                }
        return Z.UPDATE_METADATA_RESPONSE[version](error_code=top)

    def stop_replica(self, version: int, req: Any) -> Any:
        resp_cls = Z.STOP_REPLICA_RESPONSE[version]
        with self.lock:
            top = self._control("StopReplica", req)
            if version == 0:
                parts = [
                    (p.topic_name, p.partition_index, -1, req.delete_partitions)
                    for p in req.ungrouped_partitions
                ]
            elif version <= 2:
                parts = [
                    (t.name, p, -1, req.delete_partitions) for t in req.topics for p in t.partition_indexes
                ]
            else:
                parts = [
                    (t.topic_name, p.partition_index, p.leader_epoch, p.delete_partition)
                    for t in req.topic_states
                    for p in t.partition_states
                ]
            errors = []
            for topic, p, epoch, delete in parts:
                err = top
                key = (topic, int(p))
                current = self.roles.get(key)
                if top == NONE and current is not None:
                    if epoch >= 0 and epoch < current[1]:
                        err = FENCED_LEADER_EPOCH
                    elif delete:
                        del self.roles[key]
                errors.append(
                    resp_cls.PartitionError(topic_name=topic, partition_index=int(p), error_code=err)
                )
        return resp_cls(error_code=top, partition_errors=tuple(errors))


#: the cache's method answering each request (looked up on the instance: a subclass may extend one)
_HANDLERS = {
    Z.LEADER_AND_ISR: "leader_and_isr",
    Z.UPDATE_METADATA: "update_metadata",
    Z.STOP_REPLICA: "stop_replica",
}


class ZkBrokerServer:
    """The inter-broker listener of one simulated broker, on a free loopback port."""

    def __init__(
        self, cache: ZkBrokerCache, host: str = "127.0.0.1", security: ListenerSecurity | None = None
    ) -> None:
        self.cache = cache
        self.security = security
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                outer._serve(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server((host, 0), Handler)
        self.address: tuple[str, int] = self._server.server_address[:2]  # type: ignore[assignment]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="zk-broker-listener", daemon=True
        )
        self._conns: set[socket.socket] = set()

    def start(self) -> ZkBrokerServer:
        self._thread.start()
        return self

    def drop_connections(self) -> None:
        """Close every accepted connection (a broker restart as the controller sees it)."""
        for conn in list(self._conns):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.drop_connections()

    def _serve(self, conn: socket.socket) -> None:
        self._conns.add(conn)
        sec: ConnectionSecurity | None = None
        try:
            if self.security is not None:
                secured = self.security.connection(conn, str(conn.getpeername()[0]))
                if secured is None:
                    return  # a failed TLS handshake (counted in security.refused)
                self._conns.discard(conn)
                conn, sec = secured
                self._conns.add(conn)
                conn.settimeout(None)
            while True:
                head = _recv(conn, 4)
                if head is None:
                    return
                (size,) = struct.unpack(">i", head)
                frame = _recv(conn, size)
                if frame is None:
                    return
                answer, close = (self._answer(frame), False) if sec is None else self._secured(frame, sec)
                if answer is not None:
                    conn.sendall(answer)
                if answer is None or close:
                    return
        except OSError:
            return
        finally:
            self._conns.discard(conn)

    def _secured(self, frame: bytes, sec: ConnectionSecurity) -> tuple[bytes | None, bool]:
        """A request on a secured listener: SASL's exchanges first (a SASL listener serves nothing
        else until authenticated, as Kafka's SaslServerAuthenticator), then the controller's.
        (The answer or None, close after it): a failed authentication is answered, then closed."""
        header, pos = wire.decode_request_header(frame)
        accept = sec.accept(header.api_key)
        if accept is Accept.CLOSE:
            return None, True
        if header.api_key == M.API_VERSIONS:
            ranges = {k: (lo, hi) for k, (lo, hi, _) in Z.VERSIONS.items()}
            ranges.update({M.API_VERSIONS: (0, 3), **self._security_versions()})
            answer = wire.encode_response(header, M.ApiVersionsResponse(0, wire.supported_ranges(ranges)))
            sec.api_versions_answered()
            return answer, False
        if accept is Accept.SASL:
            return sec.sasl_answer(header.api_key, header.api_version, header.correlation_id, frame, pos)
        return self._answer(frame), False

    def _security_versions(self) -> dict[int, tuple[int, int]]:
        return self.security.extra_versions() if self.security is not None else {}

    def _answer(self, frame: bytes) -> bytes:
        api_key, version = struct.unpack_from(">hh", frame, 0)
        with bulk(len(frame) // 32):  # ~32 bytes a partition: a full request is decoded without GC
            header, pos = entity_reader(Z.request_header_class(api_key, version))(frame, 0)
            req, _ = entity_reader(Z.request_class(api_key, version))(frame, pos)
            resp = getattr(self.cache, _HANDLERS[api_key])(version, req)
        hcls = Z.response_header_class(api_key, version)
        payload = write_entity(hcls, hcls(correlation_id=header.correlation_id)) + encode_fast(
            Z.response_class(api_key, version), resp
        )
        return struct.pack(">i", len(payload)) + payload


def _recv(conn: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)
