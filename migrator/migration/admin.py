"""Metadata changes during dual-write: validated as Kafka validates them, turned into log records.

During DualWriteMetadata the log is the source of truth and ZooKeeper its write-behind copy, so an
operator's change (create a topic, alter a config, add an ACL, ...) becomes records appended to the
log; the syncer carries them to ZooKeeper. Nothing else writes ZooKeeper.

The log has one writer. While `migrate --follow` holds it, a change is handed over through an inbox
directory in the log dir: the requester writes one JSON file per change (written aside, then renamed
into place, so the follower never reads half a request), the follower validates, appends, syncs and
answers with a reply file, which the requester waits for. The controller issue will replace this
hand-over with Kafka's admin APIs.

No password is ever written anywhere: a SCRAM credential is derived here (ScramFormatter's salt and
PBKDF2) and only its salted keys travel, in a file only the owner can read, deleted once answered.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import hmac
import ipaddress
import json
import os
import random
import re
import secrets
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from migrator.errors import BadInputError, FindingsError, UnreachableError, ZkKraftError
from migrator.kraft import dirfiles
from migrator.kraft.image import (
    ACL_OPERATIONS,
    ACL_PERMISSION_TYPES,
    ACL_RESOURCE_TYPES,
    PATTERN_TYPES,
    SCRAM_MECHANISMS,
)
from migrator.kraft.lock import LOCK_FILE
from migrator.kraft.records import MetadataRecord, kafka_to_uuid, record
from migrator.model import Acl, ClusterImage

__all__ = [
    "AdminChange",
    "AdminReply",
    "Inbox",
    "Planned",
    "assign_replicas",
    "plan_change",
    "scram_credential",
    "validate_topic_name",
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

# --- Kafka's rules --------------------------------------------------------------------------------

MAX_TOPIC_NAME = 249  # Topic.MAX_NAME_LENGTH
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")

# TopicConfig (Kafka 3.9): name -> type; enumerations list their values.
_TOPIC_CONFIGS: dict[str, str | tuple[str, ...]] = {
    "cleanup.policy": ("delete", "compact"),
    "compression.type": ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "compression.gzip.level": "int",
    "compression.lz4.level": "int",
    "compression.zstd.level": "int",
    "delete.retention.ms": "long",
    "file.delete.delay.ms": "long",
    "flush.messages": "long",
    "flush.ms": "long",
    "follower.replication.throttled.replicas": "list",
    "index.interval.bytes": "int",
    "leader.replication.throttled.replicas": "list",
    "local.retention.bytes": "long",
    "local.retention.ms": "long",
    "max.compaction.lag.ms": "long",
    "max.message.bytes": "int",
    "message.downconversion.enable": "bool",
    "message.format.version": "string",
    "message.timestamp.after.max.ms": "long",
    "message.timestamp.before.max.ms": "long",
    "message.timestamp.difference.max.ms": "long",
    "message.timestamp.type": ("CreateTime", "LogAppendTime"),
    "min.cleanable.dirty.ratio": "double",
    "min.compaction.lag.ms": "long",
    "min.insync.replicas": "int",
    "preallocate": "bool",
    "remote.log.copy.disable": "bool",
    "remote.log.delete.on.disable": "bool",
    "remote.storage.enable": "bool",
    "retention.bytes": "long",
    "retention.ms": "long",
    "segment.bytes": "int",
    "segment.index.bytes": "int",
    "segment.jitter.ms": "long",
    "segment.ms": "long",
    "unclean.leader.election.enable": "bool",
}
# Broker settings that only a restart changes (KafkaConfig, not DynamicBrokerConfig): refused as
# Kafka refuses them ("Cannot update these configs dynamically").
_READ_ONLY_BROKER_CONFIGS = frozenset(
    {
        "broker.id",
        "node.id",
        "process.roles",
        "log.dirs",
        "log.dir",
        "metadata.log.dir",
        "zookeeper.connect",
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
        "controller.listener.names",
        "inter.broker.protocol.version",
        "zookeeper.metadata.migration.enable",
        "broker.rack",
    }
)
_CONFIG_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
# QuotaConfigs: key -> (value type, entity kinds it applies to).
_QUOTA_KEYS: dict[str, tuple[str, frozenset[str]]] = {
    "producer_byte_rate": ("long", frozenset({"user", "client-id"})),
    "consumer_byte_rate": ("long", frozenset({"user", "client-id"})),
    "request_percentage": ("double", frozenset({"user", "client-id"})),
    "controller_mutation_rate": ("double", frozenset({"user", "client-id"})),
    "connection_creation_rate": ("int", frozenset({"ip"})),
}
# AclEntry.supportedOperations (what kafka-acls accepts per resource type); ALL is always allowed.
_ACL_SUPPORTED = {
    "TOPIC": {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"},
    "GROUP": {"READ", "DESCRIBE", "DELETE"},
    "CLUSTER": {
        "CREATE",
        "CLUSTER_ACTION",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
        "IDEMPOTENT_WRITE",
        "ALTER",
        "DESCRIBE",
    },
    "TRANSACTIONAL_ID": {"DESCRIBE", "WRITE"},
    "DELEGATION_TOKEN": {"DESCRIBE"},
    "USER": {"CREATE_TOKENS", "DESCRIBE_TOKENS"},
}
CLUSTER_RESOURCE_NAME = "kafka-cluster"
# ScramMechanism: minimum iterations 4096 for both; KRaft refuses more than 16384.
SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 16384
_SCRAM_HASH = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
BIG_CHANGE_RECORDS = 10_000  # above one batch, a change is appended inside a metadata transaction


def _code(table: Mapping[int, str], name: str) -> int:
    return next(k for k, v in table.items() if v == name)


# --- the change -----------------------------------------------------------------------------------


class AclSpec(BaseModel):
    resource_type: str
    resource_name: str
    pattern_type: str = "LITERAL"
    principal: str
    host: str = "*"
    operation: str
    permission_type: str = "ALLOW"


class ScramSpec(BaseModel):
    """A derived SCRAM credential: never the password."""

    user: str
    mechanism: str
    iterations: int
    salt: str = ""  # base64; empty for delete-scram
    stored_key: str = ""
    server_key: str = ""

    def __repr__(self) -> str:  # never show the keys
        return f"ScramSpec(user={self.user!r}, mechanism={self.mechanism}, iterations={self.iterations})"

    __str__ = __repr__


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


@dataclass
class Planned:
    """The records of a validated change and what they do."""

    records: list[MetadataRecord]
    summary: str
    topic_id: str | None = None
    noop: bool = False


def _refuse(message: str) -> BadInputError:
    return BadInputError(message)


# --- validation helpers ---------------------------------------------------------------------------


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate."""
    if not name:
        raise _refuse("topic name is illegal: it can't be empty")
    if name in (".", ".."):
        raise _refuse('topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME:
        raise _refuse(f"topic name is illegal: it can't be longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL_TOPIC.match(name):
        raise _refuse(
            f"topic name {name!r} is illegal: it contains a character other than ASCII alphanumerics, "
            "'.', '_' and '-'"
        )


def _collides(a: str, b: str) -> bool:
    """Topic.hasCollision: '.' and '_' map onto the same metric name."""
    return a != b and a.replace(".", "_") == b.replace(".", "_")


def _check_number(kind: str, value: str, what: str) -> None:
    try:
        if kind in ("int", "long"):
            n = int(value)
            bits = 31 if kind == "int" else 63
            if not -(2**bits) <= n < 2**bits:
                raise ValueError
        elif kind == "double":
            float(value)
        elif kind == "bool":
            if value.lower() not in ("true", "false"):
                raise ValueError
    except ValueError:
        raise _refuse(f"{what}: value {value!r} is not a valid {kind}") from None


def validate_topic_configs(configs: Mapping[str, str], deletes: Sequence[str] = ()) -> None:
    for name in [*configs, *deletes]:
        if name not in _TOPIC_CONFIGS:
            raise _refuse(f"unknown topic config name: {name}")
    for name, value in configs.items():
        kind = _TOPIC_CONFIGS[name]
        if isinstance(kind, tuple):
            values = [v.strip() for v in value.split(",")] if name == "cleanup.policy" else [value]
            bad = [v for v in values if v not in kind]
            if bad or not value:
                raise _refuse(f"topic config {name}: {value!r} is not one of {', '.join(kind)}")
        else:
            _check_number(kind, value, f"topic config {name}")


def validate_broker_configs(configs: Mapping[str, str], deletes: Sequence[str] = ()) -> None:
    for name in [*configs, *deletes]:
        if not _CONFIG_NAME.match(name):
            raise _refuse(f"broker config name {name!r} is not a valid config name")
        if name in _READ_ONLY_BROKER_CONFIGS:
            raise _refuse(f"broker config {name} cannot be updated dynamically (it needs a broker restart)")


# --- replica placement: Kafka's AdminUtils.assignReplicasToBrokers -----------------------------------


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _rack_alternated(racks: Mapping[int, str]) -> list[int]:
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    names = sorted(by_rack)
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        for rack in names:
            if i < len(by_rack[rack]):
                out.append(by_rack[rack][i])
        i += 1
    return out


def assign_replicas(
    partitions: int,
    replication_factor: int,
    brokers: Mapping[int, str | None],
    start_index: int = -1,
    start_partition: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replica lists for new partitions, as Kafka's AdminUtils places them (rack aware when every
    broker has a rack, refused when only some have one, as Kafka's enforced rack-aware mode does)."""
    if partitions < 1:
        raise _refuse(f"number of partitions must be larger than 0, got {partitions}")
    if replication_factor < 1:
        raise _refuse(f"replication factor must be larger than 0, got {replication_factor}")
    if replication_factor > len(brokers):
        raise _refuse(
            f"replication factor: {replication_factor} larger than available brokers: {len(brokers)}"
        )
    rng = rng or random.Random()
    with_rack = {b: r for b, r in brokers.items() if r is not None}
    if with_rack and len(with_rack) != len(brokers):
        raise _refuse("not all brokers have rack information for replica rack aware assignment")
    out: dict[int, list[int]] = {}
    if not with_rack:
        arranged = sorted(brokers)
        n = len(arranged)
        start = start_index if start_index >= 0 else rng.randrange(n)
        shift = start_index if start_index >= 0 else rng.randrange(n)
        pid = max(0, start_partition)
        for _ in range(partitions):
            if pid > 0 and pid % n == 0:
                shift += 1
            first = (pid + start) % n
            out[pid] = [arranged[first]] + [
                arranged[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
            ]
            pid += 1
        return out
    arranged = _rack_alternated(with_rack)
    n = len(arranged)
    num_racks = len(set(with_rack.values()))
    start = start_index if start_index >= 0 else rng.randrange(n)
    shift = start_index if start_index >= 0 else rng.randrange(n)
    pid = max(0, start_partition)
    for _ in range(partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {with_rack[leader]}
        used = {leader}
        k = 0
        for _r in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                rack = with_rack[broker]
                k += 1
                if (rack not in racks_used or len(racks_used) == num_racks) and (
                    broker not in used or len(used) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    used.add(broker)
                    break
        out[pid] = replicas
        pid += 1
    return out


# --- SCRAM: Kafka's ScramFormatter ----------------------------------------------------------------


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def scram_credential(user: str, mechanism: str, password: str, iterations: int) -> ScramSpec:
    """ScramFormatter.generateCredential: salt = the ASCII of a random 130-bit number in base 36,
    salted password = PBKDF2(password, salt, iterations), keys as RFC 5802 defines them."""
    if mechanism not in _SCRAM_HASH:
        raise _refuse(f"unknown SCRAM mechanism {mechanism!r} (SCRAM-SHA-256 or SCRAM-SHA-512)")
    _check_scram(user, mechanism, iterations)
    if not password:
        raise _refuse("the SCRAM password must not be empty")
    algo = _SCRAM_HASH[mechanism]
    salt = _base36(secrets.randbits(130)).encode("ascii")
    salted = hashlib.pbkdf2_hmac(algo, password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", algo).digest()
    stored_key = hashlib.new(algo, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", algo).digest()
    b64 = base64.b64encode
    return ScramSpec(
        user=user,
        mechanism=mechanism,
        iterations=iterations,
        salt=b64(salt).decode(),
        stored_key=b64(stored_key).decode(),
        server_key=b64(server_key).decode(),
    )


def _check_scram(user: str, mechanism: str, iterations: int) -> None:
    if not user:
        raise _refuse("the SCRAM user name must not be empty")
    if mechanism not in _SCRAM_HASH:
        raise _refuse(f"unknown SCRAM mechanism {mechanism!r} (SCRAM-SHA-256 or SCRAM-SHA-512)")
    if iterations < SCRAM_MIN_ITERATIONS:
        raise _refuse(f"too few iterations for {mechanism}: {iterations} (minimum {SCRAM_MIN_ITERATIONS})")
    if iterations > SCRAM_MAX_ITERATIONS:
        raise _refuse(f"too many iterations for {mechanism}: {iterations} (maximum {SCRAM_MAX_ITERATIONS})")


# --- planning a change ----------------------------------------------------------------------------


def _topic(image: ClusterImage, name: str | None) -> str:
    if not name:
        raise _refuse("a topic name is required")
    if name not in image.topics:
        raise _refuse(f"topic {name!r} does not exist")
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


def _partition_records(topic_id: uuid.UUID, assignment: Mapping[int, list[int]]) -> list[MetadataRecord]:
    return [
        record(
            "PartitionRecord",
            0,
            PartitionId=pid,
            TopicId=topic_id,
            Replicas=list(replicas),
            Isr=list(replicas),
            RemovingReplicas=[],
            AddingReplicas=[],
            Leader=replicas[0],
            LeaderEpoch=0,
            PartitionEpoch=0,
        )
        for pid, replicas in sorted(assignment.items())
    ]


def _plan_create_topic(
    change: AdminChange, image: ClusterImage, brokers: Mapping[int, str | None]
) -> Planned:
    name = change.topic or ""
    validate_topic_name(name)
    if name in image.topics:
        raise _refuse(f"topic {name!r} already exists")
    for other in image.topics:
        if _collides(name, other):
            raise _refuse(f"topic {name!r} collides with existing topic {other!r} ('.' and '_' collide)")
    validate_topic_configs(change.configs)
    partitions = change.partitions if change.partitions is not None else 1
    rf = change.replication_factor if change.replication_factor is not None else min(3, len(brokers))
    if not brokers:
        raise _refuse("no broker is registered: a new topic has nowhere to place its replicas")
    assignment = assign_replicas(partitions, rf, brokers)
    topic_id_text = dirfiles.random_kafka_uuid()
    tid = kafka_to_uuid(topic_id_text)
    records = [record("TopicRecord", 0, Name=name, TopicId=tid)]
    records += _config_records(2, name, change.configs, [])
    records += _partition_records(tid, assignment)
    return Planned(
        records=records,
        summary=f"created topic {name} (id {topic_id_text}) with {partitions} partitions, replication factor {rf}",
        topic_id=topic_id_text,
    )


def _plan_add_partitions(
    change: AdminChange, image: ClusterImage, brokers: Mapping[int, str | None]
) -> Planned:
    name = _topic(image, change.topic)
    topic = image.topics[name]
    current = len(topic.partitions)
    wanted = change.partitions or 0
    if wanted <= current:
        raise _refuse(
            f"topic {name} has {current} partitions; the number of partitions can only be increased "
            f"(asked for {wanted})"
        )
    existing = topic.partitions.get(0) or next(iter(topic.partitions.values()), None)
    rf = len(existing.replicas) if existing is not None else 1
    ordered = sorted(brokers)
    first = existing.replicas[0] if existing is not None and existing.replicas else ordered[0]
    start = max(0, next((i for i, b in enumerate(ordered) if b >= first), 0))
    assignment = assign_replicas(wanted - current, rf, brokers, start_index=start, start_partition=current)
    assert topic.topic_id is not None
    records = _partition_records(kafka_to_uuid(topic.topic_id), assignment)
    return Planned(records=records, summary=f"topic {name}: {current} → {wanted} partitions")


def _acl_of(spec: AclSpec) -> Acl:
    a = Acl(
        resource_type=spec.resource_type.upper(),
        resource_name=spec.resource_name,
        pattern_type=spec.pattern_type.upper(),
        principal=spec.principal,
        host=spec.host,
        operation=spec.operation.upper(),
        permission_type=spec.permission_type.upper(),
    )
    if a.resource_type not in _ACL_SUPPORTED:
        raise _refuse(f"ACL resource type {spec.resource_type!r} is not one of {', '.join(_ACL_SUPPORTED)}")
    if a.pattern_type not in ("LITERAL", "PREFIXED"):
        raise _refuse(f"ACL pattern type {spec.pattern_type!r} must be LITERAL or PREFIXED")
    if a.permission_type not in ("ALLOW", "DENY"):
        raise _refuse(f"ACL permission type {spec.permission_type!r} must be ALLOW or DENY")
    if a.operation not in _ACL_SUPPORTED[a.resource_type] | {"ALL"}:
        allowed = ", ".join(sorted(_ACL_SUPPORTED[a.resource_type] | {"ALL"}))
        raise _refuse(
            f"ResourceType {a.resource_type} only supports operations {allowed}; got {spec.operation}"
        )
    if not a.resource_name:
        raise _refuse("the ACL resource name must not be empty")
    if a.resource_type == "CLUSTER" and (
        a.resource_name != CLUSTER_RESOURCE_NAME or a.pattern_type != "LITERAL"
    ):
        raise _refuse(f"the CLUSTER resource is named {CLUSTER_RESOURCE_NAME} (LITERAL)")
    ptype, sep, pname = a.principal.partition(":")
    if not sep or not ptype or not pname:
        raise _refuse(f"ACL principal {a.principal!r} must be TYPE:NAME (e.g. User:alice)")
    if not a.host:
        raise _refuse("the ACL host must not be empty (use * for every host)")
    return a


def _plan_add_acl(change: AdminChange, image: ClusterImage) -> Planned:
    if change.acl is None:
        raise _refuse("add-acl needs an ACL")
    acl = _acl_of(change.acl)
    if any(a.key() == acl.key() for a in image.acls):
        return Planned(records=[], summary="the ACL already exists; nothing to do", noop=True)
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


def _plan_remove_acl(change: AdminChange, image: ClusterImage) -> Planned:
    if change.acl is None:
        raise _refuse("remove-acl needs an ACL")
    acl = _acl_of(change.acl)
    matches = [a for a in image.acls if a.key() == acl.key() and a.acl_id]
    if not matches:
        return Planned(records=[], summary="no such ACL; nothing to remove", noop=True)
    recs = [record("RemoveAccessControlEntryRecord", 0, Id=kafka_to_uuid(a.acl_id or "")) for a in matches]
    return Planned(records=recs, summary=f"removed {len(recs)} ACL binding(s)")


def _quota_entity(entity: Mapping[str, str | None]) -> list[dict[str, str | None]]:
    kinds = set(entity)
    if kinds not in ({"user"}, {"client-id"}, {"user", "client-id"}, {"ip"}):
        raise _refuse(
            "a quota entity is a user, a client-id, a user with a client-id, or an ip "
            f"(got {', '.join(sorted(kinds)) or 'nothing'})"
        )
    if "ip" in entity and entity["ip"] is not None:
        try:
            ipaddress.ip_address(entity["ip"])
        except ValueError:
            raise _refuse(f"{entity['ip']!r} is not a valid IP address") from None
    for kind, name in entity.items():
        if name == "":
            raise _refuse(f"the {kind} quota entity name must not be empty (use the default entity instead)")
    order = {"user": 0, "client-id": 1, "ip": 2}
    return [{"EntityType": k, "EntityName": entity[k]} for k in sorted(entity, key=order.__getitem__)]


def _plan_quota(change: AdminChange, image: ClusterImage) -> Planned:
    ent = _quota_entity(change.quota_entity)
    kinds = set(change.quota_entity)
    if change.kind == "set-quota":
        if not change.quota_values:
            raise _refuse("set-quota needs at least one KEY=VALUE")
        recs = []
        for key, value in change.quota_values.items():
            spec = _QUOTA_KEYS.get(key)
            if spec is None:
                raise _refuse(f"unknown quota key {key!r} (known: {', '.join(_QUOTA_KEYS)})")
            kind, applies = spec
            if not kinds <= applies:
                raise _refuse(f"quota {key} does not apply to a {'+'.join(sorted(kinds))} entity")
            if value <= 0 or value != value:
                raise _refuse(f"quota {key}={value} must be a positive number")
            if kind in ("long", "int") and value != int(value):
                raise _refuse(f"quota {key}={value} must be a whole number")
            recs.append(record("ClientQuotaRecord", 0, Entity=ent, Key=key, Value=float(value), Remove=False))
        return Planned(
            records=recs, summary=f"set {len(recs)} quota value(s) on {change.describe().split(' ', 1)[1]}"
        )
    if not change.quota_remove:
        raise _refuse("remove-quota needs at least one KEY")
    for key in change.quota_remove:
        if key not in _QUOTA_KEYS:
            raise _refuse(f"unknown quota key {key!r} (known: {', '.join(_QUOTA_KEYS)})")
    recs = [
        record("ClientQuotaRecord", 0, Entity=ent, Key=key, Value=0.0, Remove=True)
        for key in change.quota_remove
    ]
    return Planned(
        records=recs, summary=f"removed {len(recs)} quota value(s) from {change.describe().split(' ', 1)[1]}"
    )


def _plan_scram(change: AdminChange, image: ClusterImage) -> Planned:
    spec = change.scram
    if spec is None:
        raise _refuse(f"{change.kind} needs a SCRAM user and mechanism")
    mech_code = next((k for k, v in SCRAM_MECHANISMS.items() if v == spec.mechanism), None)
    if mech_code is None:
        raise _refuse(f"unknown SCRAM mechanism {spec.mechanism!r} (SCRAM-SHA-256 or SCRAM-SHA-512)")
    if change.kind == "delete-scram":
        if (spec.user, spec.mechanism) not in image.scram_credentials:
            raise _refuse(f"no {spec.mechanism} credential for user {spec.user!r}")
        rec = record("RemoveUserScramCredentialRecord", 0, Name=spec.user, Mechanism=mech_code)
        return Planned(records=[rec], summary=f"deleted the {spec.mechanism} credential of {spec.user}")
    _check_scram(spec.user, spec.mechanism, spec.iterations)
    try:
        salt, stored, server = (
            base64.b64decode(x, validate=True) for x in (spec.salt, spec.stored_key, spec.server_key)
        )
    except ValueError:
        raise _refuse("the SCRAM credential is not valid base64") from None
    digest = hashlib.new(_SCRAM_HASH[spec.mechanism]).digest_size
    if not salt or len(stored) != digest or len(server) != digest:
        raise _refuse(f"the SCRAM credential does not have {spec.mechanism}'s key sizes")
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


def plan_change(change: AdminChange, image: ClusterImage, brokers: Mapping[int, str | None]) -> Planned:
    """Validate `change` against the current image and live brokers (id → rack); its records."""
    k = change.kind
    if k == "create-topic":
        return _plan_create_topic(change, image, brokers)
    if k == "delete-topic":
        name = _topic(image, change.topic)
        tid = image.topics[name].topic_id
        assert tid is not None
        return Planned(
            records=[record("RemoveTopicRecord", 0, TopicId=kafka_to_uuid(tid))],
            summary=f"deleted topic {name}",
        )
    if k == "add-partitions":
        return _plan_add_partitions(change, image, brokers)
    if k == "alter-topic-config":
        name = _topic(image, change.topic)
        if not change.configs and not change.delete_configs:
            raise _refuse("alter-topic-config needs --set or --delete")
        validate_topic_configs(change.configs, change.delete_configs)
        recs = _config_records(2, name, change.configs, change.delete_configs)
        return Planned(
            records=recs,
            summary=f"topic {name}: {len(change.configs)} set, {len(change.delete_configs)} deleted",
        )
    if k == "alter-broker-config":
        broker = change.broker
        if broker is None:
            raise _refuse("alter-broker-config needs --broker ID or --default")
        if broker != "" and (
            not broker.isdigit() or int(broker) not in brokers and ("BROKER", broker) not in image.configs
        ):
            raise _refuse(
                f"broker {broker} is not registered (registered: {', '.join(map(str, sorted(brokers))) or 'none'})"
            )
        if not change.configs and not change.delete_configs:
            raise _refuse("alter-broker-config needs --set or --delete")
        validate_broker_configs(change.configs, change.delete_configs)
        recs = _config_records(4, broker, change.configs, change.delete_configs)
        who = "the cluster default" if broker == "" else f"broker {broker}"
        return Planned(
            records=recs, summary=f"{who}: {len(change.configs)} set, {len(change.delete_configs)} deleted"
        )
    if k == "add-acl":
        return _plan_add_acl(change, image)
    if k == "remove-acl":
        return _plan_remove_acl(change, image)
    if k in ("set-quota", "remove-quota"):
        return _plan_quota(change, image)
    return _plan_scram(change, image)


# --- the hand-over to a running follower ------------------------------------------------------------

INBOX_DIR = "zk2kraft-inbox"
FOLLOWER_FILE = "zk2kraft-follower.json"
_REQUEST = ".request.json"
_REPLY = ".reply.json"
#: A request temporary older than this is a crashed requester's, not one being written.
_STALE_SUBMIT_S = 60.0


class AdminReply(BaseModel):
    """The follower's answer: what it appended and synced, or the refusal and its exit code."""

    ok: bool
    exit_code: int = 0
    message: str = ""
    first_offset: int | None = None
    last_offset: int | None = None
    records: int = 0
    migration_offset: int | None = None  # what /migration covers after the sync
    topic_id: str | None = None
    follower_pid: int | None = None


class Inbox:
    """`<log-dir>/zk2kraft-inbox`: one request file per change, one reply file per answer."""

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        self.log_dir = Path(log_dir)
        self.path = self.log_dir / INBOX_DIR

    # -- the follower's side ---------------------------------------------------------------------

    def announce(self) -> None:
        """Say that a follower serves this inbox (its pid); requesters check that it holds the lock."""
        self.path.mkdir(exist_ok=True)
        # A follower killed while answering leaves `<id>.reply.json.tmp`; a requester killed while
        # submitting leaves `.<id>.tmp`. Neither is anyone's any more once a new follower starts (a
        # requester writing right now is spared by the age limit).
        for path in self.path.glob(f"*{_REPLY}{dirfiles.TMP_SUFFIX}"):
            path.unlink(missing_ok=True)
        dirfiles.remove_stale_temporaries(self.path, older_than=_STALE_SUBMIT_S)
        body = {"pid": os.getpid(), "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        dirfiles.atomic_write(self.log_dir / FOLLOWER_FILE, json.dumps(body).encode())

    def retire(self) -> None:
        (self.log_dir / FOLLOWER_FILE).unlink(missing_ok=True)

    def pending(self) -> list[Path]:
        try:
            names = os.listdir(self.path)
        except FileNotFoundError:
            return []
        if any(n.endswith(dirfiles.TMP_SUFFIX) for n in names):
            dirfiles.remove_stale_temporaries(self.path, older_than=_STALE_SUBMIT_S)
        return sorted(self.path / n for n in names if n.endswith(_REQUEST))

    def take(self, path: Path) -> tuple[str, AdminChange | None, str]:
        """Read and remove one request: (id, change or None, error when unreadable)."""
        rid = path.name.removesuffix(_REQUEST)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return rid, None, "withdrawn"
        path.unlink(missing_ok=True)
        try:
            return rid, AdminChange.model_validate_json(raw), ""
        except ValueError as e:
            return rid, None, f"unreadable request {path.name}: {str(e).splitlines()[0]}"

    def answer(self, rid: str, reply: AdminReply) -> None:
        dirfiles.atomic_write(self.path / f"{rid}{_REPLY}", reply.model_dump_json().encode())

    # -- the requester's side --------------------------------------------------------------------

    def follower_pid(self) -> int | None:
        try:
            return int(json.loads((self.log_dir / FOLLOWER_FILE).read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def submit(self, change: AdminChange) -> str:
        """Place a request atomically (written aside, renamed in); returns its id."""
        self.path.mkdir(exist_ok=True)
        rid = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
        tmp = self.path / f".{rid}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, change.model_dump_json().encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path / f"{rid}{_REQUEST}")
        return rid

    def wait(self, rid: str, pid: int, timeout: float) -> AdminReply:
        """The follower's reply; a dead follower or a timeout withdraws the request if it still can."""
        reply = self.path / f"{rid}{_REPLY}"
        request = self.path / f"{rid}{_REQUEST}"
        deadline = time.monotonic() + timeout
        delay = 0.01
        while True:
            if reply.exists():
                data = reply.read_bytes()
                reply.unlink(missing_ok=True)
                return AdminReply.model_validate_json(data)
            alive = _alive(pid) and writer_lock_held(self.log_dir)
            if not alive or time.monotonic() > deadline:
                try:
                    request.unlink()
                    withdrawn = True
                except FileNotFoundError:
                    withdrawn = False
                if reply.exists():
                    continue
                what = "stopped" if not alive else f"did not answer within {timeout:g}s"
                if withdrawn:
                    raise UnreachableError(
                        f"the follower (pid {pid}) {what}; the change was withdrawn, nothing was applied"
                    )
                raise UnreachableError(
                    f"the follower (pid {pid}) {what} after taking the change; whether it was applied "
                    "shows in `zk2kraft status` and the log"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


def writer_lock_held(log_dir: Path) -> bool:
    """Whether some process holds the log's writer lock (a shared-lock probe; takes nothing).

    The kernel drops the lock when its holder dies, so this tells a dead follower even while its
    pid still exists (a zombie not yet reaped by its parent)."""
    try:
        fd = os.open(log_dir / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reply_of(error: ZkKraftError) -> AdminReply:
    return AdminReply(ok=False, exit_code=error.exit_code, message=str(error), follower_pid=os.getpid())


def refused_state(state_name: str) -> FindingsError:
    return FindingsError(
        f"admin changes go through the log only in DualWriteMetadata; the migration is in {state_name}"
    )
