"""The API: one plain function per operator command, each returning a pydantic result.

The CLI only parses options, calls one of these and renders the result, so every command is as
usable from Python (tests, notebooks, automation) as from a shell.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kazoo.exceptions import AuthFailedError, KazooException
from kazoo.handlers.threading import KazooTimeoutError

from migrator.controller.core import DEFAULT_SESSION_TIMEOUT_MS
from migrator.controller.service import ControllerService
from migrator.errors import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_UNREACHABLE,
    FindingsError,
    PermissionDeniedError,
    UnreachableError,
)
from migrator.kraft.log import MetadataLog
from migrator.metrics import MigrationMetrics
from migrator.migration import checks, driver, log_binding, unsynced
from migrator.migration.admin import AdminChange
from migrator.migration.broker_config import BrokerConfigFile, check_broker_configs
from migrator.migration.checks import Finding, Severity
from migrator.migration.driver import DEFAULT_NODE_ID, DriverOptions
from migrator.migration.facts import LogFacts, derive, gather, gather_zk, log_exists
from migrator.migration.health import MigrationHealth, migration_health, migration_started
from migrator.model import MigrationZnode
from migrator.results import (
    AdminResult,
    CheckResult,
    CheckSummary,
    FinalizeResult,
    MigrateResult,
    PlanResult,
    RollbackResult,
    StatusResult,
    TruncateUnsyncedResult,
    ZkExportResult,
)
from migrator.zk.connection import ConnectSpec, close, connect, parse_auth
from migrator.zk.layout import image_from_tree
from migrator.zk.leadership import read_migration
from migrator.zk.reader import read_tree
from migrator.zk.tree import ZkTree


def check(
    zookeeper: str,
    zk_auth: Sequence[str] = (),
    zk_timeout: float = 10.0,
    broker_configs: Sequence[BrokerConfigFile] | None = None,
    jute_maxbuffer: int = checks.DEFAULT_JUTE_MAXBUFFER,
    log_dir: str | None = None,
    preflight: bool = False,
) -> CheckResult:
    """Read-only pre-flight: exit code 0 eligible, 1 blockers, 3 ZooKeeper unreachable or refused.

    Once migrating has begun (the log holds a migration state, or a KRaft controller claims
    ZooKeeper) the migration's health is reported instead: 0 healthy, 1 not. `preflight` forces the
    eligibility findings anyway (a claim left by a lost controller).

    With `log_dir` during dual-write, a record after /migration's offset that can never reach
    ZooKeeper is a blocker (LOG_RECORD_NEVER_SYNCED).

    Bad input (a malformed connect string, a missing chroot) raises BadInputError (exit 2).
    """
    spec = ConnectSpec.parse(zookeeper)
    findings: list[Finding] = []
    summary = CheckSummary(
        eligible=False,
        verdict="",
        blockers=0,
        warnings=0,
        infos=0,
        zookeeper=str(spec),
        reachable=False,
        jute_maxbuffer=jute_maxbuffer,
        broker_config_files=None if broker_configs is None else len(broker_configs),
    )
    unreachable = False
    registered: list[int] | None = None
    unbound: list[Finding] = []  # shown first: nothing else said about this log matters then
    t0 = time.perf_counter()
    try:
        tree = _read_view(zookeeper, zk_auth, zk_timeout)
    except PermissionDeniedError as e:
        unreachable = True
        findings.append(checks.finding(checks.ZK_AUTH_FAILED, str(e), paths=_paths_in(str(e))))
    except UnreachableError as e:
        unreachable = True
        info = checks.ZK_AUTH_FAILED if "AuthFailed" in str(e) else checks.ZK_UNREACHABLE
        findings.append(checks.finding(info, str(e)))
    else:
        summary.read_seconds = round(time.perf_counter() - t0, 3)
        t1 = time.perf_counter()
        layout = image_from_tree(tree, strict=False)
        image, control = layout.image, layout.control
        findings += checks.check_zk_view(image, control, tree, layout.problems, jute_maxbuffer)
        registered = sorted(checks.registered_broker_ids(image, tree))
        summary.reachable = True
        summary.zxid = tree.read_zxid if tree.consistent else (control.zxid or tree.max_zxid)
        summary.consistent = tree.consistent
        summary.cluster_id = image.cluster_id
        summary.brokers = len(registered)
        summary.topics = len(image.topics)
        summary.partitions = image.partition_count()
        summary.znodes = len(tree)
        summary.check_seconds = round(time.perf_counter() - t1, 3)
        if log_dir is not None:
            unbound = _binding_findings(zookeeper, zk_auth, zk_timeout, log_dir)
        stuck: list[Finding] = []
        if log_dir is not None and control.migration is not None and log_exists(log_dir) and not unbound:
            stuck = _stuck_findings(zookeeper, zk_auth, zk_timeout, log_dir, control.migration)
        findings += stuck
        c = control.controller
        claimed = c is not None and (c.kraft_controller_epoch > 0 or not c.ephemeral)
        if not unbound and not preflight and (claimed or (log_dir is not None and log_exists(log_dir))):
            in_progress = _migration_health(zookeeper, zk_auth, zk_timeout, log_dir)
            if in_progress is not None:
                return _health_result(summary, in_progress, stuck)
    if broker_configs is None:
        findings.append(
            checks.finding(
                checks.BROKER_CONFIG_NOT_CHECKED, "broker server.properties not checked (no --broker-config)"
            )
        )
    else:
        findings += check_broker_configs(broker_configs, registered)
    findings = unbound + checks.sort_findings(findings)
    counts = {s: sum(1 for f in findings if f.severity == s) for s in Severity}
    summary.blockers = counts[Severity.BLOCKER]
    summary.warnings = counts[Severity.WARNING]
    summary.infos = counts[Severity.INFO]
    summary.eligible = not unreachable and summary.blockers == 0
    if unreachable:
        exit_code = EXIT_UNREACHABLE
        summary.verdict = f"cannot read ZooKeeper at {summary.zookeeper}: eligibility unknown"
    elif summary.blockers:
        exit_code = EXIT_FINDINGS
        summary.verdict = f"NOT eligible for migration: {_n(summary.blockers, 'blocker')}, {_n(summary.warnings, 'warning')}"
    else:
        exit_code = EXIT_OK
        summary.verdict = "eligible for migration" + (
            f" ({_n(summary.warnings, 'warning')} to review)" if summary.warnings else ""
        )
    return CheckResult(findings=findings, summary=summary, exit_code=exit_code)


def _migration_health(
    zookeeper: str, zk_auth: Sequence[str], zk_timeout: float, log_dir: str | None
) -> MigrationHealth | None:
    """The migration's health when it has begun (None before): the eligibility checks no longer apply."""
    client = connect(zookeeper, auth=tuple(zk_auth), timeout=zk_timeout)
    try:
        facts = (
            gather(client, log_dir)
            if log_dir is not None
            else derive(LogFacts(log_dir=""), gather_zk(client))
        )
    finally:
        close(client)
    if not migration_started(facts):
        return None
    return migration_health(facts, log_dir, facts.derived.state.public_name)


def _health_result(summary: CheckSummary, h: MigrationHealth, stuck: list[Finding]) -> CheckResult:
    """`check` during a migration: exit 0 when healthy, 1 with the problems otherwise."""
    h.problems += [f.message for f in stuck]
    summary.eligible = False
    summary.blockers = summary.warnings = summary.infos = 0
    if h.healthy:
        summary.verdict = f"migration in progress ({h.state}) and healthy; next: {h.next_action}"
    else:
        summary.verdict = (
            f"migration in progress ({h.state}) and NOT healthy: {_n(len(h.problems), 'problem')}"
        )
    return CheckResult(
        findings=stuck, summary=summary, exit_code=EXIT_OK if h.healthy else EXIT_FINDINGS, migration=h
    )


def _read_view(zookeeper: str, zk_auth: Sequence[str], zk_timeout: float) -> ZkTree:
    """Kafka's znodes in one bulk read.

    Credentials are added after the session starts, one synchronous addAuth each, so a refused
    credential is an AuthFailedError here rather than a connection that vanishes mid-read (kazoo
    sends connect-time auth without waiting, and ZooKeeper closes the session on refusal).
    """
    # kazoo turns `sasl:user:password` into a SASL handshake only when given at construction.
    sasl = [a for a in zk_auth if a.partition(":")[0] == "sasl"]
    credentials = [(scheme, cred) for scheme, cred in parse_auth(zk_auth) if scheme != "sasl"]
    client = connect(zookeeper, auth=sasl, timeout=zk_timeout)
    try:
        for scheme, credential in credentials:
            try:
                client.add_auth(scheme, credential)
            except AuthFailedError:
                raise PermissionDeniedError(
                    f"ZooKeeper at {ConnectSpec.parse(zookeeper)} refused the --zk-auth credential "
                    f"of scheme {scheme!r}"
                ) from None
            except (KazooException, KazooTimeoutError) as e:
                raise UnreachableError(
                    f"lost ZooKeeper at {ConnectSpec.parse(zookeeper)} while authenticating: {type(e).__name__}"
                ) from None
        return read_tree(client)
    finally:
        close(client)


def _n(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _paths_in(message: str) -> list[str]:
    """The znode path an access error names (`... access to /brokers/ids: ...`)."""
    words = [w.rstrip(":,.;") for w in message.split()]
    return [w for w in words if w.startswith("/")][:1]


# --- the migration: migrate, plan, status, finalize, rollback, admin ------------------------------
# Each builds DriverOptions and calls the driver; the driver derives the state from the durable facts
# (the log and ZooKeeper) every time, so these functions keep nothing between calls.


def _driver_options(
    zookeeper: str,
    log_dir: str,
    zk_auth: Sequence[str],
    zk_timeout: float,
    node_id: int,
    say: Callable[[str], None] | None,
) -> DriverOptions:
    return DriverOptions(
        zookeeper=zookeeper,
        log_dir=log_dir,
        zk_auth=tuple(zk_auth),
        zk_timeout=zk_timeout,
        node_id=node_id,
        say=say,
    )


def migrate(
    zookeeper: str,
    log_dir: str,
    *,
    zk_auth: Sequence[str] = (),
    zk_timeout: float = 10.0,
    node_id: int = DEFAULT_NODE_ID,
    yes: bool = False,
    confirm: Callable[[str], bool] | None = None,
    brokers_from_zk: bool = False,
    follow: bool = False,
    stop: threading.Event | None = None,
    progress: Callable[[int, int], None] | None = None,
    say: Callable[[str], None] | None = None,
    listen: str | None = None,
    broker_wait_timeout: float = driver.DEFAULT_BROKER_WAIT_SECONDS,
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
    on_listen: Callable[[ControllerService, tuple[str, int]], None] | None = None,
    metrics: MigrationMetrics | None = None,
    recopy: bool = False,
) -> MigrateResult:
    """Run the migration from wherever it is to DualWriteMetadata; with `follow`, stay the controller
    until `stop` is set. With `listen` (HOST:PORT) the controller protocol is served there: brokers
    register before the copy (which waits up to `broker_wait_timeout` seconds for all of them) and talk
    to the controller after it. Refusals raise RefusedError (1), bad input 2, unreachable 3,
    fenced/locked 4; brokers that never registered raise BrokersNotReadyError (1)."""
    opts = _driver_options(zookeeper, log_dir, zk_auth, zk_timeout, node_id, say)
    opts.metrics = metrics  # the controller's Prometheus gauges, updated by the driver
    return driver.migrate(
        opts,
        yes=yes,
        confirm=confirm,
        brokers_from_zk=brokers_from_zk,
        follow=follow,
        stop=stop,
        progress=progress,
        listen=listen,
        broker_wait_timeout=broker_wait_timeout,
        session_timeout_ms=session_timeout_ms,
        on_listen=on_listen,
        recopy=recopy,
    )


class RunningController:
    """A controller (`migrate --follow --listen`) running on a thread of this process: for tests and
    the broker simulator. `address` is where it listens; `stop()` ends it and re-raises its error."""

    def __init__(self, thread: threading.Thread, stop: threading.Event) -> None:
        self.thread = thread
        self._stop = stop
        self.address: tuple[str, int] = ("", 0)
        self.service: ControllerService | None = None
        self.result: MigrateResult | None = None
        self.error: BaseException | None = None
        self.listening = threading.Event()

    @property
    def connect(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    def wait_until(self, predicate: Callable[[RunningController], bool], timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if not self.thread.is_alive() or time.monotonic() > deadline:
                return predicate(self)
            time.sleep(0.02)
        return True

    def stop(self, timeout: float = 30.0) -> MigrateResult | None:
        self._stop.set()
        self.thread.join(timeout)
        if self.error is not None:
            raise self.error
        return self.result


def start_controller(
    zookeeper: str,
    log_dir: str,
    *,
    listen: str = "127.0.0.1:0",
    timeout: float = 60.0,
    **kwargs: Any,
) -> RunningController:
    """Start `migrate(follow=True, listen=...)` on a thread and return once it listens (soft start
    included). Errors before it listens are raised here; later ones by `RunningController.stop`."""
    stop = threading.Event()
    holder: list[RunningController] = []

    def on_listen(service: ControllerService, address: tuple[str, int]) -> None:
        running = holder[0]
        running.service, running.address = service, address
        running.listening.set()

    def run() -> None:
        running = holder[0]
        try:
            running.result = migrate(
                zookeeper, log_dir, follow=True, stop=stop, listen=listen, on_listen=on_listen, **kwargs
            )
        except BaseException as e:  # handed to the caller by stop() / start_controller
            running.error = e
        finally:
            running.listening.set()

    thread = threading.Thread(target=run, name="zk2kraft-controller", daemon=True)
    holder.append(RunningController(thread, stop))
    thread.start()
    running = holder[0]
    if not running.listening.wait(timeout):
        stop.set()
        raise UnreachableError(f"the controller did not start listening on {listen} within {timeout:g}s")
    if running.error is not None and running.service is None:
        thread.join(5)
        raise running.error
    return running


def plan(
    zookeeper: str, log_dir: str, *, zk_auth: Sequence[str] = (), zk_timeout: float = 10.0
) -> PlanResult:
    """The copy as a dry run: records and bytes per type, batches, an estimate; writes nothing."""
    return driver.plan(_driver_options(zookeeper, log_dir, zk_auth, zk_timeout, DEFAULT_NODE_ID, None))


def status(
    zookeeper: str, log_dir: str, *, zk_auth: Sequence[str] = (), zk_timeout: float = 10.0
) -> StatusResult:
    """State, controller and epochs, /migration, log end, lag, brokers, last transition, next action."""
    return driver.status(_driver_options(zookeeper, log_dir, zk_auth, zk_timeout, DEFAULT_NODE_ID, None))


def finalize(
    zookeeper: str,
    log_dir: str,
    *,
    yes: bool = False,
    zk_auth: Sequence[str] = (),
    zk_timeout: float = 10.0,
    node_id: int = DEFAULT_NODE_ID,
    rehearsal: bool = False,
) -> FinalizeResult:
    """POST_MIGRATION; refused while lag > 0, while brokers are ZooKeeper-registered, while a broker of the
    copy has not registered as a KRaft broker (unless `rehearsal`), or without `yes`."""
    return driver.finalize(
        _driver_options(zookeeper, log_dir, zk_auth, zk_timeout, node_id, None), yes=yes, rehearsal=rehearsal
    )


def rollback(
    zookeeper: str,
    log_dir: str,
    *,
    yes: bool = False,
    zk_auth: Sequence[str] = (),
    zk_timeout: float = 10.0,
    node_id: int = DEFAULT_NODE_ID,
    force_orphaned: bool = False,
    accept_drift: bool = False,
) -> RollbackResult:
    """Back to ZooKeeper mode (not after finalize): drain, compare ZooKeeper with the log (refused when
    they differ unless `accept_drift`), archive the log, release ZooKeeper.
    `force_orphaned`: release although the bound log directory is lost (nothing is drained)."""
    return driver.rollback(
        _driver_options(zookeeper, log_dir, zk_auth, zk_timeout, node_id, None),
        yes=yes,
        force_orphaned=force_orphaned,
        accept_drift=accept_drift,
    )


def admin(
    zookeeper: str,
    log_dir: str,
    change: AdminChange,
    *,
    zk_auth: Sequence[str] = (),
    zk_timeout: float = 10.0,
    node_id: int = DEFAULT_NODE_ID,
    timeout: float = 60.0,
) -> AdminResult:
    """One change in DualWriteMetadata: to a running `migrate --follow`, or appended and synced here."""
    opts = _driver_options(zookeeper, log_dir, zk_auth, zk_timeout, node_id, None)
    return driver.admin(opts, change, timeout=timeout)


def admin_many(
    zookeeper: str,
    log_dir: str,
    changes: Iterable[AdminChange],
    *,
    zk_auth: Sequence[str] = (),
    zk_timeout: float = 10.0,
    node_id: int = DEFAULT_NODE_ID,
    timeout: float = 60.0,
    on_result: Callable[[AdminResult], None] | None = None,
) -> list[AdminResult]:
    """Changes in order, each appended and synced before the next; the first refused one raises."""
    opts = _driver_options(zookeeper, log_dir, zk_auth, zk_timeout, node_id, None)
    return driver.admin_many(opts, changes, timeout=timeout, on_result=on_result)


# --- audit and the ZooKeeper export (Spark) -------------------------------------------------------
# Imported lazily: Spark and pyarrow load only for the commands that use them.
import typing  # noqa: E402

if typing.TYPE_CHECKING:
    from spark_audit.audit import AuditResult


def audit(
    log_dir: str,
    *,
    phase: str | None = None,
    zookeeper: str | None = None,
    zk_auth: Sequence[str] = (),
    zk_timeout: float = 10.0,
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
    """ZooKeeper (live, a snapshot data dir, or an export) against the log, entity by entity, in Spark.

    Exit code in the result: 0 consistent (or finalized), 1 mismatches; bad input raises (2), Spark or
    an input that cannot be reached raises (3). `phase` defaults to what the derived state implies.
    """
    from spark_audit.audit import AuditOptions, run_audit

    opts = AuditOptions(
        log_dir=log_dir,
        phase=phase,
        zookeeper=zookeeper,
        zk_auth=list(zk_auth),
        zk_timeout=zk_timeout,
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
    return run_audit(opts, say=say)


def zk_export(
    zookeeper: str,
    out: str,
    *,
    zk_auth: Sequence[str] = (),
    zk_timeout: float = 10.0,
    progress: Callable[[int], None] | None = None,
) -> ZkExportResult:
    """A consistent copy of Kafka's ZooKeeper tree as the audit's rows in one Parquet file (`audit --zk-export`)."""
    from spark_audit.live import export_parquet

    identity = export_parquet(zookeeper, out, zk_auth, zk_timeout, progress)
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


def truncate_unsynced(
    zookeeper: str, log_dir: str, *, yes: bool = False, zk_auth: Sequence[str] = (), zk_timeout: float = 10.0
) -> TruncateUnsyncedResult:
    """Cut the log back to `/migration`'s offset when a record after it can never reach ZooKeeper.

    Refused (exit 1) without `yes`, (exit 2) when every record after the offset can still be synced,
    (exit 4) while another process holds the log's writer lock; docs/dual-write.md has the rule.
    """
    if not yes:
        raise FindingsError("truncate-unsynced drops records from the log: not confirmed (pass --yes)")
    client = connect(zookeeper, auth=tuple(zk_auth), timeout=zk_timeout)
    try:
        done = unsynced.truncate_unsynced(client, log_dir, read_migration(client))
    finally:
        close(client)
    return TruncateUnsyncedResult(
        stuck_record=str(done.stuck),
        end_offset_before=done.end_offset_before,
        end_offset=done.end_offset,
        migration_offset=done.migration_offset,
        dropped_offsets=done.end_offset_before - done.end_offset,
    )


def _binding_findings(
    zookeeper: str, zk_auth: Sequence[str], zk_timeout: float, log_dir: str
) -> list[Finding]:
    """--log-dir is not the log ZooKeeper's claim is bound to (log_binding)."""
    client = connect(zookeeper, auth=tuple(zk_auth), timeout=zk_timeout)
    try:
        found = log_binding.problem(client, gather(client, log_dir), log_dir)
    finally:
        close(client)
    return [] if found is None else [checks.finding(checks.LOG_NOT_BOUND, found.message)]


def _stuck_findings(
    zookeeper: str, zk_auth: Sequence[str], zk_timeout: float, log_dir: str, migration: MigrationZnode
) -> list[Finding]:
    client = connect(zookeeper, auth=tuple(zk_auth), timeout=zk_timeout)
    try:
        with MetadataLog.open(log_dir) as log:
            stuck = unsynced.find_stuck(client, log, migration)
    finally:
        close(client)
    if stuck is None:
        return []
    return [checks.finding(checks.LOG_RECORD_NEVER_SYNCED, str(stuck), paths=_paths_in(stuck.reason))]
