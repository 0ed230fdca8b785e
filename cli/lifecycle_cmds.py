"""`zk2kraft plan|finalize|rollback`: the copy as a dry run, and the two ways a migration ends."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cli import render
from cli.options import json_option, log_dir_option, node_id_option, zookeeper_options
from migrator import commands
from migrator.errors import BadInputError
from migrator.results import RollbackResult

# --- plan ------------------------------------------------------------------------------------------


@click.command()
@zookeeper_options
@log_dir_option()
@json_option
def plan(target: commands.Target, as_json: bool) -> None:
    """The copy as a dry run: records and bytes per type, batches, and the time of each phase of
    `migrate` (pre-flight, copy, first sync), measured on this run's read. Writes nothing.

    \b
    Example:
      zk2kraft plan -z zk1:2181/kafka -l /var/lib/kraft/metadata
    """
    result = commands.plan(target)
    if as_json:
        render.emit_json(result)
        return
    out = render.out_console()
    p = result.plan
    if p is None:
        out.print(escape(result.message))
        return
    table = Table(title=f"copy plan for cluster {escape(p.cluster_id or '?')}")
    table.add_column("record type")
    table.add_column("records", justify="right")
    table.add_column("bytes", justify="right")
    for name, t in p.by_type.items():
        table.add_row(name, f"{t.records:,}", f"{t.bytes:,}")
    out.print(table)
    skipped = (
        f"; {len(p.skipped_pending_deletions)} topics pending deletion are not copied"
        if p.skipped_pending_deletions
        else ""
    )
    out.print(
        f"{p.topics:,} topics, {p.partitions:,} partitions: {p.records:,} records, {p.bytes:,} bytes in "
        f"{p.batches} batches{' (a fresh log: bootstrap records included)' if p.fresh_log else ''}; "
        f"copy estimated {p.estimated_seconds:.1f}s{skipped}"
    )
    if result.phases is not None:
        out.print(f"migrate {escape(result.phases.describe())}; the broker wait (--listen) comes on top")


# --- finalize / rollback ---------------------------------------------------------------------------


@click.command()
@zookeeper_options
@log_dir_option()
@click.option("--yes", "-y", is_flag=True, help="Required: finalizing cannot be undone.")
@click.option(
    "--rehearsal",
    is_flag=True,
    help="A rehearsal without real brokers: finalize although no broker of the copy has registered "
    "as a KRaft broker.",
)
@node_id_option
@json_option
def finalize(target: commands.Target, yes: bool, rehearsal: bool, as_json: bool) -> None:
    """End the migration: write POST_MIGRATION; ZooKeeper is never written again. No rollback after it.

    Refused while the write-behind lag is above zero, while any broker is still registered in
    ZooKeeper (roll every broker to KRaft first; in a rehearsal stop `zk2kraft fixtures brokers`, which
    holds the registrations), while the controller still holds the log (stop it with SIGTERM once the
    brokers are rolled), while a broker of the copy has not registered with the controller as a KRaft
    broker (--rehearsal skips this when there are no real brokers), and without --yes. A refusal
    lists every unmet guard at once, each with what meets it.

    \b
    Example:
      zk2kraft finalize -z zk1:2181/kafka -l /var/lib/kraft/metadata --yes
    """
    result = commands.finalize(target, yes=yes, rehearsal=rehearsal)
    if as_json:
        render.emit_json(result)
    else:
        render.out_console().print(
            f"[bold]{result.state_before} → {result.state_after}[/bold]: {escape(result.message)}"
        )


@click.command()
@zookeeper_options
@log_dir_option()
@click.option(
    "--yes", "-y", is_flag=True, help="Answer the confirmation prompt with yes (needed without a terminal)."
)
@click.option(
    "--force-orphaned",
    is_flag=True,
    help="Release ZooKeeper although the log directory its claim names is lost: nothing is drained, "
    "ZooKeeper keeps the data /migration covers and records the lost log never carried are abandoned. "
    "--log-dir must hold no log. Refused while another writer is alive.",
)
@click.option(
    "--accept-drift",
    is_flag=True,
    help="Roll back although ZooKeeper differs from the log (ZooKeeper's version is kept).",
)
@click.option(
    "--kafka-controller",
    "kafka_controller",
    is_flag=True,
    help="The migration is Kafka's own KRaft controller's (--log-dir: its metadata.log.dir): do Kafka's "
    "documented rollback (delete /controller and /migration), refused while a Kafka controller runs or "
    "after Kafka's finalization. Kafka's directory is only read.",
)
@click.option(
    "--quorum",
    default="",
    metavar="VOTERS",
    envvar="ZK2KRAFT_KAFKA_QUORUM",
    help="With --kafka-controller: the controllers' controller.quorum.voters (ID@HOST:PORT,...) or "
    "HOST:PORT,...; refused while any of them accepts connections.",
)
@click.option(
    "--quiet-seconds",
    type=click.FloatRange(min=0.5),
    default=commands.companion.DEFAULT_QUIET_SECONDS,
    show_default=True,
    help="With --kafka-controller: /migration must stay unchanged this long (no controller dual-writes).",
)
@node_id_option
@json_option
def rollback(
    target: commands.Target,
    yes: bool,
    force_orphaned: bool,
    accept_drift: bool,
    kafka_controller: bool,
    quorum: str,
    quiet_seconds: float,
    as_json: bool,
) -> None:
    """Go back to ZooKeeper mode from MigratingZkData or DualWriteMetadata (never after finalize).

    Drains the syncer, compares ZooKeeper with the log as `migrate`'s reconcile would and refuses
    (exit 1, naming what differs) when they differ, unless --accept-drift keeps ZooKeeper's version;
    then renames the log directory aside (kept for forensics), deletes /controller and
    /migration and lifts /controller_epoch above the KRaft epoch (KAFKA-20488). Migrating again later
    copies afresh.

    With --kafka-controller, the migration Kafka's own controller ran: Kafka's documented manual
    rollback, guarded and step by step; Kafka's directory is left as it is.

    \b
    Example:
      zk2kraft rollback -z zk1:2181/kafka -l /var/lib/kraft/metadata --yes
      zk2kraft rollback --kafka-controller -z zk1:2181/kafka -l /var/lib/kafka/meta --quorum 3000@c1:9093 --yes
    """
    if kafka_controller:
        if force_orphaned or accept_drift:
            raise BadInputError("--kafka-controller takes neither --force-orphaned nor --accept-drift")
        _rollback_kafka(target, yes, quorum, quiet_seconds, as_json)
        return
    yes = _agreed(
        yes,
        as_json,
        f"Roll back to ZooKeeper mode? The log in {target.log_dir} is archived and ZooKeeper released.",
    )
    result = commands.rollback(target, yes=yes, force_orphaned=force_orphaned, accept_drift=accept_drift)
    out = _actions(result, as_json)
    if out is None:
        return
    out.print(
        f"[bold]{result.state_before} → {result.state_after}[/bold]; roll the brokers back to ZooKeeper mode "
        f"(remove the migration settings) now. The old log is kept in {escape(result.archived_log or '-')}."
    )


def _rollback_kafka(target: commands.Target, yes: bool, quorum: str, quiet_s: float, as_json: bool) -> None:
    """Kafka's manual rollback (companion mode): each step printed as it was done."""
    yes = _agreed(
        yes, as_json, "Roll back Kafka's migration to ZooKeeper mode? /controller and /migration are deleted."
    )
    result = commands.rollback_kafka_controller(target, yes=yes, quorum=quorum, quiet_s=quiet_s)
    out = _actions(result, as_json)
    if out is not None:
        out.print(f"[bold]{result.state_before} → {result.state_after}[/bold]")


def _agreed(yes: bool, as_json: bool, question: str) -> bool:
    """--yes, or the operator's answer at a terminal; a script without --yes is refused by the command."""
    if not yes and sys.stdin.isatty() and not as_json:
        return click.confirm(question, default=False, err=True)
    return yes


def _actions(result: RollbackResult, as_json: bool) -> Console | None:
    """The result as JSON (None: nothing more to print), else each action as a line and the console."""
    if as_json:
        render.emit_json(result)
        return None
    out = render.out_console()
    for action in result.actions:
        out.print(f"- {escape(action)}")
    return out
