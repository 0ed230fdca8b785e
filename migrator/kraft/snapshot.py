"""KRaft snapshots: `%020d-%010d.checkpoint` (end offset exclusive, epoch) in the partition directory.

A snapshot is a control batch with a SnapshotHeaderRecord, data batches of metadata records (offsets
restart at 0 inside the file; partitionLeaderEpoch is the snapshot's epoch) and a final control batch
with a SnapshotFooterRecord. A snapshot without its footer is incomplete and is rejected. Files are
written as `<id>-<random>.checkpoint.part` and renamed into place, as Kafka's `Snapshots` does, so a
crash never leaves a half snapshot under a `.checkpoint` name.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from migrator.errors import BadInputError, UnreachableError
from migrator.kraft import dirfiles
from migrator.kraft.batch import CorruptLogError, iter_batches
from migrator.kraft.batch_decode import decode_batch_records
from migrator.kraft.batch_encode import encode_control_batch, encode_record_batches, with_base_offset
from migrator.kraft.control import (
    ControlMessage,
    SnapshotFooter,
    SnapshotHeader,
    decode_control_record,
    encode_control_record,
)
from migrator.kraft.image import ReplayResult, snapshot_records
from migrator.kraft.records import MetadataRecord, OpaqueRecord
from migrator.model import ClusterImage

if TYPE_CHECKING:
    from migrator.kraft.log import MetadataLog

__all__ = [
    "Snapshot",
    "SnapshotId",
    "list_snapshots",
    "parse_snapshot_name",
    "read_snapshot",
    "read_snapshot_timestamp",
    "remove_partial_snapshots",
    "snapshot_name",
    "write_snapshot",
    "write_snapshot_file",
]

SUFFIX = ".checkpoint"
PART_SUFFIX = ".checkpoint.part"
_NAME_RE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_RECORDS_PER_BATCH = 10_000
_BATCH_BYTES = 8 << 20


@dataclass(frozen=True, order=True)
class SnapshotId:
    end_offset: int
    epoch: int
    path: Path = field(compare=False)


@dataclass
class Snapshot:
    """A decoded snapshot file."""

    path: Path
    end_offset: int | None  # from the file name; None for e.g. bootstrap.checkpoint
    epoch: int | None
    last_contained_log_timestamp: int
    records: list[tuple[int, MetadataRecord | OpaqueRecord]]
    control: list[ControlMessage]  # control records other than header and footer (KRaftVersion, Voters)
    batches: int
    size: int


def snapshot_name(end_offset: int, epoch: int) -> str:
    return f"{end_offset:020d}-{epoch:010d}{SUFFIX}"


def parse_snapshot_name(name: str) -> tuple[int, int] | None:
    """(end offset, epoch) of a `%020d-%010d.checkpoint` name, or None."""
    m = _NAME_RE.match(name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def list_snapshots(partition_dir: Path) -> list[SnapshotId]:
    """Complete snapshots of a partition directory, oldest first (`.part` and `.deleted` ignored)."""
    try:
        names = os.listdir(partition_dir)
    except FileNotFoundError:
        return []
    except PermissionError as e:
        raise UnreachableError(f"cannot list {partition_dir}: {e.strerror}") from None
    out = []
    for name in names:
        parsed = parse_snapshot_name(name)
        if parsed:
            out.append(SnapshotId(parsed[0], parsed[1], partition_dir / name))
    return sorted(out)


def remove_partial_snapshots(partition_dir: Path) -> list[Path]:
    """Delete `.checkpoint.part` files a crashed writer left behind (Kafka does this on startup)."""
    removed = []
    for name in os.listdir(partition_dir):
        if name.endswith(PART_SUFFIX):
            (partition_dir / name).unlink(missing_ok=True)
            removed.append(partition_dir / name)
    return removed


def read_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """Read and check a snapshot: header first, footer last, every batch's CRC and framing."""
    path = Path(path)
    file = str(path)
    try:
        buf = path.read_bytes()
    except FileNotFoundError:
        raise UnreachableError(f"{path}: no such snapshot") from None
    except PermissionError as e:
        raise UnreachableError(f"cannot read {path}: {e.strerror}") from None
    parsed = parse_snapshot_name(path.name)
    if not buf:
        raise CorruptLogError(file, 0, "empty snapshot file")
    header: SnapshotHeader | None = None
    footer_at: int | None = None
    records: list[tuple[int, MetadataRecord | OpaqueRecord]] = []
    control: list[ControlMessage] = []
    count = 0
    next_offset = 0
    for batch in iter_batches(buf, file):
        if footer_at is not None:
            raise CorruptLogError(file, batch.position, "batch after the SnapshotFooterRecord")
        if batch.base_offset < next_offset:
            raise CorruptLogError(file, batch.position, f"offset {batch.base_offset} goes backwards")
        next_offset = batch.next_offset
        count += 1
        if batch.is_control:
            for ctype, value in batch.control_records():
                msg = decode_control_record(
                    ctype, value, f"{file}: control record in batch at byte {batch.position}"
                )
                if header is None:
                    if not isinstance(msg, SnapshotHeader):
                        raise CorruptLogError(
                            file, batch.position, "snapshot does not start with a SnapshotHeaderRecord"
                        )
                    header = msg
                elif isinstance(msg, SnapshotHeader):
                    raise CorruptLogError(file, batch.position, "a second SnapshotHeaderRecord")
                elif isinstance(msg, SnapshotFooter):
                    footer_at = batch.position
                else:
                    control.append(msg)
        else:
            if header is None:
                raise CorruptLogError(
                    file, batch.position, "snapshot does not start with a SnapshotHeaderRecord"
                )
            records.extend(decode_batch_records(batch))
    if footer_at is None:
        raise CorruptLogError(file, len(buf), "no SnapshotFooterRecord: the snapshot is incomplete")
    assert header is not None
    return Snapshot(
        path=path,
        end_offset=parsed[0] if parsed else None,
        epoch=parsed[1] if parsed else None,
        last_contained_log_timestamp=header.last_contained_log_timestamp,
        records=records,
        control=control,
        batches=count,
        size=len(buf),
    )


def read_snapshot_timestamp(path: str | os.PathLike[str]) -> int | None:
    """The header's LastContainedLogTimestamp, reading only the first batch (Kafka's
    `readSnapshotTimestamp` for retention by age); None when the file or its header is unreadable."""
    try:
        with open(path, "rb") as f:
            prefix = f.read(12)
            if len(prefix) < 12:
                return None
            length = int.from_bytes(prefix[8:12], "big", signed=True)
            if not 0 < length <= 1 << 20:
                return None
            buf = prefix + f.read(length)
        batch = next(iter_batches(buf, os.fspath(path)), None)
        if batch is None or not batch.is_control:
            return None
        for ctype, value in batch.control_records():
            msg = decode_control_record(ctype, value, f"{os.fspath(path)}: header batch")
            if isinstance(msg, SnapshotHeader):
                return msg.last_contained_log_timestamp
    except (OSError, CorruptLogError, BadInputError):
        return None
    return None


def write_snapshot_file(
    directory: Path,
    records: Iterable[MetadataRecord | OpaqueRecord],
    end_offset: int,
    epoch: int,
    last_contained_timestamp: int,
    name: str | None = None,
) -> Path:
    """Write a complete snapshot into `directory` via `.checkpoint.part` + fsync + rename."""
    final = directory / (name or snapshot_name(end_offset, epoch))
    if final.exists():
        raise BadInputError(f"{final}: snapshot already exists")
    part = directory / f"{final.name[: -len(SUFFIX)]}-{uuid.uuid4().int % 10**19}{PART_SUFFIX}"
    ts = last_contained_timestamp
    source = iter(records)
    # A batch's worth of records at a time (a record that cannot be encoded leaves no snapshot: the
    # .part goes): a whole cluster's records at once were ~1 GB at 1M partitions, beside their image.
    chunk = list(islice(source, _RECORDS_PER_BATCH))
    batches = encode_record_batches(chunk, epoch, ts, _RECORDS_PER_BATCH, _BATCH_BYTES) if chunk else []
    try:
        with open(part, "wb") as f:
            header = encode_control_record(SnapshotHeader(last_contained_log_timestamp=ts))
            f.write(encode_control_batch(0, epoch, [header], ts))
            offset = 1
            while batches:
                for data, count in batches:
                    f.write(with_base_offset(data, offset))
                    offset += count
                chunk = list(islice(source, _RECORDS_PER_BATCH))
                batches = (
                    encode_record_batches(chunk, epoch, ts, _RECORDS_PER_BATCH, _BATCH_BYTES) if chunk else []
                )
            f.write(encode_control_batch(offset, epoch, [encode_control_record(SnapshotFooter())], ts))
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, final)
        dirfiles.fsync_dir(directory)
    except OSError as e:
        part.unlink(missing_ok=True)
        raise UnreachableError(f"cannot write snapshot {final}: {e.strerror}") from None
    except BaseException:  # a record that cannot be encoded: no partial snapshot is left behind
        part.unlink(missing_ok=True)
        raise
    return final


def write_snapshot(
    log: MetadataLog,
    source: ReplayResult | ClusterImage | Iterable[MetadataRecord | OpaqueRecord],
    end_offset: int | None = None,
    epoch: int | None = None,
    timestamp_ms: int | None = None,
) -> Path:
    """Snapshot `source` as the state of `log` up to `end_offset` (default: the log's end offset).

    The epoch defaults to the one that wrote offset `end_offset - 1`; the header's timestamp to that
    batch's append time. Needs the writer lock (a writable log).
    """
    if not log.writable:
        raise BadInputError(
            f"{log.log_dir}: writing a snapshot needs the log opened for writing (the writer lock)"
        )
    end = log.end_offset if end_offset is None else end_offset
    if end < 0 or end > log.end_offset:
        raise BadInputError(f"snapshot end offset {end} is outside the log (end offset {log.end_offset})")
    if epoch is None:
        epoch = log.epoch_for_offset(end - 1) if end > 0 else max(log.latest_epoch, 0)
        epoch = max(epoch, 0)
    if timestamp_ms is None:
        timestamp_ms = (log.timestamp_of(end - 1) if end > 0 else None) or int(time.time() * 1000)
    if isinstance(source, ReplayResult):
        records: Iterable[MetadataRecord | OpaqueRecord] = snapshot_records(source)
    elif isinstance(source, ClusterImage):
        records = snapshot_records(ReplayResult(image=source))
    else:
        records = source
    return write_snapshot_file(log.partition_dir, records, end, epoch, timestamp_ms)
