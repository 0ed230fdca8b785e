"""Records after `/migration`'s offset that can never reach ZooKeeper, found and dropped.

An older zk2kraft appended a change before learning that its znode write cannot fit one ZooKeeper
request; the write-behind lag then never drains and every writer stops on it (issue 18). `find_stuck`
names the first such record the way the syncer would meet it (the same conversion as the admin
refusal, `zk_fit`), and `truncate_unsynced` cuts the log back to what ZooKeeper covers.

The rule for cutting: only records after `/migration`'s offset go (ZooKeeper never received them), only
while no process holds the log's writer lock (no controller is serving them to brokers, who fetch only
from a running controller's listener), and only when one of them can never be synced.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kazoo.client import KazooClient

from migrator.errors import BadInputError
from migrator.kraft.image import ImageBuilder
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import MetadataRecord, OpaqueRecord
from migrator.kraft.snapshot import list_snapshots, read_snapshot
from migrator.migration.faults import crash_point
from migrator.migration.zk_fit import change_writes
from migrator.model import ControllerZnode, MigrationZnode, ZkControlState
from migrator.zk.migration_client import Claim, FencedZkWriter, layout

__all__ = ["StuckRecord", "Truncated", "find_stuck", "sizing_writer", "truncate_unsynced"]

_BEGIN, _END, _ABORT = 23, 24, 25
_RUN = 50_000  # plain records judged together, as the syncer chunks them


@dataclass(frozen=True, slots=True)
class StuckRecord:
    """The first record after `/migration`'s offset whose ZooKeeper write can never fit."""

    offset: int
    record: str
    last_offset: int
    reason: str

    def __str__(self) -> str:
        span = "" if self.last_offset == self.offset else f" (change up to offset {self.last_offset})"
        return f"record {self.offset} ({self.record}){span} can never reach ZooKeeper: {self.reason}"


def sizing_writer(client: KazooClient, kraft_epoch: int) -> FencedZkWriter:
    """A fenced writer used only for its encoding (sizes): it is never asked to write."""
    claim = Claim(
        kraft_controller_id=0, kraft_epoch=kraft_epoch, zk_controller_epoch=0, controller_epoch_zk_version=0
    )
    return FencedZkWriter(client, claim, MigrationZnode(zk_version=0))


def _groups(
    pending: list[tuple[int, MetadataRecord | OpaqueRecord]],
) -> list[list[tuple[int, MetadataRecord | OpaqueRecord]]]:
    """Transactions whole (Begin..End/Abort), plain records in runs; an open transaction is left out."""
    out: list[list[tuple[int, MetadataRecord | OpaqueRecord]]] = []
    run: list[tuple[int, MetadataRecord | OpaqueRecord]] = []
    txn: list[tuple[int, MetadataRecord | OpaqueRecord]] | None = None
    for item in pending:
        api = item[1].api_key if isinstance(item[1], MetadataRecord) else -1
        if txn is not None:
            txn.append(item)
            if api in (_END, _ABORT):
                out.append(txn)
                txn = None
        elif api == _BEGIN:
            if run:
                out.append(run)
                run = []
            txn = [item]
        else:
            run.append(item)
            if len(run) >= _RUN:
                out.append(run)
                run = []
    if run:
        out.append(run)
    return out


def find_stuck(client: KazooClient, log: MetadataLog, migration: MigrationZnode) -> StuckRecord | None:
    """Replay to `/migration`'s offset, then judge each later change as the syncer would write it."""
    covered = migration.kraft_metadata_offset
    if log.end_offset - 1 <= covered:
        return None
    builder = ImageBuilder()
    start = 0
    for snap in reversed(list_snapshots(Path(log.partition_dir))):
        if snap.end_offset - 1 <= covered:
            for _offset, rec in read_snapshot(snap.path).records:
                builder.replay(snap.end_offset - 1, rec)
            start = snap.end_offset
            break
    if start == 0 and log.log_start_offset > 0:
        return None  # no image to judge against; the syncer reports this itself
    pending: list[tuple[int, MetadataRecord | OpaqueRecord]] = []
    for offset, _epoch, rec in log.read(start):
        if offset <= covered:
            builder.replay(offset, rec)
        else:
            pending.append((offset, rec))
    builder.finish()
    control = ZkControlState(
        controller=ControllerZnode(broker_id=0, kraft_controller_epoch=migration.kraft_controller_epoch)
    )
    state_epoch = layout.partition_state_epoch(control)
    writer = sizing_writer(client, migration.kraft_controller_epoch)
    for group in _groups(pending):
        records = [rec for _o, rec in group]
        try:
            writer.refuse_oversized(change_writes(builder.image, records, state_epoch))
        except BadInputError as e:
            first = group[0][1]
            name = first.name if isinstance(first, MetadataRecord) else "UnknownRecord"
            return StuckRecord(group[0][0], name, group[-1][0], str(e))
        for offset, rec in group:
            builder.replay(offset, rec)
        builder.finish()
    return None


@dataclass(frozen=True, slots=True)
class Truncated:
    """What `truncate_unsynced` dropped."""

    stuck: StuckRecord
    end_offset_before: int
    end_offset: int
    migration_offset: int


def truncate_unsynced(
    client: KazooClient, log_dir: str | Path, migration: MigrationZnode | None
) -> Truncated:
    """Cut the log back to `/migration`'s offset when a record after it can never be synced.

    The writable open takes the writer lock, so this is refused (exit 4) while a controller, a
    follower or an admin run holds the log; the log is cut only at a batch boundary, newest first
    (`MetadataLog.truncate_to`), so a crash leaves a valid prefix and running it again finishes.
    """
    if migration is None or migration.kraft_metadata_offset < 0:
        raise BadInputError(
            "/migration covers no log offset: there is nothing ZooKeeper holds to cut back to"
        )
    with MetadataLog.open(log_dir, writable=True) as log:
        covered = migration.kraft_metadata_offset
        if log.end_offset - 1 < covered:
            raise BadInputError(
                f"the log ends at offset {log.end_offset - 1}, before /migration's {covered}: "
                "it is shorter than what ZooKeeper covers, not ahead of it"
            )
        stuck = find_stuck(client, log, migration)
        if stuck is None:
            raise BadInputError(
                f"nothing to truncate: every record after /migration's offset {covered} can reach ZooKeeper "
                "(a lag that can drain is left to the syncer)"
            )
        before = log.end_offset
        log.truncate_to(covered + 1, step=lambda: crash_point("unsynced.truncating"))
        return Truncated(stuck, before, log.end_offset, covered)
