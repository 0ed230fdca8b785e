"""Kafka's ZooKeeper JSON ↔ the model: the one place that parses or renders a Kafka znode.

Decoders accept every version Kafka 2.x-3.9 wrote and name the znode path in every error; a version
they do not know is reported ("unknown version"), never guessed. Encoders write the bytes Kafka 3.9
writes (Scala 2.13, Java 11+): Jackson's compact output, and each object's keys in the order Kafka's
map of that object iterates in. That order is not the order of Kafka's source: `Map(...)` with more
than four entries and `mutable.Map` are hash maps, `java.util.HashMap` and `Properties` too, so the
order is computed here with the same hash functions (`_key_order`). Key orders that are data (the
config keys of a znode, lists) keep the order of the model, which decoders fill in JSON order, so
JSON → model → JSON gives back Kafka's bytes. docs/zk-layout.md lists the quirks.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from functools import lru_cache
from typing import Any, NamedTuple, NoReturn

from migrator.errors import BadInputError
from migrator.model import (
    Acl,
    Broker,
    ControllerZnode,
    DelegationToken,
    Endpoint,
    FeatureRange,
    FeatureZnode,
    MigrationZnode,
    Partition,
    ProducerIdBlock,
    Reassignment,
    ScramCredential,
    Topic,
)
from migrator.zk.paths import (
    ACL_RESOURCE_TYPES,
    desanitize,
    pascal_case,
    resource_type_from_segment,
    sanitize,
)

__all__ = [
    "ACL_OPERATIONS",
    "ACL_PERMISSION_TYPES",
    "BROKER_VERSIONS",
    "CONTROLLER_VERSIONS",
    "DELEGATION_TOKEN_VERSIONS",
    "FEATURE_VERSIONS",
    "SCRAM_MECHANISMS",
    "SECURITY_PROTOCOLS",
    "TOPIC_VERSIONS",
    "PartitionState",
    "ResourcePattern",
    "TopicAssignment",
    "ZnodeError",
    "config_key_order",
    "decode_acl_change",
    "decode_acls",
    "decode_broker",
    "decode_cluster_id",
    "decode_config",
    "decode_config_change",
    "decode_controller",
    "decode_controller_epoch",
    "decode_delegation_token",
    "decode_extended_acl_change",
    "decode_feature",
    "decode_literal_acl_change",
    "decode_log_dir_event",
    "decode_migration",
    "decode_partition_list",
    "decode_partition_state",
    "decode_producer_id_block",
    "decode_quota_value",
    "decode_reassignments",
    "decode_scram",
    "decode_token_change",
    "decode_topic",
    "encode_acl_change",
    "encode_acls",
    "encode_broker",
    "encode_cluster_id",
    "encode_config",
    "encode_config_change",
    "encode_controller",
    "encode_controller_epoch",
    "encode_delegation_token",
    "encode_feature",
    "encode_log_dir_event",
    "encode_migration",
    "encode_partition",
    "encode_partition_list",
    "encode_partition_state",
    "encode_producer_id_block",
    "encode_quota_value",
    "encode_reassignments",
    "encode_scram",
    "encode_token_change",
    "encode_topic",
    "endpoint_connection_string",
    "java_hashmap_order",
    "properties_order",
    "scala_immutable_order",
    "scala_mutable_order",
]

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1

BROKER_VERSIONS = (1, 2, 3, 4, 5)
TOPIC_VERSIONS = (1, 2, 3)
CONTROLLER_VERSIONS = (1, 2)
FEATURE_VERSIONS = (1, 2)
DELEGATION_TOKEN_VERSIONS = (1, 2, 3)
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# AclOperation / AclPermissionType enum names without UNKNOWN and ANY; ZooKeeper spells them in
# Pascal case ("DescribeConfigs", "Allow").
ACL_OPERATIONS = (
    "ALL",
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
    "CREATE_TOKENS",
    "DESCRIBE_TOKENS",
)
ACL_PERMISSION_TYPES = ("DENY", "ALLOW")


class ZnodeError(BadInputError):
    """A znode Kafka could not read, or zk2kraft will not guess at: names the path and the reason."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


# =====================================================================================================
# Kafka's key order
# =====================================================================================================
_M32 = 0xFFFFFFFF


def _java_hash(s: str) -> int:
    """String.hashCode as an unsigned 32-bit value (over UTF-16 code units, like Java)."""
    h = 0
    if s.isascii():
        for ch in s:
            h = (31 * h + ord(ch)) & _M32
        return h
    b = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(b), 2):
        h = (31 * h + ((b[i] << 8) | b[i + 1])) & _M32
    return h


def _signed(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


def _champ_improve(h: int) -> int:
    """scala.collection.Hashing.improve, the hash scrambler of 2.13's immutable.HashMap."""
    h = (h + (~(h << 9) & _M32)) & _M32
    h ^= h >> 14
    h = (h + (h << 4)) & _M32
    return h ^ (h >> 10)


def scala_immutable_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a Scala 2.13 immutable Map built from `keys` in this order.

    Up to four entries Map1..Map4 keep insertion order; beyond that a CHAMP trie iterates each
    node's own entries in 5-bit hash-fragment order, then its sub-nodes in fragment order.
    """
    unique = list(dict.fromkeys(keys))
    if len(unique) <= 4:
        return unique
    hashes = {k: _champ_improve(_java_hash(k)) for k in unique}
    out: list[str] = []

    def walk(group: list[str], shift: int) -> None:
        if shift >= 32:  # equal hashes: a collision node keeps insertion order
            out.extend(group)
            return
        by_fragment: dict[int, list[str]] = {}
        for k in group:
            by_fragment.setdefault((hashes[k] >> shift) & 31, []).append(k)
        subs = []
        for fragment in sorted(by_fragment):
            members = by_fragment[fragment]
            if len(members) == 1:
                out.append(members[0])
            else:
                subs.append(members)
        for members in subs:
            walk(members, shift + 5)

    walk(unique, 0)
    return out


def scala_mutable_order(keys: Sequence[str], initial: int = 0) -> list[str]:
    """Iteration order of a Scala 2.13 mutable.HashMap: `mutable.Map(first `initial` keys)` then puts.

    The table starts at tableSizeFor((initial + 1) / 0.75) (16 when empty) and doubles before the put
    that would reach 3/4 full; iteration is by bucket (hash ^ hash >>> 16, masked), then by signed hash.
    """
    unique = list(dict.fromkeys(keys))
    cap = int((initial + 1) / 0.75) if initial > 0 else 16
    table = min((1 << (max(cap - 1, 4).bit_length() - 1)) * 2, 1 << 30)
    size = initial
    for _ in unique[initial:]:
        if size + 1 >= int(table * 0.75):
            table *= 2
        size += 1
    mask = table - 1

    def key(k: str) -> tuple[int, int]:
        h = _java_hash(k)
        h ^= h >> 16
        return (h & mask, _signed(h))

    return sorted(unique, key=key)


def java_hashmap_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a java.util.HashMap filled in this order (default capacity 16, load 0.75)."""
    unique = list(dict.fromkeys(keys))
    table = 16
    while len(unique) > table * 0.75:
        table *= 2
    mask = table - 1

    def bucket(k: str) -> int:
        h = _java_hash(k)
        return (h ^ (h >> 16)) & mask

    return sorted(unique, key=bucket)  # stable: insertion order within a bucket


def properties_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a fresh java.util.Properties (Java 9+: a ConcurrentHashMap of 16 bins)."""
    return _properties(keys)[0]


def _spread(k: str) -> int:
    h = _java_hash(k)
    return (h ^ (h >> 16)) & 0x7FFFFFFF


def _properties(keys: Sequence[str]) -> tuple[list[str], int]:
    """Iteration order and final table size of a fresh Properties filled with `keys` in this order.

    Bins append; a resize at 3/4 full splits each bin keeping its last same-bit run and prepending
    the nodes before it; a bin of 9 in a table under 64 triples the table instead of becoming a tree,
    and tree bins prepend new nodes and split in order.
    """

    spread = _spread
    n = 16
    size_ctl = 12
    tab: list[list[Any] | None] = [None] * n  # each bin: [is_tree, keys]
    count = 0

    def transfer() -> None:
        nonlocal tab, n, size_ctl
        new: list[list[Any] | None] = [None] * (2 * n)
        for i, b in enumerate(tab):
            if not b:
                continue
            tree, members = b
            bits = [spread(x) & n for x in members]
            if tree:
                lo = [x for x, bit in zip(members, bits, strict=True) if bit == 0]
                hi = [x for x, bit in zip(members, bits, strict=True) if bit != 0]
                new[i] = [len(lo) > 6, lo] if lo else None
                new[i + n] = [len(hi) > 6, hi] if hi else None
                continue
            run, last = bits[0], 0
            for j in range(1, len(members)):
                if bits[j] != run:
                    run, last = bits[j], j
            lo = members[last:] if run == 0 else []
            hi = members[last:] if run != 0 else []
            for j in range(last):
                (lo if bits[j] == 0 else hi).insert(0, members[j])
            new[i] = [False, lo] if lo else None
            new[i + n] = [False, hi] if hi else None
        tab, n = new, 2 * n
        size_ctl = n - (n >> 2)

    for k in keys:
        h = spread(k)
        b = tab[h & (n - 1)]
        if b is None:
            tab[h & (n - 1)] = [False, [k]]
        elif k in b[1]:
            continue
        elif b[0]:
            b[1].insert(0, k)
        else:
            before = len(b[1])
            b[1].append(k)
            if before >= 8:
                if n < 64:
                    target = 1 << (3 * n).bit_length()  # tableSizeFor(3n + 1)
                    while target > size_ctl:
                        transfer()
                else:
                    b[0] = True
        count += 1
        while count >= size_ctl:
            transfer()
    return [k for b in tab if b for k in b[1]], n


def config_key_order(keys: Sequence[str]) -> list[str]:
    """The key order to write a config in.

    Kafka writes a Properties, whose order depends on the hash table's history, not only on its keys.
    Keys already in an order such a table iterates in (by bin of the table a fresh Properties of this
    size has) are kept, so a config Kafka wrote comes back byte for byte; any other order is the one
    of a fresh Properties filled in the given order, which is what Kafka's own writers build.
    """
    if len(keys) < 2:
        return list(keys)
    fresh, n = _properties(keys)
    if fresh == list(keys):
        return fresh
    bins = [_spread(k) & (n - 1) for k in keys]
    if all(a <= b for a, b in zip(bins, bins[1:], strict=False)):
        return list(keys)
    return fresh


_scala_immutable = lru_cache(maxsize=256)(lambda keys: tuple(scala_immutable_order(keys)))
_scala_mutable = lru_cache(maxsize=256)(lambda keys, initial: tuple(scala_mutable_order(keys, initial)))
_java_hashmap = lru_cache(maxsize=256)(lambda keys: tuple(java_hashmap_order(keys)))


def _ordered(fields: dict[str, Any], order: Iterable[str]) -> dict[str, Any]:
    return {k: fields[k] for k in order}


# =====================================================================================================
# JSON as Jackson writes it, and strict reading
# =====================================================================================================
_ESCAPES = {i: f"\\u{i:04X}" for i in range(0x20)}
_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r", 0x22: '\\"', 0x5C: "\\\\"})


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _surrogates(m: re.Match[str]) -> str:
    c = ord(m.group()) - 0x10000
    return f"\\u{0xD800 + (c >> 10):04X}\\u{0xDC00 + (c & 0x3FF):04X}"


def _jstr(s: str) -> str:
    """Jackson's UTF8JsonGenerator: a character beyond U+FFFF is written as an escaped surrogate pair
    (COMBINE_UNICODE_SURROGATES_IN_UTF8 is off by default, and Kafka leaves it off)."""
    s = s.translate(_ESCAPES)
    if not s.isascii():
        s = _ASTRAL.sub(_surrogates, s)
    return '"' + s + '"'


def _dump(value: Any) -> str:
    """Jackson's compact JSON: no spaces, raw UTF-8, upper-case \\u00XX for other control chars."""
    t = type(value)
    if t is str:
        return _jstr(value)
    if t is bool:
        return "true" if value else "false"
    if t is int:
        return str(value)
    if value is None:
        return "null"
    if t is dict:
        return "{" + ",".join(_jstr(k) + ":" + _dump(v) for k, v in value.items()) + "}"
    if t is list or t is tuple:
        return "[" + ",".join(_dump(v) for v in value) + "]"
    raise TypeError(f"cannot write {t.__name__} as znode JSON")


def _bytes(value: Any) -> bytes:
    return _dump(value).encode("utf-8", "replace")


class _NonFinite(ValueError):
    pass


def _reject_constant(name: str) -> NoReturn:
    raise _NonFinite(name)


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_SCAN = _DECODER.scan_once


def _load(path: str, data: bytes | None, what: str) -> Any:
    if data is None:
        raise ZnodeError(path, f"{what}: the znode has no data")
    if not data:
        raise ZnodeError(path, f"{what}: the znode is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ZnodeError(path, f"malformed {what} JSON: not UTF-8 at byte {e.start}") from None
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as e:
        at = len(text[: e.pos].encode("utf-8"))
        raise ZnodeError(path, f"malformed {what} JSON at byte {at}: {e.msg}") from None
    except _NonFinite as e:
        raise ZnodeError(path, f"malformed {what} JSON: {e} is not a JSON number") from None
    except RecursionError:
        raise ZnodeError(path, f"malformed {what} JSON: nested too deeply") from None
    except ValueError:  # an integer too long for Python's int conversion limit
        raise ZnodeError(path, f"malformed {what} JSON: a number is too long") from None


def _jtype(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number" if isinstance(value, int) else "a fractional number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _object(path: str, value: Any, what: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise ZnodeError(path, f"{what}: expected a JSON object, got {_jtype(value)}")
    return value


_REQUIRED: Any = object()


def _field(path: str, obj: dict[str, Any], key: str, what: str, default: Any) -> Any:
    if key in obj:
        return obj[key]
    if default is _REQUIRED:
        raise ZnodeError(path, f"{what}: missing field {key!r}")
    return default


def _int(
    path: str,
    obj: dict[str, Any],
    key: str,
    what: str,
    default: Any = _REQUIRED,
    lo: int = I32_MIN,
    hi: int = I32_MAX,
) -> Any:
    if key not in obj:
        return _field(path, obj, key, what, default)
    return _check_int(path, obj[key], f"{what}: field {key!r}", lo, hi)


def _check_int(path: str, value: Any, where: str, lo: int = I32_MIN, hi: int = I32_MAX) -> int:
    if type(value) is not int:
        raise ZnodeError(path, f"{where} must be an integer, got {_jtype(value)}")
    if not lo <= value <= hi:
        raise ZnodeError(path, f"{where} is out of range ({value})")
    return value


def _str(path: str, obj: dict[str, Any], key: str, what: str, default: Any = _REQUIRED) -> Any:
    if key not in obj:
        return _field(path, obj, key, what, default)
    value = obj[key]
    if type(value) is not str:
        raise ZnodeError(path, f"{what}: field {key!r} must be a string, got {_jtype(value)}")
    return value


def _int_list(path: str, value: Any, where: str) -> list[int]:
    if type(value) is not list:
        raise ZnodeError(path, f"{where} must be an array of integers, got {_jtype(value)}")
    for v in value:
        if type(v) is not int or not I32_MIN <= v <= I32_MAX:
            raise ZnodeError(path, f"{where} must be an array of 32-bit integers")
    return value


def _version(path: str, obj: dict[str, Any], what: str, supported: Sequence[int]) -> int:
    if "version" not in obj:
        raise ZnodeError(path, f"{what}: missing field 'version'")
    version = obj["version"]
    if type(version) is not int:
        raise ZnodeError(path, f"{what}: field 'version' must be an integer, got {_jtype(version)}")
    if version not in supported:
        known = ", ".join(map(str, supported))
        raise ZnodeError(path, f"unknown {what} version {version} (zk2kraft reads version {known})")
    return version


def _long_string(path: str, value: Any, where: str) -> int:
    """A Long that Kafka writes as a JSON string (timestamps, producer id bounds)."""
    if type(value) is not str or not re.fullmatch(r"[+-]?[0-9]+", value):
        raise ZnodeError(path, f"{where} must be a string of decimal digits")
    n = int(value)
    if not I64_MIN <= n <= I64_MAX:
        raise ZnodeError(path, f"{where} is out of range")
    return n


# =====================================================================================================
# /brokers/ids/<id>
# =====================================================================================================
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
    obj = _object(path, _load(path, data, what), what)
    version = _version(path, obj, what, BROKER_VERSIONS)
    jmx_port = _int(path, obj, "jmx_port", what)
    if version == 1:
        host = obj.get("host")
        if host is not None and type(host) is not str:
            raise ZnodeError(path, f"{what}: field 'host' must be a string, got {_jtype(host)}")
        port = _int(path, obj, "port", what)
        endpoints = [
            Endpoint(listener="PLAINTEXT", host=host or "", port=port, security_protocol="PLAINTEXT")
        ]
    else:
        endpoints = _decode_endpoints(path, obj, what)
    rack = obj.get("rack")
    if rack is not None and type(rack) is not str:
        raise ZnodeError(path, f"{what}: field 'rack' must be a string, got {_jtype(rack)}")
    features: dict[str, FeatureRange] = {}
    raw_features = obj.get("features")
    if raw_features is not None:
        for name, rng in _object(path, raw_features, f"{what}: field 'features'").items():
            where = f"{what}: feature {name!r}"
            rng = _object(path, rng, where)
            features[name] = FeatureRange(
                min_version=_int(path, rng, "min_version", where, lo=-32768, hi=32767),
                max_version=_int(path, rng, "max_version", where, lo=-32768, hi=32767),
            )
    timestamp = obj.get("timestamp", "0")
    if type(timestamp) is int:
        _check_int(path, timestamp, f"{what}: field 'timestamp'", I64_MIN, I64_MAX)
    else:
        timestamp = _long_string(path, timestamp, f"{what}: field 'timestamp'")
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
        for listener, protocol in _object(path, raw_map, f"{what}: listener_security_protocol_map").items():
            if type(protocol) is not str or protocol.upper() not in SECURITY_PROTOCOLS:
                raise ZnodeError(path, f"{what}: listener {listener!r} has an unknown security protocol")
            protocols[listener] = protocol.upper()
    raw_endpoints = _field(path, obj, "endpoints", what, _REQUIRED)
    if type(raw_endpoints) is not list:
        raise ZnodeError(path, f"{what}: field 'endpoints' must be an array, got {_jtype(raw_endpoints)}")
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
        fields["listener_security_protocol_map"] = _ordered(protocols, _scala_immutable(tuple(protocols)))
    if version >= 5:
        # Features.toMap: a java.util.HashMap of LinkedHashMap(min_version, max_version).
        features = {
            name: {"min_version": rng.min_version, "max_version": rng.max_version}
            for name, rng in broker.features.items()
        }
        fields["features"] = _ordered(features, _java_hashmap(tuple(features)))
    return _bytes(_ordered(fields, _scala_mutable(tuple(fields), 6)))


# =====================================================================================================
# /brokers/topics/<t> and .../partitions/<p>/state
# =====================================================================================================
_UUID = re.compile(r"[A-Za-z0-9_-]{22}(?:==)?")


class TopicAssignment(NamedTuple):
    version: int
    topic_id: str | None
    partitions: dict[int, list[int]]  # in JSON order
    adding_replicas: dict[int, list[int]]
    removing_replicas: dict[int, list[int]]


def decode_topic(path: str, data: bytes | None) -> TopicAssignment:
    what = "topic"
    obj = _object(path, _load(path, data, what), what)
    version = _version(path, obj, what, TOPIC_VERSIONS)
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
    raw = _object(path, raw, f"topic: field {key!r}")
    out: dict[int, list[int]] = {}
    for pid, replicas in raw.items():
        if not (pid.isascii() and pid.isdigit() and len(pid) <= 10) or int(pid) > I32_MAX:
            raise ZnodeError(path, f"topic: {key} key {pid!r} is not a partition id")
        if type(replicas) is not list:
            _int_list(path, replicas, f"topic: {key} of partition {pid}")
        for r in replicas:
            if type(r) is not int or not I32_MIN <= r <= I32_MAX:
                _int_list(path, replicas, f"topic: {key} of partition {pid}")
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
            fields["topic_id"] = _jstr(topic.topic_id)
        order: Iterable[str] = _scala_mutable(tuple(fields), 4)
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
            obj, end = _SCAN(text, 0)
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
    obj = _object(path, _load(path, data, what), what)
    _version(path, obj, what, (1,))
    leader = _int(path, obj, "leader", what)
    epoch = _int(path, obj, "leader_epoch", what)
    isr = _int_list(path, _field(path, obj, "isr", what, _REQUIRED), f"{what}: field 'isr'")
    ce = _int(path, obj, "controller_epoch", what)
    lrs = _int(path, obj, "leader_recovery_state", what, default=0)
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


# =====================================================================================================
# /config/<type>/<name>: entity configs, client quotas, SCRAM credentials
# =====================================================================================================
def decode_config(path: str, data: bytes | None) -> dict[str, str]:
    """ConfigEntityZNode.decode: keys in JSON order. No data at all is an empty config, as in Kafka."""
    if not data:
        return {}
    what = "config"
    obj = _object(path, _load(path, data, what), what)
    _version(path, obj, what, (1,))
    config = _object(path, _field(path, obj, "config", what, _REQUIRED), f"{what}: field 'config'")
    for key, value in config.items():
        if type(value) is not str:
            raise ZnodeError(path, f"{what}: value of {key!r} must be a string, got {_jtype(value)}")
    return config


def encode_config(configs: Mapping[str, str]) -> bytes:
    """ConfigEntityZNode.encode: keys in `config_key_order`."""
    config = {k: configs[k] for k in config_key_order(list(configs))}
    return _bytes({"version": 1, "config": config})


_JAVA_DOUBLE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?")


def decode_quota_value(path: str, key: str, value: str) -> float:
    """Double.valueOf of a quota config value (Kafka stores quotas as strings)."""
    text = value.strip()
    if not _JAVA_DOUBLE.fullmatch(text):
        raise ZnodeError(path, f"client quota {key!r} is not a number")
    number = float(text.rstrip("fFdD"))
    if not math.isfinite(number):
        raise ZnodeError(path, f"client quota {key!r} is out of range")
    return number


def encode_quota_value(value: float) -> str:
    """A quota as a config string: integral values without ".0" (what `kafka-configs` users write and
    what Kafka writes for its long-typed quotas), others as Java's Double.toString."""
    if not math.isfinite(value):
        raise ValueError(f"quota value {value} is not finite")
    if value == int(value) and abs(value) < 2**63:
        return str(int(value))
    if 1e-3 <= abs(value) < 1e7:
        return repr(value)
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    exp10 = len(digits) + int(exponent) - 1
    return ("-" if sign else "") + text[0] + "." + (text[1:] or "0") + "E" + str(exp10)


def decode_scram(path: str, user: str, mechanism: str, value: str) -> ScramCredential:
    """ScramCredentialUtils.credentialFromString; the message never repeats the secret."""
    where = f"{mechanism} credential"
    props: dict[str, str] = {}
    for token in value.split(","):
        i = token.find("=")
        if i <= 0:
            raise ZnodeError(path, f"{where} is not salt=…,stored_key=…,server_key=…,iterations=…")
        props[token[:i]] = token[i + 1 :]
    if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
        raise ZnodeError(path, f"{where} must have exactly salt, stored_key, server_key and iterations")
    try:
        salt, stored_key, server_key = (_b64(props[k]) for k in ("salt", "stored_key", "server_key"))
    except (binascii.Error, ValueError):
        raise ZnodeError(path, f"{where} has a key that is not base64") from None
    iterations = props["iterations"]
    if not re.fullmatch(r"[+-]?[0-9]{1,10}", iterations) or not I32_MIN <= int(iterations) <= I32_MAX:
        raise ZnodeError(path, f"{where} has a non-integer iteration count")
    return ScramCredential(
        user=user,
        mechanism=mechanism,
        salt=salt,
        stored_key=stored_key,
        server_key=server_key,
        iterations=int(iterations),
    )


def _b64(text: str) -> bytes:
    """java.util.Base64's basic decoder: padding optional, nothing outside the alphabet."""
    if not re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", text):
        raise ValueError("not base64")
    return base64.b64decode(text.rstrip("=") + "=" * (-len(text.rstrip("=")) % 4), validate=True)


def encode_scram(credential: ScramCredential) -> str:
    """ScramCredentialUtils.credentialToString."""
    b64 = base64.b64encode
    return (
        f"salt={b64(credential.salt).decode()},stored_key={b64(credential.stored_key).decode()},"
        f"server_key={b64(credential.server_key).decode()},iterations={credential.iterations}"
    )


# =====================================================================================================
# ACLs: /kafka-acl[-extended/prefixed]/<Type>/<name> and their change notifications
# =====================================================================================================
def _enum_lookup(names: Sequence[str]) -> dict[str, str]:
    table = {}
    for name in names:
        table[pascal_case(name)] = name
        table[pascal_case(name).upper()] = name
    return table


_OPERATIONS = _enum_lookup(ACL_OPERATIONS)
_PERMISSIONS = _enum_lookup(ACL_PERMISSION_TYPES)
_RESOURCE_TYPES = set(ACL_RESOURCE_TYPES)
_PATTERN_TYPES = ("LITERAL", "PREFIXED")


def _spelled(table: dict[str, str], name: str) -> str | None:
    """SecurityUtils.valueFromMap: the Pascal spelling, else any letter case of it."""
    return table.get(name) or table.get(name.upper())


def decode_acls(
    path: str, data: bytes | None, resource_type: str, resource_name: str, pattern_type: str
) -> list[Acl]:
    """AclEntry.fromBytes: no data is no ACLs; duplicates collapse (Kafka keeps a set)."""
    if not data:
        return []
    what = "ACL"
    obj = _object(path, _load(path, data, what), what)
    _version(path, obj, what, (1,))
    entries = _field(path, obj, "acls", what, _REQUIRED)
    if type(entries) is not list:
        raise ZnodeError(path, f"{what}: field 'acls' must be an array, got {_jtype(entries)}")
    out: dict[tuple[str, ...], Acl] = {}
    for n, raw in enumerate(entries):
        where = f"{what} entry {n}"
        item = _object(path, raw, where)
        principal = _str(path, item, "principal", where)
        if ":" not in principal:
            raise ZnodeError(path, f"{where}: principal is not principalType:name")
        permission = _spelled(_PERMISSIONS, _str(path, item, "permissionType", where))
        operation = _spelled(_OPERATIONS, _str(path, item, "operation", where))
        if permission is None:
            raise ZnodeError(path, f"{where}: unknown permissionType {item['permissionType']!r}")
        if operation is None:
            raise ZnodeError(path, f"{where}: unknown operation {item['operation']!r}")
        acl = Acl(
            resource_type=resource_type,
            resource_name=resource_name,
            pattern_type=pattern_type,
            principal=principal,
            host=_str(path, item, "host", where),
            operation=operation,
            permission_type=permission,
        )
        out.setdefault(acl.key(), acl)
    return list(out.values())


# Kafka 3.8+ (AclEntry in Java): java.util.HashMaps. 2.x-3.7 wrote insertion order:
# {"version":1,"acls":[{"principal","permissionType","operation","host"}]}.
_ACL_TOP = tuple(java_hashmap_order(["version", "acls"]))
_ACL_ENTRY = tuple(java_hashmap_order(["principal", "permissionType", "operation", "host"]))


def encode_acls(acls: Iterable[Acl]) -> bytes:
    """ResourceZNode.encode of one resource's ACLs, in the given order."""
    entries = []
    for acl in acls:
        fields = {
            "principal": acl.principal,
            "permissionType": pascal_case(acl.permission_type),
            "operation": pascal_case(acl.operation),
            "host": acl.host,
        }
        entries.append(_ordered(fields, _ACL_ENTRY))
    return _bytes(_ordered({"version": 1, "acls": entries}, _ACL_TOP))


class ResourcePattern(NamedTuple):
    resource_type: str  # enum name: TOPIC, GROUP, ...
    name: str
    pattern_type: str  # LITERAL | PREFIXED


def _resource_type(path: str, text: str, where: str) -> str:
    """ResourceType.fromString (enum name in any case), or the Pascal spelling of Kafka 1.x."""
    upper = text.upper()
    found = upper if upper in _RESOURCE_TYPES else resource_type_from_segment(text)
    if found is None:
        raise ZnodeError(path, f"{where}: unknown resource type {text!r}")
    return found


def decode_literal_acl_change(path: str, data: bytes | None) -> ResourcePattern:
    """LiteralAclChangeStore.decode: the raw string ``TOPIC:orders``."""
    text = (data or b"").decode("utf-8", "replace")
    rtype, sep, name = text.partition(":")
    if not sep:
        raise ZnodeError(path, "ACL change: expected ResourceType:ResourceName")
    return ResourcePattern(_resource_type(path, rtype, "ACL change"), name, "LITERAL")


def decode_extended_acl_change(path: str, data: bytes | None) -> ResourcePattern:
    """ExtendedAclChangeStore.decode: ExtendedAclChangeEvent JSON, version 1."""
    what = "ACL change"
    obj = _object(path, _load(path, data, what), what)
    _version(path, obj, what, (1,))
    rtype = _resource_type(path, _str(path, obj, "resourceType", what), what)
    pattern = _str(path, obj, "patternType", what).upper()
    if pattern not in _PATTERN_TYPES:
        raise ZnodeError(path, f"{what}: unknown patternType {obj['patternType']!r}")
    return ResourcePattern(rtype, _str(path, obj, "name", what), pattern)


def decode_acl_change(path: str, data: bytes | None) -> ResourcePattern:
    """Either change store, told apart by the path."""
    if path.startswith("/kafka-acl-extended-changes/"):
        return decode_extended_acl_change(path, data)
    return decode_literal_acl_change(path, data)


def encode_acl_change(resource: ResourcePattern) -> bytes:
    """A literal change is ``ResourceType.toString:name`` (the enum name); others are JSON."""
    if resource.pattern_type == "LITERAL":
        return f"{resource.resource_type}:{resource.name}".encode()
    return _bytes(
        {
            "version": 1,
            "resourceType": resource.resource_type,
            "name": resource.name,
            "patternType": resource.pattern_type,
        }
    )


# =====================================================================================================
# /delegation_token/tokens/<id>, /delegation_token/token_changes/token_change_N
# =====================================================================================================
def _principal(path: str, value: str, where: str) -> str:
    try:
        principal = desanitize(value)
    except ValueError:
        raise ZnodeError(path, f"{where} has a bad %-escape") from None
    if ":" not in principal:
        raise ZnodeError(path, f"{where} is not principalType:name")
    return principal


def decode_delegation_token(path: str, data: bytes | None) -> DelegationToken:
    """DelegationTokenManagerZk.fromBytes: principals are URL-sanitized; v1/v2 have no requester."""
    what = "delegation token"
    obj = _object(path, _load(path, data, what), what)
    version = _version(path, obj, what, DELEGATION_TOKEN_VERSIONS)
    owner = _principal(path, _str(path, obj, "owner", what), f"{what}: owner")
    requester = owner
    if version >= 3:
        requester = _principal(path, _str(path, obj, "tokenRequester", what), f"{what}: tokenRequester")
    renewers = _field(path, obj, "renewers", what, _REQUIRED)
    if type(renewers) is not list or not all(type(r) is str for r in renewers):
        raise ZnodeError(path, f"{what}: field 'renewers' must be an array of strings")
    return DelegationToken(
        token_id=_str(path, obj, "tokenId", what),
        owner=owner,
        requester=requester,
        renewers=[_principal(path, r, f"{what}: renewer") for r in renewers],
        issue_timestamp=_int(path, obj, "issueTimestamp", what, lo=I64_MIN, hi=I64_MAX),
        max_timestamp=_int(path, obj, "maxTimestamp", what, lo=I64_MIN, hi=I64_MAX),
        expiry_timestamp=_int(path, obj, "expiryTimestamp", what, lo=I64_MIN, hi=I64_MAX),
        json_version=version,
    )


def encode_delegation_token(token: DelegationToken) -> bytes:
    """DelegationTokenManagerZk.toJsonCompatibleMap: a mutable.Map turned into an immutable one."""
    fields: dict[str, Any] = {"version": token.json_version, "owner": sanitize(token.owner)}
    if token.json_version >= 3:
        fields["tokenRequester"] = sanitize(token.requester)
    fields["renewers"] = [sanitize(r) for r in token.renewers]
    fields["issueTimestamp"] = token.issue_timestamp
    fields["maxTimestamp"] = token.max_timestamp
    fields["expiryTimestamp"] = token.expiry_timestamp
    fields["tokenId"] = token.token_id
    return _bytes(_ordered(fields, _scala_immutable(tuple(fields))))


def decode_token_change(path: str, data: bytes | None) -> str:
    """A token change notification holds the token id as raw UTF-8."""
    return (data or b"").decode("utf-8", "replace")


def encode_token_change(token_id: str) -> bytes:
    return token_id.encode()


# =====================================================================================================
# Coordination znodes: /controller, /controller_epoch, /migration, /cluster/id, /feature
# =====================================================================================================
def decode_controller(path: str, data: bytes | None, ephemeral: bool = True) -> ControllerZnode:
    """ControllerZNode.decodeController; v1 (before 3.4) has no kraftControllerEpoch."""
    what = "controller"
    obj = _object(path, _load(path, data, what), what)
    version = _version(path, obj, what, CONTROLLER_VERSIONS)
    timestamp = obj.get("timestamp", "0")
    if type(timestamp) is int:
        _check_int(path, timestamp, f"{what}: field 'timestamp'", I64_MIN, I64_MAX)
    else:
        timestamp = _long_string(path, timestamp, f"{what}: field 'timestamp'")
    is_kraft = obj.get("isKRaft")
    if is_kraft is not None and type(is_kraft) is not bool:
        raise ZnodeError(path, f"{what}: field 'isKRaft' must be a boolean, got {_jtype(is_kraft)}")
    return ControllerZnode(
        json_version=version,
        broker_id=_int(path, obj, "brokerid", what),
        timestamp=timestamp,
        kraft_controller_epoch=_int(path, obj, "kraftControllerEpoch", what, default=-1),
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
    return _bytes(fields)


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
    obj = _object(path, _load(path, data, what), what)
    _version(path, obj, what, (0,))
    return MigrationZnode(
        json_version=0,
        kraft_controller_id=_int(path, obj, "kraft_controller_id", what),
        kraft_controller_epoch=_int(path, obj, "kraft_controller_epoch", what),
        kraft_metadata_offset=_int(path, obj, "kraft_metadata_offset", what, lo=I64_MIN, hi=I64_MAX),
        kraft_metadata_epoch=_int(path, obj, "kraft_metadata_epoch", what),
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
    return _bytes(_ordered(fields, _MIGRATION_ORDER))


def decode_cluster_id(path: str, data: bytes | None) -> str:
    """ClusterIdZNode.fromJson: {"version":"1","id":...} (the version is a string)."""
    what = "cluster id"
    obj = _object(path, _load(path, data, what), what)
    version = _field(path, obj, "version", what, _REQUIRED)
    if version not in ("1", 1) or type(version) is bool:
        raise ZnodeError(path, f'unknown {what} version {version!r} (zk2kraft reads version "1")')
    return _str(path, obj, "id", what)


def encode_cluster_id(cluster_id: str) -> bytes:
    return _bytes({"version": "1", "id": cluster_id})


def decode_feature(path: str, data: bytes | None) -> FeatureZnode:
    """FeatureZNode.decode: v1 has min_version_level and max_version_level, v2 (3.3+) max only."""
    what = "feature"
    obj = _object(path, _load(path, data, what), what)
    version = _version(path, obj, what, FEATURE_VERSIONS)
    status = _int(path, obj, "status", what)
    if status not in (0, 1):
        raise ZnodeError(path, f"{what}: unknown status {status} (0 Disabled, 1 Enabled)")
    raw = _object(path, _field(path, obj, "features", what, _REQUIRED), f"{what}: field 'features'")
    features: dict[str, dict[str, int]] = {}
    for name, levels in raw.items():
        where = f"{what} {name!r}"
        levels = _object(path, levels, where)
        kept = {}
        for key, value in levels.items():
            if key in ("min_version_level", "max_version_level"):
                kept[key] = _check_int(path, value, f"{where}: {key}", -32768, 32767)
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
        "features": _ordered(features, _scala_immutable(tuple(features))),
    }
    return _bytes(_ordered(fields, _scala_mutable(tuple(fields), 3)))


# =====================================================================================================
# /admin and the notification queues
# =====================================================================================================
def decode_reassignments(path: str, data: bytes | None) -> list[Reassignment]:
    """ReassignPartitionsZNode.decode (the pre-2.4 reassignment API that 2.x still honours)."""
    what = "partition reassignment"
    obj = _object(path, _load(path, data, what), what)
    _version(path, obj, what, (1,))
    entries = _field(path, obj, "partitions", what, _REQUIRED)
    if type(entries) is not list:
        raise ZnodeError(path, f"{what}: field 'partitions' must be an array, got {_jtype(entries)}")
    out = []
    for n, raw in enumerate(entries):
        where = f"{what} entry {n}"
        item = _object(path, raw, where)
        out.append(
            Reassignment(
                topic=_str(path, item, "topic", where),
                partition=_int(path, item, "partition", where),
                replicas=_int_list(
                    path, _field(path, item, "replicas", where, _REQUIRED), f"{where}: replicas"
                ),
            )
        )
    return out


def encode_reassignments(reassignments: Iterable[Reassignment]) -> bytes:
    """Jackson's bean order of LegacyPartitionAssignment / ReplicaAssignment (constructor order)."""
    return _bytes(
        {
            "version": 1,
            "partitions": [
                {"topic": r.topic, "partition": r.partition, "replicas": list(r.replicas)}
                for r in reassignments
            ],
        }
    )


def decode_partition_list(path: str, data: bytes | None, what: str) -> list[tuple[str, int]]:
    """/isr_change_notification/isr_change_N and /admin/preferred_replica_election, version 1."""
    obj = _object(path, _load(path, data, what), what)
    _version(path, obj, what, (1,))
    entries = _field(path, obj, "partitions", what, _REQUIRED)
    if type(entries) is not list:
        raise ZnodeError(path, f"{what}: field 'partitions' must be an array, got {_jtype(entries)}")
    out = []
    for n, raw in enumerate(entries):
        item = _object(path, raw, f"{what} entry {n}")
        out.append((_str(path, item, "topic", f"{what} entry {n}"), _int(path, item, "partition", what)))
    return out


def encode_partition_list(partitions: Iterable[tuple[str, int]]) -> bytes:
    return _bytes({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_log_dir_event(path: str, data: bytes | None) -> int:
    """LogDirEventNotificationSequenceZNode.decode: the broker whose log directory failed."""
    what = "log dir event"
    obj = _object(path, _load(path, data, what), what)
    _version(path, obj, what, (1,))
    return _int(path, obj, "broker", what)


def encode_log_dir_event(broker_id: int) -> bytes:
    return _bytes({"version": 1, "broker": broker_id, "event": 1})


def decode_config_change(path: str, data: bytes | None) -> str:
    """A config change notification as its sanitized entity path (``users/alice/clients/app1``).

    Version 1 (``entity_type`` + ``entity_name``) is what Kafka before 0.10.1 wrote; ZkConfigManager
    still reads it.
    """
    what = "config change notification"
    obj = _object(path, _load(path, data, what), what)
    version = _version(path, obj, what, (1, 2))
    if version == 1:
        return f"{_str(path, obj, 'entity_type', what)}/{_str(path, obj, 'entity_name', what)}"
    return _str(path, obj, "entity_path", what)


def encode_config_change(entity_path: str) -> bytes:
    return _bytes({"version": 2, "entity_path": entity_path})


# =====================================================================================================
# Producer ids
# =====================================================================================================
def decode_producer_id_block(path: str, data: bytes | None) -> ProducerIdBlock:
    """ProducerIdBlockZNode.parseProducerIdBlockData: block_start and block_end are strings."""
    what = "producer id block"
    obj = _object(path, _load(path, data, what), what)
    _version(path, obj, what, (1,))
    return ProducerIdBlock(
        broker=_int(path, obj, "broker", what),
        block_start=_long_string(
            path, _field(path, obj, "block_start", what, _REQUIRED), f"{what}: block_start"
        ),
        block_end=_long_string(path, _field(path, obj, "block_end", what, _REQUIRED), f"{what}: block_end"),
    )


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return _bytes(
        {
            "version": 1,
            "broker": block.broker,
            "block_start": str(block.block_start),
            "block_end": str(block.block_end),
        }
    )
