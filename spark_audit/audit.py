"""The audit job: ZooKeeper against the KRaft log, entity by entity, for one migration phase.

    python -m spark_audit.audit --zk-snapshot /var/lib/zookeeper --log-dir /var/lib/kraft
    spark-submit --py-files zk2kraft.zip spark_audit/audit.py --zk-export zk.parquet --log-dir /shared/kraft

(`zk2kraft audit` runs the same `run_audit`.) The steps:

1. On the driver, a light pass over the log (`inputs.scan_log`): every batch's CRC, the last committed
   ZkMigrationStateRecord, an open transaction, and the offset where the copy took effect.
2. The phase: given, or the one the derived migration state implies (DualWriteMetadata → dual-write,
   MigrationFinalized → finalized); a phase the state does not allow is bad input (exit 2).
3. Which image of the log: `copy` — at the copy's commit; `dual-write` — at the offset `/migration`
   records (the log is read again with that cut if ZooKeeper's view, known only after reading a
   snapshot, turns out to cover less than the whole log); `finalized` — the log's end.
4. Both sides as Spark DataFrames of normalised rows (`sources`, or a live read / an export as Parquet),
   the diff (`diff.compare`), the verdict and, on request, the HTML report (`report`).

Exit codes: 0 consistent (or finalized), 1 mismatches, 2 bad input, 3 Spark or an input unreachable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

# spark-submit runs this file as a script: make the project importable from its checkout
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from migrator.errors import EXIT_FINDINGS, EXIT_OK, BadInputError, ZkKraftError  # noqa: E402
from migrator.zk.connection import ZkSecurity  # noqa: E402
from spark_audit.diff import PHASES, DiffResult, KindCounts, compare  # noqa: E402
from spark_audit.errors import from_spark  # noqa: E402
from spark_audit.inputs import LogScan, newest_logged_zxid, scan_log  # noqa: E402

__all__ = ["AuditOptions", "AuditResult", "main", "phase_for_state", "run_audit"]

STATE_PHASE = {"DualWriteMetadata": "dual-write", "MigrationFinalized": "finalized"}


class AuditOptions(BaseModel):
    log_dir: str
    phase: str | None = None  # None: from the derived migration state
    zookeeper: str | None = None
    zk_auth: list[str] = Field(default_factory=list)
    zk_timeout: float = 10.0
    zk_snapshot: str | None = None
    zk_txn_logs: str | None = None  # dataLogDir when it is not the snapshot's dataDir
    zk_chroot: str = ""
    zk_replay: bool = True
    zk_export: str | None = None
    master: str | None = None
    slices: int | None = None  # tasks per source; default: half the master's cores, at least 1
    # The log read as a map-reduce (True) or as one replay per slice (False); None: the map-reduce on a
    # cluster master, the whole fold on a local one, where it measured faster (docs/benchmarks.md).
    spread: bool | None = None
    limit: int = 20
    report: str | None = None
    verbose: bool = False


class AuditResult(BaseModel):
    phase: str
    phase_source: str  # "given" or "derived"
    state: str | None  # the derived migration state's public name
    state_reason: str | None = None
    verdict: str
    exit_code: int
    mismatches: int
    expected: int
    informational: int
    counts: list[KindCounts]
    differences: list[Any]
    zookeeper: dict[str, Any] = Field(default_factory=dict)  # the ZooKeeper input's identity
    kraft: dict[str, Any] = Field(default_factory=dict)  # the log image's identity (cut, offsets, files)
    log_scan: dict[str, Any] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    master: str = ""
    slices: int = 1
    kraft_reads: int = 1  # 2 when the log was read again at ZooKeeper's /migration offset
    timings: dict[str, float] = Field(default_factory=dict)  # seconds per step, on the driver
    report: str | None = None
    seconds: float = 0.0


Say = Callable[[str], None]


def _check_inputs(opts: AuditOptions) -> None:
    given = [
        n
        for n, v in (
            ("--zookeeper", opts.zookeeper),
            ("--zk-snapshot", opts.zk_snapshot),
            ("--zk-export", opts.zk_export),
        )
        if v
    ]
    if len(given) != 1:
        which = ", ".join(given) if given else "none"
        raise BadInputError(
            f"give exactly one ZooKeeper input: --zookeeper, --zk-snapshot or --zk-export (got {which})"
        )
    if opts.phase is not None and opts.phase not in PHASES:
        raise BadInputError(f"--phase must be one of {', '.join(PHASES)}, not {opts.phase!r}")
    if opts.limit < 0:
        raise BadInputError("--limit must be 0 or more")
    if opts.slices is not None and opts.slices < 1:
        raise BadInputError("--slices must be 1 or more")
    if opts.zk_chroot and not opts.zk_snapshot:
        raise BadInputError("--zk-chroot applies to --zk-snapshot only (a connect string carries its chroot)")


def phase_for_state(state: str | None, reason: str) -> str:
    """The audit phase a derived state implies; states before a committed copy cannot be audited."""
    phase = STATE_PHASE.get(state or "")
    if phase is None:
        raise BadInputError(
            f"nothing to audit: the migration state is {state or 'unknown'} ({reason}); "
            "an audit compares ZooKeeper with a log that holds a committed copy"
        )
    return phase


def _derive_state(scan: LogScan, control: dict[str, Any] | None) -> tuple[str, str]:
    """The migration state from the log's facts (and ZooKeeper's control znodes when known)."""
    from migrator.migration.facts import LogFacts, ZkFacts, derive
    from migrator.model import ZkControlState

    log = LogFacts(
        log_dir=scan.log_dir,
        exists=True,
        cluster_id=scan.cluster_id,
        end_offset=scan.end_offset,
        last_record_offset=scan.last_record_offset,
        migration_code=scan.migration_code,
        migration_offset=scan.migration_offset,
    )
    if scan.open_transaction is not None:
        from migrator.kraft.image import OpenTransaction

        log.open_transaction = OpenTransaction(**scan.open_transaction)
    zk = ZkFacts()
    if control is not None:
        c = ZkControlState.model_validate(control)
        zk = ZkFacts(
            controller=c.controller,
            controller_zk_version=c.controller_zk_version,
            zk_controller_epoch=c.controller_epoch,
            controller_epoch_zk_version=c.controller_epoch_zk_version,
            migration=c.migration,
        )
    derived = derive(log, zk).derived
    return derived.state.public_name, derived.reason


def _check_phase(phase: str, state: str, reason: str, scan: LogScan) -> None:
    if phase == "dual-write" and state != "DualWriteMetadata":
        raise BadInputError(
            f"--phase dual-write does not fit the migration state {state} ({reason})"
            + ("; use --phase finalized" if state == "MigrationFinalized" else "")
        )
    if phase == "finalized" and state != "MigrationFinalized":
        raise BadInputError(
            f"--phase finalized does not fit the migration state {state} ({reason}): finalize first"
        )
    if phase == "copy":
        if scan.copy_in_snapshot:
            raise BadInputError(
                f"--phase copy: the copy is inside the log's snapshot {scan.newest_snapshot}, so the image "
                "at the copy's commit cannot be rebuilt; audit with --phase dual-write or finalized"
            )
        if scan.copy_end_offset is None:
            raise BadInputError(f"--phase copy: the log holds no committed copy (state {state}: {reason})")


def _migration_offset(control: dict[str, Any] | None, where: str) -> int:
    migration = (control or {}).get("migration")
    if not migration or migration.get("kraft_metadata_offset", -1) < 0:
        raise BadInputError(
            f"--phase dual-write: {where} has no /migration offset, so which image of the log ZooKeeper "
            "should equal is unknown (take the ZooKeeper view after the first sync)"
        )
    return int(migration["kraft_metadata_offset"])


def _default_slices(spark: Any) -> int:
    # Every slice replays its whole input, so on a small master the two sources are best run side
    # by side with one task each; more cores buy parallel row building (docs/audit.md).
    return max(1, spark.sparkContext.defaultParallelism // 2)


def run_audit(
    opts: AuditOptions, say: Say | None = None, zk_security: ZkSecurity | None = None
) -> AuditResult:
    """Audit ZooKeeper against the log; raises ZkKraftError for bad input (2) or Spark failing (3).
    `zk_security`: TLS, SASL and ACL settings of the live ZooKeeper read."""
    started = time.perf_counter()
    _check_inputs(opts)
    note = say or (lambda _m: None)
    warnings: list[str] = []

    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name] = round(now - clock, 3)
        clock = now

    note("scanning the metadata log")
    scan = scan_log(opts.log_dir)
    lap("log scan on the driver (CRC, state, transactions)")
    if scan.end_offset == 0:
        raise BadInputError(f"{opts.log_dir}: the metadata log is empty")

    # ZooKeeper inputs known on the driver before Spark runs: a live read, or an export's metadata
    zk_identity: dict[str, Any] | None = None
    live = None
    if opts.zookeeper:
        from spark_audit.live import read_live

        note("reading ZooKeeper")
        live = read_live(opts.zookeeper, opts.zk_auth, opts.zk_timeout, security=zk_security)
        zk_identity = live[1]
        lap("live ZooKeeper read on the driver")
    elif opts.zk_export:
        from migrator.zk.export import read_identity
        from spark_audit.rows import SCHEMA

        zk_identity = read_identity(opts.zk_export, SCHEMA)
    snapshot_file: str | None = None
    if opts.zk_snapshot:
        from migrator.zk.snapshot_file import latest_snapshot

        snapshot_file = str(latest_snapshot(opts.zk_snapshot))

    control = zk_identity.get("control") if zk_identity else None
    _check_cluster(zk_identity, scan)
    state, reason = _derive_state(scan, control)
    phase = opts.phase or phase_for_state(state, reason)
    _check_phase(phase, state, reason, scan)

    cut: int | None = None
    if phase == "copy":
        cut = scan.copy_end_offset
    elif phase == "dual-write" and zk_identity is not None:
        cut = _migration_offset(control, "ZooKeeper")
        if live is not None and cut >= scan.end_offset:
            # A live controller (Kafka's own, in companion mode) appended and dual-wrote between the
            # log scan and the ZooKeeper read: the log on disk now covers what ZooKeeper holds.
            note("ZooKeeper is ahead of the scan: scanning the live log again")
            scan = scan_log(opts.log_dir)
        _check_cut(cut, scan)

    from spark_audit import session

    handle = session.get_session(opts.master, verbose=opts.verbose)
    spark = handle.spark
    lap("Spark session")
    slices = opts.slices or _default_slices(spark)
    kraft_reads = 1
    zk_df = None
    try:
        if live is not None:
            from spark_audit.live import live_table

            zk_df = spark.createDataFrame(live_table(*live))
        elif opts.zk_export:
            zk_df = spark.read.parquet(opts.zk_export)
        else:
            assert snapshot_file is not None and opts.zk_snapshot is not None
            reader = (
                spark.read.format("zk-snapshot")
                .option("path", opts.zk_snapshot)
                .option("snapshot", snapshot_file)
                .option("replay", str(opts.zk_replay).lower())
                .option("chroot", opts.zk_chroot)
                .option("slices", str(slices))
            )
            if opts.zk_txn_logs:
                reader = reader.option("logs", opts.zk_txn_logs)
            if slices > 1 and opts.zk_replay:
                from migrator.zk.snapshot_file import snapshot_zxid

                pin = newest_logged_zxid(
                    opts.zk_txn_logs or opts.zk_snapshot, snapshot_zxid(snapshot_file) or 0
                )
                if pin is not None:
                    reader = reader.option("up_to_zxid", str(pin))
            zk_df = reader.load()
        # A snapshot's /migration is known only once it is read: keep its rows for a second diff.
        may_recut = phase == "dual-write" and zk_identity is None
        if may_recut:
            from pyspark import StorageLevel

            zk_df = zk_df.persist(StorageLevel.MEMORY_AND_DISK)
        note(f"comparing ({phase})")
        result = compare(zk_df, _kraft_df(spark, opts, cut, slices), phase, opts.limit)
        lap("both inputs read and compared (Spark)")
        if phase == "dual-write" and zk_identity is None:
            cut = _migration_offset(
                result.inputs.get("zookeeper", {}).get("control"), "the ZooKeeper snapshot"
            )
            _check_cut(cut, scan)
            if cut < scan.last_record_offset:
                note(f"comparing again with the log's image at ZooKeeper's /migration offset {cut}")
                result = compare(zk_df, _kraft_df(spark, opts, cut, slices), phase, opts.limit)
                kraft_reads = 2
                lap("the log read again at /migration and compared")
        if may_recut:
            zk_df.unpersist()
    except ZkKraftError:
        raise
    except Exception as e:  # noqa: BLE001 - Spark wraps worker errors in Java exceptions
        error = from_spark(e)
        if handle.log_file and not isinstance(error, BadInputError):
            session.keep_log()
            error = type(error)(f"{error} (Spark's log: {handle.log_file})")
        raise error from None

    zk_in = result.inputs.get("zookeeper", zk_identity or {})
    kraft_in = result.inputs.get("kraft", {})
    counted = {c.kind: c.kraft for c in result.counts}
    kraft_in.setdefault("topics", counted.get("topic", 0))  # the map-reduce learns them from its rows
    kraft_in.setdefault("partitions", counted.get("partition", 0))
    if zk_in.get("cluster_id") and not (zk_identity and zk_identity.get("cluster_id")):
        _check_cluster(zk_in, scan)
    warnings += list(zk_in.get("warnings") or [])
    if scan.torn_tail:
        warnings.append(
            f"the log ends in a torn batch, left out as Kafka would truncate it: {scan.torn_tail}"
        )
    if kraft_in.get("open_transaction"):
        t = kraft_in["open_transaction"]
        warnings.append(
            f"the log's image leaves out an open transaction {t.get('name')!r} begun at offset {t.get('begin_offset')}"
        )
    out = _result(opts, phase, state, reason, result, zk_in, kraft_in, scan, warnings)
    out.master = spark.sparkContext.master
    out.slices = slices
    out.kraft_reads = kraft_reads
    out.timings = timings
    out.seconds = round(time.perf_counter() - started, 3)
    if opts.report:
        from spark_audit.report import write_report

        write_report(out, opts.report, opts.limit)
        out.report = opts.report
    return out


def _kraft_df(spark: Any, opts: AuditOptions, cut: int | None, slices: int) -> Any:
    from spark_audit.session import is_local

    if opts.spread if opts.spread is not None else not is_local(spark.sparkContext.master):
        from spark_audit.spread import default_tasks, kraft_rows

        tasks, reducers = default_tasks(spark)
        return kraft_rows(spark, opts.log_dir, cut, opts.slices or tasks, reducers)[0]
    log_dir = opts.log_dir
    reader = spark.read.format("kraft-log").option("path", log_dir).option("slices", str(slices))
    if cut is not None:
        reader = reader.option("up_to_offset", str(cut))
    return reader.load()


def _check_cut(cut: int, scan: LogScan) -> None:
    if cut >= scan.end_offset:
        raise BadInputError(
            f"ZooKeeper's /migration covers offset {cut} but the log {scan.log_dir} ends at offset "
            f"{scan.end_offset - 1}: the log is behind ZooKeeper (a different or restored log directory?)"
        )


def _check_cluster(zk_identity: dict[str, Any] | None, scan: LogScan) -> None:
    zk_cluster = (zk_identity or {}).get("cluster_id")
    if zk_cluster and scan.cluster_id and zk_cluster != scan.cluster_id:
        raise BadInputError(
            f"ZooKeeper holds cluster {zk_cluster} but the log {scan.log_dir} belongs to cluster "
            f"{scan.cluster_id}: these inputs are not one migration"
        )


def _result(
    opts: AuditOptions,
    phase: str,
    state: str,
    reason: str,
    diff: DiffResult,
    zk_in: dict[str, Any],
    kraft_in: dict[str, Any],
    scan: LogScan,
    warnings: list[str],
) -> AuditResult:
    mismatches, expected, info = diff.mismatches, diff.expected, diff.informational
    if phase == "finalized":
        exit_code = EXIT_OK
        verdict = (
            f"finalized: {expected} differences since ZooKeeper stopped being written (expected)"
            if expected
            else "finalized: ZooKeeper still equals the log"
        )
    elif mismatches:
        exit_code = EXIT_FINDINGS
        kinds = ", ".join(f"{c.kind} {c.mismatch}" for c in diff.counts if c.mismatch)
        verdict = f"{mismatches} mismatches between ZooKeeper and the log ({kinds})"
    else:
        exit_code = EXIT_OK
        verdict = "consistent: ZooKeeper and the log agree" + (f" ({info} informational)" if info else "")
    return AuditResult(
        phase=phase,
        phase_source="given" if opts.phase else "derived",
        state=state,
        state_reason=reason,
        verdict=verdict,
        exit_code=exit_code,
        mismatches=mismatches,
        expected=expected,
        informational=info,
        counts=diff.counts,
        differences=[d.model_dump() for d in diff.differences],
        zookeeper=zk_in,
        kraft=kraft_in,
        log_scan=scan.identity(),
        warnings=warnings,
    )


# --- spark-submit entry point ---------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="spark_audit/audit.py", description="Audit ZooKeeper against a KRaft metadata log (zk2kraft)."
    )
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--zookeeper", default=os.environ.get("ZK2KRAFT_ZOOKEEPER"))
    src.add_argument("--zk-snapshot")
    src.add_argument("--zk-export")
    ap.add_argument("--zk-auth", action="append", default=[])
    ap.add_argument("--zk-txn-logs")
    ap.add_argument("--zk-chroot", default="")
    ap.add_argument("--no-zk-replay", dest="zk_replay", action="store_false")
    ap.add_argument("--log-dir", default=os.environ.get("ZK2KRAFT_LOG_DIR"))
    ap.add_argument("--phase", choices=PHASES)
    ap.add_argument("--master")
    ap.add_argument("--slices", type=int)
    fold = ap.add_mutually_exclusive_group()
    fold.add_argument(
        "--spread",
        dest="spread",
        action="store_const",
        const=True,
        help="read the log as a map-reduce (the default on a cluster master)",
    )
    fold.add_argument(
        "--whole-fold",
        dest="spread",
        action="store_const",
        const=False,
        help="read the log as one replay per slice (the default on a local master)",
    )
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--report")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """`spark-submit spark_audit/audit.py ...`: the verdict line (or JSON) and the exit code."""
    args = _parser().parse_args(argv)
    if args.zookeeper and (args.zk_snapshot or args.zk_export):
        args.zookeeper = None  # the environment's default yields to an explicit input
    try:
        if not args.log_dir:
            raise BadInputError("--log-dir (or ZK2KRAFT_LOG_DIR) is required")
        opts = AuditOptions(
            log_dir=args.log_dir,
            phase=args.phase,
            zookeeper=args.zookeeper,
            zk_auth=args.zk_auth,
            zk_snapshot=args.zk_snapshot,
            zk_txn_logs=args.zk_txn_logs,
            zk_chroot=args.zk_chroot,
            zk_replay=args.zk_replay,
            zk_export=args.zk_export,
            master=args.master,
            slices=args.slices,
            spread=args.spread,
            limit=args.limit,
            report=args.report,
            verbose=args.verbose,
        )
        result = run_audit(
            opts, say=None if args.json else lambda m: print(f"zk2kraft audit: {m}", file=sys.stderr)
        )
    except ZkKraftError as e:
        print(f"zk2kraft: error: {e}", file=sys.stderr)
        return e.exit_code
    if args.json:
        print(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        for c in result.counts:
            print(
                f"{c.kind:<18} zookeeper {c.zookeeper:>9}  kraft {c.kraft:>9}  mismatch {c.mismatch:>6}  "
                f"info {c.info:>6}  expected {c.expected:>6}"
            )
        for w in result.warnings:
            print(f"warning: {w}")
        print(result.verdict)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
