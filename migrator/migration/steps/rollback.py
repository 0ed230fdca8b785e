"""`rollback`: back to ZooKeeper mode from MigratingZkData or DualWriteMetadata.

Drains the syncer first (ZooKeeper must hold everything the log committed), then renames the log
directory aside (kept for forensics) *before* releasing ZooKeeper, so a crash in between never
leaves a log that a later `migrate` could resume from. The release deletes /controller and
/migration and lifts /controller_epoch above every KRaft epoch (KAFKA-20488).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from migrator.errors import BadInputError
from migrator.migration import drift, log_binding
from migrator.migration.facts import gather_zk, require_own_log
from migrator.migration.faults import crash_point
from migrator.migration.steps.claim import claim, covered, syncer
from migrator.migration.steps.preflight import archive
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
from migrator.results import RollbackResult
from migrator.zk import paths as P
from migrator.zk.migration_client import Claim, MigrationClient

ORPHANED = (
    "--force-orphaned",
    "ZooKeeper is released to ZooKeeper-mode controllers without draining the lost log",
)


def rollback(
    opts: DriverOptions, *, yes: bool = False, force_orphaned: bool = False, accept_drift: bool = False
) -> RollbackResult:
    """Back to ZooKeeper mode: drain, archive the log, give ZooKeeper back with its epoch above KRaft's."""
    with connected(opts) as zk:
        run = Run.start(zk, opts)
        takeover = log_binding.guard(
            run.client,
            run.facts,
            opts.target.log_dir,
            takeover=ORPHANED if force_orphaned else None,
            archived_ok=True,
        )
        state = run.state
        # Refuses a state without rollback (finalized, ineligible) or a missing --yes before any write;
        # the lag is what the drain below removes, so it counts only when asked again after it.
        ask(state, E.ROLLBACK, dataclasses.replace(run.guards(confirmed=yes), write_behind_lag=0))
        run.result = result = RollbackResult(
            state_before=public(state), state_after=public(state), kraft_epoch=-1, zk_controller_epoch=-1
        )
        if takeover is not None:
            result.actions.append(takeover)
        if run.facts.log.exists:
            run.log = open_log(opts.target, run.facts.zk.cluster_id, run.node_id)
        elif run.facts.log.foreign_cluster is not None:
            require_own_log(run.facts)
        try:
            taken: Claim | None = None
            if run.log is not None:
                facts = run.regather()
                run.state = state = facts.derived.state
                if state is S.DUAL_WRITE_METADATA and (facts.lag > 0 or covered(facts, run.log)[0] < 0):
                    taken, drained = drain(run)
                    result.drained_records = drained
                    result.actions.append(f"drained the syncer: {drained} records written to ZooKeeper")
                    run.regather()
            facts = run.facts
            # the lag that counts is dual write's: before the copy committed nothing is to drain
            guards = run.guards(confirmed=yes)
            if state is not S.DUAL_WRITE_METADATA:
                guards = dataclasses.replace(guards, write_behind_lag=0)
            run.state = ask(state, E.ROLLBACK, guards)
            if state is S.DUAL_WRITE_METADATA and facts.log.replay is not None:
                kept = drift.refuse_drift(
                    drift.zk_drift(run.client, facts.log.replay, facts.zk.controller), accept_drift
                )
                if kept is not None:
                    result.actions.append(kept)
            crash_point("rollback.drained")
            kraft_epoch = max(
                facts.log.latest_epoch,
                facts.zk.controller.kraft_controller_epoch if facts.zk.controller is not None else -1,
                facts.zk.migration.kraft_controller_epoch if facts.zk.migration is not None else -1,
                taken.kraft_epoch if taken is not None else -1,
            )
            result.kraft_epoch = kraft_epoch
            if run.log is not None:
                run.log.close()
                run.log = None
                result.archived_log = archive(Path(opts.target.log_dir), "rolled-back")
                result.actions.append(f"archived the log directory to {result.archived_log}")
                crash_point("rollback.archived")
            result.zk_controller_epoch, result.removed = release(zk, taken, kraft_epoch)
            log_binding.forget(run.client)
            crash_point("rollback.released")
            result.actions.append(
                f"released ZooKeeper: removed {', '.join(result.removed) or 'nothing'}; /controller_epoch is now "
                f"{result.zk_controller_epoch}, above KRaft epoch {kraft_epoch}"
            )
            result.state_after = public(run.regather().derived.state)
        finally:
            if run.log is not None:
                run.log.close()
    return result


def drain(run: Run) -> tuple[Claim, int]:
    """Bring ZooKeeper up to the log's last record under a fresh claim; (claim, records synced)."""
    log, facts = run.log, run.facts
    assert log is not None
    cover = covered(facts, log)
    taken, migration = claim(run.zk, log, facts, run.node_id, cover)
    s = syncer(run.client, log, taken, migration, facts)
    s.reconcile(run.replay())
    s.sync()
    lag = s.lag()
    if lag > 0:
        raise RefusedError(
            f"cannot roll back: {lag} committed records are still not in ZooKeeper after a sync"
        )
    return taken, max(0, facts.log.last_record_offset - max(cover[0], -1))


def release(zk: MigrationClient, taken: Claim | None, kraft_epoch: int) -> tuple[int, list[str]]:
    """Delete /controller and /migration and lift /controller_epoch above `kraft_epoch`."""
    before = gather_zk(zk.zk)
    removed = [
        p
        for p, present in (
            (P.CONTROLLER, before.kraft_holds_controller),
            (P.MIGRATION, before.migration is not None),
        )
        if present
    ]
    if taken is None:
        taken = zk.read_claim()
    if taken is not None:
        return zk.release(taken, bump_above=kraft_epoch), removed
    # No KRaft claim left (a crash after part of an earlier release): version-checked writes only.
    epoch = before.zk_controller_epoch
    if epoch is None or before.controller_epoch_zk_version is None:
        raise BadInputError(f"{P.CONTROLLER_EPOCH} missing: is this a Kafka cluster?")
    migration_version = before.migration.zk_version if before.migration is not None else None
    return zk.release_unclaimed(
        epoch, before.controller_epoch_zk_version, migration_version, kraft_epoch
    ), removed


__all__ = ["ORPHANED", "drain", "release", "rollback"]
