"""Kafka 3.9's topic configs as DescribeConfigs lists them: type, default, and the broker configs that
stand in for a topic config not set on the topic (`ServerTopicConfigSynonyms`, first one wins, some
converted from hours or minutes to milliseconds).

Only what the metadata can say is resolved: a topic's own dynamic value, then the cluster-wide dynamic
broker default (`/config/brokers/<default>`) under the synonyms' names, then Kafka's default. The
controller has no broker's `server.properties`, so STATIC_BROKER_CONFIG never appears.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["CONFIG_TYPES", "TOPIC_CONFIGS", "resolve_topic_config"]

DYNAMIC_TOPIC_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, DEFAULT_CONFIG = 1, 3, 5  # DescribeConfigs ConfigSource
#: DescribeConfigs v3+ ConfigType ids
CONFIG_TYPES = {"bool": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}
_HOURS, _MINUTES = 3_600_000, 60_000
_MAX_LONG = str(2**63 - 1)

#: topic config -> (type, Kafka 3.9's default, [(broker synonym, multiplier to milliseconds)])
TOPIC_CONFIGS: dict[str, tuple[str, str, list[tuple[str, int]]]] = {
    "cleanup.policy": ("list", "delete", [("log.cleanup.policy", 1)]),
    "compression.gzip.level": ("int", "-1", [("compression.gzip.level", 1)]),
    "compression.lz4.level": ("int", "9", [("compression.lz4.level", 1)]),
    "compression.type": ("string", "producer", [("compression.type", 1)]),
    "compression.zstd.level": ("int", "3", [("compression.zstd.level", 1)]),
    "delete.retention.ms": ("long", "86400000", [("log.cleaner.delete.retention.ms", 1)]),
    "file.delete.delay.ms": ("long", "60000", [("log.segment.delete.delay.ms", 1)]),
    "flush.messages": ("long", _MAX_LONG, [("log.flush.interval.messages", 1)]),
    "flush.ms": ("long", _MAX_LONG, [("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)]),
    "follower.replication.throttled.replicas": ("list", "", []),
    "index.interval.bytes": ("int", "4096", [("log.index.interval.bytes", 1)]),
    "leader.replication.throttled.replicas": ("list", "", []),
    "local.retention.bytes": ("long", "-2", [("log.local.retention.bytes", 1)]),
    "local.retention.ms": ("long", "-2", [("log.local.retention.ms", 1)]),
    "max.compaction.lag.ms": ("long", _MAX_LONG, [("log.cleaner.max.compaction.lag.ms", 1)]),
    "max.message.bytes": ("int", "1048588", [("message.max.bytes", 1)]),
    "message.downconversion.enable": ("bool", "true", []),
    "message.format.version": ("string", "3.0-IV1", [("log.message.format.version", 1)]),
    "message.timestamp.after.max.ms": ("long", _MAX_LONG, [("log.message.timestamp.after.max.ms", 1)]),
    "message.timestamp.before.max.ms": ("long", _MAX_LONG, [("log.message.timestamp.before.max.ms", 1)]),
    "message.timestamp.difference.max.ms": ("long", _MAX_LONG, []),
    "message.timestamp.type": ("string", "CreateTime", [("log.message.timestamp.type", 1)]),
    "min.cleanable.dirty.ratio": ("double", "0.5", [("log.cleaner.min.cleanable.ratio", 1)]),
    "min.compaction.lag.ms": ("long", "0", [("log.cleaner.min.compaction.lag.ms", 1)]),
    "min.insync.replicas": ("int", "1", [("min.insync.replicas", 1)]),
    "preallocate": ("bool", "false", [("log.preallocate", 1)]),
    "remote.log.copy.disable": ("bool", "false", []),
    "remote.log.delete.on.disable": ("bool", "false", []),
    "remote.storage.enable": ("bool", "false", []),
    "retention.bytes": ("long", "-1", [("log.retention.bytes", 1)]),
    "retention.ms": (
        "long",
        "604800000",
        [("log.retention.ms", 1), ("log.retention.minutes", _MINUTES), ("log.retention.hours", _HOURS)],
    ),
    "segment.bytes": ("int", "1073741824", [("log.segment.bytes", 1)]),
    "segment.index.bytes": ("int", "10485760", [("log.index.size.max.bytes", 1)]),
    "segment.jitter.ms": ("long", "0", [("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOURS)]),
    "segment.ms": ("long", "604800000", [("log.roll.ms", 1), ("log.roll.hours", _HOURS)]),
    "unclean.leader.election.enable": ("bool", "false", [("unclean.leader.election.enable", 1)]),
}


def _converted(value: str, factor: int) -> str:
    if factor == 1:
        return value
    try:
        return str(int(value) * factor)
    except ValueError:
        return value


def resolve_topic_config(
    name: str, topic: Mapping[str, str], cluster_default: Mapping[str, str]
) -> tuple[str, int, list[tuple[str, str, int]]]:
    """(value, source, synonyms) of a known topic config: Kafka's order, the first one set wins."""
    _kind, default, synonyms = TOPIC_CONFIGS[name]
    chain: list[tuple[str, str, int]] = []
    if name in topic:
        chain.append((name, topic[name], DYNAMIC_TOPIC_CONFIG))
    chain += [
        (s, cluster_default[s], DYNAMIC_DEFAULT_BROKER_CONFIG) for s, _ in synonyms if s in cluster_default
    ]
    chain.append((name, default, DEFAULT_CONFIG))
    value = chain[0][1]
    if chain[0][2] == DYNAMIC_DEFAULT_BROKER_CONFIG:
        factor = next(f for s, f in synonyms if s == chain[0][0])
        value = _converted(value, factor)
    return value, chain[0][2], chain
