"""Kafka's ZooKeeper paths (ZkData.scala, Kafka 2.x-3.9) and its entity-name sanitizer.

Every znode path the project reads or writes is built here, so a path is spelled in exactly one place.
Builders take names as they appear in ZooKeeper: quota and SCRAM entity names are URL-sanitized
(`sanitize`), topic, broker and ACL resource names are not (Kafka never sanitizes them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = [
    "ACL_CHANGE_PREFIX",
    "ACL_RESOURCE_TYPES",
    "ACL_STORES",
    "ADMIN",
    "BROKERS",
    "BROKER_IDS",
    "BROKER_SEQID",
    "CLUSTER",
    "CLUSTER_ID",
    "CONFIG",
    "CONFIG_CHANGES",
    "CONFIG_CHANGE_PREFIX",
    "CONFIG_TYPES",
    "CONFIG_TYPE_BROKERS",
    "CONFIG_TYPE_CLIENTS",
    "CONFIG_TYPE_CLIENT_METRICS",
    "CONFIG_TYPE_IPS",
    "CONFIG_TYPE_TOPICS",
    "CONFIG_TYPE_USERS",
    "CONSUMERS",
    "CONTROLLER",
    "CONTROLLER_EPOCH",
    "DEFAULT_ENTITY",
    "DELEGATION_TOKEN",
    "DELETE_TOPICS",
    "EXTENDED_ACL",
    "EXTENDED_ACL_CHANGES",
    "FEATURE",
    "ISR_CHANGE_NOTIFICATION",
    "ISR_CHANGE_PREFIX",
    "KAFKA_ROOTS",
    "LATEST_PRODUCER_ID_BLOCK",
    "LITERAL_ACL",
    "LITERAL_ACL_CHANGES",
    "LOG_DIR_EVENT_NOTIFICATION",
    "LOG_DIR_EVENT_PREFIX",
    "MIGRATION",
    "PERSISTENT_PATHS",
    "PREFERRED_REPLICA_ELECTION",
    "PREFIXED_ACL",
    "REASSIGN_PARTITIONS",
    "TOKENS",
    "TOKEN_CHANGES",
    "TOKEN_CHANGE_PREFIX",
    "TOPICS",
    "acl_change_store",
    "acl_resource_path",
    "acl_store",
    "acl_type_path",
    "broker_path",
    "config_entity_path",
    "config_type_path",
    "delete_topic_path",
    "desanitize",
    "parent",
    "partition_path",
    "partition_state_path",
    "partitions_path",
    "pascal_case",
    "quota_entity_path",
    "resource_type_from_segment",
    "resource_type_segment",
    "sanitize",
    "token_path",
    "topic_path",
    "user_client_config_path",
]

# --- top-level znodes -------------------------------------------------------------------------------
ADMIN = "/admin"
BROKERS = "/brokers"
CLUSTER = "/cluster"
CONFIG = "/config"
CONSUMERS = "/consumers"  # the pre-0.9 consumers' offsets; never migrated
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
DELEGATION_TOKEN = "/delegation_token"
FEATURE = "/feature"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
LITERAL_ACL = "/kafka-acl"
LITERAL_ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL = "/kafka-acl-extended"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
MIGRATION = "/migration"

# --- below them ---------------------------------------------------------------------------------------
BROKER_IDS = BROKERS + "/ids"
TOPICS = BROKERS + "/topics"
BROKER_SEQID = BROKERS + "/seqid"
CLUSTER_ID = CLUSTER + "/id"
CONFIG_CHANGES = CONFIG + "/changes"
CONFIG_CHANGE_PREFIX = CONFIG_CHANGES + "/config_change_"  # PERSISTENT_SEQUENTIAL
DELETE_TOPICS = ADMIN + "/delete_topics"
REASSIGN_PARTITIONS = ADMIN + "/reassign_partitions"
PREFERRED_REPLICA_ELECTION = ADMIN + "/preferred_replica_election"
ISR_CHANGE_PREFIX = ISR_CHANGE_NOTIFICATION + "/isr_change_"
LOG_DIR_EVENT_PREFIX = LOG_DIR_EVENT_NOTIFICATION + "/log_dir_event_"
PREFIXED_ACL = EXTENDED_ACL + "/prefixed"  # ExtendedAclStore: patternType.name.toLowerCase
ACL_CHANGE_PREFIX = "acl_changes_"  # under either ACL change root, PERSISTENT_SEQUENTIAL
TOKENS = DELEGATION_TOKEN + "/tokens"
TOKEN_CHANGES = DELEGATION_TOKEN + "/token_changes"
TOKEN_CHANGE_PREFIX = TOKEN_CHANGES + "/token_change_"

# ConfigType: the `/config/<type>` directories. client-metrics is KRaft-only (ConfigType.ALL leaves
# it out, and no ZK-mode broker reads it), but the path exists in Kafka's vocabulary.
CONFIG_TYPE_TOPICS = "topics"
CONFIG_TYPE_CLIENTS = "clients"
CONFIG_TYPE_USERS = "users"
CONFIG_TYPE_BROKERS = "brokers"
CONFIG_TYPE_IPS = "ips"
CONFIG_TYPE_CLIENT_METRICS = "client-metrics"
CONFIG_TYPES = (
    CONFIG_TYPE_TOPICS,
    CONFIG_TYPE_CLIENTS,
    CONFIG_TYPE_USERS,
    CONFIG_TYPE_BROKERS,
    CONFIG_TYPE_IPS,
)

DEFAULT_ENTITY = "<default>"  # ZooKeeperInternals.DEFAULT_STRING, never sanitized

# ZkData.PersistentZkPaths in Kafka's order: what `createTopLevelPaths` makes on broker start-up.
PERSISTENT_PATHS = (
    CONSUMERS,
    BROKER_IDS,
    TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    *(CONFIG + "/" + t for t in CONFIG_TYPES),
)

# ZkData.SecureRootPaths: every top-level znode a Kafka cluster uses, which is what the bulk reader
# walks. /consumers is left out on purpose: it holds only pre-0.9 consumer offsets, can be huge on
# old clusters, and nothing of it is migrated.
KAFKA_ROOTS = (
    ADMIN,
    BROKERS,
    CLUSTER,
    CONFIG,
    CONTROLLER,
    CONTROLLER_EPOCH,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    DELEGATION_TOKEN,
    EXTENDED_ACL,
    MIGRATION,
    FEATURE,
    LITERAL_ACL,
    LITERAL_ACL_CHANGES,
    EXTENDED_ACL_CHANGES,
)

# ACL stores: the model's pattern type → the ACL root and its change root.
ACL_STORES = {"LITERAL": LITERAL_ACL, "PREFIXED": PREFIXED_ACL}
_ACL_CHANGE_STORES = {"LITERAL": LITERAL_ACL_CHANGES, "PREFIXED": EXTENDED_ACL_CHANGES}

# ResourceType enum names (the model's spelling) in Kafka's enum order, without UNKNOWN and ANY.
ACL_RESOURCE_TYPES = ("TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER")


def pascal_case(enum_name: str) -> str:
    """SecurityUtils.toPascalCase: ``TRANSACTIONAL_ID`` → ``TransactionalId``."""
    return "".join(part[:1].upper() + part[1:].lower() for part in enum_name.split("_"))


_SEGMENT_TO_TYPE = {pascal_case(t).upper(): t for t in ACL_RESOURCE_TYPES}


def resource_type_segment(resource_type: str) -> str:
    """The ZooKeeper path segment of a resource type (``TOPIC`` → ``Topic``)."""
    if resource_type not in ACL_RESOURCE_TYPES:
        raise ValueError(f"unknown ACL resource type {resource_type!r}")
    return pascal_case(resource_type)


def resource_type_from_segment(segment: str) -> str | None:
    """SecurityUtils.resourceType: Pascal case, or any letter case of it without underscores."""
    return _SEGMENT_TO_TYPE.get(segment.upper())


def acl_store(pattern_type: str) -> str:
    try:
        return ACL_STORES[pattern_type]
    except KeyError:
        raise ValueError(f"ACLs of pattern type {pattern_type!r} are not stored in ZooKeeper") from None


def acl_change_store(pattern_type: str) -> str:
    try:
        return _ACL_CHANGE_STORES[pattern_type]
    except KeyError:
        raise ValueError(f"ACLs of pattern type {pattern_type!r} are not stored in ZooKeeper") from None


def acl_type_path(pattern_type: str, resource_type: str) -> str:
    return f"{acl_store(pattern_type)}/{resource_type_segment(resource_type)}"


def acl_resource_path(pattern_type: str, resource_type: str, resource_name: str) -> str:
    return f"{acl_type_path(pattern_type, resource_type)}/{resource_name}"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def config_type_path(config_type: str) -> str:
    return f"{CONFIG}/{config_type}"


def config_entity_path(config_type: str, znode_name: str) -> str:
    """`/config/<type>/<name>`; `znode_name` is already sanitized where Kafka sanitizes."""
    return f"{CONFIG}/{config_type}/{znode_name}"


def user_client_config_path(user_znode: str, client_znode: str) -> str:
    return f"{CONFIG}/{CONFIG_TYPE_USERS}/{user_znode}/clients/{client_znode}"


def _entity_znode(name: str | None) -> str:
    return DEFAULT_ENTITY if name is None else sanitize(name)


def quota_entity_path(entity: Mapping[str, str | None]) -> str:
    """The config znode of a client-quota entity (keys ``user``, ``client-id``, ``ip``; None = default).

    Mirrors ZkConfigMigrationClient.writeClientQuotas: names are sanitized, a None name is `<default>`.
    """
    keys = set(entity)
    if keys == {"user"}:
        return config_entity_path(CONFIG_TYPE_USERS, _entity_znode(entity["user"]))
    if keys == {"user", "client-id"}:
        return user_client_config_path(_entity_znode(entity["user"]), _entity_znode(entity["client-id"]))
    if keys == {"client-id"}:
        return config_entity_path(CONFIG_TYPE_CLIENTS, _entity_znode(entity["client-id"]))
    if keys == {"ip"}:
        return config_entity_path(CONFIG_TYPE_IPS, _entity_znode(entity["ip"]))
    raise ValueError(f"no ZooKeeper path for a client-quota entity of types {sorted(keys)}")


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def token_path(token_id: str) -> str:
    return f"{TOKENS}/{token_id}"


def parent(path: str) -> str:
    """The parent of an absolute path; "/" for a top-level znode."""
    i = path.rfind("/")
    return path[:i] if i > 0 else "/"


# --- Sanitizer ------------------------------------------------------------------------------------
# java.net.URLEncoder keeps [A-Za-z0-9.*_-] and writes space as "+"; Kafka's Sanitizer then turns "*"
# into %2A and "+" into %20. What is left unencoded is exactly [A-Za-z0-9._-].
_KEEP = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_ENCODE_BYTE = [chr(b) if b in _KEEP else f"%{b:02X}" for b in range(256)]
_PLAIN = re.compile(r"[A-Za-z0-9._-]*\Z")
_PERCENT_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2})+")


def sanitize(name: str) -> str:
    """Sanitizer.sanitize: URL-encode a user principal or client id for use as a znode name."""
    if _PLAIN.match(name):
        return name
    # Lone surrogates cannot be UTF-8 encoded; Java's encoder writes them as "?" too.
    return "".join(_ENCODE_BYTE[b] for b in name.encode("utf-8", "replace"))


def desanitize(name: str) -> str:
    """Sanitizer.desanitize (URLDecoder.decode): "+" is a space; a bad "%" escape is a ValueError."""
    if "%" not in name:
        return name.replace("+", " ")
    out = []
    pos = 0
    for m in [*_PERCENT_RUN.finditer(name), None]:
        plain = name[pos : len(name) if m is None else m.start()]
        if "%" in plain:  # every valid escape is inside a run, so a "%" here is malformed
            raise ValueError(f"bad %-escape in {name!r}")
        out.append(plain.replace("+", " "))
        if m is not None:
            out.append(bytes.fromhex(m.group().replace("%", "")).decode("utf-8", "replace"))
            pos = m.end()
    return "".join(out)
