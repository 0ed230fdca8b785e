"""Simulated ZooKeeper-mode Kafka brokers that talk to the controller over Kafka's protocol.

What a migrating broker does to its controller, and only that: it registers (incarnation id, features
with its metadata.version range, `is_migrating_zk_broker`, listeners, rack, log directories), it
heartbeats, and for the partitions it holds it behaves as a leader or a follower. Followers fetch
from their leader, each fetch carrying the follower's broker epoch (KIP-903); a leader adds a
follower that has caught up to the ISR and drops one that stops fetching, with AlterPartition v3
(ISR members with the epochs their fetches carried). A broker can crash, reboot with an empty disk
(a new incarnation, so a new broker epoch, and nothing on disk to be in sync with), or lose a log
directory (AlterReplicaState: its replicas there go offline).

Its lifecycle follows Kafka's BrokerLifecycleManager: one request at a time (registration and heartbeats
are serialized, as its single event queue does), and a controlled shutdown asks `wantShutDown` on every
heartbeat until the controller answers `shouldShutDown`, after which it sends nothing more; it comes back
only as a new incarnation with a new registration (`reboot`, `KraftSimBroker.restarted_from`).

The heartbeat design's self-fencing: a broker that has not reached the controller for longer than
its own timeout stops serving (no fetches answered, no leadership exercised) until a heartbeat
succeeds again.

Partition state is learned from ZooKeeper's partition state znodes, which the controller keeps
current through its dual writes. With `inter_broker=True` each broker also serves the controller's
LeaderAndIsr/UpdateMetadata/StopReplica (zk_fixtures.zk_broker_server), as a ZooKeeper-mode broker
learns its roles, and then leads and fetches only as LeaderAndIsr told it.

In process: `BrokerSimulator(...).start()`, `step()` for a deterministic round. As a process:
`python -m zk_fixtures.broker_sim --controller HOST:PORT --zookeeper CONNECT --cluster-id ID --brokers 1,2,3`
(prints ``ready`` once every broker is registered; SIGKILL it to crash them all).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from migrator.controller.client.client import ControllerClient, ControllerUnreachable
from migrator.controller.network.listener_config import listener_specs, protocol_map
from migrator.controller.protocol import messages as M
from migrator.controller.protocol.kafka_errors import name_of
from migrator.controller.security.client_security import ClientSecurity, SaslRefused, from_client_properties
from migrator.errors import BadInputError, UnreachableError, ZkKraftError
from migrator.kraft.records import kafka_to_uuid
from migrator.model import ClusterImage, ScramCredential
from migrator.properties import read_properties
from migrator.zk import paths
from migrator.zk.codec import decode_scram
from migrator.zk.connection import ZkSecurity, close, connect
from migrator.zk.reader import read_cluster
from zk_fixtures.zk_broker_server import ZkBrokerCache, ZkBrokerServer

__all__ = ["BrokerSimulator", "PartitionView", "SimBroker", "listeners_of", "read_partitions"]

log = logging.getLogger("zk2kraft.broker_sim")

Key = tuple[str, int]
READY = "ready"
#: Kafka 3.9's metadata.version range for a ZooKeeper-mode broker at IBP 3.9 (3.0-IV1 .. 3.9-IV0).
DEFAULT_MV_RANGE = (1, 21)
DUPLICATE_BROKER_REGISTRATION = 101
#: Kafka's BrokerState names for the lifecycle manager's states the simulator goes through
RUNNING, PENDING_CONTROLLED_SHUTDOWN, SHUTTING_DOWN = (
    "RUNNING",
    "PENDING_CONTROLLED_SHUTDOWN",
    "SHUTTING_DOWN",
)


@dataclass
class PartitionView:
    topic: str
    topic_id: uuid.UUID
    partition: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int

    @property
    def key(self) -> Key:
        return (self.topic, self.partition)


SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def listeners_of(image: ClusterImage) -> tuple[dict[int, list[M.Listener]], dict[int, str | None]]:
    """Each broker's endpoints and rack as its ZooKeeper registration has them (what it registers)."""
    listeners = {
        b.id: [
            M.Listener(e.listener, e.host, e.port, SECURITY_PROTOCOLS.get(e.security_protocol, 0))
            for e in b.endpoints
        ]
        for b in image.brokers.values()
    }
    return listeners, {b.id: b.rack for b in image.brokers.values()}


def with_listener(
    listeners: list[M.Listener],
    broker_id: int,
    address: tuple[str, int],
    name: str = "PLAINTEXT",
    protocol: str = "PLAINTEXT",
) -> list[M.Listener]:
    """`listeners` with the one named `name` (added if missing) at `address` with `protocol`: the
    inter-broker listener the simulated broker serves."""
    out = list(listeners) or [M.Listener("PLAINTEXT", f"broker-{broker_id}.sim", 9092, 0)]
    moved = M.Listener(name, address[0], address[1], SECURITY_PROTOCOLS[protocol])
    i = next((i for i, x in enumerate(out) if x.name == name), None)
    if i is None:
        return [*out, moved]
    out[i] = moved
    return out


class ZkCredentials:
    """A ZooKeeper-mode broker's SCRAM credentials: `/config/users/<user>`, read at each login (what its
    credential cache holds). Shaped as the controller listener's handler (`handler.image.scram_credentials
    .get((user, mechanism))`), so the listener code builds the simulated brokers' SASL unchanged."""

    def __init__(self, client: Callable[[], KazooClient]) -> None:
        self._client = client

    @property
    def image(self) -> ZkCredentials:
        return self

    @property
    def scram_credentials(self) -> ZkCredentials:
        return self

    def get(self, key: tuple[str, str]) -> ScramCredential | None:
        user, mechanism = key
        path = paths.config_entity_path(paths.CONFIG_TYPE_USERS, paths.sanitize(user))
        try:
            data, _ = self._client().get(path)
        except NoNodeError:
            return None
        value = (json.loads(data).get("config") or {}).get(mechanism)
        return decode_scram(path, user, mechanism, value) if value else None


def read_partitions(client: KazooClient) -> dict[Key, PartitionView]:
    """Every partition's assignment and state as ZooKeeper holds them (topics with an id only)."""
    image = read_cluster(client, strict=False).image
    out: dict[Key, PartitionView] = {}
    for topic in image.topics.values():
        if topic.topic_id is None:
            continue
        tid = kafka_to_uuid(topic.topic_id)
        for p in topic.partitions.values():
            out[(topic.name, p.partition)] = PartitionView(
                topic.name,
                tid,
                p.partition,
                list(p.replicas),
                list(p.isr),
                p.leader,
                p.leader_epoch,
                p.partition_epoch,
            )
    return out


@dataclass
class _Follower:
    epoch: int
    position: int
    round: int


@dataclass
class SimBroker:
    """One simulated broker: its registration, session, logs and replica states."""

    broker_id: int
    controller: tuple[str, int]
    cluster_id: str
    rack: str | None = None
    log_dirs: int = 2
    own_timeout_s: float = 6.0
    mv_range: tuple[int, int] = DEFAULT_MV_RANGE
    clock: Callable[[], float] = time.monotonic
    incarnation_id: uuid.UUID = field(default_factory=uuid.uuid4)
    dir_ids: list[uuid.UUID] = field(default_factory=list)
    #: the endpoints it registers; default one PLAINTEXT listener. A migrating broker registers the
    #: same endpoints it holds in /brokers/ids (the audit compares the two).
    listeners: list[M.Listener] = field(default_factory=list)
    epoch: int = -1
    alive: bool = True
    #: Kafka's BrokerState as its lifecycle manager keeps it: RUNNING, PENDING_CONTROLLED_SHUTDOWN (every
    #: heartbeat asks wantShutDown), SHUTTING_DOWN (told to stop: no more requests)
    state: str = RUNNING
    fenced_by_controller: bool = True
    last_contact: float = float("-inf")
    offline_dirs: set[int] = field(default_factory=set)
    log_end: dict[Key, int] = field(default_factory=dict)
    #: as a leader: what each follower's last fetch said (its broker epoch and position)
    followers: dict[Key, dict[int, _Follower]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    #: two connections, as a Kafka broker has: the lifecycle channel (registration, heartbeats) and the
    #: data plane's (AlterPartition, AlterReplicaState), so a long ISR update never delays a heartbeat
    _client: ControllerClient | None = None
    _life: ControllerClient | None = None
    #: how it reaches the controller's listener (TLS, SASL), as a broker's controller-listener settings say
    security: ClientSecurity | None = None
    #: the lifecycle is one conversation: registering (request and epoch) and heartbeating never overlap,
    #: so a reboot's registration and the heartbeat round's cannot both register one incarnation
    lifecycle: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.dir_ids:
            self.dir_ids = [uuid.uuid4() for _ in range(self.log_dirs)]

    # -- the controller session -----------------------------------------------------------------

    def _call(self, fn: Callable[[ControllerClient], object], lifecycle: bool = False) -> object | None:
        """One request; None when the controller cannot be reached (the session then ages)."""
        attr = "_life" if lifecycle else "_client"
        client = getattr(self, attr)
        try:
            if client is None:
                client = ControllerClient(
                    *self.controller,
                    client_id=f"broker-{self.broker_id}",
                    timeout_s=5,
                    security=self.security,
                )
                setattr(self, attr, client)
            result = fn(client)
        except (ControllerUnreachable, SaslRefused) as e:
            self.errors.append(str(e))
            del self.errors[:-20]
            if client is not None:
                client.close()
            setattr(self, attr, None)
            return None
        if lifecycle:
            self.last_contact = self.clock()
        return result

    def registration(self) -> M.BrokerRegistrationRequest:
        return M.BrokerRegistrationRequest(
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
            incarnation_id=self.incarnation_id,
            listeners=self.listeners or [M.Listener("PLAINTEXT", f"broker-{self.broker_id}.sim", 9092, 0)],
            features=[M.Feature("metadata.version", *self.mv_range)],
            rack=self.rack,
            is_migrating_zk_broker=True,
            log_dirs=[d for i, d in enumerate(self.dir_ids) if i not in self.offline_dirs],
        )

    def register(self) -> int:
        """Register this incarnation; returns Kafka's error code (-1 when unreachable)."""
        with self.lifecycle:
            resp = self._call(lambda c: c.register_broker(self.registration()), lifecycle=True)
            if resp is None:
                return -1
            assert isinstance(resp, M.BrokerRegistrationResponse)
            if resp.error_code == 0:
                self.epoch = resp.broker_epoch
            return resp.error_code

    def ensure_registered(self) -> int | None:
        """Register if this live incarnation has no epoch yet (the heartbeat round's step); None when
        it has one or is not running. Checked and done under the lifecycle lock: a reboot registering
        at the same moment is seen, not repeated (two registrations of one incarnation, the broker
        keeping the first reply's epoch while the controller holds the second, refused every heartbeat
        after as STALE_BROKER_EPOCH)."""
        with self.lifecycle:
            if not self.alive or self.epoch >= 0 or self.state == SHUTTING_DOWN:
                return None
            return self.register()

    def metadata_offset(self) -> int:
        """The metadata offset its heartbeats report: a ZooKeeper-mode broker has replayed no log, so
        its own registration's (it counts as caught up); a KRaft broker reports what it replayed."""
        return self.epoch

    def heartbeat(self, want_shut_down: bool = False) -> M.BrokerHeartbeatResponse | None:
        """One heartbeat; None when it sends none (not running, no epoch, or shutting down). In
        PENDING_CONTROLLED_SHUTDOWN every heartbeat asks wantShutDown, whoever sends it (Kafka's
        lifecycle manager sets it from its state), and `shouldShutDown` then ends the conversation."""
        with self.lifecycle:
            if not self.alive or self.epoch < 0 or self.state == SHUTTING_DOWN:
                return None
            if want_shut_down:
                self.begin_controlled_shutdown()
            req = M.BrokerHeartbeatRequest(
                self.broker_id,
                self.epoch,
                current_metadata_offset=self.metadata_offset(),
                want_fence=False,
                want_shut_down=self.state == PENDING_CONTROLLED_SHUTDOWN,
                offline_log_dirs=[self.dir_ids[i] for i in sorted(self.offline_dirs)],
            )
            resp = self._call(lambda c: c.heartbeat(req), lifecycle=True)
            if not isinstance(resp, M.BrokerHeartbeatResponse):
                return None
            if resp.error_code == 0:
                self.fenced_by_controller = resp.is_fenced
                if self.state == PENDING_CONTROLLED_SHUTDOWN and resp.should_shut_down:
                    self.state = SHUTTING_DOWN  # BrokerLifecycleManager.beginShutdown: no more heartbeats
            return resp

    def begin_controlled_shutdown(self) -> None:
        """RUNNING → PENDING_CONTROLLED_SHUTDOWN (BrokerLifecycleManager.beginControlledShutdown)."""
        with self.lifecycle:
            if self.state == RUNNING:
                self.state = PENDING_CONTROLLED_SHUTDOWN

    def controlled_shutdown(self, deadline: float, every_s: float = 0.05) -> None:
        """Kafka's controlled shutdown: wantShutDown heartbeats until the controller says stop (it moves
        leadership away first), then nothing more; the broker stops serving. TimeoutError at
        `deadline` (time.monotonic()), naming the last answer."""
        self.begin_controlled_shutdown()
        last: object = None
        while self.state != SHUTTING_DOWN:
            resp = self.heartbeat()
            last = resp if resp is not None else (self.errors[-1:] or last)
            if self.state == SHUTTING_DOWN:
                break
            if self.epoch < 0 or time.monotonic() > deadline:
                raise TimeoutError(
                    f"broker {self.broker_id}: no controlled shutdown (epoch {self.epoch}, last {last})"
                )
            time.sleep(every_s)
        self.alive = False

    @property
    def self_fenced(self) -> bool:
        """The heartbeat design: out of touch with the controller past its own timeout."""
        return self.clock() - self.last_contact > self.own_timeout_s

    @property
    def serving(self) -> bool:
        return self.alive and self.epoch >= 0 and not self.self_fenced

    # -- crashes ----------------------------------------------------------------------------------

    def crash(self) -> None:
        self.alive = False
        self.close()

    def reboot(self, empty_disk: bool = True, wait_s: float = 30.0) -> int:
        """Start again as a new incarnation; with ``empty_disk`` nothing of the logs survives.

        As a Kafka broker does, it retries registration while the controller still holds the old
        incarnation's session (DUPLICATE_BROKER_REGISTRATION until that session times out).
        """
        with self.lifecycle:  # no heartbeat round registers or heartbeats the old incarnation meanwhile
            self.crash()
            self.alive = True
            self.state = RUNNING
            self.incarnation_id = uuid.uuid4()
            self.epoch = -1
            self.fenced_by_controller = True
            self.followers.clear()
            if empty_disk:
                self.log_end.clear()
                self.offline_dirs.clear()
        deadline = self.clock() + wait_s
        while True:
            with self.lifecycle:
                if self.epoch >= 0:  # the heartbeat round registered this incarnation meanwhile
                    return 0
                code = self.register()
            if code != DUPLICATE_BROKER_REGISTRATION or self.clock() > deadline:
                return code
            time.sleep(0.2)

    def dir_of(self, key: Key) -> int:
        return hash(key) % len(self.dir_ids)

    def online(self, key: Key) -> bool:
        return self.dir_of(key) not in self.offline_dirs

    def lose_log_dir(
        self, index: int, partitions: Iterable[PartitionView]
    ) -> M.AlterReplicaStateResponse | None:
        """A failed log directory: its replicas go offline, reported with AlterReplicaState (KIP-589)."""
        self.offline_dirs.add(index)
        by_topic: dict[str, list[int]] = {}
        for p in partitions:
            if self.broker_id in p.replicas and self.dir_of(p.key) == index:
                by_topic.setdefault(p.topic, []).append(p.partition)
                self.log_end.pop(p.key, None)
        req = M.AlterReplicaStateRequest(
            self.broker_id,
            self.epoch,
            M.EVENT_OFFLINE,
            f"log directory {self.dir_ids[index]} failed",
            [M.AlterReplicaStateTopic(t, sorted(ps)) for t, ps in sorted(by_topic.items())],
        )
        resp = self._call(lambda c: c.alter_replica_state(req))
        return resp if isinstance(resp, M.AlterReplicaStateResponse) else None

    # -- the data plane --------------------------------------------------------------------------

    def produce(self, key: Key, records: int = 1) -> None:
        self.log_end[key] = self.log_end.get(key, 0) + records

    def fetch_from(self, leader: SimBroker, key: Key, round_no: int = 0) -> bool:
        """One fetch: carries this broker's epoch and copies what the leader has.

        The leader learns the follower's new position at once (a real follower's next fetch would tell
        it), so a follower that fetched since the leader's last write counts as caught up.
        """
        if not (self.serving and leader.serving and self.online(key) and leader.online(key)):
            return False
        self.log_end[key] = leader.log_end.get(key, 0)
        leader.followers.setdefault(key, {})[self.broker_id] = _Follower(
            self.epoch, self.log_end[key], round_no
        )
        return True

    def caught_up(self, key: Key, follower: int) -> bool:
        f = self.followers.get(key, {}).get(follower)
        return f is not None and f.position >= self.log_end.get(key, 0)

    def isr_request(self, view: PartitionView, new_isr: Sequence[int]) -> M.AlterPartitionRequest:
        """AlterPartition v3 for one partition: each ISR member with the epoch its fetches carried."""
        return self.isr_requests([(view, new_isr)])

    def isr_requests(self, changes: Sequence[tuple[PartitionView, Sequence[int]]]) -> M.AlterPartitionRequest:
        """One AlterPartition v3 for many partitions, as a leader batches its pending ISR changes."""
        topics: dict[uuid.UUID, M.AlterPartitionTopic] = {}
        for view, new_isr in changes:
            members = []
            for b in new_isr:
                if b == self.broker_id:
                    members.append(M.BrokerState(b, self.epoch))
                else:
                    f = self.followers.get(view.key, {}).get(b)
                    members.append(M.BrokerState(b, f.epoch if f else -1))
            part = M.AlterPartitionPartition(view.partition, view.leader_epoch, members, view.partition_epoch)
            topics.setdefault(
                view.topic_id, M.AlterPartitionTopic(None, view.topic_id, [])
            ).partitions.append(part)
        return M.AlterPartitionRequest(self.broker_id, self.epoch, list(topics.values()))

    def send_alter_partition(self, req: M.AlterPartitionRequest) -> M.AlterPartitionResponse | None:
        resp = self._call(lambda c: c.alter_partition(req, version=3))
        return resp if isinstance(resp, M.AlterPartitionResponse) else None

    def close(self) -> None:
        for attr in ("_client", "_life"):
            client = getattr(self, attr)
            if client is not None:
                client.close()
                setattr(self, attr, None)


class BrokerSimulator:
    """A set of simulated brokers and the rounds that drive them (heartbeats, fetches, ISR changes)."""

    def __init__(
        self,
        controller: tuple[str, int],
        zookeeper: str,
        cluster_id: str,
        broker_ids: Sequence[int],
        *,
        racks: dict[int, str | None] | None = None,
        listeners: dict[int, list[M.Listener]] | None = None,
        interval_s: float = 0.5,
        own_timeout_s: float = 6.0,
        lag_rounds: int = 6,
        zk_auth: Sequence[str] = (),
        inter_broker: bool = False,
        inter_broker_listener: str = "PLAINTEXT",
        inter_broker_props: Mapping[str, str] | None = None,
        inter_broker_names: Mapping[int, str] | None = None,
        security: ClientSecurity | None = None,
        zk_security: ZkSecurity | None = None,
    ) -> None:
        self.controller = controller
        self.zookeeper = zookeeper
        self.zk_auth = zk_auth
        self.zk_security = zk_security  # TLS/SASL/ACL of its ZooKeeper reads
        self.interval_s = interval_s
        self.lag_rounds = lag_rounds
        self.brokers = {
            b: SimBroker(
                b,
                controller,
                cluster_id,
                rack=(racks or {}).get(b),
                own_timeout_s=own_timeout_s,
                listeners=list((listeners or {}).get(b, [])),
                security=security,
            )
            for b in broker_ids
        }
        #: with ``inter_broker``, each broker serves LeaderAndIsr/UpdateMetadata/StopReplica on a loopback
        #: port it registers as its listener ``inter_broker_listener`` (``inter_broker_names``: another
        #: name for some brokers), and keeps the metadata cache they build; it then leads and fetches
        #: only as LeaderAndIsr told it (not as ZooKeeper's state znodes say). ``inter_broker_props``
        #: are that listener's settings as in a broker's server.properties (listener.security.protocol.map,
        #: ssl.keystore.location, sasl.enabled.mechanisms, ...): SSL and SASL_SSL are served as the
        #: controller's own listener serves them, SCRAM logins checked against ZooKeeper's /config/users.
        self.caches: dict[int, ZkBrokerCache] = {}
        self.servers: dict[int, ZkBrokerServer] = {}
        if inter_broker:
            props = dict(inter_broker_props or {})
            for b, sim in self.brokers.items():
                name = (inter_broker_names or {}).get(b, inter_broker_listener).upper()
                protocol = protocol_map(props).get(name)
                if protocol is None:
                    raise BadInputError(
                        f"broker {b}: listener {name} has no protocol in listener.security.protocol.map"
                    )
                secured = None
                if protocol != "PLAINTEXT":
                    handler = ZkCredentials(self._zk_client)
                    secured = listener_specs(props, handler, f"{name}://127.0.0.1:0")[0].security
                self.caches[b] = ZkBrokerCache(b, lambda sim=sim: sim.epoch)
                self.servers[b] = ZkBrokerServer(self.caches[b], security=secured).start()
                sim.listeners = with_listener(sim.listeners, b, self.servers[b].address, name, protocol)
        self.partitions: dict[Key, PartitionView] = {}
        #: the newest (partition epoch, leader, leader epoch, ISR) each partition was seen with: ZooKeeper
        #: is written behind the controller's replies, so an AlterPartition's answer can be newer
        self._known: dict[Key, tuple[int, int, int, list[int]]] = {}
        self.round = 0
        self.isr_changes = 0
        self.refusals: dict[int, int] = {}
        self._zk: KazooClient | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._hb_thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- life cycle ----------------------------------------------------------------------------

    def refresh(self) -> dict[Key, PartitionView]:
        fresh = read_partitions(self._zk_client())
        for key, view in fresh.items() if self.caches else ():
            # A ZK-mode broker of a KRaft controller takes leader, ISR and partition epoch from the
            # controller's requests (its metadata cache), which may be ahead of the state znode: a
            # replicas-only change (a reassignment) bumps the partition epoch without touching it.
            cache = self.caches.get(view.leader)
            if cache is None:
                continue
            with cache.lock:
                got = cache.partitions.get(key)
            if got is not None and got.partition_epoch > view.partition_epoch:
                view.partition_epoch, view.leader, view.leader_epoch = (
                    got.partition_epoch,
                    got.leader,
                    got.leader_epoch,
                )
                view.isr, view.replicas = list(got.isr), list(got.replicas)
        for key, view in fresh.items():
            known = self._known.get(key)
            if known is not None and known[0] > view.partition_epoch:
                view.partition_epoch, view.leader, view.leader_epoch, view.isr = (
                    known[0],
                    known[1],
                    known[2],
                    list(known[3]),
                )
        self.partitions = fresh
        return self.partitions

    def _zk_client(self) -> KazooClient:
        if self._zk is None:
            self._zk = connect(self.zookeeper, auth=self.zk_auth, security=self.zk_security)
        return self._zk

    def _advertise_in_zookeeper(self) -> None:
        """A broker's `/brokers/ids` entry names the same listeners it registers with the controller
        (endpoints and listener_security_protocol_map): the inter-broker one at its loopback port."""
        zk = self._zk_client()
        names = {v: k for k, v in SECURITY_PROTOCOLS.items()}
        for b in self.servers:
            path = paths.broker_path(b)
            try:
                data, _ = zk.get(path)
            except NoNodeError:
                continue  # not registered in ZooKeeper (a broker that only talks to the controller)
            reg = json.loads(data)
            listeners = self.brokers[b].listeners
            reg["endpoints"] = [f"{x.name}://{x.host}:{x.port}" for x in listeners]
            reg["listener_security_protocol_map"] = {x.name: names[x.security_protocol] for x in listeners}
            for x in listeners:
                if x.name == "PLAINTEXT":  # Kafka's legacy host/port fields name the PLAINTEXT listener
                    reg["host"], reg["port"] = x.host, x.port
            zk.set(path, json.dumps(reg).encode())

    def register_all(self) -> dict[int, int]:
        codes = {b: sim.register() for b, sim in self.brokers.items()}
        for sim in self.brokers.values():
            sim.heartbeat()
        return codes

    def start(self) -> BrokerSimulator:
        if self.servers:
            self._advertise_in_zookeeper()
        self.register_all()
        self._thread = threading.Thread(target=self._loop, name="zk2kraft-broker-sim", daemon=True)
        self._thread.start()
        self._hb_thread = threading.Thread(
            target=self._heartbeat_loop, name="zk2kraft-broker-hb", daemon=True
        )
        self._hb_thread.start()
        return self

    def heartbeats(self) -> None:
        """Each live broker's lifecycle round: (re-)register when it has no epoch, then heartbeat."""
        for sim in list(self.brokers.values()):
            sim.ensure_registered()
            sim.heartbeat()

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(min(self.interval_s, 1.0)):
            self.heartbeats()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.step(heartbeat=False)
            except ZkKraftError as e:  # ZooKeeper away for a moment: the next round retries
                log.warning("simulator round failed: %s", e)

    def pause(self) -> None:
        """Stop the background rounds and heartbeats but keep the brokers' connections, so a caller can
        drive step()/heartbeat() by hand with exact timing; stop() still closes everything."""
        self._stop.set()
        for thread in (self._thread, self._hb_thread):
            if thread is not None:
                thread.join(10)

    @contextlib.contextmanager
    def rounds_held(self) -> Iterator[None]:
        """No round runs inside the block (heartbeats go on): a test's own ISR change is not undone
        by the next round's expansion before it has checked where the change landed."""
        with self._lock:
            yield

    def stop(self) -> None:
        self._stop.set()
        for thread in (self._thread, self._hb_thread):
            if thread is not None:
                thread.join(10)
        for sim in self.brokers.values():
            sim.close()
        for server in self.servers.values():
            server.stop()
        if self._zk is not None:
            close(self._zk)
            self._zk = None

    def restart(self, broker_id: int, empty_disk: bool = True) -> int:
        """Crash and reboot one broker; its metadata cache goes with an empty disk."""
        if broker_id in self.caches:
            self.servers[broker_id].drop_connections()
            if empty_disk:
                self.caches[broker_id].reset()
        return self.brokers[broker_id].reboot(empty_disk=empty_disk)

    def learned_leadership(
        self,
        keys: Iterable[Key],
        gone: int,
        leader_of: Callable[[Key], int] | None = None,
        timeout_s: float = 30.0,
    ) -> tuple[bool, str]:
        """Whether every other live broker's metadata cache (built only from the controller's
        UpdateMetadata) names the controller's leader for each of `keys` (`leader_of`; without it, any
        leader but `gone`), waiting up to `timeout_s`; and a sentence saying what each broker learned.

        A partition whose ISR held only `gone` has no leader at all after the fencing (no unclean
        election): the controller's answer is -1 there, and the caches must say -1 too. Under load a
        lagging follower leaves ISRs, so such partitions are ordinary, not a failure to learn."""
        wanted = sorted(set(keys))
        others = sorted(b for b in self.caches if b != gone and self.brokers[b].alive)

        def cached(b: int, key: Key) -> tuple[int, int] | None:
            with self.caches[b].lock:
                p = self.caches[b].partitions.get(key)
            return None if p is None else (p.leader, p.leader_epoch)

        def right(c: tuple[int, int] | None, key: Key) -> bool:
            if c is None or c[0] == gone:
                return False
            return c[0] == leader_of(key) if leader_of is not None else c[0] != -1

        def learned() -> bool:
            return all(right(cached(b, k), k) for b in others for k in wanted)

        deadline = time.monotonic() + timeout_s
        while not (ok := learned()) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not self.caches:
            return False, "the simulated brokers have no inter-broker listener"
        if not wanted:
            return ok, f"broker {gone} led no partition, so no leader had to move"
        offline = sum(leader_of(k) == -1 for k in wanted) if leader_of is not None else 0
        example = next((k for k in wanted if leader_of is None or leader_of(k) != -1), wanted[0])
        seen = sorted({cached(b, example) for b in others}, key=str)
        says = ", ".join(f"leader {c[0]} at leader epoch {c[1]}" if c else "nothing" for c in seen)
        without = (
            f"; {offline} of them had no other ISR member and are offline everywhere (leader -1)"
            if offline
            else ""
        )
        return ok, (
            f"{len(wanted)} partitions broker {gone} led have the controller's new leader in the metadata cache "
            f"of {'every one' if ok else 'not every one'} of the {len(others)} other ZK-mode brokers, learned "
            f"from the controller's LeaderAndIsr/UpdateMetadata (e.g. {example[0]}-{example[1]}: {says}){without}"
        )

    def __enter__(self) -> BrokerSimulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- one round -----------------------------------------------------------------------------

    def step(self, produce: int = 1, heartbeat: bool = True) -> None:
        """One round: heartbeats (unless a thread does them), followers fetch, leaders send their ISR
        changes (one batched AlterPartition each) and take new writes."""
        with self._lock:
            self.round += 1
            if heartbeat:
                self.heartbeats()
            pending: dict[int, list[tuple[PartitionView, list[int]]]] = {}
            for view in self.refresh().values():
                wanted = self._partition_round(view, produce)
                if wanted is not None:
                    pending.setdefault(view.leader, []).append((view, wanted))
            for leader_id, changes in pending.items():
                self._alter(self.brokers[leader_id], changes)

    def _partition_round(self, view: PartitionView, produce: int) -> list[int] | None:
        """Followers fetch (each fetch offset tells the leader where they are); the ISR the leader
        wants now, if it differs; then the leader takes this round's writes, fetched next round."""
        leader = self.brokers.get(view.leader)
        if leader is None or not leader.serving or not leader.online(view.key):
            return None
        told = self.caches  # with an inter-broker listener, roles come from the controller's LeaderAndIsr
        if told and not told[leader.broker_id].told_to_lead(view.key, view.leader_epoch):
            return None
        for r in view.replicas:
            follower = self.brokers.get(r)
            if follower is not None and r != leader.broker_id and (not told or told[r].replicates(view.key)):
                follower.fetch_from(leader, view.key, self.round)
        wanted = [
            r
            for r in view.replicas
            if r == leader.broker_id
            or (r in view.isr and self._fetching(leader, view.key, r))
            or (r not in view.isr and leader.caught_up(view.key, r) and self._fetching(leader, view.key, r))
        ]
        if produce:
            leader.produce(view.key, produce)
        return wanted if wanted and set(wanted) != set(view.isr) else None

    def _fetching(self, leader: SimBroker, key: Key, follower: int) -> bool:
        f = leader.followers.get(key, {}).get(follower)
        return f is not None and self.round - f.round < self.lag_rounds

    def _alter(self, leader: SimBroker, changes: list[tuple[PartitionView, list[int]]]) -> None:
        resp = leader.send_alter_partition(leader.isr_requests(changes))
        if resp is None:
            return
        if resp.error_code:
            self.refusals[resp.error_code] = self.refusals.get(resp.error_code, 0) + 1
            return
        views = {(v.topic_id, v.partition): v for v, _ in changes}
        for topic in resp.topics:
            for part in topic.partitions:
                view = views.get((topic.topic_id, part.partition_index))  # type: ignore[arg-type]
                if view is None:
                    continue
                if part.error_code:
                    self.refusals[part.error_code] = self.refusals.get(part.error_code, 0) + 1
                    continue
                view.isr, view.leader_epoch, view.partition_epoch = (
                    part.isr,
                    part.leader_epoch,
                    part.partition_epoch,
                )
                self._known[view.key] = (
                    part.partition_epoch,
                    part.leader_id,
                    part.leader_epoch,
                    list(part.isr),
                )
                self.isr_changes += 1


# --- as a process ----------------------------------------------------------------------------------


def run_simulator(
    controller: str,
    zookeeper: str,
    broker_ids: Sequence[int] = (),
    *,
    interval: float = 0.5,
    own_timeout: float = 6.0,
    auth: Sequence[str] = (),
    zk_timeout: float = 10.0,
    controller_wait: float = 120.0,
    security: ClientSecurity | None = None,
    zk_security: ZkSecurity | None = None,
    kraft_ids: Sequence[int] = (),
) -> None:
    """Register ``broker_ids`` (default: every broker ZooKeeper knows) with the controller at
    ``controller`` (HOST:PORT) and drive them until SIGTERM/SIGINT; prints ``ready`` once registered.
    ``kraft_ids`` run as KRaft brokers (zk_fixtures.kraft_broker: no migration flag, they follow the
    metadata log over Raft), the others as ZooKeeper-mode brokers.

    Each registers the endpoints and rack of its ZooKeeper registration. Raises BadInputError (exit
    2) for a bad address, no brokers, or a refused registration; UnreachableError (3) when the
    controller or ZooKeeper cannot be reached.
    """
    host, sep, port = controller.rpartition(":")
    if not sep or not port.isdigit():
        raise BadInputError(f"--controller {controller!r}: expected HOST:PORT")
    address = (host.strip("[]"), int(port))
    client = connect(zookeeper, auth=auth, timeout=zk_timeout, security=zk_security)
    try:
        image = read_cluster(client, strict=False).image
    finally:
        close(client)
    ids = list(broker_ids) or sorted(image.brokers)
    if not ids:
        raise BadInputError("no brokers to simulate: ZooKeeper has none registered and --brokers is empty")
    listeners, racks = listeners_of(image)
    sim = BrokerSimulator(
        address,
        zookeeper,
        image.cluster_id or "",
        ids,
        racks=racks,
        listeners=listeners,
        interval_s=interval,
        own_timeout_s=own_timeout,
        zk_auth=auth,
        security=security,
        zk_security=zk_security,
    )
    if kraft_ids:
        from zk_fixtures.kraft_broker import as_kraft_brokers

        as_kraft_brokers(sim, kraft_ids)
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        # Kafka's brokers retry their registration until a controller answers: a simulator started
        # beside a controller that is still starting (or restarting) waits for it the same way.
        deadline = time.monotonic() + controller_wait
        codes = sim.register_all()
        while all(c == -1 for c in codes.values()):
            if time.monotonic() > deadline or done.wait(0.5):
                raise UnreachableError(
                    f"cannot reach the controller at {controller} (tried for {controller_wait:g}s)"
                )
            codes = sim.register_all()
        bad = {b: name_of(c) for b, c in codes.items() if c != 0}
        if bad:
            raise BadInputError(f"the controller refused registrations: {bad}")
        sim.start()
        print(READY, flush=True)
        if kraft_ids:
            from zk_fixtures.kraft_broker import report_kraft_brokers

            report_kraft_brokers(sim, kraft_ids, done)
        done.wait()
    finally:
        sim.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m zk_fixtures.broker_sim", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--controller", required=True, help="HOST:PORT of the controller listener")
    parser.add_argument("--zookeeper", required=True, help="ZooKeeper connect string with the chroot")
    parser.add_argument(
        "--brokers", default="", help="comma-separated broker ids (default: all in ZooKeeper)"
    )
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--own-timeout", type=float, default=6.0)
    parser.add_argument("--controller-wait", type=float, default=120.0)
    parser.add_argument(
        "--command-config", help="Kafka client properties for the controller listener (TLS, SASL)"
    )
    args = parser.parse_args(argv)
    try:
        security = (
            from_client_properties(read_properties(args.command_config)) if args.command_config else None
        )
        run_simulator(
            args.controller,
            args.zookeeper,
            [int(b) for b in args.brokers.split(",") if b.strip()],
            interval=args.interval,
            own_timeout=args.own_timeout,
            controller_wait=args.controller_wait,
            security=security,
        )
    except ZkKraftError as e:
        print(f"broker simulator: {e}", file=sys.stderr, flush=True)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
