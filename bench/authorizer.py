"""How fast the controller's authorizer answers, against a linear scan of every ACL measured in the same run.

A cluster with T topics, each with a literal READ/WRITE ACL for its own application user, plus one
PREFIXED ACL per 100 topics, a few wildcard and DENY ACLs, and CLUSTER_ACTION for the brokers — the
shape of a real multi-tenant cluster's ACLs. Timed: N random checks (topic READ/DESCRIBE by the owner
and by a stranger, CLUSTER_ACTION by a broker) through ``StandardAuthorizer.authorize``, and the same
checks through a baseline that scans every ACL with the same rules (what an unindexed authorizer
does); the answers must agree. Also timed: applying T AccessControlEntryRecords one at a time (the
incremental path ACL changes take during the migration).

    .venv/bin/python bench/authorizer.py [--topics 20000] [--checks 20000]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from migrator.controller.security.authorizer import StandardAuthorizer  # noqa: E402
from migrator.model import Acl  # noqa: E402

IMPLIES = {"DESCRIBE": {"READ", "WRITE", "DELETE", "ALTER"}, "DESCRIBE_CONFIGS": {"ALTER_CONFIGS"}}


def acls_for(topics: int) -> list[Acl]:
    out = []

    def add(rtype: str, name: str, pattern: str, principal: str, op: str, perm: str = "ALLOW") -> None:
        out.append(
            Acl(
                resource_type=rtype,
                resource_name=name,
                pattern_type=pattern,
                principal=principal,
                host="*",
                operation=op,
                permission_type=perm,
                acl_id=str(len(out)),
            )
        )

    for t in range(topics):
        add("TOPIC", f"team{t // 100}.topic{t}", "LITERAL", f"User:app{t}", "READ")
        add("TOPIC", f"team{t // 100}.topic{t}", "LITERAL", f"User:app{t}", "WRITE")
        if t % 100 == 0:
            add("TOPIC", f"team{t // 100}.", "PREFIXED", f"User:team{t // 100}", "ALL")
    add("TOPIC", "*", "LITERAL", "User:monitor", "DESCRIBE")
    add("TOPIC", "team1.", "PREFIXED", "User:app150", "WRITE", "DENY")
    add("CLUSTER", "kafka-cluster", "LITERAL", "User:broker", "CLUSTER_ACTION")
    return out


def linear(acls: list[Acl], principal: str, host: str, rtype: str, name: str, op: str) -> bool:
    """The baseline: every ACL examined, Kafka's rules applied to each."""
    allowed = False
    for a in acls:
        if a.resource_type != rtype:
            continue
        if a.pattern_type == "LITERAL":
            if a.resource_name not in (name, "*"):
                continue
        elif not name.startswith(a.resource_name):
            continue
        if a.principal not in (principal, "User:*") or a.host not in (host, "*"):
            continue
        if a.operation not in ("ALL", op) and not (
            a.permission_type == "ALLOW" and a.operation in IMPLIES.get(op, ())
        ):
            continue
        if a.permission_type == "DENY":
            return False
        allowed = True
    return allowed  # default: allow.everyone.if.no.acl.found=false


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--topics", type=int, default=20_000)
    p.add_argument("--checks", type=int, default=20_000)
    args = p.parse_args()
    acls = acls_for(args.topics)
    rng = random.Random(7)
    checks = []
    for _ in range(args.checks):
        t = rng.randrange(args.topics)
        topic = f"team{t // 100}.topic{t}"
        who = rng.choice([f"User:app{t}", "User:stranger", f"User:team{t // 100}", "User:app150"])
        kind = rng.random()
        if kind < 0.1:
            checks.append(("User:broker", "10.0.0.1", "CLUSTER", "kafka-cluster", "CLUSTER_ACTION"))
        else:
            checks.append((who, "10.0.0.1", "TOPIC", topic, rng.choice(["READ", "WRITE", "DESCRIBE"])))

    t0 = time.perf_counter()
    auth = StandardAuthorizer(acls)
    build = time.perf_counter() - t0

    t0 = time.perf_counter()
    fast = [auth.allowed(*c) for c in checks]
    indexed = time.perf_counter() - t0

    n_base = min(len(checks), 2_000)
    t0 = time.perf_counter()
    slow = [linear(acls, *c) for c in checks[:n_base]]
    scan = (time.perf_counter() - t0) * len(checks) / n_base
    assert fast[:n_base] == slow, "indexed and linear answers differ"

    records = [
        {
            "Id": uuid.uuid4(),
            "ResourceType": 2,
            "ResourceName": f"new.topic{i}",
            "PatternType": 3,
            "Principal": f"User:new{i}",
            "Host": "*",
            "Operation": 3,
            "PermissionType": 3,
        }
        for i in range(args.topics)
    ]
    t0 = time.perf_counter()
    for r in records:
        auth.apply_record(18, r)
    applied = time.perf_counter() - t0

    print(f"ACLs: {len(acls)}  checks: {len(checks)}  allowed: {sum(fast)}")
    print(f"index build           {build:8.3f} s  ({len(acls) / build:,.0f} ACLs/s)")
    print(f"checks, indexed       {indexed:8.3f} s  ({len(checks) / indexed:,.0f} checks/s)")
    print(f"checks, linear scan   {scan:8.3f} s  ({len(checks) / scan:,.0f} checks/s, from {n_base} checks)")
    print(f"ratio indexed/linear  {scan / indexed:8.0f}x")
    print(f"ACL records applied   {applied:8.3f} s  ({len(records) / applied:,.0f} records/s)")


if __name__ == "__main__":
    main()
