"""Companion mode: zk2kraft around a migration Kafka's own KRaft controller runs (its manual rollback)."""

from __future__ import annotations

from migrator.commands.lifecycle import driver_options
from migrator.commands.target_arg import takes_target
from migrator.migration.steps.kafka_companion import DEFAULT_QUIET_SECONDS, kafka_rollback, parse_quorum
from migrator.results import RollbackResult
from migrator.target import Target

__all__ = ["DEFAULT_QUIET_SECONDS", "parse_quorum", "rollback_kafka_controller"]


@takes_target(log_dir_positional=True)
def rollback_kafka_controller(
    target: Target, *, yes: bool = False, quorum: str = "", quiet_s: float = DEFAULT_QUIET_SECONDS
) -> RollbackResult:
    """Kafka's documented rollback of its own controller's migration, guarded: refused while a Kafka
    controller lives (its .lock here, a `quorum` voter answering, /migration moving) or after Kafka's
    finalization; deletes /controller and /migration so a ZooKeeper-mode broker becomes controller."""
    return kafka_rollback(driver_options(target), yes=yes, quorum=parse_quorum(quorum), quiet_s=quiet_s)
