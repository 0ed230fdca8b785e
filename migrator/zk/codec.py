"""Kafka's ZooKeeper JSON ↔ the model for brokers, topics, partition states, the coordination znodes
(/controller, /controller_epoch, /migration, /cluster/id, /feature) and producer id blocks.

The znode codecs are one family, each the one place that parses or renders its znodes: this module,
`config_codec` (entity configs, quota values), `credential_codec` (SCRAM, delegation tokens),
`acl_codec` (ACLs and their change notifications) and `admin_codec` (/admin and the notification
queues); all stand on `znode_json` (Jackson's output, strict reading, field checks, ZnodeError) and
`jvm_order` (the order Kafka's hash maps iterate in).

Decoders accept every version Kafka 2.x-3.9 wrote and name the znode path in every error; a version
they do not know is reported ("unknown version"), never guessed. Encoders write the bytes Kafka 3.9
writes (Scala 2.13, Java 11+): Jackson's compact output, and each object's keys in the order Kafka's
map of that object iterates in. Key orders that are data (the config keys of a znode, lists) keep the
order of the model, which decoders fill in JSON order, so JSON → model → JSON gives back Kafka's bytes.
docs/zk-layout.md lists the quirks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from migrator.model import (
    Broker,
    ControllerZnode,
    Endpoint,
    FeatureRange,
    FeatureZnode,
    MigrationZnode,
    Partition,
    ProducerIdBlock,
    Topic,
)
from migrator.zk.jvm_order import (
    java_hashmap_cached,
    ordered,
    scala_immutable_cached,
    scala_immutable_order,
    scala_mutable_cached,
    scala_mutable_order,
)
from migrator.zk.znode_json import (
    I32_MAX,
    I32_MIN,
    I64_MAX,
    I64_MIN,
    REQUIRED,
    ZnodeError,
    check_int,
    get_field,
    get_int,
    get_str,
    get_version,
    int_list,
    json_bytes,
    json_object,
    json_string,
    json_type,
    load_json,
    long_string,
    scan_json,
)

__all__ = [
    "BROKER_VERSIONS",
    "CONTROLLER_VERSIONS",
    "FEATURE_VERSIONS",
    "PartitionState",
    "SECURITY_PROTOCOLS",
    "TOPIC_VERSIONS",
    "TopicAssignment",
    "decode_broker",
    "decode_cluster_id",
    "decode_controller",
    "decode_controller_epoch",
    "decode_feature",
    "decode_migration",
    "decode_partition_state",
    "decode_producer_id_block",
    "decode_topic",
    "encode_broker",
    "encode_cluster_id",
    "encode_controller",
    "encode_controller_epoch",
    "encode_feature",
    "encode_migration",
    "encode_partition",
    "encode_partition_state",
    "encode_producer_id_block",
    "encode_topic",
    "endpoint_connection_string",
]


BROKER_VERSIONS = (1, 2, 3, 4, 5)
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TOPIC_VERSIONS = (1, 2, 3)
CONTROLLER_VERSIONS = (1, 2)
FEATURE_VERSIONS = (1, 2)


_ENDPOINT = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)", re.S)


def endpoint_connection_string(ep: Endpoint) -> str:
    """EndPoint.connectionString: ``NAME://host:port``, IPv6 in brackets, ``NAME://:port`` for no host."""
    if not ep.host:
        return f"{ep.listener}://:{ep.port}"
    if ":" in ep.host:
        return f"{ep.listener}://[{ep.host}]:{ep.port}"
    return f"{ep.listener}://{ep.host}:{ep.port}"


def decode_broker(path: str, data: bytes | None, broker_id: int) -> Broker:
    what = "broker registration"
    obj = json_object(path, load_json(path, data, what), what)
    version = get_version(path, obj, what, BROKER_VERSIONS)
    jmx_port = get_int(path, obj, "jmx_port", what)
    if version == 1:
        host = obj.get("host")
        if host is not None and type(host) is not str:
            raise ZnodeError(path, f"{what}: field 'host' must be a string, got {json_type(host)}")
        port = get_int(path, obj, "port", what)
        endpoints = [
            Endpoint(listener="PLAINTEXT", host=host or "", port=port, security_protocol="PLAINTEXT")
        ]
    else:
        endpoints = _decode_endpoints(path, obj, what)
    rack = obj.get("rack")
    if rack is not None and type(rack) is not str:
        raise ZnodeError(path, f"{what}: field 'rack' must be a string, got {json_type(rack)}")
    features: dict[str, FeatureRange] = {}
    raw_features = obj.get("features")
    if raw_features is not None:
        for name, rng in json_object(path, raw_features, f"{what}: field 'features'").items():
            where = f"{what}: feature {name!r}"
            rng = json_object(path, rng, where)
            features[name] = FeatureRange(
                min_version=get_int(path, rng, "min_version", where, lo=-32768, hi=32767),
                max_version=get_int(path, rng, "max_version", where, lo=-32768, hi=32767),
            )
    timestamp = obj.get("timestamp", "0")
    if type(timestamp) is int:
        check_int(path, timestamp, f"{what}: field 'timestamp'", I64_MIN, I64_MAX)
    else:
        timestamp = long_string(path, timestamp, f"{what}: field 'timestamp'")
    return Broker(
        id=broker_id,
        endpoints=endpoints,
        rack=rack,
        features=features,
        json_version=version,
        jmx_port=jmx_port,
        timestamp=timestamp,
    )


def _decode_endpoints(path: str, obj: dict[str, Any], what: str) -> list[Endpoint]:
    raw_map = obj.get("listener_security_protocol_map")
    if raw_map is None:  # v2 and v3: a listener is named after its protocol
        protocols = {p: p for p in SECURITY_PROTOCOLS}
    else:
        protocols = {}
        for listener, protocol in json_object(
            path, raw_map, f"{what}: listener_security_protocol_map"
        ).items():
            if type(protocol) is not str or protocol.upper() not in SECURITY_PROTOCOLS:
                raise ZnodeError(path, f"{what}: listener {listener!r} has an unknown security protocol")
            protocols[listener] = protocol.upper()
    raw_endpoints = get_field(path, obj, "endpoints", what, REQUIRED)
    if type(raw_endpoints) is not list:
        raise ZnodeError(path, f"{what}: field 'endpoints' must be an array, got {json_type(raw_endpoints)}")
    endpoints = []
    for entry in raw_endpoints:
        m = _ENDPOINT.fullmatch(entry) if type(entry) is str else None
        if m is None:
            raise ZnodeError(path, f"{what}: endpoint {entry!r} is not LISTENER://host:port")
        listener = m.group(1).upper()
        port = int(m.group(3))
        if not I32_MIN <= port <= I32_MAX:
            raise ZnodeError(path, f"{what}: endpoint {entry!r} has an out-of-range port")
        protocol = protocols.get(listener)
        if protocol is None:
            raise ZnodeError(path, f"{what}: no security protocol defined for listener {listener}")
        endpoints.append(Endpoint(listener=listener, host=m.group(2), port=port, security_protocol=protocol))
    return endpoints


def encode_broker(broker: Broker) -> bytes:
    """BrokerIdZNode.encode: top-level host/port of the first PLAINTEXT endpoint (or null/-1)."""
    version = broker.json_version
    plaintext = next((ep for ep in broker.endpoints if ep.security_protocol == "PLAINTEXT"), None)
    fields: dict[str, Any] = {
        "version": version,
        "host": (plaintext.host or None) if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "endpoints": [endpoint_connection_string(ep) for ep in broker.endpoints],
        "jmx_port": broker.jmx_port,
        "timestamp": str(broker.timestamp),
    }
    if broker.rack is not None and version >= 3:
        fields["rack"] = broker.rack
    if version >= 4:
        protocols = {ep.listener: ep.security_protocol for ep in broker.endpoints}
        fields["listener_security_protocol_map"] = ordered(
            protocols, scala_immutable_cached(tuple(protocols))
        )
    if version >= 5:
        # Features.toMap: a java.util.HashMap of LinkedHashMap(min_version, max_version).
        features = {
            name: {"min_version": rng.min_version, "max_version": rng.max_version}
            for name, rng in broker.features.items()
        }
        fields["features"] = ordered(features, java_hashmap_cached(tuple(features)))
    return json_bytes(ordered(fields, scala_mutable_cached(tuple(fields), 6)))


_UUID = re.compile(r"[A-Za-z0-9_-]{22}(?:==)?")


class TopicAssignment(NamedTuple):
    version: int
    topic_id: str | None
    partitions: dict[int, list[int]]  # in JSON order
    adding_replicas: dict[int, list[int]]
    removing_replicas: dict[int, list[int]]


def decode_topic(path: str, data: bytes | None) -> TopicAssignment:
    what = "topic"
    obj = json_object(path, load_json(path, data, what), what)
    version = get_version(path, obj, what, TOPIC_VERSIONS)
    topic_id = obj.get("topic_id")
    if topic_id is not None and (type(topic_id) is not str or not _UUID.fullmatch(topic_id)):
        raise ZnodeError(path, f"{what}: field 'topic_id' is not a Kafka Uuid (22 base64url characters)")
    partitions = _replica_map(path, obj.get("partitions", {}), "partitions")
    adding = _replica_map(path, obj.get("adding_replicas", {}), "adding_replicas")
    removing = _replica_map(path, obj.get("removing_replicas", {}), "removing_replicas")
    return TopicAssignment(version, topic_id, partitions, adding, removing)


def _replica_map(path: str, raw: Any, key: str) -> dict[int, list[int]]:
    if raw is None:
        return {}
    raw = json_object(path, raw, f"topic: field {key!r}")
    out: dict[int, list[int]] = {}
    for pid, replicas in raw.items():
        if not (pid.isascii() and pid.isdigit() and len(pid) <= 10) or int(pid) > I32_MAX:
            raise ZnodeError(path, f"topic: {key} key {pid!r} is not a partition id")
        if type(replicas) is not list:
            int_list(path, replicas, f"topic: {key} of partition {pid}")
        for r in replicas:
            if type(r) is not int or not I32_MIN <= r <= I32_MAX:
                int_list(path, replicas, f"topic: {key} of partition {pid}")
        out[int(pid)] = replicas
    return out


def _replicas_json(assignment: Mapping[int, Sequence[int]]) -> str:
    """One of TopicZNode's `mutable.Map[String, util.List[Int]]()`, filled in partition order."""
    texts = {str(p): "[" + ",".join(map(str, r)) + "]" for p, r in assignment.items()}
    order = scala_mutable_order(list(texts)) if len(texts) > 1 else texts
    return "{" + ",".join(f'"{k}":{texts[k]}' for k in order) + "}"


def encode_topic(topic: Topic) -> bytes:
    """TopicZNode.encode. v3 (2.8+) whenever there is a topic id; v1 cannot hold a reassignment."""
    parts = topic.partitions.values()
    adding = {p.partition: p.adding_replicas for p in parts if p.adding_replicas}
    removing = {p.partition: p.removing_replicas for p in parts if p.removing_replicas}
    version = topic.json_version
    if topic.topic_id is not None:
        version = 3
    elif version < 2 and (adding or removing):
        version = 2
    fields = {
        "version": str(version),
        "partitions": _replicas_json({p.partition: p.replicas for p in parts}),
    }
    if version >= 2:
        fields["adding_replicas"] = _replicas_json(adding)
        fields["removing_replicas"] = _replicas_json(removing)
    if version >= 3:
        if topic.topic_id is not None:
            fields["topic_id"] = json_string(topic.topic_id)
        order: Iterable[str] = scala_mutable_cached(tuple(fields), 4)
    else:  # Map2 / Map4: insertion order
        order = fields
    return ("{" + ",".join(f'"{k}":{fields[k]}' for k in order) + "}").encode("utf-8", "replace")


class PartitionState(NamedTuple):
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    leader_recovery_state: int


def decode_partition_state(path: str, data: bytes | None) -> PartitionState:
    """TopicPartitionStateZNode.decode; the partition epoch is the znode's version, not in the JSON."""
    if data:
        # The hot path (one call per partition): the C scanner straight, one check of everything a
        # Kafka-written state has; anything unusual goes the slow way, which names the problem.
        try:
            text = data.decode("utf-8")
            obj, end = scan_json(text, 0)
            if end != len(text):
                obj = None
        except (StopIteration, ValueError, RecursionError):
            obj = None
        if type(obj) is dict:
            leader = obj.get("leader")
            epoch = obj.get("leader_epoch")
            isr = obj.get("isr")
            ce = obj.get("controller_epoch")
            lrs = obj.get("leader_recovery_state", 0)
            ok = (
                type(obj.get("version")) is int
                and obj["version"] == 1
                and type(leader) is int
                and type(epoch) is int
                and type(ce) is int
                and type(lrs) is int
                and (lrs == 0 or lrs == 1)
                and type(isr) is list
                and I32_MIN <= leader <= I32_MAX
                and I32_MIN <= epoch <= I32_MAX
                and I32_MIN <= ce <= I32_MAX
            )
            if ok:
                for r in isr:
                    if type(r) is not int or not I32_MIN <= r <= I32_MAX:
                        ok = False
                        break
                if ok:
                    return PartitionState(leader, epoch, isr, ce, lrs)
    return _decode_partition_state_slowly(path, data)


def _decode_partition_state_slowly(path: str, data: bytes | None) -> PartitionState:
    """The same checks one by one, to name what is wrong."""
    what = "partition state"
    obj = json_object(path, load_json(path, data, what), what)
    get_version(path, obj, what, (1,))
    leader = get_int(path, obj, "leader", what)
    epoch = get_int(path, obj, "leader_epoch", what)
    isr = int_list(path, get_field(path, obj, "isr", what, REQUIRED), f"{what}: field 'isr'")
    ce = get_int(path, obj, "controller_epoch", what)
    lrs = get_int(path, obj, "leader_recovery_state", what, default=0)
    if lrs not in (0, 1):
        raise ZnodeError(path, f"{what}: unknown leader_recovery_state {lrs} (0 RECOVERED, 1 RECOVERING)")
    return PartitionState(leader, epoch, isr, ce, lrs)


def _state_template(keys: Sequence[str]) -> str:
    slots = {
        "version": "1",
        "leader": "{0}",
        "leader_epoch": "{1}",
        "controller_epoch": "{2}",
        "isr": "[{3}]",
        "leader_recovery_state": "{4}",
    }
    return "{{" + ",".join(f'"{k}":{slots[k]}' for k in scala_immutable_order(keys)) + "}}"


_STATE_KEYS = ("version", "leader", "leader_epoch", "controller_epoch", "isr")
_STATE = _state_template(_STATE_KEYS)
_STATE_RECOVERING = _state_template((*_STATE_KEYS, "leader_recovery_state"))


def encode_partition_state(
    leader: int, leader_epoch: int, isr: Sequence[int], controller_epoch: int, leader_recovery_state: int = 0
) -> bytes:
    """TopicPartitionStateZNode.encode; leader_recovery_state appears only when it is not RECOVERED."""
    template = _STATE if leader_recovery_state == 0 else _STATE_RECOVERING
    isr_text = ",".join(map(str, isr))
    return template.format(leader, leader_epoch, controller_epoch, isr_text, leader_recovery_state).encode()


def encode_partition(partition: Partition, controller_epoch: int | None = None) -> bytes:
    """The state znode of `partition`, with `controller_epoch` unless the partition carries its own."""
    epoch = partition.controller_epoch if partition.controller_epoch is not None else controller_epoch
    if epoch is None:
        raise ValueError(f"partition {partition.partition}: no controller epoch to write into its state")
    return encode_partition_state(
        partition.leader, partition.leader_epoch, partition.isr, epoch, partition.leader_recovery_state
    )


def decode_controller(path: str, data: bytes | None, ephemeral: bool = True) -> ControllerZnode:
    """ControllerZNode.decodeController; v1 (before 3.4) has no kraftControllerEpoch."""
    what = "controller"
    obj = json_object(path, load_json(path, data, what), what)
    version = get_version(path, obj, what, CONTROLLER_VERSIONS)
    timestamp = obj.get("timestamp", "0")
    if type(timestamp) is int:
        check_int(path, timestamp, f"{what}: field 'timestamp'", I64_MIN, I64_MAX)
    else:
        timestamp = long_string(path, timestamp, f"{what}: field 'timestamp'")
    is_kraft = obj.get("isKRaft")
    if is_kraft is not None and type(is_kraft) is not bool:
        raise ZnodeError(path, f"{what}: field 'isKRaft' must be a boolean, got {json_type(is_kraft)}")
    return ControllerZnode(
        json_version=version,
        broker_id=get_int(path, obj, "brokerid", what),
        timestamp=timestamp,
        kraft_controller_epoch=get_int(path, obj, "kraftControllerEpoch", what, default=-1),
        is_kraft=is_kraft,
        ephemeral=ephemeral,
    )


def encode_controller(controller: ControllerZnode) -> bytes:
    """ControllerZNode.encode (Map3/Map4: insertion order), plus zk2kraft's "isKRaft" when set."""
    fields: dict[str, Any] = {
        "version": controller.json_version,
        "brokerid": controller.broker_id,
        "timestamp": str(controller.timestamp),
    }
    if controller.json_version >= 2:
        fields["kraftControllerEpoch"] = controller.kraft_controller_epoch
    if controller.is_kraft is not None:
        fields["isKRaft"] = controller.is_kraft
    return json_bytes(fields)


def decode_controller_epoch(path: str, data: bytes | None) -> int:
    """ControllerEpochZNode.decode: Integer.parseInt of the ASCII text."""
    text = (data or b"").decode("ascii", "replace")
    if not re.fullmatch(r"[+-]?[0-9]{1,10}", text) or not I32_MIN <= int(text) <= I32_MAX:
        raise ZnodeError(path, "controller epoch: expected an ASCII integer")
    return int(text)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


_MIGRATION_KEYS = (
    "version",
    "kraft_controller_id",
    "kraft_controller_epoch",
    "kraft_metadata_offset",
    "kraft_metadata_epoch",
)
_MIGRATION_ORDER = tuple(scala_immutable_order(_MIGRATION_KEYS))


def decode_migration(path: str, data: bytes | None, zk_version: int = -2) -> MigrationZnode:
    """MigrationZNode.decode: version 0 only; all -1 is the EMPTY state."""
    what = "migration state"
    obj = json_object(path, load_json(path, data, what), what)
    get_version(path, obj, what, (0,))
    return MigrationZnode(
        json_version=0,
        kraft_controller_id=get_int(path, obj, "kraft_controller_id", what),
        kraft_controller_epoch=get_int(path, obj, "kraft_controller_epoch", what),
        kraft_metadata_offset=get_int(path, obj, "kraft_metadata_offset", what, lo=I64_MIN, hi=I64_MAX),
        kraft_metadata_epoch=get_int(path, obj, "kraft_metadata_epoch", what),
        zk_version=zk_version,
    )


def encode_migration(migration: MigrationZnode) -> bytes:
    fields = {
        "version": 0,
        "kraft_controller_id": migration.kraft_controller_id,
        "kraft_controller_epoch": migration.kraft_controller_epoch,
        "kraft_metadata_offset": migration.kraft_metadata_offset,
        "kraft_metadata_epoch": migration.kraft_metadata_epoch,
    }
    return json_bytes(ordered(fields, _MIGRATION_ORDER))


def decode_cluster_id(path: str, data: bytes | None) -> str:
    """ClusterIdZNode.fromJson: {"version":"1","id":...} (the version is a string)."""
    what = "cluster id"
    obj = json_object(path, load_json(path, data, what), what)
    version = get_field(path, obj, "version", what, REQUIRED)
    if version not in ("1", 1) or type(version) is bool:
        raise ZnodeError(path, f'unknown {what} version {version!r} (zk2kraft reads version "1")')
    return get_str(path, obj, "id", what)


def encode_cluster_id(cluster_id: str) -> bytes:
    return json_bytes({"version": "1", "id": cluster_id})


def decode_feature(path: str, data: bytes | None) -> FeatureZnode:
    """FeatureZNode.decode: v1 has min_version_level and max_version_level, v2 (3.3+) max only."""
    what = "feature"
    obj = json_object(path, load_json(path, data, what), what)
    version = get_version(path, obj, what, FEATURE_VERSIONS)
    status = get_int(path, obj, "status", what)
    if status not in (0, 1):
        raise ZnodeError(path, f"{what}: unknown status {status} (0 Disabled, 1 Enabled)")
    raw = json_object(path, get_field(path, obj, "features", what, REQUIRED), f"{what}: field 'features'")
    features: dict[str, dict[str, int]] = {}
    for name, levels in raw.items():
        where = f"{what} {name!r}"
        levels = json_object(path, levels, where)
        kept = {}
        for key, value in levels.items():
            if key in ("min_version_level", "max_version_level"):
                kept[key] = check_int(path, value, f"{where}: {key}", -32768, 32767)
        if "max_version_level" not in kept:
            raise ZnodeError(path, f"{where}: missing max_version_level")
        if version == 1 and "min_version_level" not in kept:
            raise ZnodeError(path, f"{where}: missing min_version_level")
        features[name] = kept
    return FeatureZnode(json_version=version, status=status, features=features)


def encode_feature(feature: FeatureZnode) -> bytes:
    """FeatureZNode.encode: a mutable.Map of three; the features map is an immutable Scala Map."""
    features = {name: dict(levels) for name, levels in feature.features.items()}
    fields = {
        "version": feature.json_version,
        "status": feature.status,
        "features": ordered(features, scala_immutable_cached(tuple(features))),
    }
    return json_bytes(ordered(fields, scala_mutable_cached(tuple(fields), 3)))


def decode_producer_id_block(path: str, data: bytes | None) -> ProducerIdBlock:
    """ProducerIdBlockZNode.parseProducerIdBlockData: block_start and block_end are strings."""
    what = "producer id block"
    obj = json_object(path, load_json(path, data, what), what)
    get_version(path, obj, what, (1,))
    return ProducerIdBlock(
        broker=get_int(path, obj, "broker", what),
        block_start=long_string(
            path, get_field(path, obj, "block_start", what, REQUIRED), f"{what}: block_start"
        ),
        block_end=long_string(path, get_field(path, obj, "block_end", what, REQUIRED), f"{what}: block_end"),
    )


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return json_bytes(
        {
            "version": 1,
            "broker": block.broker,
            "block_start": str(block.block_start),
            "block_end": str(block.block_end),
        }
    )
