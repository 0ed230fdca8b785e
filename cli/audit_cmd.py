"""`zk2kraft audit` (ZooKeeper vs the log, in Spark) and `zk2kraft zk export` (a live tree to Parquet)."""

from __future__ import annotations

import json
from typing import Any

import click
from click.core import ParameterSource
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cli import render as cli_render
from cli.options import json_option, log_dir_option, zk_security_options, zookeeper_options
from migrator import commands
from migrator.errors import BadInputError

PHASES = ("copy", "dual-write", "finalized")


@click.command()
@click.option(
    "--phase",
    type=click.Choice(PHASES),
    help="What to expect: copy (the log's image at the copy equals ZooKeeper then), dual-write "
    "(ZooKeeper equals the image at its /migration offset), finalized (differences expected). "
    "Default: the phase the migration state found implies.",
)
@click.option(
    "--zookeeper",
    "-z",
    envvar="ZK2KRAFT_ZOOKEEPER",
    metavar="HOST:PORT[/chroot]",
    help="Read a live ZooKeeper (one consistent bulk read), as Kafka's zookeeper.connect (env ZK2KRAFT_ZOOKEEPER).",
)
@click.option(
    "--zk-auth",
    "zk_auth",
    multiple=True,
    envvar="ZK2KRAFT_ZK_AUTH",
    metavar="SCHEME:CRED",
    help="ZooKeeper auth for --zookeeper, e.g. digest:user:password (repeatable).",
)
@click.option("--zk-timeout", type=float, default=10.0, show_default=True, envvar="ZK2KRAFT_ZK_TIMEOUT")
@zk_security_options
@click.option(
    "--zk-snapshot",
    metavar="DIR",
    type=click.Path(),
    help="A ZooKeeper dataDir (or a copy of it): its newest snapshot, plus its transaction logs replayed.",
)
@click.option(
    "--zk-txn-logs", metavar="DIR", type=click.Path(), help="ZooKeeper's dataLogDir, if not the dataDir."
)
@click.option(
    "--zk-chroot", default="", metavar="PATH", help="Kafka's chroot inside the snapshot, e.g. /kafka."
)
@click.option("--no-zk-replay", "no_replay", is_flag=True, help="Use the (fuzzy) snapshot without its logs.")
@click.option(
    "--zk-export",
    metavar="FILE",
    type=click.Path(),
    help="A Parquet export written by `zk2kraft zk export`.",
)
@log_dir_option()
@click.option(
    "--master",
    "--spark-master",
    "master",
    default="local[*]",
    show_default=True,
    envvar="ZK2KRAFT_SPARK_MASTER",
    help="Spark master: local[N], spark://HOST:PORT, yarn (env ZK2KRAFT_SPARK_MASTER).",
)
@click.option("--slices", type=click.IntRange(min=1), help="Spark tasks per input (default: half the cores).")
@click.option("--report", metavar="FILE", type=click.Path(dir_okay=False), help="Write an HTML report here.")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Differences shown per kind (and verdict).",
)
@json_option
@click.pass_context
def audit(
    ctx: click.Context,
    target: commands.Target,
    phase: str | None,
    zk_snapshot: str | None,
    zk_txn_logs: str | None,
    zk_chroot: str,
    no_replay: bool,
    zk_export: str | None,
    master: str,
    slices: int | None,
    report: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Prove ZooKeeper and the KRaft log hold the same metadata, entity by entity (Spark).

    Every topic, partition, config, quota, SCRAM credential (compared as a salted hash), ACL, producer
    id block, delegation token and broker registration is compared; tolerated differences (a partition
    epoch against the state znode's version) are informational. Exit codes: 0 consistent (always after
    finalize), 1 mismatches, 2 bad input (a corrupt file, a phase the state does not allow), 3 Spark
    or an input unreachable.

    \b
    Examples:
      zk2kraft audit --zookeeper zk1:2181/kafka --log-dir /var/lib/kraft --report audit.html
      zk2kraft audit --zk-snapshot /backup/zookeeper --log-dir /var/lib/kraft --phase copy
    """
    verbose = bool((ctx.obj or {}).get("verbose"))
    if target.zookeeper and (zk_snapshot or zk_export):
        source = ctx.get_parameter_source("zookeeper")
        if source in (ParameterSource.ENVIRONMENT, ParameterSource.DEFAULT_MAP):
            target = target.replace(
                zookeeper=""
            )  # an explicit snapshot or export wins over the environment's
        else:
            raise BadInputError("give one ZooKeeper input: --zookeeper, --zk-snapshot or --zk-export")
    interactive = cli_render.interactive(as_json)
    kwargs: dict[str, Any] = dict(
        phase=phase,
        zk_snapshot=zk_snapshot,
        zk_txn_logs=zk_txn_logs,
        zk_chroot=zk_chroot,
        zk_replay=not no_replay,
        zk_export=zk_export,
        master=master,
        slices=slices,
        limit=limit,
        report=report,
        verbose=verbose,
    )
    if interactive:
        console = cli_render.console(stderr=True)
        with console.status("auditing...") as status:
            result = commands.audit(target, say=lambda m: status.update(f"audit: {m}..."), **kwargs)
    else:
        result = commands.audit(target, **kwargs)
    if as_json:
        click.echo(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        render(result, cli_render.console())
    raise click.exceptions.Exit(result.exit_code)


def _zk_line(z: dict[str, Any]) -> str:
    zxid = z.get("zxid")
    where = z.get("zookeeper") or z.get("export") or z.get("snapshot") or z.get("path") or "?"
    text = f"ZooKeeper {where}"
    if isinstance(zxid, int):
        text += f" at zxid {zxid:#x}"
    if z.get("consistent") is False:
        text += " (not one consistent view)"
    return text


def _kraft_line(k: dict[str, Any]) -> str:
    text = f"log {k.get('log_dir') or k.get('path') or '?'}: image at offset {k.get('cut_offset')}"
    if k.get("end_offset") is not None:
        text += f" of end offset {k['end_offset']}"
    if k.get("snapshot"):
        text += f", from snapshot {k['snapshot']}"
    return text


#: What the reconcile on the next `migrate`/`controller` start does about each kind of difference.
REPAIRS = {
    "missing_in_zookeeper": "create it in ZooKeeper",
    "missing_in_kraft": "delete it from ZooKeeper",
    "mismatched": "rewrite ZooKeeper with the log's value",
}


def render(result: Any, console: Console) -> None:
    titles = commands.audit_kind_titles()

    console.print(
        f"phase [bold]{escape(result.phase)}[/bold] ({result.phase_source}; state {escape(str(result.state))})"
    )
    console.print(escape(_zk_line(result.zookeeper)))
    console.print(escape(_kraft_line(result.kraft)))
    finalized = result.phase == "finalized"
    table = Table(expand=False)
    for name in ("kind", "ZooKeeper", "KRaft", "equal", "expected" if finalized else "mismatches", "info"):
        table.add_column(name, justify="left" if name == "kind" else "right")
    for c in result.counts:
        diffs = c.expected if finalized else c.mismatch
        style = "red" if diffs and not finalized else ""
        table.add_row(
            titles.get(c.kind, c.kind),
            f"{c.zookeeper:,}",
            f"{c.kraft:,}",
            f"{c.equal:,}",
            f"[{style}]{diffs:,}[/{style}]" if style else f"{diffs:,}",
            f"{c.info:,}",
        )
    console.print(table)
    shown = [d for d in result.differences if d["verdict"] in ("mismatch", "expected")]
    if shown:
        diffs = Table(title="differences (first per kind)", expand=False, show_lines=False)
        diffs.add_column("kind")
        diffs.add_column("key", overflow="fold")
        diffs.add_column("what differs (ZooKeeper → log)", overflow="fold")
        if not finalized:
            diffs.add_column("reconcile would", overflow="fold")
        for d in shown:
            what = [d["status"].replace("_", " ")]
            what += [f"{f['name']}: {f['zookeeper']} → {f['kraft']}" for f in d["fields"]]
            row = [titles.get(d["kind"], d["kind"]), escape(d["key"]), escape("; ".join(what))]
            if not finalized:
                row.append(REPAIRS.get(d["status"], ""))
            diffs.add_row(*row)
        console.print(diffs)
        if not finalized:
            console.print(
                "The log is the source of truth: a `zk2kraft migrate` or `zk2kraft controller` start reconciles "
                "ZooKeeper to it (each repair is printed); `zk2kraft rollback` would instead keep ZooKeeper as it is."
            )
    reasons: dict[str, str] = {}
    for d in result.differences:
        if d["verdict"] == "info" and d.get("reason"):
            reasons.setdefault(d["kind"], d["reason"])
    for c in result.counts:
        if c.info:
            why = reasons.get(c.kind)
            console.print(
                f"[cyan]info[/cyan] {c.info:,} {titles.get(c.kind, c.kind)}"
                + (f": {escape(why)}" if why else "")
            )
    for w in result.warnings:
        console.print(f"[yellow]warning[/yellow] {escape(w)}")
    if result.report:
        console.print(f"report: {escape(result.report)}")
    style = "bold green" if result.exit_code == 0 else "bold red"
    console.print(f"[{style}]{escape(result.verdict)}[/{style}]")


@click.command("export")
@zookeeper_options
@click.option(
    "--out",
    "-o",
    required=True,
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Parquet file to write (replaced atomically).",
)
@json_option
def export_command(target: commands.Target, out: str, as_json: bool) -> None:
    """A consistent copy of Kafka's ZooKeeper tree as audit rows in Parquet (`zk2kraft audit --zk-export`).

    \b
    Example:
      zk2kraft zk export --zookeeper zk1:2181/kafka --out zk-before-copy.parquet
    """
    if cli_render.interactive(as_json):
        with cli_render.console(stderr=True).status("reading ZooKeeper..."):
            result = commands.zk_export(target, out)
    else:
        result = commands.zk_export(target, out)
    if as_json:
        click.echo(json.dumps(result.model_dump(mode="json"), indent=2))
        return
    console = cli_render.console()
    state = "one consistent view" if result.consistent else "NOT one consistent view"
    console.print(
        f"wrote {result.rows:,} rows to {escape(result.out)}: ZooKeeper {escape(result.zookeeper)} at zxid "
        f"{result.zxid:#x} ({state}), {result.znodes:,} znodes, {result.topics:,} topics, "
        f"{result.partitions:,} partitions, read in {result.read_seconds:.2f}s"
    )
    for w in result.warnings:
        console.print(f"[yellow]warning[/yellow] {escape(w)}")
