"""The claim: a fresh epoch on /controller, /migration rewritten, and the fenced syncer that rides on it.

Each process that writes ZooKeeper claims it with a fresh epoch above every epoch seen (the log's,
ZooKeeper's, the previous claimant's), as each Kafka controller leader has its own epoch; a process
with an older claim is fenced on its next multi.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from kazoo.client import KazooClient

from migrator.errors import BadInputError, FencedError
from migrator.kraft.image import OpenTransaction, ReplayResult
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import MetadataRecord, OpaqueRecord
from migrator.kraft.schema import schema_by_name
from migrator.metrics import MigrationMetrics
from migrator.migration import log_binding
from migrator.migration.facts import Facts
from migrator.migration.faults import CrashPointWriter, crash_point
from migrator.migration.log_tail import LogTail
from migrator.migration.steps.run import RefusedError, Run
from migrator.migration.zk_diff import ZkPicture
from migrator.migration.zk_sync import Repair, SyncReport, ZkSyncer
from migrator.model import MigrationZnode
from migrator.results import ClaimInfo
from migrator.zk import paths as P
from migrator.zk.migration_client import Claim, MigrationClient, ZkTree
from state_machine import KafkaMigrationCode

ZK_MIGRATION_STATE_KEY = schema_by_name("ZkMigrationStateRecord").api_key


def next_epoch(log: MetadataLog, facts: Facts) -> int:
    """A fresh leader epoch: above the log's, ZooKeeper's controller epoch and any KRaft claimant's."""
    zk = facts.zk
    existing = zk.controller.kraft_controller_epoch if zk.controller is not None else -1
    migration_epoch = zk.migration.kraft_controller_epoch if zk.migration is not None else -1
    return max(log.latest_epoch, zk.zk_controller_epoch or 0, existing, migration_epoch) + 1


def claim(
    zk: MigrationClient, log: MetadataLog, facts: Facts, node_id: int, covered: tuple[int, int]
) -> tuple[Claim, MigrationZnode]:
    """Claim ZooKeeper with a fresh epoch, then write /migration unconditionally (KAFKA-16171):
    `covered` is the (offset, epoch) ZooKeeper's data is known to cover, (-1, -1) before the copy."""
    zf = facts.zk
    if zf.zk_controller_epoch is None:
        raise BadInputError(
            f"{P.CONTROLLER_EPOCH} missing: is this a Kafka cluster? (check the chroot of --zookeeper)"
        )
    c = zf.controller
    bound = log_binding.problem(zk.zk, facts, str(log.log_dir), log=log)
    if bound is not None and bound.live:  # another live writer took the claim since the command began
        raise bound.error()
    unbound = log_binding.read_binding(zk.zk) is None  # a claim from before the binding: node ids
    if unbound and zf.kraft_holds_controller and c is not None and c.broker_id != node_id:
        raise FencedError(
            f"{P.CONTROLLER} is held by KRaft controller {c.broker_id} (epoch {c.kraft_controller_epoch}), "
            f"not by this log's node {node_id}: another controller runs this migration"
        )
    epoch = next_epoch(log, facts)
    crash_point("claim.before")
    taken = zk.claim(node_id, epoch)
    crash_point("claim.after")
    migration = zk.write_migration(
        MigrationZnode(
            kraft_controller_id=node_id,
            kraft_controller_epoch=taken.kraft_epoch,
            kraft_metadata_offset=covered[0],
            kraft_metadata_epoch=covered[1],
        ),
        taken,
    )
    log_binding.record_claim(
        zk.zk, taken, log_binding.identity_of(log, facts, taken.kraft_epoch, log_binding.read_binding(zk.zk))
    )
    crash_point("claim.migration-written")
    return taken, migration


def claim_for_run(run: Run, covered: tuple[int, int]) -> Claim:
    """Claim for `run` (its log, facts and node id) and note the claim in its result."""
    assert run.log is not None
    run.claim, run.migration = claim(run.zk, run.log, run.facts, run.target.node_id, covered)
    c = run.claim
    run.result.claim = ClaimInfo(
        kraft_controller_id=c.kraft_controller_id,
        kraft_epoch=c.kraft_epoch,
        zk_controller_epoch=c.zk_controller_epoch,
    )
    return c


def covered(facts: Facts, log: MetadataLog) -> tuple[int, int]:
    """What ZooKeeper covers per /migration, if that is believable for this log; else (-1, -1).

    /migration must name an offset this log holds, written in the epoch this log has at that offset:
    anything else (a stale znode, another log's offsets) is not carried over to the new claim.
    """
    m = facts.zk.migration
    if m is None or m.kraft_metadata_offset < 0 or m.kraft_metadata_offset > log.end_offset - 1:
        return (-1, -1)
    if log.epoch_for_offset(m.kraft_metadata_offset) != m.kraft_metadata_epoch:
        return (-1, -1)
    return (m.kraft_metadata_offset, m.kraft_metadata_epoch)


def abort_reason(txn: OpenTransaction) -> str:
    return (
        f"zk2kraft: transaction {txn.name!r} begun at offset {txn.begin_offset} was interrupted "
        f"({txn.pending_records} records); aborted by a new controller"
    )


class GuardedSyncer:
    """The dual-write syncer behind the driver's one rule: once the log records POST_MIGRATION,
    nothing reaches ZooKeeper any more (the check reads only records appended since the last one)."""

    def __init__(self, inner: ZkSyncer, log: MetadataLog, checked_to: int) -> None:
        self.inner = inner
        self.log = log
        self.writer = inner.writer
        self._checked = checked_to
        self._tail = LogTail(log)  # only the records appended since the last check are read
        self.metrics: MigrationMetrics | None = None

    def _guard(self) -> None:
        self._check(self._tail.read(self._checked))

    def _check(self, entries: Iterable[tuple[int, int, MetadataRecord | OpaqueRecord]]) -> None:
        for offset, _epoch, rec in entries:
            if (
                isinstance(rec, MetadataRecord)
                and rec.api_key == ZK_MIGRATION_STATE_KEY
                and rec.fields["ZkMigrationState"] == int(KafkaMigrationCode.POST_MIGRATION)
            ):
                raise RefusedError(
                    f"the log records POST_MIGRATION at offset {offset}: the migration is finalized and "
                    "ZooKeeper is not written any more"
                )
        self._checked = max(self._checked, self.log.end_offset)

    def reconcile(
        self,
        image: ReplayResult | None = None,
        tree: ZkTree | ZkPicture | None = None,
        *,
        take: bool = False,
    ) -> list[Repair]:
        self._guard()
        t0 = time.perf_counter()
        repairs = self.inner.reconcile(image, tree, take=take)
        if self.metrics is not None:
            self.metrics.on_reconcile(time.perf_counter() - t0)
        return repairs

    def fetch(self) -> None:
        """Where no append runs (the commit lock): check and read what a `sync(fetched_only=True)`
        then writes without that lock (ZkSyncer.fetch)."""
        got = self.inner.fetch()
        end = self.log.end_offset
        if got and got[0][0] <= self._checked:
            # What the syncer just read is what is left to check: not read a second time.
            self._check(e for e in got if e[0] >= self._checked)
            self._checked = max(self._checked, end)
        elif self._checked < end:  # an image loaded, a gap, or a refusal not yet lifted: the log
            self._guard()

    def sync(self, fetched_only: bool = False) -> SyncReport:
        if not fetched_only:  # else `fetch` checked what it read
            self._guard()
        t0 = time.perf_counter()
        report = self.inner.sync(fetched_only=fetched_only)
        if self.metrics is not None:
            self.metrics.on_sync(time.perf_counter() - t0, report.records, report.ops, report.lag)
        return report

    def lag(self) -> int:
        return self.inner.lag()

    def replay_at_log_end(self) -> ReplayResult | None:
        return self.inner.replay_at_log_end()


def syncer(
    client: KazooClient, log: MetadataLog, taken: Claim, migration: MigrationZnode, facts: Facts
) -> GuardedSyncer:
    """A syncer under `taken` for a log whose facts were just gathered (so known not finalized)."""
    if facts.log.migration_code == int(KafkaMigrationCode.POST_MIGRATION):
        raise RefusedError("the migration is finalized: ZooKeeper is not written any more")
    writer = CrashPointWriter(client, taken, migration)
    return GuardedSyncer(ZkSyncer(client, log, writer), log, facts.log.end_offset)
