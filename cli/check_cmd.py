"""`zk2kraft check`: the read-only pre-flight, rendered as a table or JSON."""

from __future__ import annotations

import json
import sys

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cli import render as cli_render
from cli.options import json_option, log_dir_option, zookeeper_options
from migrator import commands, results
from migrator.results import MigrationHealth, Severity

_STYLE = {Severity.BLOCKER: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_PATHS_SHOWN = 3
_ROWS_PER_CODE = 20  # a thousand malformed znodes are a thousand findings in --json, not on a screen


#: kept under its old name: tests and scripts load a directory of server.properties through it
load_broker_configs = commands.load_broker_configs


@click.command()
@zookeeper_options
@click.option(
    "--broker-config",
    "broker_config",
    metavar="DIR",
    envvar="ZK2KRAFT_BROKER_CONFIG",
    help="Directory of the brokers' server.properties (any *.properties, one per broker) to check too.",
)
@click.option(
    "--jute-maxbuffer",
    type=click.IntRange(min=1024),
    default=commands.DEFAULT_JUTE_MAXBUFFER,
    show_default=True,
    envvar="ZK2KRAFT_JUTE_MAXBUFFER",
    help="jute.maxbuffer of the Kafka JVMs (brokers, controllers); replies above it are blockers.",
)
@log_dir_option(required=False)
@click.option(
    "--preflight",
    is_flag=True,
    help="Report the eligibility findings even once a migration has begun (a claim left by a lost "
    "controller); their fixes act against a KRaft controller: first make sure none is running.",
)
@json_option
def check(
    target: commands.Target, broker_config: str | None, jute_maxbuffer: int, preflight: bool, as_json: bool
) -> None:
    """Read-only pre-flight: is this cluster ready for a ZooKeeper-to-KRaft migration?

    Exit codes: 0 eligible (warnings allowed), 1 blockers found, 2 bad input, 3 ZooKeeper unreachable
    or access refused. Once a migration has begun it reports the migration's health instead (state,
    lag, writer alive, brokers): 0 healthy, 1 not. Every finding code is explained in docs/checks.md. With --log-dir during
    dual-write, a log record that can never reach ZooKeeper is a blocker too.

    \b
    Example:
      zk2kraft check --zookeeper zk1:2181/kafka --broker-config /etc/kafka/brokers
    """
    configs = load_broker_configs(broker_config) if broker_config is not None else None
    interactive = not as_json and sys.stdout.isatty()
    if interactive:
        with cli_render.console(stderr=True).status("Reading ZooKeeper..."):
            result = commands.check(target, configs, jute_maxbuffer, preflight)
    else:
        result = commands.check(target, configs, jute_maxbuffer, preflight)
    if as_json:
        click.echo(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        render(result, cli_render.console())
    raise click.exceptions.Exit(result.exit_code)


def render(result: results.CheckResult, console: Console) -> None:
    s = result.summary
    if s.reachable:
        zxid = f"0x{s.zxid:x}" if s.zxid is not None else "?"
        console.print(
            f"ZooKeeper {escape(s.zookeeper)} at zxid {zxid}{'' if s.consistent else ' (not one snapshot)'}: "
            f"cluster {escape(s.cluster_id or '?')}, {s.brokers} brokers, {s.topics} topics, "
            f"{s.partitions} partitions, {s.znodes} znodes (read {s.read_seconds:.2f}s, checks {s.check_seconds:.2f}s)"
        )
    if result.migration is not None:
        _render_health(result.migration, console)
    elif result.findings:
        table = Table(show_lines=True, expand=False)
        table.add_column("Severity", no_wrap=True)
        table.add_column("Code", no_wrap=True)
        table.add_column("Finding", ratio=3)
        table.add_column("Fix", ratio=2)
        shown: dict[str, int] = {}
        totals: dict[str, int] = {}
        for f in result.findings:
            totals[f.code] = totals.get(f.code, 0) + 1
        for f in result.findings:
            style = _STYLE[f.severity]
            n = shown[f.code] = shown.get(f.code, 0) + 1
            if n > _ROWS_PER_CODE:
                if n == _ROWS_PER_CODE + 1:
                    more = totals[f.code] - _ROWS_PER_CODE
                    table.add_row(
                        f"[{style}]{f.severity.value}[/{style}]",
                        f"[{style}]{f.code}[/{style}]",
                        f"... and {more} more {f.code} findings (all of them with --json)",
                        "",
                    )
                continue
            text = escape(f.message)
            extra = [p for p in f.paths if p not in f.message][:_PATHS_SHOWN]
            if extra:
                text += "\n[dim]" + escape(", ".join(extra)) + "[/dim]"
            table.add_row(
                f"[{style}]{f.severity.value}[/{style}]", f"[{style}]{f.code}[/{style}]", text, escape(f.hint)
            )
        console.print(table)
    style = (
        "bold green" if result.exit_code == 0 else ("bold red" if result.exit_code == 1 else "bold magenta")
    )
    console.print(f"[{style}]{escape(s.verdict)}[/{style}]")


def _render_health(h: MigrationHealth, console: Console) -> None:
    """A migration in progress: its state, lag, writer and brokers, then what is wrong with it."""
    console.print(
        f"migration state: {escape(h.state)}" + (f", Kafka {h.kafka_state}" if h.kafka_state else "")
    )
    console.print(f"write-behind lag: {h.write_behind_lag} records")
    console.print(
        f"writer: {escape(h.writer.describe()) if h.writer else 'none (the last one stopped cleanly)'}"
    )
    zk_ids = ", ".join(map(str, h.zk_registered_brokers)) or "none"
    kraft_ids = ", ".join(map(str, h.kraft_registered_brokers)) or "none"
    console.print(
        f"brokers: registered in ZooKeeper {zk_ids}; registered with the KRaft controller {kraft_ids}"
    )
    for problem in h.problems:
        console.print(f"[bold red]problem:[/bold red] {escape(problem)}")
    console.print(f"next: {escape(h.next_action)}")
