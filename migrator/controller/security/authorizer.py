"""Kafka's StandardAuthorizer decision over the ACLs of the controller's metadata image.

The rules are those of Kafka 3.9's ``StandardAuthorizerData``: super users may do anything; otherwise
the ACLs whose resource pattern matches (LITERAL name, PREFIXED name, LITERAL ``*``) are examined, a
matching DENY wins over any ALLOW, an ALLOW implies DESCRIBE (from READ/WRITE/DELETE/ALTER) and
DESCRIBE_CONFIGS (from ALTER_CONFIGS) while a DENY denies only its own operation (or ALL); when no
ACL names the resource at all the answer is ``allow.everyone.if.no.acl.found``, and when some do but
none matches the principal, host and operation it is DENIED.

Checks run on every request, ACL changes arrive one record at a time: the ACLs are indexed per
resource type by literal name and by prefix (with the set of prefix lengths in use), so a check costs
a few dict lookups plus the ACLs on the matching resources, and an ACL record changes one bucket.
Buckets are tuples replaced whole, so a check running in another thread sees either the old or the
new bucket, never a half-changed one.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from migrator.errors import BadInputError
from migrator.kraft.image import (
    ACL_OPERATIONS,
    ACL_PERMISSION_TYPES,
    ACL_RESOURCE_TYPES,
    PATTERN_TYPES,
)
from migrator.kraft.records import uuid_to_kafka
from migrator.model import Acl, ClusterImage

__all__ = [
    "AuthorizationResult",
    "StandardAuthorizer",
    "parse_super_users",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
]

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
SUPER_USERS_CONFIG = "super.users"
ALLOW_EVERYONE_CONFIG = "allow.everyone.if.no.acl.found"

#: operations whose ALLOW also allows DESCRIBE, and DESCRIBE_CONFIGS (StandardAuthorizerData)
IMPLIES_DESCRIBE = frozenset({"DESCRIBE", "READ", "WRITE", "DELETE", "ALTER"})
IMPLIES_DESCRIBE_CONFIGS = frozenset({"DESCRIBE_CONFIGS", "ALTER_CONFIGS"})

#: AccessControlEntryRecord and RemoveAccessControlEntryRecord
ACL_RECORD = 18
REMOVE_ACL_RECORD = 19


class AuthorizationResult(enum.Enum):
    ALLOWED = "ALLOWED"
    DENIED = "DENIED"


ALLOWED = AuthorizationResult.ALLOWED
DENIED = AuthorizationResult.DENIED


@dataclass(frozen=True, slots=True)
class _Entry:
    """The part of an ACL a check compares once its resource pattern matched."""

    acl_id: str
    principal: str
    host: str
    operation: str
    allow: bool


class _TypeIndex:
    """ACLs of one resource type: literal names (``*`` among them) and prefixes."""

    __slots__ = ("literal", "prefixed", "prefix_lengths", "_length_counts")

    def __init__(self) -> None:
        self.literal: dict[str, tuple[_Entry, ...]] = {}
        self.prefixed: dict[str, tuple[_Entry, ...]] = {}
        self.prefix_lengths: tuple[int, ...] = ()
        self._length_counts: dict[int, int] = {}

    def add(self, pattern: str, name: str, entry: _Entry) -> None:
        table = self.literal if pattern == "LITERAL" else self.prefixed
        old = table.get(name, ())
        table[name] = (*old, entry)
        if pattern != "LITERAL" and not old:
            self._length_counts[len(name)] = self._length_counts.get(len(name), 0) + 1
            self.prefix_lengths = tuple(sorted(self._length_counts))

    def remove(self, pattern: str, name: str, acl_id: str) -> None:
        table = self.literal if pattern == "LITERAL" else self.prefixed
        left = tuple(e for e in table.get(name, ()) if e.acl_id != acl_id)
        if left:
            table[name] = left
            return
        if table.pop(name, None) is not None and pattern != "LITERAL":
            n = self._length_counts[len(name)] - 1
            if n:
                self._length_counts[len(name)] = n
            else:
                del self._length_counts[len(name)]
            self.prefix_lengths = tuple(sorted(self._length_counts))

    def buckets(self, name: str) -> list[tuple[_Entry, ...]]:
        """Every bucket of ACLs whose resource pattern matches the literal resource ``name``."""
        out = []
        lit = self.literal.get(name)
        if lit:
            out.append(lit)
        if name != WILDCARD:
            wild = self.literal.get(WILDCARD)
            if wild:
                out.append(wild)
        prefixed = self.prefixed
        for length in self.prefix_lengths:
            if length > len(name):
                break
            found = prefixed.get(name[:length])
            if found:
                out.append(found)
        return out


def _result(entry: _Entry, principal: str, host: str, operation: str) -> AuthorizationResult | None:
    """What one ACL on a matching resource says about the action; None when it does not apply."""
    if entry.principal != principal and entry.principal != WILDCARD_PRINCIPAL:
        return None
    if entry.host != WILDCARD and entry.host != host:
        return None
    op = entry.operation
    if op != "ALL":
        if entry.allow:
            if operation == "DESCRIBE":
                if op not in IMPLIES_DESCRIBE:
                    return None
            elif operation == "DESCRIBE_CONFIGS":
                if op not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif op != operation:
                return None
        elif op != operation:
            return None
    return ALLOWED if entry.allow else DENIED


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users`` as Kafka reads it: principals separated by ``;``, each ``Type:name``."""
    out = set()
    for part in (value or "").split(";"):
        v = part.strip()
        if not v:
            continue
        if ":" not in v:
            raise BadInputError(
                f"super.users: {v!r} is not a principal of the form Type:name (e.g. User:admin)"
            )
        out.add(v)
    return frozenset(out)


class StandardAuthorizer:
    """ALLOWED or DENIED for (principal, host, resource, operation), as Kafka's controller decides."""

    def __init__(
        self,
        acls: Iterable[Acl] = (),
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.default = ALLOWED if allow_everyone_if_no_acl_found else DENIED
        self._lock = threading.Lock()
        self._types: dict[str, _TypeIndex] = {}
        self._by_id: dict[str, Acl] = {}
        for acl in acls:
            self.add(acl)

    @classmethod
    def from_config(cls, props: Mapping[str, str], acls: Iterable[Acl] = ()) -> StandardAuthorizer:
        """From a controller's properties (``super.users``, ``allow.everyone.if.no.acl.found``)."""
        allow = str(props.get(ALLOW_EVERYONE_CONFIG, "false")).strip().lower() == "true"
        return cls(
            acls,
            super_users=parse_super_users(props.get(SUPER_USERS_CONFIG)),
            allow_everyone_if_no_acl_found=allow,
        )

    @classmethod
    def from_image(cls, image: ClusterImage, props: Mapping[str, str]) -> StandardAuthorizer:
        return cls.from_config(props, image.acls)

    def __len__(self) -> int:
        return len(self._by_id)

    @staticmethod
    def _id(acl: Acl) -> str:
        # ACLs read from ZooKeeper have no KRaft id yet; their binding is their identity.
        return acl.acl_id if acl.acl_id is not None else "\0".join(acl.key())

    def add(self, acl: Acl) -> None:
        """An ACL created (or replaced: an AccessControlEntryRecord with a known id)."""
        if acl.permission_type not in ("ALLOW", "DENY"):
            raise BadInputError(f"ACL {acl.principal} {acl.operation}: permission {acl.permission_type!r}")
        if acl.pattern_type not in ("LITERAL", "PREFIXED"):
            raise BadInputError(f"ACL {acl.principal} {acl.operation}: pattern type {acl.pattern_type!r}")
        acl_id = self._id(acl)
        entry = _Entry(acl_id, acl.principal, acl.host, acl.operation, acl.permission_type == "ALLOW")
        with self._lock:
            if acl_id in self._by_id:
                self._remove_locked(acl_id)
            self._types.setdefault(acl.resource_type, _TypeIndex()).add(
                acl.pattern_type, acl.resource_name, entry
            )
            self._by_id[acl_id] = acl

    def remove(self, acl_id: str) -> None:
        """An ACL deleted (RemoveAccessControlEntryRecord); an unknown id changes nothing."""
        with self._lock:
            self._remove_locked(acl_id)

    def _remove_locked(self, acl_id: str) -> None:
        acl = self._by_id.pop(acl_id, None)
        if acl is not None:
            self._types[acl.resource_type].remove(acl.pattern_type, acl.resource_name, acl_id)

    def apply_record(self, api_key: int, fields: Mapping[str, Any]) -> bool:
        """Apply an ACL metadata record as it is appended or replayed; False for any other record."""
        if api_key == ACL_RECORD:
            self.add(
                Acl(
                    resource_type=ACL_RESOURCE_TYPES.get(fields["ResourceType"], "UNKNOWN"),
                    resource_name=fields["ResourceName"],
                    pattern_type=PATTERN_TYPES.get(fields["PatternType"], "UNKNOWN"),
                    principal=fields["Principal"],
                    host=fields["Host"],
                    operation=ACL_OPERATIONS.get(fields["Operation"], "UNKNOWN"),
                    permission_type=ACL_PERMISSION_TYPES.get(fields["PermissionType"], "UNKNOWN"),
                    acl_id=uuid_to_kafka(fields["Id"]),
                )
            )
            return True
        if api_key == REMOVE_ACL_RECORD:
            self.remove(uuid_to_kafka(fields["Id"]))
            return True
        return False

    def acls(self) -> list[Acl]:
        return list(self._by_id.values())

    def authorize(
        self, principal: str, host: str, resource_type: str, resource_name: str, operation: str
    ) -> AuthorizationResult:
        """One action on a literal resource. ``principal`` is ``Type:name``; ``host`` the client's
        address as Java prints it (see ``principal.java_host_address``)."""
        if principal in self.super_users:
            return ALLOWED
        index = self._types.get(resource_type)
        if index is None:
            return self.default
        buckets = index.buckets(resource_name)
        if not buckets:
            return self.default
        allowed = False
        for bucket in buckets:
            for entry in bucket:
                r = _result(entry, principal, host, operation)
                if r is DENIED:
                    return DENIED
                if r is ALLOWED:
                    allowed = True
        return ALLOWED if allowed else DENIED

    def allowed(
        self, principal: str, host: str, resource_type: str, resource_name: str, operation: str
    ) -> bool:
        return self.authorize(principal, host, resource_type, resource_name, operation) is ALLOWED
