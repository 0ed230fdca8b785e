"""`zk2kraft admin`'s wire path carries a change's manual assignment, as Kafka's admin client sends it.

Found by the dual-write fidelity test against Kafka's own controller (tests/test_kafka_dual_write_fidelity.py):
CreateTopics and CreatePartitions went out without the assignment, so the controller placed the
replicas itself. Checked here on the requests themselves, encoded by kio (Kafka's schemas).
"""

from __future__ import annotations

import io

from kio.serial import entity_reader, entity_writer

from migrator.controller.client.admin_client import _request
from migrator.controller.managers.change import AdminChange


def _round_trip(request: object) -> object:
    buf = io.BytesIO()
    entity_writer(type(request))(buf, request)
    decoded, _size = entity_reader(type(request))(memoryview(buf.getvalue()), 0)
    return decoded


def test_create_topics_carries_the_manual_assignment_with_minus_one_counts() -> None:
    change = AdminChange(kind="create-topic", topic="fa", assignment={1: [2, 3, 1], 0: [1, 2, 3]})
    req = _round_trip(_request(change, 19, 7, 5.0))
    (topic,) = req.topics  # type: ignore[attr-defined]
    assert (topic.num_partitions, topic.replication_factor) == (-1, -1)  # Kafka refuses both with one
    assert [(a.partition_index, list(a.broker_ids)) for a in topic.assignments] == [
        (0, [1, 2, 3]),
        (1, [2, 3, 1]),
    ]


def test_create_topics_without_assignment_keeps_counts() -> None:
    change = AdminChange(kind="create-topic", topic="fb", partitions=3, replication_factor=2)
    (topic,) = _round_trip(_request(change, 19, 7, 5.0)).topics  # type: ignore[attr-defined]
    assert (topic.num_partitions, topic.replication_factor, topic.assignments) == (3, 2, ())


def test_create_partitions_carries_the_new_partitions_replicas_in_order() -> None:
    change = AdminChange(kind="add-partitions", topic="fa", partitions=5, assignment={4: [3, 1], 3: [1, 3]})
    (topic,) = _round_trip(_request(change, 37, 3, 5.0)).topics  # type: ignore[attr-defined]
    assert topic.count == 5
    assert [list(a.broker_ids) for a in topic.assignments] == [[1, 3], [3, 1]]
    placed = AdminChange(kind="add-partitions", topic="fa", partitions=5)
    (topic,) = _round_trip(_request(placed, 37, 3, 5.0)).topics  # type: ignore[attr-defined]
    assert topic.assignments is None
