"""ListPartitionReassignments on the controller listener, read from the image.

A partition is being reassigned while it has adding or removing replicas (what the copy carried over
from the topic znodes, and what the log records since). As Kafka's `ReplicationControlManager`
lists them: every ongoing reassignment when no topics are named; otherwise only the named partitions
that are being reassigned, unknown topics and partitions left out without an error. Starting or
cancelling a reassignment (AlterPartitionReassignments) is not served yet.
"""

from __future__ import annotations

from typing import Any

from migrator.controller import kafka_errors as E
from migrator.controller.admin_api import ZERO, admin_hook, build, error, kio_module

__all__ = ["handle", "refuse_all"]


def handle(service: Any, api_key: int, version: int, request: Any) -> Any:
    if admin_hook(service) is None:
        return refuse_all(api_key, version, request, E.NOT_CONTROLLER)
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
    m = kio_module(46, version, "response")
    return build(
        m.ListPartitionReassignmentsResponse,
        throttle_time=ZERO,
        error_code=error(code),
        error_message=None,
        topics=(),
    )
