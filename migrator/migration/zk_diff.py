"""What the dual-write syncer may touch in ZooKeeper, and how an image's znodes are diffed against it.

The syncer owns exactly the paths Kafka's `KRaftMigrationZkWriter` writes: topics with their
partitions and state znodes, topic and broker configs, user/client/ip quota and SCRAM configs, ACLs,
the producer id block, delegation tokens, and the pending deletions it clears. `/brokers/ids`,
`/controller`, `/controller_epoch`, `/migration`, `/cluster/id`, `/feature` and every notification
queue's existing entries are never changed; container znodes above the owned ones are only created
when missing.

Znodes are compared by meaning, not bytes: a partition state differing only in `controller_epoch`
(ZooKeeper's controller wrote it, the KRaft controller would write its own epoch) or a config with
the same keys in another order is equal, so a reconcile of 200k partitions rewrites none of them
unless leader, leader epoch, ISR or recovery state differ (docs/dual-write.md).
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from migrator.errors import BadInputError
from migrator.zk import paths as P
from migrator.zk.migration_client import (
    ZkOp,
    ZkTree,
    acl_codec,
    admin_codec,
    codec,
    config_codec,
    credential_codec,
)

__all__ = [
    "Repair",
    "ZkCache",
    "acl_resource_of",
    "deletable",
    "delete_order",
    "describe",
    "notification_for",
    "owned",
    "plan",
    "recreated_topics",
    "repairs_of",
    "same",
    "structural",
    "write_ops",
]

_CONFIG_ENTITY_TYPES = frozenset(
    (
        P.CONFIG_TYPE_TOPICS,
        P.CONFIG_TYPE_BROKERS,
        P.CONFIG_TYPE_USERS,
        P.CONFIG_TYPE_CLIENTS,
        P.CONFIG_TYPE_IPS,
    )
)
_CLIENT_TYPES = frozenset((P.CONFIG_TYPE_USERS, P.CONFIG_TYPE_CLIENTS, P.CONFIG_TYPE_IPS))
_STRUCTURAL = frozenset(
    (
        P.BROKERS,
        P.TOPICS,
        P.CONFIG,
        P.CONFIG_CHANGES,
        *(P.config_type_path(t) for t in P.CONFIG_TYPES),
        P.ADMIN,
        P.DELETE_TOPICS,
        P.LITERAL_ACL,
        P.EXTENDED_ACL,
        P.PREFIXED_ACL,
        P.LITERAL_ACL_CHANGES,
        P.EXTENDED_ACL_CHANGES,
        *(P.acl_type_path(pt, rt) for pt in P.ACL_STORES for rt in P.ACL_RESOURCE_TYPES),
        P.DELEGATION_TOKEN,
        P.TOKENS,
        P.TOKEN_CHANGES,
    )
)


_EPOCH = re.compile(rb'"controller_epoch":-?[0-9]+')


def owned(path: str) -> bool:
    """A znode the syncer creates, updates and deletes to match the image."""
    if path.startswith(P.TOPICS + "/"):
        return True
    if path.startswith(P.CONFIG + "/"):
        parts = path.split("/")
        return len(parts) >= 4 and parts[2] in _CONFIG_ENTITY_TYPES
    if path.startswith(P.PREFIXED_ACL + "/"):
        return path.count("/") == 4
    if path.startswith(P.LITERAL_ACL + "/"):
        return path.count("/") == 3
    return path.startswith((P.TOKENS + "/", P.DELETE_TOPICS + "/")) or path == P.LATEST_PRODUCER_ID_BLOCK


def structural(path: str) -> bool:
    """A container above owned znodes: created when missing, never rewritten or deleted."""
    return path in _STRUCTURAL


def deletable(path: str) -> bool:
    # createTopLevelPaths makes /latest_producer_id_block with null data; an image without a block
    # (no producer ids handed out yet) leaves it alone.
    return owned(path) and path != P.LATEST_PRODUCER_ID_BLOCK


def acl_resource_of(path: str) -> tuple[str, str, str] | None:
    """(pattern type, resource type, name) of an ACL resource znode path."""
    if path.startswith(P.PREFIXED_ACL + "/"):
        pattern, rest = "PREFIXED", path[len(P.PREFIXED_ACL) + 1 :]
    elif path.startswith(P.LITERAL_ACL + "/"):
        pattern, rest = "LITERAL", path[len(P.LITERAL_ACL) + 1 :]
    else:
        return None
    segment, _, name = rest.partition("/")
    rtype = P.resource_type_from_segment(segment)
    if rtype is None or not name:
        return None
    return pattern, rtype, name


# --------------------------------------------------------------------------------------------------
# Comparing by meaning
# --------------------------------------------------------------------------------------------------
def _canonical_config(path: str, data: bytes | None) -> dict[str, Any]:
    config = config_codec.decode_config(path, data)
    parts = path.split("/")
    if len(parts) < 4 or parts[2] not in _CLIENT_TYPES:
        return dict(config)
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key in credential_codec.SCRAM_MECHANISMS:
            c = credential_codec.decode_scram(path, "", key, value)
            out[key] = (c.salt, c.stored_key, c.server_key, c.iterations)
        else:
            try:
                out[key] = config_codec.decode_quota_value(path, key, value)
            except BadInputError:
                out[key] = value
    return out


def _kind(path: str) -> str:
    if path.startswith(P.TOPICS + "/"):
        if path.endswith("/state"):
            return "state"
        return "topic" if path.count("/") == 3 else "container"
    if path.startswith(P.CONFIG + "/"):
        parts = path.split("/")
        return "container" if len(parts) == 5 and parts[4] == "clients" else "config"
    if path.startswith(P.TOKENS + "/"):
        return "token"
    if path == P.LATEST_PRODUCER_ID_BLOCK:
        return "pid"
    if acl_resource_of(path) is not None:
        return "acl"
    return "container"


def same(path: str, actual: bytes | None, desired: bytes | None) -> bool:
    """Whether ZooKeeper's `actual` data already says what `desired` says (see the module docstring)."""
    if actual == desired:
        return True
    kind = _kind(path)
    if kind == "container":
        return True
    if kind != "config" and (not desired or not actual):
        return False
    try:
        if kind == "state":
            # Kafka's and zk2kraft's state JSON differ, after a copy, only in controller_epoch: a
            # byte compare without it settles most of 200k states without decoding them.
            if _EPOCH.sub(b"", actual) == _EPOCH.sub(b"", desired):
                return True
            a = codec.decode_partition_state(path, actual)
            d = codec.decode_partition_state(path, desired)
            return (a.leader, a.leader_epoch, a.isr, a.leader_recovery_state) == (
                d.leader,
                d.leader_epoch,
                d.isr,
                d.leader_recovery_state,
            )
        if kind == "topic":
            a_t = codec.decode_topic(path, actual)
            d_t = codec.decode_topic(path, desired)
            return (a_t.topic_id, a_t.partitions, a_t.adding_replicas, a_t.removing_replicas) == (
                d_t.topic_id,
                d_t.partitions,
                d_t.adding_replicas,
                d_t.removing_replicas,
            )
        if kind == "config":
            return _canonical_config(path, actual) == _canonical_config(path, desired)
        if kind == "acl":
            resource = acl_resource_of(path)
            assert resource is not None
            pattern, rtype, name = resource
            a_acls = {x.key() for x in acl_codec.decode_acls(path, actual, rtype, name, pattern)}
            d_acls = {x.key() for x in acl_codec.decode_acls(path, desired, rtype, name, pattern)}
            return a_acls == d_acls
        if kind == "token":
            a_tok = credential_codec.decode_delegation_token(path, actual).model_dump(
                exclude={"json_version"}
            )
            d_tok = credential_codec.decode_delegation_token(path, desired).model_dump(
                exclude={"json_version"}
            )
            return a_tok == d_tok
        if kind == "pid":
            return codec.decode_producer_id_block(path, actual) == codec.decode_producer_id_block(
                path, desired
            )
    except BadInputError:  # unreadable in ZooKeeper: rewrite it
        return False
    return False


# --------------------------------------------------------------------------------------------------
# The syncer's picture of ZooKeeper
# --------------------------------------------------------------------------------------------------
class ZkCache:
    """What ZooKeeper holds at the paths the syncer owns (and the containers above them).

    Built from a full read at reconcile and kept up to date with every write, so a sync reads nothing.
    """

    def __init__(self) -> None:
        self.data: dict[str, bytes | None] = {}
        self.kids: dict[str, set[str]] = {}

    @classmethod
    def of(cls, nodes: Mapping[str, bytes | None]) -> ZkCache:
        return cls.adopt(dict(nodes))

    @classmethod
    def adopt(cls, nodes: dict[str, bytes | None]) -> ZkCache:
        """A cache holding `nodes` itself (the caller gives it away): at 1M partitions a copy was
        2M entries more at the first sync's peak."""
        cache = cls()
        cache.data = nodes
        kids = cache.kids
        parent = P.parent
        for path in nodes:
            siblings = kids.get(parent(path))
            if siblings is None:
                kids[parent(path)] = {path}
            else:
                siblings.add(path)
        return cache

    def __contains__(self, path: object) -> bool:
        return path in self.data

    def __len__(self) -> int:
        return len(self.data)

    def get(self, path: str) -> bytes | None:
        return self.data.get(path)

    def put(self, path: str, data: bytes | None) -> None:
        if path not in self.data:
            self.kids.setdefault(P.parent(path), set()).add(path)
        self.data[path] = data

    def remove(self, path: str) -> None:
        if self.data.pop(path, _MISSING) is not _MISSING:
            siblings = self.kids.get(P.parent(path))
            if siblings is not None:
                siblings.discard(path)
            self.kids.pop(path, None)

    def subtree(self, root: str) -> Iterator[str]:
        """`root` (if cached) and every cached path below it."""
        if root in self.data:
            yield root
        for child in list(self.kids.get(root, ())):
            yield from self.subtree(child)

    def apply(self, ops: Iterable[ZkOp]) -> None:
        for op in ops:
            if op.kind == "delete":
                self.remove(op.path)
            elif op.kind in ("create", "set") and not op.sequential:
                self.put(op.path, op.data)


_MISSING = object()


def is_state_path(path: str) -> bool:
    """/brokers/topics/<t>/partitions/<p>/state: whose version Kafka's controller takes as the epoch."""
    return path.endswith("/state") and path.startswith(P.TOPICS + "/") and path.count("/") == 6


@dataclass(slots=True)
class ZkPicture:
    """What the first sync needs of a full read: the data at the owned and structural paths, and each
    partition state's version. At 1M partitions the read's 2M ZNodes were 1.1 GB; this keeps their
    paths and bytes (~0.5 GB) and lets the ZNodes go before the copy's commit replays the log."""

    actual: dict[str, bytes | None]
    versions: dict[str, int]

    @classmethod
    def of(cls, tree: ZkTree, take: bool = False) -> ZkPicture:
        """The picture of `tree`; `take`: the caller gives the tree away, emptied here."""
        actual: dict[str, bytes | None] = {}
        versions: dict[str, int] = {}
        for path, node in tree.nodes.items():
            if owned(path) or structural(path):
                actual[path] = node.data
                if is_state_path(path):
                    versions[path] = node.version
        if take:
            tree.nodes.clear()
            tree.children.clear()
        return cls(actual, versions)


def delete_order(path: str) -> tuple[int, int]:
    # Children before parents; a topic's config before the topic itself (Kafka's deleteTopic order).
    return (-path.count("/"), 1 if path.startswith(P.TOPICS + "/") and path.count("/") == 3 else 0)


def _topic_id_of(path: str, data: bytes | None) -> str | None:
    try:
        return codec.decode_topic(path, data).topic_id
    except BadInputError:
        return None


def recreated_topics(want: Mapping[str, bytes | None], cache: ZkCache) -> list[str]:
    """Topic znodes in `want` whose topic id differs from the one ZooKeeper holds under that name.

    Such a topic was deleted and created again under the same name (between two syncs, or while
    ZooKeeper was away): its znodes are not the old topic's to update but a new topic's to create.
    Kafka's migration writer deletes the old topic's znodes and creates the new one's, so every
    version starts at 0 again and a state znode's version can follow the new PartitionEpoch
    (DESIGN.md invariant 9); updated in place, the versions would stay ahead of the epochs for good.
    """
    out: list[str] = []
    for path, data in want.items():
        if data is None or path not in cache or _kind(path) != "topic":
            continue
        old = cache.get(path)
        if old == data or not old:
            continue
        new_id = _topic_id_of(path, data)
        if new_id is not None and _topic_id_of(path, old) != new_id:
            out.append(path)
    return out


def plan(want: Mapping[str, bytes | None], cache: ZkCache) -> tuple[list[ZkOp], list[tuple[str, str]]]:
    """Ops that make ZooKeeper hold `want` (None: must not exist), and (path, create|update|delete).

    Deletes come first, children before parents; then creates and sets in `want`'s order (parents
    first), with any missing container above a created znode created just before it. A topic whose
    id changed under its name (`recreated_topics`) has every cached znode of it deleted and created
    afresh, in the same ops: ZooKeeper applies a multi in order, so no reader sees it missing.
    """
    changes: list[tuple[str, str]] = []
    deletes = sorted((p for p, d in want.items() if d is None and p in cache), key=delete_order)
    gone = set(deletes)
    for root in recreated_topics(want, cache):
        old = sorted((p for p in cache.subtree(root) if p not in gone), key=delete_order)
        deletes.extend(old)
        gone.update(old)
    ops = [ZkOp.delete(p) for p in deletes]
    changes.extend((p, "delete") for p in deletes)
    write_ops(want.items(), cache, gone, set(), ops, changes)
    return ops, changes


def write_ops(
    want: Iterable[tuple[str, bytes | None]],
    cache: ZkCache,
    gone: Container[str],
    created: set[str],
    ops: list[ZkOp],
    changes: list[tuple[str, str]],
) -> None:
    """`plan`'s creates and sets for `want` (in its order) after the deletes of `gone`, appended to
    `ops` and `changes`; `created` (added to): containers created by earlier calls of one plan."""
    cached = cache.data  # the dict itself: a method call per znode was a tenth of the loop
    for path, data in want:
        if data is None:
            continue
        if path in cached and path not in gone:
            if structural(path):
                continue
            old = cached[path]
            if old != data and not same(path, old, data):
                ops.append(ZkOp.set(path, data))
                changes.append((path, "update"))
            continue
        missing = []
        parent = P.parent(path)
        while parent != "/" and (parent not in cached or parent in gone) and parent not in created:
            missing.append(parent)
            parent = P.parent(parent)
        for p in reversed(missing):
            ops.append(ZkOp.create(p))
            created.add(p)
            changes.append((p, "create"))
        ops.append(ZkOp.create(path, data))
        created.add(path)
        changes.append((path, "create"))


# --------------------------------------------------------------------------------------------------
# Notifications and names
# --------------------------------------------------------------------------------------------------
def notification_for(path: str) -> ZkOp | None:
    """The change notification ZK-mode brokers need to pick up a change at `path`, if any.

    Configs: `/config/changes/config_change_` with the entity path; ACLs: the literal or extended ACL
    change node; delegation tokens: `/delegation_token/token_changes/token_change_`.
    """
    if path.startswith(P.CONFIG + "/"):
        parts = path.split("/")
        if len(parts) == 4 or (len(parts) == 6 and parts[2] == P.CONFIG_TYPE_USERS and parts[4] == "clients"):
            if parts[2] in _CONFIG_ENTITY_TYPES:
                entity = path[len(P.CONFIG) + 1 :]
                return ZkOp.create(
                    P.CONFIG_CHANGE_PREFIX, admin_codec.encode_config_change(entity), sequential=True
                )
        return None
    if path.startswith(P.TOKENS + "/"):
        token_id = path[len(P.TOKENS) + 1 :]
        return ZkOp.create(
            P.TOKEN_CHANGE_PREFIX, credential_codec.encode_token_change(token_id), sequential=True
        )
    resource = acl_resource_of(path)
    if resource is not None:
        pattern, rtype, name = resource
        root = P.acl_change_store(pattern)
        data = acl_codec.encode_acl_change(acl_codec.ResourcePattern(rtype, name, pattern))
        return ZkOp.create(f"{root}/{P.ACL_CHANGE_PREFIX}", data, sequential=True)
    return None


def _entity_name(znode: str) -> str:
    if znode == P.DEFAULT_ENTITY:
        return "<default>"
    try:
        return P.desanitize(znode)
    except ValueError:
        return znode


def describe(path: str) -> tuple[str, str]:
    """(entity root path, what an operator calls it) for a znode; never includes znode data."""
    parts = path.split("/")
    if path.startswith(P.TOPICS + "/"):
        topic = parts[3]
        if len(parts) >= 6:
            return "/".join(parts[:6]), f"partition {topic}-{parts[5]}"
        return P.topic_path(topic), f"topic {topic}"
    if path.startswith(P.CONFIG + "/") and len(parts) >= 4:
        ctype, name = parts[2], parts[3]
        root = "/".join(parts[:4])
        if ctype == P.CONFIG_TYPE_TOPICS:
            return root, f"configs of topic {name}"
        if ctype == P.CONFIG_TYPE_BROKERS:
            return root, "default broker configs" if name == P.DEFAULT_ENTITY else f"configs of broker {name}"
        if ctype == P.CONFIG_TYPE_USERS:
            user = _entity_name(name)
            if len(parts) >= 6 and parts[4] == "clients":
                return "/".join(parts[:6]), f"client quotas of user={user} client-id={_entity_name(parts[5])}"
            if len(parts) == 5:
                return "/".join(parts[:5]), f"client quotas of user={user}"
            return root, f"quotas and SCRAM credentials of user {user}"
        if ctype == P.CONFIG_TYPE_CLIENTS:
            return root, f"client quotas of client-id={_entity_name(name)}"
        if ctype == P.CONFIG_TYPE_IPS:
            return root, f"client quotas of ip={_entity_name(name)}"
    resource = acl_resource_of(path)
    if resource is not None:
        pattern, rtype, name = resource
        return path, f"ACLs of {rtype} {name!r} ({pattern})"
    if path.startswith(P.TOKENS + "/"):
        return path, f"delegation token {parts[-1]}"
    if path == P.LATEST_PRODUCER_ID_BLOCK:
        return path, "producer id block"
    if path.startswith(P.DELETE_TOPICS + "/"):
        return path, f"pending deletion of topic {parts[-1]}"
    return path, f"znode {path}"


@dataclass(frozen=True, slots=True)
class Repair:
    """One drift a reconcile repaired; names the entity, never its data (secrets stay out)."""

    path: str
    kind: str  # "create" | "update" | "delete"
    entity: str
    znodes: int = 1

    def __str__(self) -> str:
        extra = f" ({self.znodes} znodes)" if self.znodes > 1 else ""
        return f"{self.kind} {self.entity}: {self.path}{extra}"


def repairs_of(changes: Iterable[tuple[str, str]]) -> list[Repair]:
    """Changes grouped per entity: a whole topic created or deleted is one repair, not one per znode."""
    changes = list(changes)
    topic_roots = {(p, k) for p, k in changes if p.startswith(P.TOPICS + "/") and p.count("/") == 3}
    groups: dict[tuple[str, str], list[str]] = {}
    names: dict[tuple[str, str], str] = {}
    for path, kind in changes:
        root, name = describe(path)
        topic_root = None
        if path.startswith(P.TOPICS + "/"):
            topic_root = P.topic_path(path.split("/")[3])
        elif path.startswith(P.config_type_path(P.CONFIG_TYPE_TOPICS) + "/") and path.count("/") == 3:
            topic_root = P.topic_path(path.rsplit("/", 1)[1])  # created and deleted with its topic
        if topic_root is not None and (topic_root, kind) in topic_roots:
            root, name = describe(topic_root)
        key = (root, kind)
        groups.setdefault(key, []).append(path)
        names[key] = name
    return [Repair(root, kind, names[(root, kind)], len(paths)) for (root, kind), paths in groups.items()]
