"""The next step, from the facts: one source for `status`'s and `check`'s `next` and finalize's refusal.

Two commands that give different advice for the same facts leave the operator to guess which one is
right (issue 31: after a Ctrl-C during the copy `status` said "migrate again" and `check` "restart
migrate --listen"). Everything here reads the facts and the log's writer only; it writes nothing.

When the given log directory is not the migration's (a mistyped --log-dir), only ZooKeeper can be
read: `zk_alone` says what it proves (the copy committed at an offset by a controller in an epoch),
and the advice names the right directory; it never tells the operator to stop a live controller.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from kazoo.client import KazooClient

from migrator.migration import log_binding
from migrator.migration.facts import Facts, ZkFacts
from migrator.migration.health import brokers_not_in_kraft, read_writer
from migrator.migration.log_binding import BindingProblem
from migrator.results import MigrationHealth, WriterInfo
from state_machine import TABLE, GuardFacts, KafkaMigrationCode, MigrationEvent
from state_machine import MigrationState as S

__all__ = [
    "ZkAlone",
    "finalize_guards",
    "finalize_refusal",
    "handover",
    "migration_health",
    "next_step",
    "WrongLog",
    "not_this_log",
    "zk_alone",
]

#: the guard lines of a finalize, also `status`'s `next` in DualWriteMetadata
_FINALIZE = "`zk2kraft finalize --yes`"


@dataclass(frozen=True)
class ZkAlone:
    """What ZooKeeper alone proves about a migration: the state and Kafka's code, and why."""

    state: S
    kafka_code: KafkaMigrationCode | None
    proof: str


def zk_alone(zk: ZkFacts) -> ZkAlone | None:
    """The state ZooKeeper alone proves, or None when ZooKeeper shows no migration.

    `/migration` records an offset only once the copy's ZkMigrationStateRecord(MIGRATION) is committed
    (Kafka's KRaftMigrationDriver writes it after the copy), so an offset >= 0 under a KRaft
    controller proves DualWriteMetadata or later; whether it was finalized since only the log says.
    """
    c, m = zk.controller, zk.migration
    if not zk.kraft_holds_controller or c is None:
        return None
    if m is not None and m.kraft_metadata_offset >= 0:
        return ZkAlone(
            S.DUAL_WRITE_METADATA,
            KafkaMigrationCode.MIGRATION,
            f"ZooKeeper alone proves the copy committed at offset {m.kraft_metadata_offset} by controller "
            f"{m.kraft_controller_id}, epoch {m.kraft_controller_epoch} (a finalize since is recorded only "
            "in that controller's log)",
        )
    return ZkAlone(
        S.MIGRATING_ZK_DATA,
        KafkaMigrationCode.PRE_MIGRATION,
        f"ZooKeeper alone proves KRaft controller {c.broker_id} claimed it in epoch "
        f"{c.kraft_controller_epoch}; /migration records no copy yet",
    )


def _ids(ids: list[int] | tuple[int, ...], shown: int = 20) -> str:
    text = ", ".join(map(str, ids[:shown]))
    return text + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


#: how to meet each of the transition table's finalize guards, by guard name
_MEETS = {
    "no-write-behind-lag": "let the running controller sync them (or run `zk2kraft migrate` once if none runs)",
    "no-zk-mode-brokers": "in a rehearsal stop `zk2kraft fixtures brokers`, which holds their registrations",
    "confirmed": "finalizing cannot be undone",
}


def finalize_guards(
    facts: Facts,
    writer: WriterInfo | None,
    *,
    rehearsal: bool,
    confirmed: bool,
    blockers: tuple[str, ...] = (),
) -> list[str]:
    """Every unmet guard of a finalize in DualWriteMetadata, each with what meets it (empty: go): the
    transition table's (named as it names them), then the log's writer and the KRaft registrations."""
    guard_facts = GuardFacts(
        blockers=blockers,
        confirmed=confirmed,
        write_behind_lag=facts.lag,
        zk_registered_brokers=tuple(facts.zk.registered_brokers),
        copy_transaction_open=facts.log.open_transaction is not None,
        copy_committed=facts.log.migration_code == int(KafkaMigrationCode.MIGRATION),
    )
    table = next(t for t in TABLE if t.source is S.DUAL_WRITE_METADATA and t.event is MigrationEvent.FINALIZE)
    out = [
        f"{g.explain(guard_facts)} [guard {g.name}]" + (f": {_MEETS[g.name]}" if g.name in _MEETS else "")
        for g in table.guards
        if not g.holds(guard_facts)
    ]
    if writer is not None and writer.alive:
        pid = f"`kill -TERM {writer.pid}`" if writer.pid is not None else "SIGTERM"
        out.append(
            f"the controller holds the log ({writer.describe()}): once the brokers are rolled, stop it with "
            f"{pid}; finalize writes the log itself"
        )
    if not rehearsal:
        migrating, never = brokers_not_in_kraft(facts)
        if migrating or never:
            which = []
            if migrating:
                which.append(f"still migrating ZooKeeper brokers: {_ids(migrating)}")
            if never:
                which.append(f"never registered with the KRaft controller: {_ids(never)}")
            out.append(
                f"{len(migrating) + len(never)} broker(s) of the copy have not registered as KRaft brokers "
                f"({'; '.join(which)}): roll them to KRaft mode against the controller, or pass --rehearsal "
                "for a rehearsal without real brokers"
            )
    return out


def finalize_refusal(guards: list[str]) -> str:
    """Finalize's one-line refusal: every unmet guard at once, numbered."""
    return f"finalize refused, {len(guards)} unmet: {_numbered(guards)}"


def handover(log_dir: str) -> str:
    """After finalize: what runs next on the directory (the controller's refusal and `status` say it)."""
    return (
        f"start Kafka's own KRaft controller on {log_dir} (its metadata.log.dir; docs/runbook.md, "
        '"Handing the directory to Kafka\'s own controller"), then decommission ZooKeeper once every '
        "broker runs in KRaft mode"
    )


def _numbered(items: list[str]) -> str:
    return "; ".join(f"({i}) {text}" for i, text in enumerate(items, 1))


def _restart(writer: WriterInfo | None) -> str:
    """The command that resumes, named from the writer's lock file when it recorded one."""
    command = writer.command if writer is not None and writer.command else None
    if command is None:
        return "run the same command again (`zk2kraft migrate` or `zk2kraft controller`, with its options)"
    if command.endswith("controller"):
        return f"restart the controller (`{command}` with the same options)"
    return f"restart the writer (`{command} --follow` with the same options, or `{command}` once)"


def next_step(facts: Facts, writer: WriterInfo | None) -> tuple[str, list[str]]:
    """(next action, notes) for a readable log: `status`'s and `check`'s `next`, from the facts.

    A live writer is never told to start again; a dead one is named with the command that resumes."""
    state = facts.derived.state
    code = facts.log.migration_code
    alive = writer is not None and writer.alive
    dead = writer is not None and not writer.alive
    notes = (
        [f"the log's writer is gone: {writer.describe()}"]
        if dead and state is not S.MIGRATION_FINALIZED
        else []
    )
    if state is S.DUAL_WRITE_METADATA:
        if dead:  # nobody syncs or serves admin changes until it is back
            lacking = f" and syncs the {facts.lag} records ZooKeeper lacks" if facts.lag > 0 else ""
            return f"{_restart(writer)}: it resumes from the log{lacking}", notes
        guards = finalize_guards(facts, writer, rehearsal=False, confirmed=True)
        if not guards:
            return f"{_FINALIZE} (`zk2kraft rollback` is still possible until then)", notes
        return (
            f"to finalize: {_numbered(guards)}; then {_FINALIZE} (`zk2kraft rollback` is still possible)",
            notes,
        )
    if alive and code == KafkaMigrationCode.PRE_MIGRATION and facts.log.open_transaction is None:
        # the soft start: ZooKeeper is not claimed until every broker has registered
        return (
            f"a controller is waiting for the brokers to register, or copying once all have "
            f"({writer.describe()}): start the ZooKeeper-mode brokers with "  # type: ignore[union-attr]
            "zookeeper.metadata.migration.enable=true and its address in controller.quorum.voters",
            notes,
        )
    if state is S.MIGRATING_ZK_DATA:
        if alive:
            return f"a writer is at work ({writer.describe()}): wait for it, then `zk2kraft status`", notes  # type: ignore[union-attr]
        if facts.log.open_transaction is not None:
            return f"{_restart(writer)}: the interrupted copy is aborted and redone", notes
        return f"{_restart(writer)}: it resumes from the log", notes
    if alive and state is not S.MIGRATION_FINALIZED:
        return f"a writer is at work ({writer.describe()}): wait for it, then `zk2kraft status`", notes  # type: ignore[union-attr]
    if state is S.MIGRATION_FINALIZED:
        return handover(facts.log.log_dir), notes
    return facts.derived.next_action, notes


def migration_health(facts: Facts, log_dir: str | None) -> MigrationHealth:
    """`check` once migrating has begun: state, lag, writer and brokers, what is wrong, the next step."""
    lf, zk = facts.log, facts.zk
    writer = read_writer(log_dir) if log_dir is not None else None
    state, kafka = facts.derived.state, lf.migration_code
    alone = zk_alone(zk) if log_dir is None or not lf.exists else None
    if alone is not None:  # the log is not read: the state is what ZooKeeper alone proves
        state, kafka = alone.state, alone.kafka_code
    h = MigrationHealth(
        state=state.public_name,
        kafka_state=KafkaMigrationCode(kafka).name if kafka is not None else None,
        write_behind_lag=facts.lag,
        writer=writer,
        zk_registered_brokers=list(zk.registered_brokers),
        kraft_registered_brokers=sorted(lf.replay.image.brokers) if lf.replay is not None else [],
    )
    if log_dir is None:
        h.problems.append(
            f"no --log-dir given: {alone.proof if alone else 'ZooKeeper is claimed'}; the log's lag and "
            "writer cannot be checked"
        )
        h.next_action = (
            "run `zk2kraft check --log-dir DIR` with the controller's metadata log directory (a claim left "
            "by a lost controller: `zk2kraft check --preflight`)"
        )
        return h
    if not lf.exists:
        h.problems.append(
            f"{alone.proof + '; ' if alone else ''}{log_dir} holds no metadata log of this cluster: it is not "
            "that controller's log"
        )
        h.next_action = (
            "point --log-dir at the migration's metadata log directory (`zk2kraft status` names it)"
        )
        return h
    h.problems += list(facts.derived.anomalies)
    waiting = lf.migration_code == KafkaMigrationCode.PRE_MIGRATION and lf.open_transaction is None
    writing = writer is not None and writer.alive
    if writer is not None and not writer.alive:
        h.problems.append(f"the log's writer is gone: {writer.describe()}")
    if facts.derived.state is S.DUAL_WRITE_METADATA and facts.lag > 0 and not writing:
        h.problems.append(f"{facts.lag} committed records are not in ZooKeeper and no writer is syncing them")
    if lf.open_transaction is not None and not writing:
        h.problems.append(f"the copy was interrupted (transaction {lf.open_transaction.name!r} is open)")
    elif waiting and not writing:
        h.problems.append("the log holds PRE_MIGRATION but no controller is waiting for the brokers")
    h.next_action, _ = next_step(facts, writer)
    return h


class WrongLog(NamedTuple):
    """--log-dir is not the migration's log: what is wrong, the next step, the claim's live writer."""

    problem: str
    next_action: str
    writer: WriterInfo | None = None


def not_this_log(client: KazooClient, facts: Facts, log_dir: str, found: BindingProblem) -> WrongLog:
    """(what is wrong, the next step) when --log-dir does not hold ZooKeeper's claim (`log_binding`).

    Reading commands say what ZooKeeper alone proves and where the right log is; with the claim's
    controller alive the mistake is the directory, never the controller, so stopping it is not advised.
    """
    alone = zk_alone(facts.zk)
    proof = f"{alone.proof}; " if alone is not None else ""
    writer = log_binding.read_writer(client) if found.live else None
    if writer is None:
        bound = log_binding.read_binding(client)
        if bound is None or bound.path == str(Path(log_dir).resolve()):  # the claim's own directory, damaged
            return WrongLog(f"{proof}{found.message}", log_binding.TAKEOVER_HINT)
        where = f" ({bound.path} on {bound.host})"
        return WrongLog(
            f"{proof}{found.message}", f"point --log-dir at the log directory that holds the claim{where}"
        )
    lf = facts.log
    why = (
        f"it belongs to cluster {lf.foreign_cluster}"
        if lf.foreign_cluster is not None
        else ("it holds no metadata log" if not lf.exists else "it is another log")
    )
    return WrongLog(
        f"{proof}another live writer holds ZooKeeper's claim: {writer.describe()}; -l {log_dir} is not that "
        f"controller's log ({why})",
        f"point --log-dir at the controller's log: `zk2kraft status -l {writer.path}`",
        WriterInfo(pid=writer.pid, host=writer.host, since=writer.since, command=writer.command, alive=True),
    )


def wrong_log_health(facts: Facts, wrong: WrongLog) -> MigrationHealth | None:
    """`check` with a --log-dir that is not the migration's (`not_this_log`'s text): the state ZooKeeper
    alone proves, the mistake as the problem, the right directory as the next step; None when
    ZooKeeper shows no migration."""
    alone = zk_alone(facts.zk)
    if alone is None:
        return None
    return MigrationHealth(
        state=alone.state.public_name,
        kafka_state=alone.kafka_code.name if alone.kafka_code is not None else None,
        writer=wrong.writer,
        zk_registered_brokers=list(facts.zk.registered_brokers),
        next_action=wrong.next_action,  # the problem is `check`'s LOG_NOT_BOUND finding
    )
