"""Simulated ZooKeeper-mode Kafka brokers driven in rounds against the controller (`BrokerSimulator`).

Each broker is a `simulated_broker.SimBroker`; the simulator runs their heartbeats and their partition
rounds: followers fetch from their leader, a leader adds a follower that has caught up to the ISR and
drops one that stops fetching (one batched AlterPartition per round). Partition state is learned from
ZooKeeper's partition state znodes, which the controller keeps current through its dual writes. With
`inter_broker=True` each broker also serves the controller's LeaderAndIsr/UpdateMetadata/StopReplica
(zk_fixtures.zk_broker_server), as a ZooKeeper-mode broker learns its roles, and then leads and fetches
only as LeaderAndIsr told it; its `/brokers/ids` entry is rewritten through `zk.codec`.

In process: `BrokerSimulator(...).start()`, `step()` for a deterministic round; as a process:
`zk_fixtures.broker_sim_cli`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from migrator.controller.network.listener_config import listener_specs, protocol_map
from migrator.controller.protocol import messages as M
from migrator.controller.security.client_security import ClientSecurity
from migrator.errors import BadInputError, ZkKraftError
from migrator.model import Endpoint
from migrator.zk import paths
from migrator.zk.codec import decode_broker, encode_broker
from migrator.zk.connection import ZkSecurity, close, connect
from zk_fixtures.simulated_broker import (
    SECURITY_PROTOCOLS,
    Key,
    PartitionView,
    SimBroker,
    ZkCredentials,
    read_partitions,
    with_listener,
)
from zk_fixtures.zk_broker_server import ZkBrokerCache, ZkBrokerServer

__all__ = ["BrokerSimulator"]

log = logging.getLogger("zk2kraft.broker_sim")


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
            listeners = self.brokers[b].listeners
            endpoints = [
                Endpoint(
                    listener=x.name, host=x.host, port=x.port, security_protocol=names[x.security_protocol]
                )
                for x in listeners
            ]
            # Kafka's BrokerIdZNode.encode: legacy host/port from the PLAINTEXT endpoint, the listener map
            # from version 4
            reg = decode_broker(path, data, b)
            reg = reg.model_copy(update={"endpoints": endpoints, "json_version": max(reg.json_version, 4)})
            zk.set(path, encode_broker(reg))

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
