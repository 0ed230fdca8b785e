"""Kafka 3.9's own migrating KRaft controller and zk2kraft's, side by side on the same ZooKeeper data.

    .venv/bin/python bench/kafka_side_by_side.py                      # 20,000 then 200,000 partitions
    .venv/bin/python bench/kafka_side_by_side.py --partitions 20000   # one size

For each size, one generated ZK-mode cluster (zk_fixtures.generator, 6 brokers, RF 3, 100 partitions a
topic, the same seed) is written into a fresh ZooKeeper server for each controller, so both migrate
the same data from the same start: (a) zk2kraft (`zk2kraft migrate --follow --listen`, its own
process), (b) Kafka 3.9.2's KRaft controller (zk_fixtures.kafka_migration, `kafka-storage format`
with ZooKeeper's cluster id, the migration flag; heap -Xmx1g -Xms1g as kafka-server-start.sh gives a
controller). The brokers are zk2kraft's simulated ZooKeeper-mode brokers (zk_fixtures.broker_sim, with
their inter-broker listener), registering as migrating brokers with whichever controller runs; they
are started with the controller, as the runbook's brokers are already rolled when it starts.

Measured the same way for both, by watching ZooKeeper every 20 ms from this process:

- **time to MIGRATION**: from the controller process's start until `/migration` carries the copy's
  offset (both write it once the copy's transaction is committed, ZkMigrationState MIGRATION);
- **dark window**: from the claim of `/controller` (a persistent znode with kraftControllerEpoch)
  until `/migration` carries that offset (no metadata change is accepted in between);
- **controller peak RSS**: VmHWM of the controller's process (the JVM, or zk2kraft's Python);
- **dual-write throughput**: for `--seconds`, each simulated leader sends AlterPartition v3 ISR
  shrinks and expansions for the partitions it leads (`--batch` a request, the next when the last is
  answered); changes accepted divided by the time from the first request until ZooKeeper's state
  znodes hold every leader's last change;
  The controller's CPU (user + system, /proc/PID/stat) over the load divided by the changes is
  printed under it; it includes the controller's background work meanwhile (heartbeats, timers, a
  JVM's collector and compiler), which a slower run spreads over fewer changes;
- **leader change to a ZK broker**: a controlled shutdown of the broker leading most partitions (its
  heartbeat asks to shut down); the time until another ZK-mode broker's metadata cache, built from the
  controller's LeaderAndIsr, names a new leader for one of its partitions.

Each measure prints as `<measure>: zk2kraft X, Kafka Y, Kafka/zk2kraft R` (R > 1: zk2kraft ahead; for
throughput R is zk2kraft/Kafka so that R > 1 still means zk2kraft ahead).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kazoo.client import KazooClient  # noqa: E402

from migrator.controller.protocol import messages as M  # noqa: E402
from migrator.zk.connection import close, connect  # noqa: E402
from zk_fixtures.broker_sim import BrokerSimulator  # noqa: E402
from zk_fixtures.brokers import BrokerSessions  # noqa: E402
from zk_fixtures.generator import ClusterSpec, GeneratedCluster, load_cluster  # noqa: E402
from zk_fixtures.kafka import free_ports  # noqa: E402
from zk_fixtures.kafka_migration import controller_address, migration_controller  # noqa: E402
from zk_fixtures.server import ZkServer  # noqa: E402
from zk_fixtures.simulated_broker import listeners_of  # noqa: E402

BROKERS = 6
PER_TOPIC = 100


@dataclass
class Run:
    name: str
    to_migration: float = float("nan")
    dark_window: float = float("nan")
    rss_gb: float = float("nan")
    changes: int = 0
    throughput: float = float("nan")
    leader_change: float = float("nan")
    cpu_per_change_us: float = float("nan")  # controller CPU (user + system) during the load / changes
    listening: float = float("nan")  # process start -> controller listener accepts connections
    claim: float = float("nan")  # process start -> /controller claimed
    notes: list[str] = field(default_factory=list)


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process and its threads so far (/proc/PID/stat), seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def vm_hwm_gb(pid: int) -> float:
    """Peak resident set (VmHWM) of a live process, GiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024 / 1024
    return float("nan")


def wait_until(check: Callable[[], object], timeout: float, what: str, every: float = 0.02) -> object:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def claimed(zk: KazooClient) -> bool:
    node = zk.exists("/controller")
    if node is None or node.ephemeralOwner != 0:
        return False
    return json.loads(zk.get("/controller")[0]).get("kraftControllerEpoch", -1) >= 0


def migrated(zk: KazooClient) -> bool:
    if zk.exists("/migration") is None:
        return False
    return json.loads(zk.get("/migration")[0]).get("kraft_metadata_offset", -1) >= 0


def spec_for(partitions: int) -> ClusterSpec:
    return ClusterSpec(
        brokers=BROKERS,
        racks=3,
        topics=max(1, partitions // PER_TOPIC),
        partitions=PER_TOPIC,
        legacy_topics=0,
        reassignments=0,
        offline_partitions=0,
        pending_deletions=0,
        tokens=0,
    )


def start_zookeeper_with(
    base: Path, spec: ClusterSpec
) -> tuple[ZkServer, KazooClient, GeneratedCluster, BrokerSessions]:
    server = ZkServer(base / "zk", jvm_opts=["-Xmx2g"]).start()
    zk = connect(server.connect_string, timeout=30.0)
    generated = load_cluster(zk, spec)
    sessions = BrokerSessions(server.connect_string, generated.image, generated.control).start()
    return server, zk, generated, sessions


def simulator(address: tuple[str, int], connect_string: str, generated: GeneratedCluster) -> BrokerSimulator:
    """The simulated ZK-mode brokers, heartbeating on their own thread; no background rounds (their
    full ZooKeeper re-read each round would load the machine both controllers share)."""
    listeners, racks = listeners_of(generated.image)
    sim = BrokerSimulator(
        address, connect_string, generated.image.cluster_id or "", sorted(generated.image.brokers),
        racks=racks, listeners=listeners, interval_s=0.5, inter_broker=True, own_timeout_s=30.0,
    )  # fmt: skip
    sim.start()
    sim.pause()
    stop = threading.Event()
    sim._bench_stop = stop  # type: ignore[attr-defined]

    def beat() -> None:
        while not stop.wait(0.5):
            try:
                sim.heartbeats()
            except Exception:  # noqa: BLE001 - a controller not up yet: the next beat retries
                pass

    threading.Thread(target=beat, daemon=True, name="bench-heartbeats").start()
    return sim


def stop_simulator(sim: BrokerSimulator) -> None:
    sim._bench_stop.set()  # type: ignore[attr-defined]
    sim.stop()


def alter_load(sim: BrokerSimulator, zk: KazooClient, seconds: float, batch: int) -> tuple[int, float]:
    """ISR shrink/expand from every leader for `seconds`; (changes accepted, seconds until ZooKeeper
    holds every leader's last change, from the first request)."""
    views = sim.refresh()
    by_leader: dict[int, list] = {}
    for v in views.values():
        if v.leader in sim.brokers and len(v.replicas) >= 2:
            by_leader.setdefault(v.leader, []).append(v)
    accepted = [0]
    last: dict[int, tuple[str, int, list[int]]] = {}
    lock = threading.Lock()
    t0 = time.monotonic()
    end = t0 + seconds

    def one_leader(leader: int, parts: list) -> None:
        b = sim.brokers[leader]
        i = 0
        while time.monotonic() < end:
            chunk = [parts[(i + k) % len(parts)] for k in range(min(batch, len(parts)))]
            i += len(chunk)
            topics: dict = {}
            for v in chunk:
                isr = (
                    [v.leader, next(r for r in v.replicas if r != v.leader)]
                    if len(v.isr) == len(v.replicas)
                    else list(v.replicas)
                )
                members = [M.BrokerState(r, sim.brokers[r].epoch if r in sim.brokers else -1) for r in isr]
                topics.setdefault(v.topic_id, M.AlterPartitionTopic(None, v.topic_id, [])).partitions.append(
                    M.AlterPartitionPartition(v.partition, v.leader_epoch, members, v.partition_epoch)
                )
            resp = b.send_alter_partition(M.AlterPartitionRequest(leader, b.epoch, list(topics.values())))
            if resp is None:
                continue
            views_by = {(v.topic_id, v.partition): v for v in chunk}
            for t in resp.topics:
                for p in t.partitions:
                    v = views_by.get((t.topic_id, p.partition_index))
                    if v is None:
                        continue
                    if p.error_code == 0:
                        v.isr, v.partition_epoch, v.leader_epoch = (
                            list(p.isr),
                            p.partition_epoch,
                            p.leader_epoch,
                        )
                        with lock:
                            accepted[0] += 1
                            last[leader] = (v.topic, v.partition, list(p.isr))

    threads = [threading.Thread(target=one_leader, args=(b, ps)) for b, ps in by_leader.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    def zk_caught_up() -> bool:
        for topic, partition, isr in last.values():
            state = json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")[0])
            if state["isr"] != isr:
                return False
        return True

    wait_until(zk_caught_up, 600, "ZooKeeper to hold the last AlterPartition of every leader", every=0.05)
    return accepted[0], time.monotonic() - t0


def leader_change(sim: BrokerSimulator, zk: KazooClient) -> float:
    """A controlled shutdown of one leader: seconds until another broker's LeaderAndIsr cache names a
    new leader for one of its partitions."""
    views = sim.refresh()
    leader = max(sim.brokers, key=lambda b: sum(1 for v in views.values() if v.leader == b))
    v = next(v for v in views.values() if v.leader == leader and len(v.isr) >= 2)
    other = next(r for r in v.isr if r != leader)
    cache = sim.caches[other]
    t0 = time.monotonic()
    # Kafka's broker: PENDING_CONTROLLED_SHUTDOWN, every heartbeat asks wantShutDown (the simulator's
    # heartbeat round too), and after shouldShutDown it sends nothing more (SimBroker.heartbeat).
    sim.brokers[leader].heartbeat(want_shut_down=True)

    def moved() -> bool:
        with cache.lock:
            got = cache.partitions.get(v.key)
        if got is None or got.leader == leader:
            sim.brokers[leader].heartbeat()
            return False
        return True

    wait_until(moved, 120, f"broker {other} to learn the new leader of {v.key}")
    return time.monotonic() - t0


def profile_during(pid: int, out: Path, seconds: float) -> subprocess.Popen[bytes]:
    """py-spy (every thread, native frames off) on the controller for the AlterPartition load: collapsed
    stacks in `out` (flamegraph.pl or speedscope read them)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return subprocess.Popen(
        [spy, "record", "-p", str(pid), "-d", str(int(seconds) + 2), "-r", "200", "-f", "raw", "-o", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def measure(
    name: str,
    base: Path,
    spec: ClusterSpec,
    seconds: float,
    batch: int,
    profile: Path | None = None,
    root: Path = ROOT,
) -> Run:
    """One controller's run; `root` is the zk2kraft checkout to run (a baseline's, for before/after)."""
    run = Run(name)
    server, zk, generated, sessions = start_zookeeper_with(base, spec)
    proc: subprocess.Popen[bytes] | None = None
    node = None
    sim = None
    try:
        print(
            f"  {name}: {generated.image.partition_count():,} partitions loaded; load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        t0 = time.monotonic()
        if name == "kafka":
            node = migration_controller(
                base / "kafka", server.connect_string, generated.image.cluster_id or "", heap="1g"
            )
            t0 = time.monotonic()
            node.start()
            pid = node.proc.pid  # type: ignore[union-attr]
            node.wait_listening("CONTROLLER", 180)
            address = controller_address(node)
        else:
            (port,) = free_ports(1)
            args = ["migrate", "--yes", "--follow", "--listen", f"127.0.0.1:{port}", "-z", server.connect_string,
                    "-l", str(base / "meta"), "--broker-wait-timeout", "600"]  # fmt: skip
            proc = subprocess.Popen(
                [sys.executable, "-c", "from cli.main import entry; entry()", *args],
                cwd=root, stdout=subprocess.DEVNULL, stderr=open(base / "zk2kraft.err", "wb"),  # noqa: SIM115
            )  # fmt: skip
            pid = proc.pid
            address = ("127.0.0.1", port)
            wait_until(lambda: _listens(address) or proc.poll() is not None, 180, "zk2kraft's listener")
        run.listening = time.monotonic() - t0
        sim = simulator(address, server.connect_string, generated)
        wait_until(lambda: claimed(zk), 1800, "the claim of /controller")
        t_claim = time.monotonic()
        run.claim = t_claim - t0
        wait_until(lambda: migrated(zk), 3600, "/migration with the copy's offset")
        t_done = time.monotonic()
        run.to_migration, run.dark_window = t_done - t0, t_done - t_claim
        print(
            f"  {name}: MIGRATION after {run.to_migration:.2f}s, dark window {run.dark_window:.2f}s",
            flush=True,
        )
        time.sleep(3)  # dual-write settles (Kafka: KRAFT_CONTROLLER_TO_BROKER_COMM then DUAL_WRITE)
        spy = profile_during(pid, profile, seconds) if profile is not None and name != "kafka" else None
        cpu0 = cpu_seconds(pid)
        run.changes, took = alter_load(sim, zk, seconds, batch)
        run.cpu_per_change_us = (cpu_seconds(pid) - cpu0) / max(1, run.changes) * 1e6
        if spy is not None:
            spy.wait(seconds + 120)
        run.throughput = run.changes / took
        print(f"  {name}: {run.changes:,} AlterPartition changes in ZooKeeper after {took:.2f}s", flush=True)
        run.leader_change = leader_change(sim, zk)
        run.rss_gb = vm_hwm_gb(pid)
        if node is not None:
            run.notes += [ln[:200] for ln in node.error_lines()[:3]]
    finally:
        if sim is not None:
            stop_simulator(sim)
        if node is not None:
            node.stop()
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        sessions.close()
        close(zk)
        server.kill()
    return run


def _listens(address: tuple[str, int]) -> bool:
    import socket

    try:
        with socket.create_connection(address, timeout=0.5):
            return True
    except OSError:
        return False


def line(measure_name: str, ours: float, kafka: float, unit: str, higher_is_better: bool = False) -> str:
    ratio = (ours / kafka if higher_is_better else kafka / ours) if ours and kafka else float("nan")
    return f"{measure_name}: zk2kraft {ours:.2f}{unit}, Kafka {kafka:.2f}{unit}, Kafka/zk2kraft {ratio:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, action="append", help="default: 20000 and 200000")
    parser.add_argument("--seconds", type=float, default=10.0, help="AlterPartition load per controller")
    parser.add_argument("--batch", type=int, default=50, help="partitions per AlterPartition request")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another zk2kraft checkout (e.g. `git worktree add DIR main`, its _speedups built or copied) "
        "measured in the same run: before/after figures side by side",
    )
    parser.add_argument("--no-kafka", action="store_true", help="zk2kraft only (profiling)")
    parser.add_argument(
        "--profile", type=Path, help="py-spy's collapsed stacks of zk2kraft's load, DIR/NAME.txt"
    )
    args = parser.parse_args()
    sizes = args.partitions or [20_000, 200_000]
    print(f"Kafka 3.9.2 vs zk2kraft, {BROKERS} brokers; {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}")
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    nan = Run("kafka (not run)")
    for size in sizes:
        spec = spec_for(size)

        def one(name: str, root: Path = ROOT, size: int = size, spec: ClusterSpec = spec) -> Run:
            spy = None if args.profile is None else args.profile / f"{name}-{size}.txt"
            with tempfile.TemporaryDirectory(prefix="zk2kraft-side-") as tmp:
                return measure(name, Path(tmp) / "run", spec, args.seconds, args.batch, spy, root)

        ours = one("zk2kraft")
        before = one("zk2kraft-baseline", args.baseline) if args.baseline is not None else None
        kafka = nan if args.no_kafka else one("kafka")
        print(
            f"{size:,} partitions ({spec.topics:,} topics x {PER_TOPIC}, RF 3), load {os.getloadavg()[0]:.1f}:"
        )
        measures = [
            ("time to MIGRATION", "to_migration", " s", False),
            ("  of which start to listening", "listening", " s", False),
            ("  of which start to claim", "claim", " s", False),
            ("dark window", "dark_window", " s", False),
            ("controller peak RSS", "rss_gb", " GiB", False),
            ("dual-write AlterPartition to ZooKeeper", "throughput", "/s", True),
            ("  controller CPU per change", "cpu_per_change_us", " us", False),
            ("leader change to a ZK broker", "leader_change", " s", False),
        ]
        for title, attr, unit, higher in measures:
            text = "  " + line(title, getattr(ours, attr), getattr(kafka, attr), unit, higher)
            if higher:
                text += "  (Kafka/zk2kraft here is zk2kraft/Kafka: > 1 means zk2kraft ahead)"
            print(text)
            if before is not None:
                print(f"      baseline zk2kraft ({args.baseline}): {getattr(before, attr):.2f}{unit}")
        for note in kafka.notes:
            print(f"  Kafka logged: {note}")


if __name__ == "__main__":
    main()
