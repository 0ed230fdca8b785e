"""A restart of `migrate` after a kill in the middle of the copy, ours beside another checkout's.

    .venv/bin/python bench/restart.py --against /work/main            # 200,000 partitions
    .venv/bin/python bench/restart.py --against /work/main --partitions 20000   # quick

Starts its own ZooKeeper, writes a Kafka cluster (zk_fixtures.generator) with live broker sessions,
then for each checkout: `zk2kraft migrate` killed by SIGKILL at the copy's nth batch
(`ZK2KRAFT_CRASH_AT=copy.batch:<n>`, half of the copy by default), and the restart timed in a process
of its own: it aborts the interrupted copy, moves it below the log start behind a snapshot and copies
again (invariant 2). A rollback between the checkouts gives ZooKeeper back. Issue 29: the restart
replayed the interrupted copy six times; it now replays it once.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.migrate import ZK_TIMEOUT, bench_cluster  # noqa: E402
from migrator import results  # noqa: E402
from migrator.zk.connection import connect  # noqa: E402
from zk_fixtures.brokers import BrokerSessions  # noqa: E402
from zk_fixtures.generator import load_cluster  # noqa: E402
from zk_fixtures.server import ZkServer  # noqa: E402

ENTRY = "from cli.main import entry; entry()"


def zk2kraft(tree: Path, args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, float]:
    """`zk2kraft ARGS` run from checkout `tree` in a process of its own: (exit code, stdout, seconds)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}
    full.update({"PYTHONPATH": str(tree), **(env or {})})
    t0 = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-c", ENTRY, *args], capture_output=True, text=True, cwd=tree, env=full, check=False
    )
    if run.returncode not in (0, -signal.SIGKILL):
        raise SystemExit(
            f"{' '.join(args[:1])} from {tree} failed (exit {run.returncode}): {run.stderr[-2000:]}"
        )
    return run.returncode, run.stdout, time.perf_counter() - t0


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so the finally below stops the server
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=200_000)
    parser.add_argument("--per-topic", type=int, default=100, help="partitions per topic")
    parser.add_argument("--batch", type=int, default=0, help="die after this copy batch (0: half the copy)")
    parser.add_argument("--against", type=Path, required=True, help="the baseline checkout (e.g. /work/main)")
    parser.add_argument("--baseline-first", action="store_true", help="run the baseline first")
    args = parser.parse_args()
    batch = args.batch or max(1, (args.partitions + args.partitions // args.per_topic) // 20_000)
    trees = [("ours", ROOT), (f"baseline {args.against}", args.against)]
    if args.baseline_first:
        trees.reverse()
    with tempfile.TemporaryDirectory(prefix="zk2kraft-restart-") as tmp:
        server = ZkServer(Path(tmp) / "zk", jvm_opts=["-Xmx2g"]).start()
        try:
            client = connect(server.connect_string, timeout=30.0)
            spec = bench_cluster(args.partitions, args.per_topic)
            generated = load_cluster(client, spec)
            print(
                f"{generated.image.partition_count():,} partitions; killed at copy.batch:{batch}; "
                f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus",
                flush=True,
            )
            sessions = BrokerSessions(server.connect_string, generated.image, generated.control).start()
            rows: list[tuple[str, float, float, float, float]] = []
            try:
                for i, (name, tree) in enumerate(trees):
                    cmd = ["-z", server.connect_string, "-l", str(Path(tmp) / f"meta-{i}"), *ZK_TIMEOUT]
                    migrate = ["migrate", "--yes", "--brokers-from-zk", *cmd]
                    code, _, _ = zk2kraft(tree, migrate, {"ZK2KRAFT_CRASH_AT": f"copy.batch:{batch}"})
                    assert code == -signal.SIGKILL, f"{name}: copy.batch:{batch} not reached"
                    load = os.getloadavg()[0]
                    _, out, wall = zk2kraft(tree, [*migrate, "--json"])
                    result = results.MigrateResult.model_validate_json(out)
                    assert result.state_after == "DualWriteMetadata" and result.aborted_transaction, result
                    t = result.timings
                    rows.append((name, wall, t["total"], t["dark_window"], load))
                    print(
                        f"{name}: restart {wall:.2f}s wall ({t['total']:.2f}s in `migrate`, dark window "
                        f"{t['dark_window']:.2f}s); load average {load:.1f} before; phases {t}",
                        flush=True,
                    )
                    if i < len(trees) - 1:
                        zk2kraft(ROOT, ["rollback", "--yes", *cmd])
            finally:
                sessions.close()
            rows.sort(key=lambda r: r[0] != "ours")
            print(f"  {'':<32} {'ours':>10} {'baseline':>10} {'baseline/ours':>14}")
            for j, label in ((1, "restart, wall (s)"), (2, "restart, `migrate` (s)"), (3, "dark window (s)")):
                ours, base = rows[0][j], rows[1][j]
                print(f"  {label:<32} {ours:>10.2f} {base:>10.2f} {base / ours:>13.2f}x")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
