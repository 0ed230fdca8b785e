"""`zk2kraft controller --listen HOST:PORT`: the long-running KRaft controller of a migration.

The same run as `migrate --follow --listen`: soft start while ZooKeeper brokers register, the copy
once all of them have, then dual-write while serving brokers and `zk2kraft admin` until SIGTERM.
"""

from __future__ import annotations

import click

from cli.migrate_cmd import run_migrate
from cli.options import json_option, listen_options, log_dir_option, node_id_option, zookeeper_options
from migrator import commands


@click.command()
@zookeeper_options
@log_dir_option()
@click.option(
    "--yes", "-y", is_flag=True, help="Answer the confirmation prompt with yes (needed without a terminal)."
)
@listen_options
@node_id_option
@json_option
def controller(
    target: commands.Target, yes: bool, broker_wait_timeout: float, session_timeout_ms: int, as_json: bool
) -> None:
    """Run the KRaft controller: serve brokers on --listen, migrate, then keep dual-writing.

    Brokers register and heartbeat from the start (soft start: every other request is refused with
    NOT_CONTROLLER until the copy is committed); the copy waits until every broker ZooKeeper knows has
    registered, or exits 1 naming the missing ones after --broker-wait-timeout. Stops cleanly on
    SIGTERM or Ctrl-C.

    \b
    Example:
      zk2kraft controller -z zk1:2181/kafka -l /var/lib/kraft/metadata --listen 0.0.0.0:9093 --yes
    """
    if target.listen is None:
        raise click.UsageError("--listen HOST:PORT is required (or set ZK2KRAFT_LISTEN)")
    run_migrate(
        target,
        yes=yes,
        follow=True,
        brokers_from_zk=False,
        broker_wait_timeout=broker_wait_timeout,
        session_timeout_ms=session_timeout_ms,
        as_json=as_json,
    )
