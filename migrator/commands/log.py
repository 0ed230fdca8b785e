"""`log dump|verify|image|snapshot`: a KRaft metadata log directory looked into, secrets masked.

The Target's `log_dir` is the metadata log dir, its `__cluster_metadata-0`, or a single `.log` segment
or `.checkpoint` snapshot. Secrets (SCRAM salts and keys, password-like config values) never leave
this module unmasked.
"""

from __future__ import annotations

import base64
import dataclasses
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from migrator.errors import BadInputError
from migrator.kraft import handover
from migrator.kraft.batch_decode import decode_batch_records
from migrator.kraft.control import decode_control_record
from migrator.kraft.image import MIGRATION_STATES, ImageBuilder, ReplayResult
from migrator.kraft.log import MetadataLog
from migrator.kraft.log_image import LoadedImage
from migrator.kraft.log_verify import verify_log
from migrator.kraft.records import MetadataRecord, OpaqueRecord, uuid_to_kafka
from migrator.kraft.snapshot import read_snapshot, snapshot_name, write_snapshot
from migrator.results import LogHandoverResult, LogImageResult, LogSnapshotResult, LogVerifyResult
from migrator.secrets import MASK, is_secret_config
from migrator.target import Target

_SCRAM_SECRET_FIELDS = ("Salt", "StoredKey", "ServerKey")


def _jsonable(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return uuid_to_kafka(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def redacted_fields(rec: MetadataRecord | OpaqueRecord) -> dict[str, Any]:
    """A record's fields as JSON-ready values with every secret replaced by a mask."""
    if isinstance(rec, OpaqueRecord):
        return {"body_bytes": len(rec.body)}
    fields = _jsonable(rec.fields)
    if rec.name == "UserScramCredentialRecord":
        for key in _SCRAM_SECRET_FIELDS:
            fields[key] = MASK
    elif rec.name == "ConfigRecord" and fields.get("Value") is not None and is_secret_config(fields["Name"]):
        fields["Value"] = MASK
    return fields


def _resolve(log_dir: str) -> Path:
    return Path(log_dir).expanduser()


def _is_snapshot(path: Path) -> bool:
    return path.name.endswith(".checkpoint")


# --- dump --------------------------------------------------------------------------------------------


def log_dump(
    target: Target, from_offset: int = 0, note: Callable[[str], None] | None = None
) -> Iterator[dict[str, Any]]:
    """Every record from `from_offset` on as a JSON-ready entry (offset, epoch, type, version, control,
    redacted fields), streamed: a log is read batch by batch. A torn tail is told to `note`."""
    path = _resolve(target.log_dir)
    if _is_snapshot(path):
        snap = read_snapshot(path)
        epoch = snap.epoch if snap.epoch is not None else -1
        yield {
            "offset": 0,
            "epoch": epoch,
            "type": "SnapshotHeaderRecord",
            "control": True,
            "fields": {"LastContainedLogTimestamp": snap.last_contained_log_timestamp},
        }
        for msg in snap.control:
            yield {
                "offset": None,
                "epoch": epoch,
                "type": type(msg).__name__,
                "control": True,
                "fields": _control_fields(msg),
            }
        for offset, rec in snap.records:
            if offset >= from_offset:
                yield _record_entry(offset, epoch, rec)
        return
    with MetadataLog.open(path) as mlog:
        for batch in mlog.batches(from_offset):
            epoch = batch.partition_leader_epoch
            if batch.is_control:
                for i, (ctype, value) in enumerate(batch.control_records()):
                    msg = decode_control_record(ctype, value, f"{batch.file}: batch at byte {batch.position}")
                    offset = batch.base_offset + i
                    if offset >= from_offset:
                        yield {
                            "offset": offset,
                            "epoch": epoch,
                            "type": _control_name(msg),
                            "control": True,
                            "fields": _control_fields(msg),
                        }
                continue
            for offset, rec in decode_batch_records(batch):
                if offset >= from_offset:
                    yield _record_entry(offset, epoch, rec)
        if mlog.report.truncated_bytes and note is not None:
            note(
                f"{mlog.report.truncated_file} ends in a torn tail of {mlog.report.truncated_bytes} "
                f"bytes at byte {mlog.report.truncated_at} (not shown)"
            )


def _control_name(msg: Any) -> str:
    names = {"LeaderChange": "LeaderChangeMessage", "SnapshotHeader": "SnapshotHeaderRecord"}
    names |= {"SnapshotFooter": "SnapshotFooterRecord", "KRaftVersion": "KRaftVersionRecord"}
    names |= {"Voters": "VotersRecord", "UnknownControl": "ControlRecord"}
    return names.get(type(msg).__name__, type(msg).__name__)


def _camel(value: Any) -> Any:
    """Control messages are dataclasses with snake_case names; show Kafka's CamelCase, drop unset ids."""
    if isinstance(value, dict):
        return {
            "".join(part[:1].upper() + part[1:] for part in k.split("_")): _camel(v)
            for k, v in value.items()
            if v is not None
        }
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value


def _control_fields(msg: Any) -> dict[str, Any]:
    return _camel(_jsonable(dataclasses.asdict(msg)))  # type: ignore[no-any-return]


def _record_entry(offset: int, epoch: int, rec: MetadataRecord | OpaqueRecord) -> dict[str, Any]:
    return {
        "offset": offset,
        "epoch": epoch,
        "type": rec.name,
        "version": rec.version,
        "control": False,
        "fields": redacted_fields(rec),
    }


# --- verify ------------------------------------------------------------------------------------------


def log_verify_kafka(target: Target) -> LogHandoverResult:
    """What Kafka 3.9's own controller would refuse or rebuild in this directory (after finalize)."""
    report = handover.check(_resolve(target.log_dir))
    return LogHandoverResult.model_validate(
        {**handover.report_dict(report), "lines": handover.report_lines(report)}
    )


def log_verify(target: Target) -> LogVerifyResult:
    """CRC and framing of every batch in every segment and snapshot; each damaged place named."""
    report = verify_log(_resolve(target.log_dir))
    return LogVerifyResult.model_validate(
        {
            "path": report.path,
            "ok": report.ok,
            "files": [dataclasses.asdict(f) for f in report.files],
            "damage": [dataclasses.asdict(d) for d in report.damage],
        }
    )


# --- image -------------------------------------------------------------------------------------------


def _image_summary(loaded: LoadedImage, log_start: int | None, torn: int) -> LogImageResult:
    result: ReplayResult = loaded.result
    img = result.image
    configs = {"TOPIC": 0, "BROKER": 0}
    for rtype, _ in img.configs:
        configs[rtype] = configs.get(rtype, 0) + 1
    block = img.producer_id_block
    state = result.migration_state
    return LogImageResult(
        cluster_id=img.cluster_id,
        end_offset=loaded.end_offset,
        log_start_offset=log_start,
        last_applied_offset=result.last_offset,
        snapshot=loaded.snapshot,
        snapshot_end_offset=loaded.snapshot_end_offset,
        torn_tail_bytes=torn,
        migration_state=None
        if state is None
        else {
            "code": state,
            "name": MIGRATION_STATES.get(state, f"UNKNOWN_{state}"),
            "offset": result.migration_state_offset,
        },
        open_transaction=result.open_transaction.model_dump() if result.open_transaction else None,
        committed_transactions=result.committed_transactions,
        aborted_transactions=result.aborted_transactions,
        feature_levels=result.feature_levels,
        counts={
            "brokers": len(img.brokers),
            "controllers": len(result.controllers),
            "topics": len(img.topics),
            "partitions": img.partition_count(),
            "topic_configs": configs.pop("TOPIC"),
            "broker_configs": configs.pop("BROKER"),
            **{f"{k.lower()}_configs": v for k, v in configs.items()},
            "client_quotas": len(img.client_quotas),
            "scram_credentials": len(img.scram_credentials),
            "acls": len(img.acls),
            "delegation_tokens": len(img.delegation_tokens),
            "producer_id_block": 1 if block else 0,
        },
        next_producer_id=block.block_end + 1 if block else None,
        records_by_type=dict(sorted(result.counts.items())),
        unknown_records=result.unknown_records,
    )


def _load_any(path: Path) -> tuple[LoadedImage, int | None, int]:
    if _is_snapshot(path):
        snap = read_snapshot(path)
        builder = ImageBuilder()
        at = (snap.end_offset or 0) - 1
        for _offset, rec in snap.records:
            builder.replay(at, rec)
        loaded = LoadedImage(builder.finish(), str(path), snap.end_offset, snap.end_offset or 0)
        return loaded, None, 0
    with MetadataLog.open(path) as mlog:
        return mlog.load_image(), mlog.log_start_offset, mlog.report.truncated_bytes


def log_image(target: Target) -> LogImageResult:
    """Replay the log (newest snapshot + the records after it) and summarise the image."""
    loaded, log_start, torn = _load_any(_resolve(target.log_dir))
    return _image_summary(loaded, log_start, torn)


# --- snapshot ----------------------------------------------------------------------------------------


def log_snapshot(target: Target) -> LogSnapshotResult:
    """A snapshot of the current image at the end offset (takes the writer lock); with a metadata
    transaction still open it ends where the transaction began."""
    path = _resolve(target.log_dir)
    if path.suffix in (".log", ".checkpoint") or path.is_file():
        raise BadInputError(f"{path}: `log snapshot` needs the log directory, not a single file")
    with MetadataLog.open(path, writable=True) as mlog:
        if mlog.end_offset == 0:
            raise BadInputError(f"{mlog.partition_dir}: the log is empty; nothing to snapshot")
        loaded = mlog.load_image()
        result = loaded.result
        end = mlog.end_offset
        if result.open_transaction is not None:
            end = result.open_transaction.begin_offset
        epoch = max(mlog.epoch_for_offset(end - 1), 0) if end > 0 else 0
        written = mlog.partition_dir / snapshot_name(end, epoch)
        created = not written.exists()
        if created:
            written = write_snapshot(mlog, result, end_offset=end, epoch=epoch)
    return LogSnapshotResult(path=str(written), end_offset=end, epoch=epoch, created=created)
