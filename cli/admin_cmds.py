"""`zk2kraft admin ...`: metadata changes during DualWriteMetadata, one subcommand per kind of change.

Each builds one `commands.AdminChange` from its options and renders `commands.admin`'s result (sent
over Kafka's protocol to the running controller, or applied directly when none runs); `apply` reads
them from a file of JSON lines.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import click
from rich.markup import escape

from cli import render
from cli.options import json_option, log_dir_option, node_id_option, zookeeper_options
from migrator import commands, results
from migrator.errors import BadInputError

SCRAM_PASSWORD_ENV = "ZK2KRAFT_SCRAM_PASSWORD"


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
        help="Seconds to wait for the controller's answer (it answers once the change is in ZooKeeper).",
    )(f)
    f = click.option(
        "--command-config",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        metavar="FILE",
        help="Kafka client properties to reach the controller with (security.protocol, ssl.truststore.location, "
        "sasl.mechanism, sasl.jaas.config), as kafka-*.sh take them; default: the listener's settings in --config.",
    )(f)
    f = click.option(
        "--bootstrap-controller",
        "bootstrap_controller",
        envvar="ZK2KRAFT_BOOTSTRAP_CONTROLLER",
        default=None,
        metavar="HOST:PORT",
        help="The running controller's listener (KIP-919); default: the listeners of --config, else the "
        "one the controller announced in --log-dir. With none listening and the log free, the change is "
        "applied directly.",
    )(f)
    f = node_id_option(f)
    f = log_dir_option()(f)
    return zookeeper_options(f)


def _client(p: dict[str, Any]) -> dict[str, Any]:
    """How to reach the controller: its address and the client security of --command-config."""
    path = p.get("command_config")
    security = commands.client_security_from_file(path) if path else None
    return {"bootstrap": p.get("bootstrap_controller"), "security": security}


def _run_admin(target: commands.Target, ctx_params: dict[str, Any], change: commands.AdminChange) -> None:
    result = commands.admin(target, change, timeout=ctx_params["timeout"], **_client(ctx_params))
    if ctx_params["as_json"]:
        render.emit_json(result)
        return
    where = (
        f" (offsets {result.first_offset}-{result.last_offset}, /migration at {result.migration_offset})"
        if result.records
        else ""
    )
    render.out_console().print(f"{escape(result.summary)}{where} [dim]via {escape(result.via)}[/dim]")


@click.group()
def admin() -> None:
    """Metadata changes during DualWriteMetadata: appended to the log, carried to ZooKeeper.

    With the controller running, each change is sent to its listener as the Kafka request an admin
    client sends (CreateTopics, IncrementalAlterConfigs, CreateAcls, ...); the answer comes once the
    change is in ZooKeeper. With no controller running (nothing listening, the log's lock free) this
    command takes the log itself, appends and syncs once; the output says which path was taken. A
    held log whose listener cannot be reached is refused (exit 3); a controller that holds the log but
    has not announced its listeners yet (it does once its first sync is done) is waited for, up to 30 s.
    Refused outside DualWriteMetadata.

    \b
    Example:
      zk2kraft --config controller.properties admin create-topic orders -p 12 -r 3 --config retention.ms=86400000
      zk2kraft admin delete-topic orders --bootstrap-controller ctl1:9093 --command-config admin.properties -z zk:2181/kafka -l /var/lib/kraft
    """


@admin.command("create-topic")
@click.argument("topic")
@click.option(
    "--partitions",
    "-p",
    type=int,
    default=None,
    help="Default: the controller's num.partitions (Kafka's default 1), sent as -1 as kafka-topics does.",
)
@click.option(
    "--replication-factor",
    "-r",
    type=int,
    default=None,
    help="Default: the controller's default.replication.factor (Kafka's default 1), sent as -1.",
)
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config (repeatable).")
@_admin_options
@click.pass_context
def create_topic(
    ctx: click.Context,
    topic: str,
    partitions: int | None,
    replication_factor: int | None,
    configs: tuple[str, ...],
    target: commands.Target,
    **_: Any,
) -> None:
    """Create a topic; replicas placed over the registered brokers as Kafka's KRaft controller places
    them (StripedReplicaPlacer, rack aware).

    \b
    Example:
      zk2kraft admin create-topic orders -p 6 -r 3 --config cleanup.policy=compact -z zk:2181/kafka -l /data/kraft
    """
    change = commands.AdminChange(
        kind="create-topic",
        topic=topic,
        partitions=partitions,
        replication_factor=replication_factor,
        configs=_pairs(configs, "--config"),
    )
    _run_admin(target, ctx.params, change)


@admin.command("delete-topic")
@click.argument("topic")
@_admin_options
@click.pass_context
def delete_topic(ctx: click.Context, topic: str, target: commands.Target, **_: Any) -> None:
    """Delete a topic.

    \b
    Example:
      zk2kraft admin delete-topic orders -z zk:2181/kafka -l /data/kraft
    """
    _run_admin(target, ctx.params, commands.AdminChange(kind="delete-topic", topic=topic))


@admin.command("add-partitions")
@click.argument("topic")
@click.option("--partitions", "-p", type=int, required=True, help="The new total number of partitions.")
@_admin_options
@click.pass_context
def add_partitions(
    ctx: click.Context, topic: str, partitions: int, target: commands.Target, **_: Any
) -> None:
    """Raise a topic's partition count (it can only grow).

    \b
    Example:
      zk2kraft admin add-partitions orders -p 24 -z zk:2181/kafka -l /data/kraft
    """
    _run_admin(
        target, ctx.params, commands.AdminChange(kind="add-partitions", topic=topic, partitions=partitions)
    )


@admin.command("alter-topic-config")
@click.argument("topic")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE")
@click.option("--delete", "deletes", multiple=True, metavar="KEY")
@_admin_options
@click.pass_context
def alter_topic_config(
    ctx: click.Context,
    topic: str,
    sets: tuple[str, ...],
    deletes: tuple[str, ...],
    target: commands.Target,
    **_: Any,
) -> None:
    """Set or delete a topic's dynamic configs.

    \b
    Example:
      zk2kraft admin alter-topic-config orders --set retention.ms=3600000 --delete segment.ms -z zk:2181/kafka -l /data/kraft
    """
    change = commands.AdminChange(
        kind="alter-topic-config", topic=topic, configs=_pairs(sets, "--set"), delete_configs=list(deletes)
    )
    _run_admin(target, ctx.params, change)


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
    target: commands.Target,
    **_: Any,
) -> None:
    """Set or delete dynamic broker configs of one broker or the cluster default.

    \b
    Example:
      zk2kraft admin alter-broker-config --default --set log.cleaner.threads=2 -z zk:2181/kafka -l /data/kraft
    """
    if default == (broker is not None):
        raise BadInputError("give exactly one of --broker ID and --default")
    change = commands.AdminChange(
        kind="alter-broker-config",
        broker="" if default else broker,
        configs=_pairs(sets, "--set"),
        delete_configs=list(deletes),
    )
    _run_admin(target, ctx.params, change)


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


def _acl_spec(p: dict[str, Any]) -> commands.AclSpec:
    return commands.AclSpec(
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
def add_acl(ctx: click.Context, target: commands.Target, **_: Any) -> None:
    """Add an ACL binding.

    \b
    Example:
      zk2kraft admin add-acl --resource-type TOPIC --resource-name orders --principal User:alice --operation READ -z zk:2181/kafka -l /data/kraft
    """
    _run_admin(target, ctx.params, commands.AdminChange(kind="add-acl", acl=_acl_spec(ctx.params)))


@admin.command("remove-acl")
@_acl_options
@_admin_options
@click.pass_context
def remove_acl(ctx: click.Context, target: commands.Target, **_: Any) -> None:
    """Remove an ACL binding (exact match).

    \b
    Example:
      zk2kraft admin remove-acl --resource-type GROUP --resource-name app- --pattern-type PREFIXED --principal User:bob --operation READ -z zk:2181/kafka -l /data/kraft
    """
    _run_admin(target, ctx.params, commands.AdminChange(kind="remove-acl", acl=_acl_spec(ctx.params)))


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
def set_quota(ctx: click.Context, sets: tuple[str, ...], target: commands.Target, **_: Any) -> None:
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
    change = commands.AdminChange(
        kind="set-quota", quota_entity=_quota_entity(ctx.params), quota_values=values
    )
    _run_admin(target, ctx.params, change)


@admin.command("remove-quota")
@_quota_options
@click.option("--delete", "deletes", multiple=True, metavar="KEY")
@_admin_options
@click.pass_context
def remove_quota(ctx: click.Context, deletes: tuple[str, ...], target: commands.Target, **_: Any) -> None:
    """Remove client quota values.

    \b
    Example:
      zk2kraft admin remove-quota --client-id app1 --delete consumer_byte_rate -z zk:2181/kafka -l /data/kraft
    """
    change = commands.AdminChange(
        kind="remove-quota", quota_entity=_quota_entity(ctx.params), quota_remove=list(deletes)
    )
    _run_admin(target, ctx.params, change)


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
    ctx: click.Context,
    user: str,
    mechanism: str,
    iterations: int,
    password_file: str | None,
    target: commands.Target,
    **_: Any,
) -> None:
    """Create or update a SCRAM credential (salted with PBKDF2 as Kafka does; the password is never shown).

    \b
    Example:
      ZK2KRAFT_SCRAM_PASSWORD=... zk2kraft admin upsert-scram alice --mechanism SCRAM-SHA-512 -z zk:2181/kafka -l /data/kraft
    """
    password = _read_password(password_file, user)
    spec = commands.scram_credential(user, mechanism, password, iterations)
    _run_admin(target, ctx.params, commands.AdminChange(kind="upsert-scram", scram=spec))


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
def delete_scram(ctx: click.Context, user: str, mechanism: str, target: commands.Target, **_: Any) -> None:
    """Delete a SCRAM credential.

    \b
    Example:
      zk2kraft admin delete-scram alice --mechanism SCRAM-SHA-256 -z zk:2181/kafka -l /data/kraft
    """
    spec = commands.ScramSpec(user=user, mechanism=mechanism, iterations=0)
    _run_admin(target, ctx.params, commands.AdminChange(kind="delete-scram", scram=spec))


def _read_changes(path: str) -> Iterator[commands.AdminChange]:
    """JSON lines, one commands.AdminChange each (the `change` shape of the other admin subcommands)."""
    try:
        f = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as e:
        raise BadInputError(f"cannot read {path}: {e.strerror}") from None
    try:
        for number, line in enumerate(f, start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                yield commands.AdminChange.model_validate_json(line)
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
def apply_changes(ctx: click.Context, changes_file: str, target: commands.Target, **_: Any) -> None:
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
    out = render.out_console()

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
    commands.admin_many(target, changes, timeout=p["timeout"], on_result=show, **_client(p))
