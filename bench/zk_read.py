"""Bulk reader vs kazoo's pipelined get_async, side by side on one Kafka-shaped tree.

    .venv/bin/python bench/zk_read.py                      # 200,000 partitions, 3 runs each
    .venv/bin/python bench/zk_read.py --partitions 20000   # quick

Starts its own ZooKeeper (zk_fixtures.server.ZkServer) in a temporary directory, writes a Kafka
cluster with zk_fixtures.generator.load_cluster (exactly the znodes Kafka writes: about 2 per
partition and 3 per topic, plus brokers' configs, ACLs, quotas, ...), then alternates the two readers
on the same session and prints znodes/s per run, the medians and their ratio. Both read the same
roots and must produce the same znodes.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kazoo.client import KazooClient  # noqa: E402

from migrator.zk.connection import close, connect  # noqa: E402
from migrator.zk.reader import BulkReader  # noqa: E402
from zk_fixtures.generator import ClusterSpec, load_cluster  # noqa: E402
from zk_fixtures.server import ZkServer  # noqa: E402

CHUNK = 10_000  # baseline: requests issued before the first reply is gathered


def baseline(client: KazooClient, roots: list[str]) -> dict[str, bytes | None]:
    """The plain kazoo way: breadth first, get_async on a level's nodes, then get_children_async on
    those with children, up to CHUNK requests issued before their replies are gathered."""
    out: dict[str, bytes | None] = {}
    level = roots
    while level:
        parents = []
        for start in range(0, len(level), CHUNK):
            chunk = level[start : start + CHUNK]
            results = [client.get_async(p) for p in chunk]
            for path, result in zip(chunk, results, strict=True):
                data, stat = result.get()
                out[path] = data
                if stat.numChildren:
                    parents.append(path)
        level = []
        for start in range(0, len(parents), CHUNK):
            chunk = parents[start : start + CHUNK]
            results = [client.get_children_async(p) for p in chunk]
            for path, result in zip(chunk, results, strict=True):
                prefix = "/" if path == "/" else path + "/"
                level.extend(prefix + name for name in result.get())
    return out


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so the finally below stops the server
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=200_000)
    parser.add_argument("--per-topic", type=int, default=100, help="partitions per topic")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="zk2kraft-bench-") as tmp:
        server = ZkServer(tmp, jvm_opts=["-Xmx2g"]).start()
        try:
            client = connect(server.connect_string, timeout=30.0)
            started = time.perf_counter()
            spec = ClusterSpec(
                brokers=30,
                racks=3,
                topics=max(1, args.partitions // args.per_topic),
                partitions=args.per_topic,
            )
            written = load_cluster(client, spec).znodes_written
            load_s = time.perf_counter() - started
            roots = sorted("/" + c for c in client.get_children("/") if c != "zookeeper")
            print(f"loaded {written:,} znodes with load_cluster in {load_s:.1f}s; roots {' '.join(roots)}")
            print(f"load average before the runs {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")

            bulk_rates: list[float] = []
            base_rates: list[float] = []
            bulk_cpu_rates: list[float] = []  # znodes per second of this process's CPU time
            base_cpu_rates: list[float] = []
            for run in range(1, args.runs + 1):
                reader = BulkReader(client, roots, method="auto")
                t0, c0 = time.perf_counter(), time.process_time()
                tree = reader.read()
                bulk_s, bulk_cpu = time.perf_counter() - t0, time.process_time() - c0
                t0, c0 = time.perf_counter(), time.process_time()
                plain = baseline(client, roots)
                base_s, base_cpu = time.perf_counter() - t0, time.process_time() - c0
                if set(plain) != set(tree.nodes) or any(plain[p] != tree.nodes[p].data for p in plain):
                    raise SystemExit("the two readers disagree")
                n = len(tree)
                bulk_rates.append(n / bulk_s)
                base_rates.append(n / base_s)
                bulk_cpu_rates.append(n / bulk_cpu)
                base_cpu_rates.append(n / base_cpu)
                st = reader.stats
                print(
                    f"run {run}: {n:,} znodes  bulk {bulk_s:6.2f}s {n / bulk_s:>9,.0f}/s "
                    f"({st.method}, {st.requests:,} requests, consistent={tree.consistent}, "
                    f"{n / bulk_cpu:,.0f}/CPU-s)  "
                    f"kazoo get_async {base_s:6.2f}s {n / base_s:>8,.0f}/s ({n / base_cpu:,.0f}/CPU-s)"
                )
            bulk, base = statistics.median(bulk_rates), statistics.median(base_rates)
            print(f"load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")
            print(
                f"median of {args.runs}: bulk reader {bulk:,.0f} znodes/s, kazoo get_async {base:,.0f} znodes/s, "
                f"ratio {bulk / base:.1f}x"
            )
            bulk_c, base_c = statistics.median(bulk_cpu_rates), statistics.median(base_cpu_rates)
            print(
                f"per second of this process's CPU time: bulk reader {bulk_c:,.0f}, kazoo get_async {base_c:,.0f}, "
                f"ratio {bulk_c / base_c:.1f}x"
            )
            close(client)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
