"""The diff: a full outer join of ZooKeeper's rows and the log's rows on (kind, key), in Spark SQL.

Every joined row gets a `status` — `equal`, `tolerated` (only Kafka-tolerated fields differ, e.g. a
partition epoch against its state znode's version), `mismatched`, `missing_in_kraft`,
`missing_in_zookeeper` — and a `verdict` that depends on the phase:

| verdict | when |
| --- | --- |
| `equal` | the entity is the same on both sides |
| `info` | tolerated fields differ, or the entity is absent on one side for a reason its row notes (a topic pending deletion, an orphan topic config, a broker registration, a KRaft-only config type) |
| `mismatch` | anything else, in the `copy` and `dual-write` phases: exit code 1 |
| `expected` | anything else after finalize, when ZooKeeper is no longer written: summarised, exit code 0 |

Rows compare as text: `fields` and `info` are canonical JSON, so an equal entity is one string
comparison. Only counts and the first `limit` differences per kind and verdict come back to the
driver; the joined rows stay in Spark, and which fields differ is worked out on the driver for the
rows it shows (`rows.field_differences`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field

from spark_audit.rows import INPUT_KIND, KINDS, NOTES, field_differences, read_input_row

__all__ = [
    "PHASES",
    "Difference",
    "DiffResult",
    "FieldDiff",
    "KindCounts",
    "compare",
    "joined_frame",
]

PHASES = ("copy", "dual-write", "finalized")
STATUSES = ("equal", "tolerated", "mismatched", "missing_in_kraft", "missing_in_zookeeper")


class FieldDiff(BaseModel):
    name: str
    zookeeper: str | None  # the JSON text of the field on each side, None when the side lacks it
    kraft: str | None
    tolerated: bool = False


class Difference(BaseModel):
    kind: str
    key: str
    status: str
    verdict: str
    reason: str | None = None  # why an `info` row is informational
    fields: list[FieldDiff] = Field(default_factory=list)
    zookeeper: dict[str, Any] | None = None  # both sides' fields (strict, tolerated and extra)
    kraft: dict[str, Any] | None = None


class KindCounts(BaseModel):
    kind: str
    zookeeper: int = 0
    kraft: int = 0
    equal: int = 0
    tolerated: int = 0
    mismatched: int = 0
    missing_in_kraft: int = 0
    missing_in_zookeeper: int = 0
    info: int = 0
    mismatch: int = 0
    expected: int = 0

    @property
    def differences(self) -> int:
        return self.mismatch + self.expected


class DiffResult(BaseModel):
    phase: str
    counts: list[KindCounts]
    differences: list[Difference]
    inputs: dict[str, dict[str, Any]] = Field(default_factory=dict)  # side → identity from `_input`

    @property
    def mismatches(self) -> int:
        return sum(c.mismatch for c in self.counts)

    @property
    def expected(self) -> int:
        return sum(c.expected for c in self.counts)

    @property
    def informational(self) -> int:
        return sum(c.info for c in self.counts)


_STATUS_SQL = """
    CASE
      WHEN z_fields IS NULL THEN 'missing_in_zookeeper'
      WHEN k_fields IS NULL THEN 'missing_in_kraft'
      WHEN z_fields = k_fields THEN CASE WHEN z_info = k_info THEN 'equal' ELSE 'tolerated' END
      ELSE 'mismatched'
    END"""


def _verdict_sql(phase: str) -> str:
    other = "expected" if phase == "finalized" else "mismatch"
    return f"""
    CASE
      WHEN kind = '{INPUT_KIND}' THEN 'input'
      WHEN status = 'equal' THEN 'equal'
      WHEN status = 'tolerated' THEN 'info'
      WHEN status = 'missing_in_kraft' AND z_note IS NOT NULL THEN 'info'
      WHEN status = 'missing_in_zookeeper' AND k_note IS NOT NULL THEN 'info'
      ELSE '{other}'
    END"""


_SIDE_COLUMNS = ("fields", "info", "extra", "note")


def joined_frame(zk: Any, kraft: Any, phase: str) -> Any:
    """ZooKeeper ⟗ KRaft on (kind, key) with status and verdict.

    Equal rows keep only kind, status and verdict (they are counted, never shown), so caching the
    result costs little even for millions of partitions.
    """
    from pyspark.sql import functions as F

    if phase not in PHASES:
        raise ValueError(f"phase must be one of {', '.join(PHASES)}, not {phase!r}")
    z = zk.select("kind", "key", *(F.col(c).alias(f"z_{c}") for c in _SIDE_COLUMNS))
    k = kraft.select("kind", "key", *(F.col(c).alias(f"k_{c}") for c in _SIDE_COLUMNS))
    j = z.join(k, on=["kind", "key"], how="full_outer")
    j = j.withColumn("status", F.expr(_STATUS_SQL)).withColumn("verdict", F.expr(_verdict_sql(phase)))
    shown = F.col("verdict") != F.lit("equal")
    kept = [f"{side}_{c}" for side in ("z", "k") for c in _SIDE_COLUMNS]
    return j.select(
        "kind",
        F.when(shown, F.col("key")).alias("key"),
        "status",
        "verdict",
        *(F.when(shown, F.col(c)).alias(c) for c in kept),
    )


def compare(zk: Any, kraft: Any, phase: str, limit: int = 20) -> DiffResult:
    """Run the diff: counts per kind and status, and the first `limit` differences per kind and verdict."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    joined = joined_frame(zk, kraft, phase).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        counts = joined.groupBy("kind", "status", "verdict").count().collect()
        w = Window.partitionBy("kind", "verdict").orderBy("key")
        shown = (
            joined.where(F.col("verdict") != F.lit("equal"))
            .withColumn("rn", F.row_number().over(w))
            .where((F.col("rn") <= F.lit(max(limit, 0))) | (F.col("verdict") == F.lit("input")))
            .drop("rn")
            .collect()
        )
    finally:
        joined.unpersist()
    return build_result(phase, counts, shown)


def build_result(phase: str, counts: Iterable[Any], shown: Iterable[Any]) -> DiffResult:
    """The driver's side of `compare`: Spark rows into the pydantic result (kept apart for tests)."""
    by_kind: dict[str, KindCounts] = {}
    for row in counts:
        kind, status, verdict, n = row["kind"], row["status"], row["verdict"], row["count"]
        if kind == INPUT_KIND:
            continue
        c = by_kind.setdefault(kind, KindCounts(kind=kind))
        setattr(c, status, getattr(c, status) + n)
        if status in ("equal", "tolerated", "mismatched"):
            c.zookeeper += n
            c.kraft += n
        elif status == "missing_in_kraft":
            c.zookeeper += n
        else:
            c.kraft += n
        if verdict in ("info", "mismatch", "expected"):
            setattr(c, verdict, getattr(c, verdict) + n)
    order = {k: i for i, k in enumerate(KINDS)}
    ordered = sorted(by_kind.values(), key=lambda c: (order.get(c.kind, len(order)), c.kind))
    inputs: dict[str, dict[str, Any]] = {}
    differences: list[Difference] = []
    for row in shown:
        if row["verdict"] == "input":
            inputs[row["key"]] = read_input_row(row["z_fields"] or row["k_fields"] or "{}")
            continue
        differences.append(_difference(row))
    vorder = {"mismatch": 0, "expected": 0, "info": 1}
    differences.sort(key=lambda d: (vorder.get(d.verdict, 2), order.get(d.kind, len(order)), d.kind, d.key))
    return DiffResult(phase=phase, counts=ordered, differences=differences, inputs=inputs)


def _side(row: Any, side: str) -> dict[str, Any] | None:
    if row[f"{side}_fields"] is None:
        return None
    out: dict[str, Any] = {}
    for column in ("extra", "info", "fields"):
        text = row[f"{side}_{column}"]
        if text:
            out.update(json.loads(text))
    return out


def _difference(row: Any) -> Difference:
    status = row["status"]
    fields: list[FieldDiff] = []
    if status == "mismatched":
        fields += [
            FieldDiff(name=n, zookeeper=a, kraft=b)
            for n, a, b in field_differences(row["z_fields"], row["k_fields"])
        ]
    if status in ("mismatched", "tolerated") and row["z_info"] != row["k_info"]:
        fields += [
            FieldDiff(name=n, zookeeper=a, kraft=b, tolerated=True)
            for n, a, b in field_differences(row["z_info"], row["k_info"])
        ]
    reason = None
    if row["verdict"] == "info":
        if status == "tolerated":
            reason = "only fields Kafka tolerates differ: " + ", ".join(f.name for f in fields if f.tolerated)
        else:
            note = row["z_note"] if status == "missing_in_kraft" else row["k_note"]
            reason = NOTES.get(note, note)
    return Difference(
        kind=row["kind"],
        key=row["key"],
        status=status,
        verdict=row["verdict"],
        reason=reason,
        fields=fields,
        zookeeper=_side(row, "z"),
        kraft=_side(row, "k"),
    )
