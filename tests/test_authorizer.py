"""The controller's authorizer decides as Kafka 3.9's StandardAuthorizer does."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migrator.controller.security.authorizer import (
    ALLOWED,
    DENIED,
    AuthorizationResult,
    StandardAuthorizer,
    parse_super_users,
)
from migrator.errors import BadInputError
from migrator.kraft.records import uuid_to_kafka
from migrator.model import Acl

ALICE = "User:alice"
HOST = "10.0.0.1"


def acl(
    rtype: str = "TOPIC",
    name: str = "orders",
    pattern: str = "LITERAL",
    principal: str = ALICE,
    host: str = "*",
    op: str = "READ",
    perm: str = "ALLOW",
    acl_id: str | None = None,
) -> Acl:
    return Acl(
        resource_type=rtype,
        resource_name=name,
        pattern_type=pattern,
        principal=principal,
        host=host,
        operation=op,
        permission_type=perm,
        acl_id=acl_id,
    )


# (description, acls, (principal, host, resource type, resource name, operation), expected)
TABLE = [
    ("no ACL at all: the default (deny)", [], (ALICE, HOST, "TOPIC", "orders", "READ"), DENIED),
    ("literal allow", [acl()], (ALICE, HOST, "TOPIC", "orders", "READ"), ALLOWED),
    ("literal is exact, not a prefix", [acl(name="ord")], (ALICE, HOST, "TOPIC", "orders", "READ"), DENIED),
    (
        "prefixed allow",
        [acl(name="ord", pattern="PREFIXED")],
        (ALICE, HOST, "TOPIC", "orders", "READ"),
        ALLOWED,
    ),
    ("prefixed equal to name", [acl(pattern="PREFIXED")], (ALICE, HOST, "TOPIC", "orders", "READ"), ALLOWED),
    (
        "prefixed longer than name",
        [acl(name="orders1", pattern="PREFIXED")],
        (ALICE, HOST, "TOPIC", "orders", "READ"),
        DENIED,
    ),
    ("wildcard resource", [acl(name="*")], (ALICE, HOST, "TOPIC", "anything", "READ"), ALLOWED),
    (
        "prefixed '*' is not a wildcard",
        [acl(name="*", pattern="PREFIXED")],
        (ALICE, HOST, "TOPIC", "orders", "READ"),
        DENIED,
    ),
    (
        "other resource type does not count",
        [acl(rtype="GROUP")],
        (ALICE, HOST, "TOPIC", "orders", "READ"),
        DENIED,
    ),
    ("DENY over ALLOW", [acl(), acl(perm="DENY")], (ALICE, HOST, "TOPIC", "orders", "READ"), DENIED),
    (
        "wildcard DENY over literal ALLOW",
        [acl(), acl(name="*", perm="DENY")],
        (ALICE, HOST, "TOPIC", "orders", "READ"),
        DENIED,
    ),
    (
        "prefixed DENY over literal ALLOW",
        [acl(), acl(name="o", pattern="PREFIXED", perm="DENY")],
        (ALICE, HOST, "TOPIC", "orders", "READ"),
        DENIED,
    ),
    (
        "DENY of another principal",
        [acl(), acl(principal="User:bob", perm="DENY")],
        (ALICE, HOST, "TOPIC", "orders", "READ"),
        ALLOWED,
    ),
    (
        "principal wildcard User:*",
        [acl(principal="User:*")],
        (ALICE, HOST, "TOPIC", "orders", "READ"),
        ALLOWED,
    ),
    (
        "User:* DENY",
        [acl(), acl(principal="User:*", perm="DENY")],
        (ALICE, HOST, "TOPIC", "orders", "READ"),
        DENIED,
    ),
    (
        "other principal's ALLOW: resource has ACLs, so deny",
        [acl(principal="User:bob")],
        (ALICE, HOST, "TOPIC", "orders", "READ"),
        DENIED,
    ),
    ("host matches exactly", [acl(host=HOST)], (ALICE, HOST, "TOPIC", "orders", "READ"), ALLOWED),
    ("host differs", [acl(host="10.0.0.2")], (ALICE, HOST, "TOPIC", "orders", "READ"), DENIED),
    (
        "DENY from another host only",
        [acl(), acl(host="10.0.0.2", perm="DENY")],
        (ALICE, HOST, "TOPIC", "orders", "READ"),
        ALLOWED,
    ),
    ("ALL allows anything", [acl(op="ALL")], (ALICE, HOST, "TOPIC", "orders", "DELETE"), ALLOWED),
    (
        "DENY ALL denies anything",
        [acl(op="ALL"), acl(op="ALL", perm="DENY")],
        (ALICE, HOST, "TOPIC", "orders", "WRITE"),
        DENIED,
    ),
    ("other operation", [acl(op="WRITE")], (ALICE, HOST, "TOPIC", "orders", "READ"), DENIED),
    ("READ implies DESCRIBE", [acl(op="READ")], (ALICE, HOST, "TOPIC", "orders", "DESCRIBE"), ALLOWED),
    ("WRITE implies DESCRIBE", [acl(op="WRITE")], (ALICE, HOST, "TOPIC", "orders", "DESCRIBE"), ALLOWED),
    ("DELETE implies DESCRIBE", [acl(op="DELETE")], (ALICE, HOST, "TOPIC", "orders", "DESCRIBE"), ALLOWED),
    ("ALTER implies DESCRIBE", [acl(op="ALTER")], (ALICE, HOST, "TOPIC", "orders", "DESCRIBE"), ALLOWED),
    (
        "CREATE does not imply DESCRIBE",
        [acl(op="CREATE")],
        (ALICE, HOST, "TOPIC", "orders", "DESCRIBE"),
        DENIED,
    ),
    (
        "ALTER_CONFIGS implies DESCRIBE_CONFIGS",
        [acl(op="ALTER_CONFIGS")],
        (ALICE, HOST, "TOPIC", "orders", "DESCRIBE_CONFIGS"),
        ALLOWED,
    ),
    (
        "ALTER does not imply DESCRIBE_CONFIGS",
        [acl(op="ALTER")],
        (ALICE, HOST, "TOPIC", "orders", "DESCRIBE_CONFIGS"),
        DENIED,
    ),
    ("DESCRIBE does not imply READ", [acl(op="DESCRIBE")], (ALICE, HOST, "TOPIC", "orders", "READ"), DENIED),
    (
        "DENY READ does not deny DESCRIBE",
        [acl(op="ALL"), acl(op="READ", perm="DENY")],
        (ALICE, HOST, "TOPIC", "orders", "DESCRIBE"),
        ALLOWED,
    ),
    (
        "DENY ALTER_CONFIGS does not deny DESCRIBE_CONFIGS",
        [acl(op="ALL"), acl(op="ALTER_CONFIGS", perm="DENY")],
        (ALICE, HOST, "TOPIC", "orders", "DESCRIBE_CONFIGS"),
        ALLOWED,
    ),
    (
        "CLUSTER_ACTION on the cluster",
        [acl(rtype="CLUSTER", name="kafka-cluster", op="CLUSTER_ACTION", principal="User:broker")],
        ("User:broker", HOST, "CLUSTER", "kafka-cluster", "CLUSTER_ACTION"),
        ALLOWED,
    ),
    ("GROUP", [acl(rtype="GROUP", name="g", op="READ")], (ALICE, HOST, "GROUP", "g", "READ"), ALLOWED),
    (
        "TRANSACTIONAL_ID prefixed",
        [acl(rtype="TRANSACTIONAL_ID", name="tx-", pattern="PREFIXED", op="WRITE")],
        (ALICE, HOST, "TRANSACTIONAL_ID", "tx-1", "WRITE"),
        ALLOWED,
    ),
    (
        "DELEGATION_TOKEN",
        [acl(rtype="DELEGATION_TOKEN", name="tok", op="DESCRIBE")],
        (ALICE, HOST, "DELEGATION_TOKEN", "tok", "DESCRIBE"),
        ALLOWED,
    ),
    (
        "USER",
        [acl(rtype="USER", name="bob", op="CREATE_TOKENS")],
        (ALICE, HOST, "USER", "bob", "CREATE_TOKENS"),
        ALLOWED,
    ),
    (
        "principal type matters",
        [acl(principal="Group:alice")],
        (ALICE, HOST, "TOPIC", "orders", "READ"),
        DENIED,
    ),
]


@pytest.mark.parametrize(("acls", "action", "expected"), [t[1:] for t in TABLE], ids=[t[0] for t in TABLE])
def test_rule_table(
    acls: list[Acl], action: tuple[str, str, str, str, str], expected: AuthorizationResult
) -> None:
    assert StandardAuthorizer(acls).authorize(*action) is expected


def test_allow_everyone_if_no_acl_found_only_where_no_acl_names_the_resource() -> None:
    auth = StandardAuthorizer([acl(principal="User:bob")], allow_everyone_if_no_acl_found=True)
    assert auth.authorize(ALICE, HOST, "TOPIC", "other", "READ") is ALLOWED
    assert auth.authorize(ALICE, HOST, "GROUP", "g", "READ") is ALLOWED
    assert auth.authorize(ALICE, HOST, "TOPIC", "orders", "READ") is DENIED


def test_super_users_override_deny() -> None:
    auth = StandardAuthorizer.from_config(
        {"super.users": " User:admin ; User:CN=broker,O=acme ;", "allow.everyone.if.no.acl.found": "TRUE"},
        [acl(principal="User:*", op="ALL", perm="DENY")],
    )
    assert auth.super_users == {"User:admin", "User:CN=broker,O=acme"}
    assert auth.default is ALLOWED
    assert auth.authorize("User:admin", HOST, "TOPIC", "orders", "DELETE") is ALLOWED
    assert auth.authorize("User:CN=broker,O=acme", HOST, "CLUSTER", "kafka-cluster", "ALTER") is ALLOWED
    assert auth.authorize(ALICE, HOST, "TOPIC", "orders", "READ") is DENIED


def test_super_users_must_be_principals() -> None:
    with pytest.raises(BadInputError, match="Type:name"):
        parse_super_users("admin")


def test_changes_take_effect_at_once_and_replace_by_id() -> None:
    auth = StandardAuthorizer()
    auth.add(acl(acl_id="a1"))
    assert auth.allowed(ALICE, HOST, "TOPIC", "orders", "READ")
    auth.add(acl(acl_id="a1", op="WRITE"))  # same id: replaced, not added
    assert len(auth) == 1
    assert not auth.allowed(ALICE, HOST, "TOPIC", "orders", "READ")
    auth.add(acl(name="o", pattern="PREFIXED", perm="DENY", op="WRITE", acl_id="d1"))
    assert not auth.allowed(ALICE, HOST, "TOPIC", "orders", "WRITE")
    auth.remove("d1")
    assert auth.allowed(ALICE, HOST, "TOPIC", "orders", "WRITE")
    auth.remove("a1")
    auth.remove("nope")
    assert len(auth) == 0
    assert auth.authorize(ALICE, HOST, "TOPIC", "orders", "WRITE") is DENIED


def test_apply_acl_records_as_replayed_from_the_log() -> None:
    auth = StandardAuthorizer()
    rid = uuid.uuid4()
    fields = {
        "Id": rid,
        "ResourceType": 2,
        "ResourceName": "pay",
        "PatternType": 4,
        "Principal": ALICE,
        "Host": "*",
        "Operation": 4,
        "PermissionType": 3,
    }
    assert auth.apply_record(18, fields)
    assert auth.allowed(ALICE, HOST, "TOPIC", "payments", "WRITE")
    assert auth.acls()[0].acl_id == uuid_to_kafka(rid)
    assert not auth.apply_record(2, {})
    assert auth.apply_record(19, {"Id": rid})
    assert not auth.allowed(ALICE, HOST, "TOPIC", "payments", "WRITE")


# -- against a brute-force reading of the rules ------------------------------------------------

OPS = [
    "ALL",
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "ALTER_CONFIGS",
    "DESCRIBE_CONFIGS",
    "CLUSTER_ACTION",
]
NAMES = st.text(alphabet="ab*", max_size=4)


def reference(
    acls: list[Acl], default: bool, principal: str, host: str, rtype: str, name: str, op: str
) -> bool:
    """Every ACL looked at, with Kafka's rules written out plainly."""

    def resource_matches(a: Acl) -> bool:
        if a.resource_type != rtype:
            return False
        if a.pattern_type == "LITERAL":
            return a.resource_name in (name, "*")
        return name.startswith(a.resource_name)

    def op_matches(a: Acl) -> bool:
        if a.operation in ("ALL", op):
            return True
        if a.permission_type != "ALLOW":
            return False
        if op == "DESCRIBE":
            return a.operation in ("READ", "WRITE", "DELETE", "ALTER")
        return op == "DESCRIBE_CONFIGS" and a.operation == "ALTER_CONFIGS"

    on_resource = [a for a in acls if resource_matches(a)]
    applying = [
        a
        for a in on_resource
        if a.principal in (principal, "User:*") and a.host in (host, "*") and op_matches(a)
    ]
    if any(a.permission_type == "DENY" for a in applying):
        return False
    if applying:
        return True
    return default if not on_resource else False


acl_strategy = st.builds(
    acl,
    rtype=st.sampled_from(["TOPIC", "GROUP"]),
    name=NAMES,
    pattern=st.sampled_from(["LITERAL", "PREFIXED"]),
    principal=st.sampled_from([ALICE, "User:bob", "User:*"]),
    host=st.sampled_from(["*", "10.0.0.1", "10.0.0.2"]),
    op=st.sampled_from(OPS),
    perm=st.sampled_from(["ALLOW", "DENY"]),
)


@settings(max_examples=300, deadline=None)
@given(
    acls=st.lists(acl_strategy, max_size=12),
    removed=st.sets(st.integers(0, 11), max_size=4),
    default=st.booleans(),
    principal=st.sampled_from([ALICE, "User:bob", "User:carol"]),
    host=st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    rtype=st.sampled_from(["TOPIC", "GROUP"]),
    name=NAMES,
    op=st.sampled_from(OPS),
)
def test_matches_brute_force_reference(
    acls: list[Acl],
    removed: set[int],
    default: bool,
    principal: str,
    host: str,
    rtype: str,
    name: str,
    op: str,
) -> None:
    with_ids = [a.model_copy(update={"acl_id": f"id{i}"}) for i, a in enumerate(acls)]
    auth = StandardAuthorizer(with_ids, allow_everyone_if_no_acl_found=default)
    for i in removed:
        auth.remove(f"id{i}")  # incremental removal leaves the same index as never adding
    kept = [a for i, a in enumerate(with_ids) if i not in removed]
    got = auth.allowed(principal, host, rtype, name, op)
    assert got == reference(kept, default, principal, host, rtype, name, op)
