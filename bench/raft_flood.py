"""Heartbeat and AlterPartition latency beside a flood of Raft fetchers (issue 15, deliverable 5).

The setup of tests/test_raft_flood.py (`run_flood`): a real ZooKeeper, a migrated generated cluster, a
controller over TCP with simulated brokers; every broker heartbeats and one AlterPartition shrinks or
grows an ISR, --rounds times before and --rounds times while a separate process holds 200 long-polling
observers, hammers the listener with invalid fetches and opens more connections from one address than
`max.connections.per.ip` allows. The test checks what is answered; this reports how long it took,
against issue 15's target: no stall (max < 2 s) and the flood's median within 4x the quiet one + 50 ms.

    .venv/bin/python bench/raft_flood.py [--rounds 20] [--runs 3]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from test_raft_flood import run_flood  # noqa: E402

from migrator.zk.connection import close, connect  # noqa: E402
from zk_fixtures.server import ZkServer  # noqa: E402

STALL_S = 2.0
RATIO, SLACK_S = 4.0, 0.05


def _ms(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(len(xs) * q))] * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20, help="timed rounds before and during the flood")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    logging.getLogger("zk2kraft").setLevel(logging.ERROR)  # the flood's refusals are expected, by hundreds
    met = True
    with tempfile.TemporaryDirectory(prefix="bench-raft-flood-") as work:
        server = ZkServer(Path(work) / "zk").start()
        try:
            for run_no in range(args.runs):
                chroot = f"/bench-raft-flood-{uuid.uuid4().hex[:8]}"
                root = connect(server.connect_string)
                root.create(chroot)
                zk = connect(server.connect_string + chroot)
                try:
                    tmp = Path(work) / f"run{run_no}"
                    tmp.mkdir()
                    run = run_flood(zk, server.connect_string + chroot, tmp, rounds_each=args.rounds)
                finally:
                    close(zk)
                    root.delete(chroot, recursive=True)
                    close(root)
                quiet, loud = run.quiet, run.loud
                p50q, p50l = statistics.median(quiet), statistics.median(loud)
                ok = max(loud) < STALL_S and p50l <= RATIO * p50q + SLACK_S
                met = met and ok
                print(
                    f"run {run_no + 1}: heartbeat+AlterPartition ms: quiet p50 {p50q * 1000:.1f} "
                    f"p99 {_ms(quiet, 0.99):.1f} max {max(quiet) * 1000:.1f}; flood p50 {p50l * 1000:.1f} "
                    f"p99 {_ms(loud, 0.99):.1f} max {max(loud) * 1000:.1f}; {run.ready}; "
                    f"target (max < {STALL_S:.0f} s, p50 <= {RATIO:.0f}x quiet + {SLACK_S * 1000:.0f} ms) "
                    f"{'met' if ok else 'NOT met'}"
                )
        finally:
            server.stop()
    print("target met in every run" if met else "target not met in at least one run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
