"""`zk2kraft migrate|plan|status|finalize|rollback|admin`: the migration's operator commands.

Thin: parse options, call `migrator.commands`, render (rich on a terminal, plain lines otherwise,
JSON with --json). Progress bars and prompts go to stderr so stdout stays parseable. Exit codes:
0 ok, 1 refused or findings, 2 bad input, 3 unreachable, 4 fenced or locked by another writer.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cli import progress_lines, prompts, render
from cli.options import json_option, log_dir_option, zookeeper_options
from migrator import commands, results
from migrator import stop as stopping
from migrator.controller.core import DEFAULT_SESSION_TIMEOUT_MS
from migrator.errors import BadInputError, UnreachableError
from migrator.metrics import MigrationMetrics
from migrator.migration.admin import AclSpec, AdminChange, ScramSpec, scram_credential
from migrator.migration.driver import DEFAULT_BROKER_WAIT_SECONDS, DEFAULT_NODE_ID

_NODE_ID_HELP = "KRaft node id of this controller, as Kafka's node.id (env ZK2KRAFT_NODE_ID)."
SCRAM_PASSWORD_ENV = "ZK2KRAFT_SCRAM_PASSWORD"


def _emit_json(result: BaseModel) -> None:
    click.echo(json.dumps(result.model_dump(mode="json"), indent=2))


def _interactive(as_json: bool) -> bool:
    return not as_json and sys.stderr.isatty()


def _err_console() -> Console:
    return render.console(stderr=True)


def _out_console() -> Console:
    return render.console(soft_wrap=True)


def node_id_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--node-id",
        type=click.IntRange(min=0),
        default=DEFAULT_NODE_ID,
        show_default=True,
        envvar="ZK2KRAFT_NODE_ID",
        help=_NODE_ID_HELP,
    )(f)


def listen_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--listen, --broker-wait-timeout, --session-timeout-ms: the controller protocol listener;
    --metrics-listen: its Prometheus endpoint (kept in ctx.meta, read by run_migrate)."""
    f = click.option(
        "--metrics-listen",
        metavar="HOST:PORT",
        envvar="ZK2KRAFT_METRICS_LISTEN",
        expose_value=False,
        callback=lambda ctx, _p, v: ctx.meta.__setitem__("zk2kraft.metrics_listen", v),
        help="Serve Prometheus metrics (Kafka's ZkMigrationState, ZkWriteBehindLag, ...) on "
        "http://HOST:PORT/metrics while this runs, e.g. 127.0.0.1:9404.",
    )(f)
    f = click.option(
        "--session-timeout-ms",
        type=click.IntRange(min=100),
        default=DEFAULT_SESSION_TIMEOUT_MS,
        show_default=True,
        envvar="ZK2KRAFT_SESSION_TIMEOUT_MS",
        help="A broker silent this long is fenced (Kafka's broker.session.timeout.ms).",
    )(f)
    f = click.option(
        "--broker-wait-timeout",
        type=click.FloatRange(min=0),
        default=DEFAULT_BROKER_WAIT_SECONDS,
        show_default=True,
        envvar="ZK2KRAFT_BROKER_WAIT_TIMEOUT",
        help="Seconds the copy waits for every ZooKeeper broker to register; then it names the missing "
        "ones and exits 1.",
    )(f)
    return click.option(
        "--listen",
        metavar="HOST:PORT",
        envvar="ZK2KRAFT_LISTEN",
        help="Serve the KRaft controller protocol here (the address in the brokers' controller.quorum.voters), "
        "plain TCP; or a Kafka `listeners` value (NAME://HOST:PORT,...) served with the TLS/SASL/ACL settings "
        "of --config (`controller --config` uses the file's own `listeners`).",
    )(f)


@contextmanager
def _closing(metrics: MigrationMetrics | None) -> Iterator[None]:
    try:
        yield
    finally:
        if metrics is not None:
            metrics.close()


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar for the copy on a terminal; None (quiet) otherwise."""
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("copying records"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_err_console(),
        transient=True,
    ) as bar:
        task = bar.add_task("copy", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


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
    "`zk2kraft admin`, stop cleanly on SIGTERM/Ctrl-C.",
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
@listen_options
@node_id_option
@json_option
def migrate(
    zookeeper: str,
    zk_auth: tuple[str, ...],
    zk_timeout: float,
    log_dir: str,
    yes: bool,
    follow: bool,
    brokers_from_zk: bool,
    listen: str | None,
    broker_wait_timeout: float,
    session_timeout_ms: int,
    node_id: int,
    as_json: bool,
    recopy: bool,
) -> None:
    """Migrate from wherever the migration is: check, claim ZooKeeper, copy, first sync.

    The state is derived from the log and ZooKeeper each time, so after a crash the same command
    resumes: an interrupted copy is aborted and redone, a dual-write is reconciled and synced.
    With --listen the KRaft controller protocol is served: the copy waits until every ZooKeeper
    broker has registered (KIP-866's soft start), and --follow keeps serving brokers afterwards.

    \b
    Example:
      zk2kraft migrate -z zk1:2181/kafka -l /var/lib/kraft/metadata --listen 0.0.0.0:9093 --follow --yes
      zk2kraft migrate -z zk1:2181/kafka -l /var/lib/kraft/metadata --brokers-from-zk --yes
    """
    run_migrate(
        zookeeper,
        zk_auth,
        zk_timeout,
        log_dir,
        yes=yes,
        follow=follow,
        brokers_from_zk=brokers_from_zk,
        listen=listen,
        broker_wait_timeout=broker_wait_timeout,
        session_timeout_ms=session_timeout_ms,
        node_id=node_id,
        as_json=as_json,
        recopy=recopy,
    )


def run_migrate(
    zookeeper: str,
    zk_auth: tuple[str, ...],
    zk_timeout: float,
    log_dir: str,
    *,
    yes: bool,
    follow: bool,
    brokers_from_zk: bool,
    listen: str | None,
    broker_wait_timeout: float,
    session_timeout_ms: int,
    node_id: int,
    as_json: bool,
    recopy: bool = False,
) -> None:
    """`migrate` and `controller`: run the driver, then render its result."""
    interactive = _interactive(as_json)
    err = _err_console()
    confirm = None
    if not yes and sys.stdin.isatty():

        def confirm(question: str) -> bool:
            with stopping.interruptible():  # Ctrl-C at the prompt stops at once: nothing is written yet
                return prompts.confirm(question)

    say: Callable[[str], None] | None = None
    # Without a terminal (systemd, a CI log, `| tee`): a long-running controller's every note as a
    # timestamped line, flushed as it happens; every run a periodic "still <phase>" line.
    lines = progress_lines.PhaseLines(
        progress_lines.interval_from_env(), announce=bool(follow or listen) and not as_json
    )
    if interactive:

        def say(text: str) -> None:
            err.print(f"[dim]{escape(text)}[/dim]")

    else:
        say = lines.say

    metrics_listen = click.get_current_context().meta.get("zk2kraft.metrics_listen")
    metrics = MigrationMetrics() if metrics_listen else None
    if metrics is not None:
        host, port = metrics.serve(metrics_listen)
        if interactive:
            err.print(f"[dim]metrics on http://{escape(host)}:{port}/metrics[/dim]")
    # SIGTERM/SIGINT: a stop request every loop of the run checks (migrator.stop); one mid-way raises
    # Stopped there, one that lands while following (ZooKeeper up) ends it and the result is shown
    with (
        _progress(interactive) as bar,
        progress_lines.ticking(lines),
        stopping.handle_signals() as stop,
        _closing(metrics),
    ):
        progress = bar if interactive else lines.copy
        result = commands.migrate(
            zookeeper,
            log_dir,
            zk_auth=zk_auth,
            zk_timeout=zk_timeout,
            node_id=node_id,
            yes=yes,
            confirm=confirm,
            brokers_from_zk=brokers_from_zk,
            follow=follow,
            stop=stop,
            progress=progress,
            say=say,
            listen=listen,
            broker_wait_timeout=broker_wait_timeout,
            recopy=recopy,
            session_timeout_ms=session_timeout_ms,
            metrics=metrics,
        )
        signalled = stopping.signal_number()
    _render_migrate(result, log_dir, as_json)
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
        _emit_json(result)
        return
    out = _out_console()
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


# --- plan ------------------------------------------------------------------------------------------


@click.command()
@zookeeper_options
@log_dir_option()
@json_option
def plan(zookeeper: str, zk_auth: tuple[str, ...], zk_timeout: float, log_dir: str, as_json: bool) -> None:
    """The copy as a dry run: records and bytes per type, batches, and the time of each phase of
    `migrate` (pre-flight, copy, first sync), measured on this run's read. Writes nothing.

    \b
    Example:
      zk2kraft plan -z zk1:2181/kafka -l /var/lib/kraft/metadata
    """
    result = commands.plan(zookeeper, log_dir, zk_auth=zk_auth, zk_timeout=zk_timeout)
    if as_json:
        _emit_json(result)
        return
    out = _out_console()
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


# --- status ----------------------------------------------------------------------------------------


def _render_status(s: results.StatusResult, out: Console) -> None:
    out.print(_status_table(s))


def _status_table(s: results.StatusResult) -> Table:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    kafka = f"{s.kafka_state} ({s.kafka_code})" if s.kafka_code is not None else "-"
    if s.log_binding:  # first: nothing below describes this directory's place in the migration
        table.add_row("[red]not this log[/red]", escape(s.log_binding))
    table.add_row("state", f"{s.state} ({s.state_code}), Kafka {kafka}")
    table.add_row("why", escape(s.reason))
    ctrl = "-"
    if s.controller_id is not None:
        ctrl = f"{s.controller_id} ({'KRaft, epoch ' + str(s.kraft_epoch) if s.controller_is_kraft else 'ZooKeeper broker'})"
    table.add_row("controller", ctrl)
    table.add_row("ZooKeeper controller epoch", str(s.zk_controller_epoch))
    m = s.migration_znode
    table.add_row(
        "/migration",
        "-"
        if m is None
        else (
            f"offset {m['kraft_metadata_offset']} (epoch {m['kraft_metadata_epoch']}), controller "
            f"{m['kraft_controller_id']} epoch {m['kraft_controller_epoch']}, version {m['zk_version']}"
        ),
    )
    table.add_row(
        "log",
        escape(
            f"{s.log_dir}: end offset {s.log_end_offset}, last record {s.log_last_record_offset}, epoch {s.log_epoch}"
            if s.log_exists
            else f"{s.log_dir}: none"
        ),
    )
    if s.open_transaction:
        table.add_row("open transaction", escape(s.open_transaction))
    table.add_row("write-behind lag", str(s.write_behind_lag))
    table.add_row("brokers in ZooKeeper", ", ".join(map(str, s.zk_registered_brokers)) or "none")
    if s.kraft_registered_brokers:
        table.add_row(
            "brokers in KRaft",
            f"{', '.join(map(str, s.kraft_registered_brokers))} ({len(s.migrating_zk_brokers)} migrating ZooKeeper brokers)",
        )
    if s.last_transition is not None:
        t = s.last_transition
        table.add_row("last transition", f"{t.kafka_state} at offset {t.offset}, {t.time or 'time unknown'}")
    if s.writer_info is not None:
        who = escape(s.writer_info.describe()) + (
            f" (following, pid {s.follower_pid})" if s.follower_pid else ""
        )
        table.add_row("writer", who)
    elif s.writer:
        who = escape(s.writer) + (f" (following, pid {s.follower_pid})" if s.follower_pid else "")
        table.add_row("writer", who)
    for ch in s.zk_broker_channels or []:
        table.add_row(f"ZK broker {ch.get('broker_id')}", escape(_channel_line(ch)))
    for anomaly in s.anomalies:
        table.add_row("[yellow]note[/yellow]", escape(anomaly))
    table.add_row("next", f"[bold]{escape(s.next_action)}[/bold]")
    return table


def _channel_line(ch: dict) -> str:
    """One ZooKeeper-mode broker's channel: where, whether connected, what is queued and acknowledged."""
    if ch.get("stopped"):
        state = f"stopped ({ch['stopped']})"
    else:
        state = "connected" if ch.get("connected") else "not connected"
    text = (
        f"{ch.get('endpoint') or 'no endpoint'}: {state}, {ch.get('queued', 0)} queued, "
        f"acknowledged offset {ch.get('acked_offset', -1)}, {ch.get('errors', 0)} errors"
    )
    return text + (f" (last: {ch['last_error']})" if ch.get("last_error") else "")


@click.command()
@zookeeper_options
@log_dir_option()
@click.option(
    "--watch",
    "watch",
    type=click.FloatRange(min=0.2),
    default=None,
    is_flag=False,
    flag_value=2.0,
    metavar="[SECONDS]",
    help="Refresh until Ctrl-C: a live view on a terminal, one snapshot per refresh otherwise "
    "(every SECONDS, default 2, or --interval).",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.2),
    default=None,
    metavar="SECONDS",
    help="Seconds between refreshes with --watch.",
)
@click.option(
    "--count",
    type=click.IntRange(min=1),
    default=None,
    help="With --watch: stop after this many refreshes (scripts, CI).",
)
@json_option
def status(
    zookeeper: str,
    zk_auth: tuple[str, ...],
    zk_timeout: float,
    log_dir: str,
    watch: float | None,
    interval: float | None,
    count: int | None,
    as_json: bool,
) -> None:
    """Where the migration is and what to do next (reads only).

    Shows the public state and Kafka's code, the controller and both epochs, /migration, the log end
    offset, the write-behind lag, brokers still registered in ZooKeeper and the last transition.

    \b
    Example:
      zk2kraft status -z zk1:2181/kafka -l /var/lib/kraft/metadata --watch --interval 2
    """
    if watch is None and interval is None and count is None:
        result = commands.status(zookeeper, log_dir, zk_auth=zk_auth, zk_timeout=zk_timeout)
        if as_json:
            _emit_json(result)
        else:
            _render_status(result, _out_console())
        return
    every = interval or watch or 2.0
    _watch_status(lambda: commands.status(zookeeper, log_dir, zk_auth=zk_auth, zk_timeout=zk_timeout),
                  every, count, as_json)  # fmt: skip


def _watch_status(
    read: Callable[[], results.StatusResult], every: float, count: int | None, as_json: bool
) -> None:
    """Refresh until Ctrl-C (or `count` refreshes). ZooKeeper going away mid-watch is shown and retried,
    not fatal: the operator watching a migration wants to see it come back."""
    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    out = _out_console()
    live_view = not as_json and sys.stdout.isatty()
    shown = 0

    def snapshot() -> tuple[results.StatusResult | None, str | None]:
        try:
            return read(), None
        except UnreachableError as e:
            return None, str(e)

    def view(result: results.StatusResult | None, error: str | None) -> Group:
        head = Text(f"{time.strftime('%H:%M:%S')} · every {every:g}s · Ctrl-C to stop", style="dim")
        body = _status_table(result) if result is not None else Text(f"unavailable: {error}", style="red")
        return Group(head, body)

    live = Live(console=out, auto_refresh=False, transient=False) if live_view else None
    try:
        if live is not None:
            live.start()
        while True:
            result, error = snapshot()
            shown += 1
            if as_json:
                line = result.model_dump(mode="json") if result is not None else {"error": error}
                click.echo(json.dumps(line))  # one line per refresh
            elif live is not None:
                live.update(view(result, error), refresh=True)
            else:
                out.print(view(result, error))
                out.print()
            sys.stdout.flush()
            if count is not None and shown >= count:
                if error is not None:
                    raise UnreachableError(error)  # a script's last look failed: exit 3
                return
            time.sleep(every)
    except KeyboardInterrupt:
        return
    finally:
        if live is not None:
            live.stop()


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
def finalize(
    zookeeper: str,
    zk_auth: tuple[str, ...],
    zk_timeout: float,
    log_dir: str,
    yes: bool,
    rehearsal: bool,
    node_id: int,
    as_json: bool,
) -> None:
    """End the migration: write POST_MIGRATION; ZooKeeper is never written again. No rollback after it.

    Refused while the write-behind lag is above zero, while any broker is still registered in
    ZooKeeper (roll every broker to KRaft first; stop the rehearsal's broker simulator), while a broker
    of the copy has not registered with the controller as a KRaft broker (--rehearsal skips this when
    there are no real brokers), and without --yes.

    \b
    Example:
      zk2kraft finalize -z zk1:2181/kafka -l /var/lib/kraft/metadata --yes
    """
    result = commands.finalize(
        zookeeper,
        log_dir,
        yes=yes,
        zk_auth=zk_auth,
        zk_timeout=zk_timeout,
        node_id=node_id,
        rehearsal=rehearsal,
    )
    if as_json:
        _emit_json(result)
    else:
        _out_console().print(
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
@node_id_option
@json_option
def rollback(
    zookeeper: str,
    zk_auth: tuple[str, ...],
    zk_timeout: float,
    log_dir: str,
    yes: bool,
    force_orphaned: bool,
    accept_drift: bool,
    node_id: int,
    as_json: bool,
) -> None:
    """Go back to ZooKeeper mode from MigratingZkData or DualWriteMetadata (never after finalize).

    Drains the syncer, compares ZooKeeper with the log as `migrate`'s reconcile would and refuses
    (exit 1, naming what differs) when they differ, unless --accept-drift keeps ZooKeeper's version;
    then renames the log directory aside (kept for forensics), deletes /controller and
    /migration and lifts /controller_epoch above the KRaft epoch (KAFKA-20488). Migrating again later
    copies afresh.

    \b
    Example:
      zk2kraft rollback -z zk1:2181/kafka -l /var/lib/kraft/metadata --yes
    """
    if not yes and sys.stdin.isatty() and not as_json:
        yes = click.confirm(
            f"Roll back to ZooKeeper mode? The log in {log_dir} is archived and ZooKeeper released.",
            default=False,
            err=True,
        )
    result = commands.rollback(
        zookeeper,
        log_dir,
        yes=yes,
        zk_auth=zk_auth,
        zk_timeout=zk_timeout,
        node_id=node_id,
        force_orphaned=force_orphaned,
        accept_drift=accept_drift,
    )
    if as_json:
        _emit_json(result)
        return
    out = _out_console()
    for action in result.actions:
        out.print(f"- {escape(action)}")
    out.print(
        f"[bold]{result.state_before} → {result.state_after}[/bold]; roll the brokers back to ZooKeeper mode "
        f"(remove the migration settings) now. The old log is kept in {escape(result.archived_log or '-')}."
    )


# --- admin -----------------------------------------------------------------------------------------


def _pairs(values: tuple[str, ...], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BadInputError(f"{what} {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def _admin_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = json_option(f)
    f = click.option(
        "--timeout",
        type=click.FloatRange(min=1),
        default=60.0,
        show_default=True,
        help="Seconds to wait for a running `migrate --follow` to apply the change.",
    )(f)
    f = node_id_option(f)
    f = log_dir_option()(f)
    return zookeeper_options(f)


def _run_admin(ctx_params: dict[str, Any], change: AdminChange) -> None:
    result = commands.admin(
        ctx_params["zookeeper"],
        ctx_params["log_dir"],
        change,
        zk_auth=ctx_params["zk_auth"],
        zk_timeout=ctx_params["zk_timeout"],
        node_id=ctx_params["node_id"],
        timeout=ctx_params["timeout"],
    )
    if ctx_params["as_json"]:
        _emit_json(result)
        return
    where = (
        f" (offsets {result.first_offset}-{result.last_offset}, /migration at {result.migration_offset})"
        if result.records
        else ""
    )
    _out_console().print(f"{escape(result.summary)}{where} [dim]via {escape(result.via)}[/dim]")


@click.group()
def admin() -> None:
    """Metadata changes during DualWriteMetadata: appended to the log, carried to ZooKeeper.

    With `migrate --follow` running, the change is handed to it; otherwise this command takes the log
    itself, appends and syncs once. Refused in any other state.

    \b
    Example:
      zk2kraft admin create-topic orders -p 12 -r 3 --config retention.ms=86400000 -z zk:2181/kafka -l /var/lib/kraft
    """


@admin.command("create-topic")
@click.argument("topic")
@click.option("--partitions", "-p", type=int, default=1, show_default=True)
@click.option(
    "--replication-factor", "-r", type=int, default=None, help="Default: min(3, registered brokers)."
)
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config (repeatable).")
@_admin_options
@click.pass_context
def create_topic(
    ctx: click.Context,
    topic: str,
    partitions: int,
    replication_factor: int | None,
    configs: tuple[str, ...],
    **_: Any,
) -> None:
    """Create a topic; replicas placed over the registered brokers as Kafka places them.

    \b
    Example:
      zk2kraft admin create-topic orders -p 6 -r 3 --config cleanup.policy=compact -z zk:2181/kafka -l /data/kraft
    """
    change = AdminChange(
        kind="create-topic",
        topic=topic,
        partitions=partitions,
        replication_factor=replication_factor,
        configs=_pairs(configs, "--config"),
    )
    _run_admin(ctx.params, change)


@admin.command("delete-topic")
@click.argument("topic")
@_admin_options
@click.pass_context
def delete_topic(ctx: click.Context, topic: str, **_: Any) -> None:
    """Delete a topic.

    \b
    Example:
      zk2kraft admin delete-topic orders -z zk:2181/kafka -l /data/kraft
    """
    _run_admin(ctx.params, AdminChange(kind="delete-topic", topic=topic))


@admin.command("add-partitions")
@click.argument("topic")
@click.option("--partitions", "-p", type=int, required=True, help="The new total number of partitions.")
@_admin_options
@click.pass_context
def add_partitions(ctx: click.Context, topic: str, partitions: int, **_: Any) -> None:
    """Raise a topic's partition count (it can only grow).

    \b
    Example:
      zk2kraft admin add-partitions orders -p 24 -z zk:2181/kafka -l /data/kraft
    """
    _run_admin(ctx.params, AdminChange(kind="add-partitions", topic=topic, partitions=partitions))


@admin.command("alter-topic-config")
@click.argument("topic")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE")
@click.option("--delete", "deletes", multiple=True, metavar="KEY")
@_admin_options
@click.pass_context
def alter_topic_config(
    ctx: click.Context, topic: str, sets: tuple[str, ...], deletes: tuple[str, ...], **_: Any
) -> None:
    """Set or delete a topic's dynamic configs.

    \b
    Example:
      zk2kraft admin alter-topic-config orders --set retention.ms=3600000 --delete segment.ms -z zk:2181/kafka -l /data/kraft
    """
    change = AdminChange(
        kind="alter-topic-config", topic=topic, configs=_pairs(sets, "--set"), delete_configs=list(deletes)
    )
    _run_admin(ctx.params, change)


@admin.command("alter-broker-config")
@click.option("--broker", default=None, help="Broker id.")
@click.option("--default", "default", is_flag=True, help="The cluster-wide default (<default>).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE")
@click.option("--delete", "deletes", multiple=True, metavar="KEY")
@_admin_options
@click.pass_context
def alter_broker_config(
    ctx: click.Context,
    broker: str | None,
    default: bool,
    sets: tuple[str, ...],
    deletes: tuple[str, ...],
    **_: Any,
) -> None:
    """Set or delete dynamic broker configs of one broker or the cluster default.

    \b
    Example:
      zk2kraft admin alter-broker-config --default --set log.cleaner.threads=2 -z zk:2181/kafka -l /data/kraft
    """
    if default == (broker is not None):
        raise BadInputError("give exactly one of --broker ID and --default")
    change = AdminChange(
        kind="alter-broker-config",
        broker="" if default else broker,
        configs=_pairs(sets, "--set"),
        delete_configs=list(deletes),
    )
    _run_admin(ctx.params, change)


def _acl_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed(
        [
            click.option(
                "--resource-type",
                required=True,
                help="TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER",
            ),
            click.option("--resource-name", required=True),
            click.option("--pattern-type", default="LITERAL", show_default=True, help="LITERAL or PREFIXED"),
            click.option("--principal", required=True, help="e.g. User:alice"),
            click.option("--host", default="*", show_default=True),
            click.option(
                "--operation", required=True, help="READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, ..., ALL"
            ),
            click.option("--permission", default="ALLOW", show_default=True, help="ALLOW or DENY"),
        ]
    ):
        f = opt(f)
    return f


def _acl_spec(p: dict[str, Any]) -> AclSpec:
    return AclSpec(
        resource_type=p["resource_type"],
        resource_name=p["resource_name"],
        pattern_type=p["pattern_type"],
        principal=p["principal"],
        host=p["host"],
        operation=p["operation"],
        permission_type=p["permission"],
    )


@admin.command("add-acl")
@_acl_options
@_admin_options
@click.pass_context
def add_acl(ctx: click.Context, **_: Any) -> None:
    """Add an ACL binding.

    \b
    Example:
      zk2kraft admin add-acl --resource-type TOPIC --resource-name orders --principal User:alice --operation READ -z zk:2181/kafka -l /data/kraft
    """
    _run_admin(ctx.params, AdminChange(kind="add-acl", acl=_acl_spec(ctx.params)))


@admin.command("remove-acl")
@_acl_options
@_admin_options
@click.pass_context
def remove_acl(ctx: click.Context, **_: Any) -> None:
    """Remove an ACL binding (exact match).

    \b
    Example:
      zk2kraft admin remove-acl --resource-type GROUP --resource-name app- --pattern-type PREFIXED --principal User:bob --operation READ -z zk:2181/kafka -l /data/kraft
    """
    _run_admin(ctx.params, AdminChange(kind="remove-acl", acl=_acl_spec(ctx.params)))


def _quota_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed(
        [
            click.option("--user", default=None),
            click.option("--user-default", is_flag=True, help="The default user (<default>)."),
            click.option("--client-id", default=None),
            click.option("--client-default", is_flag=True, help="The default client id (<default>)."),
            click.option("--ip", default=None),
            click.option("--ip-default", is_flag=True, help="The default ip (<default>)."),
        ]
    ):
        f = opt(f)
    return f


def _quota_entity(p: dict[str, Any]) -> dict[str, str | None]:
    entity: dict[str, str | None] = {}
    for kind, name_key, default_key in (
        ("user", "user", "user_default"),
        ("client-id", "client_id", "client_default"),
        ("ip", "ip", "ip_default"),
    ):
        if p[name_key] is not None and p[default_key]:
            raise BadInputError(
                f"give --{name_key.replace('_', '-')} or --{default_key.replace('_', '-')}, not both"
            )
        if p[name_key] is not None:
            entity[kind] = p[name_key]
        elif p[default_key]:
            entity[kind] = None
    return entity


@admin.command("set-quota")
@_quota_options
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="e.g. producer_byte_rate=1048576")
@_admin_options
@click.pass_context
def set_quota(ctx: click.Context, sets: tuple[str, ...], **_: Any) -> None:
    """Set client quota values of a user, client id, user+client id, or ip.

    \b
    Example:
      zk2kraft admin set-quota --user alice --set producer_byte_rate=1048576 -z zk:2181/kafka -l /data/kraft
    """
    values: dict[str, float] = {}
    for key, value in _pairs(sets, "--set").items():
        try:
            values[key] = float(value)
        except ValueError:
            raise BadInputError(f"--set {key}={value}: not a number") from None
    change = AdminChange(kind="set-quota", quota_entity=_quota_entity(ctx.params), quota_values=values)
    _run_admin(ctx.params, change)


@admin.command("remove-quota")
@_quota_options
@click.option("--delete", "deletes", multiple=True, metavar="KEY")
@_admin_options
@click.pass_context
def remove_quota(ctx: click.Context, deletes: tuple[str, ...], **_: Any) -> None:
    """Remove client quota values.

    \b
    Example:
      zk2kraft admin remove-quota --client-id app1 --delete consumer_byte_rate -z zk:2181/kafka -l /data/kraft
    """
    change = AdminChange(
        kind="remove-quota", quota_entity=_quota_entity(ctx.params), quota_remove=list(deletes)
    )
    _run_admin(ctx.params, change)


def _read_password(password_file: str | None, user: str) -> str:
    if password_file is not None:
        try:
            with open(password_file, encoding="utf-8") as f:
                return f.readline().rstrip("\r\n")
        except OSError as e:
            raise BadInputError(f"--password-file {password_file}: {e.strerror}") from None
    env = os.environ.get(SCRAM_PASSWORD_ENV)
    if env:
        return env
    if sys.stdin.isatty():
        return str(click.prompt(f"Password for {user}", hide_input=True, confirmation_prompt=True, err=True))
    raise BadInputError(
        f"no password: use --password-file FILE or {SCRAM_PASSWORD_ENV} (never the command line)"
    )


@admin.command("upsert-scram")
@click.argument("user")
@click.option(
    "--mechanism",
    type=click.Choice(["SCRAM-SHA-256", "SCRAM-SHA-512"]),
    default="SCRAM-SHA-256",
    show_default=True,
)
@click.option("--iterations", type=int, default=4096, show_default=True)
@click.option(
    "--password-file",
    type=click.Path(dir_okay=False),
    default=None,
    help=f"File whose first line is the password (else {SCRAM_PASSWORD_ENV}, else a prompt).",
)
@_admin_options
@click.pass_context
def upsert_scram(
    ctx: click.Context, user: str, mechanism: str, iterations: int, password_file: str | None, **_: Any
) -> None:
    """Create or update a SCRAM credential (salted with PBKDF2 as Kafka does; the password is never shown).

    \b
    Example:
      ZK2KRAFT_SCRAM_PASSWORD=... zk2kraft admin upsert-scram alice --mechanism SCRAM-SHA-512 -z zk:2181/kafka -l /data/kraft
    """
    password = _read_password(password_file, user)
    spec = scram_credential(user, mechanism, password, iterations)
    _run_admin(ctx.params, AdminChange(kind="upsert-scram", scram=spec))


@admin.command("delete-scram")
@click.argument("user")
@click.option(
    "--mechanism",
    type=click.Choice(["SCRAM-SHA-256", "SCRAM-SHA-512"]),
    default="SCRAM-SHA-256",
    show_default=True,
)
@_admin_options
@click.pass_context
def delete_scram(ctx: click.Context, user: str, mechanism: str, **_: Any) -> None:
    """Delete a SCRAM credential.

    \b
    Example:
      zk2kraft admin delete-scram alice --mechanism SCRAM-SHA-256 -z zk:2181/kafka -l /data/kraft
    """
    spec = ScramSpec(user=user, mechanism=mechanism, iterations=0)
    _run_admin(ctx.params, AdminChange(kind="delete-scram", scram=spec))


def _read_changes(path: str) -> Iterator[AdminChange]:
    """JSON lines, one AdminChange each (the `change` shape of the other admin subcommands)."""
    try:
        f = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as e:
        raise BadInputError(f"cannot read {path}: {e.strerror}") from None
    try:
        for number, line in enumerate(f, start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                yield AdminChange.model_validate_json(line)
            except ValueError as e:
                first = str(e).splitlines()[1:2] or [str(e)]
                raise BadInputError(
                    f"{path} line {number}: not an admin change ({first[0].strip()})"
                ) from None
    finally:
        if f is not sys.stdin:
            f.close()


@admin.command("apply")
@click.argument("changes_file", metavar="FILE")
@_admin_options
@click.pass_context
def apply_changes(ctx: click.Context, changes_file: str, **_: Any) -> None:
    """Apply a file of changes in order (JSON lines, `-` for stdin), each synced before the next.

    Each line is one change: {"kind": "create-topic", "topic": "t1", "partitions": 3}, with the fields
    of the subcommands (kind, topic, partitions, replication_factor, configs, delete_configs, broker,
    acl, quota_entity, quota_values, quota_remove). The first refused change stops the run; the ones
    before it stay applied. SCRAM credentials go through `upsert-scram` (a file never holds a password).

    \b
    Example:
      zk2kraft admin apply changes.jsonl -z zk:2181/kafka -l /data/kraft
    """
    p = ctx.params
    out = _out_console()

    def show(result: results.AdminResult) -> None:
        if p["as_json"]:
            click.echo(json.dumps(result.model_dump(mode="json")))
        else:
            out.print(
                f"{escape(result.change)}: {escape(result.summary)} [dim]via {escape(result.via)}[/dim]"
            )
        sys.stdout.flush()

    changes = list(_read_changes(changes_file))
    if any(c.kind in ("upsert-scram",) for c in changes):
        raise BadInputError("upsert-scram is not accepted from a file: use `zk2kraft admin upsert-scram`")
    commands.admin_many(
        p["zookeeper"],
        p["log_dir"],
        changes,
        zk_auth=p["zk_auth"],
        zk_timeout=p["zk_timeout"],
        node_id=p["node_id"],
        timeout=p["timeout"],
        on_result=show,
    )
