"""Claim + copy of a 200,000-partition cluster end to end, and Kafka's batching beside it.

    .venv/bin/python bench/migrate.py                        # 200,000 partitions (2,000 topics x 100)
    .venv/bin/python bench/migrate.py --partitions 20000     # quick

Starts its own ZooKeeper (zk_fixtures.server.ZkServer) in a temporary directory, writes a Kafka cluster
with zk_fixtures.generator.load_cluster and registers its brokers (live sessions), then runs
`zk2kraft migrate --json` in its own process (its peak RSS is the client's): pre-flight check, claim, copy, first
sync. It prints the claim + copy time the target is about and its phases (ZooKeeper read, record
build, encode, append), then the rest of the run (pre-flight, reconcile, sync).

Side by side in the same run, on the same records: the append as zk2kraft does it (batches of 10,000
records, one fsync each, as the QuorumController cuts them) and as Kafka's migration driver commits
(a durable commit per BufferingBatchConsumer flush of at least 200 records, KAFKA-16216): the copy's
time is driven by its number of commits (reference §8).
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from migrator import results  # noqa: E402
from migrator.kraft.batch import encode_record_batches  # noqa: E402
from migrator.kraft.log import DEFAULT_MAX_BATCH_RECORDS, MAX_BATCH_BYTES, MetadataLog  # noqa: E402
from migrator.kraft.records import record  # noqa: E402
from migrator.migration.copy import migration_records, read_zk_image  # noqa: E402
from migrator.zk.connection import close, connect  # noqa: E402
from migrator.zk.reader import read_tree  # noqa: E402
from zk_fixtures.brokers import BrokerSessions  # noqa: E402
from zk_fixtures.generator import ClusterSpec, load_cluster  # noqa: E402
from zk_fixtures.server import ZkServer  # noqa: E402

KAFKA_MIN_BATCH = 200  # zookeeper.metadata.migration.min.batch.size (KAFKA-16216)
OURS = 10_000  # QuorumController.MAX_RECORDS_PER_BATCH


def append_in(log_dir: Path, cluster_id: str, records: list, per_commit: int) -> tuple[float, int]:
    """Append `records` inside a transaction, one durable commit per `per_commit` records."""
    with MetadataLog.open(log_dir, writable=True, cluster_id=cluster_id, node_id=3000) as log:
        t0 = time.perf_counter()
        log.append([record("BeginTransactionRecord", 0, Name="ZK Migration")], 1)
        commits = 1
        for i in range(0, len(records), per_commit):
            log.append(records[i : i + per_commit], 1)
            commits += 1
        log.append(
            [record("ZkMigrationStateRecord", 0, ZkMigrationState=1), record("EndTransactionRecord", 0)], 1
        )
        return time.perf_counter() - t0, commits + 1


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so the finally below stops the server
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=200_000)
    parser.add_argument("--per-topic", type=int, default=100, help="partitions per topic")
    parser.add_argument("--runs", type=int, default=3, help="runs of the side-by-side append")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="zk2kraft-bench-") as tmp:
        server = ZkServer(Path(tmp) / "zk", jvm_opts=["-Xmx2g"]).start()
        try:
            client = connect(server.connect_string, timeout=30.0)
            spec = ClusterSpec(
                brokers=30,
                racks=3,
                topics=max(1, args.partitions // args.per_topic),
                partitions=args.per_topic,
                legacy_topics=0,
                reassignments=0,
                offline_partitions=0,
                pending_deletions=1,
            )
            t0 = time.perf_counter()
            generated = load_cluster(client, spec)
            print(
                f"loaded {generated.znodes_written:,} znodes ({generated.image.partition_count():,} partitions) "
                f"in {time.perf_counter() - t0:.1f}s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus"
            )
            sessions = BrokerSessions(server.connect_string, generated.image, generated.control).start()
            try:
                log_dir = Path(tmp) / "meta"
                # The command as operators run it, in its own process: its peak RSS is the client's alone
                # (this process also holds the generator's image of the cluster).
                run = subprocess.run(
                    [sys.executable, "-c", "from cli.main import entry; entry()", "migrate", "--yes",
                     "--brokers-from-zk", "-z", server.connect_string, "-l", str(log_dir), "--json"],
                    capture_output=True, text=True, cwd=ROOT, check=False,
                )  # fmt: skip
                if run.returncode != 0:
                    raise SystemExit(f"migrate failed (exit {run.returncode}): {run.stderr.strip()}")
                result = results.MigrateResult.model_validate_json(run.stdout)
                client_rss_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 / 1024
            finally:
                sessions.close()
            m = result.manifest
            assert m is not None and result.state_after == "DualWriteMetadata"
            t = result.timings
            # Encode alone, on the same records and as append encodes them (encode_record_batches), to
            # split the append into encode and write + fsync.
            layout, _, _ = read_zk_image(client)
            records = migration_records(layout.image)
            t1 = time.perf_counter()
            encode_record_batches(records, 1, 0, DEFAULT_MAX_BATCH_RECORDS, MAX_BATCH_BYTES)
            encode_s = time.perf_counter() - t1
            claim_copy = t["claim"] + m.duration_seconds
            print(
                f"claim + copy: {claim_copy:.2f}s for {m.records:,} records ({m.topics:,} topics, "
                f"{m.partitions:,} partitions, {m.bytes / 1e6:.1f} MB, {m.batches} batches)"
            )
            print(
                f"  claim {t['claim']:.2f}s | ZooKeeper read {m.read_seconds:.2f}s | build records "
                f"{m.build_seconds:.2f}s | append {m.append_seconds:.2f}s (encode {encode_s:.2f}s, "
                f"write + fsync {max(0.0, m.append_seconds - encode_s):.2f}s)"
            )
            print(
                f"rest of `migrate`: pre-flight check {t.get('preflight', 0):.2f}s, reconcile "
                f"{t.get('reconcile', 0):.2f}s ({len(result.repairs)} repairs), sync {t.get('sync', 0):.2f}s; "
                f"whole command {t['total']:.2f}s"
            )
            # One table, one run: the whole command, the dark window (claim -> DualWriteMetadata: the
            # controller answers only registrations and heartbeats) and every phase; "other" is what no
            # phase accounts for (reading the log's and ZooKeeper's state between phases, formatting).
            phases = [
                ("pre-flight (read + checks)", t.get("preflight", 0.0)),
                ("claim", t["claim"]),
                ("copy: ZooKeeper read", m.read_seconds),
                ("copy: build records", m.build_seconds),
                ("copy: append", m.append_seconds),
                ("first sync: reconcile", t.get("reconcile", 0.0)),
                ("first sync: records", t.get("sync", 0.0)),
            ]
            other = t["total"] - sum(v for _, v in phases)
            width = max(len(n) for n, _ in phases)
            print(f"  {'whole `migrate`':<{width}} {t['total']:7.2f}s")
            print(f"  {'client peak RSS':<{width}} {client_rss_gb:7.2f} GB  (the migrate process)")
            print(
                f"  {'dark window':<{width}} {t['dark_window']:7.2f}s  ({t['dark_window'] / t['total']:.0%} of the whole)"
            )
            for name, v in [*phases, ("other", other)]:
                print(f"  {name:<{width}} {v:7.2f}s  ({v / t['total']:.0%})")
            # The read the first sync no longer makes (it diffs against the copy's read), timed here.
            t2 = time.perf_counter()
            read_tree(client)
            print(
                f"  (a fresh ZooKeeper read, which the first sync now skips: {time.perf_counter() - t2:.2f}s)"
            )
            ours: list[float] = []
            kafka: list[float] = []
            for run in range(1, args.runs + 1):
                a, ca = append_in(Path(tmp) / f"ours-{run}", generated.image.cluster_id or "x", records, OURS)
                b, cb = append_in(
                    Path(tmp) / f"kafka-{run}", generated.image.cluster_id or "x", records, KAFKA_MIN_BATCH
                )
                ours.append(a)
                kafka.append(b)
                print(
                    f"run {run}: append in {OURS:,}-record batches {a:.2f}s ({ca} commits), in {KAFKA_MIN_BATCH}-record commits {b:.2f}s ({cb} commits)"
                )
            o, k = statistics.median(ours), statistics.median(kafka)
            print(
                f"median of {args.runs}: {OURS:,}-record batches {o:.2f}s, Kafka's {KAFKA_MIN_BATCH}-record "
                f"commits {k:.2f}s, ratio {k / o:.1f}x; load average {os.getloadavg()[0]:.1f}"
            )
            close(client)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
