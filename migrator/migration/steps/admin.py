"""`admin`: validated changes in DualWriteMetadata, handed to a running follower or applied here.

Applied here, the run claims ZooKeeper once and reconciles once (every new writer first repairs
drift, as Kafka's does), then appends and syncs each change before the next.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from migrator.errors import BadInputError, FencedError, FindingsError, UnreachableError, ZkKraftError
from migrator.kraft.lock import LOCK_FILE, read_holder
from migrator.migration import log_binding
from migrator.migration.admin import AdminChange, AdminReply, Inbox, refused_state
from migrator.migration.facts import Facts, log_exists, require_own_log
from migrator.migration.steps.claim import claim, covered, syncer
from migrator.migration.steps.follow import Controller
from migrator.migration.steps.run import DriverOptions, Run, S, connected, open_log, public
from migrator.migration.steps.status import writer_holder
from migrator.results import AdminResult


def admin(opts: DriverOptions, change: AdminChange, *, timeout: float = 60.0) -> AdminResult:
    """Apply one change in DualWriteMetadata: handed to a running follower, or appended and synced here."""
    return admin_many(opts, [change], timeout=timeout)[0]


def admin_many(
    opts: DriverOptions,
    changes: Iterable[AdminChange],
    *,
    timeout: float = 60.0,
    on_result: Callable[[AdminResult], None] | None = None,
) -> list[AdminResult]:
    """Apply changes in order, each validated, appended and synced before the next; the first refused
    one raises (the ones before it stay applied). One claim and one reconciliation for all of them."""
    results: list[AdminResult] = []

    def done(result: AdminResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    with connected(opts) as zk:
        run = Run.start(zk, opts)
        log_binding.guard(run.client, run.facts, opts.log_dir)
        if run.state is not S.DUAL_WRITE_METADATA:
            raise refused_admin(run.facts, opts)
        require_own_log(run.facts)
        node_id = run.node_id
        try:
            log = run.log = open_log(opts.log_dir, run.facts.zk.cluster_id, node_id)
        except FencedError:
            inbox = Inbox(opts.log_dir)
            pid = inbox.follower_pid()
            holder = read_holder(Path(opts.log_dir) / LOCK_FILE)
            if pid is None or holder is None or holder.pid != pid:
                raise
            for change in changes:
                reply = inbox.wait(inbox.submit(change), pid, timeout)
                done(admin_result(change, reply, f"follower pid {pid}"))
            return results
        try:
            facts = run.regather()
            if facts.derived.state is not S.DUAL_WRITE_METADATA:
                raise refused_state(public(facts.derived.state))
            taken, migration = claim(zk, log, facts, node_id, covered(facts, log))
            s = syncer(run.client, log, taken, migration, facts)
            s.reconcile(run.replay())  # every new writer first repairs drift, as Kafka's does
            ctl = Controller(zk, log, s, taken.kraft_epoch, facts)
            for change in changes:
                done(admin_result(change, ctl.apply(change, "admin.appended"), "direct"))
        finally:
            log.close()
    return results


def refused_admin(facts: Facts, opts: DriverOptions) -> FindingsError:
    """Admin outside DualWriteMetadata; a controller in soft start (it holds the log before the copy)
    is named, since its brokers may already be talking to it."""
    state = facts.derived.state
    holder = writer_holder(opts.log_dir) if log_exists(opts.log_dir) else None
    if state in (S.MIGRATION_INELIGIBLE, S.MIGRATING_ZK_DATA) and holder is not None:
        return FindingsError(
            f"the KRaft controller ({holder}) is in soft start: brokers are registering and the copy is not "
            "committed yet, so it accepts no admin changes (KIP-866); make the change in ZooKeeper mode "
            "now, or wait for DualWriteMetadata"
        )
    return refused_state(public(state))


def admin_result(change: AdminChange, reply: AdminReply, via: str) -> AdminResult:
    if not reply.ok:
        error: ZkKraftError
        if reply.exit_code == FencedError.exit_code:
            error = FencedError(reply.message)
        elif reply.exit_code == UnreachableError.exit_code:
            error = UnreachableError(reply.message)
        elif reply.exit_code == FindingsError.exit_code:
            error = FindingsError(reply.message)
        else:
            error = BadInputError(reply.message)
        raise error
    return AdminResult(
        change=change.describe(),
        summary=reply.message,
        via=via,
        records=reply.records,
        first_offset=reply.first_offset,
        last_offset=reply.last_offset,
        migration_offset=reply.migration_offset,
        topic_id=reply.topic_id,
        noop=reply.records == 0,
    )
