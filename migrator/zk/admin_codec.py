"""/admin znodes (reassignments, preferred elections, log dir events) and the config change
notification queue."""

from __future__ import annotations

from collections.abc import Iterable

from migrator.model import (
    Reassignment,
)
from migrator.zk.znode_json import (
    REQUIRED,
    ZnodeError,
    get_field,
    get_int,
    get_str,
    get_version,
    int_list,
    json_bytes,
    json_object,
    json_type,
    load_json,
)

__all__ = [
    "decode_config_change",
    "decode_log_dir_event",
    "decode_partition_list",
    "decode_reassignments",
    "encode_config_change",
    "encode_log_dir_event",
    "encode_partition_list",
    "encode_reassignments",
]


def decode_reassignments(path: str, data: bytes | None) -> list[Reassignment]:
    """ReassignPartitionsZNode.decode (the pre-2.4 reassignment API that 2.x still honours)."""
    what = "partition reassignment"
    obj = json_object(path, load_json(path, data, what), what)
    get_version(path, obj, what, (1,))
    entries = get_field(path, obj, "partitions", what, REQUIRED)
    if type(entries) is not list:
        raise ZnodeError(path, f"{what}: field 'partitions' must be an array, got {json_type(entries)}")
    out = []
    for n, raw in enumerate(entries):
        where = f"{what} entry {n}"
        item = json_object(path, raw, where)
        out.append(
            Reassignment(
                topic=get_str(path, item, "topic", where),
                partition=get_int(path, item, "partition", where),
                replicas=int_list(
                    path, get_field(path, item, "replicas", where, REQUIRED), f"{where}: replicas"
                ),
            )
        )
    return out


def encode_reassignments(reassignments: Iterable[Reassignment]) -> bytes:
    """Jackson's bean order of LegacyPartitionAssignment / ReplicaAssignment (constructor order)."""
    return json_bytes(
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
    obj = json_object(path, load_json(path, data, what), what)
    get_version(path, obj, what, (1,))
    entries = get_field(path, obj, "partitions", what, REQUIRED)
    if type(entries) is not list:
        raise ZnodeError(path, f"{what}: field 'partitions' must be an array, got {json_type(entries)}")
    out = []
    for n, raw in enumerate(entries):
        item = json_object(path, raw, f"{what} entry {n}")
        out.append(
            (get_str(path, item, "topic", f"{what} entry {n}"), get_int(path, item, "partition", what))
        )
    return out


def encode_partition_list(partitions: Iterable[tuple[str, int]]) -> bytes:
    return json_bytes({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_log_dir_event(path: str, data: bytes | None) -> int:
    """LogDirEventNotificationSequenceZNode.decode: the broker whose log directory failed."""
    what = "log dir event"
    obj = json_object(path, load_json(path, data, what), what)
    get_version(path, obj, what, (1,))
    return get_int(path, obj, "broker", what)


def encode_log_dir_event(broker_id: int) -> bytes:
    return json_bytes({"version": 1, "broker": broker_id, "event": 1})


def decode_config_change(path: str, data: bytes | None) -> str:
    """A config change notification as its sanitized entity path (``users/alice/clients/app1``).

    Version 1 (``entity_type`` + ``entity_name``) is what Kafka before 0.10.1 wrote; ZkConfigManager
    still reads it.
    """
    what = "config change notification"
    obj = json_object(path, load_json(path, data, what), what)
    version = get_version(path, obj, what, (1, 2))
    if version == 1:
        return f"{get_str(path, obj, 'entity_type', what)}/{get_str(path, obj, 'entity_name', what)}"
    return get_str(path, obj, "entity_path", what)


def encode_config_change(entity_path: str) -> bytes:
    return json_bytes({"version": 2, "entity_path": entity_path})
