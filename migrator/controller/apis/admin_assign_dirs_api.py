"""AssignReplicasToDirs (apiKey 73, v0; KIP-858) on the controller listener: where a KRaft broker keeps
each of its replicas.

A Kafka 3.9 broker in KRaft mode sends it (its `AssignmentsManager`) for every replica it hosts as soon
as the metadata.version supports directory assignment (3.7-IV2 and later; the copy's is 3.9-IV0), and
retries it for ever, logging at ERROR, while the controller answers UNSUPPORTED_VERSION: the real-broker
migration test found exactly that in phase 3. Decided as Kafka 3.9's
`ReplicationControlManager.handleAssignReplicasToDirs`: the broker's epoch must be its registration's
(`STALE_BROKER_EPOCH`, top level); per partition an unknown topic id `UNKNOWN_TOPIC_ID`, an unknown
partition `UNKNOWN_TOPIC_OR_PARTITION`, a partition the broker is no replica of
`NOT_LEADER_OR_FOLLOWER`; otherwise a `PartitionChangeRecord` (v1) whose `Directories` give this
broker's replica the directory (the other replicas keep theirs; a partition the copy made has none yet,
which Kafka reads as MIGRATING), only when it changes, as `PartitionChangeBuilder.setDirectory` does. One
request's records are one batch, answered once durable in the log. The dual-write carries nothing to
ZooKeeper for them (ZooKeeper has no directories) beyond the partition epoch every change bumps.

Difference from Kafka: a directory the broker did not register as online is recorded the same way;
Kafka also moves leadership off it (`generateLeaderAndIsrUpdates("offline-dir-assignment")`), here the
broker's AlterPartition/heartbeat (OfflineLogDirs) does that.
"""

from __future__ import annotations

import uuid
from typing import Any

from migrator.controller import core
from migrator.controller.apis.admin_api import ZERO, admin_hook, build, error, kio_module
from migrator.controller.protocol import kafka_errors as E
from migrator.kraft.records import record, uuid_to_kafka

__all__ = ["MIGRATING", "decide_assignment", "handle", "refuse_all"]

#: Kafka's `DirectoryId.MIGRATING` (Uuid(0, 2)): a replica whose directory is not known yet.
MIGRATING = uuid.UUID(int=2)

Result = tuple[int, list[tuple[uuid.UUID, list[tuple[uuid.UUID, list[tuple[int, int]]]]]]]


def decide_assignment(image: Any, request: Any) -> tuple[list[Any], Result]:
    """The records and the answer (top-level error, per directory/topic/partition errors) for one request."""
    broker_id, broker_epoch = int(request.broker_id), int(request.broker_epoch)
    broker = image.brokers.get(broker_id)
    echo = [
        (d.id_, [(t.topic_id, [(int(p.partition_index), E.STALE_BROKER_EPOCH) for p in t.partitions])
                 for t in d.topics])
        for d in request.directories
    ]  # fmt: skip
    if broker is None or broker.broker_epoch != broker_epoch:
        return [], (E.STALE_BROKER_EPOCH, [])
    by_id = {t.topic_id: t for t in image.topics.values() if t.topic_id is not None}
    records: list[Any] = []
    out = []
    for d, (_dir, topics) in zip(request.directories, echo, strict=True):
        res_topics = []
        for t, (_tid, parts) in zip(d.topics, topics, strict=True):
            topic = by_id.get(uuid_to_kafka(t.topic_id)) if t.topic_id is not None else None
            res_parts = []
            for index, _ in parts:
                if topic is None:
                    res_parts.append((index, E.UNKNOWN_TOPIC_ID))
                    continue
                part = topic.partitions.get(index)
                if part is None:
                    res_parts.append((index, E.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                if broker_id not in part.replicas:
                    res_parts.append((index, E.NOT_LEADER_OR_FOLLOWER))
                    continue
                key = (topic.name, index)
                dirs = list(image.partition_directories.get(key) or [])
                if len(dirs) != len(part.replicas):
                    dirs = [MIGRATING] * len(part.replicas)
                slot = part.replicas.index(broker_id)
                if dirs[slot] != d.id_:
                    dirs[slot] = d.id_
                    records.append(
                        record(
                            "PartitionChangeRecord",
                            1,
                            PartitionId=index,
                            TopicId=t.topic_id,
                            Directories=dirs,
                        )
                    )
                res_parts.append((index, E.NONE))
            res_topics.append((t.topic_id, res_parts))
        out.append((d.id_, res_topics))
    return records, (E.NONE, out)


def handle(service: Any, api_key: int, version: int, request: Any) -> Any:
    if admin_hook(service) is None:
        return refuse_all(api_key, version, request, E.NOT_CONTROLLER)

    def decide() -> core.Decision:
        records, result = decide_assignment(service.image, request)
        notes = [] if result[0] == E.NONE else [f"AssignReplicasToDirs refused: broker {request.broker_id} "
                                                 f"epoch {request.broker_epoch} is not its registration's"]  # fmt: skip
        return core.Decision(records, result, notes)

    refused: Result = (E.NOT_CONTROLLER, [])
    code, dirs = service._decide("AssignReplicasToDirs", decide, refused)  # noqa: SLF001 - the one append path
    return _response(version, code, dirs)


def refuse_all(api_key: int, version: int, request: Any, code: int) -> Any:
    return _response(version, code, [])


def _response(version: int, code: int, dirs: list[Any]) -> Any:
    m = kio_module(73, version, "response")
    return build(
        m.AssignReplicasToDirsResponse,
        throttle_time=ZERO,
        error_code=error(code),
        directories=tuple(
            m.DirectoryData(
                id_=dir_id,
                topics=tuple(
                    m.TopicData(
                        topic_id=tid,
                        partitions=tuple(
                            m.PartitionData(partition_index=p, error_code=error(c)) for p, c in parts
                        ),
                    )
                    for tid, parts in topics
                ),
            )
            for dir_id, topics in dirs
        ),
    )
