"""The log's audit rows as a Spark map-reduce (`spark_audit.logfold` says why it is exact).

    rows, identity = kraft_rows(spark, "/var/lib/kraft", cut=None, tasks=8, reducers=8)

The driver plans (`logfold.plan_log`); the `kraft-records` source maps the plan's pieces in parallel
tasks; Spark shuffles the record rows by entity group into `reducers` partitions, sorts each by
(offset, seq) and a Python task folds each partition (`mapInArrow`). A reducer holds only its
share of the image, so memory per task falls with more reducers, and every step uses every core.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from spark_audit.errors import worker_error
from spark_audit.logfold import plan_log
from spark_audit.rows import SPARK_SCHEMA, input_batch

__all__ = ["default_tasks", "kraft_rows"]


def default_tasks(spark: Any) -> tuple[int, int]:
    """(map tasks, reducers) for a session: two of each per core, at least 8 reducers so a task holds
    at most an eighth of the image (about 0.3 GiB of Python at 1,000,000 partitions)."""
    cores = max(1, spark.sparkContext.defaultParallelism)
    return 2 * cores, max(8, 2 * cores)


def _fold(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    from spark_audit.logfold import fold_rows

    try:
        yield from fold_rows(batches)
    except Exception as e:  # noqa: BLE001 - operator errors cross the JVM as one marked line
        raise worker_error(e) from None


def kraft_rows(
    spark: Any, path: str, cut: int | None, tasks: int, reducers: int
) -> tuple[Any, dict[str, Any]]:
    """The log's audit rows at `cut` as a DataFrame (with its `_input` row) and the read's identity."""
    plan = plan_log(path, cut, tasks)
    identity = dict(plan.identity, map_tasks=len(plan.pieces), reducers=reducers, fold="map-reduce")
    records = spark.read.format("kraft-records").option("plan", plan.to_json()).load()
    rows = (
        records.repartition(reducers, "group")
        .sortWithinPartitions("offset", "seq")
        .mapInArrow(_fold, SPARK_SCHEMA)
    )
    source = spark.createDataFrame(pa.Table.from_batches([input_batch("kraft", identity)]))
    return rows.unionByName(source), identity
