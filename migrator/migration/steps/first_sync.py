"""DualWriteMetadata's step: ZooKeeper reconciled with the log and synced under this run's claim.

Straight after the copy the reconciliation reuses the copy's read of ZooKeeper (the run's one read):
the repairs it finds (a pending deletion finished, missing ACL or change znodes created) are written
in the first fenced multis, and nothing is read again. After a restart or a takeover the run
re-claims first (closing a dangling transaction) and reconciles from a fresh read, since another
writer may have been at work. `migrate --reconcile` asks for that full reconcile from a fresh read
on any run, as its own step, timed apart (`timings["full_reconcile"]`) and outside the dark window.
Either way the run is then at its goal.
"""

from __future__ import annotations

import time

from migrator import stop as stopping
from migrator.lock_rule import DARK_WINDOW, allowed
from migrator.migration import copy as copy_mod
from migrator.migration import log_binding
from migrator.migration.faults import crash_point
from migrator.migration.steps.claim import abort_reason, claim_for_run, covered, syncer
from migrator.migration.steps.preflight import open_run_log
from migrator.migration.steps.run import Run, jsonable

SYNCING = (
    "while syncing ZooKeeper (the copy is committed: DualWriteMetadata)",
    "the next `zk2kraft migrate` or `controller` reconciles ZooKeeper with the log and carries what it lacks",
)


def sync(run: Run) -> None:
    """The first sync after the copy, or the resumed dual write; no transition: DualWriteMetadata stays."""
    if run.copied:
        # still the copy's dark window: the service's lock is held since the copy began (steps.copy),
        # so its ZooKeeper waits are the declared exception of migrator.lock_rule
        with stopping.phase(*SYNCING), allowed(DARK_WINDOW):
            first_sync(run)
        assert run.dark_started is not None and run.claim is not None
        run.timings["dark_window"] = round(time.perf_counter() - run.dark_started, 3)
        if run.runtime is not None:
            # the claim started a new epoch in the log: what the service appends from here to its
            # activation (registrations, heartbeats) belongs to it
            run.runtime.service.epoch = run.claim.kraft_epoch
        if run.migrate.reconcile:
            with stopping.phase(*SYNCING), allowed(DARK_WINDOW):
                full_reconcile(run)
    else:
        if run.log is None:
            open_run_log(run)
        with stopping.phase(*SYNCING):
            resume(run)
    run.synced = True


def full_reconcile(run: Run) -> None:
    """--reconcile after the first sync: ZooKeeper read afresh and diffed in full against the log."""
    assert run.syncer is not None
    run.note("reconciling all of ZooKeeper with the log (--reconcile)")
    t0 = time.perf_counter()
    repairs = run.syncer.reconcile()
    run.timings["full_reconcile"] = round(time.perf_counter() - t0, 3)
    run.result.repairs += [jsonable(r) for r in repairs]
    run.result.actions.append(
        f"--reconcile: read ZooKeeper again and reconciled it in full with the log "
        f"({len(repairs)} repair{'s' if len(repairs) != 1 else ''}, {run.timings['full_reconcile']:.2f}s)"
    )


def resume(run: Run) -> None:
    """DualWriteMetadata after a restart: re-claim, close a dangling transaction, reconcile, sync."""
    log, result = run.log, run.result
    assert log is not None
    with run.timed("claim"):
        cover = covered(run.facts, log)
        claim = claim_for_run(run, cover)
        result.actions.append(
            f"re-claimed /controller in epoch {claim.kraft_epoch}"
            + (
                ""
                if cover[0] >= 0
                else "; /migration did not cover this log, so ZooKeeper is reconciled in full"
            )
        )
    txn = run.facts.log.open_transaction
    if txn is not None:
        offset = copy_mod.abort_open_transaction(log, claim.kraft_epoch, txn, abort_reason(txn))
        result.aborted_transaction = f"{txn.name!r} begun at offset {txn.begin_offset}, aborted at {offset}"
        result.actions.append(f"aborted the dangling transaction {result.aborted_transaction}")
        run.regather()
    run.tree = None  # after a takeover ZooKeeper is reconciled from a fresh read (what --reconcile asks)
    first_sync(run)


def first_sync(run: Run) -> None:
    """SYNC_KRAFT_TO_ZK: ZooKeeper reconciled against the image (from the copy's tree), then the records."""
    log, result, claim, migration = run.log, run.result, run.claim, run.migration
    assert log is not None and claim is not None and migration is not None
    run.note("reconciling ZooKeeper with the log")
    t0 = time.perf_counter()
    # the copy is committed now: its (offset, epoch) joins the log identity bound to the claim
    log_binding.record_claim(
        run.client,
        claim,
        log_binding.identity_of(log, run.facts, claim.kraft_epoch, log_binding.read_binding(run.client)),
    )
    run.syncer = s = syncer(run.client, log, claim, migration, run.facts)
    s.metrics = run.opts.metrics
    if run.opts.metrics is not None:  # live from the first sync, not only once `follow` starts
        run.opts.metrics.track_lag(s.lag)
    # The syncer takes the log's image over instead of copying a whole cluster (the client's biggest
    # object, twice); the log forgets it, and the facts are gathered again before anyone reads them.
    replay = run.replay()
    log.forget_image()
    tree, run.tree = run.tree, None
    repairs = s.reconcile(replay, tree, take=True)
    del replay, tree
    crash_point("sync.after-reconcile")
    result.repairs = [jsonable(r) for r in repairs]
    run.timings["reconcile"] = round(time.perf_counter() - t0, 3)
    t1 = time.perf_counter()
    report = s.sync()
    crash_point("sync.after-sync")
    result.sync = jsonable(report)
    run.timings["sync"] = round(time.perf_counter() - t1, 3)
    result.actions.append(
        f"reconciled ZooKeeper ({len(repairs)} repair{'s' if len(repairs) != 1 else ''}) and synced the log"
    )
