"""ACLs: /kafka-acl[-extended/prefixed]/<Type>/<name> and their change notifications."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from migrator.model import (
    Acl,
)
from migrator.zk.jvm_order import java_hashmap_order, ordered
from migrator.zk.paths import (
    ACL_RESOURCE_TYPES,
    pascal_case,
    resource_type_from_segment,
)
from migrator.zk.znode_json import (
    REQUIRED,
    ZnodeError,
    get_field,
    get_str,
    get_version,
    json_bytes,
    json_object,
    json_type,
    load_json,
)

__all__ = [
    "ACL_OPERATIONS",
    "ACL_PERMISSION_TYPES",
    "ResourcePattern",
    "decode_acl_change",
    "decode_acls",
    "decode_extended_acl_change",
    "decode_literal_acl_change",
    "encode_acl_change",
    "encode_acls",
]


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
    obj = json_object(path, load_json(path, data, what), what)
    get_version(path, obj, what, (1,))
    entries = get_field(path, obj, "acls", what, REQUIRED)
    if type(entries) is not list:
        raise ZnodeError(path, f"{what}: field 'acls' must be an array, got {json_type(entries)}")
    out: dict[tuple[str, ...], Acl] = {}
    for n, raw in enumerate(entries):
        where = f"{what} entry {n}"
        item = json_object(path, raw, where)
        principal = get_str(path, item, "principal", where)
        if ":" not in principal:
            raise ZnodeError(path, f"{where}: principal is not principalType:name")
        permission = _spelled(_PERMISSIONS, get_str(path, item, "permissionType", where))
        operation = _spelled(_OPERATIONS, get_str(path, item, "operation", where))
        if permission is None:
            raise ZnodeError(path, f"{where}: unknown permissionType {item['permissionType']!r}")
        if operation is None:
            raise ZnodeError(path, f"{where}: unknown operation {item['operation']!r}")
        acl = Acl(
            resource_type=resource_type,
            resource_name=resource_name,
            pattern_type=pattern_type,
            principal=principal,
            host=get_str(path, item, "host", where),
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
        entries.append(ordered(fields, _ACL_ENTRY))
    return json_bytes(ordered({"version": 1, "acls": entries}, _ACL_TOP))


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
    obj = json_object(path, load_json(path, data, what), what)
    get_version(path, obj, what, (1,))
    rtype = _resource_type(path, get_str(path, obj, "resourceType", what), what)
    pattern = get_str(path, obj, "patternType", what).upper()
    if pattern not in _PATTERN_TYPES:
        raise ZnodeError(path, f"{what}: unknown patternType {obj['patternType']!r}")
    return ResourcePattern(rtype, get_str(path, obj, "name", what), pattern)


def decode_acl_change(path: str, data: bytes | None) -> ResourcePattern:
    """Either change store, told apart by the path."""
    if path.startswith("/kafka-acl-extended-changes/"):
        return decode_extended_acl_change(path, data)
    return decode_literal_acl_change(path, data)


def encode_acl_change(resource: ResourcePattern) -> bytes:
    """A literal change is ``ResourceType.toString:name`` (the enum name); others are JSON."""
    if resource.pattern_type == "LITERAL":
        return f"{resource.resource_type}:{resource.name}".encode()
    return json_bytes(
        {
            "version": 1,
            "resourceType": resource.resource_type,
            "name": resource.name,
            "patternType": resource.pattern_type,
        }
    )
