"""AlterPartitionReassignments and ListPartitionReassignments on the controller listener.

A partition is being reassigned while it has adding or removing replicas (what the copy carried over
from the topic znodes, and what the log records since). As Kafka 3.9's `ReplicationControlManager`:

- Alter: each partition's target validated (`validateManualPartitionAssignment`: not empty, every
  broker registered, none twice; else INVALID_REPLICA_ASSIGNMENT with Kafka's message), or null
  replicas to cancel (NO_REASSIGNMENT_IN_PROGRESS when none is; a revert that needs an unclean
  election only with `unclean.leader.election.enable`). The records (`partition_reassignment`) of the
  whole request are one batch, decided and appended through the service's own path like
  ElectLeaders; the dual-write carries them to the topic znode's `adding_replicas`/`removing_replicas`.
  The move completes when an AlterPartition brings every target replica into the ISR (`core`).
- List: every ongoing reassignment when no topics are named; otherwise only the named partitions that
  are being reassigned, unknown topics and partitions left out without an error.
"""

from __future__ import annotations

from typing import Any

from migrator.controller import core
from migrator.controller.apis.admin_api import ZERO, admin_hook, build, error, kio_module
from migrator.controller.managers import admin_manual_assignment, partition_reassignment
from migrator.controller.protocol import kafka_errors as E
from migrator.kraft.records import MetadataRecord, kafka_to_uuid
from migrator.model import ClusterImage

INVALID_REPLICA_ASSIGNMENT = admin_manual_assignment.INVALID_REPLICA_ASSIGNMENT
NO_REASSIGNMENT_IN_PROGRESS = 85
ALTER, LIST = 45, 46

Result = tuple[int, int, str | None]  # partition, error code, message

__all__ = ["handle", "refuse_all"]


def handle(service: Any, api_key: int, version: int, request: Any) -> Any:
    if admin_hook(service) is None:
        return refuse_all(api_key, version, request, E.NOT_CONTROLLER)
    if api_key == ALTER:
        return _alter(service, version, request)
    m = kio_module(46, version, "response")
    topics = service.image.topics
    if request.topics is None:
        wanted = [(name, sorted(t.partitions)) for name, t in sorted(topics.items())]
    else:
        wanted = [(t.name, list(t.partition_indexes)) for t in request.topics if t.name in topics]
    out = []
    for name, indexes in wanted:
        parts = topics[name].partitions
        ongoing = tuple(
            build(
                m.OngoingPartitionReassignment,
                partition_index=i,
                replicas=tuple(parts[i].replicas),
                adding_replicas=tuple(parts[i].adding_replicas),
                removing_replicas=tuple(parts[i].removing_replicas),
            )
            for i in indexes
            if i in parts and (parts[i].adding_replicas or parts[i].removing_replicas)
        )
        if ongoing:
            out.append(build(m.OngoingTopicReassignment, name=name, partitions=ongoing))
    return build(
        m.ListPartitionReassignmentsResponse,
        throttle_time=ZERO,
        error_code=error(E.NONE),
        error_message=None,
        topics=tuple(out),
    )


def refuse_all(api_key: int, version: int, request: Any, code: int) -> Any:
    if api_key == ALTER:  # Kafka's getErrorResponse: each partition and the top with the error
        asked = getattr(request, "topics", None) or ()
        message = E.MESSAGES.get(code)
        return _alter_response(
            version,
            [(t.name, [(p.partition_index, code, message) for p in t.partitions]) for t in asked],
            code,
            message,
        )
    m = kio_module(46, version, "response")
    return build(
        m.ListPartitionReassignmentsResponse,
        throttle_time=ZERO,
        error_code=error(code),
        error_message=None,
        topics=(),
    )


# --- AlterPartitionReassignments ---------------------------------------------------------------------


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _alter(service: Any, version: int, request: Any) -> Any:
    def decide() -> core.Decision:
        records: list[MetadataRecord] = []
        out: list[tuple[str, list[Result]]] = []
        for t in request.topics:
            results: list[Result] = []
            for target in t.partitions:
                try:
                    change = _one(service, service.image, t.name, target)
                except _Refused as e:
                    results.append((target.partition_index, e.code, str(e)))
                    continue
                if change is not None:
                    records.append(change)
                results.append((target.partition_index, E.NONE, None))
            out.append((t.name, results))
        return core.Decision(records, out)

    results = service._decide("AlterPartitionReassignments", decide, None)  # noqa: SLF001 - the one append path
    if results is None:  # fenced meanwhile
        return refuse_all(ALTER, version, request, E.NOT_CONTROLLER)
    return _alter_response(version, results, E.NONE)


def _one(service: Any, image: ClusterImage, name: str, target: Any) -> MetadataRecord | None:
    topic = image.topics.get(name)
    if topic is None or topic.topic_id is None:
        raise _Refused(E.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.")
    index = int(target.partition_index)
    p = topic.partitions.get(index)
    if p is None:
        raise _Refused(E.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{index}.")
    tid = kafka_to_uuid(topic.topic_id)

    def acceptable(r: int) -> bool:
        return bool(service.core._acceptable(image, r, name, index))  # noqa: SLF001 - the core's own rule

    unclean = _unclean_enabled(image, name)
    zk = bool(service.core.config.zk_migration)
    if target.replicas is None:
        if not partition_reassignment.in_progress(p):
            raise _Refused(NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
        rev = partition_reassignment.revert(p)
        if rev.unclean and not unclean:
            raise _Refused(
                INVALID_REPLICA_ASSIGNMENT,
                f"Unable to revert partition assignment for {name}:{index} because it would require an "
                "unclean leader election.",
            )
        return partition_reassignment.build_change(
            p,
            tid,
            acceptable,
            isr=rev.isr,
            replicas=rev.replicas,
            adding=[],
            removing=[],
            unclean=unclean,
            zk_migration=zk,
        )
    wanted = [int(r) for r in target.replicas]
    refused = admin_manual_assignment.replicas_refused(image, wanted)
    if refused is not None:
        raise _Refused(INVALID_REPLICA_ASSIGNMENT, refused)
    mv = partition_reassignment.moves(p.replicas, wanted)
    return partition_reassignment.build_change(
        p,
        tid,
        acceptable,
        replicas=mv.replicas if mv.replicas != list(p.replicas) else None,
        removing=mv.removing or None,
        adding=mv.adding or None,
        zk_migration=zk,
    )


def _unclean_enabled(image: ClusterImage, topic: str) -> bool:
    """unclean.leader.election.enable of the topic, else the cluster-wide broker default (false)."""
    for key in (("TOPIC", topic), ("BROKER", "")):
        entity = image.configs.get(key)
        value = entity.configs.get("unclean.leader.election.enable") if entity is not None else None
        if value is not None:
            return value.strip().lower() == "true"
    return False


def _alter_response(
    version: int, results: list[tuple[str, list[Result]]], code: int, message: str | None = None
) -> Any:
    m = kio_module(ALTER, version, "response")
    return build(
        m.AlterPartitionReassignmentsResponse,
        throttle_time=ZERO,
        error_code=error(code),
        error_message=message,
        responses=tuple(
            build(
                m.ReassignableTopicResponse,
                name=name,
                partitions=tuple(
                    build(
                        m.ReassignablePartitionResponse,
                        partition_index=i,
                        error_code=error(c),
                        error_message=msg,
                    )
                    for i, c, msg in parts
                ),
            )
            for name, parts in results
        ),
    )
