"""Pydantic models of Kafka's metadata, shared by the ZooKeeper side, the KRaft side and the audit.

The model is the meeting point of every conversion: `migrator.zk` turns znodes into these objects and
back, `migrator.kraft` turns records into them and back. It imports nothing of the project.

Enum-like fields hold Kafka's canonical Java enum names (``TOPIC``, ``LITERAL``, ``READ``, ``ALLOW``,
``SCRAM-SHA-256``); each side's codec maps them to its own spelling or code.
"""

from __future__ import annotations

import copy
import uuid

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Acl",
    "Broker",
    "ClientQuota",
    "ClusterImage",
    "ConfigEntity",
    "ControllerZnode",
    "DelegationToken",
    "Endpoint",
    "FeatureRange",
    "FeatureZnode",
    "MigrationZnode",
    "Partition",
    "ProducerIdBlock",
    "Reassignment",
    "ScramCredential",
    "Topic",
    "ZkControlState",
    "replayed_partition",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class Endpoint(_Model):
    """One listener of a broker: ``SSL://h0:9093`` with the protocol its listener maps to."""

    listener: str
    host: str
    port: int
    security_protocol: str


class FeatureRange(_Model):
    min_version: int
    max_version: int


class Broker(_Model):
    """A broker as ZooKeeper registers it (`/brokers/ids/<id>`) or KRaft registers it.

    ZooKeeper-only and KRaft-only fields are optional so one model carries both sides.
    """

    id: int
    endpoints: list[Endpoint] = Field(default_factory=list)
    rack: str | None = None
    features: dict[str, FeatureRange] = Field(default_factory=dict)
    # ZooKeeper registration details (`/brokers/ids/<id>` JSON).
    json_version: int = 5
    jmx_port: int = -1
    timestamp: int = 0
    zk_epoch: int | None = None  # czxid of the ephemeral registration, Kafka's ZK broker epoch
    # KRaft registration details (RegisterBrokerRecord).
    incarnation_id: str | None = None
    broker_epoch: int = -1
    fenced: bool = True
    in_controlled_shutdown: bool = False
    is_migrating_zk_broker: bool = False
    log_dirs: list[str] = Field(default_factory=list)


class Partition(_Model):
    """One partition: assignment from the topic znode, state from `.../partitions/<p>/state`."""

    partition: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0  # the state znode's version in ZooKeeper; PartitionEpoch in KRaft
    leader_recovery_state: int = 0  # 0 RECOVERED, 1 RECOVERING
    adding_replicas: list[int] = Field(default_factory=list)
    removing_replicas: list[int] = Field(default_factory=list)
    controller_epoch: int | None = None  # ZooKeeper state JSON only
    has_state: bool = True  # False when ZooKeeper had no state znode (Kafka then assumes ISR = replicas)


_REPLAYED = frozenset(
    (
        "partition",
        "replicas",
        "isr",
        "leader",
        "leader_epoch",
        "partition_epoch",
        "leader_recovery_state",
        "adding_replicas",
        "removing_replicas",
    )
)


def replayed_partition(
    partition: int,
    replicas: list[int],
    isr: list[int],
    leader: int,
    leader_epoch: int,
    partition_epoch: int,
    leader_recovery_state: int,
    adding_replicas: list[int],
    removing_replicas: list[int],
) -> Partition:
    """`Partition(...)` with those fields, without pydantic's validation: for the log replay, whose
    values come typed from the record decoder. Validation was half of a 200,000-partition replay, and
    `migrate` replays the log several times (tests/test_kraft_image.py holds it equal to the validated one)."""
    return _unvalidated_partition(
        {
            "partition": partition,
            "replicas": replicas,
            "isr": isr,
            "leader": leader,
            "leader_epoch": leader_epoch,
            "partition_epoch": partition_epoch,
            "leader_recovery_state": leader_recovery_state,
            "adding_replicas": adding_replicas,
            "removing_replicas": removing_replicas,
            "controller_epoch": None,
            "has_state": True,
        },
        _REPLAYED_SET,
    )


#: The fields-set the replay's partitions share. A set per partition was 728 of its 1,600 bytes (1.6 GB
#: per image at 1M partitions); pydantic adds to it only when a field is assigned, and nothing assigns
#: a field outside this set on a replayed partition (controller_epoch and has_state are ZooKeeper's).
_REPLAYED_SET = set(_REPLAYED)


def _unvalidated_partition(fields: dict[str, object], fields_set: set[str]) -> Partition:
    """BaseModel.__copy__'s steps, inlined: the replay's and `deep_copy`'s one way to make a Partition
    from values already known valid (per partition, pydantic's own path was most of their time).
    `fields_set` is shared, not copied (see _REPLAYED_SET)."""
    p = object.__new__(Partition)
    object.__setattr__(p, "__dict__", fields)
    object.__setattr__(p, "__pydantic_fields_set__", fields_set)
    object.__setattr__(p, "__pydantic_extra__", None)
    object.__setattr__(p, "__pydantic_private__", None)
    return p


class Topic(_Model):
    name: str
    topic_id: str | None  # Kafka's base64url Uuid string; None for topics created before Kafka 2.8
    partitions: dict[int, Partition] = Field(default_factory=dict)
    json_version: int = 3


class ConfigEntity(_Model):
    """Dynamic configs of a topic or broker. Broker name ``""`` is the cluster default (`<default>`)."""

    resource_type: str  # "TOPIC" | "BROKER"
    name: str
    configs: dict[str, str] = Field(default_factory=dict)


class ClientQuota(_Model):
    """Quota values of one entity; entity keys are ``user``, ``client-id``, ``ip``; None is `<default>`."""

    entity: dict[str, str | None]
    values: dict[str, float] = Field(default_factory=dict)


class ScramCredential(_Model):
    user: str
    mechanism: str  # "SCRAM-SHA-256" | "SCRAM-SHA-512"
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


class Acl(_Model):
    resource_type: str  # TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER
    resource_name: str
    pattern_type: str  # LITERAL | PREFIXED
    principal: str
    host: str
    operation: str  # READ, WRITE, ... ALL
    permission_type: str  # ALLOW | DENY
    acl_id: str | None = None  # KRaft's AccessControlEntryRecord.Id; ZooKeeper has none

    def key(self) -> tuple[str, str, str, str, str, str, str]:
        """Identity of an ACL binding; the KRaft id is not part of it."""
        return (
            self.resource_type,
            self.resource_name,
            self.pattern_type,
            self.principal,
            self.host,
            self.operation,
            self.permission_type,
        )


class ProducerIdBlock(_Model):
    broker: int
    block_start: int
    block_end: int


class DelegationToken(_Model):
    token_id: str
    owner: str
    requester: str
    renewers: list[str] = Field(default_factory=list)
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int
    json_version: int = 3


class Reassignment(_Model):
    topic: str
    partition: int
    replicas: list[int]


class ControllerZnode(_Model):
    """`/controller`: who holds controllership; a KRaft controller sets ``kraft_controller_epoch``."""

    json_version: int = 2
    broker_id: int
    timestamp: int = 0
    kraft_controller_epoch: int = -1
    is_kraft: bool | None = None  # zk2kraft's informational "isKRaft" field
    ephemeral: bool = True


class MigrationZnode(_Model):
    """`/migration`: the offset and epoch of the log that ZooKeeper's data covers."""

    json_version: int = 0
    kraft_controller_id: int = -1
    kraft_controller_epoch: int = -1
    kraft_metadata_offset: int = -1
    kraft_metadata_epoch: int = -1
    zk_version: int = -2  # stat version of the znode; -2 means unknown
    mtime_ms: int = -1


class FeatureZnode(_Model):
    json_version: int = 2
    status: int = 1
    features: dict[str, dict[str, int]] = Field(default_factory=dict)


class ZkControlState(_Model):
    """ZooKeeper's coordination znodes: not metadata to migrate, but the facts the driver fences on."""

    controller: ControllerZnode | None = None
    controller_zk_version: int | None = None
    controller_epoch: int | None = None
    controller_epoch_zk_version: int | None = None
    migration: MigrationZnode | None = None
    zxid: int | None = None  # highest mzxid seen by the reader, the view's identity


class ClusterImage(_Model):
    """Everything a migration moves, keyed the way both sides can compare."""

    cluster_id: str | None = None
    brokers: dict[int, Broker] = Field(default_factory=dict)
    topics: dict[str, Topic] = Field(default_factory=dict)
    configs: dict[tuple[str, str], ConfigEntity] = Field(default_factory=dict)
    client_quotas: list[ClientQuota] = Field(default_factory=list)
    scram_credentials: dict[tuple[str, str], ScramCredential] = Field(default_factory=dict)
    acls: list[Acl] = Field(default_factory=list)
    producer_id_block: ProducerIdBlock | None = None
    delegation_tokens: dict[str, DelegationToken] = Field(default_factory=dict)
    features: FeatureZnode | None = None
    pending_deletions: list[str] = Field(default_factory=list)
    reassignments: list[Reassignment] = Field(default_factory=list)
    #: KRaft only (KIP-858): (topic, partition) -> the log directory of each replica, in `replicas`'
    #: order, as the records' `Directories` hold them; set by a KRaft broker's AssignReplicasToDirs.
    #: ZooKeeper has none, so partitions the copy made have no entry (Kafka reads them as MIGRATING).
    partition_directories: dict[tuple[str, int], list[uuid.UUID]] = Field(default_factory=dict)

    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics.values())

    def deep_copy(self) -> ClusterImage:
        """`model_copy(deep=True)`, ~10x faster: a deep copy of 200,000 partitions took 4.8 s through
        `copy.deepcopy`, twice per `migrate` (the first sync's image and the follower's). Topics and
        partitions are copied field by field (their values are scalars and lists of scalars); every
        other field, small, goes through `copy.deepcopy`."""
        out = copy.copy(self)
        for name, value in self.__dict__.items():
            if name != "topics":
                out.__dict__[name] = copy.deepcopy(value)
        out.__dict__["topics"] = {name: _copy_topic(t) for name, t in self.topics.items()}
        return out


def _copy_topic(topic: Topic) -> Topic:
    out = copy.copy(topic)
    parts = {}
    for i, p in topic.partitions.items():
        d = p.__dict__.copy()
        for f in _PARTITION_LISTS:
            d[f] = d[f].copy()
        parts[i] = _unvalidated_partition(d, p.__pydantic_fields_set__)  # shared (_REPLAYED_SET)
    out.__dict__["partitions"] = parts
    return out


#: Partition's mutable fields: `deep_copy` gives each copy its own
#: (tests/test_kraft_image.py::test_deep_copy_equals_and_shares_nothing_mutable checks the list)
_PARTITION_LISTS = ("replicas", "isr", "adding_replicas", "removing_replicas")
