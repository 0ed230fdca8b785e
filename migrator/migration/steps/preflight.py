"""MigrationIneligible's step (pre-flight: no blockers, the operator agrees) and opening the log after it.

The pre-flight read decides whether to start; the copy reuses it after the claim when ZooKeeper's zxids
prove that nothing but this run's own writes happened since (`zk.read_reuse`), and reads again
otherwise. Opening the log formats a fresh one (a foreign cluster's is renamed aside, never deleted),
checks that nobody moved the migration meanwhile and removes a /migration left by an earlier attempt.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from migrator.errors import BadInputError, FencedError, UnreachableError
from migrator.migration import checks
from migrator.migration.facts import log_exists, require_own_log
from migrator.migration.faults import crash_point
from migrator.migration.steps.run import E, RefusedError, Run, S, open_log, public
from migrator.migration.steps.soft_start import soft_start
from migrator.zk import paths as P
from state_machine import MigrationEvent

# Blockers the driver resolves itself when it starts afresh: the leftovers of an earlier attempt.
SELF_RESOLVED = {checks.LEFTOVER_MIGRATION_ZNODE.code, checks.MIGRATION_ZNODE_EMPTY.code}


def preflight(run: Run) -> MigrationEvent:
    """Find the blockers and ask the operator; the START transition decides on both."""
    bind_early(run)
    with run.timed("preflight"):
        _ask(run)
    return E.START


def bind_early(run: Run) -> None:
    """With --listen, soft start before the pre-flight's read of ZooKeeper, as Kafka's controller
    binds before it reads: brokers register and heartbeat while the read runs (20,000 partitions
    under load: 30 s), and the copy waits for them afterwards as before (`soft_start_and_wait`).

    It needs the log (registrations are records; a broker's epoch is its offset), so it opens or
    formats it now, which the design allows: a log holding only the bootstrap and registrations is
    still MigrationIneligible (nothing claimed, nothing copied), so a refused pre-flight or a "no"
    leaves ZooKeeper as it was and the next run starts from the same state. Not when the log
    directory holds another cluster's log: archiving it is what the operator is asked about."""
    m, facts = run.migrate, run.facts
    if run.target.listen is None or m.brokers_from_zk or run.runtime is not None:
        return
    if facts.log.foreign_cluster is not None or (facts.zk.cluster_id or facts.log.cluster_id) is None:
        return
    open_log_only(run)
    run.runtime, run.bound_early = soft_start(run), True
    if m.on_listen is not None:
        m.on_listen(run.runtime.service, run.runtime.address)


def _ask(run: Run) -> None:
    run.note("checking eligibility")
    tree, layout = run.zk.read_view()
    # From here every write of this session is recorded: the copy reuses this read if ZooKeeper saw
    # nothing else before the claim (zk.read_reuse), and reads again otherwise.
    run.preflight_tree = tree
    run.preflight_layout = layout if not layout.problems else None  # else the copy's strict decode names them
    run.own_writes = run.zk.record_own_writes()
    findings = checks.sort_findings(checks.check_zk_view(layout.image, layout.control, tree, layout.problems))
    run.blockers = tuple(
        f.code for f in findings if f.severity == checks.Severity.BLOCKER and f.code not in SELF_RESOLVED
    )
    if run.blockers:
        detail = "; ".join(
            f"{f.code}: {f.message}"
            for f in findings
            if f.code in run.blockers and f.severity == checks.Severity.BLOCKER
        )
        try:  # refused here, before the operator is asked, with every blocker named
            run.advance(E.START, confirmed=run.migrate.yes)
        except RefusedError as e:
            raise RefusedError(f"{e}. {detail}") from None
    image = layout.image
    pending = set(image.pending_deletions)
    topics = [t for t in image.topics if t not in pending]
    partitions = sum(len(image.topics[t].partitions) for t in topics)
    extra = ""
    facts = run.facts
    if facts.log.foreign_cluster is not None:
        extra += (
            f" The log directory holds cluster {facts.log.foreign_cluster}'s log: it will be renamed aside "
            "(kept) and a fresh one created."
        )
    if facts.zk.migration is not None:
        extra += " The /migration znode left by an earlier attempt will be removed; the copy starts afresh."
    question = (
        f"Migrate cluster {image.cluster_id} ({len(topics)} topics, {partitions} partitions, "
        f"{len(image.brokers)} brokers registered in ZooKeeper) into {run.target.log_dir} as KRaft controller "
        f"{run.target.node_id}? ZooKeeper-mode controllers stop being elected from now on.{extra}"
    )
    confirm = run.migrate.confirm
    run.confirmed = run.migrate.yes or (confirm is not None and confirm(question))
    run.result.actions.append("pre-flight passed: no blockers" + (" (confirmed)" if run.confirmed else ""))


def open_run_log(run: Run) -> None:
    """Open (or format) the log for a run of `migrate` and check the migration did not move meanwhile.
    A log opened already (the soft start bound before the pre-flight, `bind_early`) is
    kept; the checks and the removal of a stale /migration still come here, after the pre-flight."""
    if run.log is None:
        open_log_only(run)
    result = run.result
    facts = run.regather()
    if facts.derived.state is not run.started_in:
        raise FencedError(
            f"the migration moved from {public(run.started_in)} to {public(facts.derived.state)} while "
            "this run started (another zk2kraft?); run it again"
        )
    if run.started_in is S.MIGRATION_INELIGIBLE and facts.zk.migration is not None:
        result.removed_stale_migration = remove_stale_migration(run)
        result.actions.append("removed the /migration znode left by an earlier attempt")
        run.regather()


def open_log_only(run: Run) -> None:
    """Open (or format) the log: a foreign cluster's is archived first (kept), an own one required."""
    facts, result, opts = run.facts, run.result, run.opts
    if run.started_in is S.MIGRATION_INELIGIBLE:
        if facts.log.foreign_cluster is not None:
            result.archived_foreign_log = archive(Path(opts.target.log_dir), "foreign")
            result.actions.append(
                f"archived the log directory of cluster {facts.log.foreign_cluster} to {result.archived_foreign_log}"
            )
    else:
        require_own_log(facts)
    cluster_id = facts.zk.cluster_id or facts.log.cluster_id
    if cluster_id is None:
        raise BadInputError(f"{P.CLUSTER_ID} is missing: the log cannot be formatted without the cluster id")
    formatted = not log_exists(opts.target.log_dir)
    run.log = open_log(opts.target, cluster_id, opts.target.node_id)
    if facts.log.handover is not None:  # the facts' read-only replay, if the directory is unchanged
        run.log.adopt_image(*facts.log.handover)
        facts.log.handover = None
    if formatted:
        result.actions.append(
            f"formatted {opts.target.log_dir} for cluster {cluster_id}, node {opts.target.node_id}"
        )
        crash_point("log.formatted")


def archive(path: Path, why: str) -> str:
    """Rename a log directory aside (never delete it), under its writer lock; returns the new path."""
    from migrator.kraft.lock import WriterLock

    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.{why}-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.{why}-{stamp}-{n}")
    lock = WriterLock(path).acquire()
    try:
        os.rename(path, target)
        fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise UnreachableError(f"cannot rename {path} to {target}: {e.strerror}") from None
    finally:
        lock.release()
    return str(target)


def remove_stale_migration(run: Run) -> dict[str, int]:
    """Delete a /migration left by an earlier attempt (the Strimzi #11262 trap): never resume from it."""
    m = run.facts.zk.migration
    assert m is not None
    run.zk.delete_migration(m.zk_version)
    crash_point("stale-migration.removed")
    return {
        "kraft_controller_id": m.kraft_controller_id,
        "kraft_controller_epoch": m.kraft_controller_epoch,
        "kraft_metadata_offset": m.kraft_metadata_offset,
        "kraft_metadata_epoch": m.kraft_metadata_epoch,
    }
