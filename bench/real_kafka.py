"""Failover and the clients' dark window with three real Kafka 3.9 brokers, under three controllers in one run.

    .venv/bin/python bench/real_kafka.py                  # 3 kills under each controller, 20,000 quota entities
    .venv/bin/python bench/real_kafka.py --repeat 5 --quotas 50000

One cluster (zk_fixtures.kafka_cluster: brokers 1-3, heap 320m, Kafka 3.9.2, a topic of 3 partitions with
replication factor 3 and min.insync.replicas=2) and one idempotent acks=all producer (confluent-kafka,
`--rate` numbered messages a second) go through the runbook in order:

- (a) ZooKeeper mode: Kafka's own ZooKeeper-mode controller (one of the brokers);
- (b) dual-write: the brokers rolled with the migration settings toward `zk2kraft controller` (its own
  process, default --session-timeout-ms 9000), the copy committed;
- (c) after the handover: the brokers rolled to KRaft mode, `zk2kraft finalize`, Kafka's own KRaft
  controller on the directory (broker.session.timeout.ms 9000, Kafka's default).

Measures:

- **failover**: `kill -9` of the leader of partition 0 (under (a) a broker that is not the controller, so
  that only the broker fails over, as under (b) and (c) where the controller is its own process); the
  time from the kill until the producer's next acknowledged message on a partition the victim led. The
  victim restarts (same mode) and every ISR is full again before the next kill. Median of `--repeat`.
- **dark window seen by clients**: ZooKeeper is polled every 10 ms for the copy's window (from the
  claim of /controller by the KRaft controller until /migration carries the copy's offset); the p99
  of librdkafka's produce-to-ack latency for the messages acknowledged in that window (widened to
  `--window` seconds around it when shorter, so that it holds enough messages), against the p99 of
  the `--baseline` seconds of steady traffic before the first roll. `--quotas` client-quota entities
  in ZooKeeper (copied as ClientQuotaRecords, nothing for the brokers to host) make the copy long
  enough to see.

One line per measure: `<measure>: … ratio …, goal …: met|MISSED`.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from migrator.zk.connection import close, connect  # noqa: E402
from zk_fixtures.kafka import kafka_tool  # noqa: E402
from zk_fixtures.kafka_cluster import (  # noqa: E402
    CLIENT_LOG,
    RealCluster,
    Traffic,
    isr_full,
    leaders,
    wait_leaders,
    wait_listening,
)
from zk_fixtures.server import ZkServer  # noqa: E402

TOPIC = "bench"


def say(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.1f}] {line}", file=sys.stderr, flush=True)


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else float("nan")


def latencies_between(traffic: Traffic, start: float, end: float) -> list[float]:
    """librdkafka's produce-to-ack latency of each message acknowledged between `start` and `end`."""
    return [lat for at, lat in list(traffic.acked_at) if start <= at <= end]


def zk_controller(zk_connect: str) -> int:
    zk = connect(zk_connect)
    try:
        return int(json.loads(zk.get("/controller")[0])["brokerid"])
    finally:
        close(zk)


def failover(
    cluster: RealCluster, traffic: Traffic, restart_props: object, spare_controller: bool, repeat: int
) -> list[float]:
    """`repeat` kills of a partition leader; each the time until the producer's next ack on its partitions."""
    out: list[float] = []
    for i in range(repeat):
        now = leaders(cluster.bootstrap, TOPIC)
        avoid = zk_controller(cluster.zk_connect) if spare_controller else -1
        candidates = sorted({lead for lead, _isr in now.values() if lead not in (avoid, -1)}) or sorted(
            {lead for lead, _isr in now.values() if lead != -1}
        )  # every partition led by the ZooKeeper-mode controller: it is the victim, said below
        victim = next((now[p][0] for p in sorted(now) if now[p][0] in candidates), candidates[0])
        led = {p for p, (lead, _isr) in now.items() if lead == victim}
        traffic.wait_acked(50)
        killed, from_n = time.monotonic(), traffic.sent
        cluster.nodes[victim].kill()
        acked = traffic.first_ack_after(killed, led, from_n, timeout=180)
        out.append(acked - killed)
        survivors = ",".join(f"127.0.0.1:{cluster.ports[b]}" for b in cluster.ids if b != victim)
        wait_leaders(survivors, TOPIC, lambda ls, led=led, v=victim: all(ls[p][0] not in (v, -1) for p in led),
                     "new leaders", 120)  # fmt: skip
        note = " (the ZooKeeper-mode controller itself)" if victim == avoid else ""
        say(
            f"  kill {i + 1}/{repeat}: broker {victim}{note} (led {sorted(led)}): next ack after {acked - killed:.2f}s"
        )
        cluster.start_broker(victim, restart_props(victim))  # type: ignore[operator]
        isr_full(cluster.bootstrap, TOPIC, timeout=180)
        traffic.wait_acked(100)
    return out


class CopyWindow(threading.Thread):
    """Polls ZooKeeper every 10 ms: when the KRaft controller claims /controller, and when /migration
    carries the copy's offset (the claim-to-commit window of `migrate`)."""

    def __init__(self, zk_connect: str) -> None:
        super().__init__(daemon=True)
        self.zk_connect = zk_connect
        self.claimed = float("nan")
        self.copied = float("nan")
        self.done = threading.Event()

    def run(self) -> None:
        zk = connect(self.zk_connect)
        try:
            while not self.done.is_set():
                now = time.monotonic()
                ctl = zk.exists("/controller") and json.loads(zk.get("/controller")[0])
                if math.isnan(self.claimed) and ctl and ctl.get("kraftControllerEpoch", -1) >= 0:
                    self.claimed = now
                mig = zk.exists("/migration") and json.loads(zk.get("/migration")[0])
                if not math.isnan(self.claimed) and mig and mig.get("kraft_metadata_offset", -1) >= 0:
                    self.copied = time.monotonic()
                    return
                time.sleep(0.01)
        finally:
            close(zk)


def write_quotas(zk_connect: str, n: int) -> None:
    """`n` client-quota entities as Kafka writes them (/config/clients/<id>): copied, hosted by nobody."""
    zk = connect(zk_connect)
    try:
        zk.ensure_path("/config/clients")
        body = json.dumps({"version": 1, "config": {"producer_byte_rate": "1048576"}}).encode()
        for start in range(0, n, 500):
            tx = zk.transaction()
            for i in range(start, min(n, start + 500)):
                tx.create(f"/config/clients/bench-client-{i}", body)
            tx.commit()
    finally:
        close(zk)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="kills under each controller")
    parser.add_argument("--rate", type=float, default=100.0, help="producer messages a second")
    parser.add_argument("--quotas", type=int, default=20000, help="client-quota entities the copy carries")
    parser.add_argument(
        "--baseline", type=float, default=30.0, help="seconds of steady traffic for the p99 before"
    )
    parser.add_argument(
        "--window", type=float, default=2.0, help="the copy's window widened to at least this"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="zk2kraft-bench-real-"))
    (work / "kafka").mkdir()
    CLIENT_LOG.addHandler(logging.FileHandler(work / "kafka" / "clients.log"))  # librdkafka's lines
    CLIENT_LOG.propagate = False
    server = ZkServer(work / "zookeeper").start()
    zk_connect = server.connect_string + "/kafka"
    cluster = RealCluster(work / "kafka", zk_connect)
    traffic: Traffic | None = None
    started = time.monotonic()
    loads = [os.getloadavg()[0]]
    try:
        for bid in cluster.ids:
            cluster.nodes[bid].props = cluster.zk_props(bid, migrating=False)
            cluster.nodes[bid].start()
        for bid in cluster.ids:
            cluster.nodes[bid].wait_listening("PLAINTEXT", 180)
        kafka_tool("kafka-topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", TOPIC,
                   "--partitions", "3", "--replication-factor", "3", "--config", "min.insync.replicas=2")  # fmt: skip
        write_quotas(zk_connect, args.quotas)
        traffic = Traffic(cluster.bootstrap, TOPIC, rate=args.rate).start()
        traffic.wait_acked(200)
        isr_full(cluster.bootstrap, TOPIC)
        say(
            f"ZooKeeper-mode cluster up, {args.quotas} quota entities; {args.baseline:.0f}s of steady traffic"
        )
        t0 = time.monotonic()
        time.sleep(args.baseline)
        before = latencies_between(traffic, t0, time.monotonic())

        say("(a) Kafka's ZooKeeper-mode controller: kills")
        a = failover(cluster, traffic, lambda b: cluster.zk_props(b, migrating=False), True, args.repeat)
        loads.append(os.getloadavg()[0])

        say("rolling the brokers with the migration settings toward zk2kraft")
        cluster.start_zk2kraft()
        wait_listening(cluster.controller_port, cluster.controller)  # eligible before the first broker stops
        window = CopyWindow(zk_connect)
        window.start()
        for bid in cluster.ids:
            node = cluster.nodes[bid]
            node.stop()
            cluster.start_broker(bid, cluster.zk_props(bid, migrating=True))
            isr_full(cluster.bootstrap, TOPIC, timeout=180)
        window.join(180)
        window.done.set()
        copy_s = window.copied - window.claimed
        centre = (window.claimed + window.copied) / 2
        half = max(copy_s, args.window) / 2
        traffic.wait_acked(200)
        during = latencies_between(traffic, centre - half, centre + half)
        say(f"copy window {copy_s:.2f}s ({len(during)} acks in the {2 * half:.2f}s window)")
        for bid in cluster.ids:
            cluster.nodes[bid].wait_for_log(
                r"LeaderAndIsr request correlationId \d+ from controller 3000", 120
            )

        say("(b) zk2kraft in dual-write: kills")
        b = failover(cluster, traffic, lambda b: cluster.zk_props(b, migrating=True), False, args.repeat)
        loads.append(os.getloadavg()[0])

        say("rolling the brokers to KRaft mode, finalize, Kafka's own KRaft controller")
        for bid in cluster.ids:
            since = cluster.nodes[bid].log_size()
            cluster.nodes[bid].stop()
            cluster.start_broker(bid, cluster.kraft_props(bid))
            cluster.nodes[bid].wait_for_log(rf"BrokerLifecycleManager id={bid}\] The broker has been unfenced",
                                            since=since, timeout=180)  # fmt: skip
            isr_full(cluster.bootstrap, TOPIC, timeout=180)
        assert cluster.stop_zk2kraft() == 0, cluster.zk2kraft_output()[-2000:]
        done = subprocess.run(
            [sys.executable, "-c", "from cli.main import entry; entry()", "finalize", "--yes", "-z", zk_connect,
             "-l", str(cluster.log_dir)], capture_output=True, text=True, cwd=ROOT,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        cluster.start_kafka_controller().wait_for_log(r"Completed transition to Leader", timeout=180)
        traffic.wait_acked(200)

        say("(c) Kafka's own KRaft controller: kills")
        c = failover(cluster, traffic, cluster.kraft_props, False, args.repeat)
        loads.append(os.getloadavg()[0])
        traffic.stop()
        verdict = traffic.verdict()
    finally:
        if traffic is not None:
            traffic.stop(timeout=30)
        cluster.close()
        server.stop()
        print(f"files (Kafka's logs, clients.log, zk2kraft.log) left in {work}", file=sys.stderr)

    ma, mb, mc = statistics.median(a), statistics.median(b), statistics.median(c)
    ok1, ok2 = mb <= ma, mb <= 1.5 * mc
    fmt = ", ".join
    print(
        f"failover (kill -9 of a leader -> next ack), median of {args.repeat}: (a) ZooKeeper-mode controller "
        f"{ma:.2f}s [{fmt(f'{x:.2f}' for x in a)}], (b) zk2kraft dual-write {mb:.2f}s [{fmt(f'{x:.2f}' for x in b)}], "
        f"(c) Kafka KRaft controller {mc:.2f}s [{fmt(f'{x:.2f}' for x in c)}]; b/a {mb / ma:.2f} (goal <= 1: "
        f"{'met' if ok1 else 'MISSED'}), b/c {mb / mc:.2f} (goal <= 1.5: {'met' if ok2 else 'MISSED'})"
    )
    pb, pd = p99(before), p99(during)
    print(
        f"dark window (producer p99 produce-to-ack): before the copy {pb * 1000:.1f} ms ({len(before)} acks), "
        f"during the copy {pd * 1000:.1f} ms ({len(during)} acks, copy {copy_s:.2f}s, window {2 * half:.2f}s); "
        f"ratio {pd / pb:.2f} (goal <= 2: {'met' if pd <= 2 * pb else 'MISSED'})"
    )
    print(
        f"run: {time.monotonic() - started:.0f}s, load average {', '.join(f'{x:.1f}' for x in loads)} "
        f"(start, after a, b, c); clients' verdict: {verdict or 'every acknowledged message read once'}"
    )


if __name__ == "__main__":
    main()
