"""`zk2kraft migrate`: from wherever the migration is to DualWriteMetadata (and, with --follow, on).

Thin: the Target from the options, `commands.migrate`, the result rendered. Progress bars and prompts
go to stderr so stdout stays parseable; SIGTERM/SIGINT stop it at a safe point (`migrator.stop`).
`controller` runs the same (`run_migrate`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable

import click
from rich.markup import escape
from rich.table import Table

from cli import progress_lines, prompts, render
from cli.options import (
    CONFIG_LISTENERS,
    json_option,
    listen_options,
    log_dir_option,
    node_id_option,
    zookeeper_options,
)
from migrator import commands, results
from migrator import stop as stopping

# --- migrate ---------------------------------------------------------------------------------------


@click.command()
@zookeeper_options
@log_dir_option()
@click.option(
    "--yes", "-y", is_flag=True, help="Answer the confirmation prompt with yes (needed without a terminal)."
)
@click.option(
    "--follow",
    is_flag=True,
    help="After reaching DualWriteMetadata keep running as the controller: sync new records, serve "
    "`zk2kraft admin` and Kafka's admin clients (with --listen), stop cleanly on SIGTERM/Ctrl-C.",
)
@click.option(
    "--brokers-from-zk",
    is_flag=True,
    envvar="ZK2KRAFT_BROKERS_FROM_ZK",
    help="Rehearsal option: treat the brokers registered in ZooKeeper (/brokers/ids) as migration-ready "
    "instead of waiting for them to register with the KRaft controller over --listen.",
)
@click.option(
    "--recopy",
    is_flag=True,
    help="Take over from a lost log directory: ZooKeeper's claim and /migration name a log that is gone; "
    "copy ZooKeeper's data again into --log-dir (which must hold no log) and bind the claim to it. "
    "Records of the lost log that ZooKeeper never received are abandoned. Refused while another "
    "writer is alive.",
)
@click.option(
    "--reconcile",
    is_flag=True,
    help="Once ZooKeeper is synced, read it again and reconcile all of it with the log (a separate, "
    "separately timed step). The first sync after the copy reconciles from the copy's read and a "
    "restart or takeover always reconciles from a fresh read; this is for drift suspected since.",
)
@listen_options
@node_id_option
@json_option
def migrate(
    target: commands.Target,
    yes: bool,
    follow: bool,
    brokers_from_zk: bool,
    broker_wait_timeout: float,
    session_timeout_ms: int,
    as_json: bool,
    recopy: bool,
    reconcile: bool,
) -> None:
    """Migrate from wherever the migration is: check, claim ZooKeeper, copy, first sync.

    The state is derived from the log and ZooKeeper each time, so after a crash the same command
    resumes: an interrupted copy is aborted and redone, a dual-write is reconciled and synced.
    With --listen the KRaft controller protocol is served: the copy waits until every ZooKeeper
    broker has registered (KIP-866's soft start), and --follow keeps serving brokers afterwards.
    With --follow and no --listen, a --config file's `listeners` are served, each with its protocol,
    as `controller` serves them.

    \b
    Example:
      zk2kraft migrate -z zk1:2181/kafka -l /var/lib/kraft/metadata --listen 0.0.0.0:9093 --follow --yes
      zk2kraft migrate -z zk1:2181/kafka -l /var/lib/kraft/metadata --brokers-from-zk --yes
    """
    if follow and target.listen is None:  # a controller's properties file: serve its `listeners`
        listeners = click.get_current_context().meta.get(CONFIG_LISTENERS)
        if listeners:
            target = dataclasses.replace(target, listen=listeners)
    run_migrate(
        target,
        yes=yes,
        follow=follow,
        brokers_from_zk=brokers_from_zk,
        broker_wait_timeout=broker_wait_timeout,
        session_timeout_ms=session_timeout_ms,
        as_json=as_json,
        recopy=recopy,
        reconcile=reconcile,
    )


def run_migrate(
    target: commands.Target,
    *,
    yes: bool,
    follow: bool,
    brokers_from_zk: bool,
    broker_wait_timeout: float,
    session_timeout_ms: int,
    as_json: bool,
    recopy: bool = False,
    reconcile: bool = False,
) -> None:
    """`migrate` and `controller`: run the driver, then render its result."""
    interactive = render.interactive(as_json)
    err = render.err_console()
    confirm = None
    if not yes and sys.stdin.isatty():

        def confirm(question: str) -> bool:
            with stopping.interruptible():  # Ctrl-C at the prompt stops at once: nothing is written yet
                return prompts.confirm(question)

    say: Callable[[str], None] | None = None
    # Without a terminal (systemd, nohup, a CI log, `| tee`): a long-running controller's every note as
    # a timestamped line, flushed as it happens; a one-shot run's phase once it has lasted a moment (a
    # quick refusal stays one line), and every run a periodic "still <phase>" line.
    lines = progress_lines.PhaseLines(
        progress_lines.interval_from_env(), announce=bool(follow or target.listen) and not as_json
    )
    if interactive:

        def say(text: str) -> None:
            err.print(f"[dim]{escape(text)}[/dim]")

    else:
        say = lines.say

    def on_metrics(host: str, port: int) -> None:
        if interactive:
            err.print(f"[dim]metrics on http://{escape(host)}:{port}/metrics[/dim]")

    # SIGTERM/SIGINT: a stop request every loop of the run checks (migrator.stop); one mid-way raises
    # Stopped there, one that lands while following (ZooKeeper up) ends it and the result is shown
    with (
        render.copy_progress(interactive) as bar,
        progress_lines.ticking(lines),
        stopping.handle_signals() as stop,
    ):
        progress = bar if interactive else lines.copy
        options = commands.MigrateOptions(
            yes=yes,
            confirm=confirm,
            brokers_from_zk=brokers_from_zk,
            follow=follow,
            stop=stop,
            progress=progress,
            broker_wait_timeout=broker_wait_timeout,
            recopy=recopy,
            reconcile=reconcile,
            session_timeout_ms=session_timeout_ms,
            heartbeat=lines.interval,
        )
        result = commands.migrate(target, options, say=say, on_metrics=on_metrics)
        signalled = stopping.signal_number()
    _render_migrate(result, target.log_dir, as_json)
    if signalled is not None:
        done = (
            f"after following {result.followed_seconds:.1f}s ({result.changes_applied} changes applied)"
            if result.followed_seconds is not None
            else f"after reaching {result.state_after}"
        )
        raise stopping.Stopped(
            f"stopped by {stopping.signal_name(signalled)} {done}; ZooKeeper covers the log up to offset "
            f"{result.migration_offset} (write-behind lag {result.lag})",
            signalled,
        )


def _render_migrate(result: results.MigrateResult, log_dir: str, as_json: bool) -> None:
    if as_json:
        render.emit_json(result)
        return
    out = render.out_console()
    for action in result.actions:
        out.print(f"- {escape(action)}")
    m = result.manifest
    if m is not None:
        table = Table(title="copy manifest", show_header=True)
        table.add_column("record type")
        table.add_column("records", justify="right")
        for name, n in sorted(m.records_by_type.items(), key=lambda kv: -kv[1]):
            table.add_row(name, f"{n:,}")
        out.print(table)
        out.print(
            f"{m.records:,} records, {m.batches} batches, {m.bytes:,} bytes, offsets {m.first_offset}-"
            f"{m.last_offset}, {m.duration_seconds:.2f}s (read {m.read_seconds:.2f}s, build "
            f"{m.build_seconds:.2f}s, append {m.append_seconds:.2f}s); manifest in "
            f"{escape(os.path.join(log_dir, 'zk2kraft-copy-manifest.json'))}"
        )
    for repair in result.repairs:
        out.print(f"  repair: {escape(json.dumps(repair))}")
    for anomaly in result.anomalies:
        out.print(f"[yellow]note:[/yellow] {escape(anomaly)}")
    follow_note = (
        f"; followed {result.followed_seconds:.1f}s, {result.changes_applied} changes applied"
        if result.followed_seconds is not None
        else ""
    )
    out.print(
        f"[bold]{escape(result.state_before)} → {escape(result.state_after)}[/bold] "
        f"(Kafka {escape(result.kafka_code_after or '-')}), log end offset {result.log_end_offset}, "
        f"/migration offset {result.migration_offset}, write-behind lag {result.lag}{follow_note}"
    )
