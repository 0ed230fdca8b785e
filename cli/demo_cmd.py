"""`zk2kraft demo`: the embedded default — a local ZooKeeper, a generated Kafka cluster, the migration.

Each phase prints a short story with its timing and where to look next, so a newcomer sees what an
operator would do on a real cluster. Everything runs on loopback and is cleaned up afterwards.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from migrator import commands
from zk_fixtures.brokers import BrokerSessions
from zk_fixtures.generator import ClusterSpec, GeneratedCluster, load_cluster
from zk_fixtures.server import ZkServer

# A cluster that a ZK-mode Kafka 3.x would leave behind: eligible, with every kind of metadata and the
# leftovers that deserve a warning (a pending topic deletion) but no blockers.
DEMO_SPEC = dict(
    brokers=6,
    racks=3,
    topics=200,
    partitions=12,
    replication_factor=3,
    topic_configs=20,
    broker_configs=2,
    acls=40,
    quota_users=4,
    quota_clients=3,
    quota_user_clients=2,
    quota_ips=2,
    scram_users=4,
    tokens=2,
    pending_deletions=1,
    reassignments=0,
    offline_partitions=0,
    legacy_topics=0,
)


@dataclass
class DemoContext:
    console: Console
    workdir: Path
    seed: int = 1
    server: ZkServer | None = None
    connect: str = ""
    cluster: GeneratedCluster | None = None
    brokers: BrokerSessions | None = None
    failures: list[str] = field(default_factory=list)


@contextlib.contextmanager
def phase(ctx: DemoContext, number: int, title: str) -> Iterator[None]:
    ctx.console.rule(f"[bold]{number}. {escape(title)}")
    started = time.perf_counter()
    yield
    ctx.console.print(f"[dim]{title}: {time.perf_counter() - started:.1f}s[/dim]\n")


def start_zookeeper(ctx: DemoContext) -> None:
    ctx.server = ZkServer(ctx.workdir / "zookeeper").start()
    ctx.connect = ctx.server.connect_string + "/kafka"
    ctx.console.print(
        f"Started Debian's ZooKeeper on [bold]{ctx.server.connect_string}[/bold] "
        f"(data in {escape(str(ctx.server.data_dir))}). Kafka lives under the chroot [bold]/kafka[/bold], "
        "as most production clusters do."
    )


def generate_cluster(ctx: DemoContext) -> None:
    from migrator.zk.connection import close, connect

    assert ctx.server is not None
    root = connect(ctx.server.connect_string)
    try:
        root.ensure_path("/kafka")
    finally:
        close(root)
    client = connect(ctx.connect)
    try:
        ctx.cluster = load_cluster(client, ClusterSpec.checked(seed=ctx.seed, **DEMO_SPEC))
    finally:
        close(client)
    image = ctx.cluster.image
    ctx.console.print(
        f"Wrote a ZK-mode Kafka cluster exactly as Kafka lays it out: {len(image.brokers)} brokers, "
        f"{len(image.topics)} topics, {image.partition_count()} partitions, {len(image.acls)} ACLs, "
        f"{len(image.client_quotas)} quota entities, {len(image.scram_credentials)} SCRAM credentials, "
        f"{len(image.delegation_tokens)} delegation tokens, {len(image.pending_deletions)} pending topic "
        f"deletion — {ctx.cluster.znodes_written} znodes in {ctx.cluster.seconds:.1f}s."
    )
    ctx.brokers = BrokerSessions(ctx.connect, image, ctx.cluster.control).start()
    ctx.console.print(
        f"{len(ctx.brokers.sessions)} simulated brokers hold their registrations as live ephemeral znodes "
        "(/kafka/brokers/ids/*), like running ZK-mode brokers."
    )


def run_check(ctx: DemoContext) -> None:
    from cli.check_cmd import render

    result = commands.check(ctx.connect)
    render(result, ctx.console)
    if result.exit_code != 0:
        ctx.failures.append(f"check exited {result.exit_code}")
    ctx.console.print(
        f"Next: on a real cluster, run [bold]zk2kraft check --zookeeper {escape(ctx.connect)}[/bold] "
        "(add --broker-config DIR to check each broker's server.properties); every code is in docs/checks.md."
    )


def cleanup(ctx: DemoContext, keep: bool) -> None:
    if ctx.brokers is not None:
        ctx.brokers.close()
    if keep:
        ctx.console.print(
            f"Left running: ZooKeeper at {escape(ctx.connect)} (pid {ctx.server.proc.pid if ctx.server and ctx.server.proc else '?'}), "
            f"files in {escape(str(ctx.workdir))}."
        )
        return
    if ctx.server is not None:
        ctx.server.stop()
    shutil.rmtree(ctx.workdir, ignore_errors=True)


PHASES: list[tuple[str, Callable[[DemoContext], None]]] = [
    ("Start a local ZooKeeper", start_zookeeper),
    ("Generate a Kafka cluster in ZooKeeper", generate_cluster),
    ("Pre-flight check", run_check),
]


@click.command()
@click.option("--seed", default=1, show_default=True, help="Seed of the generated cluster.")
@click.option("--keep", is_flag=True, help="Leave ZooKeeper and the files in place afterwards.")
@click.option(
    "--workdir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where to put ZooKeeper's data (default: a fresh temporary directory).",
)
def demo(seed: int, keep: bool, workdir: str | None) -> None:
    """Run the whole story on an embedded default: local ZooKeeper, generated cluster, migration.

    Exits 0 when every phase did what it should.

    \b
    Example:
      zk2kraft demo
    """
    console = Console(highlight=False)
    path = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="zk2kraft-demo-"))
    path.mkdir(parents=True, exist_ok=True)
    ctx = DemoContext(console=console, workdir=path, seed=seed)
    started = time.perf_counter()
    try:
        for number, (title, run) in enumerate(PHASES, start=1):
            with phase(ctx, number, title):
                run(ctx)
    finally:
        cleanup(ctx, keep)
    elapsed = time.perf_counter() - started
    if ctx.failures:
        console.print(f"[bold red]demo finished in {elapsed:.1f}s with problems: {'; '.join(ctx.failures)}")
        raise click.exceptions.Exit(1)
    console.print(f"[bold green]demo finished in {elapsed:.1f}s: every phase did what it should.")
