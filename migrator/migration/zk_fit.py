"""Whether a change's ZooKeeper writes fit, decided before its records are appended.

The syncer turns records into znode writes by the entities they touch (`entity_key`) and those
entities' znodes in the image after the records (`zk.layout`). A change whose write ZooKeeper can
never take (one znode, alone in a multi, over jute.maxbuffer) must be refused before it is in the
log: appended, it would hold the write-behind lag forever (issue 18). So the same conversion runs
here on the pending records against the current image, and the fenced writer's own encoding judges
each write.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from migrator.kraft.image import ACL_RESOURCE_TYPES, CONFIG_RESOURCE_TYPES, PATTERN_TYPES, ImageBuilder
from migrator.kraft.records import MetadataRecord, OpaqueRecord, kafka_to_uuid, uuid_to_kafka
from migrator.model import ClusterImage
from migrator.zk import paths as P
from migrator.zk.migration_client import FencedZkWriter, ZkOp, layout

__all__ = ["Key", "change_writes", "entity_key", "entity_znodes", "refuse_oversized_change"]

Key = tuple[object, ...]
_CHANGE_ASSIGNMENT = ("Replicas", "AddingReplicas", "RemovingReplicas")


def entity_key(
    rec: MetadataRecord, topic_ids: dict[uuid.UUID, str] | _TopicIds, image: ClusterImage
) -> Key | None:
    """The ZooKeeper entity a record touches, looked up before the record is applied to `image`.

    `topic_ids` (topic id → name) is kept up to date as TopicRecord/RemoveTopicRecord pass.
    """
    api = rec.api_key
    f = rec.fields
    if api == 5:  # PartitionChangeRecord: the hot path
        name = topic_ids.get(f["TopicId"])
        if name is None:
            return None
        for k in _CHANGE_ASSIGNMENT:
            if f.get(k) is not None:
                return ("topic", name)
        return ("state", name, f["PartitionId"])
    if api == 3:
        name = topic_ids.get(f["TopicId"])
        return None if name is None else ("topic", name)
    if api == 2:
        topic_ids[f["TopicId"]] = f["Name"]
        return ("topic", f["Name"])
    if api == 9:
        name = topic_ids.pop(f["TopicId"], None)
        return None if name is None else ("topic", name)
    if api == 4:
        rtype = CONFIG_RESOURCE_TYPES.get(f["ResourceType"])
        if rtype in ("TOPIC", "BROKER"):
            return ("config", rtype, f["ResourceName"])
        return None  # BROKER_LOGGER, CLIENT_METRICS, GROUP: no ZooKeeper form (Kafka skips them too)
    if api == 14:
        entity = {e["EntityType"]: e["EntityName"] for e in f["Entity"]}
        try:
            path = P.quota_entity_path(entity)
        except ValueError:
            return None
        return ("client", "/".join(path.split("/")[:4]))
    if api in (11, 22):
        return ("client", P.config_entity_path(P.CONFIG_TYPE_USERS, P.sanitize(f["Name"])))
    if api == 18:
        pattern = PATTERN_TYPES.get(f["PatternType"])
        rtype = ACL_RESOURCE_TYPES.get(f["ResourceType"])
        if pattern not in P.ACL_STORES or rtype not in P.ACL_RESOURCE_TYPES:
            return None
        return ("acl", pattern, rtype, f["ResourceName"])
    if api == 19:
        acl_id = uuid_to_kafka(f["Id"])
        for acl in image.acls:
            if acl.acl_id == acl_id:
                if acl.pattern_type not in P.ACL_STORES:
                    return None
                return ("acl", acl.pattern_type, acl.resource_type, acl.resource_name)
        return None
    if api == 15:
        return ("pid",)
    if api in (10, 26):
        return ("token", f["TokenId"])
    return None


def entity_znodes(image: ClusterImage, key: Key, state_epoch: int) -> dict[str, bytes | None]:
    """The znodes of one touched entity in `image` (None: the znode is absent), as the syncer writes them."""
    kind = key[0]
    if kind == "state":
        topic = image.topics.get(key[1])  # type: ignore[call-overload]
        part = None if topic is None else topic.partitions.get(key[2])
        found = None if part is None else layout.partition_state_znode(key[1], part, state_epoch)  # type: ignore[arg-type]
        return {} if found is None else {found[0]: found[1]}
    if kind == "topic":
        return dict(layout.topic_znodes(image, key[1], state_epoch))  # type: ignore[arg-type]
    if kind == "config":
        found_config = layout.config_znode(image, key[1], key[2])  # type: ignore[arg-type]
        return {} if found_config is None else {found_config[0]: found_config[1]}
    if kind == "client":
        return dict(layout.client_config_znodes(image, key[1]))  # type: ignore[arg-type]
    if kind == "acl":
        path, data = layout.acl_znode(image, key[1], key[2], key[3])  # type: ignore[arg-type]
        return {path: data}
    if kind == "token":
        path, data = layout.token_znode(image, key[1])  # type: ignore[arg-type]
        return {path: data}
    if kind == "pid":
        path, data = layout.producer_id_block_znode(image)
        return {path: data}
    return {}


class _TopicIds:
    """Topic id -> name for `entity_key`: `base` (the image's, never written) under this change's own
    creations and removals, so a change does not decode every topic's id of a large cluster."""

    __slots__ = ("base", "added", "removed")

    def __init__(self, base: Mapping[uuid.UUID, str]) -> None:
        self.base = base
        self.added: dict[uuid.UUID, str] = {}
        self.removed: set[uuid.UUID] = set()

    def get(self, tid: uuid.UUID, default: str | None = None) -> str | None:
        name = self.added.get(tid)
        if name is not None:
            return name
        return default if tid in self.removed else self.base.get(tid, default)

    def __setitem__(self, tid: uuid.UUID, name: str) -> None:
        self.added[tid] = name
        self.removed.discard(tid)

    def pop(self, tid: uuid.UUID, default: str | None = None) -> str | None:
        name = self.get(tid, default)
        self.added.pop(tid, None)
        self.removed.add(tid)
        return name


#: Records whose entities are topics (and their TOPIC configs) only: TopicRecord, PartitionRecord,
#: PartitionChangeRecord, RemoveTopicRecord and the transaction markers; ConfigRecord when its
#: resource is a topic (checked apart).
_TOPIC_ONLY = frozenset((2, 3, 5, 9, 23, 24, 25))
_TOPIC_RESOURCE = next(k for k, v in CONFIG_RESOURCE_TYPES.items() if v == "TOPIC")


def _topics_only(records: Sequence[MetadataRecord | OpaqueRecord]) -> bool:
    for rec in records:
        if not isinstance(rec, MetadataRecord):
            return False
        api = rec.api_key
        if api in _TOPIC_ONLY:
            continue
        if api == 4 and rec.fields["ResourceType"] == _TOPIC_RESOURCE:
            continue
        return False
    return True


def change_writes(
    image: ClusterImage,
    records: Sequence[MetadataRecord | OpaqueRecord],
    state_epoch: int,
    topic_ids: Mapping[uuid.UUID, str] | None = None,
) -> list[ZkOp]:
    """The creates and sets that bring ZooKeeper (matching `image`) to `image` + `records`.

    Only the touched topics are copied for the replay, so a change to a 60,000-partition cluster
    does not deep-copy the whole image; a change of topics only (CreateTopics, partitions, topic
    configs, deletions) copies nothing else either. `topic_ids` is the image's topic id -> name index
    when the caller keeps one (`ImageBuilder.topic_names`); without it every topic's id is decoded.
    """
    if topic_ids is None:
        topic_ids = {kafka_to_uuid(t.topic_id): n for n, t in image.topics.items() if t.topic_id is not None}
    ids = _TopicIds(topic_ids)
    keys: dict[Key, None] = {}
    for rec in records:
        if isinstance(rec, MetadataRecord):
            key = entity_key(rec, ids, image)
            if key is not None:
                keys[key] = None
    # A topic's config znode exists as long as the topic does: its topic is copied too.
    names = {k[1] for k in keys if k[0] in ("topic", "state")}
    names |= {k[2] for k in keys if k[:2] == ("config", "TOPIC")}
    topics = {n: image.topics[n] for n in names if n in image.topics}
    if _topics_only(records):
        # What these records replay into and what topic_znodes reads: the topics and their configs.
        configs = {("TOPIC", n): image.configs[("TOPIC", n)] for n in names if ("TOPIC", n) in image.configs}
        before = ClusterImage().model_copy(
            update={"topics": topics, "configs": configs}
        )  # not model_construct: see layout._image_of
    else:
        before = image.model_copy(update={"topics": topics})
    builder = ImageBuilder(before)
    for i, rec in enumerate(records):
        builder.replay(i, rec)
    builder.finish()
    after = builder.image
    ops: list[ZkOp] = []
    for key in keys:
        old: Mapping[str, bytes | None] = entity_znodes(before, key, state_epoch)
        for path, data in entity_znodes(after, key, state_epoch).items():
            if data is None or old.get(path) == data:
                continue
            ops.append(ZkOp.set(path, data) if old.get(path) is not None else ZkOp.create(path, data))
    return ops


def refuse_oversized_change(
    writer: FencedZkWriter,
    image: ClusterImage,
    records: Sequence[MetadataRecord | OpaqueRecord],
    state_epoch: int,
    topic_ids: Mapping[uuid.UUID, str] | None = None,
) -> None:
    """BadInputError (exit 2) naming the znode when a write of the change cannot reach ZooKeeper."""
    writer.refuse_oversized(
        change_writes(image, records, state_epoch, topic_ids), "; refused, nothing appended"
    )
