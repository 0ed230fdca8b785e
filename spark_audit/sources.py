"""PySpark 4 Python data sources: `kraft-log` and `zk-snapshot`, yielding Arrow batches of audit rows.

    spark.dataSource.register(KraftLogSource)
    spark.read.format("kraft-log").option("path", "/var/lib/kraft").load()
    spark.read.format("zk-snapshot").option("path", "/var/lib/zookeeper").load()

Both sides are folds: the image is what replaying every record (every transaction) gives, and a record
can change an entity written anywhere before it (a PartitionChangeRecord needs its PartitionRecord, a
RemoveTopicRecord drops configs, a transaction spans batches), and a fuzzy ZooKeeper snapshot is only
consistent once its transaction logs are replayed. So a task never sees a byte range alone: each of
the `slices` tasks replays the whole input through `spark_audit.inputs` and emits its round-robin
slice of the entities. Replay is the bulk of the cost (docs/audit.md has the measurements), so more
slices buy parallel row building and shuffling, not a faster replay; the audit uses one slice per
source on small masters, which lets the two sources run side by side.

Options (strings, as Spark passes them):

| source | option | meaning |
| --- | --- | --- |
| both | `path` | log dir / partition dir / segment / `.checkpoint` file; ZooKeeper dataDir or snapshot file |
| both | `slices` | tasks (default 1) |
| kraft-log | `up_to_offset` | last offset of the image (default: the log's end) |
| zk-snapshot | `snapshot` | the snapshot file (default: the newest complete one, chosen per task) |
| zk-snapshot | `logs` | dataLogDir with the transaction logs (default: `path`) |
| zk-snapshot | `replay` | `false` uses the fuzzy snapshot as is |
| zk-snapshot | `up_to_zxid` | replay no further (pins every task to one state) |
| zk-snapshot | `chroot` | Kafka's chroot inside ZooKeeper, e.g. `/kafka` |

Slice 0 also emits the `_input` row naming what was read. An operator error in a task (a corrupt
file) is raised as `RuntimeError("ZK2KRAFT[<exit code>] <message>")`, which `spark_audit.errors`
turns back into the one-line error on the driver.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from spark_audit.errors import worker_error
from spark_audit.rows import SPARK_SCHEMA

__all__ = ["KraftLogSource", "KraftRecordsSource", "ZkSnapshotSource", "register"]


def _slices(options: dict[str, str]) -> int:
    try:
        n = int(options.get("slices", "1"))
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"option slices must be a positive integer, got {options.get('slices')!r}")
    return n


def _int_option(options: dict[str, str], name: str) -> int | None:
    raw = options.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw, 0)
    except ValueError:
        raise ValueError(f"option {name} must be an integer, got {raw!r}") from None


class _Reader(DataSourceReader):
    side = ""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = dict(options)
        if not self.options.get("path"):
            raise ValueError("option path is required")
        self.slices = _slices(self.options)

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.slices)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from spark_audit.rows import image_batches, input_batch

        index = int(partition.value)
        try:
            started = time.perf_counter()
            image, identity = self._load()
            identity["load_seconds"] = round(time.perf_counter() - started, 3)
            if index == 0:
                identity["slices"] = self.slices
                yield input_batch(self.side, identity)
            yield from image_batches(image, side=self.side, slice_index=index, slices=self.slices)
        except Exception as e:  # noqa: BLE001 - operator errors cross the JVM as one marked line
            raise worker_error(e) from None

    @abstractmethod
    def _load(self) -> tuple[Any, dict[str, Any]]:
        """(image, identity) of the input: replayed in full by every task."""


class _KraftReader(_Reader):
    side = "kraft"

    def _load(self) -> tuple[Any, dict[str, Any]]:
        from spark_audit.inputs import load_kraft

        result, identity = load_kraft(self.options["path"], _int_option(self.options, "up_to_offset"))
        return result.image, identity


class _ZkReader(_Reader):
    side = "zookeeper"

    def _load(self) -> tuple[Any, dict[str, Any]]:
        from spark_audit.inputs import load_zk_snapshot

        o = self.options
        layout, identity = load_zk_snapshot(
            o["path"],
            snapshot=o.get("snapshot") or None,
            logs=o.get("logs") or None,
            replay=o.get("replay", "true").lower() != "false",
            up_to_zxid=_int_option(o, "up_to_zxid"),
            chroot=o.get("chroot", ""),
        )
        return layout.image, identity


class KraftLogSource(DataSource):
    """A KRaft metadata log (or snapshot) as audit rows: the image at `up_to_offset` or the end."""

    @classmethod
    def name(cls) -> str:
        return "kraft-log"

    def schema(self) -> str:
        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _KraftReader(self.options)


class ZkSnapshotSource(DataSource):
    """ZooKeeper's snapshot (plus transaction logs) of a data directory as audit rows."""

    @classmethod
    def name(cls) -> str:
        return "zk-snapshot"

    def schema(self) -> str:
        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _ZkReader(self.options)


class _KraftRecordsReader(DataSourceReader):
    """The map side of the log's fold (`spark_audit.logfold`): one task per piece of the plan."""

    def __init__(self, options: dict[str, str]) -> None:
        from spark_audit.logfold import LogPlan

        if not options.get("plan"):
            raise ValueError("option plan is required (spark_audit.logfold.plan_log(...).to_json())")
        self.plan = LogPlan.from_json(options["plan"])

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(len(self.plan.pieces))]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from spark_audit.logfold import map_piece

        try:
            yield from map_piece(self.plan, self.plan.pieces[int(partition.value)])
        except Exception as e:  # noqa: BLE001 - operator errors cross the JVM as one marked line
            raise worker_error(e) from None


class KraftRecordsSource(DataSource):
    """The applied records of a planned log read, keyed by entity group (the fold's map output)."""

    @classmethod
    def name(cls) -> str:
        return "kraft-records"

    def schema(self) -> str:
        from spark_audit.logfold import SPARK_RECORD_SCHEMA

        return SPARK_RECORD_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _KraftRecordsReader(self.options)


def register(spark: Any) -> None:
    spark.dataSource.register(KraftLogSource)
    spark.dataSource.register(KraftRecordsSource)
    spark.dataSource.register(ZkSnapshotSource)
