"""The Spark audit and the ZooKeeper export it can read later.

Imported lazily: Spark and pyarrow load only for the commands that use them.
"""

from __future__ import annotations

import typing
from collections.abc import Callable

from migrator.commands.target_arg import takes_target
from migrator.results import ZkExportResult
from migrator.target import Target

if typing.TYPE_CHECKING:
    from spark_audit.audit import AuditResult


def audit(
    target: Target,
    *,
    phase: str | None = None,
    zk_snapshot: str | None = None,
    zk_txn_logs: str | None = None,
    zk_chroot: str = "",
    zk_replay: bool = True,
    zk_export: str | None = None,
    master: str | None = None,
    slices: int | None = None,
    limit: int = 20,
    report: str | None = None,
    verbose: bool = False,
    say: Callable[[str], None] | None = None,
) -> AuditResult:
    """ZooKeeper (the Target's live ensemble, a snapshot data dir, or an export) against the Target's log,
    entity by entity, in Spark.

    Exit code in the result: 0 consistent (or finalized), 1 mismatches; bad input raises (2), Spark or
    an input that cannot be reached raises (3). `phase` defaults to what the derived state implies.
    """
    from spark_audit.audit import AuditOptions, run_audit

    opts = AuditOptions(
        log_dir=target.log_dir,
        phase=phase,
        zookeeper=target.zookeeper or None,
        zk_auth=list(target.zk_auth),
        zk_timeout=target.zk_timeout,
        zk_snapshot=zk_snapshot,
        zk_txn_logs=zk_txn_logs,
        zk_chroot=zk_chroot,
        zk_replay=zk_replay,
        zk_export=zk_export,
        master=master,
        slices=slices,
        limit=limit,
        report=report,
        verbose=verbose,
    )
    return run_audit(opts, say=say, zk_security=target.security)


def audit_kind_titles() -> dict[str, str]:
    """The audit's entity kinds as the report titles them (pyarrow loads only when an audit ran)."""
    from spark_audit.rows import KIND_TITLES

    return dict(KIND_TITLES)


@takes_target(log_dir_positional=False)
def zk_export(target: Target, out: str, *, progress: Callable[[int], None] | None = None) -> ZkExportResult:
    """A consistent copy of Kafka's ZooKeeper tree as the audit's rows in one Parquet file (`audit --zk-export`)."""
    from spark_audit.live import export_parquet

    identity = export_parquet(
        target.zookeeper, out, target.zk_auth, target.zk_timeout, progress, security=target.security
    )
    return ZkExportResult(
        out=out,
        rows=identity["rows"],
        zookeeper=identity["zookeeper"],
        zxid=identity["zxid"],
        consistent=identity["consistent"],
        znodes=identity["znodes"],
        cluster_id=identity.get("cluster_id"),
        topics=identity.get("topics", 0),
        partitions=identity.get("partitions", 0),
        read_seconds=identity.get("read_seconds", 0.0),
        warnings=identity.get("warnings", []),
    )
