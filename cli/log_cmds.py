"""`zk2kraft log dump|verify|image|snapshot`: look into a KRaft metadata log directory.

`--log-dir` (env ZK2KRAFT_LOG_DIR) is the metadata log dir, its `__cluster_metadata-0`, or a single
`.log` segment or `.checkpoint` snapshot. Rich tables on a terminal, plain text otherwise, JSON with
--json. Secrets (SCRAM salts and keys, password-like config values) are never printed.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from cli import render
from cli.options import json_option, log_dir_option, zookeeper_options
from migrator import commands
from migrator.errors import BadInputError
from migrator.kraft.batch import decode_batch_records
from migrator.kraft.control import decode_control_record
from migrator.kraft.image import MIGRATION_STATES, ReplayResult
from migrator.kraft.log import LoadedImage, MetadataLog, VerifyReport, verify_log
from migrator.kraft.records import MetadataRecord, OpaqueRecord
from migrator.kraft.snapshot import read_snapshot, snapshot_name, write_snapshot
from migrator.secrets import MASK, is_secret_config

_SCRAM_SECRET_FIELDS = ("Salt", "StoredKey", "ServerKey")


def _jsonable(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        from migrator.kraft.records import uuid_to_kafka

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


def _console() -> Any:
    return render.console()


def _use_rich(as_json: bool) -> bool:
    return not as_json and sys.stdout.isatty()


@click.group()
def log() -> None:
    """Inspect and maintain a KRaft metadata log (`__cluster_metadata-0`).

    \b
    Example:
      zk2kraft log verify --log-dir /var/lib/kafka/metadata
      zk2kraft log dump -l /var/lib/kafka/metadata --from-offset 1200 --limit 20
    """


# ---------------------------------------------------------------------------------------------------
# dump


def _dump_entries(path: Path, from_offset: int) -> Iterator[dict[str, Any]]:
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
        if mlog.report.truncated_bytes:
            click.echo(
                f"zk2kraft: note: {mlog.report.truncated_file} ends in a torn tail of "
                f"{mlog.report.truncated_bytes} bytes at byte {mlog.report.truncated_at} (not shown)",
                err=True,
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


@log.command()
@log_dir_option()
@json_option
@click.option(
    "--from-offset", type=click.IntRange(min=0), default=0, show_default=True, help="First offset shown."
)
@click.option("--limit", type=click.IntRange(min=0), default=None, help="Show at most this many records.")
def dump(log_dir: str, as_json: bool, from_offset: int, limit: int | None) -> None:
    """One line per record: offset, epoch, type and fields (secrets masked).

    Like Kafka's `kafka-dump-log --cluster-metadata-decoder`. Pass a `.checkpoint` file to dump a
    snapshot (its offsets restart at 0).

    \b
    Example:
      zk2kraft log dump -l /var/lib/kraft/metadata --json | head
    """
    path = _resolve(log_dir)
    console = _console() if _use_rich(as_json) else None
    shown = 0
    for entry in _dump_entries(path, from_offset):
        if limit is not None and shown >= limit:
            break
        shown += 1
        if as_json:
            click.echo(json.dumps(entry, separators=(",", ":")))
            continue
        version = f" v{entry['version']}" if "version" in entry else ""
        kind = " (control)" if entry["control"] else ""
        fields = json.dumps(entry["fields"], separators=(", ", ": "))
        offset = "-" if entry["offset"] is None else entry["offset"]
        line = f"offset: {offset} epoch: {entry['epoch']} type: {entry['type']}{version}{kind} {fields}"
        if console is not None:
            from rich.markup import escape

            console.print(
                f"[bold]offset: {offset}[/] epoch: {entry['epoch']} [cyan]{entry['type']}{version}[/]{kind} "
                + escape(fields),
                highlight=False,
                soft_wrap=True,
            )
        else:
            click.echo(line)


# ---------------------------------------------------------------------------------------------------
# verify


def _verify_json(report: VerifyReport) -> dict[str, Any]:
    return {
        "path": report.path,
        "ok": report.ok,
        "files": [dataclasses.asdict(f) for f in report.files],
        "damage": [dataclasses.asdict(d) for d in report.damage],
    }


@log.command()
@log_dir_option()
@json_option
@click.option(
    "--kafka",
    "for_kafka",
    is_flag=True,
    help="Say what Kafka 3.9's controller would refuse (exit 1) or rebuild in this directory: the handover check after finalize.",
)
def verify(log_dir: str, as_json: bool, for_kafka: bool = False) -> None:
    """Check CRC and framing of every batch in every segment and snapshot (exit 1 on damage).

    Each damaged place is named by file and byte offset. Nothing is modified.

    \b
    Example:
      zk2kraft log verify -l /var/lib/kraft/metadata
    """
    if for_kafka:
        from migrator.kraft import handover

        kafka = handover.check(_resolve(log_dir))
        click.echo(
            json.dumps(handover.report_dict(kafka), indent=2)
            if as_json
            else "\n".join(handover.report_lines(kafka))
        )
        raise click.exceptions.Exit(1 if kafka.refused else 0)
    report = verify_log(_resolve(log_dir))
    if as_json:
        click.echo(json.dumps(_verify_json(report), indent=2))
    elif _use_rich(as_json):
        from rich.table import Table

        console = _console()
        table = Table(title=f"KRaft log {report.path}")
        for col in ("file", "kind", "bytes", "batches", "records", "offsets", "ok"):
            table.add_column(
                col,
                justify="right" if col in ("bytes", "batches", "records") else "left",
                overflow="fold",
            )
        for f in report.files:
            offsets = "" if f.first_offset is None else f"{f.first_offset}..{f.last_offset}"
            ok = "[green]ok[/]" if f.ok else "[red]DAMAGED[/]"
            table.add_row(Path(f.file).name, f.kind, str(f.size), str(f.batches), str(f.records), offsets, ok)
        console.print(table)
        for d in report.damage:
            console.print(
                f"[red]damage[/] {d.file} at byte {d.position} ({d.kind}): {d.reason}", highlight=False
            )
        console.print("[green]clean[/]" if report.ok else f"[red]{len(report.damage)} damaged place(s)[/]")
    else:
        for f in report.files:
            offsets = "-" if f.first_offset is None else f"{f.first_offset}..{f.last_offset}"
            click.echo(
                f"{'ok' if f.ok else 'DAMAGED'} {f.kind} {f.file} bytes={f.size} batches={f.batches} "
                f"records={f.records} offsets={offsets}"
            )
        for d in report.damage:
            click.echo(f"damage: {d.file} at byte {d.position} ({d.kind}): {d.reason}")
        click.echo("clean" if report.ok else f"{len(report.damage)} damaged place(s)")
    if not report.ok:
        raise click.exceptions.Exit(1)


# ---------------------------------------------------------------------------------------------------
# image


def _image_summary(loaded: LoadedImage, log_start: int | None, torn: int) -> dict[str, Any]:
    result: ReplayResult = loaded.result
    img = result.image
    configs = {"TOPIC": 0, "BROKER": 0}
    for rtype, _ in img.configs:
        configs[rtype] = configs.get(rtype, 0) + 1
    block = img.producer_id_block
    state = result.migration_state
    return {
        "cluster_id": img.cluster_id,
        "end_offset": loaded.end_offset,
        "log_start_offset": log_start,
        "last_applied_offset": result.last_offset,
        "snapshot": loaded.snapshot,
        "snapshot_end_offset": loaded.snapshot_end_offset,
        "torn_tail_bytes": torn,
        "migration_state": None
        if state is None
        else {
            "code": state,
            "name": MIGRATION_STATES.get(state, f"UNKNOWN_{state}"),
            "offset": result.migration_state_offset,
        },
        "open_transaction": result.open_transaction.model_dump() if result.open_transaction else None,
        "committed_transactions": result.committed_transactions,
        "aborted_transactions": result.aborted_transactions,
        "feature_levels": result.feature_levels,
        "counts": {
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
        "next_producer_id": block.block_end + 1 if block else None,
        "records_by_type": dict(sorted(result.counts.items())),
        "unknown_records": result.unknown_records,
    }


def _load_any(path: Path) -> tuple[LoadedImage, int | None, int]:
    if _is_snapshot(path):
        from migrator.kraft.image import ImageBuilder

        snap = read_snapshot(path)
        builder = ImageBuilder()
        at = (snap.end_offset or 0) - 1
        for _offset, rec in snap.records:
            builder.replay(at, rec)
        loaded = LoadedImage(builder.finish(), str(path), snap.end_offset, snap.end_offset or 0)
        return loaded, None, 0
    with MetadataLog.open(path) as mlog:
        return mlog.load_image(), mlog.log_start_offset, mlog.report.truncated_bytes


@log.command()
@log_dir_option()
@json_option
def image(log_dir: str, as_json: bool) -> None:
    """Replay the log (newest snapshot + the records after it) and summarise the image.

    Shows counts per kind, the migration state (Kafka's ZkMigrationState code and name), any open
    metadata transaction and the end offset.

    \b
    Example:
      zk2kraft log image -l /var/lib/kraft/metadata
    """
    loaded, log_start, torn = _load_any(_resolve(log_dir))
    summary = _image_summary(loaded, log_start, torn)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    state = summary["migration_state"]
    state_text = (
        "none recorded" if state is None else f"{state['name']} ({state['code']}) at offset {state['offset']}"
    )
    txn = summary["open_transaction"]
    txn_text = (
        "none"
        if txn is None
        else f"{txn['name']!r} begun at offset {txn['begin_offset']}, {txn['pending_records']} records pending (not applied)"
    )
    facts = [
        ("cluster id", str(summary["cluster_id"])),
        ("end offset", str(summary["end_offset"])),
        ("last applied offset", str(summary["last_applied_offset"])),
        ("snapshot", summary["snapshot"] or "none"),
        ("migration state", state_text),
        ("open transaction", txn_text),
        (
            "transactions",
            f"{summary['committed_transactions']} committed, {summary['aborted_transactions']} aborted",
        ),
        ("features", ", ".join(f"{k}={v}" for k, v in summary["feature_levels"].items()) or "none"),
    ]
    if torn:
        facts.append(("torn tail", f"{torn} bytes at the end of the last segment (ignored)"))
    if summary["unknown_records"]:
        facts.append(("unknown records", f"{summary['unknown_records']} (skipped)"))
    if _use_rich(as_json):
        from rich.table import Table

        console = _console()
        t1 = Table(title="KRaft metadata image", show_header=False)
        t1.add_column("fact", style="bold")
        t1.add_column("value")
        for k, v in facts:
            t1.add_row(k, v)
        t2 = Table(title="counts")
        t2.add_column("kind")
        t2.add_column("count", justify="right")
        for k, v in summary["counts"].items():
            t2.add_row(k, str(v))
        console.print(t1)
        console.print(t2)
    else:
        for k, v in facts:
            click.echo(f"{k}: {v}")
        for k, v in summary["counts"].items():
            click.echo(f"{k}: {v}")


# ---------------------------------------------------------------------------------------------------
# snapshot


@log.command()
@log_dir_option()
@json_option
def snapshot(log_dir: str, as_json: bool) -> None:
    """Write a snapshot of the current image at the end offset (takes the writer lock).

    With a metadata transaction still open, the snapshot ends where it began, so the transaction's
    records stay in the log after it.

    \b
    Example:
      zk2kraft log snapshot -l /var/lib/kraft/metadata
    """
    path = _resolve(log_dir)
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
        target = mlog.partition_dir / snapshot_name(end, epoch)
        created = not target.exists()
        if created:
            target = write_snapshot(mlog, result, end_offset=end, epoch=epoch)
    info = {"path": str(target), "end_offset": end, "epoch": epoch, "created": created}
    if as_json:
        click.echo(json.dumps(info, indent=2))
    else:
        click.echo(str(target) if created else f"{target} (already exists)")


@log.command("truncate-unsynced")
@zookeeper_options
@log_dir_option()
@click.option(
    "--yes", "-y", is_flag=True, help="Required: the records after /migration's offset are dropped."
)
@json_option
def truncate_unsynced(
    zookeeper: str, zk_auth: tuple[str, ...], zk_timeout: float, log_dir: str, yes: bool, as_json: bool
) -> None:
    """Cut the log back to /migration's offset when a record after it can never reach ZooKeeper.

    Only for a write-behind lag that cannot drain (`status` names the record and its znode): an
    older zk2kraft appended a change whose znode write does not fit one ZooKeeper request. Only the
    records ZooKeeper never received go; refused (exit 4) while a controller, follower or admin
    run holds the log, (exit 2) when every record can still be synced. Crash-safe: run it again.

    \b
    Example:
      zk2kraft log truncate-unsynced -z zk1:2181/kafka -l /var/lib/kraft/metadata --yes
    """
    result = commands.truncate_unsynced(zookeeper, log_dir, yes=yes, zk_auth=zk_auth, zk_timeout=zk_timeout)
    if as_json:
        click.echo(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        click.echo(
            f"dropped offsets {result.end_offset}..{result.end_offset_before - 1} "
            f"({result.stuck_record}); the log ends at /migration's offset {result.migration_offset}"
        )
