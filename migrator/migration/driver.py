"""The migration driver: runs the state machine from wherever the durable facts say it is.

Every command starts the same way: gather the facts and derive the state; nothing is remembered
between runs except what the log and ZooKeeper hold. `migrate` then runs, while it is not at its goal
(DualWriteMetadata with ZooKeeper synced under its own claim), the step for the current state, and the
next state is the state machine's answer to the event that step completed, its guards fed from the
facts the step gathered:

- MigrationIneligible: pre-flight (`steps.preflight`) → START → MigratingZkData;
- MigratingZkData: open the log, soft start and wait for brokers (`steps.soft_start`), claim, abort an
  interrupted copy (ABORT_COPY), copy (`steps.copy`) → COMMIT_COPY → DualWriteMetadata;
- DualWriteMetadata: the first sync after the copy, or re-claim, reconcile and sync after a restart
  (`steps.first_sync`): the goal.

`--follow` then stays the controller (`steps.follow`). The other commands are one step each: `plan`
and `status` (`steps.status`), `finalize`, `rollback`, `admin` (`steps.finalize`, `.rollback`, `.admin`).
ZooKeeper is reached through `zk.migration_client` only.
"""

from __future__ import annotations

import dataclasses
import gc
import time
from collections.abc import Callable

from kazoo.client import KazooClient

from migrator import stop as stopping
from migrator.bulk import without_gc
from migrator.errors import BadInputError
from migrator.kraft.log import MetadataLog
from migrator.kraft.retention import release_snapshots, release_snapshots_beside
from migrator.migration import advice, health, log_binding
from migrator.migration.facts import Facts, gather
from migrator.migration.faults import crash_point
from migrator.migration.steps import claim as claim_step
from migrator.migration.steps.admin import admin, admin_many
from migrator.migration.steps.claim import ZK_MIGRATION_STATE_KEY, GuardedSyncer
from migrator.migration.steps.copy import copy
from migrator.migration.steps.finalize import finalize
from migrator.migration.steps.first_sync import sync
from migrator.migration.steps.follow import FOLLOWING, follow
from migrator.migration.steps.preflight import preflight
from migrator.migration.steps.rollback import rollback
from migrator.migration.steps.run import (
    DEFAULT_BROKER_WAIT_SECONDS,
    DriverOptions,
    E,
    MigrateOptions,
    RefusedError,
    Run,
    S,
    connected,
    kafka_name,
    open_log,
    public,
    refused,
    replay_of,
)
from migrator.migration.steps.soft_start import (
    BROKERS_FLAG_MESSAGE,
    BrokersNotReadyError,
    brokers_missing,
    serve,
    zk_propagator_status,
)
from migrator.migration.steps.status import plan, status
from migrator.model import MigrationZnode
from migrator.results import (
    AdminResult,
    FinalizeResult,
    MigrateResult,
    PlanResult,
    RollbackResult,
    StatusResult,
)
from migrator.target import DEFAULT_NODE_ID, Target
from migrator.zk.migration_client import Claim, MigrationClient
from state_machine import MigrationEvent, MigrationState

__all__ = [
    "BROKERS_FLAG_MESSAGE",
    "DEFAULT_BROKER_WAIT_SECONDS",
    "DEFAULT_NODE_ID",
    "ZK_MIGRATION_STATE_KEY",
    "AdminResult",
    "BrokersNotReadyError",
    "DriverOptions",
    "FinalizeResult",
    "GuardedSyncer",
    "MigrateOptions",
    "MigrateResult",
    "PlanResult",
    "RefusedError",
    "RollbackResult",
    "StatusResult",
    "admin",
    "admin_many",
    "brokers_missing",
    "finalize",
    "gather",
    "migrate",
    "plan",
    "refused",
    "rollback",
    "status",
    "zk_propagator_status",
]

# What the stop line (SIGTERM/SIGINT, migrator.stop) says before the copy: the next run starts again.
BEFORE_COPY = ("before the copy", "the next `zk2kraft migrate` starts it again")
RECOPY = ("--recopy", "ZooKeeper's data is copied again into this new log and the claim bound to it")

#: the step for each state `migrate` passes through; each returns the event it completed
STEPS: dict[MigrationState, Callable[[Run], MigrationEvent | None]] = {
    S.NONE: lambda run: E.START,  # nothing to do but ask: the table refuses a log born in KRaft mode
    S.MIGRATION_INELIGIBLE: preflight,
    S.MIGRATING_ZK_DATA: copy,
    S.DUAL_WRITE_METADATA: sync,
}


def at_goal(run: Run) -> bool:
    return run.state is S.DUAL_WRITE_METADATA and run.synced


def migrate(opts: DriverOptions, options: MigrateOptions) -> MigrateResult:
    """Run the migration from the derived state to DualWriteMetadata (and keep following with `follow`).

    With the Target's `listen`, the controller protocol is served on that address from the start: in
    soft start (registration and heartbeats only) while the copy waits for every ZooKeeper broker to
    register, then in full once the copy is committed. `on_listen` is given the service and its bound
    address (in-process users: tests, the broker simulator). `recopy`: take over from a lost log
    directory (log_binding): copy ZooKeeper into a new log and rebind the claim to it. `reconcile`: once
    synced, read ZooKeeper afresh and reconcile all of it with the log (`steps.first_sync.full_reconcile`).
    """
    started = time.perf_counter()
    with stopping.phase(*BEFORE_COPY), connected(opts) as zk:
        run = Run.start(zk, opts, migrate=options)
        facts, state = run.facts, run.state
        if opts.metrics is not None:
            opts.metrics.on_state(facts.log.migration_code)
            options = dataclasses.replace(options, progress=opts.metrics.tee_progress(options.progress))
            run.migrate = options
        run.result = result = MigrateResult(
            state_before=public(state), state_after=public(state), anomalies=list(facts.derived.anomalies)
        )
        takeover = log_binding.guard(
            zk.zk, facts, opts.target.log_dir, takeover=RECOPY if options.recopy else None
        )
        if takeover is not None:
            opts.note(takeover)
            result.actions.append(takeover)
        if state is S.MIGRATION_FINALIZED:
            return _finalized(run)
        needs_brokers = state in (S.MIGRATION_INELIGIBLE, S.MIGRATING_ZK_DATA)
        if needs_brokers and not options.brokers_from_zk and opts.target.listen is None:
            raise BadInputError(BROKERS_FLAG_MESSAGE)
        frozen = False
        try:
            # `run.held`: what a step holds for the steps after it (the brokers' wait during the copy).
            # The collector is paused from the pre-flight to the goal: the steps keep whole-cluster
            # trees and images alive (millions of objects, no cycles) that every collection between
            # the bulk builds rescanned (7 s of a 78 s `migrate` at 1M partitions; migrator.bulk).
            with run.held, without_gc():
                while not at_goal(run):
                    event = STEPS[run.state](run)
                    if event is not None:
                        run.advance(event)
                # What lives now (the image, the syncer's picture: millions of objects allocated while
                # the collector was paused, all in its youngest generation) is frozen before it resumes:
                # else its first collections walk all of it, once per generation, right after the
                # activation, while brokers call (AlterPartition p99 about 1 s and -30% at 100k).
                # Unfrozen when this run ends, so that an in-process caller's garbage is collected.
                gc.freeze()
                frozen = True
            _serve_and_follow(run, started)
        finally:
            if frozen:
                gc.unfreeze()
            if run.own_writes is not None:  # a run refused before the copy: stop recording writes
                run.own_writes.stop()
            try:
                if run.runtime is not None:
                    run.runtime.close()
            finally:
                if run.log is not None:
                    run.log.close()
    return result


def _finalized(run: Run) -> MigrateResult:
    if run.migrate.follow:
        raise RefusedError(
            "the migration is finalized: ZooKeeper is no longer written, there is nothing to follow; next: "
            + advice.handover(run.target.log_dir)
        )
    facts, result = run.facts, run.result
    result.actions.append("nothing to do: the migration is finalized")
    result.kafka_code_after = kafka_name(facts.log.migration_code)
    result.log_end_offset = facts.log.end_offset
    result.migration_offset = (
        facts.zk.migration.kraft_metadata_offset if facts.zk.migration is not None else None
    )
    return result  # type: ignore[no-any-return]


def _record(run: Run, facts: Facts) -> None:
    result = run.result
    result.lag = facts.lag
    result.log_end_offset = facts.log.end_offset
    result.migration_offset = facts.zk.migration.kraft_metadata_offset if facts.zk.migration else None


def _serve_and_follow(run: Run, started: float) -> None:
    """At the goal: serve the protocol in full (with --listen), report, and follow (with --follow)."""
    opts, result = run.opts, run.result
    # A one-shot `migrate` reuses the first sync's image (the syncer took the log's over) instead of
    # replaying the whole log once more; a controller that goes on serving replays its own.
    one_shot = run.syncer is not None and not run.migrate.follow and run.target.listen is None
    t0 = time.perf_counter()
    facts = run.regather(run.syncer.replay_at_log_end() if one_shot and run.syncer is not None else None)
    if run.target.listen is not None:
        serve(run)
        if run.copied and run.dark_started is not None:
            # Brokers get no metadata change until the service is activated, so the window ends here,
            # not at the first sync: the image the service starts from (a replay of the whole log,
            # ~6-8 s at 1M partitions) is inside it (issue 29), and timed on its own.
            run.timings["activation"] = round(time.perf_counter() - t0, 3)
            run.timings["dark_window"] = round(time.perf_counter() - run.dark_started, 3)
    _snapshot_after_activation(run, one_shot)
    result.state_after = public(facts.derived.state)
    result.kafka_code_after = kafka_name(facts.log.migration_code)
    if opts.metrics is not None:
        opts.metrics.on_state(facts.log.migration_code)
    _record(run, facts)
    run.timings["total"] = round(time.perf_counter() - started, 3)
    result.timings = run.timings
    opts.note(  # as it happens: a redirected log sees it now, not at shutdown
        health.state_line(
            result.state_before,
            result.state_after,
            result.kafka_code_after,
            result.log_end_offset,
            result.migration_offset,
            result.lag,
            result.manifest.records if result.manifest is not None else None,
        )
    )
    if run.migrate.follow:
        with stopping.phase(*FOLLOWING):
            follow(run)
            facts = run.regather()
        _record(run, facts)


def _snapshot_after_activation(run: Run, one_shot: bool) -> None:
    """The snapshot the copy's commit made due (`steps.copy` held it), written now that the dark
    window is over: from the first sync's image in a one-shot `migrate` (no second replay); beside
    the activated service (whose threads append meanwhile) from the image it was activated with."""
    if run.log is None or not run.copied:
        return
    crash_point("sync.before-snapshot")
    with run.timed("snapshot"):
        if run.runtime is not None:
            lf = run.facts.log
            if lf.replay is not None:
                release_snapshots_beside(run.log, lf.replay, lf.end_offset, run.runtime.service.exclusive)
            else:  # no image at hand: the service's next append writes it
                release_snapshots(run.log, now=False)
            return
        at_end = run.syncer.replay_at_log_end() if one_shot and run.syncer is not None else None
        release_snapshots(run.log, at_end)


# --- kept for callers that reach the claim and syncer directly (tests) --------------------------------


def _open_log(log_dir: str, cluster_id: str | None, node_id: int) -> MetadataLog:
    return open_log(Target(log_dir=log_dir), cluster_id, node_id)


def _claim(
    client: KazooClient, log: MetadataLog, facts: Facts, node_id: int, covered: tuple[int, int]
) -> tuple[Claim, MigrationZnode]:
    return claim_step.claim(MigrationClient(client), log, facts, node_id, covered)


_covered = claim_step.covered
_syncer = claim_step.syncer
_replay_of = replay_of
