"""The audit's inputs read into the model, without Spark: what each data source runs per task.

- `load_kraft(path, up_to_offset)`: a metadata log directory (or one segment, or one `.checkpoint`
  snapshot file) replayed by `migrator.kraft.image.ImageBuilder` up to and including an offset, so
  KIP-868 transactions apply exactly as the image applies them (an open one is left out).
- `load_zk_snapshot(path, ...)`: ZooKeeper's newest complete snapshot in a data directory, with the
  transaction logs replayed onto it (`migrator.zk.txnlog_file.replay_report`), decoded by the layout.
- `scan_log(path)`: the driver's light pass over a log: CRCs, the migration state, transactions and
  where the copy ended, without building the image (only transaction markers and
  ZkMigrationStateRecords are decoded).

Each returns an identity dict too (files, offsets, zxids) for the report.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from migrator.errors import BadInputError, UnreachableError
from migrator.kraft import dirfiles
from migrator.kraft.batch import iter_batches
from migrator.kraft.batch_decode import decode_batch_records
from migrator.kraft.image import MIGRATION_STATES, ImageBuilder, ReplayResult
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import decode_value
from migrator.kraft.snapshot import SnapshotId, list_snapshots, parse_snapshot_name, read_snapshot
from migrator.model import ClusterImage
from migrator.zk.layout import LayoutResult, image_from_tree
from migrator.zk.snapshot_file import latest_snapshot
from migrator.zk.snapshot_file import read_snapshot as read_zk_snapshot
from migrator.zk.tree import ZkTree
from migrator.zk.txnlog_file import TxnLogFile, log_files, replay_report

__all__ = [
    "LogScan",
    "load_kraft",
    "load_zk_snapshot",
    "newest_logged_zxid",
    "scan_log",
    "subtree",
]

# Metadata record api keys the light scan decodes: ZkMigrationStateRecord and the transaction markers.
_SCAN_KEYS = frozenset((21, 23, 24, 25))
_MIGRATION = 1


def _is_snapshot_file(path: Path) -> bool:
    return path.name.endswith(".checkpoint") and not path.is_dir()


def _open_log(path: Path) -> MetadataLog:
    if not path.exists():
        raise UnreachableError(f"{path}: no such log directory or file")
    try:
        return MetadataLog.open(path)
    except PermissionError as e:
        raise UnreachableError(f"cannot read {path}: {e.strerror}") from None


def _pick_snapshot(log: MetadataLog, cut: int) -> SnapshotId | None:
    """The newest snapshot at or before `cut`, unless the segments alone reach back to offset 0."""
    if log.segments and log.log_start_offset == 0:
        return None
    snaps = [s for s in list_snapshots(log.partition_dir) if s.end_offset - 1 <= cut]
    return snaps[-1] if snaps else None


def load_kraft(
    path: str | os.PathLike[str], up_to_offset: int | None = None
) -> tuple[ReplayResult, dict[str, Any]]:
    """The image of the log at `up_to_offset` (inclusive; default: its end) and where it came from."""
    p = Path(path)
    if _is_snapshot_file(p):
        return _load_kraft_snapshot_file(p, up_to_offset)
    log = _open_log(p)
    try:
        end = log.end_offset
        cut = end - 1 if up_to_offset is None else up_to_offset
        if cut >= end:
            raise BadInputError(f"{log.partition_dir}: offset {cut} is past the log's end (end offset {end})")
        snap = _pick_snapshot(log, cut)
        builder = ImageBuilder()
        start = 0
        if snap is not None:
            at = snap.end_offset - 1
            for _offset, rec in read_snapshot(snap.path).records:
                builder.replay(at, rec)
            if builder.finish().open_transaction is not None:
                raise BadInputError(f"{snap.path}: snapshot ends inside a metadata transaction")
            start = snap.end_offset
        if log.segments and log.log_start_offset > start and end > start:
            raise BadInputError(
                f"{log.partition_dir}: the log starts at offset {log.log_start_offset} but "
                + (
                    f"the snapshot before offset {cut + 1} ends at {start}"
                    if snap
                    else "there is no snapshot"
                )
                + f"; offsets {start}..{log.log_start_offset - 1} are missing"
            )
        if cut >= start:
            for offset, _epoch, rec in log.read(start):
                if offset > cut:
                    break
                builder.replay(offset, rec)
        result = builder.finish()
        if log.meta is not None:
            result.image.cluster_id = log.meta.cluster_id
        identity = {
            "source": "kraft-log",
            "path": str(p),
            "log_dir": str(log.log_dir),
            "segments": [s.path.name for s in log.segments],
            "snapshot": str(snap.path) if snap else None,
            "snapshot_end_offset": snap.end_offset if snap else None,
            "log_start_offset": log.log_start_offset,
            "end_offset": end,
            "cut_offset": cut,
        }
    finally:
        log.close()
    identity.update(_result_identity(result))
    return result, identity


def _load_kraft_snapshot_file(p: Path, up_to_offset: int | None) -> tuple[ReplayResult, dict[str, Any]]:
    snap = read_snapshot(p)
    end = snap.end_offset
    if up_to_offset is not None and (end is None or up_to_offset != end - 1):
        raise BadInputError(
            f"{p}: a snapshot file is the image at its own end offset ({end}); it cannot be cut at {up_to_offset}"
        )
    at = (end or 1) - 1
    builder = ImageBuilder()
    for _offset, rec in snap.records:
        builder.replay(at, rec)
    result = builder.finish()
    if result.open_transaction is not None:
        raise BadInputError(f"{p}: snapshot ends inside a metadata transaction")
    meta = p.parent.parent / "meta.properties"
    if meta.is_file():
        result.image.cluster_id = dirfiles.read_meta_properties(meta).cluster_id
    identity = {
        "source": "kraft-snapshot",
        "path": str(p),
        "snapshot": str(p),
        "snapshot_end_offset": end,
        "end_offset": end,
        "cut_offset": at,
        "records": len(snap.records),
    }
    identity.update(_result_identity(result))
    return result, identity


def _result_identity(result: ReplayResult) -> dict[str, Any]:
    txn = result.open_transaction
    return {
        "cluster_id": result.image.cluster_id,
        "last_applied_offset": result.last_offset,
        "migration_state": result.migration_state_name,
        "migration_state_offset": result.migration_state_offset,
        "open_transaction": None if txn is None else txn.model_dump(),
        "committed_transactions": result.committed_transactions,
        "aborted_transactions": result.aborted_transactions,
        "records": sum(result.counts.values()),
        "topics": len(result.image.topics),
        "partitions": result.image.partition_count(),
    }


# --- the light scan (driver) -------------------------------------------------------------------------


@dataclass
class LogScan:
    """What the driver needs before planning: state, transactions, the copy's end, the log's extent."""

    path: str
    log_dir: str
    cluster_id: str | None = None
    node_id: int | None = None
    snapshot_file: bool = False  # the input is one `.checkpoint` file
    log_start_offset: int = 0
    end_offset: int = 0
    segments: int = 0
    newest_snapshot: str | None = None
    migration_code: int | None = None
    migration_offset: int | None = None
    copy_end_offset: int | None = None  # the offset at which ZkMigrationStateRecord(MIGRATION) took effect
    copy_in_snapshot: bool = False  # MIGRATION was already in the snapshot the scan started from
    last_record_offset: int = -1  # the last metadata record (control batches excluded)
    open_transaction: dict[str, Any] | None = None
    batches: int = 0
    records: int = 0
    torn_tail: str | None = None  # "<file> at byte N (M bytes)": a batch cut short at the log's end

    @property
    def migration_state(self) -> str | None:
        return None if self.migration_code is None else MIGRATION_STATES.get(self.migration_code)

    def identity(self) -> dict[str, Any]:
        out = asdict(self)
        out["migration_state"] = self.migration_state
        return out


class _Scanner:
    def __init__(self, scan: LogScan) -> None:
        self.scan = scan
        self.builder = ImageBuilder()

    def feed(self, batch: Any, at: int | None = None) -> None:
        """One data batch: only the scanned keys are decoded; `at` pins every offset (snapshots)."""
        scan = self.scan
        scan.batches += 1
        values = batch.values()
        scan.records += len(values)
        if at is None:
            scan.last_record_offset = batch.last_offset
        wanted = [i for i, v in enumerate(values) if len(v) > 1 and v[1] in _SCAN_KEYS]
        if not wanted:
            return
        if at is None and batch.records_count != batch.last_offset_delta + 1:
            # offsets with gaps: take them from a full decode of this one batch
            for offset, rec in decode_batch_records(batch):
                if rec.api_key in _SCAN_KEYS:
                    self._replay(offset, rec)
            return
        for i in wanted:
            offset = batch.base_offset + i if at is None else at
            self._replay(offset, decode_value(values[i], f"{batch.file}: batch at byte {batch.position}"))

    def _replay(self, offset: int, rec: Any) -> None:
        self.builder.replay(offset, rec)
        result = self.builder.result
        if self.scan.copy_end_offset is None and result.migration_state == _MIGRATION:
            self.scan.copy_end_offset = offset


def scan_log(path: str | os.PathLike[str]) -> LogScan:
    """Check every batch (CRC, framing, offsets) and learn the migration facts; raises one-line errors."""
    p = Path(path)
    if _is_snapshot_file(p):
        return _scan_snapshot_file(p)
    log = _open_log(p)
    try:
        scan = LogScan(path=str(p), log_dir=str(log.log_dir))
        if log.meta is not None:
            scan.cluster_id, scan.node_id = log.meta.cluster_id, log.meta.node_id
        scan.log_start_offset = log.log_start_offset
        scan.end_offset = log.end_offset
        scan.segments = len(log.segments)
        report = log.report
        if report.truncated_bytes:
            scan.torn_tail = (
                f"{report.truncated_file} at byte {report.truncated_at} ({report.truncated_bytes} bytes)"
            )
        scanner = _Scanner(scan)
        snaps = (
            [] if len(log.segments) == 1 and log.segments[0].path == p else list_snapshots(log.partition_dir)
        )
        scan.newest_snapshot = str(snaps[-1].path) if snaps else None
        start = 0
        if snaps and not (log.segments and log.log_start_offset == 0):
            snap = snaps[-1]
            _feed_snapshot(scanner, snap.path, snap.end_offset - 1)
            if scanner.builder.result.migration_state == _MIGRATION:
                scan.copy_in_snapshot = True
                scan.copy_end_offset = None
            start = snap.end_offset
        for batch in log.batches(start):
            if not batch.is_control:
                scanner.feed(batch)
        result = scanner.builder.finish()
    finally:
        log.close()
    scan.migration_code = result.migration_state
    scan.migration_offset = result.migration_state_offset
    scan.open_transaction = None if result.open_transaction is None else result.open_transaction.model_dump()
    return scan


def _feed_snapshot(scanner: _Scanner, path: Path, at: int) -> None:
    try:
        buf = path.read_bytes()
    except OSError as e:
        raise UnreachableError(f"cannot read {path}: {e.strerror}") from None
    for batch in iter_batches(buf, str(path)):
        if not batch.is_control:
            scanner.feed(batch, at=at)


def _scan_snapshot_file(p: Path) -> LogScan:
    parsed = parse_snapshot_name(p.name)
    if not p.is_file():
        raise UnreachableError(f"{p}: no such snapshot file")
    # read_snapshot checks the header and footer; the scan then reads only what it needs
    snap = read_snapshot(p)
    end = snap.end_offset if snap.end_offset is not None else (parsed[0] if parsed else 0)
    scan = LogScan(path=str(p), log_dir=str(p.parent.parent), snapshot_file=True, end_offset=end)
    scan.newest_snapshot = str(p)
    builder = ImageBuilder()
    for _offset, rec in snap.records:
        if rec.api_key in _SCAN_KEYS:
            builder.replay(end - 1, rec)
    result = builder.finish()
    scan.records = len(snap.records)
    scan.batches = snap.batches
    scan.migration_code = result.migration_state
    scan.migration_offset = result.migration_state_offset
    scan.copy_in_snapshot = result.migration_state == _MIGRATION
    scan.last_record_offset = end - 1
    return scan


# --- ZooKeeper ---------------------------------------------------------------------------------------


def subtree(tree: ZkTree, chroot: str) -> ZkTree:
    """The tree below `chroot` with paths relative to it, as a client connected with that chroot sees it.

    The ZNode objects are shared (their `path` keeps the full path, which error messages then name).
    """
    chroot = chroot.rstrip("/")
    if not chroot:
        return tree
    if chroot not in tree.nodes:
        raise BadInputError(f"chroot {chroot} is not in the ZooKeeper snapshot")
    cut = len(chroot)
    prefix = chroot + "/"
    nodes = {"/": tree.nodes[chroot]}
    nodes.update({p[cut:]: n for p, n in tree.nodes.items() if p.startswith(prefix)})
    children = {"/": tree.children.get(chroot, [])}
    children.update({p[cut:]: c for p, c in tree.children.items() if p.startswith(prefix)})
    return ZkTree(
        nodes=nodes,
        children=children,
        max_zxid=tree.max_zxid,
        consistent=tree.consistent,
        read_zxid=tree.read_zxid,
    )


def newest_logged_zxid(data_dir: str | os.PathLike[str], snapshot_zxid: int) -> int | None:
    """The newest zxid in the transaction logs after a snapshot (None without logs): pins a replay so
    every slice of a data source sees the same state even if the server keeps writing."""
    newest = None
    for path in log_files(data_dir, snapshot_zxid):
        for entry in TxnLogFile(path):
            newest = entry.header.zxid
    return newest


def load_zk_snapshot(
    path: str | os.PathLike[str],
    *,
    snapshot: str | None = None,
    logs: str | None = None,
    replay: bool = True,
    up_to_zxid: int | None = None,
    chroot: str = "",
    strict: bool = True,
) -> tuple[LayoutResult, dict[str, Any]]:
    """ZooKeeper's state from a data directory (or one snapshot file), decoded by the layout.

    `snapshot` pins the file (the driver chose it); without logs or with `replay` off the fuzzy
    snapshot is used as is and the identity says so.
    """
    file = Path(snapshot) if snapshot else latest_snapshot(path)
    snap = read_zk_snapshot(file)
    identity: dict[str, Any] = {
        "source": "zk-snapshot",
        "path": str(path),
        "snapshot": str(file),
        "snapshot_zxid": snap.zxid,
        "compression": snap.compression or "none",
        "seals_verified": snap.seals_verified,
        "digest_zxid": snap.digest.zxid if snap.digest else None,
        "last_processed_zxid": snap.last_processed_zxid,
        "chroot": chroot or None,
    }
    tree = snap.tree
    if replay:
        base = Path(logs) if logs else (Path(path) if Path(path).is_dir() else file.parent)
        report = replay_report(snap, base, up_to_zxid)
        tree = report.tree
        identity.update(
            zxid=report.zxid,
            replayed_txns=report.applied,
            txn_logs=[f.name for f in report.files],
            consistent=report.consistent,
            warnings=report.warnings,
        )
    else:
        fuzzy_end = snap.fuzzy_end_zxid
        identity.update(
            zxid=snap.zxid,
            replayed_txns=0,
            txn_logs=[],
            consistent=False,
            warnings=[
                "transaction logs not replayed: the snapshot is fuzzy"
                + (f" (it may hold changes up to {fuzzy_end:#x})" if fuzzy_end else "")
            ],
        )
    del snap
    identity["znodes"] = len(tree)
    layout = image_from_tree(subtree(tree, chroot), strict=strict)
    identity.update(_zk_identity(layout))
    return layout, identity


def _zk_identity(layout: LayoutResult) -> dict[str, Any]:
    image: ClusterImage = layout.image
    return {
        "cluster_id": image.cluster_id,
        "control": layout.control.model_dump(mode="json"),
        "topics": len(image.topics),
        "partitions": image.partition_count(),
        "pending_deletions": list(image.pending_deletions),
        "problems": [f"{p.path}: {p.message}" for p in layout.problems][:20],
    }


zk_identity = _zk_identity
