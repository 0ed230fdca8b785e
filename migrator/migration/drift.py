"""ZooKeeper against the log before a rollback: what differs, and the refusal to carry it back silently.

A rollback makes ZooKeeper the source of truth again. If ZooKeeper was changed behind the controller's
back during dual-write (or lost a write), the rollback would keep that version and drop the log's
without a word. This is the comparison `migrate`'s reconcile makes (the znodes the log's image implies
against ZooKeeper's, by meaning: `zk_diff.same`), run read-only: nothing is written.
"""

from __future__ import annotations

from kazoo.client import KazooClient

from migrator.errors import FindingsError
from migrator.kraft.image import ReplayResult
from migrator.migration.zk_diff import Repair, ZkCache, deletable, owned, plan, repairs_of, structural
from migrator.model import ControllerZnode, ZkControlState
from migrator.zk.migration_client import layout, read_tree

__all__ = ["refuse_drift", "zk_drift"]

_SHOWN = 5


def zk_drift(client: KazooClient, replay: ReplayResult, controller: ControllerZnode | None) -> list[Repair]:
    """What a reconcile would change in ZooKeeper to match the log's image (empty: they agree)."""
    control = ZkControlState(controller=controller)
    tree = read_tree(client)
    actual = {p: n.data for p, n in tree.nodes.items() if owned(p) or structural(p)}
    want: dict[str, bytes | None] = {
        p: d for p, d in layout.znodes_from_image(replay.image, control).items() if owned(p) or structural(p)
    }
    for path in actual:
        if path not in want and deletable(path):
            want[path] = None
    _, changes = plan(want, ZkCache.of(actual))
    return repairs_of(changes)


def refuse_drift(repairs: list[Repair], accept: bool) -> str | None:
    """Refuse (exit 1) when ZooKeeper differs from the log unless `accept`; the note to record if accepted."""
    if not repairs:
        return None
    listed = "; ".join(str(r) for r in repairs[:_SHOWN]) + (
        f"; and {len(repairs) - _SHOWN} more" if len(repairs) > _SHOWN else ""
    )
    if not accept:
        raise FindingsError(
            f"rollback refused: ZooKeeper differs from the log in {len(repairs)} place(s) (reconcile would: "
            f"{listed}); run `zk2kraft migrate` to make ZooKeeper match the log first (see `zk2kraft audit`), "
            "or pass --accept-drift to keep ZooKeeper's version"
        )
    return f"kept ZooKeeper's version where it differs from the log (--accept-drift): {listed}"
