"""Offline verification of a metadata log (`zk2kraft log verify`): every batch of every segment and
snapshot checked for CRC, framing, offsets and record decoding.

Unlike a read, verification goes on past damage (resynchronising on the next valid batch, as
`segments.valid_batch_after` finds it) so that every damaged place is reported. It never writes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from migrator.errors import BadInputError, UnreachableError
from migrator.kraft import dirfiles
from migrator.kraft.batch import CorruptLogError, RecordBatch, iter_batches
from migrator.kraft.batch_decode import decode_batch_records
from migrator.kraft.control import decode_control_record
from migrator.kraft.log import METADATA_PARTITION
from migrator.kraft.records import CorruptRecordError
from migrator.kraft.segments import SEGMENT_RE, Segment, list_segments, load_segment, valid_batch_after
from migrator.kraft.snapshot import parse_snapshot_name, read_snapshot

__all__ = ["Damage", "FileCheck", "VerifyReport", "verify_log"]


@dataclass
class Damage:
    """One damaged place: the file, the byte offset and why."""

    file: str
    position: int
    reason: str
    kind: str  # "batch", "record", "offset", "torn-tail", "snapshot", "file"


@dataclass
class FileCheck:
    file: str
    kind: str  # "segment" | "snapshot"
    size: int
    batches: int = 0
    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    ok: bool = True


@dataclass
class VerifyReport:
    path: str
    files: list[FileCheck]
    damage: list[Damage]

    @property
    def ok(self) -> bool:
        return not self.damage


def _verify_batch_records(batch: RecordBatch, check: FileCheck, damage: list[Damage]) -> None:
    try:
        if batch.is_control:
            for ctype, value in batch.control_records():
                decode_control_record(ctype, value, f"{batch.file}: control batch at byte {batch.position}")
            check.records += batch.records_count
        else:
            check.records += len(decode_batch_records(batch))
    except CorruptRecordError as e:
        damage.append(Damage(batch.file, batch.position, str(e), "record"))
    except CorruptLogError as e:
        damage.append(Damage(e.file, e.offset, e.reason, "record"))


def _verify_segment(
    seg: Segment, last: bool, expect: int | None, damage: list[Damage]
) -> tuple[FileCheck, int | None]:
    file = str(seg.path)
    buf = load_segment(seg.path)
    check = FileCheck(file, "segment", len(buf))
    pos = 0
    next_offset = expect
    epoch = -1
    before = len(damage)
    gap_from_damage = False
    while pos < len(buf):
        try:
            for batch in iter_batches(buf, file, pos):
                if next_offset is not None and batch.base_offset > next_offset and not gap_from_damage:
                    damage.append(
                        Damage(
                            file,
                            batch.position,
                            f"offsets {next_offset}-{batch.base_offset - 1} are missing: the batch before ends "
                            f"at {next_offset - 1} and this one starts at {batch.base_offset} (a truncated or "
                            "emptied segment?)",
                            "offset",
                        )
                    )
                if batch.base_offset < max(seg.base_offset, next_offset or 0):
                    damage.append(
                        Damage(
                            file,
                            batch.position,
                            f"batch base offset {batch.base_offset} is below the expected offset "
                            f"{max(seg.base_offset, next_offset or 0)}",
                            "offset",
                        )
                    )
                if batch.partition_leader_epoch < epoch:
                    damage.append(
                        Damage(
                            file,
                            batch.position,
                            f"leader epoch {batch.partition_leader_epoch} goes back from {epoch}",
                            "offset",
                        )
                    )
                epoch = max(epoch, batch.partition_leader_epoch)
                next_offset = batch.next_offset
                gap_from_damage = False  # the offsets a damaged batch held are reported with it
                check.batches += 1
                check.first_offset = batch.base_offset if check.first_offset is None else check.first_offset
                check.last_offset = batch.last_offset
                _verify_batch_records(batch, check, damage)
                pos = batch.end_position
            break
        except CorruptLogError as e:
            after = valid_batch_after(buf, e.offset + 1, file, next_offset or 0)
            if after is None:
                kind = "torn-tail" if last else "batch"
                tail = f"{len(buf) - e.offset} bytes to the end of the file"
                note = "; a writable open truncates this torn tail" if last else ""
                damage.append(Damage(file, e.offset, f"{e.reason} ({tail}){note}", kind))
                break
            damage.append(Damage(file, e.offset, f"{e.reason}; next valid batch at byte {after}", "batch"))
            pos = after
            gap_from_damage = True
    check.ok = len(damage) == before
    if not check.ok:
        return check, None  # where this segment's data really ended is unknown: already reported
    if check.batches == 0 and next_offset is None:
        next_offset = seg.base_offset  # an empty segment: the next one must start where this one does
    return check, next_offset


def verify_log(path: str | os.PathLike[str]) -> VerifyReport:
    """Check CRC, framing and record decoding of every batch of every segment and snapshot.

    Unlike a read, verification goes on past damage (resynchronising on the next valid batch) so
    that every damaged place is reported. It never modifies anything.
    """
    p = Path(path)
    damage: list[Damage] = []
    files: list[FileCheck] = []
    if p.suffix == ".checkpoint" or p.name.endswith(".checkpoint"):
        files.append(_verify_snapshot(p, damage))
        return VerifyReport(str(p), files, damage)
    if p.suffix == ".log":
        if not p.is_file():
            raise UnreachableError(f"{p}: no such segment file")
        m = SEGMENT_RE.match(p.name)
        if not m:
            raise BadInputError(f"{p}: not a segment file name (expected %020d.log)")
        check, _ = _verify_segment(Segment(int(m.group(1)), p), True, None, damage)
        files.append(check)
        return VerifyReport(str(p), files, damage)
    if p.name == METADATA_PARTITION or (p / dirfiles.PARTITION_METADATA).exists():
        partition_dir, log_dir = p, p.parent
    else:
        log_dir, partition_dir = p, p / METADATA_PARTITION
    if not p.exists():
        raise UnreachableError(f"log directory {p} does not exist")
    if not partition_dir.is_dir():
        raise BadInputError(f"{p} is not a KRaft metadata log directory (no {METADATA_PARTITION}/ in it)")
    meta = log_dir / dirfiles.META_PROPERTIES
    if meta.exists():
        try:
            dirfiles.read_meta_properties(meta)
        except BadInputError as e:
            damage.append(Damage(str(meta), 0, str(e), "file"))
    lec = partition_dir / dirfiles.LEADER_EPOCH_CHECKPOINT
    if lec.exists():
        try:
            dirfiles.read_leader_epochs(lec)
        except BadInputError as e:
            damage.append(Damage(str(lec), 0, str(e), "file"))
    segments = list_segments(partition_dir)
    expect: int | None = None
    for i, seg in enumerate(segments):
        check, expect = _verify_segment(seg, i == len(segments) - 1, expect, damage)
        files.append(check)
    for name in sorted(os.listdir(partition_dir)):
        if parse_snapshot_name(name):
            files.append(_verify_snapshot(partition_dir / name, damage))
    return VerifyReport(str(p), files, damage)


def _verify_snapshot(path: Path, damage: list[Damage]) -> FileCheck:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise UnreachableError(f"{path}: no such snapshot") from None
    check = FileCheck(str(path), "snapshot", size)
    try:
        snap = read_snapshot(path)
        check.batches = snap.batches
        check.records = len(snap.records)
    except CorruptLogError as e:
        damage.append(Damage(e.file, e.offset, e.reason, "snapshot"))
        check.ok = False
    except CorruptRecordError as e:
        damage.append(Damage(str(path), 0, str(e), "snapshot"))
        check.ok = False
    return check
