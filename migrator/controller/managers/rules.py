"""Kafka's validation of admin changes: topic names, topic and broker configs, ACLs, quota entities.

Each rule refuses as Kafka 3.9 refuses (the same limits, the same wording where an operator knows
it), one line and exit 2, before any record is written.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence

from migrator.errors import BadInputError
from migrator.model import Acl

__all__ = [
    "CLUSTER_RESOURCE_NAME",
    "MAX_TOPIC_NAME",
    "QUOTA_KEYS",
    "acl_of",
    "collides",
    "quota_entity",
    "validate_broker_configs",
    "validate_topic_configs",
    "validate_topic_name",
]

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
QUOTA_KEYS: dict[str, tuple[str, frozenset[str]]] = {
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


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate."""
    if not name:
        raise BadInputError("topic name is illegal: it can't be empty")
    if name in (".", ".."):
        raise BadInputError('topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME:
        raise BadInputError(f"topic name is illegal: it can't be longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL_TOPIC.match(name):
        raise BadInputError(
            f"topic name {name!r} is illegal: it contains a character other than ASCII alphanumerics, "
            "'.', '_' and '-'"
        )


def collides(a: str, b: str) -> bool:
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
        raise BadInputError(f"{what}: value {value!r} is not a valid {kind}") from None


def validate_topic_configs(configs: Mapping[str, str], deletes: Sequence[str] = ()) -> None:
    for name in [*configs, *deletes]:
        if name not in _TOPIC_CONFIGS:
            raise BadInputError(f"unknown topic config name: {name}")
    for name, value in configs.items():
        kind = _TOPIC_CONFIGS[name]
        if isinstance(kind, tuple):
            values = [v.strip() for v in value.split(",")] if name == "cleanup.policy" else [value]
            bad = [v for v in values if v not in kind]
            if bad or not value:
                raise BadInputError(f"topic config {name}: {value!r} is not one of {', '.join(kind)}")
        else:
            _check_number(kind, value, f"topic config {name}")


def validate_broker_configs(configs: Mapping[str, str], deletes: Sequence[str] = ()) -> None:
    for name in [*configs, *deletes]:
        if not _CONFIG_NAME.match(name):
            raise BadInputError(f"broker config name {name!r} is not a valid config name")
        if name in _READ_ONLY_BROKER_CONFIGS:
            raise BadInputError(
                f"broker config {name} cannot be updated dynamically (it needs a broker restart)"
            )


def acl_of(
    *,
    resource_type: str,
    resource_name: str,
    pattern_type: str,
    principal: str,
    host: str,
    operation: str,
    permission_type: str,
) -> Acl:
    """An ACL binding as kafka-acls accepts it (AclEntry.supportedOperations, principal TYPE:NAME)."""
    a = Acl(
        resource_type=resource_type.upper(),
        resource_name=resource_name,
        pattern_type=pattern_type.upper(),
        principal=principal,
        host=host,
        operation=operation.upper(),
        permission_type=permission_type.upper(),
    )
    if a.resource_type not in _ACL_SUPPORTED:
        raise BadInputError(f"ACL resource type {resource_type!r} is not one of {', '.join(_ACL_SUPPORTED)}")
    if a.pattern_type not in ("LITERAL", "PREFIXED"):
        raise BadInputError(f"ACL pattern type {pattern_type!r} must be LITERAL or PREFIXED")
    if a.permission_type not in ("ALLOW", "DENY"):
        raise BadInputError(f"ACL permission type {permission_type!r} must be ALLOW or DENY")
    if a.operation not in _ACL_SUPPORTED[a.resource_type] | {"ALL"}:
        allowed = ", ".join(sorted(_ACL_SUPPORTED[a.resource_type] | {"ALL"}))
        raise BadInputError(
            f"ResourceType {a.resource_type} only supports operations {allowed}; got {operation}"
        )
    if not a.resource_name:
        raise BadInputError("the ACL resource name must not be empty")
    if a.resource_type == "CLUSTER" and (
        a.resource_name != CLUSTER_RESOURCE_NAME or a.pattern_type != "LITERAL"
    ):
        raise BadInputError(f"the CLUSTER resource is named {CLUSTER_RESOURCE_NAME} (LITERAL)")
    ptype, sep, pname = a.principal.partition(":")
    if not sep or not ptype or not pname:
        raise BadInputError(f"ACL principal {a.principal!r} must be TYPE:NAME (e.g. User:alice)")
    if not a.host:
        raise BadInputError("the ACL host must not be empty (use * for every host)")
    return a


def quota_entity(entity: Mapping[str, str | None]) -> list[dict[str, str | None]]:
    """ClientQuotaEntity as Kafka accepts it; its entries in ClientQuotaRecord order."""
    kinds = set(entity)
    if kinds not in ({"user"}, {"client-id"}, {"user", "client-id"}, {"ip"}):
        raise BadInputError(
            "a quota entity is a user, a client-id, a user with a client-id, or an ip "
            f"(got {', '.join(sorted(kinds)) or 'nothing'})"
        )
    if "ip" in entity and entity["ip"] is not None:
        try:
            ipaddress.ip_address(entity["ip"])
        except ValueError:
            raise BadInputError(f"{entity['ip']!r} is not a valid IP address") from None
    for kind, name in entity.items():
        if name == "":
            raise BadInputError(
                f"the {kind} quota entity name must not be empty (use the default entity instead)"
            )
    order = {"user": 0, "client-id": 1, "ip": 2}
    return [{"EntityType": k, "EntityName": entity[k]} for k in sorted(entity, key=order.__getitem__)]
