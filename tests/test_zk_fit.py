"""zk_fit.change_writes: the topics-only fast path (no whole-image copy, the caller's topic id index)
computes the same writes as the whole-image path (issue 13's CreateTopics benchmark)."""

from __future__ import annotations

import uuid

from migrator.kraft.image import ImageBuilder
from migrator.kraft.records import MetadataRecord, record
from migrator.migration.zk_fit import change_writes


def _topic(name: str, tid: uuid.UUID, partitions: int) -> list[MetadataRecord]:
    out = [record("TopicRecord", Name=name, TopicId=tid)]
    for p in range(partitions):
        out.append(
            record("PartitionRecord", PartitionId=p, TopicId=tid, Replicas=[1, 2, 3], Isr=[1, 2, 3], Leader=1)
        )
    return out


def _ops(ops: list) -> list[tuple[str, str, bytes]]:  # type: ignore[type-arg]
    return [(o.kind, o.path, o.data) for o in ops]


def test_topic_changes_write_the_same_with_and_without_the_fast_path() -> None:
    a, b, b2, c = (uuid.uuid4() for _ in range(4))
    builder = ImageBuilder()
    for i, rec in enumerate([*_topic("a", a, 2), *_topic("b", b, 1)]):
        builder.replay(i, rec)
    builder.finish()
    image = builder.image
    change = [
        *_topic("c", c, 2),
        record("ConfigRecord", ResourceType=2, ResourceName="c", Name="retention.ms", Value="1000"),
        record("PartitionChangeRecord", PartitionId=0, TopicId=a, Isr=[1, 2]),
        record("RemoveTopicRecord", TopicId=b),
        *_topic("b", b2, 3),  # the same name again, a new id
    ]
    # A broker config in the change takes the whole-image path; its own write is left out below.
    broker_config = record("ConfigRecord", ResourceType=4, ResourceName="1", Name="x", Value="y")
    reference = [
        o for o in _ops(change_writes(image, [*change, broker_config], 5)) if "/config/brokers/" not in o[1]
    ]
    assert {p for _, p, _ in reference} >= {
        "/brokers/topics/c",
        "/config/topics/c",
        "/brokers/topics/a/partitions/0/state",
        "/brokers/topics/b/partitions/2/state",
    }
    assert _ops(change_writes(image, change, 5)) == reference
    assert _ops(change_writes(image, change, 5, builder.topic_names)) == reference
    assert dict(builder.topic_names) == {a: "a", b: "b"}  # the caller's index is not written
