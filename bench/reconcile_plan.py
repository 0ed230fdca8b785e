"""The first sync's plan alone, whole (every desired znode first, as before issue 29) or streamed.

    .venv/bin/python bench/reconcile_plan.py                       # 200,000 partitions, both, twice
    .venv/bin/python bench/reconcile_plan.py --partitions 50000 --mode streamed

A generated image is diffed against ZooKeeper's picture of itself as the copy leaves it (states
written by ZooKeeper's controller epoch, the image's in the KRaft controller's), so the plan finds
nothing to write: what is measured is generating and comparing every znode. Each mode runs in a
process of its own, so its peak RSS above the picture is its own; the modes alternate.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from migrator.migration import zk_stream  # noqa: E402
from migrator.migration.zk_diff import ZkCache, deletable, owned, plan, structural  # noqa: E402
from migrator.model import ControllerZnode, ZkControlState  # noqa: E402
from migrator.zk import layout  # noqa: E402
from zk_fixtures.generator import ClusterSpec, generate  # noqa: E402


def one(mode: str, partitions: int) -> None:
    """Plan once in this process and print its time, ops and peak RSS above the picture."""
    spec = ClusterSpec(
        brokers=30, racks=3, topics=partitions // 100, partitions=100, legacy_topics=0,
        reassignments=0, offline_partitions=0, pending_deletions=1,
    )  # fmt: skip
    g = generate(spec)
    image = g.image
    picture = {
        p: d for p, d in layout.znodes_from_image(image, g.control).items() if owned(p) or structural(p)
    }
    kraft = ZkControlState(
        controller=ControllerZnode(
            json_version=2, broker_id=3000, kraft_controller_epoch=9, is_kraft=True, ephemeral=False
        )
    )
    del g
    gc.collect()
    gc.disable()  # as the reconcile runs (migrator.bulk.without_gc)
    cache = ZkCache.adopt(picture)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if mode == "whole":
        want: dict[str, bytes | None] = dict(layout.znodes_from_image(image, kraft))
        for p in [p for p in want if not (owned(p) or structural(p))]:
            del want[p]
        for path in picture:
            if path not in want and deletable(path):
                want[path] = None
        ops, _changes = plan(want, cache)
        del want
    else:
        ops, _changes = zk_stream.plan_chunks(layout.znode_chunks(image, kraft), cache)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        f"{mode:>8} {partitions:,} partitions: {seconds:.2f}s, {len(ops)} ops, peak RSS "
        f"+{(peak - base) / 1024:.0f} MiB; load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=200_000)
    parser.add_argument("--mode", choices=("whole", "streamed"), help="one mode in this process")
    parser.add_argument("--runs", type=int, default=2, help="alternating runs of each mode")
    args = parser.parse_args()
    if args.mode is not None:
        one(args.mode, args.partitions)
        return
    for _ in range(args.runs):
        for mode in ("whole", "streamed"):
            cmd = [sys.executable, __file__, "--mode", mode, "--partitions", str(args.partitions)]
            subprocess.run(cmd, check=True, cwd=ROOT)


if __name__ == "__main__":
    main()
