"""`zk2kraft demo` on real Kafka: three Kafka 3.9 brokers migrated from ZooKeeper while clients run.

The same story as the simulated demo (cli/demo_cmd.py) with Kafka's own processes as the peers: the
brokers start in ZooKeeper mode, an idempotent acks=all producer and a consumer group run from before
the copy to after the handover, the brokers are rolled with KIP-866's migration settings toward
`zk2kraft controller`, one is killed with SIGKILL during dual-write, admin requests go through a
broker (forwarded to the controller), the brokers are rolled again as KRaft brokers, `finalize`
hands the directory to Kafka's own KRaft controller, and the demo ends with the producer's and the
consumer's counts. Kafka's jars come from Maven Central on first use (zk_fixtures.kafka_dist).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from cli.demo_cmd import (
    DemoContext,
    _log_dir,
    _target,
    cleanup,
    report_copy,
    run_audit,
    run_check,
    run_plan,
    run_status,
)
from migrator import commands
from migrator.errors import UnreachableError
from zk_fixtures.kafka import kafka_tool
from zk_fixtures.kafka_cluster import (
    CLIENT_LOG,
    CONTROLLER_ID,
    RealCluster,
    Traffic,
    isr_full,
    leaders,
    wait_leaders,
    wait_listening,
)
from zk_fixtures.kafka_dist import KAFKA_VERSION, KafkaFetchError, kafka_libs
from zk_fixtures.server import ZkServer

__all__ = ["REAL", "RealDemo", "cleanup_real", "prerequisites"]

#: the producer's topic: replicated on the three brokers, two replicas must acknowledge each write
TOPIC = "payments"
#: the producer's messages a second (librdkafka batches them; small enough for a 2-core machine)
RATE = 50.0


@dataclass
class RealDemo(DemoContext):
    """The demo's context with the real cluster and its clients."""

    kafka: RealCluster | None = None
    traffic: Traffic | None = None
    halted: str = ""  # the phase that failed with an exception: the later ones do not run on its wreck


def guarded(run: Callable[[DemoContext], None]) -> Callable[[DemoContext], None]:
    """A phase whose exception (a broker that did not come back, a stalled producer) becomes the demo's
    failure with one line, and stops the story: the later phases would only run on a broken cluster."""

    @functools.wraps(run)
    def phase(ctx: DemoContext) -> None:
        assert isinstance(ctx, RealDemo)
        if ctx.halted:
            ctx.console.print(f"[dim](not run: {escape(ctx.halted)} failed)[/dim]")
            return
        try:
            run(ctx)
        except Exception as e:  # noqa: BLE001 - any cause stops the story with its one line
            ctx.halted = run.__name__
            ctx.failures.append(
                f"{run.__name__}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:400]
            )
            ctx.console.print(f"[red]{escape(ctx.failures[-1])}[/red]")

    return phase


def prerequisites(say: Callable[[str], None]) -> None:
    """Java, confluent-kafka and Kafka's jars (fetched once, announced with their size through `say`);
    raises UnreachableError (exit 3) naming what is missing."""
    if shutil.which("java") is None:
        raise UnreachableError(
            "java not found: the real-Kafka demo runs Kafka 3.9 (apt-get install default-jre-headless)"
        )
    if importlib.util.find_spec("confluent_kafka") is None:
        raise UnreachableError(
            "confluent-kafka not installed: pip install 'zk2kraft[demo]' for the demo's producer"
        )
    try:
        kafka_libs(KAFKA_VERSION, announce=say)
    except KafkaFetchError as e:
        raise UnreachableError(str(e)) from None


def _real(ctx: DemoContext) -> tuple[RealCluster, Traffic]:
    assert isinstance(ctx, RealDemo) and ctx.kafka is not None and ctx.traffic is not None
    return ctx.kafka, ctx.traffic


def start_zookeeper_and_brokers(ctx: DemoContext) -> None:
    """Debian's ZooKeeper, three Kafka 3.9 brokers in ZooKeeper mode, a topic and metadata of each kind."""
    assert isinstance(ctx, RealDemo)
    import confluent_kafka.admin as ck

    ctx.server = ZkServer(ctx.workdir / "zookeeper").start()
    ctx.connect = ctx.server.connect_string + "/kafka"
    cluster = RealCluster(ctx.workdir / "kafka", ctx.connect, metadata_dir=Path(_log_dir(ctx)))
    ctx.kafka = cluster
    cluster.root.mkdir(parents=True, exist_ok=True)
    # librdkafka reports each refused connection while a broker restarts: into a file, not the story
    handler = logging.FileHandler(cluster.root / "clients.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    CLIENT_LOG.addHandler(handler)
    CLIENT_LOG.propagate = False
    t0 = time.perf_counter()
    for bid in cluster.ids:
        cluster.nodes[bid].props = cluster.zk_props(bid, migrating=False)
        cluster.nodes[bid].start()
    for bid in cluster.ids:
        cluster.nodes[bid].wait_listening("PLAINTEXT", 180)
    ctx.console.print(
        f"Started Debian's ZooKeeper on [bold]{ctx.server.connect_string}[/bold] and three Kafka {KAFKA_VERSION} "
        f"brokers in ZooKeeper mode under the chroot /kafka (ids {', '.join(map(str, cluster.ids))}, "
        f"inter.broker.protocol.version=3.9) in {time.perf_counter() - t0:.1f}s: {cluster.bootstrap}."
    )
    admin = ck.AdminClient({"bootstrap.servers": cluster.bootstrap, "logger": CLIENT_LOG})
    made = admin.create_topics(
        [ck.NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2", "retention.ms": "604800000"})]
    )
    made[TOPIC].result(60)
    salt = b"zk2kraft-demo-salt"
    admin.alter_user_scram_credentials(
        [
            ck.UserScramCredentialUpsertion(
                "alice", ck.ScramCredentialInfo(ck.ScramMechanism.SCRAM_SHA_256, 8192), b"alice-secret", salt
            )
        ]  # fmt: skip
    )["alice"].result(60)
    acl = ck.AclBinding(ck.ResourceType.TOPIC, TOPIC, ck.ResourcePatternType.LITERAL, "User:alice", "*",
                        ck.AclOperation.READ, ck.AclPermissionType.ALLOW)  # fmt: skip
    for f in admin.create_acls([acl]).values():
        f.result(60)
    ctx.traffic = Traffic(cluster.bootstrap, TOPIC, rate=RATE).start()
    ctx.traffic.wait_acked(50)
    isr_full(cluster.bootstrap, "__consumer_offsets")
    ctx.console.print(
        f"Topic [bold]{TOPIC}[/bold] (3 partitions, replication factor 3, min.insync.replicas=2), a SCRAM user "
        "and an ACL, made with Kafka's admin API. A producer (idempotent, acks=all, "
        f"{RATE:.0f} numbered messages a second) and a consumer group run from now until the end."
    )


def run_real_migrate(ctx: DemoContext) -> None:
    """Runbook phases 1-2: zk2kraft's controller, the brokers rolled with the migration settings, the copy."""
    cluster, traffic = _real(ctx)
    cluster.start_zk2kraft()
    wait_listening(cluster.controller_port, cluster.controller)
    ctx.console.print(
        f"Started [bold]zk2kraft controller -z {escape(ctx.connect)} -l {escape(str(cluster.log_dir))} --listen "
        f"127.0.0.1:{cluster.controller_port} --node-id {CONTROLLER_ID}[/bold]: soft start, it waits for every broker."
    )
    for bid in cluster.ids:
        t0 = time.perf_counter()
        node = cluster.nodes[bid]
        since = node.log_size()
        node.stop()
        cluster.start_broker(bid, cluster.zk_props(bid, migrating=True))
        node.wait_for_log(rf"BrokerLifecycleManager id={bid} isZkBroker=true\] Successfully registered broker",
                          since=since, timeout=120)  # fmt: skip
        node.wait_for_log(rf"RaftManager id={bid}\] Completed transition to FollowerState.*leader={CONTROLLER_ID}",
                          since=since, timeout=120)  # fmt: skip
        isr_full(cluster.bootstrap, TOPIC)
        ctx.console.print(
            f"  Broker {bid} restarted with zookeeper.metadata.migration.enable=true in {time.perf_counter() - t0:.1f}s: "
            "registered with zk2kraft as a migrating ZooKeeper broker, follows its metadata log as an observer, "
            f"back in every ISR ({traffic.count()} messages acknowledged so far)."
        )
    deadline = time.monotonic() + 90
    while commands.status(_target(ctx)).state != "DualWriteMetadata" and time.monotonic() < deadline:
        if cluster.controller is None or cluster.controller.poll() is not None:
            ctx.failures.append(f"zk2kraft controller exited: {cluster.zk2kraft_output()[-500:]}")
            return
        time.sleep(0.5)
    report_copy(ctx)
    for bid in cluster.ids:
        cluster.nodes[bid].wait_for_log(
            rf"LeaderAndIsr request correlationId \d+ from controller {CONTROLLER_ID}"
        )
    ctx.console.print(
        f"Every broker took a LeaderAndIsr from controller {CONTROLLER_ID}: zk2kraft is their controller."
    )


def run_real_failover(ctx: DemoContext) -> None:
    """kill -9 of a partition leader during dual-write: zk2kraft elects, the survivors follow, it rejoins."""
    cluster, traffic = _real(ctx)
    before = leaders(cluster.bootstrap, TOPIC)
    victim = before[0][0]
    led = {p for p, (leader, _isr) in before.items() if leader == victim}
    killed, from_n = time.monotonic(), traffic.sent
    cluster.nodes[victim].kill()
    survivors = ",".join(f"127.0.0.1:{cluster.ports[b]}" for b in cluster.ids if b != victim)
    after = wait_leaders(survivors, TOPIC, lambda ls: all(ls[p][0] not in (victim, -1) for p in led),
                         f"new leaders after kill -9 of broker {victim}")  # fmt: skip
    acked = traffic.first_ack_after(killed, led, from_n)
    moved = ", ".join(f"{TOPIC}-{p} → broker {after[p][0]}" for p in sorted(led))
    ctx.console.print(
        f"Broker {victim}, leader of {len(led)} partition(s), was killed (SIGKILL). Its heartbeats stopped, zk2kraft "
        f"fenced it and elected new leaders ({moved}); the producer's next acknowledged message on them came "
        f"{acked - killed:.1f}s after the kill."
    )
    t0 = time.perf_counter()
    cluster.start_broker(victim, cluster.zk_props(victim, migrating=True))
    isr_full(cluster.bootstrap, TOPIC)
    traffic.wait_acked(20)
    ctx.console.print(
        f"Broker {victim} restarted and rejoined every ISR in {time.perf_counter() - t0:.1f}s (its leaders "
        "widened the ISR with AlterPartition to zk2kraft)."
    )


def run_real_admin(ctx: DemoContext) -> None:
    """Admin requests to a ZooKeeper-mode broker: it forwards them to zk2kraft (Envelope)."""
    cluster, _traffic = _real(ctx)
    import confluent_kafka.admin as ck

    one = f"127.0.0.1:{cluster.ports[cluster.ids[0]]}"
    admin = ck.AdminClient({"bootstrap.servers": one, "logger": CLIENT_LOG})
    admin.create_topics([ck.NewTopic("demo-orders", 3, 3, config={"retention.ms": "86400000"})])[
        "demo-orders"
    ].result(60)
    admin.incremental_alter_configs(
        [
            ck.ConfigResource(
                ck.ResourceType.TOPIC,
                "demo-orders",
                incremental_configs=[
                    ck.ConfigEntry(
                        "cleanup.policy", "compact", incremental_operation=ck.AlterConfigOpType.SET
                    )
                ],
            )
        ]
    )[  # fmt: skip
        ck.ConfigResource(ck.ResourceType.TOPIC, "demo-orders")
    ].result(60)
    acl = ck.AclBinding(ck.ResourceType.TOPIC, "demo-orders", ck.ResourcePatternType.LITERAL, "User:demo-app", "*",
                        ck.AclOperation.WRITE, ck.AclPermissionType.ALLOW)  # fmt: skip
    for f in admin.create_acls([acl]).values():
        f.result(60)
    admin.create_partitions([ck.NewPartitions("demo-orders", 6)])["demo-orders"].result(60)
    isr_full(cluster.bootstrap, "demo-orders")
    ctx.console.print(
        f"  Through broker {cluster.ids[0]} with Kafka's admin API: created topic demo-orders (3 partitions), "
        "set cleanup.policy=compact, allowed User:demo-app to write it, grew it to 6 partitions."
    )
    landed = commands.znode_exists(_target(ctx), "/brokers/topics/demo-orders/partitions/5/state")
    ctx.console.print(
        "The broker forwarded each request to zk2kraft in an Envelope; zk2kraft appended it to the log and "
        "wrote it behind to ZooKeeper"
        + (" — /brokers/topics/demo-orders/partitions/5/state exists." if landed else ".")
    )
    if not landed:
        ctx.failures.append("admin changes did not reach ZooKeeper")


def run_real_kraft_restarts(ctx: DemoContext) -> None:
    """Runbook phase 3: each broker restarted as a KRaft broker with the same node id."""
    cluster, traffic = _real(ctx)
    for bid in cluster.ids:
        t0 = time.perf_counter()
        node = cluster.nodes[bid]
        since = node.log_size()
        node.stop()
        cluster.start_broker(bid, cluster.kraft_props(bid))
        node.wait_for_log(rf"BrokerLifecycleManager id={bid}\] The broker has been unfenced", since=since,
                          timeout=120)  # fmt: skip
        isr_full(cluster.bootstrap, TOPIC)
        ctx.console.print(
            f"  Broker {bid} restarted as a KRaft broker (process.roles=broker, node.id={bid}) in "
            f"{time.perf_counter() - t0:.1f}s: fetched the metadata log from zk2kraft, unfenced, back in every ISR "
            f"({traffic.count()} messages acknowledged so far)."
        )
    registered = commands.status(_target(ctx)).zk_registered_brokers
    if registered:
        ctx.failures.append(f"brokers still registered in ZooKeeper: {registered}")
    ctx.console.print(f"Every broker is a KRaft broker ({len(cluster.ids)} of {len(cluster.ids)}); none is registered "
                      "in ZooKeeper any more.")  # fmt: skip


def run_real_finalize(ctx: DemoContext) -> None:
    """`zk2kraft finalize`, then Kafka's own KRaft controller on the directory, zk2kraft's id and port."""
    cluster, traffic = _real(ctx)
    code = cluster.stop_zk2kraft()
    if code != 0:
        ctx.failures.append(f"zk2kraft controller exited {code}: {cluster.zk2kraft_output()[-500:]}")
        return
    result = commands.finalize(_target(ctx), yes=True)
    ctx.console.print(f"{result.state_before} → [bold]{result.state_after}[/bold]: {escape(result.message)}")
    if result.state_after != "MigrationFinalized":
        ctx.failures.append(f"finalize ended in {result.state_after}")
        return
    t0 = time.perf_counter()
    node = cluster.start_kafka_controller()
    node.wait_for_log(r"Completed transition to Leader", timeout=120)
    traffic.wait_acked(40)
    status = kafka_tool("kafka-metadata-quorum", "--bootstrap-server", cluster.bootstrap, "describe", "--status",
                        check=False).stdout  # fmt: skip
    lead = next(
        (ln.split(":", 1)[1].strip() for ln in status.splitlines() if ln.startswith("LeaderId:")), "?"
    )
    ctx.console.print(
        f"Kafka {KAFKA_VERSION}'s own KRaft controller (node.id {CONTROLLER_ID}, the same port) started on the "
        f"directory in {time.perf_counter() - t0:.1f}s and leads the quorum (kafka-metadata-quorum: LeaderId "
        f"{lead}); the brokers follow it and the producer goes on."
    )
    if lead != str(CONTROLLER_ID):
        ctx.failures.append(f"kafka-metadata-quorum names leader {lead}, not {CONTROLLER_ID}")


def run_real_verdict(ctx: DemoContext) -> None:
    """The clients' side: every message acknowledged during the migration was consumed, once, in order."""
    _cluster, traffic = _real(ctx)
    traffic.stop()
    produced, consumed, lost = traffic.tally()
    verdict = traffic.verdict()
    colour = "green" if lost == 0 and verdict is None else "red"
    ctx.console.print(
        f"[bold {colour}]{produced} messages produced during the migration, {consumed} consumed, {lost} lost[/]"
    )
    if lost or verdict is not None:
        ctx.failures.append(f"the clients lost messages: {verdict or f'{lost} lost'}")


def cleanup_real(ctx: RealDemo, keep: bool) -> None:
    """Stop the clients, Kafka and zk2kraft (by pid), then ZooKeeper and the files."""
    if ctx.traffic is not None:
        ctx.traffic.stop(timeout=30)
    for handler in list(CLIENT_LOG.handlers):
        CLIENT_LOG.removeHandler(handler)
        handler.close()
    if ctx.kafka is not None:  # Kafka and zk2kraft never outlive the demo, even with --keep
        ctx.kafka.close()
    cleanup(ctx, keep)


REAL: list[tuple[str, Callable[[DemoContext], None]]] = [
    (title, guarded(run))
    for title, run in [
        (
            "Start ZooKeeper and three Kafka brokers in ZooKeeper mode, a producer and a consumer",
            start_zookeeper_and_brokers,
        ),  # fmt: skip
        ("Pre-flight check", run_check),
        ("Plan the copy (dry run)", run_plan),
        (
            "Migrate: zk2kraft's controller, the brokers restarted with the migration settings, the copy",
            run_real_migrate,
        ),  # fmt: skip
        ("A partition leader killed during dual-write", run_real_failover),
        ("Admin changes through a broker during dual-write", run_real_admin),
        ("Status", run_status),
        ("Audit: ZooKeeper against the log", run_audit),
        ("Restart the brokers one by one as KRaft brokers (runbook phase 3)", run_real_kraft_restarts),
        ("Finalize and hand over to Kafka's own KRaft controller", run_real_finalize),
        ("The clients: produced, consumed, lost", run_real_verdict),
    ]
]
