"""MigratingZkData's step: open the log, soft start (with --listen), claim, abort an interrupted copy, copy.

The claim fences every other controller before ZooKeeper is read for the copy, so the first sync can
reconcile from that same read instead of reading ZooKeeper again (a read that was not one consistent
view is not reused). That read is the pre-flight's own, brought to the present, when ZooKeeper's zxids
prove nothing but this run's writes happened since it (`zk.read_reuse`): one read per `migrate`. The step ends by asking for COMMIT_COPY, guarded by the log's own record.
"""

from __future__ import annotations

import time

from migrator import stop as stopping
from migrator.kraft.retention import hold_snapshots
from migrator.lock_rule import DARK_WINDOW, allowed
from migrator.migration import copy as copy_mod
from migrator.migration.faults import crash_point
from migrator.migration.steps.claim import abort_reason, claim_for_run
from migrator.migration.steps.preflight import open_run_log
from migrator.migration.steps.run import E, Run
from migrator.migration.steps.soft_start import soft_start_and_wait
from migrator.migration.zk_diff import ZkPicture
from migrator.zk import paths as P
from migrator.zk.migration_client import LayoutResult, ZkTree
from state_machine import MigrationEvent

#: what the claim writes in Kafka's tree: the pre-flight's image stays valid when only these changed
CONTROL_PATHS = frozenset((P.CONTROLLER, P.CONTROLLER_EPOCH, P.MIGRATION))

# What the stop line (SIGTERM/SIGINT, migrator.stop) says during the copy and what the next run does.
COPYING = (
    "during the copy",
    "the copy transaction, if begun, is left open as after a crash: the next `zk2kraft migrate` aborts it "
    "and copies ZooKeeper again (all or nothing)",
)


def copy(run: Run) -> MigrationEvent:
    """Everything from the open log to the committed copy; the next state is COMMIT_COPY's answer."""
    if run.log is None or run.bound_early:
        run.bound_early = False
        open_run_log(run)  # a log opened before the pre-flight (preflight.bind_early) is kept
        soft_start_and_wait(run)
        if run.runtime is not None:  # brokers wait while the copy writes the log
            run.held.enter_context(run.runtime.service.exclusive())
    # timings["dark_window"] spans the claim to DualWriteMetadata (with --listen, to the activation):
    # the controller serves nothing but registrations and heartbeats meanwhile (KIP-866), so it is
    # the figure the single-read work targets.
    run.dark_started = time.perf_counter()
    # The one ZooKeeper work under the service's lock (migrator.lock_rule): the copy's reads and
    # writes, which brokers wait for by design until the copy commits (the dark window above).
    with stopping.phase(*COPYING), allowed(DARK_WINDOW):
        claim_and_copy(run)
    return E.COMMIT_COPY


def claim_and_copy(run: Run) -> None:
    log, result = run.log, run.result
    assert log is not None
    with run.timed("claim"):
        run.note("claiming ZooKeeper controllership")
        claim = claim_for_run(run, (-1, -1))
        result.actions.append(
            f"claimed /controller as KRaft controller {claim.kraft_controller_id} in epoch {claim.kraft_epoch} "
            f"(/controller_epoch {claim.zk_controller_epoch})"
        )
    reused, decoded = _reuse_preflight_read(run)
    lf = run.facts.log
    replay = lf.replay
    if lf.migration_code is None and (replay is None or "metadata.version" not in replay.feature_levels):
        copy_mod.append_bootstrap(log, claim.kraft_epoch)
        result.actions.append(
            f"wrote the bootstrap records (metadata.version {copy_mod.BOOTSTRAP_METADATA_VERSION}, PRE_MIGRATION)"
        )
    txn = lf.open_transaction
    if txn is not None:
        run.advance(E.ABORT_COPY)
        offset = copy_mod.abort_open_transaction(log, claim.kraft_epoch, txn, abort_reason(txn))
        result.aborted_transaction = f"{txn.name!r} begun at offset {txn.begin_offset}, aborted at {offset}"
        result.actions.append(
            f"aborted the interrupted transaction {result.aborted_transaction}; copying again"
        )
    t1 = time.perf_counter()
    if reused is not None:
        layout, zxid, consistent, tree = copy_mod.tree_image(reused, decoded)
    else:
        run.note("reading ZooKeeper")
        layout, zxid, consistent, tree = copy_mod.read_zk_tree_image(run.client)
    read_seconds = time.perf_counter() - t1 + run.timings.get("reuse_check", 0.0)
    # What the first sync needs of the read, and nothing more: the ZNodes go before the copy's
    # commit replays the log (the tree was 1.1 GB at 1M partitions, its picture ~0.5 GB)
    picture = ZkPicture.of(tree, take=True) if consistent else None
    del tree, reused
    run.note("copying into the log")
    # The commit's snapshot (due at 1M partitions: a replay and ~4.6 s of writing) waits until the
    # dark window is over (driver: `release_snapshots`); until then the log alone is the truth.
    hold_snapshots(log)
    manifest = copy_mod.copy_zk_data(
        log,
        claim.kraft_epoch,
        layout,
        zxid=zxid,
        consistent=consistent,
        read_seconds=read_seconds,
        progress=run.migrate.progress,
        take=True,  # the decoded image goes before the commit's replay (`del` below: the rest)
    )
    run.timings["copy"] = manifest.duration_seconds
    result.manifest = manifest
    result.actions.append(
        f"copied {manifest.records} records ({manifest.topics} topics, {manifest.partitions} partitions) in "
        f"{manifest.batches} batches, offsets {manifest.first_offset}-{manifest.last_offset}"
    )
    del layout, decoded  # the rest of the decoded image (copy_zk_data dropped its partitions)
    run.tree = picture
    with run.timed("replay"):  # the log's image after the commit: the first sync reconciles it
        run.regather()
    run.copied = True


def _reuse_preflight_read(run: Run) -> tuple[ZkTree | None, LayoutResult | None]:
    """The pre-flight's read brought to the present, if ZooKeeper's zxids prove that only this run's
    own writes (the claim, /migration, the log binding) happened since; else None and a note why.
    With it, the pre-flight's decode when those writes touched only the control znodes (the image
    is then the same; only /controller, /controller_epoch and /migration are decoded again)."""
    tree, layout, own = run.preflight_tree, run.preflight_layout, run.own_writes
    run.preflight_tree = run.preflight_layout = run.own_writes = None
    if tree is None or own is None:
        return None, None
    with run.timed("reuse_check"):
        why = run.zk.refresh(tree, own)
    if why is not None:
        run.note(f"reading ZooKeeper again: {why}")
        run.result.actions.append(f"read ZooKeeper again after the claim: {why}")
        return None, None
    if layout is not None and not set(own.patched) <= CONTROL_PATHS:
        layout = None
    run.result.actions.append(
        f"reused the pre-flight read of ZooKeeper{' and its decode' if layout is not None else ''}: nothing "
        f"but this run's claim changed it since (zxid {tree.read_zxid:#x})"
    )
    crash_point("copy.read-reused")
    return tree, layout
