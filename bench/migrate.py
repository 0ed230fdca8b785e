"""Claim + copy of a 200,000-partition cluster end to end, and Kafka's batching beside it.

    .venv/bin/python bench/migrate.py                        # 200,000 partitions (2,000 topics x 100)
    .venv/bin/python bench/migrate.py --partitions 20000     # quick
    .venv/bin/python bench/migrate.py --against /tmp/main    # baseline: another checkout's code

Starts its own ZooKeeper (zk_fixtures.server.ZkServer) in a temporary directory, writes a Kafka cluster
with zk_fixtures.generator.load_cluster and registers its brokers (live sessions), then runs
`zk2kraft migrate --json` in its own process (its peak RSS is the client's, from wait4): pre-flight
check, claim, copy, first sync. Then, in the same run after a `rollback`, the baseline: the same
command with the pre-flight read never reused (the copy reads ZooKeeper again after the claim). One
table gives both side by side: the whole command, the dark window (claim -> DualWriteMetadata), the
client's peak RSS and every phase, with the ratio baseline / ours.

Side by side in the same run, on the same records: the append as zk2kraft does it (batches of 10,000
records, one fsync each, as the QuorumController cuts them) and as Kafka's migration driver commits
(a durable commit per BufferingBatchConsumer flush of at least 200 records, KAFKA-16216): the copy's
time is driven by its number of commits (reference §8).
"""

from __future__ import annotations

import argparse
import os
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
from migrator.kraft.batch_encode import encode_record_batches  # noqa: E402
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


# The baseline's one difference: the copy never reuses the pre-flight read and reads ZooKeeper again.
REREAD = (
    "import migrator.zk.migration_client as m; "
    "m.MigrationClient.refresh = lambda self, tree, own: (own.stop(), 'bench baseline: not reused')[1]"
)
VARIANTS = [("one read", None), ("re-read (baseline)", REREAD)]
# A loaded 2-core machine starves the sessions' pings while 2M znodes are parsed: the server's maximum
# (20 ticks of 2 s) keeps them alive
ZK_TIMEOUT = ["--zk-timeout", "40"]


def bench_cluster(partitions: int, per_topic: int) -> ClusterSpec:
    """The migrate benches' cluster: 30 brokers in 3 racks, `per_topic` partitions a topic, one deletion."""
    return ClusterSpec(
        brokers=30,
        racks=3,
        topics=max(1, partitions // per_topic),
        partitions=per_topic,
        legacy_topics=0,
        reassignments=0,
        offline_partitions=0,
        pending_deletions=1,
    )


def migrate_in_process(
    zk: str, log_dir: Path, patch: str | None, tree: Path = ROOT
) -> tuple[results.MigrateResult, float]:
    """`zk2kraft migrate --json` in a process of its own, run from the checkout `tree`; (its result,
    its peak RSS in GB)."""
    code = (patch + "; " if patch else "") + "from cli.main import entry; entry()"
    args = ["migrate", "--yes", "--brokers-from-zk", "-z", zk, "-l", str(log_dir), "--json", *ZK_TIMEOUT]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *args], stdout=out, stderr=err, cwd=tree, env=env
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(
                f"migrate failed (exit {proc.returncode}): {err.read().decode().strip()[-2000:]}"
            )
        result = results.MigrateResult.model_validate_json(out.read())
    assert result.state_after == "DualWriteMetadata" and result.manifest is not None
    return result, usage.ru_maxrss / 1024 / 1024


def rollback(zk: str, log_dir: Path) -> bool:
    run = subprocess.run(
        [sys.executable, "-c", "from cli.main import entry; entry()", "rollback", "--yes", "-z", zk, "-l", str(log_dir), *ZK_TIMEOUT],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    if run.returncode != 0:
        print(f"rollback failed (exit {run.returncode}), no baseline this run: {run.stderr.strip()[-600:]}")
    return run.returncode == 0


def phases(result: results.MigrateResult) -> list[tuple[str, float]]:
    """The run's phases in order, and "other": what no phase accounts for (facts between phases)."""
    t, m = result.timings, result.manifest
    assert m is not None
    rows = [
        ("pre-flight (read + checks)", t.get("preflight", 0.0)),
        ("claim", t["claim"]),
        ("copy: read again, or reuse check; decode", m.read_seconds),
        ("copy: build records", m.build_seconds),
        ("copy: append (thread, overlaps build)", m.append_seconds),
        ("copy: the log's image after the commit", t.get("replay", 0.0)),
        ("first sync: reconcile", t.get("reconcile", 0.0)),
        ("first sync: records", t.get("sync", 0.0)),
        ("--listen: the service's image, activation", t.get("activation", 0.0)),
        ("after the window: the commit's snapshot", t.get("snapshot", 0.0)),
    ]
    # the append runs on its own thread while records are built: the copy's wall time counts once
    accounted = sum(v for n, v in rows if not n.startswith("copy:")) + t.get("copy", m.duration_seconds)
    accounted += t.get("replay", 0.0)
    return [*rows, ("other", t["total"] - accounted)]


def print_phases(runs: list[tuple[str, results.MigrateResult, float]]) -> None:
    """One table: each variant's whole command, dark window, peak RSS and phases; baseline / ours."""
    width = 42
    print(
        f"  {'':<{width}} "
        + " ".join(f"{n:>19}" for n, _, _ in runs)
        + f" {'baseline/ours':>14}"[: 15 * (len(runs) > 1)]
    )
    table = [
        ("whole `migrate` (s)", [r.timings["total"] for _, r, _ in runs]),
        ("dark window (s)", [r.timings["dark_window"] for _, r, _ in runs]),
        ("client peak RSS (GB)", [rss for _, _, rss in runs]),
    ]
    per_run = [phases(r) for _, r, _ in runs]
    table += [(name, [p[i][1] for p in per_run]) for i, (name, _) in enumerate(per_run[0])]
    for name, values in table:
        ratio = f"{values[-1] / values[0]:.2f}x" if values[0] > 0.005 and len(values) > 1 else "-"
        print(f"  {name:<{width}} " + " ".join(f"{v:>19.2f}" for v in values) + f" {ratio:>14}")


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so the finally below stops the server
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=200_000)
    parser.add_argument("--per-topic", type=int, default=100, help="partitions per topic")
    parser.add_argument("--runs", type=int, default=3, help="runs of the side-by-side append")
    parser.add_argument(
        "--baseline-first",
        action="store_true",
        help="run the baseline first (the first run after loading meets a busier ZooKeeper: swap to see it)",
    )
    parser.add_argument(
        "--against",
        type=Path,
        help="a checkout to run as the baseline instead of the re-read (e.g. an extract of main with "
        "its built extension): the same command, its code, the same ZooKeeper",
    )
    args = parser.parse_args()
    variants: list[tuple[str, str | None, Path]] = [(n, p, ROOT) for n, p in VARIANTS]
    if args.against is not None:
        variants = [(VARIANTS[0][0], None, ROOT), (f"baseline {args.against.name}", None, args.against)]

    with tempfile.TemporaryDirectory(prefix="zk2kraft-bench-") as tmp:
        server = ZkServer(Path(tmp) / "zk", jvm_opts=["-Xmx2g"]).start()
        try:
            client = connect(server.connect_string, timeout=30.0)
            spec = bench_cluster(args.partitions, args.per_topic)
            t0 = time.perf_counter()
            generated = load_cluster(client, spec)
            print(
                f"loaded {generated.znodes_written:,} znodes ({generated.image.partition_count():,} partitions) "
                f"in {time.perf_counter() - t0:.1f}s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus"
            )
            sessions = BrokerSessions(server.connect_string, generated.image, generated.control).start()
            runs: list[tuple[str, results.MigrateResult, float]] = []
            try:
                # The command as operators run it, in its own process: its peak RSS is the client's alone
                # (this process also holds the generator's image of the cluster). Then the baseline in
                # the same run: the same command with the pre-flight read never reused (the copy reads
                # ZooKeeper again after the claim), after a rollback gives ZooKeeper back.
                order = variants[::-1] if args.baseline_first else variants
                for i, (name, patch, tree) in enumerate(order):
                    log_dir = Path(tmp) / f"meta-{i}"
                    load_before = os.getloadavg()[0]
                    result, rss_gb = migrate_in_process(server.connect_string, log_dir, patch, tree)
                    runs.append((name, result, rss_gb))
                    print(
                        f"{name}: whole {result.timings['total']:.2f}s, dark window "
                        f"{result.timings['dark_window']:.2f}s, peak RSS {rss_gb:.2f} GB; load average "
                        f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after",
                        flush=True,
                    )
                    print_phases(runs[-1:])
                    if i < len(order) - 1 and not rollback(server.connect_string, log_dir):
                        break
            finally:
                sessions.close()
            if len(runs) > 1:
                print_phases(sorted(runs, key=lambda r: r[0] != VARIANTS[0][0]))  # ours first, baseline last
            m = runs[0][1].manifest
            assert m is not None
            # Encode alone, on the same records and as append encodes them (encode_record_batches).
            layout, _, _ = read_zk_image(client)
            records = migration_records(layout.image)
            t1 = time.perf_counter()
            encode_record_batches(records, 1, 0, DEFAULT_MAX_BATCH_RECORDS, MAX_BATCH_BYTES)
            encode_s = time.perf_counter() - t1
            print(
                f"copy: {m.records:,} records ({m.topics:,} topics, {m.partitions:,} partitions, "
                f"{m.bytes / 1e6:.1f} MB, {m.batches} batches); encode alone {encode_s:.2f}s"
            )
            # The read the first sync and the copy no longer make (they use the pre-flight's), timed here.
            t2 = time.perf_counter()
            read_tree(client)
            print(
                f"  (a fresh ZooKeeper read, which `migrate` now makes once: {time.perf_counter() - t2:.2f}s)"
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
