"""The controller's decisions, with no I/O: a request and the current image in, records and a reply out.

Each decision is what Kafka's QuorumController makes for the same request (ClusterControlManager,
BrokerHeartbeatManager, ReplicationControlManager, PartitionChangeBuilder), written from the seeds and
Kafka's documented behaviour:

- registration (KIP-631/KIP-866): cluster id, metadata.version range, migrating ZooKeeper brokers,
  incarnations; the broker epoch is the offset of the RegisterBrokerRecord, which the caller knows.
- heartbeats (the seed's broker states Initial/Inactive/Active/Stopping as Kafka's want_fence /
  want_shut_down): unfence once caught up, controlled shutdown moves leadership away first, a broker
  silent past the session timeout is fenced.
- AlterPartition v0-3 (KIP-497, KIP-903) and AlterReplicaState (KIP-589).

The caller (`service`) appends the records, replays them into the image and only then asks for the
next decision: every decision is computed against the image with all earlier ones applied. Session
times, incarnations seen and offline replicas are in-memory controller state, as in Kafka.

The requests, replies, `Decision` and `ControllerConfig` are in `core_types`, re-exported here.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Iterator

from migrator.controller.core_types import (
    DEFAULT_SESSION_TIMEOUT_MS,
    EVENT_OFFLINE,
    NO_LEADER,
    AlterPartition,
    AlterPartitionReply,
    AlterReplicaState,
    AlterReplicaStateReply,
    BrokerState,
    ControllerConfig,
    Decision,
    Heartbeat,
    HeartbeatReply,
    IsrMember,
    Listener,
    PartitionAlter,
    PartitionResult,
    Registration,
    RegistrationReply,
    TopicAlter,
    TopicResult,
    state_of,
)
from migrator.controller.managers import partition_reassignment
from migrator.controller.protocol import kafka_errors as E
from migrator.kraft.records import MetadataRecord, kafka_to_uuid, record
from migrator.model import Broker, ClusterImage, Partition, Topic

__all__ = [
    "DEFAULT_SESSION_TIMEOUT_MS",
    "EVENT_OFFLINE",
    "MV_BROKER_REGISTRATION_CHANGE",
    "NO_LEADER",
    "AlterPartition",
    "AlterPartitionReply",
    "AlterReplicaState",
    "AlterReplicaStateReply",
    "BrokerState",
    "ControllerConfig",
    "ControllerCore",
    "Decision",
    "Heartbeat",
    "HeartbeatReply",
    "IsrMember",
    "Listener",
    "PartitionAlter",
    "PartitionResult",
    "Registration",
    "RegistrationReply",
    "TopicAlter",
    "TopicResult",
]

_NO_LEADER_CHANGE = -2
METADATA_VERSION = "metadata.version"
#: metadata.version 3.3-IV2 (MetadataVersion.IBP_3_3_IV2, level 6): fencing and unfencing are BrokerRegistrationChangeRecords from here on.
MV_BROKER_REGISTRATION_CHANGE = 6
#: metadata.version 3.4-IV0: the first that lets migrating ZooKeeper brokers register.
MV_MIGRATION = 8
#: a broker that names no metadata.version range supports only the first KRaft one (3.0-IV1).
MV_MINIMUM_KRAFT = 1
#: What the seeds call a non-leader requester (seed 004: NOT_LEADER_FOR_PARTITION); Kafka's KRaft
#: controller answers INVALID_REQUEST there. Issue 5 lists NOT_LEADER_OR_FOLLOWER, so that is used.
NOT_LEADER_ERROR = E.NOT_LEADER_OR_FOLLOWER


# --- the decisions --------------------------------------------------------------------------------


class ControllerCore:
    """Kafka's controller decisions over a ClusterImage; holds only in-memory controller state."""

    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        #: soft start (KIP-866): until the copy is committed only registration and heartbeats are served
        self.active = False
        self.last_contact: dict[int, int] = {}  # broker id -> ms of the last heartbeat or registration
        self.superseded: dict[int, set[str]] = {}  # incarnations replaced by newer ones, per broker
        self.offline: dict[tuple[str, int], set[int]] = {}  # (topic, partition) -> offline replicas
        #: ids registered live in ZooKeeper's /brokers/ids (refreshed by the service); a KRaft broker
        #: may not take one of them
        self.zk_broker_ids: frozenset[int] = frozenset()
        self._ids: dict[str, str] = {}

    # -- sessions ------------------------------------------------------------------------------

    def activate(self, image: ClusterImage, now_ms: int) -> None:
        """A controller becoming active gives every unfenced broker a fresh session (as Kafka does)."""
        self.last_contact = {b.id: now_ms for b in image.brokers.values() if not b.fenced}

    def has_valid_session(self, broker: Broker, now_ms: int) -> bool:
        if broker.fenced:
            return False
        last = self.last_contact.get(broker.id)
        return last is not None and last + self.config.session_timeout_ms >= now_ms

    def next_expiry_ms(self, image: ClusterImage) -> int | None:
        """When the oldest live session expires (the first ms `has_valid_session` is false), None when
        no unfenced broker has one: Kafka's QuorumController schedules its stale-broker check at that
        moment (rescheduleMaybeFenceStaleBrokers with BrokerHeartbeatManager.nextCheckTimeNs)."""
        lasts = [
            self.last_contact[b.id]
            for b in image.brokers.values()
            if not b.fenced and b.id in self.last_contact
        ]
        return min(lasts) + self.config.session_timeout_ms + 1 if lasts else None

    def expired_brokers(self, image: ClusterImage, now_ms: int) -> list[int]:
        """Unfenced brokers silent past the session timeout, oldest contact first."""
        out = [
            (self.last_contact.get(b.id, -1), b.id)
            for b in image.brokers.values()
            if not b.fenced and not self.has_valid_session(b, now_ms)
        ]
        return [broker_id for _, broker_id in sorted(out)]

    def fence(self, image: ClusterImage, broker_id: int) -> Decision:
        """The session-timeout decision: out of every ISR but a last one, leaders moved, then fenced."""
        broker = image.brokers.get(broker_id)
        if broker is None or broker.fenced:
            return Decision([], None)
        records = self._leader_and_isr_updates(image, remove=broker_id)
        records.append(self._fence_record(broker, fence=True))
        self.last_contact.pop(broker_id, None)
        return Decision(records, None, [f"fenced broker {broker_id}: no heartbeat within the session"])

    # -- registration --------------------------------------------------------------------------

    def register(self, image: ClusterImage, req: Registration, next_offset: int, now_ms: int) -> Decision:
        """BrokerRegistration; `next_offset` is where the RegisterBrokerRecord will land (its epoch)."""
        cfg = self.config
        if req.cluster_id != cfg.cluster_id:
            return _refuse(
                E.INCONSISTENT_CLUSTER_ID,
                f"Expected cluster ID {cfg.cluster_id}, but got cluster ID {req.cluster_id}",
            )
        try:
            incarnation = kafka_to_uuid(req.incarnation_id)
        except ValueError:
            return _refuse(E.INVALID_REQUEST, f"incarnation id {req.incarnation_id!r} is not a Kafka Uuid")
        if req.broker_id < 0:
            return _refuse(E.INVALID_REQUEST, f"broker id {req.broker_id} is negative")
        existing = image.brokers.get(req.broker_id)
        if req.incarnation_id in self.superseded.get(req.broker_id, set()):
            return _refuse(
                E.DUPLICATE_BROKER_REGISTRATION,
                f"incarnation {req.incarnation_id} of broker {req.broker_id} is older than the registered one",
            )
        if (
            existing is not None
            and existing.incarnation_id != req.incarnation_id
            and self.has_valid_session(existing, now_ms)
        ):
            return _refuse(
                E.DUPLICATE_BROKER_REGISTRATION, "Another broker is registered with that broker id."
            )
        if req.is_migrating_zk_broker and not (cfg.zk_migration and cfg.metadata_version >= MV_MIGRATION):
            return _refuse(E.BROKER_ID_NOT_REGISTERED, "Controller does not support registering ZK brokers.")
        if not req.is_migrating_zk_broker:
            if not self.active:
                return _refuse(
                    E.BROKER_ID_NOT_REGISTERED,
                    "Controller is in pre-migration mode and cannot register KRaft brokers until the "
                    "metadata migration is complete.",
                )
            if req.broker_id in self.zk_broker_ids or (
                existing is not None
                and existing.is_migrating_zk_broker
                and self.has_valid_session(existing, now_ms)
            ):
                return _refuse(
                    E.DUPLICATE_BROKER_REGISTRATION,
                    f"broker id {req.broker_id} is held by a ZooKeeper-mode broker; stop it first",
                )
        features = dict(req.features)
        if METADATA_VERSION not in features:
            features[METADATA_VERSION] = (MV_MINIMUM_KRAFT, MV_MINIMUM_KRAFT)
        lo, hi = features[METADATA_VERSION]
        if not lo <= cfg.metadata_version <= hi:
            return _refuse(
                E.UNSUPPORTED_VERSION,
                f"Unable to register because the broker does not support version {cfg.metadata_version} "
                f"of {METADATA_VERSION}. It wants a version between {lo} and {hi}, inclusive.",
            )
        rec = record(
            "RegisterBrokerRecord",
            3 if cfg.metadata_version >= 17 else 2,
            BrokerId=req.broker_id,
            IsMigratingZkBroker=req.is_migrating_zk_broker,
            IncarnationId=incarnation,
            BrokerEpoch=next_offset,
            EndPoints=[
                {"Name": li.name, "Host": li.host, "Port": li.port, "SecurityProtocol": li.security_protocol}
                for li in req.listeners
            ],
            Features=[
                {"Name": n, "MinSupportedVersion": r[0], "MaxSupportedVersion": r[1]}
                for n, r in features.items()
            ],
            Rack=req.rack,
            Fenced=True,
            InControlledShutdown=False,
            **({"LogDirs": [kafka_to_uuid(d) for d in req.log_dirs]} if cfg.metadata_version >= 17 else {}),
        )
        records = [rec]
        if existing is not None:
            if existing.incarnation_id not in (None, req.incarnation_id):
                self.superseded.setdefault(req.broker_id, set()).add(existing.incarnation_id)
            if req.previous_broker_epoch != existing.broker_epoch:
                # An unclean restart (a new incarnation, or one that does not name its last epoch): the
                # old registration's ISR places and leaderships go, as when it is fenced (KIP-903).
                records += self._leader_and_isr_updates(image, remove=req.broker_id)
        # A new registration starts fenced; a new epoch means the replicas it reported offline are
        # back (KIP-589: the broker epoch gates replica state).
        self.last_contact[req.broker_id] = now_ms
        for offline in self.offline.values():
            offline.discard(req.broker_id)
        again = _why_again(existing, req, existing is not None and self.has_valid_session(existing, now_ms))
        note = (
            f"registered broker {req.broker_id} epoch {next_offset}"
            + (" (migrating ZooKeeper broker)" if req.is_migrating_zk_broker else "")
            + again
        )
        if again.endswith(_RETRIED):  # a lost reply retried: routine, for -v (the operator's log stays calm)
            _LOG.debug("%s", note)
            return Decision(records, RegistrationReply(E.NONE, next_offset), [])
        return Decision(records, RegistrationReply(E.NONE, next_offset), [note])

    # -- heartbeats ----------------------------------------------------------------------------

    def heartbeat(self, image: ClusterImage, req: Heartbeat, now_ms: int) -> Decision:
        broker = image.brokers.get(req.broker_id)
        if broker is None or broker.broker_epoch != req.broker_epoch:
            why = (
                f"No broker registration found for broker id {req.broker_id}"
                if broker is None
                else f"Expected broker epoch {broker.broker_epoch}, but got broker epoch {req.broker_epoch}"
            )
            return Decision([], HeartbeatReply(E.STALE_BROKER_EPOCH, message=why))
        self.last_contact[broker.id] = now_ms
        caught_up = req.current_metadata_offset >= broker.broker_epoch
        records: list[MetadataRecord] = []
        notes: list[str] = []
        state = state_of(broker)
        fenced, shut_down = broker.fenced, False
        if state is BrokerState.INACTIVE:
            # Kafka's BrokerHeartbeatManager, FENCED: wantShutDown → SHUTDOWN_NOW, else unfenced once
            # caught up. A fence ends a controlled shutdown (touch() clears its offset), so a broker
            # that heartbeats again after SHUTDOWN_NOW is unfenced like any other; Kafka's broker
            # sends nothing after shouldShutDown (its lifecycle manager's queue shuts down).
            if req.want_shut_down:
                shut_down = True
            elif not req.want_fence and caught_up:
                records += self._unfence(image, broker)
                fenced = False
                notes.append(f"unfenced broker {broker.id}")
        elif state is BrokerState.ACTIVE:
            if req.want_fence or (req.want_shut_down and not self._leads_any(image, broker.id)):
                records += self._leader_and_isr_updates(image, remove=broker.id)
                records.append(self._fence_record(broker, fence=True))
                fenced, shut_down = True, req.want_shut_down
                notes.append(f"fenced broker {broker.id} at its request")
            elif req.want_shut_down:
                # It leads something: leadership moves away now, and a later heartbeat (once it leads
                # nothing) lets it stop, as Kafka's CONTROLLED_SHUTDOWN -> SHUTDOWN_NOW.
                records += self._controlled_shutdown(image, broker)
                notes.append(f"broker {broker.id} in controlled shutdown: leadership moved away")
        elif not req.want_shut_down:
            notes.append(f"broker {broker.id} is in controlled shutdown and cannot become active again")
        elif self._leads_any(image, broker.id):  # STOPPING, still leading: move what is left
            records += self._leader_and_isr_updates(image, remove=broker.id)
        else:  # STOPPING and leading nothing: it may stop now (it cannot go back to active)
            records.append(self._fence_record(broker, fence=True))
            fenced, shut_down = True, True
            notes.append(f"broker {broker.id} finished its controlled shutdown")
        if shut_down:
            self.last_contact.pop(broker.id, None)
        return Decision(
            records,
            HeartbeatReply(E.NONE, is_caught_up=caught_up, is_fenced=fenced, should_shut_down=shut_down),
            notes,
        )

    def _unfence(self, image: ClusterImage, broker: Broker) -> list[MetadataRecord]:
        """Unfence, then give leaderless partitions whose ISR holds the broker a leader (handleBrokerUnfenced)."""
        records = [self._fence_record(broker, fence=False)]
        for topic, p in _partitions(image):
            if p.leader == NO_LEADER and broker.id in p.isr:
                change = self._change(image, topic, p, isr=None, add=broker.id)
                if change is not None:
                    records.append(change)
        return records

    def _controlled_shutdown(self, image: ClusterImage, broker: Broker) -> list[MetadataRecord]:
        records = [
            record(
                "BrokerRegistrationChangeRecord",
                1,
                BrokerId=broker.id,
                BrokerEpoch=broker.broker_epoch,
                Fenced=0,
                InControlledShutdown=1,
            )
        ]
        return records + self._leader_and_isr_updates(image, remove=broker.id)

    def _fence_record(self, broker: Broker, *, fence: bool) -> MetadataRecord:
        if self.config.metadata_version >= MV_BROKER_REGISTRATION_CHANGE:
            return record(
                "BrokerRegistrationChangeRecord",
                0,
                BrokerId=broker.id,
                BrokerEpoch=broker.broker_epoch,
                Fenced=1 if fence else -1,
            )
        name = "FenceBrokerRecord" if fence else "UnfenceBrokerRecord"
        return record(name, 0, Id=broker.id, Epoch=broker.broker_epoch)

    def _leads_any(self, image: ClusterImage, broker_id: int) -> bool:
        return any(p.leader == broker_id for _, p in _partitions(image))

    # -- elections -----------------------------------------------------------------------------

    def _acceptable(self, image: ClusterImage, broker_id: int, topic: str, partition: int) -> bool:
        b = image.brokers.get(broker_id)
        return (
            b is not None
            and not b.fenced
            and not b.in_controlled_shutdown
            and broker_id not in self.offline.get((topic, partition), ())
        )

    def _change(
        self,
        image: ClusterImage,
        topic: Topic,
        p: Partition,
        *,
        isr: list[int] | None,
        remove: int | None = None,
        add: int | None = None,
        recovery: int | None = None,
    ) -> MetadataRecord | None:
        """A PartitionChangeRecord moving `p` to `isr` with a leader elected as Kafka does, or None.

        The current leader stays while it is in the ISR and acceptable; otherwise the first replica (in
        assignment order) that is; otherwise no leader (unclean election is off). While migrating, an
        ISR shrink bumps the leader epoch (Kafka does so that ZooKeeper-mode brokers see the change).
        """
        target = list(p.isr) if isr is None else isr

        def ok(r: int) -> bool:
            if r == remove:
                return False
            return r == add or self._acceptable(image, r, topic.name, p.partition)

        if partition_reassignment.in_progress(p):
            # Kafka's PartitionChangeBuilder: an ISR holding every target replica completes the move
            tid = _tid(topic)
            assert tid is not None
            return partition_reassignment.build_change(
                p, tid, ok, isr=target, recovery=recovery, zk_migration=self.config.zk_migration
            )

        if p.leader != NO_LEADER and p.leader in target and ok(p.leader):
            leader = p.leader
        else:
            leader = next((r for r in p.replicas if r in target and ok(r)), NO_LEADER)
        fields: dict[str, object] = {}
        if target != list(p.isr):
            fields["Isr"] = target
        if leader != p.leader:
            fields["Leader"] = leader
        elif "Isr" in fields and self.config.zk_migration and not set(p.isr) <= set(target):
            fields["Leader"] = leader  # the shrink bumps the leader epoch
        if recovery is not None and recovery != p.leader_recovery_state:
            fields["LeaderRecoveryState"] = recovery
        if not fields:
            return None
        tid = _tid(topic)
        assert tid is not None
        return record("PartitionChangeRecord", 0, PartitionId=p.partition, TopicId=tid, **fields)

    def _leader_and_isr_updates(
        self,
        image: ClusterImage,
        *,
        remove: int,
        only: Iterable[tuple[Topic, Partition]] | None = None,
    ) -> list[MetadataRecord]:
        """Take `remove` out of every ISR it is in, except where it is the last member (KIP-903's
        exception: the ISR keeps it, and it loses leadership), electing new leaders where needed."""
        out: list[MetadataRecord] = []
        for topic, p in only if only is not None else _partitions(image):
            if remove not in p.isr and p.leader != remove:
                continue
            isr = [r for r in p.isr if r != remove] if len(p.isr) > 1 else list(p.isr)
            change = self._change(image, topic, p, isr=isr, remove=remove)
            if change is not None:
                out.append(change)
        return out

    # -- AlterPartition ------------------------------------------------------------------------

    def _topic_by_id(self, image: ClusterImage, topic_id: str) -> Topic | None:
        name = self._ids.get(topic_id)
        topic = image.topics.get(name) if name is not None else None
        if topic is None or topic.topic_id != topic_id:
            self._ids = {t.topic_id: t.name for t in image.topics.values() if t.topic_id is not None}
            name = self._ids.get(topic_id)
            topic = image.topics.get(name) if name is not None else None
        return topic

    def alter_partition(self, image: ClusterImage, req: AlterPartition) -> Decision:
        if not self.active:
            return Decision(
                [], AlterPartitionReply(E.NOT_CONTROLLER, message="soft start: copy not committed")
            )
        broker = image.brokers.get(req.broker_id)
        if broker is None or broker.broker_epoch != req.broker_epoch:
            return Decision([], AlterPartitionReply(E.STALE_BROKER_EPOCH))
        records: list[MetadataRecord] = []
        topics: list[TopicResult] = []
        for t in req.topics:
            topic = self._find_topic(image, t, req.version)
            if topic is None:
                error = E.UNKNOWN_TOPIC_ID if req.version > 1 else E.UNKNOWN_TOPIC_OR_PARTITION
                topics.append(
                    TopicResult(
                        t.name, t.topic_id, tuple(PartitionResult(pa.partition, error) for pa in t.partitions)
                    )
                )
                continue
            results = []
            for pa in t.partitions:
                p = topic.partitions.get(pa.partition)
                error = self._validate(image, req, topic, p, pa)
                if error != E.NONE or p is None:
                    results.append(PartitionResult(pa.partition, error))
                    continue
                new_isr = [m.broker_id for m in pa.new_isr]
                change = self._change(image, topic, p, isr=new_isr, recovery=pa.leader_recovery_state)
                leader, leader_epoch, epoch = p.leader, p.leader_epoch, p.partition_epoch
                if change is not None:
                    records.append(change)
                    epoch += 1
                    if change.fields.get("Isr") is not None:  # a completed move drops the removed replicas
                        new_isr = list(change.fields["Isr"])
                    if change.fields.get("Leader", _NO_LEADER_CHANGE) != _NO_LEADER_CHANGE:
                        leader, leader_epoch = change.fields["Leader"], leader_epoch + 1
                    if leader != req.broker_id:
                        results.append(
                            PartitionResult(
                                pa.partition,
                                E.NEW_LEADER_ELECTED if req.version > 1 else E.FENCED_LEADER_EPOCH,
                            )
                        )
                        continue
                results.append(
                    PartitionResult(
                        pa.partition,
                        E.NONE,
                        leader=leader,
                        leader_epoch=leader_epoch,
                        isr=tuple(new_isr),
                        partition_epoch=epoch,
                        leader_recovery_state=pa.leader_recovery_state,
                    )
                )
            topics.append(TopicResult(t.name, t.topic_id, tuple(results)))
        return Decision(records, AlterPartitionReply(E.NONE, tuple(topics)))

    def _find_topic(self, image: ClusterImage, t: TopicAlter, version: int) -> Topic | None:
        if version > 1:
            return self._topic_by_id(image, t.topic_id) if t.topic_id else None
        return image.topics.get(t.name) if t.name is not None else None

    def _validate(
        self, image: ClusterImage, req: AlterPartition, topic: Topic, p: Partition | None, pa: PartitionAlter
    ) -> int:
        """Kafka's validateAlterPartitionData, check for check and in its order."""
        if p is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION
        if pa.leader_epoch > p.leader_epoch or pa.partition_epoch > p.partition_epoch:
            return E.NOT_CONTROLLER  # the leader has seen epochs this controller has not
        if pa.leader_epoch < p.leader_epoch:
            return E.FENCED_LEADER_EPOCH
        if req.broker_id != p.leader:
            return NOT_LEADER_ERROR
        if pa.partition_epoch < p.partition_epoch:
            return E.INVALID_UPDATE_VERSION
        isr = [m.broker_id for m in pa.new_isr]
        if not isr or len(set(isr)) != len(isr) or not set(isr) <= set(p.replicas):
            return E.INVALID_REQUEST
        if p.leader not in isr:
            return E.INVALID_REQUEST
        if pa.leader_recovery_state == 1 and len(isr) > 1:
            return E.INVALID_REQUEST
        if p.leader_recovery_state == 0 and pa.leader_recovery_state == 1:
            return E.INVALID_REQUEST
        offline = self.offline.get((topic.name, p.partition), set())
        for m in pa.new_isr:
            b = image.brokers.get(m.broker_id)
            if (
                b is None
                or b.in_controlled_shutdown
                or b.fenced
                or (m.broker_epoch != -1 and m.broker_epoch != b.broker_epoch)
                or m.broker_id in offline
            ):
                return E.INELIGIBLE_REPLICA if req.version > 1 else E.OPERATION_NOT_ATTEMPTED
        return E.NONE

    # -- AlterReplicaState (KIP-589) -----------------------------------------------------------

    def alter_replica_state(self, image: ClusterImage, req: AlterReplicaState) -> Decision:
        if not self.active:
            return Decision([], AlterReplicaStateReply(E.NOT_CONTROLLER, message="soft start"))
        broker = image.brokers.get(req.broker_id)
        if broker is None or broker.broker_epoch != req.broker_epoch:
            return Decision([], AlterReplicaStateReply(E.STALE_BROKER_EPOCH))
        if req.event_type != EVENT_OFFLINE:
            return Decision(
                [], AlterReplicaStateReply(E.UNKNOWN_EVENT_TYPE, message=f"event type {req.event_type}")
            )
        records: list[MetadataRecord] = []
        results = []
        for name, partitions in req.topics:
            topic = image.topics.get(name)
            errors = []
            for pid in partitions:
                p = topic.partitions.get(pid) if topic is not None else None
                if topic is None or p is None or req.broker_id not in p.replicas:
                    errors.append((pid, E.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                self.offline.setdefault((name, pid), set()).add(req.broker_id)
                records += self._leader_and_isr_updates(image, remove=req.broker_id, only=[(topic, p)])
                errors.append((pid, E.NONE))
            results.append((name, tuple(errors)))
        notes = [f"broker {req.broker_id} reported {sum(len(p) for _, p in req.topics)} replicas offline"]
        return Decision(records, AlterReplicaStateReply(E.NONE, tuple(results)), notes)


def _refuse(error: int, message: str) -> Decision:
    return Decision([], RegistrationReply(error, -1, message))


def _partitions(image: ClusterImage) -> Iterator[tuple[Topic, Partition]]:
    for topic in image.topics.values():
        for p in topic.partitions.values():
            yield topic, p


def _tid(topic: Topic) -> uuid.UUID | None:
    return kafka_to_uuid(topic.topic_id) if topic.topic_id is not None else None


_RETRIED = "the same incarnation retried (its earlier reply was lost)"
_LOG = logging.getLogger(__name__)


def _why_again(existing: Broker | None, req: Registration, session_valid: bool) -> str:
    """Why a broker id registers again, for the log an operator reads (a registration twice per
    broker is normal in a migration: once in ZooKeeper mode, once after the roll to KRaft)."""
    if existing is None:
        return ""
    if existing.is_migrating_zk_broker and not req.is_migrating_zk_broker:
        return "; again, now as a KRaft broker: it was rolled from ZooKeeper mode"
    if existing.incarnation_id is not None and existing.incarnation_id != req.incarnation_id:
        why = "the broker restarted (a new incarnation)"
    elif req.previous_broker_epoch == existing.broker_epoch:
        why = "the same incarnation re-registered cleanly (it had lost its registration reply or session)"
    else:
        why = _RETRIED
    expired = "" if session_valid else f", its session of epoch {existing.broker_epoch} having expired"
    return f"; again: {why}{expired}"
