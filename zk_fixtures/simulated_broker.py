"""One simulated ZooKeeper-mode Kafka broker on the controller's protocol (`SimBroker`).

What a migrating broker does to its controller, and only that: it registers (incarnation id, features
with its metadata.version range, `is_migrating_zk_broker`, listeners, rack, log directories), it
heartbeats, and for the partitions it holds it behaves as a leader or a follower: followers fetch with
their broker epoch (KIP-903), a leader sends AlterPartition v3. It can crash, reboot with an empty disk
(a new incarnation) or lose a log directory (AlterReplicaState).

Its lifecycle follows Kafka's BrokerLifecycleManager: one request at a time, and a controlled shutdown
asks `wantShutDown` on every heartbeat until the controller answers `shouldShutDown`. A broker that has
not reached the controller for longer than its own timeout fences itself until a heartbeat succeeds.
ZooKeeper is read through `zk.reader` and `zk.config_codec` (partition states, SCRAM credentials).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from migrator.controller.client.client import ControllerClient, ControllerUnreachable
from migrator.controller.protocol import messages as M
from migrator.controller.security.client_security import ClientSecurity, SaslRefused
from migrator.kraft.records import kafka_to_uuid
from migrator.model import ClusterImage, ScramCredential
from migrator.zk import paths
from migrator.zk.config_codec import decode_config
from migrator.zk.credential_codec import decode_scram
from migrator.zk.reader import read_cluster

__all__ = [
    "DUPLICATE_BROKER_REGISTRATION",
    "SECURITY_PROTOCOLS",
    "SHUTTING_DOWN",
    "PartitionView",
    "SimBroker",
    "listeners_of",
    "read_partitions",
]


Key = tuple[str, int]
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
        value = decode_config(path, data).get(mechanism)
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
