"""The health of a migration in progress: what `check` and `status` report once migrating has begun.

Eligibility findings stop meaning anything once the log holds PRE_MIGRATION or ZooKeeper is claimed:
the KRaft controller's claim in /controller is exactly what the pre-flight calls a blocker, and its
fix ("set /controller_epoch") would fence the running controller. So `check` reports this instead.

The writer is read from the log directory's lock file (pid, host, since, command). A writer that stops
cleanly empties the file (`kraft.lock.WriterLock.release`), so a named holder whose flock is gone is
one that died: the migration waits for a restart that nobody is doing.
"""

from __future__ import annotations

from pathlib import Path

from migrator.controller.follower import writer_lock_held
from migrator.controller.managers.change import AdminReply
from migrator.controller.service import ControllerService
from migrator.errors import FindingsError
from migrator.kraft.lock import LOCK_FILE, read_holder
from migrator.migration.facts import Facts, log_exists
from migrator.results import WriterInfo
from state_machine import KafkaMigrationCode

__all__ = ["migration_started", "read_writer"]

_STARTED_CODES = (
    KafkaMigrationCode.PRE_MIGRATION,
    KafkaMigrationCode.MIGRATION,
    KafkaMigrationCode.POST_MIGRATION,
)


def read_writer(log_dir: str) -> WriterInfo | None:
    """The log's writer, alive or dead; None when nobody holds it and the last one stopped cleanly."""
    if not log_exists(log_dir):
        return None
    alive = writer_lock_held(Path(log_dir))
    holder = read_holder(Path(log_dir) / LOCK_FILE)
    if holder is None:
        return WriterInfo(alive=True) if alive else None
    return WriterInfo(
        pid=holder.pid, host=holder.host, since=holder.since, command=holder.command, alive=alive
    )


def migration_started(facts: Facts) -> bool:
    """Migrating has begun: the log holds a migration state or a KRaft controller claims ZooKeeper (a
    /migration znode under a ZooKeeper controller is a leftover, which the pre-flight reports)."""
    return facts.log.migration_code in _STARTED_CODES or facts.zk.kraft_holds_controller


def brokers_not_in_kraft(facts: Facts) -> tuple[list[int], list[int]]:
    """(still migrating ZooKeeper brokers, never registered) among the copy's brokers: every broker the
    log's partitions are assigned to or that registered as a migrating ZooKeeper broker. KIP-866's
    finalize assumes each of them has come back as a KRaft broker (RegisterBrokerRecord without
    IsMigratingZkBroker)."""
    replay = facts.log.replay
    if replay is None:
        return [], []
    image = replay.image
    wanted = {b.id for b in image.brokers.values() if b.is_migrating_zk_broker}
    for topic in image.topics.values():
        for p in topic.partitions.values():
            wanted.update(p.replicas)
    migrating = sorted(b for b in wanted if b in image.brokers and image.brokers[b].is_migrating_zk_broker)
    never = sorted(b for b in wanted if b not in image.brokers)
    return migrating, never


def require_kraft_brokers(facts: Facts, rehearsal: bool) -> None:
    """Refuse a finalize (exit 1) while a broker of the copy has not registered as a KRaft broker;
    `rehearsal` (no real brokers) skips it, and says so."""
    if rehearsal:
        return
    migrating, never = brokers_not_in_kraft(facts)
    if not migrating and not never:
        return
    parts = []
    if migrating:
        parts.append(f"still migrating ZooKeeper brokers: {_ids(migrating)}")
    if never:
        parts.append(f"never registered with the KRaft controller: {_ids(never)}")
    raise FindingsError(
        f"finalize refused: {len(migrating) + len(never)} broker(s) of the copy have not registered as KRaft "
        f"brokers ({'; '.join(parts)}); roll them to KRaft mode against the controller first, or pass "
        "--rehearsal for a rehearsal without real brokers"
    )


def _ids(ids: list[int], shown: int = 20) -> str:
    text = ", ".join(map(str, ids[:shown]))
    return text + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


def migrating_broker_count(service: ControllerService) -> int:
    """Kafka's MigratingZkBrokerCount from the serving controller's image, at this moment."""
    with service.lock:
        return sum(1 for b in service.image.brokers.values() if b.is_migrating_zk_broker)


def state_line(
    before: str,
    after: str,
    kafka: str | None,
    end_offset: int,
    covered: int | None,
    lag: int,
    copied: int | None,
) -> str:
    """The run's outcome as one line for the controller's log, written when it happens."""
    copy = f"copied {copied} records; " if copied is not None else ""
    return (
        f"{copy}{before} → {after} (Kafka {kafka or '-'}): log end offset {end_offset}, "
        f"/migration offset {covered}, write-behind lag {lag}"
    )


def admin_line(change: str, reply: AdminReply) -> str:
    """One admin change the controller applied (or refused), for its log."""
    if not reply.ok:
        return f"admin change refused: {change}: {reply.message} (exit {reply.exit_code})"
    if reply.records == 0:
        return f"admin change {change}: nothing to do ({reply.message})"
    return (
        f"admin change applied: {change}: {reply.records} records at offsets {reply.first_offset}-"
        f"{reply.last_offset}, /migration offset {reply.migration_offset}"
    )
