"""`finalize`: DualWriteMetadata → MigrationFinalized, POST_MIGRATION in the log.

The FINALIZE transition is asked twice: before the log is opened (a refusal writes nothing) and again
on the facts gathered under the writer lock, since a follower may have appended meanwhile.

A run that died after POST_MIGRATION was durable but before the handover was prepared left a finalized
migration whose directory Kafka's controller would still have to repair: `finalize` again only completes
the handover (when nothing was appended after POST_MIGRATION, so the directory is still zk2kraft's).
"""

from __future__ import annotations

from migrator.errors import FindingsError, ZkKraftError
from migrator.kraft import handover
from migrator.kraft.records import MetadataRecord, record
from migrator.migration import advice, health, log_binding
from migrator.migration.facts import require_own_log
from migrator.migration.faults import crash_point
from migrator.migration.steps.claim import next_epoch
from migrator.migration.steps.run import (
    DriverOptions,
    E,
    RefusedError,
    Run,
    S,
    ask,
    connected,
    open_log,
    public,
)
from migrator.results import FinalizeResult
from state_machine import KafkaMigrationCode


def finalize(opts: DriverOptions, *, yes: bool = False, rehearsal: bool = False) -> FinalizeResult:
    """DualWriteMetadata → MigrationFinalized: POST_MIGRATION in the log; ZooKeeper is not written again."""
    with connected(opts) as zk:
        run = Run.start(zk, opts)
        log_binding.guard(run.client, run.facts, opts.target.log_dir)
        before = run.state
        if before == S.MIGRATION_FINALIZED and _handover_pending(opts.target.log_dir):
            return _complete_handover(opts, run)
        if before is S.DUAL_WRITE_METADATA:  # every unmet guard at once, each with what meets it
            unmet = advice.finalize_guards(
                run.facts,
                health.read_writer(opts.target.log_dir),
                rehearsal=rehearsal,
                confirmed=yes,
                blockers=run.blockers,
            )
            if unmet:
                raise RefusedError(advice.finalize_refusal(unmet))
        ask(before, E.FINALIZE, run.guards(confirmed=yes))  # refused here, nothing is opened
        require_own_log(run.facts)
        log = run.log = open_log(opts.target, run.facts.zk.cluster_id, run.node_id)
        try:
            facts = run.regather()
            run.state = facts.derived.state  # derived again under the writer lock
            run.advance(E.FINALIZE, confirmed=yes)
            health.require_kraft_brokers(facts, rehearsal)
            crash_point("finalize.before-record")
            epoch = next_epoch(log, facts)
            _, offset = log.append(
                [
                    record(
                        "ZkMigrationStateRecord", 0, ZkMigrationState=int(KafkaMigrationCode.POST_MIGRATION)
                    )
                ],
                epoch,
            )
            after = run.regather()
            crash_point("finalize.after-record")
            handover.prepare(log)  # issue 15: the directory Kafka's own controller starts from
        finally:
            log.close()
    return FinalizeResult(
        state_before=public(before),
        state_after=public(after.derived.state),
        offset=offset,
        epoch=epoch,
        message=(
            f"wrote ZkMigrationStateRecord(POST_MIGRATION) at offset {offset}: the migration is finalized and "
            "ZooKeeper receives no more writes; it cannot be rolled back"
        ),
    )


def _handover_pending(log_dir: str) -> bool:
    """Whether Kafka would still refuse or rebuild something in the finalized directory."""
    try:
        return not handover.check(log_dir).ok
    except ZkKraftError:  # no log directory there: the usual refusal says what is wrong
        return False


def _complete_handover(opts: DriverOptions, run: Run) -> FinalizeResult:
    """Finalized, handover not prepared (the last run died in between): prepare it now."""
    require_own_log(run.facts)
    log = run.log = open_log(opts.target, run.facts.zk.cluster_id, run.node_id)
    try:
        end = log.end_offset
        last = next(((o, e, r) for o, e, r in log.read(max(end - 1, 0)) if o == end - 1), None)
        post = int(KafkaMigrationCode.POST_MIGRATION)
        if (
            last is None
            or not isinstance(last[2], MetadataRecord)
            or last[2].name != "ZkMigrationStateRecord"
            or last[2].fields.get("ZkMigrationState") != post
        ):
            raise FindingsError(
                f"{opts.target.log_dir}: the migration is finalized but records follow POST_MIGRATION (a Kafka "
                "controller may own the directory now): the handover is not redone; see `log verify --kafka`"
            )
        done = handover.prepare(log)
    finally:
        log.close()
    state = public(S.MIGRATION_FINALIZED)
    return FinalizeResult(
        state_before=state,
        state_after=state,
        offset=last[0],
        epoch=last[1],
        message=(
            f"already finalized at offset {last[0]}; the handover the last run did not finish is complete now "
            f"({'; '.join(done)})"
        ),
    )
