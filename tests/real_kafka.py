"""Three real Kafka 3.9 brokers through KIP-866's phases, zk2kraft's controller, a producer and a consumer.

Shared by the real-broker migration tests (tests/test_real_kafka_migration.py). Every broker is a
`zk_fixtures.kafka.KafkaNode` in its own directory; its properties are rebuilt for each phase of the
runbook (ZooKeeper mode, ZooKeeper mode with the migration flag, KRaft broker), and Kafka's own KRaft
controller takes zk2kraft's node id and port at the handover.
"""

from __future__ import annotations

from pathlib import Path

from zk_fixtures.kafka_cluster import (  # noqa: F401 - re-exported for the tests
    CONTROLLER_ID,
    RealCluster,
    Traffic,
    isr_full,
    leaders,
    wait_leaders,
    wait_listening,
)


def errors_with_cause(path: Path) -> list[str]:
    """Kafka's ERROR lines in `path`, each with the exception line Kafka prints under it."""
    if not path.exists():
        return []
    lines = path.read_text(errors="replace").splitlines()
    return [
        ln + (" " + lines[i + 1] if i + 1 < len(lines) and not lines[i + 1].startswith("[") else "")
        for i, ln in enumerate(lines)
        if "] ERROR " in ln
    ]


#: The ERROR a leadership move makes Kafka log for an idempotent producer (explained where used).
OUT_OF_ORDER = (
    r"Error processing append operation on partition \S+ \(kafka.server.ReplicaManager\) "
    r"org.apache.kafka.common.errors.OutOfOrderSequenceException"
)

#: The ERROR Kafka's own ZooKeeper-mode controller logs when it resigns at its restart (explained where used).
ZK_CONTROLLER_RESIGNED = (
    r"\[RequestSendThread controllerId=\d+\] Controller \d+ fails to send a request to broker .* "
    r"java.lang.InterruptedException"
)
