"""Options shared by every command, so names, env vars and help read the same everywhere."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def zookeeper_options(f: F) -> F:
    """`--zookeeper HOST:PORT[/chroot]` plus digest/SASL auth, all with environment variables."""
    f = click.option(
        "--zk-auth",
        "zk_auth",
        multiple=True,
        envvar="ZK2KRAFT_ZK_AUTH",
        metavar="SCHEME:CRED",
        help="ZooKeeper auth, e.g. digest:user:password (repeatable; env ZK2KRAFT_ZK_AUTH).",
    )(f)
    f = click.option(
        "--zk-timeout",
        type=float,
        default=10.0,
        show_default=True,
        envvar="ZK2KRAFT_ZK_TIMEOUT",
        help="Seconds to wait for a ZooKeeper session.",
    )(f)
    f = click.option(
        "--zookeeper",
        "-z",
        envvar="ZK2KRAFT_ZOOKEEPER",
        required=True,
        metavar="HOST:PORT[/chroot]",
        help="ZooKeeper connect string, as Kafka's zookeeper.connect (env ZK2KRAFT_ZOOKEEPER).",
    )(f)
    return f


def log_dir_option(required: bool = True) -> Callable[[F], F]:
    def deco(f: F) -> F:
        return click.option(
            "--log-dir",
            "-l",
            envvar="ZK2KRAFT_LOG_DIR",
            required=required,
            type=click.Path(),
            metavar="DIR",
            help="Metadata log directory, as Kafka's metadata.log.dir (env ZK2KRAFT_LOG_DIR).",
        )(f)

    return deco


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")(f)
