"""`num.partitions` and `default.replication.factor`: what a CreateTopics of -1 gets.

Kafka's controller fills NumPartitions/ReplicationFactor -1 (CreateTopics v4+, and `kafka-topics`
without `--partitions`/`--replication-factor`) from these two server properties, both 1 by default;
zk2kraft reads them from the controller's properties (`--config`), the same file Kafka's would read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from migrator.errors import BadInputError

__all__ = ["TopicDefaults"]

NUM_PARTITIONS = "num.partitions"
DEFAULT_REPLICATION_FACTOR = "default.replication.factor"


def _int(props: Mapping[str, str], key: str, least: int | None) -> int:
    text = props.get(key, "1").strip()
    try:
        value = int(text)
    except ValueError:
        raise BadInputError(f"{key}: {text!r} is not an integer") from None
    if least is not None and value < least:
        raise BadInputError(f"{key}: {value} must be at least {least}")
    return value


@dataclass(frozen=True)
class TopicDefaults:
    num_partitions: int = 1
    replication_factor: int = 1

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TopicDefaults:
        """Kafka's checks: `num.partitions` at least 1; `default.replication.factor` any integer
        (Kafka refuses a bad one only when a topic is created with it, as the placer does here)."""
        return cls(_int(props, NUM_PARTITIONS, 1), _int(props, DEFAULT_REPLICATION_FACTOR, None))
