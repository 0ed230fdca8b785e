"""A live ZooKeeper as audit rows: one consistent bulk read on the driver, then rows (or a Parquet export).

A live ensemble is read once, from one session, so the view is the tree at one zxid
(`migrator.zk.export.read_consistent`); tasks then never talk to ZooKeeper. `zk2kraft zk export`
writes the same rows to Parquet so the audit can run later or elsewhere.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from migrator.zk.connection import ConnectSpec, ZkSecurity, close, connect
from migrator.zk.export import read_consistent, write_parquet
from migrator.zk.layout import LayoutResult, image_from_tree
from spark_audit.inputs import zk_identity
from spark_audit.rows import SCHEMA, image_batches, input_batch

__all__ = ["export_parquet", "live_table", "read_live"]


def read_live(
    zookeeper: str,
    zk_auth: Sequence[str] = (),
    zk_timeout: float = 10.0,
    progress: Callable[[int], None] | None = None,
    security: ZkSecurity | None = None,
) -> tuple[LayoutResult, dict[str, Any]]:
    """Kafka's metadata from a live ZooKeeper, decoded strictly, and the read's identity."""
    spec = ConnectSpec.parse(zookeeper)
    started = time.perf_counter()
    client = connect(zookeeper, auth=zk_auth, timeout=zk_timeout, security=security)
    try:
        tree = read_consistent(client, progress=progress)
    finally:
        close(client)
    seconds = time.perf_counter() - started
    layout = image_from_tree(tree, strict=True)
    identity: dict[str, Any] = {
        "source": "zookeeper",
        "zookeeper": str(spec),
        "zxid": tree.read_zxid if tree.consistent else tree.max_zxid,
        "consistent": tree.consistent,
        "znodes": len(tree),
        "read_seconds": round(seconds, 3),
        "read_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "warnings": []
        if tree.consistent
        else ["ZooKeeper kept changing during the read: the view mixes zxids (not one snapshot)"],
    }
    identity.update(zk_identity(layout))
    return layout, identity


def live_table(layout: LayoutResult, identity: dict[str, Any]) -> pa.Table:
    """The rows of a live read as one Arrow table, `_input` row first."""
    batches = [input_batch("zookeeper", identity), *image_batches(layout.image, side="zookeeper")]
    return pa.Table.from_batches(batches, schema=SCHEMA)


def export_parquet(
    zookeeper: str,
    out: str,
    zk_auth: Sequence[str] = (),
    zk_timeout: float = 10.0,
    progress: Callable[[int], None] | None = None,
    security: ZkSecurity | None = None,
) -> dict[str, Any]:
    """`zk2kraft zk export`: read live, write the rows to `out`; returns the identity (with `rows`)."""
    layout, identity = read_live(zookeeper, zk_auth, zk_timeout, progress, security)
    identity = {**identity, "source": "zk-export", "export": str(out)}
    batches = [input_batch("zookeeper", identity), *image_batches(layout.image, side="zookeeper")]
    identity["rows"] = write_parquet(out, SCHEMA, batches, identity)
    return identity
