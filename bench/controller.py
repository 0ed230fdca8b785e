"""The controller end to end over TCP: AlterPartition from simulated brokers with dual-write on and off,
over SASL_SSL with authorization against PLAINTEXT, new authenticated connections, and CreateTopics.

    .venv/bin/python bench/controller.py        # 100 brokers, 100,000 partitions, 1,000 x 10 new topics
    .venv/bin/python bench/controller.py --topics 100 --brokers 20 --seconds 5 --create 100   # quick

Starts its own ZooKeeper (zk_fixtures.server), writes a generated ZK-mode cluster (``--brokers``,
``--topics`` x ``--partitions``, RF 3) and holds its brokers' ZooKeeper sessions in a child process
(zk_fixtures.brokers). Then, in order, in one run:

1. **dual-write on**: `migrate --follow --listen` (commands.start_controller) in this process; the
   simulated brokers, threads of ``--procs`` child processes (so their encoding does not share this
   process's GIL), register over TCP, the copy runs, DualWriteMetadata starts. For ``--seconds`` each
   broker sends AlterPartition v3 for the partitions it leads, ``--batch`` partitions per request, the
   next as soon as the last is answered: an ISR shrink (leader + one follower), then an expansion back
   to every replica, and so on. A reply means the change is in the log (fsync); ZooKeeper is written
   behind, and the time it takes to catch up after the last reply is reported beside the rate.
2. **CreateTopics** on the same controller, one client, one request at a time (``--create`` topics of
   ``--create-partitions`` partitions, RF 3, ``--per-request`` topics a request): answered once in the
   log and in ZooKeeper; then as many topics again, ``--batched`` a request (an admin client's
   create_topics with a list). Afterwards ZooKeeper's topic znodes and the log's image are checked.
   Then 1 and 2 again with the controller's propagation to ZooKeeper-mode brokers
   (`controller.zk_brokers.zk_propagator`: LeaderAndIsr/UpdateMetadata after every change) stopped, to show
   what it costs; the simulated brokers' ZooKeeper registrations name hosts that do not resolve, so
   the propagator's work is its own (snapshots and diffs of the image), not the brokers'.
3. **dual-write off**: the migration stops; a ControllerService over the same log (same image, same
   broker registrations, no syncer) serves a PLAINTEXT listener and a SASL_SSL listener
   (SCRAM-SHA-512, StandardAuthorizer; the brokers' principal holds CLUSTER_ACTION). The same load runs
   in alternating rounds on each (``--rounds``); medians are compared.
4. New SASL_SSL connections per second: TCP, TLS handshake, ApiVersions, SCRAM-SHA-512 (4096
   iterations), one at a time from one child process.

With ``--observers N`` (issue 15), after 1: rounds of the same AlterPartition load without and with N
Raft observers (bench/raft_fetch.py's, in a child process) long-polling the controller's metadata log.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from migrator.controller.client.client import ControllerClient  # noqa: E402
from migrator.controller.protocol import messages as M  # noqa: E402
from migrator.controller.security.client_security import ClientSecurity  # noqa: E402

SCRAM_USER = "broker"
SCRAM_PASSWORD = "bench-broker-pw"
MV = 21


# --- the simulated brokers (child processes) ---------------------------------------------------


@dataclass
class Part:
    """What a leader knows of one of its partitions; updated from each AlterPartition answer."""

    topic_id: uuid.UUID
    index: int
    leader_epoch: int
    partition_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclass
class Load:
    """One process's brokers: id -> epoch, and id -> the partitions it leads."""

    epochs: dict[int, int] = field(default_factory=dict)
    parts: dict[int, list[Part]] = field(default_factory=dict)


def _security(secure: dict[str, str] | None) -> ClientSecurity | None:
    if secure is None:
        return None
    return ClientSecurity(
        "SASL_SSL",
        ssl_cafile=secure["ca"],
        sasl_mechanism="SCRAM-SHA-512",
        username=SCRAM_USER,
        password=SCRAM_PASSWORD,
    )


def _register(
    address: tuple[str, int], cluster_id: str, ids: list[int], racks: dict[int, str | None]
) -> dict[int, int]:
    epochs = {}
    for b in ids:
        with ControllerClient(*address, timeout_s=600) as c:
            req = M.BrokerRegistrationRequest(
                b,
                cluster_id,
                uuid.uuid4(),
                [M.Listener("PLAINTEXT", f"sim{b}", 9092)],
                [M.Feature("metadata.version", 1, MV)],
                rack=racks.get(b),
                is_migrating_zk_broker=True,
            )
            resp = c.register_broker(req)
            if resp.error_code != 0:
                raise RuntimeError(f"broker {b} registration: {resp.error_code}")
            epochs[b] = resp.broker_epoch
            hb = c.heartbeat(M.BrokerHeartbeatRequest(b, resp.broker_epoch, resp.broker_epoch))
            if hb.error_code != 0:
                raise RuntimeError(f"broker {b} heartbeat: {hb.error_code}")
    return epochs


def _heartbeat_all(address: tuple[str, int], epochs: dict[int, int], secure: dict[str, str] | None) -> None:
    with ControllerClient(*address, timeout_s=600, security=_security(secure)) as c:
        for b, e in epochs.items():
            hb = c.heartbeat(M.BrokerHeartbeatRequest(b, e, 1 << 40))
            if hb.error_code != 0 or hb.is_fenced:
                raise RuntimeError(f"broker {b} heartbeat: {hb.error_code}, fenced {hb.is_fenced}")


def _next_isr(p: Part, leader: int) -> list[int]:
    if len(p.isr) == len(p.replicas):  # shrink to the leader and one follower
        return [leader] + [r for r in p.replicas if r != leader][:1]
    return [leader] + [r for r in p.replicas if r != leader]  # expand back to every replica


def _alter_loop(
    client: ControllerClient,
    broker: int,
    epochs: dict[int, int],
    parts: list[Part],
    batch: int,
    until: float,
    out: list[tuple[int, int, list[float]]],
) -> None:
    changed = errors = 0
    lat: list[float] = []
    i = 0
    while time.perf_counter() < until and parts:
        chosen = [parts[(i + k) % len(parts)] for k in range(min(batch, len(parts)))]
        i += len(chosen)
        topics: dict[uuid.UUID, M.AlterPartitionTopic] = {}
        wanted: dict[tuple[uuid.UUID, int], Part] = {}
        for p in chosen:
            isr = _next_isr(p, broker)
            members = [M.BrokerState(r, epochs.get(r, -1)) for r in isr]
            topics.setdefault(p.topic_id, M.AlterPartitionTopic(None, p.topic_id, [])).partitions.append(
                M.AlterPartitionPartition(p.index, p.leader_epoch, members, p.partition_epoch)
            )
            wanted[(p.topic_id, p.index)] = p
        t0 = time.perf_counter()
        resp = client.alter_partition(
            M.AlterPartitionRequest(broker, epochs[broker], list(topics.values())), 3
        )
        lat.append(time.perf_counter() - t0)
        if resp.error_code != 0:
            errors += len(chosen)
            continue
        for t in resp.topics:
            for r in t.partitions:
                p = wanted[(t.topic_id, r.partition_index)]  # type: ignore[index]
                if r.error_code != 0:
                    errors += 1
                    continue
                p.isr, p.leader_epoch, p.partition_epoch = list(r.isr), r.leader_epoch, r.partition_epoch
                changed += 1
    out.append((changed, errors, lat))


def _alter(
    address: tuple[str, int], load: Load, batch: int, seconds: float, secure: dict[str, str] | None
) -> tuple[int, int, list[float], float]:
    clients = {b: ControllerClient(*address, timeout_s=600, security=_security(secure)) for b in load.parts}
    out: list[tuple[int, int, list[float]]] = []
    t0 = time.perf_counter()
    until = t0 + seconds
    threads = [
        threading.Thread(target=_alter_loop, args=(clients[b], b, load.epochs, ps, batch, until, out))
        for b, ps in load.parts.items()
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    for c in clients.values():
        c.close()
    lat = [x for _, _, ls in out for x in ls]
    return sum(c for c, _, _ in out), sum(e for _, e, _ in out), lat, wall


def _create(address: tuple[str, int], names: list[str], partitions: int, per_request: int) -> list[float]:
    import datetime

    from kio.schema.create_topics.v7 import request as ct

    lat = []
    with ControllerClient(*address, timeout_s=600) as c:
        for start in range(0, len(names), per_request):
            topics = tuple(
                ct.CreatableTopic(
                    name=n, num_partitions=partitions, replication_factor=3, assignments=(), configs=()
                )
                for n in names[start : start + per_request]
            )
            t0 = time.perf_counter()
            resp = c.call(
                19, 7, ct.CreateTopicsRequest(topics=topics, timeout=datetime.timedelta(seconds=60))
            )
            lat.append(time.perf_counter() - t0)
            bad = [(t.name, int(t.error_code), t.error_message) for t in resp.topics if t.error_code != 0]
            if bad:
                raise RuntimeError(f"CreateTopics refused: {bad[:3]}")
    return lat


def _connections(address: tuple[str, int], secure: dict[str, str], seconds: float) -> float:
    sec = _security(secure)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        ControllerClient(*address, timeout_s=60, security=sec).close()  # ApiVersions + SCRAM on connect
        n += 1
    return n / (time.perf_counter() - t0)


def _child(conn: Connection, cluster_id: str, ids: list[int]) -> None:
    """One process of simulated brokers: runs the parent's commands, answers each with its result."""
    load = Load()
    while True:
        cmd, arg = conn.recv()
        try:
            if cmd == "stop":
                return
            if cmd == "register":
                load.epochs.update(_register(arg[0], cluster_id, ids, arg[1]))
                conn.send(dict(load.epochs))
            elif cmd == "load":  # every broker's epoch (ISR members) and this process's partitions
                load.epochs.update(arg[0])
                load.parts = {b: [Part(*p) for p in arg[1].get(b, [])] for b in ids}
                conn.send(sum(len(v) for v in load.parts.values()))
            elif cmd == "heartbeat":
                address, secure = arg
                _heartbeat_all(address, {b: load.epochs[b] for b in ids}, secure)
                conn.send(True)
            elif cmd == "alter":
                address, batch, seconds, secure = arg
                conn.send(_alter(address, load, batch, seconds, secure))
            elif cmd == "create":
                conn.send(_create(*arg))
            elif cmd == "connections":
                conn.send(_connections(*arg))
        except Exception as e:  # handed to the parent, which stops the run
            conn.send(e)


class Drivers:
    """The simulated brokers' processes, driven in lockstep."""

    def __init__(self, procs: int, cluster_id: str, ids: list[int]) -> None:
        ctx = mp.get_context("spawn")
        self.ids = [ids[i::procs] for i in range(procs)]
        self.pipes: list[Connection] = []
        self.procs = []
        for share in self.ids:
            mine, theirs = ctx.Pipe()
            p = ctx.Process(target=_child, args=(theirs, cluster_id, share), daemon=True)
            p.start()
            self.pipes.append(mine)
            self.procs.append(p)

    def all(self, cmd: str, args: list[Any]) -> list[Any]:
        for pipe, arg in zip(self.pipes, args, strict=True):
            pipe.send((cmd, arg))
        out = [pipe.recv() for pipe in self.pipes]
        for o in out:
            if isinstance(o, Exception):
                raise o
        return out

    def one(self, cmd: str, arg: Any) -> Any:
        self.pipes[0].send((cmd, arg))
        o = self.pipes[0].recv()
        if isinstance(o, Exception):
            raise o
        return o

    def close(self) -> None:
        for pipe in self.pipes:
            pipe.send(("stop", None))
        for p in self.procs:
            p.join(10)


# --- the parent: ZooKeeper, the controller, the figures -----------------------------------------


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000 if s else float("nan")


@dataclass
class AlterRun:
    label: str
    changes: int
    errors: int
    wall: float
    lat: list[float]
    extra: str = ""

    @property
    def rate(self) -> float:
        return self.changes / self.wall

    def line(self) -> str:
        return (
            f"  {self.label:<40} {self.rate:9.0f} changes/s   p50 {_pct(self.lat, 0.5):7.1f} ms"
            f"   p99 {_pct(self.lat, 0.99):7.1f} ms   ({self.changes} changes, {len(self.lat)} requests,"
            f" {self.errors} refused){self.extra}"
        )


def _run_alter(
    drivers: Drivers,
    label: str,
    address: tuple[str, int],
    batch: int,
    seconds: float,
    secure: dict[str, str] | None = None,
) -> AlterRun:
    n = len(drivers.pipes)
    res = drivers.all("alter", [(address, batch, seconds, secure)] * n)
    changes = sum(r[0] for r in res)
    errors = sum(r[1] for r in res)
    lat = [x for r in res for x in r[2]]
    wall = max(r[3] for r in res)
    return AlterRun(label, changes, errors, wall, lat)


def _flush(service: Any) -> str:
    t0 = time.perf_counter()
    caught_up = service.flush(600)
    took = time.perf_counter() - t0
    return f", ZooKeeper caught up {took:.2f} s after the last reply" + (
        "" if caught_up else " (NOT in 600 s)"
    )


def _run_create(
    drivers: Drivers,
    address: tuple[str, int],
    names: list[str],
    args: Any,
    zk: Any,
    service: Any,
    per_request: int | None = None,
) -> str:
    """CreateTopics of `names` one request after the other; then checks ZooKeeper and the log hold them."""
    from migrator.zk import paths as P

    t0 = time.perf_counter()
    per = args.per_request if per_request is None else per_request
    lat = drivers.one("create", (address, names, args.create_partitions, per))
    wall = time.perf_counter() - t0
    in_zk = set(zk.get_children(P.TOPICS))
    zk_topics = [n for n in names if n in in_zk]
    zk_parts = sum(len(json.loads(zk.get(P.topic_path(n))[0])["partitions"]) for n in zk_topics)
    in_log = sum(1 for n in names if n in service.image.topics)
    total = len(names) * args.create_partitions
    return (
        f"{len(names)} topics x {args.create_partitions} partitions: {wall:.1f} s,"
        f" {total / wall:.0f} partitions/s, p50 {_pct(lat, 0.5):.1f} ms, p99 {_pct(lat, 0.99):.1f} ms a request;"
        f" in ZooKeeper {len(zk_topics)} topics / {zk_parts} partitions, in the log {in_log} topics"
    )


def _leaders(image: Any) -> dict[int, list[tuple[Any, ...]]]:
    from migrator.kraft.records import kafka_to_uuid

    out: dict[int, list[tuple[Any, ...]]] = {}
    for t in image.topics.values():
        tid = kafka_to_uuid(t.topic_id)
        for p in t.partitions.values():
            if p.leader >= 0:
                out.setdefault(p.leader, []).append(
                    (tid, p.partition, p.leader_epoch, p.partition_epoch, list(p.replicas), list(p.isr))
                )
    return out


def _observed_rounds(
    drivers: Drivers, address: tuple[str, int], args: Any, service: Any
) -> list[tuple[AlterRun, AlterRun]]:
    """Issue 15: dual-write on, rounds without and with ``--observers`` Raft observers (a child process
    of bench/raft_fetch.py) long-polling the metadata log, alternating so the machine's load hits both."""
    sys.path.insert(0, str(ROOT / "bench"))
    from raft_fetch import attached_observers

    out = []
    for _ in range(args.rounds):
        bare = _run_alter(drivers, "dual-write on, no observers", address, args.batch, args.seconds)
        bare.extra = _flush(service)
        with attached_observers(address, args.observers, args.observers_nice) as obs:
            att = _run_alter(
                drivers, f"dual-write on, {args.observers} observers", address, args.batch, args.seconds
            )
        att.extra = f", {obs.fetches} observer fetches" + _flush(service)
        out.append((bare, att))
    return out


def _print_observed(observed: list[tuple[AlterRun, AlterRun]], n: int) -> None:
    if not observed:
        return
    print(f"AlterPartition with {n} Raft observers long-polling the log (issue 15), alternating rounds:")
    for bare, att in observed:
        print(bare.line())
        print(att.line())
    ratios = sorted(att.rate / bare.rate for bare, att in observed)
    print(
        f"  with / without observers, per round {[round(r, 2) for r in ratios]}, median {ratios[len(ratios) // 2]:.2f}"
    )


def main() -> None:  # noqa: PLR0915 - one run, in order
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--brokers", type=int, default=100)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=100, help="per topic")
    ap.add_argument("--batch", type=int, default=10, help="partitions per AlterPartition request")
    ap.add_argument("--seconds", type=float, default=10.0, help="per AlterPartition round")
    ap.add_argument("--rounds", type=int, default=3, help="PLAINTEXT / SASL_SSL rounds, alternating")
    ap.add_argument("--procs", type=int, default=2, help="processes the simulated brokers run in")
    ap.add_argument("--create", type=int, default=1000, help="topics CreateTopics makes")
    ap.add_argument("--create-partitions", type=int, default=10)
    ap.add_argument("--per-request", type=int, default=1, help="topics per CreateTopics request")
    ap.add_argument(
        "--batched", type=int, default=50, help="topics a request in the second CreateTopics run (0: skip)"
    )
    ap.add_argument(
        "--observers", type=int, default=0, help="also: AlterPartition with N Raft observers long-polling"
    )
    ap.add_argument("--observers-nice", type=int, default=0, help="the observers' process niceness")
    args = ap.parse_args()

    from kazoo.client import KazooClient

    from migrator import commands
    from migrator.controller.network.listener_config import start_listeners
    from migrator.controller.security.scram_server import scram_credential
    from migrator.controller.service import ControllerService
    from migrator.kraft.image import ImageBuilder
    from migrator.kraft.log import MetadataLog
    from migrator.model import Acl
    from migrator.zk import paths as P
    from migrator.zk.connection import close, connect
    from zk_fixtures.generator import ClusterSpec, load_cluster
    from zk_fixtures.server import ZkServer
    from zk_fixtures.tls_certs import make_certs

    tmp = Path(tempfile.mkdtemp(prefix="zk2kraft-bench-controller-"))
    spec = ClusterSpec(
        seed=3,
        brokers=args.brokers,
        racks=3,
        topics=args.topics,
        partitions=args.partitions,
        replication_factor=3,
        topic_configs=0,
        broker_configs=0,
        acls=0,
        quota_users=0,
        quota_clients=0,
        quota_user_clients=0,
        quota_ips=0,
        scram_users=0,
        tokens=0,
        pending_deletions=0,
        reassignments=0,
        offline_partitions=0,
        legacy_topics=0,
        recovering_fraction=0.0,
        shrunk_isr_fraction=0.0,
        epoch_bumps=0,
    )
    server = ZkServer(tmp / "zk").start()
    zk: KazooClient = connect(server.connect_string)
    holder: subprocess.Popen[str] | None = None
    drivers: Drivers | None = None
    running = None
    try:
        t0 = time.perf_counter()
        generated = load_cluster(zk, spec)
        print(
            f"cluster: {args.brokers} brokers, {args.topics * args.partitions} partitions written to"
            f" ZooKeeper in {time.perf_counter() - t0:.1f} s",
            flush=True,
        )
        holder = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "zk_fixtures.brokers",
                "--zookeeper",
                server.connect_string,
                "--spec",
                spec.model_dump_json(),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None
        if holder.stdout.readline().strip() != "ready":
            raise RuntimeError("zk_fixtures.brokers did not get ready")
        ids = sorted(int(b) for b in zk.get_children(P.BROKER_IDS))
        cluster_id = generated.image.cluster_id or ""
        drivers = Drivers(args.procs, cluster_id, ids)
        log_dir = tmp / "log"
        t0 = time.perf_counter()
        running = commands.start_controller(
            server.connect_string,
            str(log_dir),
            yes=True,
            broker_wait_timeout=900,
            session_timeout_ms=3_600_000,
            timeout=120,
        )
        service = running.service
        assert service is not None and running.address is not None
        epochs: dict[int, int] = {}
        racks = {b.id: b.rack for b in generated.image.brokers.values()}  # as in their ZK registrations
        for e in drivers.all("register", [(running.address, racks)] * len(drivers.pipes)):
            epochs.update(e)
        if not running.wait_until(lambda r: service.admin is not None, 1800):
            raise RuntimeError(f"the migration did not reach DualWriteMetadata: {running.error}")
        print(f"migration to DualWriteMetadata: {time.perf_counter() - t0:.1f} s", flush=True)
        with service.lock:
            leaders = _leaders(service.image)
        parts = sum(len(v) for v in leaders.values())
        drivers.all("load", [(epochs, {b: leaders.get(b, []) for b in share}) for share in drivers.ids])

        # 1. dual-write on, the controller as it runs (propagating every change to ZK-mode brokers)
        on = _run_alter(drivers, "dual-write on, PLAINTEXT", running.address, args.batch, args.seconds)
        on.extra = _flush(service)
        observed = _observed_rounds(drivers, running.address, args, service) if args.observers else []

        # 2. CreateTopics, one client
        names = [f"bench-new-{i:05d}" for i in range(args.create)]
        create = _run_create(drivers, running.address, names, args, zk, service)
        create_batched = ""
        if args.batched > 0:  # as an admin client's create_topics([...]) sends them: many a request
            names = [f"bench-batch-{i:05d}" for i in range(args.create)]
            create_batched = _run_create(drivers, running.address, names, args, zk, service, args.batched)

        # 1b, 2b: the same with propagation to ZK-mode brokers stopped, to show what it costs
        if service.zk_propagator is not None:
            service.zk_propagator.stop()
        on_quiet = _run_alter(
            drivers, "dual-write on, no ZK-broker propagation", running.address, args.batch, args.seconds
        )
        on_quiet.extra = _flush(service)
        names = [f"bench-quiet-{i:05d}" for i in range(args.create)]
        create_quiet = _run_create(drivers, running.address, names, args, zk, service)
        config = service.core.config
        epoch = service.epoch
        result = running.stop(120)
        running = None
        if result is None:
            raise RuntimeError("the migration did not stop")

        # 3. dual-write off: the same log, no syncer; PLAINTEXT and SASL_SSL listeners side by side
        certs = make_certs(tmp / "certs")
        secure = {"ca": str(certs.ca)}
        log = MetadataLog.open(str(log_dir), writable=True)
        builder = ImageBuilder(log.load_image().result)
        img = builder.image
        img.scram_credentials[(SCRAM_USER, "SCRAM-SHA-512")] = scram_credential(
            SCRAM_USER, "SCRAM-SHA-512", SCRAM_PASSWORD, uuid.uuid4().bytes, 4096
        )
        img.acls = [
            *img.acls,
            Acl(
                resource_type="CLUSTER",
                resource_name="kafka-cluster",
                pattern_type="LITERAL",
                principal=f"User:{SCRAM_USER}",
                host="*",
                operation="CLUSTER_ACTION",
                permission_type="ALLOW",
                acl_id="bench-broker",
            ),
        ]
        off_service = ControllerService(log, builder, config, epoch, write_behind=False)
        off_service.core.active = True  # no syncer: serve as an active controller without dual-write
        plain = start_listeners(
            off_service, "PLAIN://127.0.0.1:0", {"listener.security.protocol.map": "PLAIN:PLAINTEXT"}
        )
        sasl = start_listeners(
            off_service,
            "SECURE://127.0.0.1:0",
            {
                "listener.security.protocol.map": "SECURE:SASL_SSL",
                "ssl.keystore.location": str(certs.server),
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            },
        )
        try:
            drivers.all("heartbeat", [(plain.address, None)] * len(drivers.pipes))
            with off_service.lock:
                leaders = _leaders(off_service.image)
            drivers.all("load", [(epochs, {b: leaders.get(b, []) for b in share}) for share in drivers.ids])
            offs: list[AlterRun] = []
            secs: list[AlterRun] = []
            for _ in range(args.rounds):
                offs.append(
                    _run_alter(drivers, "dual-write off, PLAINTEXT", plain.address, args.batch, args.seconds)
                )
                secs.append(
                    _run_alter(
                        drivers,
                        "dual-write off, SASL_SSL + ACLs",
                        sasl.address,
                        args.batch,
                        args.seconds,
                        secure,
                    )
                )
            conns = drivers.one("connections", (sasl.address, secure, args.seconds))
        finally:
            plain.stop()
            sasl.stop()
            off_service.stop()
            log.close()

        print(
            f"\nAlterPartition v3 over TCP: {len(ids)} brokers in {args.procs} processes, {parts} partitions,"
            f" {args.batch} partitions a request, {args.seconds:g} s a round"
        )
        print(on.line())
        print(on_quiet.line())
        off = sorted(offs, key=lambda r: r.rate)[len(offs) // 2]
        sec = sorted(secs, key=lambda r: r.rate)[len(secs) // 2]
        print(off.line())
        print(sec.line())
        print(f"  rounds PLAINTEXT {[round(r.rate) for r in offs]}, SASL_SSL {[round(r.rate) for r in secs]}")
        print(
            f"  dual-write on / off {on.rate / off.rate:.2f}; SASL_SSL + ACLs / PLAINTEXT {sec.rate / off.rate:.2f}"
        )
        print(f"new SASL_SSL/SCRAM-SHA-512 connections: {conns:.1f} /s")
        _print_observed(observed, args.observers)
        print(f"CreateTopics v7, one client, {args.per_request} topic(s) a request, RF 3, dual-write on:")
        print(f"  with ZK-broker propagation     {create}")
        if create_batched:
            print(f"  {args.batched} topics a request         {create_batched}")
        print(f"  without ZK-broker propagation  {create_quiet}")
    finally:
        if running is not None:
            running.stop(60)
        if drivers is not None:
            drivers.close()
        if holder is not None:
            holder.terminate()
            holder.wait(30)
        close(zk)
        server.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
