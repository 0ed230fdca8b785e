"""`zk2kraft demo`: the embedded default — a local ZooKeeper, a generated Kafka cluster, the migration.

Each phase prints a short story with its timing and where to look next, so a newcomer sees what an
operator would do on a real cluster. Everything runs on loopback and is cleaned up afterwards.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from cli import render
from cli.demo_kraft import run_kraft_restarts
from migrator import commands
from migrator.commands import ClientSecurity
from migrator.errors import ZkKraftError
from zk_fixtures.broker_sim import BrokerSimulator
from zk_fixtures.brokers import BrokerSessions
from zk_fixtures.generator import ClusterSpec, GeneratedCluster
from zk_fixtures.server import ZkServer
from zk_fixtures.simulated_broker import listeners_of
from zk_fixtures.tls_certs import make_certs

#: Short, so the demo shows a crashed broker fenced within seconds (Kafka's default is 9 s).
SESSION_TIMEOUT_MS = 3000

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
    rollback: bool = False
    audit: bool = True
    secure: bool = False  # TLS + SASL + ACLs on the controller listener, certificates made for the run
    tls_ca: str = ""
    server: ZkServer | None = None
    connect: str = ""
    cluster: GeneratedCluster | None = None
    brokers: BrokerSessions | None = None
    controller: commands.RunningController | None = None
    admin_security: ClientSecurity | None = None  # how `admin` logs in to the listener (--secure)
    simulator: BrokerSimulator | None = None
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


def _target(ctx: DemoContext) -> commands.Target:
    return commands.Target(zookeeper=ctx.connect, log_dir=_log_dir(ctx))


def generate_cluster(ctx: DemoContext) -> None:
    assert ctx.server is not None
    # the chroot /kafka is created first
    ctx.cluster = commands.fixtures_load(_target(ctx), ClusterSpec.checked(seed=ctx.seed, **DEMO_SPEC))
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
    from cli.check_cmd import render as render_check

    result = commands.check(commands.Target(zookeeper=ctx.connect))
    render_check(result, ctx.console)
    if result.exit_code != 0:
        ctx.failures.append(f"check exited {result.exit_code}")
    ctx.console.print(
        f"Next: on a real cluster, run [bold]zk2kraft check --zookeeper {escape(ctx.connect)}[/bold] "
        "(add --broker-config DIR to check each broker's server.properties); every code is in docs/checks.md."
    )


def _log_dir(ctx: DemoContext) -> str:
    return str(ctx.workdir / "kraft-metadata")


def _secure_listener(ctx: DemoContext) -> ClientSecurity:
    """Listener settings for --secure (as a controller.properties would give them) and the brokers' side."""
    certs = make_certs(ctx.workdir / "tls")
    admin_pw = secrets.token_urlsafe(18)
    ctx.tls_ca = str(certs.ca)
    commands.serve_listeners_with(
        {
            "listener.security.protocol.map": "CONTROLLER:SASL_SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs.server_encrypted),
            "ssl.key.password": certs.key_password,
            "ssl.truststore.location": str(certs.ca),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.controller.plain.sasl.jaas.config": (
                f'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="{admin_pw}";'
            ),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
        }
    )
    return ClientSecurity(
        "SASL_SSL", ssl_cafile=str(certs.ca), sasl_mechanism="PLAIN", username="admin", password=admin_pw
    )


def check_secure_listener(ctx: DemoContext) -> None:
    """After the copy: a migrated SCRAM user logs in, and without CLUSTER_ACTION is refused; a wrong
    password is refused at authentication."""
    assert ctx.cluster is not None and ctx.controller is not None
    passwords = ctx.cluster.secrets.scram_passwords
    if not passwords:
        ctx.failures.append("--secure: the generated cluster has no SCRAM user to log in with")
        return
    (user, mechanism), password = sorted(passwords.items())[0]

    def login(pw: str) -> ClientSecurity:
        return ClientSecurity(
            "SASL_SSL", ssl_cafile=ctx.tls_ca, sasl_mechanism=mechanism, username=user, password=pw
        )

    try:
        code = commands.controller_heartbeat(
            ctx.controller.address, login(password), min(ctx.cluster.image.brokers)
        )
    except ZkKraftError as e:
        ctx.failures.append(f"--secure: the migrated SCRAM user {user} could not log in: {e}")
        return
    try:
        commands.controller_login(ctx.controller.address, login(password + "x"))
        ctx.failures.append("--secure: a wrong SCRAM password was accepted")
    except ZkKraftError:
        pass
    if code != 31:
        ctx.failures.append(f"--secure: {user} without CLUSTER_ACTION got error {code}, not 31")
    ctx.console.print(
        f"  {user} logged in over SASL_SSL with its {mechanism} credential migrated from ZooKeeper; its "
        f"BrokerHeartbeat was refused CLUSTER_AUTHORIZATION_FAILED (no CLUSTER_ACTION ACL), and a wrong "
        "password was refused at authentication."
    )


def run_plan(ctx: DemoContext) -> None:
    result = commands.plan(_target(ctx))
    plan = result.plan
    if plan is None:
        ctx.failures.append(f"plan produced nothing: {result.message}")
        return
    ctx.console.print(
        f"The copy, as a dry run: {plan.records} records in {plan.batches} batches, {plan.bytes:,} bytes, "
        f"about {plan.estimated_seconds:.1f}s. Nothing was written anywhere."
    )
    top = sorted(plan.by_type.items(), key=lambda kv: -kv[1].records)[:6]
    ctx.console.print("  " + ", ".join(f"{name} {n.records}" for name, n in top))


def run_migrate(ctx: DemoContext) -> None:
    assert ctx.cluster is not None
    listen, security = (
        ("CONTROLLER://127.0.0.1:0", _secure_listener(ctx)) if ctx.secure else ("127.0.0.1:0", None)
    )
    running = commands.start_controller(
        _target(ctx).replace(listen=listen),
        yes=True,
        broker_wait_timeout=60,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        say=lambda line: ctx.console.print(f"  {line}"),
    )
    ctx.controller, ctx.admin_security = running, security
    service = running.service
    assert service is not None
    ctx.console.print(
        f"The KRaft controller listens on [bold]{running.connect}[/bold] (Kafka's protocol) in soft start: "
        "it answers broker registrations and heartbeats, nothing else, and waits for every broker."
    )
    if security is not None:
        ctx.console.print(
            "  The listener is SASL_SSL with ACLs: TLS with a certificate made for this run, brokers log in "
            "with SASL/PLAIN as the super user (before the copy the image holds no SCRAM credential yet)."
        )
    ids = sorted(ctx.cluster.image.brokers)
    listeners, racks = listeners_of(ctx.cluster.image)
    sim = BrokerSimulator(
        running.address,
        ctx.connect,
        ctx.cluster.image.cluster_id or "",
        ids,
        racks=racks,
        listeners=listeners,
        interval_s=0.5,
        own_timeout_s=6.0,
        security=security,
        inter_broker=True,
    )
    ctx.simulator = sim
    sim.start()
    epochs = ", ".join(f"{b}@{sim.brokers[b].epoch}" for b in ids)
    ctx.console.print(
        f"{len(ids)} simulated ZK-mode brokers registered over the protocol (id@broker epoch: {epochs})."
    )
    if not running.wait_until(lambda r: not service.soft_start, 120):
        ctx.failures.append(f"the copy did not start: {running.error}")
        return
    service.flush(30)
    if ctx.secure:
        check_secure_listener(ctx)
    report_copy(ctx)


def report_copy(ctx: DemoContext) -> None:
    """What the copy did and where the migration stands (the simulated and the real-Kafka stories)."""
    st = commands.status(_target(ctx))
    m = st.manifest
    covered = (st.migration_znode or {}).get("kraft_metadata_offset")
    ctx.console.print(
        f"Every broker registered, so the copy ran: state [bold]{st.state}[/bold] ({st.kafka_state}). "
        + (
            f"Copied {m.records} records in {m.batches} batches ({m.bytes:,} bytes) in {m.duration_seconds:.2f}s; "
            if m
            else ""
        )
        + f"log end offset {st.log_end_offset}, /migration covers offset {covered}, "
        f"write-behind lag {st.write_behind_lag}."
    )
    ctx.console.print(
        "ZooKeeper is now the write-behind copy of the log: /controller is held by the KRaft controller "
        "(persistent, kraftControllerEpoch set), and every later change reaches ZooKeeper in fenced multis."
    )
    if st.state != "DualWriteMetadata":
        ctx.failures.append(f"migrate ended in {st.state}")


def run_broker_traffic(ctx: DemoContext) -> None:
    """The seeds in action: a broker dies hard, is fenced, reboots with an empty disk and rejoins."""
    sim, running = ctx.simulator, ctx.controller
    if sim is None or running is None or running.service is None:
        ctx.failures.append("no controller or simulated brokers to drive")
        return
    service = running.service
    views = sim.refresh()
    victim = max(sim.brokers, key=lambda b: sum(b in v.isr for v in views.values()))
    in_isr = sum(victim in v.isr for v in views.values())
    led = [v.key for v in views.values() if v.leader == victim]
    broker = sim.brokers[victim]
    broker.crash()
    ctx.console.print(f"Broker {victim} (in {in_isr} ISRs) crashed hard: no more heartbeats, no fetches.")
    t0 = time.perf_counter()
    if not running.wait_until(lambda r: service.image.brokers[victim].fenced, SESSION_TIMEOUT_MS / 1000 + 20):
        ctx.failures.append(f"broker {victim} was not fenced")
        return
    service.flush(30)
    left = sum(victim in v.isr and len(v.isr) > 1 for v in sim.refresh().values())
    ctx.console.print(
        f"After {time.perf_counter() - t0:.1f}s without a heartbeat the controller fenced it (FenceBrokerRecord) "
        f"and took it out of every ISR it shared; ZooKeeper's state znodes followed ({left} left)."
    )

    def leader_of(key: tuple[str, int]) -> int:
        topic = service.image.topics.get(key[0])
        part = None if topic is None else topic.partitions.get(key[1])
        return -2 if part is None else part.leader

    learned, told = sim.learned_leadership(led, victim, leader_of)
    ctx.console.print(f"ZK-mode brokers follow the KRaft controller: {told}.")
    ctx.failures += [] if learned else [f"ZK-mode brokers did not learn new leaders: {told}"]
    old_epoch = broker.epoch
    code = broker.reboot(empty_disk=True)
    ctx.console.print(
        f"It rebooted with an empty disk: new incarnation, broker epoch {old_epoch} → {broker.epoch} "
        f"({commands.kafka_error_name(code)}); it must catch up before any leader may add it back (KIP-903)."
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        service.flush(30)
        back = sum(victim in v.isr for v in sim.refresh().values())
        if back >= in_isr:
            break
        time.sleep(0.5)
    ctx.console.print(
        f"Followers fetched with their epochs and leaders sent AlterPartition v3: broker {victim} is back in "
        f"{back} ISRs ({sim.isr_changes} ISR changes accepted so far"
        + (
            f", refusals {sorted((commands.kafka_error_name(c), n) for c, n in sim.refusals.items())}"
            if sim.refusals
            else ""
        )
        + ")."
    )
    if back < in_isr:
        ctx.failures.append(f"broker {victim} rejoined only {back} of {in_isr} ISRs")


def stop_controller(ctx: DemoContext) -> None:
    """The brokers move on (KRaft mode after finalize, ZooKeeper mode after a rollback): stop both."""
    if ctx.controller is not None:
        ctx.controller.stop()
        ctx.controller = None
    if ctx.simulator is not None:
        ctx.simulator.stop()
        ctx.simulator = None


def run_admin(ctx: DemoContext) -> None:
    AdminChange, AclSpec = commands.AdminChange, commands.AclSpec
    changes = [
        AdminChange(
            kind="create-topic",
            topic="demo-orders",
            partitions=6,
            replication_factor=3,
            configs={"retention.ms": "86400000"},
        ),
        AdminChange(kind="alter-topic-config", topic="demo-orders", configs={"cleanup.policy": "compact"}),
        AdminChange(
            kind="add-acl",
            acl=AclSpec(
                resource_type="TOPIC",
                resource_name="demo-orders",
                principal="User:demo-app",
                operation="WRITE",
            ),
        ),
        AdminChange(
            kind="set-quota", quota_entity={"user": "demo-app"}, quota_values={"producer_byte_rate": 1048576}
        ),
        AdminChange(kind="add-partitions", topic="demo-orders", partitions=12),
    ]
    if ctx.controller is None:
        ctx.failures.append("admin: no controller is running")
        return
    # `zk2kraft admin --bootstrap-controller`: each change is a Kafka request to the listener
    results = commands.admin_many(
        _target(ctx), changes, bootstrap=ctx.controller.connect, security=ctx.admin_security
    )
    for change, result in zip(changes, results, strict=True):
        ctx.console.print(
            f"  {escape(change.describe())}: {escape(result.summary)} [dim]via {escape(result.via)}[/dim]"
        )
    if any(r.path != "protocol" for r in results):
        ctx.failures.append("admin changes did not go through the controller's listener")
    landed = commands.znode_exists(_target(ctx), "/brokers/topics/demo-orders/partitions/11/state")
    ctx.console.print(
        "Each change went to the controller over Kafka's protocol, was appended to the log and carried "
        "to ZooKeeper by the syncer before the answer"
        + (
            " — /brokers/topics/demo-orders/partitions/11/state exists, as ZK-mode brokers expect."
            if landed
            else "."
        )
    )
    if not landed:
        ctx.failures.append("admin changes did not reach ZooKeeper")


def run_status(ctx: DemoContext) -> None:
    st = commands.status(_target(ctx))
    ctx.console.print(
        f"State [bold]{st.state}[/bold] (Kafka {st.kafka_state}), KRaft epoch {st.kraft_epoch}, ZooKeeper controller "
        f"epoch {st.zk_controller_epoch}, log end offset {st.log_end_offset}, write-behind lag {st.write_behind_lag}, "
        f"{len(st.zk_registered_brokers)} brokers registered in ZooKeeper."
    )
    ctx.console.print(f"Next action: {escape(st.next_action)}")
    if st.write_behind_lag != 0:
        ctx.failures.append(f"lag {st.write_behind_lag} after sync")


def run_audit(ctx: DemoContext) -> None:
    if not ctx.audit:
        ctx.console.print("(skipped: --no-audit)")
        return
    report = ctx.workdir / f"audit-{len(ctx.failures)}-{time.monotonic_ns()}.html"
    result = commands.audit(_target(ctx), master="local[2]", report=str(report))
    ctx.console.print(
        f"Audit (phase {result.phase}, Spark {result.master}): [bold]{escape(result.verdict)}[/bold] — "
        f"{result.mismatches} mismatches, {result.expected} expected, {result.informational} informational "
        f"differences, in {result.seconds:.1f}s."
    )
    if result.exit_code != 0:
        ctx.failures.append(f"audit found {result.mismatches} mismatches")


def run_finalize(ctx: DemoContext) -> None:
    service = ctx.controller.service if ctx.controller is not None else None
    all_kraft = service is not None and not any(
        b.is_migrating_zk_broker for b in service.image.brokers.values()
    )
    stop_controller(ctx)
    if ctx.brokers is not None:
        ctx.brokers.close()
        ctx.brokers = None
    if (
        all_kraft
    ):  # finalize itself checks, in the log, that every broker of the copy registered in KRaft mode
        ctx.console.print("Every broker runs in KRaft mode and none is registered in ZooKeeper: finalize.")
    else:
        ctx.console.print("The brokers were rolled to KRaft mode: their ZooKeeper registrations are gone.")
    result = commands.finalize(_target(ctx), yes=True, rehearsal=not all_kraft)
    ctx.console.print(f"{result.state_before} → [bold]{result.state_after}[/bold]: {escape(result.message)}")
    if result.state_after != "MigrationFinalized":
        ctx.failures.append(f"finalize ended in {result.state_after}")


def run_rollback(ctx: DemoContext) -> None:
    stop_controller(ctx)
    result = commands.rollback(_target(ctx), yes=True)
    ctx.console.print(
        f"{result.state_before} → [bold]{result.state_after}[/bold]: /controller and /migration removed, "
        f"/controller_epoch raised to {result.zk_controller_epoch} (above KRaft epoch {result.kraft_epoch}, so "
        "ZK-mode brokers accept the next ZooKeeper controller), the log archived."
    )
    if result.state_after != "MigrationIneligible":
        ctx.failures.append(f"rollback ended in {result.state_after}")


def verify_zookeeper_intact(ctx: DemoContext) -> None:
    """After a rollback, ZooKeeper must hold everything, including the dual-write changes."""
    layout = commands.read_zookeeper(_target(ctx))
    image, control = layout.image, layout.control
    assert ctx.cluster is not None
    expected_topics = set(ctx.cluster.image.topics) | {"demo-orders"}
    missing = sorted(expected_topics - set(image.topics) - set(ctx.cluster.image.pending_deletions))
    ok = not missing and control.controller is None and control.migration is None
    ctx.console.print(
        f"ZooKeeper holds {len(image.topics)} topics and {image.partition_count()} partitions, including the "
        f"dual-write changes; /controller {'absent' if control.controller is None else 'present'}, /migration "
        f"{'absent' if control.migration is None else 'present'}, /controller_epoch {control.controller_epoch}. "
        "ZK-mode brokers can elect a ZooKeeper controller again."
    )
    if not ok:
        ctx.failures.append(f"ZooKeeper not intact after rollback (missing topics: {missing[:5]})")
    run_check(ctx)


def cleanup(ctx: DemoContext, keep: bool) -> None:
    try:
        stop_controller(ctx)
    except Exception as e:  # the demo's verdict is already made; report and go on cleaning up
        ctx.console.print(f"[yellow]stopping the controller: {escape(str(e))}")
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


COMMON: list[tuple[str, Callable[[DemoContext], None]]] = [
    ("Start a local ZooKeeper", start_zookeeper),
    ("Generate a Kafka cluster in ZooKeeper", generate_cluster),
    ("Pre-flight check", run_check),
    ("Plan the copy (dry run)", run_plan),
    ("Migrate: brokers register, claim ZooKeeper, copy into the log, first sync", run_migrate),
    ("Broker traffic during dual-write: a crash, fencing, an empty-disk reboot", run_broker_traffic),
    ("Admin changes during dual-write", run_admin),
    ("Status", run_status),
    ("Audit: ZooKeeper against the log", run_audit),
]
FINALIZE: list[tuple[str, Callable[[DemoContext], None]]] = [
    ("Restart the brokers one by one in KRaft mode (runbook phase 3)", run_kraft_restarts),
    ("Finalize", run_finalize),
    ("Audit after finalize", run_audit),
]
ROLLBACK: list[tuple[str, Callable[[DemoContext], None]]] = [
    ("Roll back to ZooKeeper", run_rollback),
    ("ZooKeeper intact for ZK-mode brokers", verify_zookeeper_intact),
]


@click.command()
@click.option(
    "--simulated",
    is_flag=True,
    help="Simulated brokers (a generated 6-broker cluster) instead of real Kafka 3.9: no Java needed.",
)
@click.option("--seed", default=1, show_default=True, help="Seed of the generated cluster (--simulated).")
@click.option(
    "--rollback", "rollback", is_flag=True, help="End with a rollback instead of finalize (--simulated)."
)
@click.option("--no-audit", is_flag=True, help="Skip the Spark audits (faster).")
@click.option("--keep", is_flag=True, help="Leave ZooKeeper and the files in place afterwards.")
@click.option(
    "--secure",
    is_flag=True,
    help="Serve the controller listener with TLS, SASL (PLAIN, SCRAM) and ACLs; certificates made for the run "
    "(--simulated).",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where to put ZooKeeper's data (default: a fresh temporary directory).",
)
def demo(
    simulated: bool, seed: int, rollback: bool, no_audit: bool, keep: bool, secure: bool, workdir: str | None
) -> None:
    """Run the whole story on a local ZooKeeper: real Kafka 3.9 brokers migrated while clients run.

    Three Kafka 3.9 brokers in ZooKeeper mode (their jars fetched from Maven Central on first use,
    about 60 MB, into ~/.cache/zk2kraft) with an idempotent producer and a consumer group → check →
    plan → migrate (`zk2kraft controller`, brokers restarted with the migration settings) → a leader
    killed with SIGKILL and admin changes through a broker in dual-write → status → audit → brokers
    restarted as KRaft brokers → finalize → Kafka's own KRaft controller takes over → "N messages
    produced during the migration, N consumed, 0 lost". Exits 0 when every phase did what it should,
    1 when one did not (a lost message included), 3 when Java, confluent-kafka or Kafka's jars
    (Maven Central) are missing: --simulated needs none of them.

    With --simulated: a generated 6-broker cluster and brokers simulated over Kafka's protocol, then
    broker traffic and admin changes in dual-write → status → audit → brokers restarted one by one in
    KRaft mode (each one's metadata cache fetched over Raft and equal to the controller's) → finalize
    → audit; with --rollback: … → audit → rollback → ZooKeeper verified intact.

    \b
    Examples:
      zk2kraft demo
      zk2kraft demo --simulated --rollback
    """
    console = render.console()
    if not simulated and (rollback or secure):
        raise click.UsageError("--rollback and --secure run on simulated brokers: add --simulated")
    if not simulated:
        from cli.demo_real import REAL, RealDemo, cleanup_real, prerequisites

        try:
            prerequisites(lambda line: console.print(escape(line)))
        except ZkKraftError as e:
            raise type(e)(f"{e}; `zk2kraft demo --simulated` runs the story without real Kafka") from None
    path = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="zk2kraft-demo-"))
    path.mkdir(parents=True, exist_ok=True)
    settings = dict(
        console=console, workdir=path, seed=seed, rollback=rollback, audit=not no_audit, secure=secure
    )
    ctx = DemoContext(**settings) if simulated else RealDemo(**settings)
    phases = (COMMON + (ROLLBACK if rollback else FINALIZE)) if simulated else REAL
    started = time.perf_counter()
    try:
        for number, (title, run) in enumerate(phases, start=1):
            with phase(ctx, number, title):
                run(ctx)
    finally:
        if simulated:
            cleanup(ctx, keep)
        else:
            cleanup_real(ctx, keep)
        if secure:
            commands.serve_listeners_with({})
    elapsed = time.perf_counter() - started
    if ctx.failures:
        console.print(f"[bold red]demo finished in {elapsed:.1f}s with problems: {'; '.join(ctx.failures)}")
        raise click.exceptions.Exit(1)
    console.print(f"[bold green]demo finished in {elapsed:.1f}s: every phase did what it should.")
