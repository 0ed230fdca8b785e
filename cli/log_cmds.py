"""`zk2kraft log dump|verify|image|snapshot`: look into a KRaft metadata log directory.

`--log-dir` (env ZK2KRAFT_LOG_DIR) is the metadata log dir, its `__cluster_metadata-0`, or a single
`.log` segment or `.checkpoint` snapshot. Rich tables on a terminal, plain text otherwise, JSON with
--json. Secrets (SCRAM salts and keys, password-like config values) are never printed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from cli import render
from cli.options import json_option, log_dir_option, zookeeper_options
from migrator import commands

#: kept under their old names: `log dump`'s mask and secret rule live in `commands.log`
MASK = commands.MASK
is_secret_config = commands.is_secret_config


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
    console = _console() if _use_rich(as_json) else None
    shown = 0

    def note(text: str) -> None:
        click.echo(f"zk2kraft: note: {text}", err=True)

    for entry in commands.log_dump(commands.Target(log_dir=log_dir), from_offset, note):
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
        kafka = commands.log_verify_kafka(commands.Target(log_dir=log_dir))
        click.echo(json.dumps(kafka.model_dump(mode="json"), indent=2) if as_json else "\n".join(kafka.lines))
        raise click.exceptions.Exit(1 if kafka.refused else 0)
    report = commands.log_verify(commands.Target(log_dir=log_dir))
    if as_json:
        click.echo(json.dumps(report.model_dump(mode="json"), indent=2))
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
    summary = commands.log_image(commands.Target(log_dir=log_dir)).model_dump(mode="json")
    torn = summary["torn_tail_bytes"]
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
    done = commands.log_snapshot(commands.Target(log_dir=log_dir))
    if as_json:
        click.echo(json.dumps(done.model_dump(mode="json"), indent=2))
    else:
        click.echo(done.path if done.created else f"{done.path} (already exists)")


@log.command("truncate-unsynced")
@zookeeper_options
@log_dir_option()
@click.option(
    "--yes", "-y", is_flag=True, help="Required: the records after /migration's offset are dropped."
)
@json_option
def truncate_unsynced(target: commands.Target, yes: bool, as_json: bool) -> None:
    """Cut the log back to /migration's offset when a record after it can never reach ZooKeeper.

    Only for a write-behind lag that cannot drain (`status` names the record and its znode): an
    older zk2kraft appended a change whose znode write does not fit one ZooKeeper request. Only the
    records ZooKeeper never received go; refused (exit 4) while a controller, follower or admin
    run holds the log, (exit 2) when every record can still be synced. Crash-safe: run it again.

    \b
    Example:
      zk2kraft log truncate-unsynced -z zk1:2181/kafka -l /var/lib/kraft/metadata --yes
    """
    result = commands.truncate_unsynced(target, yes=yes)
    if as_json:
        click.echo(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        click.echo(
            f"dropped offsets {result.end_offset}..{result.end_offset_before - 1} "
            f"({result.stuck_record}); the log ends at /migration's offset {result.migration_offset}"
        )
