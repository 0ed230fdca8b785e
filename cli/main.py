"""The `zk2kraft` command: click wiring, Kafka-style config files and one-line errors.

Commands stay thin: they parse options, call `migrator.commands`, and render. Every ZkKraftError
becomes one line on stderr and its exit code; `-v` shows the traceback.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from importlib import metadata
from typing import Any

import click

from cli.options import CONFIG_LISTENERS
from migrator import commands
from migrator.errors import EXIT_BAD_INPUT, EXIT_UNREACHABLE, ZkKraftError
from migrator.stop import Stopped

#: kept under its old name: Kafka property names → option defaults (`migrator.target.option_defaults`)
_defaults_from_properties = commands.option_defaults


def _default_map(command: click.Command, values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {p.name: values[p.name] for p in command.params if p.name in values}
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            out[name] = _default_map(sub, values)
    return out


def _version() -> str:
    try:
        return metadata.version("zk2kraft")
    except metadata.PackageNotFoundError:
        return "unknown"


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(_version(), "--version", prog_name="zk2kraft")
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks and debug logs.")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    envvar="ZK2KRAFT_CONFIG",
    help="Kafka properties file (zookeeper.connect, metadata.log.dir, ...) giving option defaults.",
)
@click.pass_context
def main(ctx: click.Context, verbose: bool, config_path: str | None) -> None:
    """Move a Kafka cluster's metadata from ZooKeeper to KRaft (KIP-866) and prove nothing was lost.

    \b
    Example:
      zk2kraft check --zookeeper zk1:2181/kafka
    """
    ctx.ensure_object(dict)
    ctx.obj["verbose"] = verbose
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    if config_path:
        values = _defaults_from_config(config_path)
        ctx.default_map = _default_map(main, values)
        if values.get("listeners"):  # a controller's properties: `controller` serves its listeners
            ctx.default_map.setdefault("controller", {}).setdefault("listen", values["listeners"])
            ctx.meta[CONFIG_LISTENERS] = values["listeners"]


def _defaults_from_config(config_path: str) -> dict[str, Any]:
    return commands.load_config(config_path)


def _subcommand_config(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """`zk2kraft status --config FILE`: the same defaults as `zk2kraft --config FILE status`.

    Eager, so the defaults are in place before the command's other options are resolved; options given
    on the command line or through their environment variables still win, and this file wins over the
    group's.
    """
    if value and not ctx.resilient_parsing:
        values = _defaults_from_config(value)
        defaults = _default_map(ctx.command, values)
        if values.get("listeners"):
            ctx.meta[CONFIG_LISTENERS] = values["listeners"]
            if ctx.command.name == "controller":
                defaults.setdefault("listen", values["listeners"])
        ctx.default_map = {**defaults, **(ctx.default_map or {})}


def _add_config_option(command: click.Command) -> None:
    """Give every command without a `--config` of its own the group's `--config` too."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _add_config_option(sub)
        return
    if any("--config" in getattr(p, "opts", ()) for p in command.params):
        return  # e.g. `admin create-topic --config KEY=VALUE`: there the global option goes first
    command.params.append(
        click.Option(
            ["--config"],
            type=click.Path(dir_okay=False),
            expose_value=False,
            is_eager=True,
            callback=_subcommand_config,
            help="Kafka properties file giving option defaults (as `zk2kraft --config FILE`).",
        )
    )


def _register() -> None:
    from cli import commands_index

    for command in commands_index.all_commands():
        _add_config_option(command)
        main.add_command(command)


def run(argv: list[str] | None = None) -> int:
    """Entry point that turns every operator error into one line and an exit code."""
    _register()
    verbose = "-v" in (argv or sys.argv[1:]) or "--verbose" in (argv or sys.argv[1:])
    try:
        rv = main.main(args=argv, prog_name="zk2kraft", standalone_mode=False)
    except SystemExit:
        if _stdout_closed():  # `zk2kraft log dump | head`: the reader has all it wanted, not a finding
            return 0
        raise
    except Stopped as e:  # SIGTERM/SIGINT at a safe point: what it did, not an error
        click.echo(f"zk2kraft: {e}", err=True)
        return e.exit_code
    except ZkKraftError as e:
        if verbose:
            traceback.print_exc()
        click.echo(f"zk2kraft: error: {e}", err=True)
        _json_error(argv, type(e).__name__, str(e), e.exit_code)
        return e.exit_code
    except click.exceptions.Exit as e:
        return int(e.exit_code)
    except click.exceptions.Abort:
        click.echo("zk2kraft: aborted", err=True)
        return 130
    except click.ClickException as e:
        e.show()
        code = EXIT_BAD_INPUT if e.exit_code == 2 else e.exit_code
        _json_error(argv, type(e).__name__, e.format_message(), code)
        return code
    except KeyboardInterrupt:
        click.echo("zk2kraft: interrupted", err=True)
        return 130
    except OSError as e:  # a file or directory the OS refuses (permissions, a full disk): exit 3
        if verbose:
            traceback.print_exc()
        where = f" {e.filename}" if e.filename else ""
        message = f"cannot access{where}: {e.strerror or type(e).__name__}"
        click.echo(f"zk2kraft: error: {message}", err=True)
        _json_error(argv, "UnreachableError", message, EXIT_UNREACHABLE)
        return EXIT_UNREACHABLE
    except Exception as e:  # noqa: BLE001 - the operator sees one line; -v shows where
        if verbose:
            traceback.print_exc()
        click.echo(f"zk2kraft: internal error: {type(e).__name__}: {e} (run with -v for details)", err=True)
        _json_error(argv, "InternalError", f"{type(e).__name__}: {e}", 70)
        return 70
    # standalone_mode=False turns `Exit(n)` into a return value of n
    return rv if isinstance(rv, int) else 0


def _stdout_closed() -> bool:
    """Whether click met a closed stdout (EPIPE): it then wraps stdout so the exit flush stays quiet
    and exits 1; for `| head` or `| grep -q` that is the reader being done, not a failure."""
    from click.utils import PacifyFlushWrapper

    return isinstance(sys.stdout, PacifyFlushWrapper)


def _json_error(argv: list[str] | None, code: str, message: str, exit_code: int) -> None:
    """With `--json`, stdout always holds one JSON object, also when the command failed."""
    args = argv if argv is not None else sys.argv[1:]
    if "--json" in args:
        click.echo(json.dumps({"error": {"code": code, "message": message, "exit_code": exit_code}}))


def entry() -> None:
    # Every file and directory zk2kraft creates (log segments, snapshots, meta.properties, lock files,
    # manifests, reports, exports) is its owner's alone: the log holds SCRAM credentials and configs.
    os.umask(0o077)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Line by line even into a pipe or file: a long-running controller under systemd or in a CI log
    # would otherwise hold its progress lines in a buffer for minutes.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(line_buffering=True)
    sys.exit(run())
