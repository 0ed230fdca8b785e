"""Kafka's ZooKeeper layout as a whole: a raw `ZkTree` → `ClusterImage`, and an image → its znodes.

`image_from_tree` reads what `ZkMigrationClient` reads (reference §2) plus what the checks and the
audit need (brokers, pending deletions, reassignments, /feature, the coordination znodes).
`znodes_from_image` writes what a ZK-mode cluster holding that image has, byte for byte as Kafka
writes it, so ZooKeeper written by zk2kraft is what ZK-mode brokers read. Both go through `codec`
for every znode's bytes; this module only knows where things live and how they combine.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from migrator.bulk import without_gc
from migrator.errors import BadInputError
from migrator.model import (
    Acl,
    ClientQuota,
    ClusterImage,
    ConfigEntity,
    Partition,
    ScramCredential,
    Topic,
    ZkControlState,
)
from migrator.zk import acl_codec, admin_codec, codec, config_codec, credential_codec
from migrator.zk import paths as P
from migrator.zk.tree import ZkTree
from migrator.zk.znode_json import ZnodeError

__all__ = [
    "LayoutProblem",
    "LayoutResult",
    "acl_znode",
    "broker_znodes",
    "client_config_znodes",
    "config_znode",
    "image_from_tree",
    "partition_state_epoch",
    "partition_state_znode",
    "producer_id_block_znode",
    "token_znode",
    "topic_znodes",
    "with_control_from",
    "znode_chunks",
    "znodes_from_image",
]

T = TypeVar("T")
_INT_NAME = re.compile(r"-?[0-9]{1,10}")
_I32 = range(-(2**31), 2**31)
_new = object.__new__
_set = object.__setattr__
_PARTITION_FIELDS = frozenset(Partition.model_fields)
#: every field is set: one set shared by all decoded partitions (pydantic's add on assignment is then
#: a no-op; a set per partition was 728 of its 1,600 bytes)
_ALL_FIELDS_SET = set(_PARTITION_FIELDS)


def _partition(values: dict[str, Any]) -> Partition:
    """Partition.model_construct without its per-call overhead, which is most of a 200k-partition
    decode: `values` has every field, each already checked by the codec."""
    p = _new(Partition)
    _set(p, "__dict__", values)
    _set(p, "__pydantic_fields_set__", _ALL_FIELDS_SET)
    _set(p, "__pydantic_extra__", None)
    _set(p, "__pydantic_private__", None)
    return p


@dataclass(frozen=True, slots=True)
class LayoutProblem:
    """One znode that Kafka could not read or zk2kraft will not guess at; `check` reports each."""

    path: str
    message: str


@dataclass(slots=True)
class LayoutResult:
    image: ClusterImage
    control: ZkControlState
    problems: list[LayoutProblem] = field(default_factory=list)


# =====================================================================================================
# ZooKeeper → model
# =====================================================================================================
def image_from_tree(tree: ZkTree, strict: bool = True) -> LayoutResult:
    """Decode Kafka's znodes in `tree`.

    With `strict`, the first bad znode raises its BadInputError (path: reason). Without, each bad
    znode becomes a LayoutProblem and is skipped; a bad partition state counts as a missing one.
    """
    # A few objects per partition, no reference cycles: the collector cost a third (migrator.bulk)
    with without_gc():
        return _Reader(tree, strict).read()


class _Reader:
    def __init__(self, tree: ZkTree, strict: bool) -> None:
        self.tree = tree
        self.nodes = tree.nodes
        self.strict = strict
        self.problems: list[LayoutProblem] = []
        self.image = ClusterImage()
        self.control = ZkControlState(zxid=tree.max_zxid)

    def read(self) -> LayoutResult:
        self._cluster_id()
        self._brokers()
        self._topics()
        self._entity_configs()
        self._quotas_and_scram()
        self._producer_id_block()
        self._acls()
        self._delegation_tokens()
        self._feature()
        self._admin()
        self._control()
        return LayoutResult(self.image, self.control, self.problems)

    # --- plumbing ------------------------------------------------------------------------------------
    def _report(self, error: ZnodeError) -> None:
        if self.strict:
            raise error
        self.problems.append(LayoutProblem(error.path, error.reason))

    def _problem(self, path: str, reason: str) -> None:
        self._report(ZnodeError(path, reason))

    def _try(self, fn: Callable[..., T], *args: Any) -> T | None:
        try:
            return fn(*args)
        except ZnodeError as e:
            self._report(e)
            return None

    def _children(self, path: str) -> list[str]:
        return sorted(self.tree.child_names(path))

    def _entity_name(self, path: str, znode: str) -> str | None | bool:
        """Quota entity name of a znode: None for `<default>`, False (after reporting) if malformed."""
        if znode == P.DEFAULT_ENTITY:
            return None
        try:
            return P.desanitize(znode)
        except ValueError:
            self._problem(path, "entity name has a bad %-escape")
            return False

    # --- sections ------------------------------------------------------------------------------------
    def _cluster_id(self) -> None:
        node = self.nodes.get(P.CLUSTER_ID)
        if node is not None:
            self.image.cluster_id = self._try(codec.decode_cluster_id, P.CLUSTER_ID, node.data)

    def _brokers(self) -> None:
        names = self.tree.child_names(P.BROKER_IDS)
        for name in sorted(names, key=lambda n: (len(n), n)):
            path = f"{P.BROKER_IDS}/{name}"
            if not _INT_NAME.fullmatch(name) or int(name) not in _I32:
                self._problem(path, "broker id is not an integer")
                continue
            node = self.nodes.get(path)
            if node is None:
                continue
            broker = self._try(codec.decode_broker, path, node.data, int(name))
            if broker is not None:
                broker.zk_epoch = node.czxid
                self.image.brokers[broker.id] = broker

    def _topics(self) -> None:
        """The hot loop: 200k partitions are 200k state znodes, so no per-field validation here
        beyond the codec's own checks, and partitions are built with `model_construct`."""
        nodes_get = self.nodes.get
        decode_state = codec.decode_partition_state
        topics = self.image.topics
        for name in self._children(P.TOPICS):
            tpath = f"{P.TOPICS}/{name}"
            node = nodes_get(tpath)
            if node is None:
                continue
            assignment = self._try(codec.decode_topic, tpath, node.data)
            if assignment is None:
                continue
            adding_of = assignment.adding_replicas
            removing_of = assignment.removing_replicas
            partitions: dict[int, Partition] = {}
            for pid, replicas in assignment.partitions.items():
                spath = f"{tpath}/partitions/{pid}/state"
                snode = nodes_get(spath)
                state = None
                if snode is not None:
                    try:
                        state = decode_state(spath, snode.data)
                    except ZnodeError as e:
                        self._report(e)
                adding = adding_of.get(pid)  # lists fresh from this topic's JSON: nobody else holds them
                if adding is None:
                    adding = []
                removing = removing_of.get(pid)
                if removing is None:
                    removing = []
                if state is not None:
                    partitions[pid] = _partition(
                        {
                            "partition": pid,
                            "replicas": replicas,
                            "isr": state.isr,
                            "leader": state.leader,
                            "leader_epoch": state.leader_epoch,
                            "partition_epoch": snode.version,  # type: ignore[union-attr]
                            "leader_recovery_state": state.leader_recovery_state,
                            "adding_replicas": adding,
                            "removing_replicas": removing,
                            "controller_epoch": state.controller_epoch,
                            "has_state": True,
                        }
                    )
                elif not replicas:
                    self._problem(tpath, f"partition {pid} has no replicas and no state")
                else:
                    # ZkTopicMigrationClient: no state znode → ISR = replicas, leader = first replica.
                    partitions[pid] = _partition(
                        {
                            "partition": pid,
                            "replicas": replicas,
                            "isr": list(replicas),
                            "leader": replicas[0],
                            "leader_epoch": 0,
                            "partition_epoch": 0,
                            "leader_recovery_state": 0,
                            "adding_replicas": adding,
                            "removing_replicas": removing,
                            "controller_epoch": None,
                            "has_state": False,
                        }
                    )
            topics[name] = Topic.model_construct(
                name=name,
                topic_id=assignment.topic_id,
                partitions=partitions,
                json_version=assignment.version,
            )

    def _entity_configs(self) -> None:
        for config_type, resource_type in (
            (P.CONFIG_TYPE_TOPICS, "TOPIC"),
            (P.CONFIG_TYPE_BROKERS, "BROKER"),
        ):
            type_path = P.config_type_path(config_type)
            for znode in self._children(type_path):
                path = f"{type_path}/{znode}"
                node = self.nodes.get(path)
                if node is None:
                    continue
                configs = self._try(config_codec.decode_config, path, node.data)
                if not configs:  # every topic has an empty config znode; it carries nothing
                    continue
                name = "" if resource_type == "BROKER" and znode == P.DEFAULT_ENTITY else znode
                self.image.configs[(resource_type, name)] = ConfigEntity(
                    resource_type=resource_type, name=name, configs=configs
                )

    def _quotas_and_scram(self) -> None:
        """ZkConfigMigrationClient.iterateClientQuotas: users, clients, users/clients, then ips."""
        user_clients: list[tuple[str, dict[str, str | None]]] = []
        users_path = P.config_type_path(P.CONFIG_TYPE_USERS)
        for znode in self._children(users_path):
            path = f"{users_path}/{znode}"
            user = self._entity_name(path, znode)
            if user is False:
                continue
            self._quota_entity(path, {"user": user}, scram_user=P.desanitize(znode))  # type: ignore[dict-item]
            clients_path = f"{path}/clients"
            for cznode in self._children(clients_path):
                cpath = f"{clients_path}/{cznode}"
                client = self._entity_name(cpath, cznode)
                if client is not False:
                    user_clients.append((cpath, {"user": user, "client-id": client}))  # type: ignore[dict-item]
        clients_path = P.config_type_path(P.CONFIG_TYPE_CLIENTS)
        for znode in self._children(clients_path):
            path = f"{clients_path}/{znode}"
            client = self._entity_name(path, znode)
            if client is not False:
                self._quota_entity(path, {"client-id": client})  # type: ignore[dict-item]
        for path, entity in user_clients:
            self._quota_entity(path, entity)
        ips_path = P.config_type_path(P.CONFIG_TYPE_IPS)
        for znode in self._children(ips_path):
            path = f"{ips_path}/{znode}"
            ip = self._entity_name(path, znode)
            if ip is not False:
                self._quota_entity(path, {"ip": ip})  # type: ignore[dict-item]

    def _quota_entity(self, path: str, entity: dict[str, str | None], scram_user: str | None = None) -> None:
        node = self.nodes.get(path)
        if node is None:
            return
        configs = self._try(config_codec.decode_config, path, node.data)
        if not configs:
            return
        configs = dict(configs)
        credentials: list[ScramCredential] = []
        if scram_user is not None:
            for mechanism in credential_codec.SCRAM_MECHANISMS:
                if mechanism in configs:
                    value = configs.pop(mechanism)
                    cred = self._try(credential_codec.decode_scram, path, scram_user, mechanism, value)
                    if cred is None:
                        return
                    credentials.append(cred)
        values: dict[str, float] = {}
        for key, value in configs.items():
            number = self._try(config_codec.decode_quota_value, path, key, value)
            if number is None:
                return
            values[key] = number
        for cred in credentials:
            self.image.scram_credentials[(cred.user, cred.mechanism)] = cred
        if values:
            self.image.client_quotas.append(ClientQuota(entity=entity, values=values))

    def _producer_id_block(self) -> None:
        node = self.nodes.get(P.LATEST_PRODUCER_ID_BLOCK)
        if node is None or node.data is None:  # createTopLevelPaths makes it with null data
            return
        self.image.producer_id_block = self._try(codec.decode_producer_id_block, node.path, node.data)

    def _acls(self) -> None:
        for pattern_type, store in P.ACL_STORES.items():
            for segment in self._children(store):
                type_path = f"{store}/{segment}"
                resource_type = P.resource_type_from_segment(segment)
                if resource_type is None:
                    self._problem(type_path, f"unknown ACL resource type {segment!r}")
                    continue
                for name in self._children(type_path):
                    path = f"{type_path}/{name}"
                    node = self.nodes.get(path)
                    if node is None:
                        continue
                    acls = self._try(
                        acl_codec.decode_acls, path, node.data, resource_type, name, pattern_type
                    )
                    if acls:
                        self.image.acls.extend(acls)

    def _delegation_tokens(self) -> None:
        for token_id in self._children(P.TOKENS):
            path = P.token_path(token_id)
            node = self.nodes.get(path)
            if node is None:
                continue
            token = self._try(credential_codec.decode_delegation_token, path, node.data)
            if token is not None:
                self.image.delegation_tokens[token.token_id] = token

    def _feature(self) -> None:
        node = self.nodes.get(P.FEATURE)
        if node is not None:
            self.image.features = self._try(codec.decode_feature, P.FEATURE, node.data)

    def _admin(self) -> None:
        self.image.pending_deletions = self._children(P.DELETE_TOPICS)
        node = self.nodes.get(P.REASSIGN_PARTITIONS)
        if node is not None and node.data is not None:
            self.image.reassignments = self._try(admin_codec.decode_reassignments, node.path, node.data) or []

    def _control(self) -> None:
        control = self.control
        node = self.nodes.get(P.CONTROLLER)
        if node is not None:
            controller = self._try(
                codec.decode_controller, P.CONTROLLER, node.data, node.ephemeral_owner != 0
            )
            if controller is not None:
                control.controller = controller
                control.controller_zk_version = node.version
        node = self.nodes.get(P.CONTROLLER_EPOCH)
        if node is not None:
            epoch = self._try(codec.decode_controller_epoch, P.CONTROLLER_EPOCH, node.data)
            if epoch is not None:
                control.controller_epoch = epoch
                control.controller_epoch_zk_version = node.version
        node = self.nodes.get(P.MIGRATION)
        if node is not None:
            control.migration = self._try(codec.decode_migration, P.MIGRATION, node.data, node.version)


def with_control_from(layout: LayoutResult, tree: ZkTree, strict: bool = True) -> LayoutResult:
    """`layout`'s image with the control state (/controller, /controller_epoch, /migration, the zxid)
    decoded again from `tree`: for a tree in which nothing else changed since `layout` was decoded."""
    reader = _Reader(tree, strict)
    reader.image = layout.image
    reader._control()
    return LayoutResult(layout.image, reader.control, [*layout.problems, *reader.problems])


# =====================================================================================================
# model → ZooKeeper
# =====================================================================================================
class _Znodes:
    """Znodes in creation order: a missing parent is added (empty) just before its first child.

    Cut into chunks (`chunk`): the paths outside the topics' subtrees stay known (a few per topic),
    so that a later chunk neither adds their parents again nor repeats an empty container."""

    def __init__(self) -> None:
        self.out: dict[str, bytes] = {}
        self.before: set[str] = set()  # what `put` was given, the topics' subtrees excepted

    def put(self, path: str, data: bytes = b"") -> None:
        if not data and path in self.before and path not in self.out:
            return  # an empty container an earlier chunk holds already
        parent = P.parent(path)
        if parent != "/" and parent not in self.out and parent not in self.before:
            self.put(parent)
        self.out[path] = data
        if not path.startswith(_BELOW_TOPICS):
            self.before.add(path)

    def chunk(self) -> dict[str, bytes]:
        out, self.out = self.out, {}
        return out


_BELOW_TOPICS = P.TOPICS + "/"


def znodes_from_image(image: ClusterImage, control: ZkControlState | None = None) -> dict[str, bytes]:
    """Every persistent znode a ZK-mode cluster holding `image` has, parents first.

    Kafka creates parents with null data; these get empty data, which every Kafka reader takes the
    same way. /latest_producer_id_block is left out when there is no block, because Kafka would fail
    on an empty one and recreates it (null) at start-up. Partition states without their own
    controller epoch get the KRaft controller's epoch from `control` (what a KRaft controller
    writes), else its ZooKeeper controller epoch, else 0.
    """
    out: dict[str, bytes] = {}
    for _topic, chunk in znode_chunks(image, control):
        out.update(chunk)
    return out


def znode_chunks(
    image: ClusterImage, control: ZkControlState | None = None
) -> Iterator[tuple[str | None, dict[str, bytes]]]:
    """`znodes_from_image` a topic at a time, in its order: (None, the znodes before the topics),
    (name, one topic's znodes: the topic, its config, its partitions and states) per topic, then
    (None, the rest). Merged they are `znodes_from_image`; the first sync's reconcile diffs them
    one by one instead of building all of them (2M znodes at 1M partitions) first."""
    z = _Znodes()
    for path in P.PERSISTENT_PATHS:
        if path == P.LATEST_PRODUCER_ID_BLOCK:
            if image.producer_id_block is not None:
                z.put(path, codec.encode_producer_id_block(image.producer_id_block))
        else:
            z.put(path)
    if image.cluster_id is not None:
        z.put(P.CLUSTER_ID, codec.encode_cluster_id(image.cluster_id))
    if image.features is not None:
        z.put(P.FEATURE, codec.encode_feature(image.features))
    state_epoch = _control_znodes(z, control)
    yield None, z.chunk()
    for topic in image.topics.values():
        _topic_znodes(z, image, topic, state_epoch)
        yield topic.name, z.chunk()
    _config_znodes(z, image)
    _acl_znodes(z, image.acls)
    if image.delegation_tokens:
        z.put(P.TOKEN_CHANGES)
        z.put(P.TOKENS)
        for token in image.delegation_tokens.values():
            z.put(P.token_path(token.token_id), credential_codec.encode_delegation_token(token))
    for topic in image.pending_deletions:
        z.put(P.delete_topic_path(topic))
    if image.reassignments:
        z.put(P.REASSIGN_PARTITIONS, admin_codec.encode_reassignments(image.reassignments))
    yield None, z.chunk()


def broker_znodes(image: ClusterImage) -> dict[str, bytes]:
    """The ephemeral /brokers/ids/<id> registrations; only a live broker session may hold them."""
    return {P.broker_path(b.id): codec.encode_broker(b) for b in image.brokers.values()}


def _control_znodes(z: _Znodes, control: ZkControlState | None) -> int:
    if control is None:
        return 0
    if control.controller_epoch is not None:
        z.put(P.CONTROLLER_EPOCH, codec.encode_controller_epoch(control.controller_epoch))
    controller = control.controller
    if controller is not None and not controller.ephemeral:  # a ZK controller's is its session's
        z.put(P.CONTROLLER, codec.encode_controller(controller))
    if control.migration is not None:
        z.put(P.MIGRATION, codec.encode_migration(control.migration))
    if controller is not None and controller.kraft_controller_epoch >= 0:
        return controller.kraft_controller_epoch
    return control.controller_epoch if control.controller_epoch is not None else 0


def _topic_znodes(z: _Znodes, image: ClusterImage, topic: Topic, state_epoch: int) -> None:
    """KafkaZkClient topic creation: the topic, its config, `partitions`, each partition and state."""
    encode_state = codec.encode_partition_state
    out = z.out
    tpath = P.topic_path(topic.name)
    z.put(tpath, codec.encode_topic(topic))
    entity = image.configs.get(("TOPIC", topic.name))
    z.put(
        P.config_entity_path(P.CONFIG_TYPE_TOPICS, topic.name),
        config_codec.encode_config(entity.configs if entity else {}),
    )
    ppath = f"{tpath}/partitions"
    out[ppath] = b""
    for p in topic.partitions.values():
        out[f"{ppath}/{p.partition}"] = b""
        if p.has_state:
            epoch = p.controller_epoch if p.controller_epoch is not None else state_epoch
            out[f"{ppath}/{p.partition}/state"] = encode_state(
                p.leader, p.leader_epoch, p.isr, epoch, p.leader_recovery_state
            )


def _config_znodes(z: _Znodes, image: ClusterImage) -> None:
    for (resource_type, name), entity in image.configs.items():
        if resource_type == "TOPIC" and name not in image.topics:  # configs left by a deleted topic
            z.put(
                P.config_entity_path(P.CONFIG_TYPE_TOPICS, name), config_codec.encode_config(entity.configs)
            )
        elif resource_type == "BROKER":
            znode = P.DEFAULT_ENTITY if name == "" else name
            z.put(
                P.config_entity_path(P.CONFIG_TYPE_BROKERS, znode), config_codec.encode_config(entity.configs)
            )
        # Other resource types (client-metrics) have no ZooKeeper form; Kafka skips them too.
    # Quotas and SCRAM credentials of a user share its znode (ZkConfigMigrationClient.writeClientQuotas).
    by_path: dict[str, dict[str, str]] = {}
    for quota in image.client_quotas:
        try:
            path = P.quota_entity_path(quota.entity)
        except ValueError as e:
            raise BadInputError(f"client quota {quota.entity}: {e}") from None
        config = by_path.setdefault(path, {})
        for key, value in quota.values.items():
            config[key] = config_codec.encode_quota_value(value)
    for cred in image.scram_credentials.values():
        path = P.config_entity_path(P.CONFIG_TYPE_USERS, P.sanitize(cred.user))
        by_path.setdefault(path, {})[cred.mechanism] = credential_codec.encode_scram(cred)
    users = P.config_type_path(P.CONFIG_TYPE_USERS) + "/"

    def group(path: str) -> int:
        if path.startswith(users):
            return 2 if "/clients/" in path[len(users) :] else 0
        return 1 if path.startswith(P.config_type_path(P.CONFIG_TYPE_CLIENTS)) else 3

    for path in sorted((p for p in by_path if by_path[p]), key=group):
        z.put(path, config_codec.encode_config(by_path[path]))


def _acl_znodes(z: _Znodes, acls: list[Acl]) -> None:
    if not acls:
        return
    resources: dict[tuple[str, str, str], list[Acl]] = {}
    for acl in acls:
        if acl.pattern_type not in P.ACL_STORES or acl.resource_type not in P.ACL_RESOURCE_TYPES:
            raise BadInputError(
                f"ACL on {acl.resource_type} {acl.resource_name!r} ({acl.pattern_type}) has no ZooKeeper form"
            )
        if (
            acl.operation not in acl_codec.ACL_OPERATIONS
            or acl.permission_type not in acl_codec.ACL_PERMISSION_TYPES
        ):
            raise BadInputError(
                f"ACL on {acl.resource_type} {acl.resource_name!r}: unknown operation or permission "
                f"{acl.operation}/{acl.permission_type}"
            )
        resources.setdefault((acl.pattern_type, acl.resource_type, acl.resource_name), []).append(acl)
    # KafkaZkClient.createAclPaths: both stores with a directory per resource type, both change roots.
    for pattern_type in P.ACL_STORES:
        for resource_type in P.ACL_RESOURCE_TYPES:
            z.put(P.acl_type_path(pattern_type, resource_type))
    z.put(P.LITERAL_ACL_CHANGES)
    z.put(P.EXTENDED_ACL_CHANGES)
    for (pattern_type, resource_type, name), group in resources.items():
        z.put(P.acl_resource_path(pattern_type, resource_type, name), acl_codec.encode_acls(group))


# =====================================================================================================
# model → ZooKeeper, one entity at a time (added for the dual-write syncer, which diffs only what a
# record touched). Each function returns what `znodes_from_image` writes for that entity, through the
# same internals, restricted to the entity's own znodes (no shared parents).
# =====================================================================================================
def partition_state_epoch(control: ZkControlState | None) -> int:
    """The controller epoch `znodes_from_image` writes into partition states that carry none."""
    return _control_znodes(_Znodes(), control)


def partition_state_znode(topic: str, partition: Partition, state_epoch: int) -> tuple[str, bytes] | None:
    """`/brokers/topics/<t>/partitions/<p>/state`, or None when the partition has no state znode."""
    if not partition.has_state:
        return None
    epoch = partition.controller_epoch if partition.controller_epoch is not None else state_epoch
    data = codec.encode_partition_state(
        partition.leader, partition.leader_epoch, partition.isr, epoch, partition.leader_recovery_state
    )
    return P.partition_state_path(topic, partition.partition), data


def _image_of(**fields: Any) -> ClusterImage:
    """An image holding only `fields`, for the whole-image encoders below. Not `model_construct`:
    pydantic 2.14 inspects each default factory's signature there (~0.8 ms a call, per touched
    topic of every sync and admin change); a default image and a shallow update cost ~3 us."""
    return ClusterImage().model_copy(update=fields)


def topic_znodes(image: ClusterImage, name: str, state_epoch: int) -> dict[str, bytes]:
    """`/brokers/topics/<t>` and everything below it, and `/config/topics/<t>`, parents first.

    Empty when the image has neither the topic nor configs for it.
    """
    z = _Znodes()
    entity = image.configs.get(("TOPIC", name))
    configs = {("TOPIC", name): entity} if entity is not None else {}
    topic = image.topics.get(name)
    if topic is not None:
        _topic_znodes(z, _image_of(topics={name: topic}, configs=configs), topic, state_epoch)
    elif entity is not None:
        _config_znodes(z, _image_of(configs=configs))
    tpath = P.topic_path(name)
    cpath = P.config_entity_path(P.CONFIG_TYPE_TOPICS, name)
    return {p: d for p, d in z.out.items() if p == tpath or p == cpath or p.startswith(tpath + "/")}


def config_znode(image: ClusterImage, resource_type: str, name: str) -> tuple[str, bytes | None] | None:
    """The config znode of a TOPIC or BROKER entity and its data (None: no znode); None for other types.

    A topic's config znode exists (empty) as long as the topic does.
    """
    if resource_type == "TOPIC":
        path = P.config_entity_path(P.CONFIG_TYPE_TOPICS, name)
        return path, topic_znodes(image, name, 0).get(path)
    if resource_type == "BROKER":
        path = P.config_entity_path(P.CONFIG_TYPE_BROKERS, P.DEFAULT_ENTITY if name == "" else name)
        entity = image.configs.get(("BROKER", name))
        if entity is None:
            return path, None
        z = _Znodes()
        _config_znodes(z, _image_of(configs={("BROKER", name): entity}))
        return path, z.out.get(path)
    return None


def client_config_znodes(image: ClusterImage, root: str) -> dict[str, bytes]:
    """Quota and SCRAM znodes at and below `root`: `/config/users/<u>` (with its `clients/<c>`),
    `/config/clients/<c>` or `/config/ips/<ip>`, znode names sanitized as Kafka does."""
    below = root + "/"
    quotas = []
    for quota in image.client_quotas:
        try:
            path = P.quota_entity_path(quota.entity)
        except ValueError as e:
            raise BadInputError(f"client quota {quota.entity}: {e}") from None
        if path == root or path.startswith(below):
            quotas.append(quota)
    credentials = {
        key: cred
        for key, cred in image.scram_credentials.items()
        if P.config_entity_path(P.CONFIG_TYPE_USERS, P.sanitize(cred.user)) == root
    }
    z = _Znodes()
    _config_znodes(z, _image_of(client_quotas=quotas, scram_credentials=credentials))
    return {p: d for p, d in z.out.items() if p == root or p.startswith(below)}


def acl_znode(
    image: ClusterImage, pattern_type: str, resource_type: str, name: str
) -> tuple[str, bytes | None]:
    """The ACL znode of one resource pattern and its data (None when the resource has no ACLs)."""
    path = P.acl_resource_path(pattern_type, resource_type, name)
    acls = [
        a
        for a in image.acls
        if a.pattern_type == pattern_type and a.resource_type == resource_type and a.resource_name == name
    ]
    z = _Znodes()
    _acl_znodes(z, acls)
    return path, z.out.get(path)


def token_znode(image: ClusterImage, token_id: str) -> tuple[str, bytes | None]:
    token = image.delegation_tokens.get(token_id)
    return P.token_path(token_id), None if token is None else credential_codec.encode_delegation_token(token)


def producer_id_block_znode(image: ClusterImage) -> tuple[str, bytes | None]:
    block = image.producer_id_block
    return P.LATEST_PRODUCER_ID_BLOCK, None if block is None else codec.encode_producer_id_block(block)
