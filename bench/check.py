"""The pre-flight checks on a large cluster: `checks.check_zk_view` over 2,000 topics x 100 partitions.

The view of tests/test_check.py (`big_view`: 30 brokers, an offline partition per topic, an
unregistered replica broker, topics without ids), built in memory; each run times the checks alone
and reports the best and the median against the target of a few seconds for 200,000 partitions
(5 s, on the 2-core machine this project is built on).

    .venv/bin/python bench/check.py [--topics 2000] [--partitions 100] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from test_check import big_view  # noqa: E402

from migrator.migration import checks  # noqa: E402
from migrator.model import ZkControlState  # noqa: E402

TARGET_S = 5.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=2000)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    image, tree = big_view(args.topics, args.partitions)
    took = []
    for _ in range(args.runs):
        started = time.perf_counter()
        found = checks.check_zk_view(image, ZkControlState(controller_epoch=5), tree)
        took.append(time.perf_counter() - started)
    n = args.topics * args.partitions
    best, median = min(took), statistics.median(took)
    print(
        f"check_zk_view on {n:,} partitions: best {best:.2f} s, median {median:.2f} s "
        f"({n / best:,.0f} partitions/s), {len(found)} findings; "
        f"target < {TARGET_S:.0f} s for 200,000: {'met' if median < TARGET_S else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
