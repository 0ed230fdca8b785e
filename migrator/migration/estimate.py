"""`plan`'s time estimate for each phase of `migrate`, measured on this run's own read of ZooKeeper.

`migrate` reads ZooKeeper three times: the pre-flight (bulk read and checks), the copy (read, build,
append) and the first sync (read again and compare every owned znode with what the log implies).
Estimating the copy alone left out two of them (7.7 s estimated, 40 s wall on 8,000 topics), so the
pre-flight's checks and the first sync's comparison are run here for real, read-only, on the data just
read, and each read is counted at this run's read time.
"""

from __future__ import annotations

import time

from kazoo.client import KazooClient

from migrator.migration import checks
from migrator.migration.zk_diff import ZkCache, deletable, owned, plan, structural
from migrator.model import ControllerZnode, ZkControlState
from migrator.results import CopyPlan, PhaseEstimate
from migrator.zk.migration_client import LayoutResult, ZkTree, read_tree
from migrator.zk.migration_client import layout as zk_layout

__all__ = ["estimate_phases", "read_view"]


def read_view(client: KazooClient) -> tuple[ZkTree, LayoutResult, float]:
    """The bulk read the copy makes, decoded strictly, and how long it took."""
    t0 = time.perf_counter()
    tree = read_tree(client)
    layout = zk_layout.image_from_tree(tree, strict=True)
    return tree, layout, time.perf_counter() - t0


def estimate_phases(tree: ZkTree, layout: LayoutResult, read_seconds: float, copy: CopyPlan) -> PhaseEstimate:
    """Run the pre-flight's checks and the first sync's comparison on `tree` (nothing is written)."""
    t0 = time.perf_counter()
    checks.check_zk_view(layout.image, layout.control, tree, layout.problems)
    check_seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    claim = ZkControlState(
        controller=ControllerZnode(broker_id=3000, kraft_controller_epoch=1, ephemeral=False)
    )
    actual = {p: n.data for p, n in tree.nodes.items() if owned(p) or structural(p)}
    want: dict[str, bytes | None] = {
        p: d for p, d in zk_layout.znodes_from_image(layout.image, claim).items() if owned(p) or structural(p)
    }
    for path in actual:
        if path not in want and deletable(path):
            want[path] = None
    plan(want, ZkCache.of(actual))
    compare_seconds = time.perf_counter() - t1
    preflight = read_seconds + check_seconds
    first_sync = read_seconds + compare_seconds
    return PhaseEstimate(
        preflight_seconds=round(preflight, 3),
        copy_seconds=round(copy.estimated_seconds, 3),
        first_sync_seconds=round(first_sync, 3),
        total_seconds=round(preflight + copy.estimated_seconds + first_sync, 3),
        read_seconds=round(read_seconds, 3),
        check_seconds=round(check_seconds, 3),
        compare_seconds=round(compare_seconds, 3),
    )
