"""What ZooKeeper-mode brokers are told, and when: Kafka 3.9's MigrationPropagator for zk2kraft's controller.

From the moment the controller is active (the copy committed), every ZooKeeper-mode broker learns
leaders, ISRs, deletions and live brokers only from it. The propagator watches the service's image
after each commit (only a fully durable image: nothing is announced that the log does not hold) and
diffs it against the last one it propagated:

- a ZK-mode broker (registered with `isMigratingZkBroker`, unfenced) gets a channel and, on its
  creation, on reconnect and on re-registration, the full state: UpdateMetadata and LeaderAndIsr of
  Type FULL (every partition; LeaderAndIsr only those it replicates);
- a changed or new partition: LeaderAndIsr to its replicas, UpdateMetadata to every ZK-mode broker;
- a replica removed by a reassignment: StopReplica(delete) to it;
- a deleted topic: StopReplica(delete, epoch -2) to its replicas, UpdateMetadata with leader -2
  (Kafka's LeaderDuringDelete) to every ZK-mode broker;
- a change of live brokers: UpdateMetadata with the new list to every ZK-mode broker, with no partition
  whose only change is its OfflineReplicas (Kafka's MigrationPropagator re-sends none of those).

KRaft-mode brokers get nothing, and so does a ZK broker whose id a KRaft broker holds (its registration
in the image is the KRaft one): KIP-866's "log an error and fence the errant ZK broker by not sending it
UpdateMetadataRequests". Such a broker shows in /brokers/ids (the service's `zk_broker_ids`); it is named
once through `say` and kept in `errant`, so `status` and the metrics report it. Requests carry the
KRaft node id with `isKRaftController`, the claim's `/controller_epoch`, and each broker's epoch from
its BrokerRegistration.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from migrator.controller.zk_brokers import zk_broker_messages as Z
from migrator.controller.zk_brokers.inter_broker import InterBroker, inter_broker_endpoint
from migrator.controller.zk_brokers.zk_broker_channel import BrokerChannel, ChannelStatus, ZkBrokerTarget
from migrator.controller.zk_brokers.zk_broker_requests import (
    LEADER_DURING_DELETE,
    BrokerInfo,
    Header,
    Item,
    PartitionState,
    bulk,
)
from migrator.kraft.image import ImageChanges
from migrator.kraft.records import kafka_to_uuid
from migrator.model import Broker, ClusterImage, Partition

__all__ = ["STATUS_FILE", "Snapshot", "ZkPropagator", "read_status", "snapshot"]

#: Where the running controller leaves its channels' status for `zk2kraft status` (in the log
#: directory, next to the follower announcement `zk2kraft-follower.json`); observability only, never
#: read to derive a state.
STATUS_FILE = "zk-broker-channels.json"
#: the domain `zk2kraft fixtures load` registers its brokers under (a rehearsal: nothing listens there)
EXAMPLE_DOMAIN = ".example.internal"

#: Kafka's LeaderAndIsr.EpochDuringDelete: the leader epoch StopReplica(delete) carries.
EPOCH_DURING_DELETE = -2
#: metadata.version feature levels → the IBP they are (3.0-IV1 … 3.4-IV0; later levels send the same).
_MV_IBP = {1: "3.0-IV1", 2: "3.1-IV0", 3: "3.2-IV0", 4: "3.3-IV0", 5: "3.3-IV1", 6: "3.3-IV2", 7: "3.3-IV3"}
_ZERO = uuid.UUID(int=0)


_SEQ = itertools.count(1)


@dataclass
class Snapshot:
    """The image as brokers see it: live brokers, ZK-mode brokers, every partition."""

    brokers: dict[int, Broker] = field(default_factory=dict)
    live: tuple[BrokerInfo, ...] = ()
    zk: dict[int, Broker] = field(default_factory=dict)
    _parts: dict[tuple[str, int], PartitionState] = field(default_factory=dict, repr=False)
    #: per partition, what its state was built from (see `snapshot`); the brokers alive then
    marks: dict[tuple[str, int], tuple[int, int, str | None]] = field(default_factory=dict)
    alive: frozenset[int] = frozenset()
    #: each topic's partition numbers (where a removed or re-created topic's keys are)
    topic_parts: dict[str, tuple[int, ...]] = field(default_factory=dict)
    seq: int = field(default_factory=lambda: next(_SEQ))
    #: built from snapshot `base` by changed keys: the only keys whose state may differ from it
    base: int = 0
    touched: frozenset[tuple[str, int]] | None = None
    #: built by changed keys: their states (None: gone) over `_from`'s partitions, until `materialize`
    _from: Snapshot | None = field(default=None, repr=False)
    _delta: dict[tuple[str, int], PartitionState | None] | None = field(default=None, repr=False)

    @property
    def parts(self) -> dict[tuple[str, int], PartitionState]:
        """Every partition's state (see `materialize`)."""
        if self._delta is not None:
            self.materialize()
        return self._parts

    def materialize(self) -> Snapshot:
        """`parts` in full: the base's partitions with the changed keys applied. Done by `propagate`
        (or on first use), outside the service's lock: copying 100,000 entries held it 3-30 ms per
        commit."""
        if self._delta is not None and self._from is not None:
            parts = dict(self._from.parts)
            for k, s in self._delta.items():
                if s is None:
                    parts.pop(k, None)
                else:
                    parts[k] = s
            self._parts, self._delta, self._from = parts, None, None
        return self


def _topic_id(text: str | None) -> uuid.UUID:
    try:
        return kafka_to_uuid(text) if text else _ZERO
    except ValueError:
        return _ZERO


def _state(name: str, p: int, part: Partition, tid: uuid.UUID, alive: frozenset[int]) -> PartitionState:
    return PartitionState(
        topic=name,
        partition=p,
        topic_id=tid,
        leader=part.leader,
        leader_epoch=part.leader_epoch,
        isr=tuple(part.isr),
        partition_epoch=part.partition_epoch,
        replicas=tuple(part.replicas),
        adding=tuple(part.adding_replicas),
        removing=tuple(part.removing_replicas),
        leader_recovery_state=part.leader_recovery_state,
        offline=tuple(r for r in part.replicas if r not in alive),
    )


def snapshot(
    image: ClusterImage, prev: Snapshot | None = None, changes: ImageChanges | None = None
) -> Snapshot:
    """Copies what propagation needs out of `image` (taken under the service's lock).

    With `changes` (what the image builder replayed since `prev` was taken), only the partitions they
    name, those of the topics they name and, if brokers came or went, those with a replica on them
    are read again: the cost follows the change, not the image (`touched` tells `propagate` so).

    Without, every partition is visited. Replay changes a partition in place and bumps its partition
    epoch every time, so a partition whose model object, partition epoch and topic id are those `prev`
    was built from (and with the same brokers alive) is unchanged: its state object is reused, and the
    diff skips it by identity.
    """
    alive = frozenset(b.id for b in image.brokers.values() if not b.fenced)
    snap = Snapshot(alive=alive)
    snap.brokers = dict(image.brokers)
    snap.live = tuple(
        BrokerInfo(
            b.id, tuple((e.listener, e.host, e.port, e.security_protocol) for e in b.endpoints), b.rack
        )
        for b in sorted(image.brokers.values(), key=lambda b: b.id)
        if b.id in alive
    )
    if prev is not None and prev.live == snap.live:
        snap.live = prev.live
    snap.zk = {b.id: b for b in image.brokers.values() if b.is_migrating_zk_broker and not b.fenced}
    if prev is not None and changes is not None:
        return _by_changes(image, prev, changes, snap)
    with bulk(sum(len(t.partitions) for t in image.topics.values())):
        return _visit_all(image, prev, snap)


def _visit_all(image: ClusterImage, prev: Snapshot | None, snap: Snapshot) -> Snapshot:
    """`snapshot` visiting every partition (see there)."""
    alive = snap.alive
    reuse = prev is not None and prev.alive == alive
    parts, marks = snap.parts, snap.marks
    old_parts = prev.parts if prev is not None else {}
    old_marks = prev.marks if prev is not None else {}
    for topic in image.topics.values():
        tid: uuid.UUID | None = None
        snap.topic_parts[topic.name] = tuple(topic.partitions)
        for p, part in topic.partitions.items():
            key = (topic.name, p)
            mark = (id(part), part.partition_epoch, topic.topic_id)
            marks[key] = mark
            if reuse and old_marks.get(key) == mark:
                parts[key] = old_parts[key]
                continue
            if tid is None:
                tid = _topic_id(topic.topic_id)
            parts[key] = _state(topic.name, p, part, tid, alive)
    return snap


def _by_changes(image: ClusterImage, prev: Snapshot, changes: ImageChanges, snap: Snapshot) -> Snapshot:
    """`snapshot` from `prev` and what changed since (see there); `parts` left to `materialize`."""
    prev.materialize()
    parts: dict[tuple[str, int], PartitionState | None] = {}
    snap._from, snap._delta = prev, parts
    topic_parts = snap.topic_parts = dict(prev.topic_parts)
    touched = set(changes.partitions)
    for name in changes.topics:
        touched.update((name, p) for p in prev.topic_parts.get(name, ()))
        topic = image.topics.get(name)
        if topic is None:
            topic_parts.pop(name, None)
        else:
            topic_parts[name] = tuple(topic.partitions)
            touched.update((name, p) for p in topic.partitions)
    if snap.alive != prev.alive:
        flipped = snap.alive ^ prev.alive  # their replicas' OfflineReplicas change
        touched.update(k for k, s in prev.parts.items() if not flipped.isdisjoint(s.replicas))
    tids: dict[str, uuid.UUID] = {}
    for key in touched:
        name, p = key
        topic = image.topics.get(name)
        part = topic.partitions.get(p) if topic is not None else None
        if topic is None or part is None:
            parts[key] = None
            continue
        if name not in changes.topics and p not in topic_parts.get(name, ()):
            topic_parts[name] = tuple(topic.partitions)  # a partition added to an existing topic
        tid = tids.get(name)
        if tid is None:
            tid = tids[name] = _topic_id(topic.topic_id)
        parts[key] = _state(name, p, part, tid, snap.alive)
    snap.base, snap.touched = prev.seq, frozenset(touched)
    return snap


def _leadership(s: PartitionState) -> tuple[object, ...]:
    """What a partition's registration says, without OfflineReplicas (which follows the live brokers):
    a plain tuple, compared per changed partition (a dataclasses.replace cost more than the diff)."""
    return (
        s.topic_id,
        s.leader,
        s.leader_epoch,
        s.isr,
        s.partition_epoch,
        s.replicas,
        s.adding,
        s.removing,
        s.leader_recovery_state,
    )


def versions_for(broker: Broker, cluster_mv: int | None) -> dict[int, int]:
    """Request versions for `broker`: its IBP is the metadata.version it and the cluster both support."""
    fr = broker.features.get("metadata.version")
    level = (
        min(x for x in (fr.max_version if fr else None, cluster_mv) if x is not None)
        if (fr or cluster_mv)
        else 8
    )
    return Z.versions_for_ibp(_MV_IBP.get(level, "3.4-IV0") if level < 8 else "3.4-IV0")


class ZkPropagator:
    """Channels to every ZK-mode broker and the requests each change puts on them."""

    def __init__(
        self,
        service: object,
        controller_id: int,
        controller_epoch: int,
        *,
        inter_broker: InterBroker | None = None,
        request_timeout: float = 30.0,
        backoff_ms: int = 50,
        metadata_version: int | None = None,
        say: Callable[[str], None] | None = None,
        status_dir: str | None = None,
        tick_ms: int = 50,
    ) -> None:
        self.service = service
        self.tick_ms = tick_ms
        self._last_propagation = 0.0
        self.status_dir = status_dir
        self._status_written: str | None = None
        self._status_at = 0.0
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch
        #: the brokers' listener the channels connect to, and its TLS/SASL (controller properties)
        self.inter_broker = inter_broker if inter_broker is not None else InterBroker()
        self.request_timeout = request_timeout
        self.backoff_ms = backoff_ms
        self.metadata_version = metadata_version
        self.say = say
        self.channels: dict[int, BrokerChannel] = {}
        self.unreachable: dict[int, str] = {}  # ZK brokers with no usable inter-broker endpoint
        self.errant: dict[int, str] = {}  # ids in /brokers/ids that a KRaft broker holds: fenced
        self._unresolved_said: set[int] = set()  # brokers whose unresolvable host was said
        self._example_said = False  # the rehearsal's example hosts: said once per run
        self._lock = threading.RLock()
        self._snap: Snapshot | None = None
        self._builder: object = None  # the image builder whose changes we take
        self._full_um: tuple[Snapshot, Item] | None = None
        self._by_replica: tuple[Snapshot, dict[int, dict[tuple[str, int], PartitionState]]] | None = None
        self._offset = -1
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> ZkPropagator:
        self._thread = threading.Thread(target=self._run, name="zk-propagator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.status_dir is not None:
            try:
                (Path(self.status_dir) / STATUS_FILE).unlink(missing_ok=True)
            except OSError:
                pass
        with self._lock:
            channels = list(self.channels.values())
            self.channels.clear()
        for ch in channels:
            ch.stop(wait=False)  # all at once, then wait: shutdown is as long as the slowest, not the sum
        for ch in channels:
            ch.stop()

    def status(self) -> list[ChannelStatus]:
        with self._lock:
            return [ch.status for _, ch in sorted(self.channels.items())]

    def in_sync(self) -> bool:
        """Every channel has delivered everything up to the last propagated offset."""
        with self._lock:
            return self._snap is not None and all(
                ch.idle() and ch.status.acked_offset >= self._offset for ch in self.channels.values()
            )

    # -- watching the image --------------------------------------------------------------------

    def _run(self) -> None:
        svc = self.service
        got: list[tuple[int, Snapshot]] = []

        def changed(image: ClusterImage) -> bool:
            """Under the service's lock: a committed image newer than the last one propagated."""
            off = svc.committed_offset  # type: ignore[attr-defined]
            if off is None or off == self._offset or svc.soft_start:  # type: ignore[attr-defined]
                return self._stop.is_set()
            builder = svc.builder  # type: ignore[attr-defined]
            # Changed keys only from the builder whose changes we have taken since our last snapshot
            # (activation replaces the builder: then every partition is visited once, and tracked after).
            changes = builder.take_changes() if builder is self._builder else None
            if changes is None:
                builder.track_changes()
                self._builder = builder
            got.append((off, snapshot(image, self._snap, changes)))
            return True

        while not self._stop.is_set():
            got.clear()
            self.pace()
            svc.wait_for(changed, 0.5)  # type: ignore[attr-defined]
            if got:
                self.propagate(*got[-1])
            self._find_errant()
            self._say_unresolved()
            if self.status_dir is not None and time.monotonic() - self._status_at >= 1.0:
                self._status_at = time.monotonic()
                self._write_status()

    def status_rows(self) -> list[dict[str, Any]]:
        """Each channel's status as plain data (status, metrics), brokers without an endpoint too."""
        with self._lock:
            rows = [dataclasses.asdict(s) for s in self.status()]
            rows += [
                {"broker_id": b, "endpoint": "", "connected": False, "last_error": why, "unreachable": True}
                for b, why in sorted(self.unreachable.items())
            ]
            rows += [
                {"broker_id": b, "endpoint": "", "connected": False, "last_error": why}
                for b, why in sorted(self.errant.items())
            ]
        return rows

    def _find_errant(self) -> None:
        """ZK brokers registered in ZooKeeper under the id of a KRaft broker of the image (KIP-866's
        errant ZK broker): they get no channel, hence nothing; each is named once when it appears."""
        core = getattr(self.service, "core", None)
        zk_ids: frozenset[int] = getattr(core, "zk_broker_ids", frozenset())
        with self._lock:
            snap = self._snap
            if snap is None:
                return
            now = {
                b: f"errant ZooKeeper-mode broker: registered in /brokers/ids with the id of KRaft broker {b}; "
                "fenced, it gets no UpdateMetadata or LeaderAndIsr"
                for b in zk_ids
                if (reg := snap.brokers.get(b)) is not None and not reg.is_migrating_zk_broker
            }
            new = sorted(now.keys() - self.errant.keys())
            self.errant = now
        for b in new:
            if self.say is not None:
                self.say(f"ZK broker {b}: {now[b]}")

    def _say_unresolved(self) -> None:
        """Brokers whose registered host does not resolve, one line per new set, and a rehearsal's
        example hosts (`fixtures load` registers them under example.internal) once per run: six
        identical resolver failures would read as six problems."""
        with self._lock:
            new = {
                b: ch.status.endpoint
                for b, ch in self.channels.items()
                if ch.status.unresolved and b not in self._unresolved_said
            }
            self._unresolved_said |= new.keys()
        if not new or self.say is None:
            return
        ids = ", ".join(map(str, sorted(new)))
        hosts = sorted({e.rpartition(":")[0] for e in new.values()})
        if all(h.endswith(EXAMPLE_DOMAIN) for h in hosts):
            if not self._example_said:  # once for the run: the channels fail one by one, not together
                self._example_said = True
                self.say("rehearsal brokers at example hosts: not contacted (`zk2kraft status` lists them)")
        else:
            shown = ", ".join(hosts[:3]) + (" …" if len(hosts) > 3 else "")
            self.say(
                f"ZK brokers {ids}: their registered hosts do not resolve ({shown}): not contacted until they do"
            )

    def _write_status(self) -> None:
        text = json.dumps({"pid": os.getpid(), "channels": self.status_rows()}, sort_keys=True)
        if text == self._status_written:
            return
        assert self.status_dir is not None
        path = Path(self.status_dir) / STATUS_FILE
        tmp = path.with_name(path.name + ".tmp")
        try:
            tmp.write_text(text)
            os.replace(tmp, path)
            self._status_written = text
        except OSError:
            pass  # status is best effort: the log directory's own errors surface elsewhere

    def pace(self) -> None:
        """Wait until every channel has delivered the last propagation, at most `tick_ms` after it
        began.

        The bounded delay that batches: commits arriving meanwhile accumulate as the builder's changed
        keys and become one snapshot and one propagation, so 1,000 changes/s make a few requests per
        broker per round instead of one per commit (each request costs a round trip per broker, and
        an UpdateMetadata goes to every broker). Batches grow with the brokers' pace; an isolated
        change waits for nothing; a broker that is slow or gone holds the others back `tick_ms` at
        most."""
        deadline = self._last_propagation + self.tick_ms / 1000
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or self._delivered():
                return
            self._stop.wait(min(left, 0.002))

    def _delivered(self) -> bool:
        with self._lock:
            return all(ch.idle() for ch in self.channels.values())

    def propagate(self, offset: int, snap: Snapshot) -> None:
        """Bring every channel from the last propagated snapshot to `snap` (committed at `offset`)."""
        self._last_propagation = time.monotonic()
        snap.materialize()
        with self._lock:
            prev, self._snap, self._offset = self._snap, snap, offset
            self._manage_channels(snap)
            if prev is None:
                return  # every channel is new and owes its broker the full state
            before, now = prev.parts, snap.parts
            if snap.touched is not None and snap.base == prev.seq:  # only these keys may differ
                changed = {
                    k: s
                    for k in snap.touched
                    if (s := now.get(k)) is not None and (o := before.get(k)) is not s and o != s
                }
                deleted = {k: before[k] for k in snap.touched if k not in now and k in before}
            else:
                changed = {k: s for k, s in now.items() if (o := before.get(k)) is not s and o != s}
                deleted = {k: before[k] for k in before.keys() - now.keys()}
            live_changed = prev.live != snap.live
            # A broker fenced or unfenced changes only the OfflineReplicas of the partitions it hosts:
            # Kafka's MigrationPropagator sends the other ZK brokers an UpdateMetadata of the live
            # brokers then (addUpdateMetadataRequestForBrokers(oldZkBrokers), no partition), and
            # partition states only for partitions whose registration changed. Sending each hosted
            # partition to every broker on each fence and unfence was thousands of states a time.
            changed = {
                k: s
                for k, s in changed.items()
                if k not in before or _leadership(before[k]) != _leadership(s)
            }
            if not changed and not deleted and not live_changed:
                for ch in self.channels.values():
                    ch.enqueue([], offset)  # nothing to say: in sync at this offset once idle
                return
            led = changed
            um_parts = dict(changed)
            for k, s in deleted.items():
                um_parts[k] = PartitionState(
                    s.topic,
                    s.partition,
                    s.topic_id,
                    LEADER_DURING_DELETE,
                    0,
                    s.isr,
                    0,
                    s.replicas,
                    offline=s.offline,
                )
            um = Item(Z.UPDATE_METADATA, partitions=um_parts, live_brokers=snap.live, shared=True)
            # Each broker's share, found in one pass over the changes (not one per broker).
            lai_of: dict[int, dict[tuple[str, int], PartitionState]] = {}
            for k, s in led.items():
                for r in s.replicas:
                    lai_of.setdefault(r, {})[k] = s
            stop_of: dict[int, dict[tuple[str, int], tuple[int, bool]]] = {}
            for k, s in deleted.items():
                for r in s.replicas:
                    stop_of.setdefault(r, {})[k] = (EPOCH_DURING_DELETE, True)
            for k, s in changed.items():
                old = prev.parts.get(k)
                if old is not None:
                    for r in old.replicas:
                        if r not in s.replicas:  # a reassignment removed it
                            stop_of.setdefault(r, {})[k] = (EPOCH_DURING_DELETE, True)
            for bid, ch in self.channels.items():
                items: list[Item] = []
                lai = lai_of.get(bid)
                if lai:
                    new = frozenset(k for k in lai if k not in prev.parts)
                    items.append(
                        Item(Z.LEADER_AND_ISR, partitions=lai, leaders=self._leaders(snap, lai), is_new=new)
                    )
                if um_parts or live_changed:
                    items.append(um)
                stop = stop_of.get(bid)
                if stop:
                    items.append(Item(Z.STOP_REPLICA, stop=stop))
                ch.enqueue(items, offset)

    def _leaders(
        self, snap: Snapshot, parts: dict[tuple[str, int], PartitionState]
    ) -> dict[int, tuple[str, int]]:
        out: dict[int, tuple[str, int]] = {}
        live = {b.broker_id for b in snap.live}
        for s in parts.values():
            b = snap.brokers.get(s.leader)
            if b is not None and s.leader in live and s.leader not in out:
                ep = inter_broker_endpoint(b, self.inter_broker)
                if not isinstance(ep, str):
                    out[s.leader] = ep
        return out

    def _manage_channels(self, snap: Snapshot) -> None:
        for bid in [b for b in self.channels if b not in snap.zk]:
            self.channels.pop(bid).stop(wait=False)  # never wait under our lock: its thread may want it
        for bid, broker in snap.zk.items():
            ep = inter_broker_endpoint(broker, self.inter_broker)
            if isinstance(ep, str):  # why it has none: reported (status, metrics), no channel
                reason = ep
                if self.channels.get(bid) is not None:
                    self.channels.pop(bid).stop(wait=False)
                if self.unreachable.get(bid) != reason and self.say is not None:
                    self.say(f"ZK broker {bid}: {reason}")
                self.unreachable[bid] = reason
                continue
            self.unreachable.pop(bid, None)
            target = ZkBrokerTarget(
                bid, broker.broker_epoch, ep[0], ep[1], versions_for(broker, self.metadata_version)
            )
            ch = self.channels.get(bid)
            if ch is None:
                self.channels[bid] = BrokerChannel(
                    target,
                    self._header,
                    self._full_state,
                    request_timeout=self.request_timeout,
                    backoff_ms=self.backoff_ms,
                    client_id=f"zk2kraft-controller-{self.controller_id}",
                    say=self.say,
                    security=self.inter_broker.security,
                ).start()
            elif ch.target != target:
                ch.retarget(target)

    def _header(self, target: ZkBrokerTarget) -> Header:
        return Header(self.controller_id, self.controller_epoch, target.broker_epoch)

    def _full_update_metadata(self, snap: Snapshot) -> Item:
        """UpdateMetadata FULL of `snap`: one object for every broker, so it is encoded once."""
        if self._full_um is None or self._full_um[0] is not snap:
            item = Item(
                Z.UPDATE_METADATA, partitions=snap.parts, live_brokers=snap.live, full=True, shared=True
            )
            self._full_um = (snap, item)
        return self._full_um[1]

    def _replicas_of(self, snap: Snapshot) -> dict[int, dict[tuple[str, int], PartitionState]]:
        """Each broker's partitions in `snap`, indexed once per snapshot: a fan-out to 50 brokers
        would otherwise scan every partition 50 times (under our lock, one channel after another)."""
        if self._by_replica is None or self._by_replica[0] is not snap:
            index: dict[int, dict[tuple[str, int], PartitionState]] = {}
            with bulk(len(snap.parts)):
                for k, s in snap.parts.items():
                    for r in s.replicas:
                        mine = index.get(r)
                        if mine is None:
                            mine = index[r] = {}
                        mine[k] = s
            self._by_replica = (snap, index)
        return self._by_replica[1]

    def _full_state(self, broker_id: int, install: Callable[[list[Item], int], None]) -> None:
        """Everything `broker_id` must know, installed on its channel under our lock (so no change
        propagated meanwhile is lost or applied before it)."""
        with self._lock:
            snap = self._snap
            if snap is None:
                return
            mine = self._replicas_of(snap).get(broker_id, {})
            install(
                [
                    self._full_update_metadata(snap),
                    Item(
                        Z.LEADER_AND_ISR,
                        partitions=mine,
                        leaders=self._leaders(snap, mine),
                        full=True,
                        is_new=frozenset(mine),
                    ),
                ],
                self._offset,
            )


def read_status(log_dir: str, pid: int | None) -> list[dict[str, Any]] | None:
    """The channels a running controller (process `pid`) last reported, None if it reported none."""
    try:
        data = json.loads((Path(log_dir) / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("pid") != pid or not isinstance(data.get("channels"), list):
        return None
    return [row for row in data["channels"] if isinstance(row, dict)]
