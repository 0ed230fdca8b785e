"""`zk2kraft fixtures load|brokers`: a generated ZK-mode Kafka cluster in ZooKeeper, for demos and rehearsals."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from cli import render
from cli.options import json_option, zookeeper_options
from migrator import commands
from zk_fixtures.generator import ClusterSpec, GeneratedCluster

F = TypeVar("F", bound=Callable[..., Any])

_DEFAULTS = ClusterSpec()

# (option, ClusterSpec field, help); every one maps 1:1 onto the spec.
_SPEC_OPTIONS: list[tuple[str, str, str]] = [
    ("--seed", "seed", "Random seed: the same seed and flags give byte-identical znodes."),
    ("--brokers", "brokers", "Number of brokers (ids 1..N)."),
    ("--racks", "racks", "Number of racks (0: brokers without rack)."),
    ("--topics", "topics", "Number of topics."),
    ("--partitions", "partitions", "Partitions per topic."),
    ("--replication-factor", "replication_factor", "Replicas per partition."),
    ("--topic-configs", "topic_configs", "Topics with dynamic configs."),
    ("--broker-configs", "broker_configs", "Brokers with dynamic configs (plus <default> when > 0)."),
    ("--acls", "acls", "ACL bindings (literal and prefixed, all resource types)."),
    ("--quota-users", "quota_users", "User quota entities (plus <default>)."),
    ("--quota-clients", "quota_clients", "Client-id quota entities (plus <default>)."),
    ("--quota-user-clients", "quota_user_clients", "User+client-id quota entities (plus defaults)."),
    ("--quota-ips", "quota_ips", "IP quota entities (plus <default>)."),
    ("--scram-users", "scram_users", "Users with SCRAM credentials (SHA-256 and/or SHA-512)."),
    ("--tokens", "tokens", "Delegation tokens."),
    ("--pending-deletions", "pending_deletions", "Topics queued in /admin/delete_topics."),
    ("--reassignments", "reassignments", "Partitions with an in-flight reassignment."),
    ("--offline-partitions", "offline_partitions", "Partitions without a leader."),
    ("--legacy-topics", "legacy_topics", "Topics created before Kafka 2.8 (no topic_id)."),
    ("--controller-epoch", "controller_epoch", "The ZK controller's epoch (/controller_epoch)."),
]


def spec_options(f: F) -> F:
    for option, name, help_text in reversed(_SPEC_OPTIONS):
        # No click default: a flag left out lets the spec fit its default to the cluster's size.
        f = click.option(
            option, name, type=int, default=None, show_default=str(getattr(_DEFAULTS, name)), help=help_text
        )(f)
    return f


def _spec(values: dict[str, Any]) -> ClusterSpec:
    return ClusterSpec.checked(
        **{name: values[name] for _, name, _ in _SPEC_OPTIONS if values.get(name) is not None}
    )


def _summary(generated: GeneratedCluster, zookeeper: str) -> dict[str, Any]:
    image = generated.image
    seconds = generated.seconds
    return {
        "zookeeper": zookeeper,
        "seed": generated.spec.seed,
        "cluster_id": image.cluster_id,
        "znodes_written": generated.znodes_written,
        "seconds": round(seconds, 3),
        "znodes_per_second": round(generated.znodes_written / seconds) if seconds > 0 else None,
        "brokers": len(image.brokers),
        "topics": len(image.topics),
        "partitions": image.partition_count(),
        "acls": len(image.acls),
        "client_quotas": len(image.client_quotas),
        "scram_credentials": len(image.scram_credentials),
        "delegation_tokens": len(image.delegation_tokens),
        "pending_deletions": len(image.pending_deletions),
        "reassignments": len(image.reassignments),
        "controller": generated.control.controller.broker_id if generated.control.controller else None,
        "controller_epoch": generated.control.controller_epoch,
    }


@click.group()
def fixtures() -> None:
    """Generated ZK-mode Kafka clusters: metadata znodes and live broker registrations.

    \b
    Example:
      zk2kraft fixtures load --zookeeper 127.0.0.1:2181/kafka --topics 1000 --partitions 12
      zk2kraft fixtures brokers --zookeeper 127.0.0.1:2181/kafka --topics 1000 --partitions 12
    """


@fixtures.command()
@zookeeper_options
@spec_options
@click.option("--exist-ok", is_flag=True, help="Skip znodes that already exist instead of failing.")
@json_option
def load(target: commands.Target, exist_ok: bool, as_json: bool, **spec: Any) -> None:
    """Write a generated cluster's persistent znodes (topics, configs, ACLs, quotas, SCRAM, tokens, ...).

    Broker registrations and the ZK controller are ephemeral: hold them with `fixtures brokers` and the
    same spec flags.

    \b
    Example:
      zk2kraft fixtures load -z 127.0.0.1:2181 --brokers 6 --topics 1000 --partitions 12
    """
    cluster_spec = _spec(spec)
    # a new cluster's chroot is created
    try:
        if not as_json and sys.stderr.isatty():
            generated = _load_with_progress(target, cluster_spec, exist_ok)
        else:
            generated = commands.fixtures_load(target, cluster_spec, exist_ok=exist_ok)
    except commands.ZnodeExistsError as e:  # said in this command's words: its option, or a fresh ZooKeeper
        raise commands.ZnodeExistsError(
            f"{e}: ZooKeeper holds a cluster already; pass --exist-ok to keep it and add what is missing, "
            "or start from an empty one (`zk2kraft zk stop --data-dir DIR --delete-data`)",
            e.path,
        ) from None
    summary = _summary(generated, target.zookeeper)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    click.echo(
        f"wrote {summary['znodes_written']:,} znodes in {summary['seconds']:.1f}s"
        + (f" ({summary['znodes_per_second']:,}/s)" if summary["znodes_per_second"] else "")
        + f": {summary['topics']:,} topics, {summary['partitions']:,} partitions, {summary['acls']:,} ACLs, "
        f"{summary['client_quotas']:,} quotas, {summary['scram_credentials']:,} SCRAM credentials, "
        f"{summary['delegation_tokens']:,} tokens; cluster id {summary['cluster_id']}"
    )


def _load_with_progress(target: commands.Target, spec: ClusterSpec, exist_ok: bool) -> GeneratedCluster:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("writing znodes"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
        console=render.console(stderr=True),
    ) as bar:
        task = bar.add_task("znodes", total=None)
        return commands.fixtures_load(
            target,
            spec,
            exist_ok=exist_ok,
            progress=lambda n: bar.advance(task, n),
            on_total=lambda total: bar.update(task, total=total),
        )


@fixtures.command()
@zookeeper_options
@spec_options
@click.option(
    "--session-timeout",
    type=float,
    default=18.0,
    show_default=True,
    help="Seconds ZooKeeper keeps a broker's registration after its process dies (Kafka's default).",
)
@json_option
def brokers(target: commands.Target, session_timeout: float, as_json: bool, **spec: Any) -> None:
    """Hold the generated brokers' ephemeral registrations (and the ZK controller) until Ctrl-C/SIGTERM.

    One ZooKeeper session per broker, as real brokers have. Use the same spec flags as `fixtures load`.

    \b
    Example:
      zk2kraft fixtures brokers -z 127.0.0.1:2181 --brokers 6 --topics 1000 --partitions 12 &
    """
    from zk_fixtures.brokers import BrokerSessions, hold_until_signal
    from zk_fixtures.generator import generate

    generated = generate(_spec(spec))
    sessions = BrokerSessions(
        target.zookeeper,
        generated.image,
        generated.control,
        auth=target.zk_auth,
        session_timeout=session_timeout,
        security=target.security,
    )
    controller = generated.control.controller.broker_id if generated.control.controller else None
    if as_json:
        ready = json.dumps(
            {"ready": True, "brokers": sorted(generated.image.brokers), "controller": controller}
        )
    else:
        ready = (
            f"ready: {len(generated.image.brokers)} brokers registered, controller {controller}; "
            "Ctrl-C or SIGTERM to stop"
        )
    hold_until_signal(sessions, on_ready=ready)


@fixtures.command("simulate-brokers")
@zookeeper_options
@click.option(
    "--controller",
    "controller",
    required=True,
    metavar="HOST:PORT",
    help="The controller's --listen address.",
)
@click.option(
    "--brokers",
    "broker_ids",
    default=None,
    metavar="IDS",
    help="Comma-separated ids (default: every broker in ZooKeeper).",
)
@click.option("--interval", type=float, default=0.5, show_default=True, help="Seconds between rounds.")
@click.option(
    "--own-timeout",
    type=float,
    default=6.0,
    show_default=True,
    help="Seconds without reaching the controller before a broker fences itself.",
)
@click.option(
    "--controller-wait",
    type=float,
    default=120.0,
    show_default=True,
    help="Seconds to keep retrying a controller that does not answer yet (as Kafka's brokers retry).",
)
@click.option(
    "--command-config",
    type=click.Path(dir_okay=False),
    default=None,
    help="Kafka client properties for the controller listener: security.protocol, ssl.truststore.location "
    "(PEM), sasl.mechanism, sasl.jaas.config (PLAIN or SCRAM username/password).",
)
@click.option(
    "--kraft-brokers",
    "kraft_ids",
    default=None,
    metavar="IDS",
    help="Comma-separated ids to run as KRaft brokers (runbook phase 3): they register without the "
    "migration flag and follow the metadata log over Raft; stop their ZooKeeper-mode instance first.",
)
def simulate_brokers(
    target: commands.Target,
    controller: str,
    broker_ids: str | None,
    kraft_ids: str | None,
    interval: float,
    own_timeout: float,
    controller_wait: float,
    command_config: str | None,
) -> None:
    """Simulated ZK-mode brokers that register with and heartbeat to the controller, until Ctrl-C/SIGTERM.

    They hold the cluster's replicas as leaders and followers: followers fetch with their broker
    epochs, leaders grow and shrink ISRs with AlterPartition v3 (docs/controller-protocol.md). Each
    registers the endpoints and rack of its /brokers/ids entry. Prints `ready` once all registered.
    With --kraft-brokers, those run in KRaft mode; restart the simulator with one more id each time to
    roll the brokers one by one, and a line per KRaft broker says what its metadata cache holds.

    \b
    Example:
      zk2kraft controller --listen 127.0.0.1:9093 --zookeeper localhost:2181/kafka &
      zk2kraft fixtures simulate-brokers --controller 127.0.0.1:9093 --zookeeper localhost:2181/kafka
    """
    from zk_fixtures.broker_sim_cli import run_simulator

    security = commands.client_security_from_file(command_config) if command_config else None
    run_simulator(
        controller,
        target.zookeeper,
        [int(b) for b in broker_ids.split(",") if b.strip()] if broker_ids else (),
        interval=interval,
        own_timeout=own_timeout,
        auth=target.zk_auth,
        zk_timeout=target.zk_timeout,
        controller_wait=controller_wait,
        security=security,
        zk_security=target.security,
        kraft_ids=[int(b) for b in kraft_ids.split(",") if b.strip()] if kraft_ids else (),
    )
