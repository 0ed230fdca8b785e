"""The log's fold as a map-reduce: byte ranges read in parallel, records folded per entity group.

The image of a log is a fold, but a fold of independent entities: a topic's records (TopicRecord,
PartitionRecord, PartitionChangeRecord, RemoveTopicRecord, its ConfigRecords) touch only that topic,
and everything else (brokers, other configs, quotas, SCRAM, ACLs, producer ids, tokens) is a small
"cluster" group. Replaying a group's records in offset order through `migrator.kraft.image.ImageBuilder`
gives exactly that group's entities of the whole replay, so:

1. `plan_log` (driver, light): which snapshot and which batches make the image at the cut, the
   transactions (what an abort or an open transaction drops), the topic id → group table from the
   TopicRecords, and the byte ranges ("pieces", at batch boundaries) the map tasks read.
2. `map_piece` (map task): the piece's batches (CRC checked), each applied record as a row
   `(group, offset, seq, value)`; records of aborted or open transactions and the markers themselves
   are dropped here, which is what KIP-868 replay amounts to (a committed transaction's records are
   contiguous in the log, so applying them at their own offsets or at the End is the same sequence).
3. Spark shuffles the rows by `group` and sorts each reduce partition by `(offset, seq)`.
4. `fold_rows` (reduce task): one ImageBuilder over the partition's records, then `rows.image_batches`.

A group's key is a topic *name* (ConfigRecords and RemoveTopicRecord tie a topic id to the name's
configs); names that ever shared a topic id are one group (union-find over the TopicRecords), and a
topic id no TopicRecord names keeps its own group, where the fold fails on it as the whole replay does.
`seq` orders a snapshot's records, which all sit at the snapshot's offset (their offset inside it).
"""

from __future__ import annotations

import bisect
import json
import mmap
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from migrator.errors import BadInputError, UnreachableError
from migrator.kraft import dirfiles
from migrator.kraft.batch import CorruptLogError, iter_batches
from migrator.kraft.batch_decode import decode_batch_records
from migrator.kraft.control import SnapshotFooter, SnapshotHeader, decode_control_record
from migrator.kraft.image import ImageBuilder
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import MetadataRecord, decode_value
from migrator.kraft.snapshot import SnapshotId, list_snapshots, parse_snapshot_name

__all__ = [
    "RECORD_SCHEMA",
    "SPARK_RECORD_SCHEMA",
    "LogPlan",
    "Piece",
    "fold_rows",
    "map_piece",
    "plan_log",
]

RECORD_SCHEMA = pa.schema(
    [
        pa.field("group", pa.string()),
        pa.field("offset", pa.int64()),
        pa.field("seq", pa.int64()),
        pa.field("value", pa.binary()),
    ]
)
SPARK_RECORD_SCHEMA = "group string, offset bigint, seq bigint, value binary"
CLUSTER_GROUP = "cluster"
_TOPIC_ID_KEYS = frozenset((3, 5, 9))  # PartitionRecord, PartitionChangeRecord, RemoveTopicRecord
_TOPIC_RECORD = 2
_CONFIG_RECORD = 4
_TOPIC_RESOURCE = 2
_MARKERS = frozenset((23, 24, 25))  # Begin/End/AbortTransactionRecord
_MIGRATION_STATE = 21
_NOOP = 20
_PLAN_KEYS = _MARKERS | {_MIGRATION_STATE, _TOPIC_RECORD}
_BATCH_ROWS = 65_536


@dataclass
class Piece:
    """One map task's bytes: whole batches of one file; `at` pins every offset (a snapshot's)."""

    file: str
    start: int
    end: int
    at: int | None = None


@dataclass
class LogPlan:
    """What every task of one read of the log knows: the pieces, the cut and what it drops."""

    pieces: list[Piece]
    cut: int
    drop: list[tuple[int, int]] = field(default_factory=list)  # inclusive offset ranges not applied
    topic_groups: dict[str, str] = field(default_factory=dict)  # topic id (hex) -> group
    name_groups: dict[str, str] = field(default_factory=dict)  # topic name -> group, when not the name
    identity: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> LogPlan:
        raw = json.loads(text)
        raw["pieces"] = [Piece(**p) for p in raw["pieces"]]
        raw["drop"] = [tuple(d) for d in raw["drop"]]
        return cls(**raw)


# --- the plan (driver) ---------------------------------------------------------------------------


class _Groups:
    """Union-find of topic names over the topic ids they were created with."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}
        self.by_id: dict[str, str] = {}

    def _find(self, name: str) -> str:
        parent = self.parent
        root = name
        while parent.setdefault(root, root) != root:
            root = parent[root]
        while parent[name] != root:
            parent[name], name = root, parent[name]
        return root

    def add(self, topic_id: str, name: str) -> None:
        self._find(name)
        other = self.by_id.setdefault(topic_id, name)
        if other != name:
            a, b = self._find(other), self._find(name)
            if a != b:
                self.parent[max(a, b)] = min(a, b)

    def tables(self) -> tuple[dict[str, str], dict[str, str]]:
        names = {n: self._find(n) for n in self.parent}
        ids = {tid: "t:" + names[n] for tid, n in self.by_id.items()}
        return ids, {n: "t:" + root for n, root in names.items() if root != n}


class _Planner:
    def __init__(self, cut: int) -> None:
        self.cut = cut
        self.markers = ImageBuilder()  # markers and ZkMigrationStateRecords only: identity and errors
        self.groups = _Groups()
        self.drop: list[tuple[int, int]] = []
        self.extents: list[tuple[str, int, int, int | None]] = []
        self.records = 0
        self.last_applied = -1
        self.txn_begin: int | None = None
        self.txn_records = 0
        self.before_txn = -1

    def batch(self, batch: Any, at: int | None = None) -> bool:
        """Plan one batch; False once the batch starts past the cut (the walk stops)."""
        if at is None and batch.base_offset > self.cut:
            return False
        self.extents.append((batch.file, batch.position, batch.end_position, at))
        if batch.is_control:
            return True
        values = batch.values()
        if at is not None:
            offsets: Any = [at] * len(values)
        elif batch.records_count == batch.last_offset_delta + 1:
            offsets = range(batch.base_offset, batch.base_offset + len(values))
        else:
            offsets = [o for o, _ in decode_batch_records(batch)]
        where = f"{batch.file}: batch at byte {batch.position}"
        cut = self.cut
        for offset, value in zip(offsets, values, strict=True):
            if offset > cut:
                return False
            self.records += 1
            api = value[1] if len(value) > 1 else -1
            if api in _PLAN_KEYS:
                rec = decode_value(value, where)
                if isinstance(rec, MetadataRecord):
                    self._keyed(offset, rec)
                    if api in _MARKERS:
                        continue
            if self.txn_begin is None:
                self.last_applied = offset
            else:
                self.txn_records += 1
        return True

    def _keyed(self, offset: int, rec: MetadataRecord) -> None:
        if rec.api_key == _TOPIC_RECORD:
            self.groups.add(rec.fields["TopicId"].hex, rec.fields["Name"])
            return
        self.markers.replay(offset, rec)  # raises the replay's own errors (End without Begin, ...)
        if rec.api_key == 23:
            self.txn_begin, self.txn_records, self.before_txn = offset, 0, self.last_applied
        elif rec.api_key in (24, 25):
            if rec.api_key == 25 and self.txn_begin is not None:
                self.drop.append((self.txn_begin, offset))
            self.txn_begin = None
            self.last_applied = offset

    def finish(self) -> dict[str, Any]:
        result = self.markers.finish()
        open_txn = None
        if self.txn_begin is not None:
            self.drop.append((self.txn_begin, self.cut))
            assert result.open_transaction is not None
            open_txn = result.open_transaction.model_dump()
            open_txn["pending_records"] = self.txn_records
            self.last_applied = self.before_txn
        return {
            "last_applied_offset": self.last_applied,
            "migration_state": result.migration_state_name,
            "migration_state_offset": result.migration_state_offset,
            "open_transaction": open_txn,
            "committed_transactions": result.committed_transactions,
            "aborted_transactions": result.aborted_transactions,
            "records": self.records,
        }

    def pieces(self, tasks: int) -> list[Piece]:
        """Consecutive batches of one file, cut into about `tasks` pieces of equal bytes."""
        total = sum(end - start for _, start, end, _ in self.extents)
        target = max(1, -(-total // max(1, tasks)))
        out: list[Piece] = []
        for file, start, end, at in self.extents:
            last = out[-1] if out else None
            if (
                last
                and last.file == file
                and last.at == at
                and last.end == start
                and last.end - last.start < target
            ):
                last.end = end
            else:
                out.append(Piece(file, start, end, at))
        return out


def _pick_snapshot(log: MetadataLog, cut: int) -> SnapshotId | None:
    """The newest snapshot at or before `cut`, unless the segments alone reach back to offset 0."""
    if log.segments and log.log_start_offset == 0:
        return None
    snaps = [s for s in list_snapshots(log.partition_dir) if s.end_offset - 1 <= cut]
    return snaps[-1] if snaps else None


def check_start(log: MetadataLog, snap: SnapshotId | None, cut: int, end: int) -> int:
    """The first log offset the image needs after `snap`; bad input when offsets are missing."""
    start = snap.end_offset if snap is not None else 0
    if log.segments and log.log_start_offset > start and end > start:
        raise BadInputError(
            f"{log.partition_dir}: the log starts at offset {log.log_start_offset} but "
            + (f"the snapshot before offset {cut + 1} ends at {start}" if snap else "there is no snapshot")
            + f"; offsets {start}..{log.log_start_offset - 1} are missing"
        )
    return start


def _snapshot_batches(planner: _Planner, path: Path, at: int) -> None:
    """Plan a snapshot's batches: framing, offsets, header first and footer last (as `read_snapshot`
    checks them); every map task checks its batches' CRCs."""
    file = str(path)
    try:
        with open(path, "rb") as f:
            buf: Any = (
                mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(f.fileno()).st_size else b""
            )
    except FileNotFoundError:
        raise UnreachableError(f"{path}: no such snapshot") from None
    except OSError as e:
        raise UnreachableError(f"cannot read {path}: {e.strerror}") from None
    if not len(buf):
        raise CorruptLogError(file, 0, "empty snapshot file")
    header = False
    footer_at: int | None = None
    next_offset = 0
    for batch in iter_batches(buf, file, verify_crc=False):
        if footer_at is not None:
            raise CorruptLogError(file, batch.position, "batch after the SnapshotFooterRecord")
        if batch.base_offset < next_offset:
            raise CorruptLogError(file, batch.position, f"offset {batch.base_offset} goes backwards")
        next_offset = batch.next_offset
        if batch.is_control:
            for ctype, value in batch.control_records():
                msg = decode_control_record(
                    ctype, value, f"{file}: control record in batch at byte {batch.position}"
                )
                if not header:
                    if not isinstance(msg, SnapshotHeader):
                        raise CorruptLogError(
                            file, batch.position, "snapshot does not start with a SnapshotHeaderRecord"
                        )
                    header = True
                elif isinstance(msg, SnapshotHeader):
                    raise CorruptLogError(file, batch.position, "a second SnapshotHeaderRecord")
                elif isinstance(msg, SnapshotFooter):
                    footer_at = batch.position
        elif not header:
            raise CorruptLogError(file, batch.position, "snapshot does not start with a SnapshotHeaderRecord")
        planner.batch(batch, at=at)
    if footer_at is None:
        raise CorruptLogError(file, len(buf), "no SnapshotFooterRecord: the snapshot is incomplete")


def plan_log(path: str | os.PathLike[str], up_to_offset: int | None = None, tasks: int = 2) -> LogPlan:
    """Plan the image of the log at `up_to_offset` (inclusive; default its end) for `tasks` map tasks."""
    p = Path(path)
    if p.name.endswith(".checkpoint") and not p.is_dir():
        return _plan_snapshot_file(p, up_to_offset, tasks)
    if not p.exists():
        raise UnreachableError(f"{p}: no such log directory or file")
    try:
        log = MetadataLog.open(p)
    except PermissionError as e:
        raise UnreachableError(f"cannot read {p}: {e.strerror}") from None
    try:
        end = log.end_offset
        cut = end - 1 if up_to_offset is None else up_to_offset
        if cut >= end:
            raise BadInputError(f"{log.partition_dir}: offset {cut} is past the log's end (end offset {end})")
        snap = _pick_snapshot(log, cut)
        planner = _Planner(cut)
        if snap is not None:
            _snapshot_batches(planner, snap.path, snap.end_offset - 1)
            if planner.txn_begin is not None:
                raise BadInputError(f"{snap.path}: snapshot ends inside a metadata transaction")
        start = check_start(log, snap, cut, end)
        if cut >= start:
            for batch in log.batches(start, verify_crc=False):
                if not planner.batch(batch):
                    break
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
            "cluster_id": log.meta.cluster_id if log.meta is not None else None,
        }
    finally:
        log.close()
    identity.update(planner.finish())
    ids, names = planner.groups.tables()
    return LogPlan(planner.pieces(tasks), cut, planner.drop, ids, names, identity)


def _plan_snapshot_file(p: Path, up_to_offset: int | None, tasks: int) -> LogPlan:
    parsed = parse_snapshot_name(p.name)
    end = parsed[0] if parsed else None
    if up_to_offset is not None and (end is None or up_to_offset != end - 1):
        raise BadInputError(
            f"{p}: a snapshot file is the image at its own end offset ({end}); it cannot be cut at {up_to_offset}"
        )
    at = (end or 1) - 1
    planner = _Planner(at)
    _snapshot_batches(planner, p, at)
    if planner.txn_begin is not None:
        raise BadInputError(f"{p}: snapshot ends inside a metadata transaction")
    identity = {
        "source": "kraft-snapshot",
        "path": str(p),
        "snapshot": str(p),
        "snapshot_end_offset": end,
        "end_offset": end,
        "cut_offset": at,
    }
    meta = p.parent.parent / "meta.properties"
    if meta.is_file():
        identity["cluster_id"] = dirfiles.read_meta_properties(meta).cluster_id
    identity.update(planner.finish())
    identity["last_applied_offset"] = at
    ids, names = planner.groups.tables()
    return LogPlan(planner.pieces(tasks), at, [], ids, names, identity)


# --- the map (tasks) -----------------------------------------------------------------------------


def _group(rec: MetadataRecord, plan: LogPlan) -> str:
    api = rec.api_key
    f = rec.fields
    if api in _TOPIC_ID_KEYS:
        tid = f["TopicId"].hex
        return plan.topic_groups.get(tid) or "id:" + tid
    if api == _TOPIC_RECORD:
        return plan.topic_groups.get(f["TopicId"].hex) or "t:" + f["Name"]
    if api == _CONFIG_RECORD and f["ResourceType"] == _TOPIC_RESOURCE:
        name = f["ResourceName"]
        return plan.name_groups.get(name) or "t:" + name
    return CLUSTER_GROUP


def map_piece(plan: LogPlan, piece: Piece) -> Iterator[pa.RecordBatch]:
    """The piece's applied records as `RECORD_SCHEMA` rows (CRC of every batch checked)."""
    try:
        with open(piece.file, "rb") as f:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise UnreachableError(f"cannot read {piece.file}: {e.strerror}") from None
    cut, at = plan.cut, piece.at
    drop = sorted(plan.drop)
    drop_starts = [lo for lo, _ in drop]
    groups: list[str] = []
    offsets: list[int] = []
    seqs: list[int] = []
    values: list[bytes] = []

    def dropped(offset: int) -> bool:
        i = bisect.bisect_right(drop_starts, offset) - 1
        return i >= 0 and offset <= drop[i][1]

    def flush() -> pa.RecordBatch:
        out = pa.RecordBatch.from_arrays(
            [
                pa.array(groups, pa.string()),
                pa.array(offsets, pa.int64()),
                pa.array(seqs, pa.int64()),
                pa.array(values, pa.binary()),
            ],
            schema=RECORD_SCHEMA,
        )
        groups.clear(), offsets.clear(), seqs.clear(), values.clear()
        return out

    try:
        for batch in iter_batches(buf, piece.file, start=piece.start):
            if batch.position >= piece.end:
                break
            if batch.is_control:
                continue
            if at is None and batch.base_offset > cut:
                break
            # a batch's records are decoded once here (the C path) for their group; the reducer
            # decodes its own groups' values again, which is cheaper than shipping decoded fields
            recs = decode_batch_records(batch)
            raw = batch.values()
            check = drop and any(lo <= batch.last_offset and batch.base_offset <= hi for lo, hi in drop)
            for (offset, rec), value in zip(recs, raw, strict=True):
                if at is None:
                    if offset > cut:
                        break
                    if check and dropped(offset):
                        continue
                api = rec.api_key
                if api in _MARKERS or api == _NOOP:
                    continue
                groups.append(_group(rec, plan) if isinstance(rec, MetadataRecord) else CLUSTER_GROUP)
                if at is None:
                    offsets.append(offset)
                    seqs.append(0)
                else:
                    offsets.append(at)
                    seqs.append(offset)
                values.append(value)
            if len(groups) >= _BATCH_ROWS:
                yield flush()
        if groups:
            yield flush()
    finally:
        del buf


# --- the reduce (tasks) --------------------------------------------------------------------------


def fold_rows(
    batches: Iterator[pa.RecordBatch], where: str = "a record of the log"
) -> Iterator[pa.RecordBatch]:
    """Replay record rows sorted by (offset, seq) into one image and yield its audit rows."""
    from spark_audit.rows import image_batches

    builder = ImageBuilder()
    replay = builder.replay
    for batch in batches:
        cols = batch.to_pydict()
        for offset, value in zip(cols["offset"], cols["value"], strict=True):
            replay(offset, decode_value(value, where))
    yield from image_batches(builder.finish().image, side="kraft")
