"""An operator's metadata change during dual-write, validated and turned into log records.

During DualWriteMetadata the log is the source of truth and ZooKeeper its write-behind copy, so an
operator's change (create a topic, alter a config, add an ACL, ...) becomes records appended to the
log; the syncer carries them to ZooKeeper. Nothing else writes ZooKeeper. Kafka's rules are in
`rules`, replica placement in `striped` (Kafka's KRaft placer), the -1 defaults in `topic_defaults`,
SCRAM derivation in `scram`. One request's changes are planned together (`Pending` carries what
the earlier ones of the request do) and appended as one batch by the caller.
"""

from __future__ import annotations

import base64
import hashlib
import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field

from migrator.controller.managers.rules import (
    QUOTA_KEYS,
    acl_of,
    collides,
    quota_entity,
    validate_broker_configs,
    validate_topic_configs,
    validate_topic_name,
)
from migrator.controller.managers.scram import SCRAM_HASH, ScramSpec, check_scram
from migrator.controller.managers.striped import PlacementError, RandomSource, UsableBroker, place
from migrator.controller.managers.topic_defaults import TopicDefaults
from migrator.errors import BadInputError, FindingsError
from migrator.kraft import dirfiles
from migrator.kraft.image import (
    ACL_OPERATIONS,
    ACL_PERMISSION_TYPES,
    ACL_RESOURCE_TYPES,
    PATTERN_TYPES,
    SCRAM_MECHANISMS,
)
from migrator.kraft.records import MetadataRecord, kafka_to_uuid, record
from migrator.model import Acl, ClusterImage

__all__ = [
    "BIG_CHANGE_RECORDS",
    "AclSpec",
    "AdminChange",
    "AdminReply",
    "Kind",
    "Pending",
    "Placing",
    "Planned",
    "Refusal",
    "plan_change",
    "refused_state",
]

Kind = Literal[
    "create-topic",
    "delete-topic",
    "add-partitions",
    "alter-topic-config",
    "alter-broker-config",
    "add-acl",
    "remove-acl",
    "set-quota",
    "remove-quota",
    "upsert-scram",
    "delete-scram",
]
BIG_CHANGE_RECORDS = 10_000  # above one batch, a change is appended inside a metadata transaction


class Refusal(BadInputError):
    """A refusal with Kafka's error code for it (the listener answers `kafka_code`)."""

    def __init__(self, kafka_code: int, message: str) -> None:
        super().__init__(message)
        self.kafka_code = kafka_code


INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR = 37, 38
_RNG = random.Random()  # Kafka's controller places with one java.util.Random of its own


@dataclass(frozen=True)
class Placing:
    """What placement sees besides the live brokers: the registered fenced ones (a replica there only
    when the unfenced cannot reach the replication factor, never a leader), the -1 defaults, the
    random source."""

    fenced: Mapping[int, str | None] = field(default_factory=dict)
    defaults: TopicDefaults = field(default_factory=TopicDefaults)
    rng: RandomSource = _RNG

    def usable(self, brokers: Mapping[int, str | None]) -> list[UsableBroker]:
        live = [UsableBroker(b, rack) for b, rack in sorted(brokers.items())]
        return live + [UsableBroker(b, r, True) for b, r in sorted(self.fenced.items()) if b not in brokers]


@dataclass
class Pending:
    """What the earlier changes of the same request do, for the checks of the later ones (their
    records are not in the image yet: the request is appended as one batch)."""

    topics: set[str] = field(default_factory=set)
    acls_added: set[tuple[str, ...]] = field(default_factory=set)
    acls_removed: set[str] = field(default_factory=set)
    topics_removed: set[str] = field(default_factory=set)


def _code(table: Mapping[int, str], name: str) -> int:
    return next(k for k, v in table.items() if v == name)


class AclSpec(BaseModel):
    resource_type: str
    resource_name: str
    pattern_type: str = "LITERAL"
    principal: str
    host: str = "*"
    operation: str
    permission_type: str = "ALLOW"


class AdminChange(BaseModel):
    """One operator change; the fields a kind does not use stay at their defaults."""

    kind: Kind
    topic: str | None = None
    partitions: int | None = None
    replication_factor: int | None = None
    configs: dict[str, str] = Field(default_factory=dict)  # to set
    delete_configs: list[str] = Field(default_factory=list)  # to remove
    broker: str | None = None  # broker id, or "" for the cluster default
    acl: AclSpec | None = None
    quota_entity: dict[str, str | None] = Field(default_factory=dict)  # None = <default>
    quota_values: dict[str, float] = Field(default_factory=dict)
    quota_remove: list[str] = Field(default_factory=list)
    scram: ScramSpec | None = None
    # create-topic / add-partitions: a manual assignment (partition -> replicas), validated by the
    # caller as Kafka does
    assignment: dict[int, list[int]] | None = None

    def describe(self) -> str:
        """One line naming the change, never a secret."""
        k = self.kind
        if k in ("create-topic", "delete-topic", "add-partitions", "alter-topic-config"):
            extra = f" to {self.partitions} partitions" if k == "add-partitions" else ""
            return f"{k} {self.topic}{extra}"
        if k == "alter-broker-config":
            return f"{k} {'<default>' if self.broker == '' else self.broker}"
        if k in ("add-acl", "remove-acl") and self.acl is not None:
            a = self.acl
            return (
                f"{k} {a.permission_type} {a.principal} {a.operation} on {a.resource_type}:"
                f"{a.resource_name} ({a.pattern_type}) from {a.host}"
            )
        if k in ("set-quota", "remove-quota"):
            ent = ",".join(f"{t}={'<default>' if n is None else n}" for t, n in self.quota_entity.items())
            return f"{k} {ent}"
        if self.scram is not None:
            return f"{k} {self.scram.user} {self.scram.mechanism}"
        return k


class AdminReply(BaseModel):
    """What applying a change did: what it appended and synced, or the refusal and its exit code."""

    ok: bool
    exit_code: int = 0
    message: str = ""
    first_offset: int | None = None
    last_offset: int | None = None
    records: int = 0
    migration_offset: int | None = None  # what /migration covers after the sync
    topic_id: str | None = None
    follower_pid: int | None = None
    partitions: int | None = None  # create-topic: what it got (the -1 defaults filled in)
    replication_factor: int | None = None


def refused_state(state_name: str) -> FindingsError:
    return FindingsError(
        f"admin changes go through the log only in DualWriteMetadata; the migration is in {state_name}"
    )


@dataclass
class Planned:
    """The records of a validated change and what they do."""

    records: list[MetadataRecord]
    summary: str
    topic_id: str | None = None
    noop: bool = False
    partitions: int | None = None  # create-topic: the partitions and replication factor it got
    replication_factor: int | None = None


def _topic(image: ClusterImage, name: str | None) -> str:
    if not name:
        raise BadInputError("a topic name is required")
    if name not in image.topics:
        raise BadInputError(f"topic {name!r} does not exist")
    return name


def _config_records(
    rtype: int, name: str, sets: Mapping[str, str], deletes: Sequence[str]
) -> list[MetadataRecord]:
    out = [
        record("ConfigRecord", 0, ResourceType=rtype, ResourceName=name, Name=k, Value=v)
        for k, v in sets.items()
    ]
    out += [
        record("ConfigRecord", 0, ResourceType=rtype, ResourceName=name, Name=k, Value=None) for k in deletes
    ]
    return out


def _partition_records(
    topic_id: uuid.UUID, assignment: Mapping[int, list[int]], live: Mapping[int, object] | None = None
) -> list[MetadataRecord]:
    """One PartitionRecord per partition; with `live`, the ISR is the live replicas (Kafka's isActive
    filter: a fenced broker the placer had to use is a replica, not in the ISR) and the leader its first."""
    out = []
    for pid, replicas in sorted(assignment.items()):
        isr = [r for r in replicas if live is None or r in live] or list(replicas)
        out.append(
            record(
                "PartitionRecord",
                0,
                PartitionId=pid,
                TopicId=topic_id,
                Replicas=list(replicas),
                Isr=isr,
                RemovingReplicas=[],
                AddingReplicas=[],
                Leader=isr[0],
                LeaderEpoch=0,
                PartitionEpoch=0,
            )
        )
    return out


def _placed(
    partitions: int, rf: int, brokers: Mapping[int, str | None], placing: Placing
) -> dict[int, list[int]]:
    return dict(enumerate(place(partitions, rf, placing.usable(brokers), placing.rng)))


def _plan_create_topic(
    change: AdminChange,
    image: ClusterImage,
    brokers: Mapping[int, str | None],
    placing: Placing,
    pending: Pending,
) -> Planned:
    name = change.topic or ""
    validate_topic_name(name)
    if name in image.topics or name in pending.topics:
        raise BadInputError(f"topic {name!r} already exists")
    for other in (*image.topics, *pending.topics):
        if collides(name, other):
            raise BadInputError(
                f"topic {name!r} collides with existing topic {other!r} ('.' and '_' collide)"
            )
    validate_topic_configs(change.configs)
    if change.assignment:
        assignment = {int(k): list(v) for k, v in change.assignment.items()}
        partitions, rf = len(assignment), len(assignment[0])
    else:
        # Kafka's createTopic: -1 takes num.partitions / default.replication.factor
        if change.replication_factor is not None and change.replication_factor <= 0:
            raise Refusal(
                INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        if change.partitions is not None and change.partitions <= 0:
            raise Refusal(
                INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
            )
        partitions = placing.defaults.num_partitions if change.partitions is None else change.partitions
        rf = (
            placing.defaults.replication_factor
            if change.replication_factor is None
            else change.replication_factor
        )
        try:
            assignment = _placed(partitions, rf, brokers, placing)
        except PlacementError as e:
            raise PlacementError(f"Unable to replicate the partition {rf} time(s): {e}") from None
    topic_id_text = dirfiles.random_kafka_uuid()
    tid = kafka_to_uuid(topic_id_text)
    records = [record("TopicRecord", 0, Name=name, TopicId=tid)]
    records += _config_records(2, name, change.configs, [])
    records += _partition_records(tid, assignment, brokers)
    pending.topics.add(name)
    return Planned(
        records=records,
        summary=f"created topic {name} (id {topic_id_text}) with {partitions} partitions, replication factor {rf}",
        topic_id=topic_id_text,
        partitions=partitions,
        replication_factor=rf,
    )


def _plan_add_partitions(
    change: AdminChange, image: ClusterImage, brokers: Mapping[int, str | None], placing: Placing
) -> Planned:
    name = _topic(image, change.topic)
    topic = image.topics[name]
    current = len(topic.partitions)
    wanted = change.partitions or 0
    if wanted <= current:
        raise BadInputError(
            f"topic {name} has {current} partitions; the number of partitions can only be increased "
            f"(asked for {wanted})"
        )
    assert topic.topic_id is not None
    if change.assignment:
        assignment = {int(k): list(v) for k, v in change.assignment.items()}
        if sorted(assignment) != list(range(current, wanted)):
            raise BadInputError(
                f"topic {name}: the assignment names partitions {sorted(assignment)}, not {current}..{wanted - 1}"
            )
    else:
        existing = topic.partitions.get(0) or next(iter(topic.partitions.values()), None)
        rf = len(existing.replicas) if existing is not None else 1
        placed = _placed(wanted - current, rf, brokers, placing)  # Kafka's own message, unprefixed
        assignment = {current + i: replicas for i, replicas in placed.items()}
    records = _partition_records(kafka_to_uuid(topic.topic_id), assignment, brokers)
    return Planned(records=records, summary=f"topic {name}: {current} → {wanted} partitions")


def _acl_of(spec: AclSpec) -> Acl:
    return acl_of(**spec.model_dump())


def _plan_add_acl(change: AdminChange, image: ClusterImage, pending: Pending) -> Planned:
    if change.acl is None:
        raise BadInputError("add-acl needs an ACL")
    acl = _acl_of(change.acl)
    if acl.key() in pending.acls_added or any(a.key() == acl.key() for a in image.acls):
        return Planned(records=[], summary="the ACL already exists; nothing to do", noop=True)
    pending.acls_added.add(acl.key())
    rec = record(
        "AccessControlEntryRecord",
        0,
        Id=kafka_to_uuid(dirfiles.random_kafka_uuid()),
        ResourceType=_code(ACL_RESOURCE_TYPES, acl.resource_type),
        ResourceName=acl.resource_name,
        PatternType=_code(PATTERN_TYPES, acl.pattern_type),
        Principal=acl.principal,
        Host=acl.host,
        Operation=_code(ACL_OPERATIONS, acl.operation),
        PermissionType=_code(ACL_PERMISSION_TYPES, acl.permission_type),
    )
    return Planned(records=[rec], summary=f"added ACL {change.describe().removeprefix('add-acl ')}")


def _plan_remove_acl(change: AdminChange, image: ClusterImage, pending: Pending) -> Planned:
    if change.acl is None:
        raise BadInputError("remove-acl needs an ACL")
    acl = _acl_of(change.acl)
    matches = [
        a for a in image.acls if a.key() == acl.key() and a.acl_id and a.acl_id not in pending.acls_removed
    ]
    if not matches:
        return Planned(records=[], summary="no such ACL; nothing to remove", noop=True)
    pending.acls_removed.update(a.acl_id or "" for a in matches)
    recs = [record("RemoveAccessControlEntryRecord", 0, Id=kafka_to_uuid(a.acl_id or "")) for a in matches]
    return Planned(records=recs, summary=f"removed {len(recs)} ACL binding(s)")


def _plan_quota(change: AdminChange, image: ClusterImage) -> Planned:
    """set-quota sets `quota_values` and removes `quota_remove` (one AlterClientQuotas entry, whole or
    not at all); remove-quota removes."""
    ent = quota_entity(change.quota_entity)
    kinds = set(change.quota_entity)
    recs = []
    if change.kind == "set-quota":
        if not change.quota_values and not change.quota_remove:
            raise BadInputError("set-quota needs at least one KEY=VALUE")
        for key, value in change.quota_values.items():
            spec = QUOTA_KEYS.get(key)
            if spec is None:
                raise BadInputError(f"unknown quota key {key!r} (known: {', '.join(QUOTA_KEYS)})")
            kind, applies = spec
            if not kinds <= applies:
                raise BadInputError(f"quota {key} does not apply to a {'+'.join(sorted(kinds))} entity")
            if value <= 0 or value != value:
                raise BadInputError(f"quota {key}={value} must be a positive number")
            if kind in ("long", "int") and value != int(value):
                raise BadInputError(f"quota {key}={value} must be a whole number")
            recs.append(record("ClientQuotaRecord", 0, Entity=ent, Key=key, Value=float(value), Remove=False))
    elif not change.quota_remove:
        raise BadInputError("remove-quota needs at least one KEY")
    for key in change.quota_remove:
        if key not in QUOTA_KEYS:
            raise BadInputError(f"unknown quota key {key!r} (known: {', '.join(QUOTA_KEYS)})")
    removed = [
        record("ClientQuotaRecord", 0, Entity=ent, Key=key, Value=0.0, Remove=True)
        for key in change.quota_remove
    ]
    who = change.describe().split(" ", 1)[1]
    if change.kind == "set-quota":
        extra = f", removed {len(removed)}" if removed else ""
        return Planned(records=recs + removed, summary=f"set {len(recs)} quota value(s){extra} on {who}")
    return Planned(records=removed, summary=f"removed {len(removed)} quota value(s) from {who}")


def _plan_scram(change: AdminChange, image: ClusterImage) -> Planned:
    spec = change.scram
    if spec is None:
        raise BadInputError(f"{change.kind} needs a SCRAM user and mechanism")
    mech_code = next((k for k, v in SCRAM_MECHANISMS.items() if v == spec.mechanism), None)
    if mech_code is None:
        raise BadInputError(f"unknown SCRAM mechanism {spec.mechanism!r} (SCRAM-SHA-256 or SCRAM-SHA-512)")
    if change.kind == "delete-scram":
        if (spec.user, spec.mechanism) not in image.scram_credentials:
            raise BadInputError(f"no {spec.mechanism} credential for user {spec.user!r}")
        rec = record("RemoveUserScramCredentialRecord", 0, Name=spec.user, Mechanism=mech_code)
        return Planned(records=[rec], summary=f"deleted the {spec.mechanism} credential of {spec.user}")
    check_scram(spec.user, spec.mechanism, spec.iterations)
    try:
        salt, stored, server = (
            base64.b64decode(x, validate=True) for x in (spec.salt, spec.stored_key, spec.server_key)
        )
    except ValueError:
        raise BadInputError("the SCRAM credential is not valid base64") from None
    digest = hashlib.new(SCRAM_HASH[spec.mechanism]).digest_size
    if not salt or len(stored) != digest or len(server) != digest:
        raise BadInputError(f"the SCRAM credential does not have {spec.mechanism}'s key sizes")
    rec = record(
        "UserScramCredentialRecord",
        0,
        Name=spec.user,
        Mechanism=mech_code,
        Salt=salt,
        StoredKey=stored,
        ServerKey=server,
        Iterations=spec.iterations,
    )
    verb = "updated" if (spec.user, spec.mechanism) in image.scram_credentials else "created"
    return Planned(records=[rec], summary=f"{verb} the {spec.mechanism} credential of {spec.user}")


def plan_change(
    change: AdminChange,
    image: ClusterImage,
    brokers: Mapping[int, str | None],
    placing: Placing | None = None,
    pending: Pending | None = None,
) -> Planned:
    """Validate `change` against the current image, the live brokers (id → rack) and what the
    request's earlier changes do (`pending`, updated here); its records."""
    placing = placing or Placing()
    pending = pending if pending is not None else Pending()
    k = change.kind
    if k == "create-topic":
        return _plan_create_topic(change, image, brokers, placing, pending)
    if k == "delete-topic":
        name = _topic(image, change.topic)
        if name in pending.topics_removed:  # named and given by id in one request: deleted once (Kafka)
            return Planned(records=[], summary=f"deleted topic {name}", noop=True)
        pending.topics_removed.add(name)
        tid = image.topics[name].topic_id
        assert tid is not None
        return Planned(
            records=[record("RemoveTopicRecord", 0, TopicId=kafka_to_uuid(tid))],
            summary=f"deleted topic {name}",
        )
    if k == "add-partitions":
        return _plan_add_partitions(change, image, brokers, placing)
    if k == "alter-topic-config":
        name = _topic(image, change.topic)
        if not change.configs and not change.delete_configs:
            raise BadInputError("alter-topic-config needs --set or --delete")
        validate_topic_configs(change.configs, change.delete_configs)
        recs = _config_records(2, name, change.configs, change.delete_configs)
        return Planned(
            records=recs,
            summary=f"topic {name}: {len(change.configs)} set, {len(change.delete_configs)} deleted",
        )
    if k == "alter-broker-config":
        broker = change.broker
        if broker is None:
            raise BadInputError("alter-broker-config needs --broker ID or --default")
        if broker != "" and (
            not broker.isdigit() or int(broker) not in brokers and ("BROKER", broker) not in image.configs
        ):
            raise BadInputError(
                f"broker {broker} is not registered (registered: {', '.join(map(str, sorted(brokers))) or 'none'})"
            )
        if not change.configs and not change.delete_configs:
            raise BadInputError("alter-broker-config needs --set or --delete")
        validate_broker_configs(change.configs, change.delete_configs)
        recs = _config_records(4, broker, change.configs, change.delete_configs)
        who = "the cluster default" if broker == "" else f"broker {broker}"
        return Planned(
            records=recs, summary=f"{who}: {len(change.configs)} set, {len(change.delete_configs)} deleted"
        )
    if k == "add-acl":
        return _plan_add_acl(change, image, pending)
    if k == "remove-acl":
        return _plan_remove_acl(change, image, pending)
    if k in ("set-quota", "remove-quota"):
        return _plan_quota(change, image)
    return _plan_scram(change, image)
