"""`finalize`: DualWriteMetadata → MigrationFinalized, POST_MIGRATION in the log.

The FINALIZE transition is asked twice: before the log is opened (a refusal writes nothing) and again
on the facts gathered under the writer lock, since a follower may have appended meanwhile.
"""

from __future__ import annotations

from migrator.kraft import handover
from migrator.kraft.records import record
from migrator.migration import health, log_binding
from migrator.migration.facts import require_own_log
from migrator.migration.faults import crash_point
from migrator.migration.steps.claim import next_epoch
from migrator.migration.steps.run import DriverOptions, E, Run, ask, connected, open_log, public
from migrator.results import FinalizeResult
from state_machine import KafkaMigrationCode


def finalize(opts: DriverOptions, *, yes: bool = False, rehearsal: bool = False) -> FinalizeResult:
    """DualWriteMetadata → MigrationFinalized: POST_MIGRATION in the log; ZooKeeper is not written again."""
    with connected(opts) as zk:
        run = Run.start(zk, opts)
        log_binding.guard(run.client, run.facts, opts.log_dir)
        before = run.state
        ask(before, E.FINALIZE, run.guards(confirmed=yes))  # refused here, nothing is opened
        require_own_log(run.facts)
        log = run.log = open_log(opts.log_dir, run.facts.zk.cluster_id, run.node_id)
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
