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

Field-level differences are the names whose JSON text differs (`fields` for strict fields, `info`
for tolerated fields present on both sides). Rows are compared by their maps' entries, which hold
the fields in name order. Only counts and the first `limit` differences per kind and verdict come
back to the driver; the joined rows stay in Spark.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field

from spark_audit.rows import INPUT_KIND, KINDS, NOTES

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
    zookeeper: dict[str, str] | None = None  # both sides' fields (strict and tolerated), as JSON text
    kraft: dict[str, str] | None = None


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


def _status_sql() -> str:
    return """
    CASE
      WHEN z_fields IS NULL THEN 'missing_in_zookeeper'
      WHEN k_fields IS NULL THEN 'missing_in_kraft'
      WHEN map_entries(z_fields) = map_entries(k_fields) THEN
        CASE WHEN size(filter(map_keys(z_info),
                              x -> k_info[x] IS NOT NULL AND NOT (z_info[x] <=> k_info[x]))) > 0
             THEN 'tolerated' ELSE 'equal' END
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


def joined_frame(zk: Any, kraft: Any, phase: str) -> Any:
    """ZooKeeper ⟗ KRaft on (kind, key) with status, verdict and the differing field names.

    Equal rows keep only kind, status and verdict (they are counted, never shown), so caching the
    result costs little even for millions of partitions.
    """
    from pyspark.sql import functions as F

    if phase not in PHASES:
        raise ValueError(f"phase must be one of {', '.join(PHASES)}, not {phase!r}")
    z = zk.select(
        "kind",
        "key",
        F.col("fields").alias("z_fields"),
        F.col("info").alias("z_info"),
        F.col("note").alias("z_note"),
    )
    k = kraft.select(
        "kind",
        "key",
        F.col("fields").alias("k_fields"),
        F.col("info").alias("k_info"),
        F.col("note").alias("k_note"),
    )
    j = z.join(k, on=["kind", "key"], how="full_outer")
    j = j.withColumn("status", F.expr(_status_sql())).withColumn("verdict", F.expr(_verdict_sql(phase)))
    shown = F.col("verdict") != F.lit("equal")

    def keep(name: str) -> Any:
        return F.when(shown, F.col(name)).alias(name)

    return j.select(
        "kind",
        keep("key"),
        "status",
        "verdict",
        keep("z_fields"),
        keep("k_fields"),
        keep("z_info"),
        keep("k_info"),
        keep("z_note"),
        keep("k_note"),
        F.when(
            shown & (F.col("status") == F.lit("mismatched")),
            F.expr(
                "filter(array_distinct(concat(map_keys(z_fields), map_keys(k_fields))), "
                "x -> NOT (z_fields[x] <=> k_fields[x]))"
            ),
        ).alias("diff_fields"),
        F.when(
            shown & F.col("status").isin("mismatched", "tolerated"),
            F.expr("filter(map_keys(z_info), x -> k_info[x] IS NOT NULL AND NOT (z_info[x] <=> k_info[x]))"),
        ).alias("info_fields"),
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
            fields = row["z_fields"] or row["k_fields"] or {}
            inputs[row["key"]] = {k: json.loads(v) for k, v in dict(fields).items()}
            continue
        differences.append(_difference(row))
    vorder = {"mismatch": 0, "expected": 0, "info": 1}
    differences.sort(key=lambda d: (vorder.get(d.verdict, 2), order.get(d.kind, len(order)), d.kind, d.key))
    return DiffResult(phase=phase, counts=ordered, differences=differences, inputs=inputs)


def _difference(row: Any) -> Difference:
    z_fields = dict(row["z_fields"]) if row["z_fields"] is not None else None
    k_fields = dict(row["k_fields"]) if row["k_fields"] is not None else None
    z_info = dict(row["z_info"]) if row["z_info"] is not None else {}
    k_info = dict(row["k_info"]) if row["k_info"] is not None else {}
    fields: list[FieldDiff] = []
    for name in sorted(row["diff_fields"] or []):
        fields.append(
            FieldDiff(
                name=name,
                zookeeper=(z_fields or {}).get(name),
                kraft=(k_fields or {}).get(name),
            )
        )
    for name in sorted(row["info_fields"] or []):
        fields.append(
            FieldDiff(name=name, zookeeper=z_info.get(name), kraft=k_info.get(name), tolerated=True)
        )
    reason = None
    status = row["status"]
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
        zookeeper=None if z_fields is None else {**z_fields, **z_info},
        kraft=None if k_fields is None else {**k_fields, **k_info},
    )
