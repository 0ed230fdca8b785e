"""Records ↔ model: the one place that turns a ClusterImage into metadata records and back.

`records_from_image` emits what Kafka's `ZkMigrationClient.readAllMetadata` emits, in its order
(reference §2). `ImageBuilder` replays a record stream into a ClusterImage the way Kafka's
MetadataLoader does, including KIP-868 metadata transactions: records between BeginTransactionRecord
and EndTransactionRecord are applied together at the End, AbortTransactionRecord discards them, and a
transaction still open at the end of the stream is reported and not applied.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from migrator.bulk import without_gc
from migrator.errors import BadInputError
from migrator.kraft.records import MetadataRecord, OpaqueRecord, kafka_to_uuid, record, uuid_to_kafka
from migrator.model import (
    Acl,
    Broker,
    ClientQuota,
    ClusterImage,
    ConfigEntity,
    DelegationToken,
    Endpoint,
    FeatureRange,
    Partition,
    ProducerIdBlock,
    ScramCredential,
    Topic,
    replayed_partition,
)

__all__ = [
    "ACL_OPERATIONS",
    "ACL_PERMISSION_TYPES",
    "ACL_RESOURCE_TYPES",
    "CONFIG_RESOURCE_TYPES",
    "MIGRATION_STATES",
    "PATTERN_TYPES",
    "PRODUCER_ID_BLOCK_SIZE",
    "SCRAM_MECHANISMS",
    "SECURITY_PROTOCOLS",
    "ControllerRegistration",
    "ImageBuilder",
    "ImageChanges",
    "OpenTransaction",
    "ReplayResult",
    "broker_registration_record",
    "records_from_image",
    "replay",
    "snapshot_records",
    "Uncommitted",
]

# Kafka's code tables (reference §4), code -> Java enum name.
CONFIG_RESOURCE_TYPES = {
    0: "UNKNOWN",
    2: "TOPIC",
    4: "BROKER",
    8: "BROKER_LOGGER",
    16: "CLIENT_METRICS",
}
ACL_RESOURCE_TYPES = {
    0: "UNKNOWN",
    1: "ANY",
    2: "TOPIC",
    3: "GROUP",
    4: "CLUSTER",
    5: "TRANSACTIONAL_ID",
    6: "DELEGATION_TOKEN",
    7: "USER",
}
PATTERN_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
ACL_OPERATIONS = {
    0: "UNKNOWN",
    1: "ANY",
    2: "ALL",
    3: "READ",
    4: "WRITE",
    5: "CREATE",
    6: "DELETE",
    7: "ALTER",
    8: "DESCRIBE",
    9: "CLUSTER_ACTION",
    10: "DESCRIBE_CONFIGS",
    11: "ALTER_CONFIGS",
    12: "IDEMPOTENT_WRITE",
    13: "CREATE_TOKENS",
    14: "DESCRIBE_TOKENS",
}
ACL_PERMISSION_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"}
SCRAM_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
MIGRATION_STATES = {0: "NONE", 1: "MIGRATION", 2: "PRE_MIGRATION", 3: "POST_MIGRATION", 4: "ZK"}
# Quota entity types in the order Kafka lists them in ClientQuotaRecord.Entity.
QUOTA_ENTITY_ORDER = ("user", "client-id", "ip")
# ZooKeeper allocates producer ids in blocks of 1000 (ProducerIdManager.PRODUCER_ID_BLOCK_SIZE).
PRODUCER_ID_BLOCK_SIZE = 1000

_NO_LEADER_CHANGE = -2
_CODES: dict[str, dict[str, int]] = {
    "config": {v: k for k, v in CONFIG_RESOURCE_TYPES.items()},
    "resource": {v: k for k, v in ACL_RESOURCE_TYPES.items()},
    "pattern": {v: k for k, v in PATTERN_TYPES.items()},
    "operation": {v: k for k, v in ACL_OPERATIONS.items()},
    "permission": {v: k for k, v in ACL_PERMISSION_TYPES.items()},
    "scram": {v: k for k, v in SCRAM_MECHANISMS.items()},
    "protocol": {v: k for k, v in SECURITY_PROTOCOLS.items()},
}


def _code(table: str, name: str, what: str) -> int:
    try:
        return _CODES[table][name]
    except KeyError:
        known = ", ".join(n for n in _CODES[table] if n != "UNKNOWN")
        raise BadInputError(f"{what}: unknown {table} name {name!r} (known: {known})") from None


def _name(table: dict[int, str], code: int) -> str:
    return table.get(code, f"UNKNOWN_{code}")


def _kafka_uuid(text: str, what: str) -> uuid.UUID:
    try:
        return kafka_to_uuid(text)
    except ValueError as e:
        raise BadInputError(f"{what}: {e}") from None


# ---------------------------------------------------------------------------------------------------
# image -> records


def _config_records(entity: ConfigEntity) -> Iterator[MetadataRecord]:
    rtype = _code("config", entity.resource_type, f"configs of {entity.resource_type} {entity.name!r}")
    for key, value in entity.configs.items():
        yield record("ConfigRecord", 0, ResourceType=rtype, ResourceName=entity.name, Name=key, Value=value)


def _partition_record(topic_id: uuid.UUID, p: Partition) -> MetadataRecord:
    if p.has_state:
        isr, leader, leader_epoch, partition_epoch = p.isr, p.leader, p.leader_epoch, p.partition_epoch
    else:
        # ZkMigrationClient: no state znode -> ISR = replicas, leader = first replica, epochs 0.
        isr, leader = list(p.replicas), (p.replicas[0] if p.replicas else -1)
        leader_epoch, partition_epoch = 0, 0
    return record(
        "PartitionRecord",
        0,
        PartitionId=p.partition,
        TopicId=topic_id,
        Replicas=list(p.replicas),
        Isr=list(isr),
        RemovingReplicas=list(p.removing_replicas),
        AddingReplicas=list(p.adding_replicas),
        Leader=leader,
        LeaderRecoveryState=p.leader_recovery_state,
        LeaderEpoch=leader_epoch,
        PartitionEpoch=partition_epoch,
    )


def _quota_entity(entity: dict[str, str | None]) -> list[dict[str, Any]]:
    order = {k: i for i, k in enumerate(QUOTA_ENTITY_ORDER)}
    return [
        {"EntityType": k, "EntityName": entity[k]}
        for k in sorted(entity, key=lambda k: (order.get(k, 99), k))
    ]


def records_from_image(
    image: ClusterImage, *, orphan_topic_configs: bool = False
) -> Iterator[MetadataRecord]:
    """The records a ZooKeeper migration writes for `image`, in Kafka's order (reference §2).

    Topics without a topic id cannot be migrated (Kafka fails on them); pending deletions are
    skipped as Kafka skips them. Configs of topics that are not in the image are not migrated unless
    `orphan_topic_configs` (a snapshot of a KRaft image keeps them).
    """
    pending = set(image.pending_deletions)
    missing = sorted(t.name for t in image.topics.values() if t.topic_id is None and t.name not in pending)
    if missing:
        shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        raise BadInputError(f"topics without a topic_id cannot be migrated: {shown}")
    migrated: set[str] = set()
    for topic in image.topics.values():
        if topic.name in pending:
            continue
        assert topic.topic_id is not None
        tid = _kafka_uuid(topic.topic_id, f"topic {topic.name!r} topic_id")
        migrated.add(topic.name)
        yield record("TopicRecord", 0, Name=topic.name, TopicId=tid)
        entity = image.configs.get(("TOPIC", topic.name))
        if entity is not None:
            yield from _config_records(entity)
        for p in sorted(topic.partitions.values(), key=lambda p: p.partition):
            rec = _partition_record(tid, p)
            dirs = image.partition_directories.get((topic.name, p.partition))
            if dirs and len(dirs) == len(
                p.replicas
            ):  # KIP-858's PartitionRecord v1 (metadata.version >= 3.7-IV2)
                rec = record("PartitionRecord", 1, **{**rec.fields, "Directories": list(dirs)})
            yield rec
    if orphan_topic_configs:
        for (rtype, name), entity in image.configs.items():
            if rtype == "TOPIC" and name not in migrated and name not in pending:
                yield from _config_records(entity)
    for (rtype, _), entity in image.configs.items():
        if rtype == "BROKER":
            yield from _config_records(entity)
    for (rtype, _), entity in image.configs.items():
        if rtype not in ("TOPIC", "BROKER"):
            yield from _config_records(entity)
    for quota in image.client_quotas:
        entity_data = _quota_entity(quota.entity)
        for key, value in quota.values.items():
            yield record(
                "ClientQuotaRecord", 0, Entity=entity_data, Key=key, Value=float(value), Remove=False
            )
    for cred in image.scram_credentials.values():
        yield record(
            "UserScramCredentialRecord",
            0,
            Name=cred.user,
            Mechanism=_code("scram", cred.mechanism, f"SCRAM credential of {cred.user!r}"),
            Salt=bytes(cred.salt),
            StoredKey=bytes(cred.stored_key),
            ServerKey=bytes(cred.server_key),
            Iterations=cred.iterations,
        )
    block = image.producer_id_block
    if block is not None:
        # KAFKA-15552: the next block, not the current one.
        yield record(
            "ProducerIdsRecord", 0, BrokerId=block.broker, BrokerEpoch=-1, NextProducerId=block.block_end + 1
        )
    for acl in image.acls:
        what = f"ACL {acl.principal} {acl.operation} on {acl.resource_type}:{acl.resource_name}"
        yield record(
            "AccessControlEntryRecord",
            0,
            Id=_kafka_uuid(acl.acl_id, what) if acl.acl_id else uuid.uuid4(),
            ResourceType=_code("resource", acl.resource_type, what),
            ResourceName=acl.resource_name,
            PatternType=_code("pattern", acl.pattern_type, what),
            Principal=acl.principal,
            Host=acl.host,
            Operation=_code("operation", acl.operation, what),
            PermissionType=_code("permission", acl.permission_type, what),
        )
    for token in image.delegation_tokens.values():
        yield record(
            "DelegationTokenRecord",
            0,
            Owner=token.owner,
            Requester=token.requester,
            Renewers=list(token.renewers),
            IssueTimestamp=token.issue_timestamp,
            MaxTimestamp=token.max_timestamp,
            ExpirationTimestamp=token.expiry_timestamp,
            TokenId=token.token_id,
        )


def broker_registration_record(broker: Broker) -> MetadataRecord:
    """RegisterBrokerRecord v3 for `broker`; a missing incarnation id gets a fresh one."""
    what = f"broker {broker.id}"
    incarnation = _kafka_uuid(broker.incarnation_id, what) if broker.incarnation_id else uuid.uuid4()
    return record(
        "RegisterBrokerRecord",
        3,
        BrokerId=broker.id,
        IsMigratingZkBroker=broker.is_migrating_zk_broker,
        IncarnationId=incarnation,
        BrokerEpoch=broker.broker_epoch,
        EndPoints=[
            {
                "Name": e.listener,
                "Host": e.host,
                "Port": e.port,
                "SecurityProtocol": _code("protocol", e.security_protocol, f"{what} listener {e.listener}"),
            }
            for e in broker.endpoints
        ],
        Features=[
            {"Name": n, "MinSupportedVersion": r.min_version, "MaxSupportedVersion": r.max_version}
            for n, r in broker.features.items()
        ],
        Rack=broker.rack,
        Fenced=broker.fenced,
        InControlledShutdown=broker.in_controlled_shutdown,
        LogDirs=[_kafka_uuid(d, f"{what} log dir") for d in broker.log_dirs],
    )


# ---------------------------------------------------------------------------------------------------
# records -> image


class ControllerRegistration(BaseModel):
    """A RegisterControllerRecord (KIP-919): controllers are not part of ClusterImage."""

    id: int
    incarnation_id: str
    zk_migration_ready: bool
    endpoints: list[Endpoint] = Field(default_factory=list)
    features: dict[str, FeatureRange] = Field(default_factory=dict)


class OpenTransaction(BaseModel):
    """A metadata transaction begun and neither ended nor aborted: its records are not applied."""

    name: str | None
    begin_offset: int
    pending_records: int


class ReplayResult(BaseModel):
    """What a replay produced: the image plus the log-only facts the image model has no place for."""

    image: ClusterImage
    last_offset: int = -1  # offset of the last record applied (or discarded by an abort)
    migration_state: int | None = None  # Kafka's ZkMigrationState code of the last applied record
    migration_state_offset: int | None = None
    feature_levels: dict[str, int] = Field(default_factory=dict)
    controllers: dict[int, ControllerRegistration] = Field(default_factory=dict)
    open_transaction: OpenTransaction | None = None
    committed_transactions: int = 0
    aborted_transactions: int = 0
    counts: dict[str, int] = Field(default_factory=dict)  # records seen per type, applied or not
    unknown_records: int = 0  # records of an apiKey/version this build cannot decode (skipped)

    def deep_copy(self) -> ReplayResult:
        """`model_copy(deep=True)` with the image copied by `ClusterImage.deep_copy` (the slow part)."""
        out = self.model_copy()
        for name, value in self.__dict__.items():
            out.__dict__[name] = value.deep_copy() if name == "image" else copy.deepcopy(value)
        return out

    @property
    def migration_state_name(self) -> str | None:
        return None if self.migration_state is None else _name(MIGRATION_STATES, self.migration_state)


@dataclass
class ImageChanges:
    """What replayed records touched since the reader last took them (`ImageBuilder.take_changes`):
    a propagator then looks at these keys only, not at every partition of the image."""

    partitions: set[tuple[str, int]] = field(default_factory=set)
    topics: set[str] = field(default_factory=set)  # created, re-created or removed: every partition
    brokers: set[int] = field(default_factory=set)  # registered, unregistered, fenced, changed


class Uncommitted(Exception):
    """An optimistic replay (`ImageBuilder(committed=True)`) met a transaction that does not commit
    (aborted, open at the end, or a record inside it that does not apply): replay again, buffered."""


class _Positions:
    """Where each key sits in one of the image's lists (ACLs by id, quota entities by entity).

    Each record scanned the whole list for its key: a copy of 20,000 client-quota entities spent
    110 s in the commit's replay (n records x n entries). The map is rebuilt when the list is not the
    one it indexed or its length changed behind the builder's back, and a hit is checked against the
    entry it names, so a list sorted or edited elsewhere never yields a wrong position."""

    def __init__(self, key: Callable[[Any], Any]) -> None:
        self._key = key
        self._items: list[Any] | None = None
        self._len = 0
        self._at: dict[Any, int] = {}

    def find(self, items: list[Any], key: Any) -> int | None:
        if items is not self._items or len(items) != self._len:
            self._rebuild(items)
        i = self._at.get(key)
        if i is not None and (i >= len(items) or self._key(items[i]) != key):
            self._rebuild(items)
            i = self._at.get(key)
        return i

    def appended(self, items: list[Any]) -> None:
        if items is self._items and len(items) == self._len + 1:
            self._at[self._key(items[-1])] = self._len
            self._len += 1

    def forget(self) -> None:
        """Entries moved (one was removed): the next find rebuilds the map."""
        self._items = None

    def _rebuild(self, items: list[Any]) -> None:
        self._items, self._len = items, len(items)
        self._at = {}
        for i, x in enumerate(items):
            self._at.setdefault(self._key(x), i)  # the first, as the scan it replaces found


#: An image this small is copied at BeginTransactionRecord by an optimistic replay (a few ms); a
#: larger one is not, and an abort then costs that replay again from the start (`Uncommitted`).
ROLLBACK_MAX_PARTITIONS = 20_000


def _small(image: ClusterImage) -> bool:
    total = 0
    for topic in image.topics.values():
        total += len(topic.partitions)
        if total > ROLLBACK_MAX_PARTITIONS:
            return False
    return total <= ROLLBACK_MAX_PARTITIONS


def _entity_key(entity: Mapping[str, str | None]) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted(entity.items(), key=lambda kv: kv[0]))


class ImageBuilder:
    """Replays (offset, record) pairs into a ClusterImage with KIP-868 transaction semantics."""

    def __init__(
        self, start: ReplayResult | ClusterImage | None = None, *, copy: bool = True, committed: bool = False
    ) -> None:
        """`copy=False` takes a ReplayResult over instead of copying it: its giver must not use it again.

        `committed`: apply a transaction's records as they come instead of holding them until its
        EndTransactionRecord, betting that it commits; anything else raises `Uncommitted` (the
        caller replays again without the bet). Holding the copy's records was a whole cluster's
        records at once (~1 GB at 1M partitions) beside the image they build."""
        resumed = start.open_transaction if isinstance(start, ReplayResult) else None
        if isinstance(start, ReplayResult):
            if resumed is not None and not committed:
                raise ValueError("cannot continue a buffered replay from a result with an open transaction")
            if not copy:
                self.result = start
            else:
                with without_gc():  # a whole cluster's objects (migrator.bulk)
                    self.result = start.deep_copy()
        else:
            with without_gc():
                image = start.deep_copy() if start is not None else ClusterImage()
            self.result = ReplayResult(image=image)
        self.image = self.result.image
        # Keyed by the record's uuid.UUID: converting every PartitionRecord's TopicId to a string is slow.
        self._topic_names: dict[uuid.UUID, str] = {
            kafka_to_uuid(t.topic_id): t.name for t in self.image.topics.values() if t.topic_id is not None
        }
        self._last_offset = self.result.last_offset
        self._txn: tuple[int, str | None] | None = None
        self._pending: list[tuple[int, MetadataRecord | OpaqueRecord]] = []
        self._committed = committed
        #: None until a reader asks for changes (`track_changes`): nothing is recorded for nobody
        self._changes: ImageChanges | None = None
        self._quota_at = _Positions(lambda q: _entity_key(q.entity))
        self._acl_at = _Positions(lambda a: a.acl_id)
        # The bet's way back (committed=True): the image as it was at BeginTransactionRecord, copied
        # when small (the copy's Begin follows the bootstrap only), so an abort or an open end rolls
        # back to it instead of replaying the log again; `_blind`: rolled back (or resumed from a
        # result whose transaction is open), the transaction's further records are only counted.
        self._at_begin: ReplayResult | None = None
        self._blind = False
        self._txn_records = 0
        if resumed is not None:
            self._txn = (resumed.begin_offset, resumed.name)
            self._txn_records = resumed.pending_records
            self._blind = True
            self.result.open_transaction = None

    @property
    def topic_names(self) -> Mapping[uuid.UUID, str]:
        """The image's topic id -> name index, kept by the replay (read-only for callers)."""
        return self._topic_names

    # -- changed keys ------------------------------------------------------------------------

    def track_changes(self) -> None:
        """From now on, record what each applied record touches (one reader takes them)."""
        self._changes = ImageChanges()

    def take_changes(self) -> ImageChanges | None:
        """What changed since tracking began or the last call; None when not tracking."""
        got = self._changes
        if got is not None:
            self._changes = ImageChanges()
        return got

    # -- stream ------------------------------------------------------------------------------

    def replay(self, offset: int, rec: MetadataRecord | OpaqueRecord) -> None:
        name = rec.name if isinstance(rec, MetadataRecord) else "UnknownRecord"
        counts = self.result.counts
        counts[name] = counts.get(name, 0) + 1
        if isinstance(rec, MetadataRecord) and rec.api_key in (23, 24, 25):
            self._transaction_marker(offset, rec)
            return
        if self._txn is not None:
            if not self._committed:
                self._pending.append((offset, rec))
                return
            self._txn_records += 1
            if self._blind:
                return
            try:
                self._apply(offset, rec)  # the bet: `_last_offset` moves at the commit, as buffered
            except Exception as e:  # an aborted transaction's bad record must not fail the replay
                if self._at_begin is None:
                    raise Uncommitted(f"offset {offset}: {e}") from e
                self._roll_back()  # an abort still needs no second replay; a commit does (`Uncommitted`)
            return
        self._apply(offset, rec)
        self._last_offset = offset

    def replay_all(self, records: Iterable[tuple[int, MetadataRecord | OpaqueRecord]]) -> ReplayResult:
        for offset, rec in records:
            self.replay(offset, rec)
        return self.finish()

    def finish(self) -> ReplayResult:
        """The result so far; an open transaction is reported, its records stay unapplied."""
        if self._txn is not None and self._committed and not self._blind:
            if self._at_begin is None:
                raise Uncommitted(f"transaction {self._txn[1]!r} begun at offset {self._txn[0]} is open")
            self._roll_back()
        self.result.last_offset = self._last_offset
        if self._txn is not None:
            pending = self._txn_records if self._committed else len(self._pending)
            self.result.open_transaction = OpenTransaction(
                name=self._txn[1], begin_offset=self._txn[0], pending_records=pending
            )
        else:
            self.result.open_transaction = None
        return self.result

    def _transaction_marker(self, offset: int, rec: MetadataRecord) -> None:
        if rec.api_key == 23:
            if self._txn is not None:
                raise BadInputError(
                    f"offset {offset}: BeginTransactionRecord while transaction {self._txn[1]!r} "
                    f"begun at offset {self._txn[0]} is still open"
                )
            self._txn = (offset, rec.fields.get("Name"))
            self._pending = []
            self._txn_records = 0
            if self._committed and _small(self.image):
                with without_gc():
                    self._at_begin = self.result.deep_copy()
            return
        if self._txn is None:
            raise BadInputError(f"offset {offset}: {rec.name} without a BeginTransactionRecord")
        if self._committed and (
            self._blind if rec.api_key == 24 else not self._blind and self._at_begin is None
        ):
            raise Uncommitted(
                f"offset {offset}: transaction {self._txn[1]!r} "
                + ("commits, but its records were not applied" if rec.api_key == 24 else "aborted")
            )
        if self._committed and rec.api_key == 25 and not self._blind:
            self._roll_back()
        pending, self._pending, self._txn = self._pending, [], None
        self._at_begin, self._blind = None, False
        if rec.api_key == 24:
            for o, r in pending:
                self._apply(o, r)
            self.result.committed_transactions += 1
        else:
            self.result.aborted_transactions += 1
        self._last_offset = offset

    def _roll_back(self) -> None:
        """The bet lost: back to the image at BeginTransactionRecord (the counts of records seen stay)."""
        assert self._at_begin is not None
        counts = self.result.counts
        self.result, self._at_begin = self._at_begin, None
        self.result.counts = counts
        self.image = self.result.image
        self._topic_names = {
            kafka_to_uuid(t.topic_id): t.name for t in self.image.topics.values() if t.topic_id is not None
        }
        self._quota_at = _Positions(lambda q: _entity_key(q.entity))
        self._acl_at = _Positions(lambda a: a.acl_id)
        self._blind = True

    # -- one record ------------------------------------------------------------------------------

    def _apply(self, offset: int, rec: MetadataRecord | OpaqueRecord) -> None:
        if isinstance(rec, OpaqueRecord):
            self.result.unknown_records += 1
            return
        handler = _HANDLERS.get(rec.api_key)
        if handler is not None:
            handler(self, offset, rec.fields)

    def _topic_by_id(self, offset: int, tid: uuid.UUID, what: str) -> Topic:
        name = self._topic_names.get(tid)
        if name is None or name not in self.image.topics:
            raise BadInputError(f"offset {offset}: {what} for unknown topic id {uuid_to_kafka(tid)}")
        return self.image.topics[name]

    def _broker(self, offset: int, broker_id: int, what: str) -> Broker:
        broker = self.image.brokers.get(broker_id)
        if broker is None:
            raise BadInputError(f"offset {offset}: {what} for unregistered broker {broker_id}")
        return broker

    def _register_broker(self, offset: int, f: dict[str, Any]) -> None:
        if self._changes is not None:
            self._changes.brokers.add(f["BrokerId"])
        self.image.brokers[f["BrokerId"]] = Broker(
            id=f["BrokerId"],
            endpoints=[
                Endpoint(
                    listener=e["Name"],
                    host=e["Host"],
                    port=e["Port"],
                    security_protocol=_name(SECURITY_PROTOCOLS, e["SecurityProtocol"]),
                )
                for e in f["EndPoints"]
            ],
            rack=f["Rack"],
            features={
                x["Name"]: FeatureRange(
                    min_version=x["MinSupportedVersion"], max_version=x["MaxSupportedVersion"]
                )
                for x in f["Features"]
            },
            incarnation_id=uuid_to_kafka(f["IncarnationId"]),
            broker_epoch=f["BrokerEpoch"],
            fenced=f["Fenced"],
            in_controlled_shutdown=f.get("InControlledShutdown", False),
            is_migrating_zk_broker=f.get("IsMigratingZkBroker", False),
            log_dirs=[uuid_to_kafka(d) for d in f.get("LogDirs", [])],
        )

    def _unregister_broker(self, offset: int, f: dict[str, Any]) -> None:
        if self._changes is not None:
            self._changes.brokers.add(f["BrokerId"])
        broker = self._broker(offset, f["BrokerId"], "UnregisterBrokerRecord")
        if broker.broker_epoch != f["BrokerEpoch"]:
            raise BadInputError(
                f"offset {offset}: UnregisterBrokerRecord for broker {broker.id} epoch {f['BrokerEpoch']}, "
                f"but its registration has epoch {broker.broker_epoch}"
            )
        del self.image.brokers[broker.id]

    def _fence(self, offset: int, f: dict[str, Any]) -> None:
        if self._changes is not None:
            self._changes.brokers.add(f["Id"])
        self._broker(offset, f["Id"], "FenceBrokerRecord").fenced = True

    def _unfence(self, offset: int, f: dict[str, Any]) -> None:
        if self._changes is not None:
            self._changes.brokers.add(f["Id"])
        self._broker(offset, f["Id"], "UnfenceBrokerRecord").fenced = False

    def _registration_change(self, offset: int, f: dict[str, Any]) -> None:
        if self._changes is not None:
            self._changes.brokers.add(f["BrokerId"])
        broker = self._broker(offset, f["BrokerId"], "BrokerRegistrationChangeRecord")
        fenced = f.get("Fenced", 0)  # BrokerRegistrationFencingChange: 1 FENCE, -1 UNFENCE, 0 NONE
        if fenced == 1:
            broker.fenced = True
        elif fenced == -1:
            broker.fenced = False
        elif fenced != 0:
            raise BadInputError(
                f"offset {offset}: BrokerRegistrationChangeRecord Fenced={fenced} is not -1, 0 or 1"
            )
        shutdown = f.get("InControlledShutdown", 0)  # 1 IN_CONTROLLED_SHUTDOWN, 0 NONE
        if shutdown == 1:
            broker.in_controlled_shutdown = True
        elif shutdown != 0:
            raise BadInputError(
                f"offset {offset}: BrokerRegistrationChangeRecord InControlledShutdown={shutdown} is not 0 or 1"
            )
        if f.get("LogDirs"):
            broker.log_dirs = [uuid_to_kafka(d) for d in f["LogDirs"]]

    def _topic(self, offset: int, f: dict[str, Any]) -> None:
        if self._changes is not None:
            self._changes.topics.add(f["Name"])
        old = self.image.topics.get(f["Name"])
        if old is not None and old.topic_id is not None:
            self._topic_names.pop(kafka_to_uuid(old.topic_id), None)
        self.image.topics[f["Name"]] = Topic(
            name=f["Name"], topic_id=uuid_to_kafka(f["TopicId"]), partitions={}
        )
        self._topic_names[f["TopicId"]] = f["Name"]

    def _remove_topic(self, offset: int, f: dict[str, Any]) -> None:
        topic = self._topic_by_id(offset, f["TopicId"], "RemoveTopicRecord")
        del self.image.topics[topic.name]
        del self._topic_names[f["TopicId"]]
        for pid in topic.partitions:
            self.image.partition_directories.pop((topic.name, pid), None)
        if self._changes is not None:
            self._changes.topics.add(topic.name)
        # MetadataDelta.replay(RemoveTopicRecord) drops the topic's configs too.
        self.image.configs.pop(("TOPIC", topic.name), None)

    def _partition(self, offset: int, f: dict[str, Any]) -> None:
        topic = self._topic_by_id(offset, f["TopicId"], "PartitionRecord")
        pid = f["PartitionId"]
        if self._changes is not None:
            self._changes.partitions.add((topic.name, pid))
        dirs = f.get("Directories")
        if dirs:
            self.image.partition_directories[(topic.name, pid)] = list(dirs)
        else:
            self.image.partition_directories.pop((topic.name, pid), None)
        topic.partitions[pid] = replayed_partition(
            pid,
            list(f["Replicas"]),
            list(f["Isr"]),
            f["Leader"],
            f["LeaderEpoch"],
            f["PartitionEpoch"],
            f["LeaderRecoveryState"],
            list(f["AddingReplicas"]),
            list(f["RemovingReplicas"]),
        )

    def _partition_change(self, offset: int, f: dict[str, Any]) -> None:
        """PartitionRegistration.merge: apply the fields present, bump the epochs as Kafka does."""
        topic = self._topic_by_id(offset, f["TopicId"], "PartitionChangeRecord")
        p = topic.partitions.get(f["PartitionId"])
        if p is None:
            raise BadInputError(
                f"offset {offset}: PartitionChangeRecord for unknown partition {topic.name}-{f['PartitionId']}"
            )
        if self._changes is not None:
            self._changes.partitions.add((topic.name, p.partition))
        # plain stores into the model's __dict__: pydantic's __setattr__ costs more than the rest of
        # this method, and dual-write replays one of these per ISR or leader change
        d = p.__dict__
        v = f.get("Replicas")
        if v is not None:
            d["replicas"] = list(v)
        v = f.get("Isr")
        if v is not None:
            d["isr"] = list(v)
        v = f.get("RemovingReplicas")
        if v is not None:
            d["removing_replicas"] = list(v)
        v = f.get("AddingReplicas")
        if v is not None:
            d["adding_replicas"] = list(v)
        v = f.get("Leader", _NO_LEADER_CHANGE)
        if v != _NO_LEADER_CHANGE:
            d["leader"] = v
            d["leader_epoch"] += 1
        v = f.get("LeaderRecoveryState", -1)
        if v != -1:
            d["leader_recovery_state"] = v
        v = f.get("Directories")
        if v is not None:
            self.image.partition_directories[(topic.name, p.partition)] = list(v)
        d["partition_epoch"] += 1

    def _config(self, offset: int, f: dict[str, Any]) -> None:
        key = (_name(CONFIG_RESOURCE_TYPES, f["ResourceType"]), f["ResourceName"])
        entity = self.image.configs.get(key)
        if f["Value"] is None:
            if entity is not None:
                entity.configs.pop(f["Name"], None)
                if not entity.configs:
                    del self.image.configs[key]
            return
        if entity is None:
            entity = self.image.configs[key] = ConfigEntity(resource_type=key[0], name=key[1])
        entity.configs[f["Name"]] = f["Value"]

    def _client_quota(self, offset: int, f: dict[str, Any]) -> None:
        entity = {e["EntityType"]: e["EntityName"] for e in f["Entity"]}
        quotas = self.image.client_quotas
        index = self._quota_at.find(quotas, _entity_key(entity))
        if f["Remove"]:
            if index is not None:
                quotas[index].values.pop(f["Key"], None)
                if not quotas[index].values:
                    del quotas[index]
                    self._quota_at.forget()
            return
        if index is None:
            quotas.append(ClientQuota(entity=entity, values={}))
            self._quota_at.appended(quotas)
            index = len(quotas) - 1
        quotas[index].values[f["Key"]] = f["Value"]

    def _scram(self, offset: int, f: dict[str, Any]) -> None:
        mechanism = _name(SCRAM_MECHANISMS, f["Mechanism"])
        self.image.scram_credentials[(f["Name"], mechanism)] = ScramCredential(
            user=f["Name"],
            mechanism=mechanism,
            salt=bytes(f["Salt"]),
            stored_key=bytes(f["StoredKey"]),
            server_key=bytes(f["ServerKey"]),
            iterations=f["Iterations"],
        )

    def _remove_scram(self, offset: int, f: dict[str, Any]) -> None:
        self.image.scram_credentials.pop((f["Name"], _name(SCRAM_MECHANISMS, f["Mechanism"])), None)

    def _acl(self, offset: int, f: dict[str, Any]) -> None:
        acl_id = uuid_to_kafka(f["Id"])
        acl = Acl(
            resource_type=_name(ACL_RESOURCE_TYPES, f["ResourceType"]),
            resource_name=f["ResourceName"],
            pattern_type=_name(PATTERN_TYPES, f["PatternType"]),
            principal=f["Principal"],
            host=f["Host"],
            operation=_name(ACL_OPERATIONS, f["Operation"]),
            permission_type=_name(ACL_PERMISSION_TYPES, f["PermissionType"]),
            acl_id=acl_id,
        )
        acls = self.image.acls
        index = self._acl_at.find(acls, acl_id)
        if index is None:
            acls.append(acl)
            self._acl_at.appended(acls)
        else:
            acls[index] = acl

    def _remove_acl(self, offset: int, f: dict[str, Any]) -> None:
        acl_id = uuid_to_kafka(f["Id"])
        self.image.acls = [a for a in self.image.acls if a.acl_id != acl_id]

    def _producer_ids(self, offset: int, f: dict[str, Any]) -> None:
        # KRaft keeps only the next id; the ZooKeeper block it came from is [next - 1000, next - 1].
        nxt = f["NextProducerId"]
        self.image.producer_id_block = ProducerIdBlock(
            broker=f["BrokerId"], block_start=max(0, nxt - PRODUCER_ID_BLOCK_SIZE), block_end=nxt - 1
        )

    def _token(self, offset: int, f: dict[str, Any]) -> None:
        self.image.delegation_tokens[f["TokenId"]] = DelegationToken(
            token_id=f["TokenId"],
            owner=f["Owner"],
            requester=f["Requester"],
            renewers=list(f["Renewers"]),
            issue_timestamp=f["IssueTimestamp"],
            max_timestamp=f["MaxTimestamp"],
            expiry_timestamp=f["ExpirationTimestamp"],
        )

    def _remove_token(self, offset: int, f: dict[str, Any]) -> None:
        self.image.delegation_tokens.pop(f["TokenId"], None)

    def _feature(self, offset: int, f: dict[str, Any]) -> None:
        # A level of 0 removes the feature (FeaturesDelta.replay).
        if f["FeatureLevel"] == 0:
            self.result.feature_levels.pop(f["Name"], None)
        else:
            self.result.feature_levels[f["Name"]] = f["FeatureLevel"]

    def _migration_state(self, offset: int, f: dict[str, Any]) -> None:
        self.result.migration_state = f["ZkMigrationState"]
        self.result.migration_state_offset = offset

    def _register_controller(self, offset: int, f: dict[str, Any]) -> None:
        self.result.controllers[f["ControllerId"]] = ControllerRegistration(
            id=f["ControllerId"],
            incarnation_id=uuid_to_kafka(f["IncarnationId"]),
            zk_migration_ready=f["ZkMigrationReady"],
            endpoints=[
                Endpoint(
                    listener=e["Name"],
                    host=e["Host"],
                    port=e["Port"],
                    security_protocol=_name(SECURITY_PROTOCOLS, e["SecurityProtocol"]),
                )
                for e in f["EndPoints"]
            ],
            features={
                x["Name"]: FeatureRange(
                    min_version=x["MinSupportedVersion"], max_version=x["MaxSupportedVersion"]
                )
                for x in f["Features"]
            },
        )

    def _noop(self, offset: int, f: dict[str, Any]) -> None:
        """NoOpRecord only advances the offset (the controller writes it to prove liveness)."""


_HANDLERS = {
    0: ImageBuilder._register_broker,
    1: ImageBuilder._unregister_broker,
    2: ImageBuilder._topic,
    3: ImageBuilder._partition,
    4: ImageBuilder._config,
    5: ImageBuilder._partition_change,
    7: ImageBuilder._fence,
    8: ImageBuilder._unfence,
    9: ImageBuilder._remove_topic,
    10: ImageBuilder._token,
    11: ImageBuilder._scram,
    12: ImageBuilder._feature,
    14: ImageBuilder._client_quota,
    15: ImageBuilder._producer_ids,
    17: ImageBuilder._registration_change,
    18: ImageBuilder._acl,
    19: ImageBuilder._remove_acl,
    20: ImageBuilder._noop,
    21: ImageBuilder._migration_state,
    22: ImageBuilder._remove_scram,
    26: ImageBuilder._remove_token,
    27: ImageBuilder._register_controller,
}


def replay(
    records: Iterable[tuple[int, MetadataRecord | OpaqueRecord]],
    start: ReplayResult | ClusterImage | None = None,
) -> ReplayResult:
    """Replay (offset, record) pairs, optionally on top of a snapshot's result or an image."""
    return ImageBuilder(start).replay_all(records)


def snapshot_records(result: ReplayResult) -> Iterator[MetadataRecord]:
    """Every record needed to rebuild `result` from nothing, in the order Kafka's MetadataImage.write uses."""
    levels = dict(result.feature_levels)
    if "metadata.version" in levels:
        yield record(
            "FeatureLevelRecord", 0, Name="metadata.version", FeatureLevel=levels.pop("metadata.version")
        )
    for name, level in sorted(levels.items()):
        yield record("FeatureLevelRecord", 0, Name=name, FeatureLevel=level)
    if result.migration_state is not None:
        yield record("ZkMigrationStateRecord", 0, ZkMigrationState=result.migration_state)
    for broker in result.image.brokers.values():
        yield broker_registration_record(broker)
    for c in result.controllers.values():
        yield record(
            "RegisterControllerRecord",
            0,
            ControllerId=c.id,
            IncarnationId=_kafka_uuid(c.incarnation_id, f"controller {c.id}"),
            ZkMigrationReady=c.zk_migration_ready,
            EndPoints=[
                {
                    "Name": e.listener,
                    "Host": e.host,
                    "Port": e.port,
                    "SecurityProtocol": _code("protocol", e.security_protocol, f"controller {c.id}"),
                }
                for e in c.endpoints
            ],
            Features=[
                {"Name": n, "MinSupportedVersion": r.min_version, "MaxSupportedVersion": r.max_version}
                for n, r in c.features.items()
            ],
        )
    yield from records_from_image(result.image, orphan_topic_configs=True)
