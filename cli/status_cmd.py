"""`zk2kraft status`: where the migration is and what to do next, once or watched (reads only)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from cli import render
from cli.options import json_option, log_dir_option, zookeeper_options
from migrator import commands, results
from migrator.errors import EXIT_FINDINGS, UnreachableError

# --- status ----------------------------------------------------------------------------------------


def _render_status(s: results.StatusResult, out: Console) -> None:
    if sys.stdout.isatty():
        out.print(_status_table(s))
        return
    # Into a pipe or file: one line per row, never padded to the widest row (a table pads every cell)
    rows = _status_rows(s)
    width = max(len(Text.from_markup(key).plain) for key, _ in rows)
    for key, value in rows:
        plain = Text.from_markup(key).plain
        out.print(f"{key}{' ' * (width - len(plain))}  {value}")


def _status_table(s: results.StatusResult) -> Table:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in _status_rows(s):
        table.add_row(key, value)
    return table


class _Rows(list[tuple[str, str]]):
    def add_row(self, key: str, value: str) -> None:
        self.append((key, value))


def _status_rows(s: results.StatusResult) -> list[tuple[str, str]]:
    """(label, value) rows in rich markup: a table on a terminal, plain lines otherwise."""
    table = _Rows()
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
    if s.kafka_controller is not None:
        table.add_row("Kafka's controller", escape(_kafka_controller_line(s.kafka_controller)))
    channels, unresolved = _split_unresolved(s.zk_broker_channels or [])
    if unresolved:  # the rehearsal's generated brokers: one line, not one failure per broker
        ids = ", ".join(str(ch.get("broker_id")) for ch in unresolved)
        hosts = sorted({str(ch.get("endpoint", "")).rpartition(":")[0] for ch in unresolved})
        example = all(h.endswith(commands.EXAMPLE_DOMAIN) for h in hosts)
        what = "rehearsal brokers at example hosts" if example else "their registered hosts do not resolve"
        table.add_row(
            f"ZK brokers {ids}",
            escape(f"{what}: not contacted ({', '.join(hosts[:3])}{' …' if len(hosts) > 3 else ''})"),
        )
    for ch in channels:
        table.add_row(f"ZK broker {ch.get('broker_id')}", escape(_channel_line(ch)))
    for anomaly in s.anomalies:
        table.add_row("[yellow]note[/yellow]", escape(anomaly))
    table.add_row("next", f"[bold]{escape(s.next_action)}[/bold]")
    return table


def _split_unresolved(channels: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the rest, channels never connected because their host has no address): a host that does not
    resolve was never contacted, which is the nature of a rehearsal's generated cluster."""
    rest, unresolved = [], []
    for ch in channels:
        never = not ch.get("connected") and not ch.get("stopped") and ch.get("acked_offset", -1) < 0
        (unresolved if never and ch.get("unresolved") else rest).append(ch)
    return rest, unresolved


def _kafka_controller_line(k: results.KafkaControllerInfo) -> str:
    """Kafka's own migrating controller (companion mode): whether it runs here, holds ZooKeeper, waits."""
    text = f"node {k.node_id}, " + (f"running here (pid {k.pid})" if k.pid else "not running on this host")
    text += ", holds /controller" if k.holds_zookeeper else ", /controller not claimed"
    if k.waiting_for:
        text += f", waiting for ZooKeeper brokers {', '.join(map(str, k.waiting_for))}"
    return text


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
    target: commands.Target,
    watch: float | None,
    interval: float | None,
    count: int | None,
    as_json: bool,
) -> None:
    """Where the migration is and what to do next (reads only).

    Shows the public state and Kafka's code, the controller and both epochs, /migration, the log end
    offset, the write-behind lag, brokers still registered in ZooKeeper and the last transition.
    Exit 1 when --log-dir is not the migration's log: the state shown is then what ZooKeeper alone
    proves, and `next` names the right directory.

    \b
    Example:
      zk2kraft status -z zk1:2181/kafka -l /var/lib/kraft/metadata --watch --interval 2
    """
    if watch is None and interval is None and count is None:
        result = commands.status(target)
        if as_json:
            render.emit_json(result)
        else:
            _render_status(result, render.out_console())
        if result.log_binding:  # --log-dir is not the migration's log: what it said is ZooKeeper's alone
            raise click.exceptions.Exit(EXIT_FINDINGS)
        return
    every = interval or watch or 2.0
    _watch_status(lambda: commands.status(target), every, count, as_json)


def _watch_status(
    read: Callable[[], results.StatusResult], every: float, count: int | None, as_json: bool
) -> None:
    """Refresh until Ctrl-C (or `count` refreshes). ZooKeeper going away mid-watch is shown and retried,
    not fatal: the operator watching a migration wants to see it come back."""
    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    out = render.out_console()
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
                head, *_ = view(None, error).renderables
                out.print(head)
                if result is not None:
                    _render_status(result, out)
                else:
                    out.print(f"unavailable: {escape(error or '')}")
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
