"""`zk2kraft zk start|stop|status`: a local ZooKeeper for the demo and rehearsals; `zk export` (audit)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click

from cli.options import json_option
from zk_fixtures.server import four_letter, read_state, start_detached, stop_detached

_DATA_DIR = click.option(
    "--data-dir",
    default=".zk2kraft/zookeeper",
    show_default=True,
    envvar="ZK2KRAFT_ZK_DATA_DIR",
    type=click.Path(file_okay=False),
    help="Where the local server keeps its data, config and log.",
)


@click.group()
def zk() -> None:
    """A local ZooKeeper server (Debian's package or ZK_HOME) for demos and rehearsals.

    \b
    Example:
      export ZK2KRAFT_ZOOKEEPER=$(zk2kraft zk start)
    """


@zk.command()
@_DATA_DIR
@click.option("--port", type=int, default=None, help="Client port (default: a free one).")
def start(data_dir: str, port: int | None) -> None:
    """Start a standalone server on 127.0.0.1 and print its connect string.

    \b
    Example:
      export ZK2KRAFT_ZOOKEEPER=$(zk2kraft zk start)
    """
    info = start_detached(data_dir, port=port)
    click.echo(info.connect_string)


@zk.command()
@_DATA_DIR
@click.option(
    "--delete-data",
    is_flag=True,
    help="Then delete the data directory too: the next `zk start` there begins with an empty ZooKeeper "
    "(a rehearsal run again).",
)
def stop(data_dir: str, delete_data: bool) -> None:
    """Stop the server started with `zk start`.

    \b
    Example:
      zk2kraft zk stop --data-dir /tmp/zk2kraft-zk --delete-data
    """
    ours = (Path(data_dir) / "zoo.cfg").is_file()  # a directory `zk start` made, nothing else
    if delete_data and Path(data_dir).is_dir() and not ours:
        raise click.BadParameter(f"{data_dir} was not made by `zk2kraft zk start` (no zoo.cfg): not deleted")
    if stop_detached(data_dir):
        click.echo("stopped")
    else:
        click.echo("no server running", err=True)
    if delete_data and ours:
        shutil.rmtree(data_dir)
        click.echo(f"deleted {data_dir}")


@zk.command()
@_DATA_DIR
@json_option
def status(data_dir: str, as_json: bool) -> None:
    """Show whether the local server runs and what it reports (exit 3 when it does not).

    \b
    Example:
      zk2kraft zk status
    """
    info = read_state(data_dir)
    srvr = four_letter(info.host, info.port, "srvr") if info else ""
    result = {
        "running": bool(srvr),
        "connect": info.connect_string if info else None,
        "pid": info.pid if info else None,
        "data_dir": info.data_dir if info else data_dir,
        "server": dict(line.split(": ", 1) for line in srvr.splitlines() if ": " in line),
    }
    if as_json:
        click.echo(json.dumps(result, indent=2))
    elif result["running"]:
        click.echo(
            f"running at {result['connect']} (pid {result['pid']}, {result['server'].get('Mode', '?')})"
        )
    else:
        click.echo("not running")
    if not result["running"]:
        raise click.exceptions.Exit(3)


def _add_export() -> None:
    """`zk export` lives with `audit` (cli.audit_cmd), whose rows it writes."""
    from cli.audit_cmd import export_command

    zk.add_command(export_command, "export")


_add_export()
