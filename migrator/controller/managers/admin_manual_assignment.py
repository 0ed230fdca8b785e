"""Manual replica assignments, checked as Kafka 3.9's `ReplicationControlManager.createTopic` (CreateTopics)
and `createPartitions` (CreatePartitions, `check_added`).

With assignments the request's replication factor and partition count must both be -1
(INVALID_REQUEST); each partition is named once, its replicas are registered brokers, none twice, as
many as the first partition's (`validateManualPartitionAssignment`), at least one of them active; the
partitions run 0, 1, 2, ... (INVALID_REPLICA_ASSIGNMENT, each with Kafka's message). A topic whose name
is invalid or taken gets that error instead, as Kafka checks names first.
"""

from __future__ import annotations

from typing import Any

from migrator.controller.managers.rules import collides, validate_topic_name
from migrator.errors import BadInputError
from migrator.model import ClusterImage

__all__ = ["INVALID_REPLICA_ASSIGNMENT", "check", "check_added", "replicas_refused"]

INVALID_REPLICA_ASSIGNMENT = 39
INVALID_REQUEST = 42


def _name_refused(image: ClusterImage, name: str) -> bool:
    try:
        validate_topic_name(name)
    except BadInputError:
        return True
    return name in image.topics or any(collides(name, other) for other in image.topics)


def check(image: ClusterImage, topic: Any) -> tuple[dict[int, list[int]] | None, tuple[int, str] | None]:
    """(the assignment, None) or (None, Kafka's (error code, message)); (None, None) lets the name's
    own error come from the create path."""
    if _name_refused(image, topic.name):
        return None, None
    if topic.replication_factor != -1:
        return None, (
            INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        )
    if topic.num_partitions != -1:
        return None, (
            INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        )
    parts: dict[int, list[int]] = {}
    rf: int | None = None
    for a in topic.assignments:
        index = int(a.partition_index)
        if index in parts:
            return None, (
                INVALID_REPLICA_ASSIGNMENT,
                f"Found multiple manual partition assignments for partition {index}",
            )
        replicas = [int(b) for b in a.broker_ids]
        refused = replicas_refused(image, replicas, rf)
        if refused is not None:
            return None, (INVALID_REPLICA_ASSIGNMENT, refused)
        rf = len(replicas)
        if not any(_active(image, b) for b in replicas):
            return None, (
                INVALID_REPLICA_ASSIGNMENT,
                f"All brokers specified in the manual partition assignment for partition {index} are "
                "fenced or in controlled shutdown.",
            )
        parts[index] = replicas
    if any(i not in parts for i in range(len(parts))):
        return None, (
            INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        )
    return parts, None


def check_added(
    image: ClusterImage, topic: Any
) -> tuple[dict[int, list[int]] | None, tuple[int, str] | None]:
    """CreatePartitions' assignments, as Kafka 3.9's `createPartitions` checks them: their number
    against the partitions added, each list with the existing partitions' replication factor, at least
    one active replica each. (None, None) when the topic or its new count is wrong: that error comes
    from the add path, which Kafka checks first."""
    current = image.topics.get(topic.name)
    if current is None or not current.partitions or int(topic.count) <= len(current.partitions):
        return None, None
    have = len(current.partitions)
    additional = int(topic.count) - have
    if len(topic.assignments) != additional:
        return None, (
            INVALID_REPLICA_ASSIGNMENT,
            f"Attempted to add {additional} additional partition(s), but only {len(topic.assignments)} "
            "assignment(s) were specified.",
        )
    rf = len(next(iter(current.partitions.values())).replicas)
    parts: dict[int, list[int]] = {}
    for offset, a in enumerate(topic.assignments):
        replicas = [int(b) for b in a.broker_ids]
        refused = replicas_refused(image, replicas, rf)
        if refused is not None:
            return None, (INVALID_REPLICA_ASSIGNMENT, refused)
        pid = have + offset
        if not any(_active(image, b) for b in replicas):
            return None, (
                INVALID_REPLICA_ASSIGNMENT,
                f"All brokers specified in the manual partition assignment for partition {pid} are "
                "fenced or in controlled shutdown.",
            )
        parts[pid] = replicas
    return parts, None


def _active(image: ClusterImage, broker_id: int) -> bool:
    b = image.brokers.get(broker_id)
    return b is not None and not b.fenced and not b.in_controlled_shutdown


def replicas_refused(image: ClusterImage, replicas: list[int], rf: int | None = None) -> str | None:
    """validateManualPartitionAssignment's message, or None (registered is enough, fenced or not);
    CreateTopics' assignments and AlterPartitionReassignments' targets are checked with it."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    prev: int | None = None
    for b in sorted(replicas):
        if b not in image.brokers:
            return f"The manual partition assignment includes broker {b}, but no such broker is registered."
        if b == prev:
            return f"The manual partition assignment includes the broker {prev} more than once."
        prev = b
    if rf is not None and len(replicas) != rf:
        return (
            f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this "
            f"is not consistent with previous partitions, which have {rf} replica(s)."
        )
    return None
