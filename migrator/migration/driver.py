"""The migration driver: runs the state machine from wherever the durable facts say it is.

Every command starts the same way: gather the facts (`facts.gather`) and derive the state; nothing is
remembered between runs except what the log and ZooKeeper hold. Then:

- `migrate`: MigrationIneligible → (check blockers, confirmation) → lock and format the log → claim
  ZooKeeper → copy → first sync → DualWriteMetadata. From MigratingZkData it aborts an interrupted
  copy and redoes it; from DualWriteMetadata it re-claims, reconciles ZooKeeper in full and syncs.
  `--follow` then stays the controller, syncing and serving admin hand-overs until SIGTERM/SIGINT.
- `finalize`: POST_MIGRATION once nothing is behind and no broker is ZooKeeper-registered.
- `rollback`: drain, archive the log, give ZooKeeper back with its epoch above KRaft's.
- `admin`: one validated change into the log, carried to ZooKeeper by the syncer.

Each process that writes ZooKeeper claims it with a fresh epoch above every epoch seen (the log's,
ZooKeeper's, the previous claimant's), as each Kafka controller leader has its own epoch; a process
with an older claim is fenced on its next multi.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoAuthError, NoNodeError
from pydantic import BaseModel

from migrator import stop as stopping
from migrator.controller import core as ctl_core
from migrator.controller.service import ControllerService
from migrator.errors import (
    BadInputError,
    FencedError,
    FindingsError,
    UnreachableError,
    ZkKraftError,
)
from migrator.kraft import handover
from migrator.kraft.image import MIGRATION_STATES, ImageBuilder, OpenTransaction, ReplayResult
from migrator.kraft.lock import LOCK_FILE, read_holder
from migrator.kraft.log import DEFAULT_MAX_BATCH_RECORDS, MetadataLog
from migrator.kraft.records import MetadataRecord, record
from migrator.metrics import MigrationMetrics
from migrator.migration import checks, drift, estimate, health, log_binding
from migrator.migration import copy as copy_mod
from migrator.migration.admin import (
    BIG_CHANGE_RECORDS,
    AdminChange,
    AdminReply,
    Inbox,
    plan_change,
    refused_state,
    reply_of,
    writer_lock_held,
)
from migrator.migration.facts import Facts, gather, gather_zk, log_exists, read_znode, require_own_log
from migrator.migration.faults import CrashPointWriter, crash_point
from migrator.migration.unsynced import find_stuck
from migrator.migration.zk_fit import refuse_oversized_change
from migrator.migration.zk_sync import Repair, SyncReport, ZkSyncer
from migrator.model import ClusterImage, MigrationZnode
from migrator.results import (
    AdminResult,
    ClaimInfo,
    FinalizeResult,
    MigrateResult,
    PlanResult,
    RollbackResult,
    StatusResult,
    TransitionInfo,
)
from migrator.zk import codec
from migrator.zk import paths as P
from migrator.zk.connection import ZkSecurity, close, connect, permission_denied
from migrator.zk.fenced_writer import retry_transient
from migrator.zk.layout import LayoutResult, image_from_tree
from migrator.zk.leadership import (
    Claim,
    claim_controller,
    read_claim,
    release_controller,
    write_migration_unconditionally,
)
from migrator.zk.reader import read_tree
from migrator.zk.tree import ZkTree
from state_machine import (
    GuardFacts,
    KafkaMigrationCode,
    MigrationEvent,
    MigrationState,
    TransitionRefused,
    transition,
)

__all__ = [
    "DEFAULT_NODE_ID",
    "AdminResult",
    "BrokersNotReadyError",
    "DriverOptions",
    "FinalizeResult",
    "MigrateResult",
    "PlanResult",
    "RefusedError",
    "RollbackResult",
    "StatusResult",
    "admin",
    "admin_many",
    "finalize",
    "migrate",
    "plan",
    "rollback",
    "status",
]

S = MigrationState
E = MigrationEvent
ZK_MIGRATION_STATE_KEY = 21  # ZkMigrationStateRecord
DEFAULT_NODE_ID = 3000
BROKERS_FLAG_MESSAGE = (
    "the copy waits for every ZooKeeper broker to register with the KRaft controller: pass --listen "
    "HOST:PORT (the controller address the brokers are configured with), or --brokers-from-zk to treat "
    "the live ZooKeeper registrations under /brokers/ids as migration-ready (a rehearsal option, see "
    "docs/migration.md)"
)
DEFAULT_BROKER_WAIT_SECONDS = 300.0

if TYPE_CHECKING:
    from migrator.controller.zk_propagator import ZkPropagator


def zk_propagator_status(log_dir: str, pid: int) -> list[dict[str, Any]] | None:
    from migrator.controller.zk_propagator import read_status

    return read_status(log_dir, pid)


class BrokersNotReadyError(FindingsError):
    """Wait-for-brokers timed out: the message names every broker that has not registered."""


# Blockers the driver resolves itself when it starts afresh: the leftovers of an earlier attempt.
_SELF_RESOLVED = {checks.LEFTOVER_MIGRATION_ZNODE.code, checks.MIGRATION_ZNODE_EMPTY.code}


class RefusedError(FindingsError):
    """The state machine refused a transition (exit 1): the message names the state and guard."""


def refused(e: TransitionRefused) -> RefusedError:
    return RefusedError(str(e))


def _transition(state: MigrationState, event: MigrationEvent, facts: GuardFacts) -> MigrationState:
    try:
        return transition(state, event, facts)
    except TransitionRefused as e:
        raise refused(e) from None


# --- options and results ------------------------------------------------------------------------------

Confirm = Callable[[str], bool]
Progress = Callable[[int, int], None]
Say = Callable[[str], None]


@dataclasses.dataclass
class DriverOptions:
    """Where and how: the same for every command."""

    zookeeper: str
    log_dir: str
    zk_auth: Sequence[str] = ()
    zk_timeout: float = 10.0
    node_id: int = DEFAULT_NODE_ID
    say: Say | None = None  # one-line progress notes (the CLI prints them on a terminal)
    metrics: MigrationMetrics | None = None  # the controller's Prometheus gauges (--metrics-listen)
    security: ZkSecurity | None = None  # TLS, SASL and the ACL flag of every session (the Target's)

    def note(self, text: str) -> None:
        if self.say is not None:
            self.say(text)


# --- plumbing --------------------------------------------------------------------------------------


@contextmanager
def _zk(opts: DriverOptions) -> Iterator[KazooClient]:
    # Reconnect without a bound: a writer rides out a ZooKeeper restart (each operation still gives
    # up after retry_transient's deadline, so nothing hangs for ever).
    client = connect(
        opts.zookeeper,
        auth=opts.zk_auth,
        timeout=opts.zk_timeout,
        security=opts.security,
        connection_tries=-1,
    )
    try:
        yield client
    finally:
        close(client)


def _jsonable(obj: Any) -> Any:
    """A syncer report or repair as JSON-ready data, whatever its class (pydantic, dataclass, ...)."""
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, str | int | float | bool) or obj is None:
        return obj
    return str(obj)


def _public(state: MigrationState) -> str:
    return state.public_name


def _kafka_name(code: int | None) -> str | None:
    return None if code is None else MIGRATION_STATES.get(code, f"UNKNOWN_{code}")


def _open_log(log_dir: str, cluster_id: str | None, node_id: int) -> MetadataLog:
    """The writable log: takes the writer lock (a second writer gets FencedError naming the holder)."""
    return MetadataLog.open(log_dir, writable=True, cluster_id=cluster_id, node_id=node_id)


def _next_epoch(log: MetadataLog, facts: Facts) -> int:
    """A fresh leader epoch: above the log's, ZooKeeper's controller epoch and any KRaft claimant's."""
    zk = facts.zk
    existing = zk.controller.kraft_controller_epoch if zk.controller is not None else -1
    migration_epoch = zk.migration.kraft_controller_epoch if zk.migration is not None else -1
    return max(log.latest_epoch, zk.zk_controller_epoch or 0, existing, migration_epoch) + 1


def _claim(
    client: KazooClient, log: MetadataLog, facts: Facts, node_id: int, covered: tuple[int, int]
) -> tuple[Claim, MigrationZnode]:
    """Claim ZooKeeper with a fresh epoch, then write /migration unconditionally (KAFKA-16171):
    `covered` is the (offset, epoch) ZooKeeper's data is known to cover, (-1, -1) before the copy."""
    zk = facts.zk
    if zk.zk_controller_epoch is None:
        raise BadInputError(
            f"{P.CONTROLLER_EPOCH} missing: is this a Kafka cluster? (check the chroot of --zookeeper)"
        )
    c = zk.controller
    bound = log_binding.problem(client, facts, str(log.log_dir), log=log)
    if bound is not None and bound.live:  # another live writer took the claim since the command began
        raise bound.error()
    unbound = log_binding.read_binding(client) is None  # a claim from before the binding: node ids
    if unbound and zk.kraft_holds_controller and c is not None and c.broker_id != node_id:
        raise FencedError(
            f"{P.CONTROLLER} is held by KRaft controller {c.broker_id} (epoch {c.kraft_controller_epoch}), "
            f"not by this log's node {node_id}: another controller runs this migration"
        )
    epoch = _next_epoch(log, facts)
    crash_point("claim.before")
    claim = claim_controller(client, node_id, epoch)
    crash_point("claim.after")
    migration = write_migration_unconditionally(
        client,
        MigrationZnode(
            kraft_controller_id=node_id,
            kraft_controller_epoch=claim.kraft_epoch,
            kraft_metadata_offset=covered[0],
            kraft_metadata_epoch=covered[1],
        ),
        claim,
    )
    log_binding.record_claim(client, claim, log_binding.identity_of(log, facts, claim.kraft_epoch))
    crash_point("claim.migration-written")
    return claim, migration


def _covered(facts: Facts, log: MetadataLog) -> tuple[int, int]:
    """What ZooKeeper covers per /migration, if that is believable for this log; else (-1, -1).

    /migration must name an offset this log holds, written in the epoch this log has at that offset:
    anything else (a stale znode, another log's offsets) is not carried over to the new claim.
    """
    m = facts.zk.migration
    if m is None or m.kraft_metadata_offset < 0 or m.kraft_metadata_offset > log.end_offset - 1:
        return (-1, -1)
    if log.epoch_for_offset(m.kraft_metadata_offset) != m.kraft_metadata_epoch:
        return (-1, -1)
    return (m.kraft_metadata_offset, m.kraft_metadata_epoch)


class GuardedSyncer:
    """The dual-write syncer behind the driver's one rule: once the log records POST_MIGRATION,
    nothing reaches ZooKeeper any more (the check reads only records appended since the last one)."""

    def __init__(self, inner: ZkSyncer, log: MetadataLog, checked_to: int) -> None:
        self.inner = inner
        self.log = log
        self.writer = inner.writer
        self._checked = checked_to
        self.metrics: MigrationMetrics | None = None

    def _guard(self) -> None:
        for offset, _epoch, rec in self.log.read(self._checked):
            if (
                isinstance(rec, MetadataRecord)
                and rec.api_key == ZK_MIGRATION_STATE_KEY
                and rec.fields["ZkMigrationState"] == int(KafkaMigrationCode.POST_MIGRATION)
            ):
                raise RefusedError(
                    f"the log records POST_MIGRATION at offset {offset}: the migration is finalized and "
                    "ZooKeeper is not written any more"
                )
        self._checked = max(self._checked, self.log.end_offset)

    def reconcile(self, image: ReplayResult | None = None, tree: ZkTree | None = None) -> list[Repair]:
        self._guard()
        t0 = time.perf_counter()
        repairs = self.inner.reconcile(image, tree)
        if self.metrics is not None:
            self.metrics.on_reconcile(time.perf_counter() - t0)
        return repairs

    def sync(self) -> SyncReport:
        self._guard()
        t0 = time.perf_counter()
        report = self.inner.sync()
        if self.metrics is not None:
            self.metrics.on_sync(time.perf_counter() - t0, report.records, report.ops, report.lag)
        return report

    def lag(self) -> int:
        return self.inner.lag()


def _syncer(
    client: KazooClient, log: MetadataLog, claim: Claim, migration: MigrationZnode, facts: Facts
) -> GuardedSyncer:
    """A syncer under `claim` for a log whose facts were just gathered (so known not finalized)."""
    if facts.log.migration_code == int(KafkaMigrationCode.POST_MIGRATION):
        raise RefusedError("the migration is finalized: ZooKeeper is not written any more")
    writer = CrashPointWriter(client, claim, migration)
    return GuardedSyncer(ZkSyncer(client, log, writer), log, facts.log.end_offset)


def _abort_reason(txn: OpenTransaction) -> str:
    return (
        f"zk2kraft: transaction {txn.name!r} begun at offset {txn.begin_offset} was interrupted "
        f"({txn.pending_records} records); aborted by a new controller"
    )


def _read_view(client: KazooClient) -> tuple[LayoutResult, list[checks.Finding]]:
    """ZooKeeper's view and the ZooKeeper-side check findings (the same checks as `zk2kraft check`)."""
    tree = read_tree(client)
    layout = image_from_tree(tree, strict=False)
    findings = checks.check_zk_view(layout.image, layout.control, tree, layout.problems)
    return layout, checks.sort_findings(findings)


def _replay_of(facts: Facts) -> ReplayResult:
    assert facts.log.replay is not None
    return facts.log.replay


# --- migrate ---------------------------------------------------------------------------------------

_RECOPY = ("--recopy", "ZooKeeper's data is copied again into this new log and the claim bound to it")
_ORPHANED = (
    "--force-orphaned",
    "ZooKeeper is released to ZooKeeper-mode controllers without draining the lost log",
)

# What the stop line (SIGTERM/SIGINT, migrator.stop) says for each phase of `migrate`: where it
# stopped and what the next run does. Each phase's safe points leave what a SIGKILL there would.
_BEFORE_COPY = ("before the copy", "the next `zk2kraft migrate` starts it again")
_WAITING = (
    "while waiting for brokers to register, before the copy",
    "nothing was copied; the next `zk2kraft migrate` waits for them again",
)
_COPYING = (
    "during the copy",
    "the copy transaction, if begun, is left open as after a crash: the next `zk2kraft migrate` aborts it "
    "and copies ZooKeeper again (all or nothing)",
)
_SYNCING = (
    "while syncing ZooKeeper (the copy is committed: DualWriteMetadata)",
    "the next `zk2kraft migrate` or `controller` reconciles ZooKeeper with the log and carries what it lacks",
)
_FOLLOWING = (
    "while following as the controller",
    "records in the log that ZooKeeper lacks are carried to it by the next `zk2kraft migrate --follow` "
    "or `controller`",
)


def migrate(
    opts: DriverOptions,
    *,
    yes: bool = False,
    confirm: Confirm | None = None,
    brokers_from_zk: bool = False,
    follow: bool = False,
    stop: threading.Event | None = None,
    progress: Progress | None = None,
    poll_interval: float = 0.05,
    listen: str | None = None,
    broker_wait_timeout: float = DEFAULT_BROKER_WAIT_SECONDS,
    session_timeout_ms: int = ctl_core.DEFAULT_SESSION_TIMEOUT_MS,
    on_listen: Callable[[ControllerService, tuple[str, int]], None] | None = None,
    recopy: bool = False,
) -> MigrateResult:
    """Run the migration from the derived state to DualWriteMetadata (and keep following with `follow`).

    With `listen`, the controller protocol is served on that address from the start: in soft start
    (registration and heartbeats only) while the copy waits for every ZooKeeper broker to register,
    then in full once the copy is committed. `on_listen` is given the service and its bound address
    (in-process users: tests, the broker simulator). `recopy`: take over from a lost log directory
    (log_binding): copy ZooKeeper into a new log and rebind the claim to it.
    """
    timings: dict[str, float] = {}
    started = time.perf_counter()
    with stopping.phase(*_BEFORE_COPY), _zk(opts) as client:
        facts = gather(client, opts.log_dir)
        state = facts.derived.state
        if opts.metrics is not None:
            opts.metrics.on_state(facts.log.migration_code)
            progress = opts.metrics.tee_progress(progress)
        result = MigrateResult(
            state_before=_public(state), state_after=_public(state), anomalies=list(facts.derived.anomalies)
        )
        takeover = log_binding.guard(client, facts, opts.log_dir, takeover=_RECOPY if recopy else None)
        if takeover is not None:
            opts.note(takeover)
            result.actions.append(takeover)
        if state is S.NONE:
            _transition(state, E.START, GuardFacts())
        if state is S.MIGRATION_FINALIZED:
            if follow:
                raise RefusedError(
                    "the migration is finalized: ZooKeeper is no longer written, there is nothing to follow"
                )
            result.actions.append("nothing to do: the migration is finalized")
            result.kafka_code_after = _kafka_name(facts.log.migration_code)
            result.log_end_offset = facts.log.end_offset
            result.migration_offset = (
                facts.zk.migration.kraft_metadata_offset if facts.zk.migration is not None else None
            )
            return result
        if state in (S.MIGRATION_INELIGIBLE, S.MIGRATING_ZK_DATA) and not brokers_from_zk and listen is None:
            raise BadInputError(BROKERS_FLAG_MESSAGE)
        if state is S.MIGRATION_INELIGIBLE:
            t0 = time.perf_counter()
            _preflight(client, facts, opts, yes, confirm, result)
            timings["preflight"] = round(time.perf_counter() - t0, 3)
            if facts.log.foreign_cluster is not None:
                result.archived_foreign_log = _archive(Path(opts.log_dir), "foreign")
                result.actions.append(
                    f"archived the log directory of cluster {facts.log.foreign_cluster} to "
                    f"{result.archived_foreign_log}"
                )
        else:
            require_own_log(facts)
        cluster_id = facts.zk.cluster_id or facts.log.cluster_id
        if cluster_id is None:
            raise BadInputError(
                f"{P.CLUSTER_ID} is missing: the log cannot be formatted without the cluster id"
            )
        formatted = not log_exists(opts.log_dir)
        log = _open_log(opts.log_dir, cluster_id, opts.node_id)
        try:
            if formatted:
                result.actions.append(
                    f"formatted {opts.log_dir} for cluster {cluster_id}, node {opts.node_id}"
                )
                crash_point("log.formatted")
            facts = gather(client, opts.log_dir, log)
            if facts.derived.state is not state:
                raise FencedError(
                    f"the migration moved from {_public(state)} to {_public(facts.derived.state)} while "
                    "this run started (another zk2kraft?); run it again"
                )
            if state is S.MIGRATION_INELIGIBLE and facts.zk.migration is not None:
                result.removed_stale_migration = _remove_stale_migration(client, facts)
                result.actions.append("removed the /migration znode left by an earlier attempt")
                facts = gather(client, opts.log_dir, log)
            runtime: _Listener | None = None
            try:
                if listen is not None and state is not S.DUAL_WRITE_METADATA and not brokers_from_zk:
                    t0 = time.perf_counter()
                    runtime = _soft_start(client, log, facts, opts, listen, session_timeout_ms, result)
                    if on_listen is not None:
                        on_listen(runtime.service, runtime.address)
                    with stopping.phase(*_WAITING):
                        _wait_for_brokers(client, runtime, opts, broker_wait_timeout, result, stop)
                    timings["wait_for_brokers"] = round(time.perf_counter() - t0, 3)
                    facts = gather(client, opts.log_dir, log)
                if state is S.DUAL_WRITE_METADATA:
                    with stopping.phase(*_SYNCING):
                        syncer = _resume_dual_write(client, log, facts, opts, result, timings)
                else:
                    hold: AbstractContextManager[None] = (
                        runtime.service.exclusive() if runtime is not None else nullcontext()
                    )
                    with hold:  # brokers wait while the copy writes the log
                        syncer = _claim_and_copy(client, log, facts, opts, result, timings, progress)
                        if runtime is not None and result.claim is not None:
                            # the claim started a new epoch in the log: what the service appends from
                            # here to its activation (registrations, heartbeats) belongs to it
                            runtime.service.epoch = result.claim.kraft_epoch
                facts = gather(client, opts.log_dir, log)
                if listen is not None:
                    assert result.claim is not None
                    if runtime is None:
                        runtime = _serve(
                            log, facts, opts, listen, session_timeout_ms, result.claim.kraft_epoch, syncer
                        )
                        if on_listen is not None:
                            on_listen(runtime.service, runtime.address)
                    else:
                        runtime.service.activate(
                            ImageBuilder(_replay_of(facts)), syncer, result.claim.kraft_epoch
                        )
                    runtime.propagate_to_zk_brokers(result.claim.zk_controller_epoch, opts)
                    result.actions.append(f"serving the controller protocol on {runtime.describe()}")
                result.state_after = _public(facts.derived.state)
                result.kafka_code_after = _kafka_name(facts.log.migration_code)
                if opts.metrics is not None:
                    opts.metrics.on_state(facts.log.migration_code)
                result.lag = facts.lag
                result.log_end_offset = facts.log.end_offset
                result.migration_offset = (
                    facts.zk.migration.kraft_metadata_offset if facts.zk.migration else None
                )
                timings["total"] = round(time.perf_counter() - started, 3)
                result.timings = timings
                opts.note(  # as it happens: a redirected log sees it now, not at shutdown
                    health.state_line(
                        result.state_before,
                        result.state_after,
                        result.kafka_code_after,
                        result.log_end_offset,
                        result.migration_offset,
                        result.lag,
                        result.manifest.records if result.manifest is not None else None,
                    )
                )
                if follow:
                    with stopping.phase(*_FOLLOWING):
                        _follow(
                            client,
                            log,
                            syncer,
                            opts,
                            result,
                            stop or threading.Event(),
                            poll_interval,
                            runtime.service if runtime is not None else None,
                        )
                        facts = gather(client, opts.log_dir, log)
                    result.lag = facts.lag
                    result.log_end_offset = facts.log.end_offset
                    result.migration_offset = (
                        facts.zk.migration.kraft_metadata_offset if facts.zk.migration else None
                    )
            finally:
                if runtime is not None:
                    runtime.close()
        finally:
            log.close()
    return result


# --- the controller protocol: soft start, wait for brokers -----------------------------------------


class _Listener:
    """The controller service and its protocol server, as the driver runs them."""

    def __init__(self, service: ControllerService, listen: str) -> None:
        from migrator.controller.listener_runtime import start_server

        self.service = service
        self.server = start_server(service, listen)
        self.address: tuple[str, int] = self.server.address
        self.propagator: ZkPropagator | None = None
        service.advertised = self.address
        service.start_timer()

    def describe(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    def propagate_to_zk_brokers(self, zk_controller_epoch: int, opts: DriverOptions) -> None:
        """From activation on, ZK-mode brokers learn every change from this controller (KIP-866)."""
        from migrator.controller.zk_propagator import ZkPropagator

        if self.propagator is None:
            svc = self.service
            self.propagator = ZkPropagator(
                svc,
                svc.core.config.node_id,
                zk_controller_epoch,
                say=svc.say,
                status_dir=opts.log_dir,
                metadata_version=svc.core.config.metadata_version,
            ).start()
            svc.zk_propagator = self.propagator
            if opts.metrics is not None:
                opts.metrics.track_zk_brokers(self.propagator.status_rows)

    def close(self) -> None:
        try:
            if self.propagator is not None:
                self.propagator.stop()
            self.server.stop()
        finally:
            self.service.stop()


def _controller_config(
    facts: Facts, opts: DriverOptions, session_timeout_ms: int
) -> ctl_core.ControllerConfig:
    replay = facts.log.replay
    mv = (replay.feature_levels if replay is not None else {}).get(
        "metadata.version", copy_mod.BOOTSTRAP_METADATA_VERSION
    )
    cluster_id = facts.zk.cluster_id or facts.log.cluster_id
    assert cluster_id is not None
    node_id = facts.log.node_id if facts.log.node_id is not None else opts.node_id
    return ctl_core.ControllerConfig(
        cluster_id=cluster_id, node_id=node_id, metadata_version=mv, session_timeout_ms=session_timeout_ms
    )


def _soft_start(
    client: KazooClient,
    log: MetadataLog,
    facts: Facts,
    opts: DriverOptions,
    listen: str,
    session_timeout_ms: int,
    result: MigrateResult,
) -> _Listener:
    """Serve registration and heartbeats before the copy, as a KIP-866 controller in PRE_MIGRATION.

    The registrations go into the log before the copy transaction (as Kafka's do), in an epoch of their
    own below the claim's. An interrupted copy is aborted first, so nothing lands inside it; a fresh log
    gets its bootstrap records first. The copy itself never writes RegisterBrokerRecords.
    """
    epoch = _next_epoch(log, facts)
    txn = facts.log.open_transaction
    if txn is not None:
        _transition(S.MIGRATING_ZK_DATA, E.ABORT_COPY, GuardFacts(copy_transaction_open=True))
        offset = copy_mod.abort_open_transaction(log, epoch, txn, _abort_reason(txn))
        result.aborted_transaction = f"{txn.name!r} begun at offset {txn.begin_offset}, aborted at {offset}"
        result.actions.append(f"aborted the interrupted transaction {result.aborted_transaction}")
    lf = facts.log
    if lf.migration_code is None and (
        lf.replay is None or "metadata.version" not in lf.replay.feature_levels
    ):
        copy_mod.append_bootstrap(log, epoch)
        result.actions.append(
            f"wrote the bootstrap records (metadata.version {copy_mod.BOOTSTRAP_METADATA_VERSION}, PRE_MIGRATION)"
        )
    facts = gather(client, opts.log_dir, log)
    service = ControllerService(
        log,
        ImageBuilder(_replay_of(facts)),
        _controller_config(facts, opts, session_timeout_ms),
        epoch,
        say=opts.say,
    )
    service.core.zk_broker_ids = frozenset(facts.zk.registered_brokers)
    if opts.metrics is not None:  # the log now holds PRE_MIGRATION; brokers register into the service
        opts.metrics.on_state(facts.log.migration_code)
        opts.metrics.watch_brokers(lambda: health.migrating_broker_count(service))
    runtime = _Listener(service, listen)
    result.actions.append(f"soft start: serving broker registration on {runtime.describe()}")
    opts.note(f"controller listening on {runtime.describe()} (soft start: registration and heartbeats only)")
    return runtime


def _serve(
    log: MetadataLog,
    facts: Facts,
    opts: DriverOptions,
    listen: str,
    session_timeout_ms: int,
    epoch: int,
    syncer: GuardedSyncer,
) -> _Listener:
    service = ControllerService(
        log,
        ImageBuilder(_replay_of(facts)),
        _controller_config(facts, opts, session_timeout_ms),
        epoch,
        syncer=syncer,
        say=opts.say,
    )
    service.core.zk_broker_ids = frozenset(facts.zk.registered_brokers)
    return _Listener(service, listen)


def _assignment_brokers(client: KazooClient) -> set[int]:
    """Every broker id in a replica assignment under /brokers/topics (a full scan, as Kafka's)."""
    try:
        names = retry_transient(lambda: client.get_children(P.TOPICS), f"listing {P.TOPICS}")
    except NoNodeError:
        return set()
    except NoAuthError:
        raise permission_denied(P.TOPICS) from None
    ids: set[int] = set()
    for name in names:
        path = P.topic_path(name)
        node = read_znode(client, path)
        if node is None:
            continue
        topic = codec.decode_topic(path, node[0])
        for replicas in (*topic.partitions.values(), *topic.adding_replicas.values()):
            ids.update(replicas)
    return ids


def brokers_missing(registered: set[int], zk_ids: set[int], assigned: set[int]) -> list[int]:
    """Kafka's areZkBrokersReadyForMigration as a list of what is missing (empty: ready)."""
    return sorted((zk_ids | assigned) - registered)


def _wait_for_brokers(
    client: KazooClient,
    runtime: _Listener,
    opts: DriverOptions,
    timeout: float,
    result: MigrateResult,
    stop: threading.Event | None,
) -> None:
    """WAIT_FOR_BROKERS: every id in /brokers/ids and in any replica assignment has registered over the
    protocol as a migrating ZooKeeper broker; unlike Kafka's driver this gives up after `timeout`
    seconds, naming each missing broker and where ZooKeeper mentions it."""
    service = runtime.service
    deadline = time.monotonic() + timeout
    last_read = -1e9
    zk_ids: set[int] = set()
    assigned: set[int] = set()
    said: list[int] | None = None

    def registered() -> set[int]:
        return {b.id for b in service.image.brokers.values() if b.is_migrating_zk_broker}

    while True:
        now = time.monotonic()
        if now - last_read >= 2.0:
            zk_ids = set(gather_zk(client).registered_brokers)
            assigned = _assignment_brokers(client)
            service.core.zk_broker_ids = frozenset(zk_ids)
            last_read = now
        with service.lock:
            have = registered()
        missing = brokers_missing(have, zk_ids, assigned)
        if not missing and have and zk_ids:
            result.actions.append(
                f"all {len(zk_ids | assigned)} ZooKeeper brokers registered with the KRaft controller: "
                + ", ".join(map(str, sorted(zk_ids | assigned)))
            )
            return
        if missing != said:
            opts.note(
                "waiting for brokers to register with the KRaft controller: "
                + (", ".join(map(str, missing)) if missing else "no broker is registered in ZooKeeper")
            )
            said = missing
        stopping.check(f"missing: {', '.join(map(str, missing)) or 'any broker'}")
        if now >= deadline or (stop is not None and stop.is_set()):
            raise BrokersNotReadyError(_missing_report(missing, zk_ids, assigned, have, runtime, timeout))
        service.wait_for(lambda image, seen=have: registered() != seen, min(0.5, max(0.0, deadline - now)))


def _missing_report(
    missing: list[int],
    zk_ids: set[int],
    assigned: set[int],
    have: set[int],
    runtime: _Listener,
    timeout: float,
) -> str:
    if not zk_ids:
        return (
            f"no broker is registered in ZooKeeper under {P.BROKER_IDS}: start the ZooKeeper-mode brokers "
            f"with migration enabled and the controller at {runtime.describe()}"
        )
    parts = []
    live = [b for b in missing if b in zk_ids]
    dead = [b for b in missing if b not in zk_ids]
    if live:
        parts.append(f"live in {P.BROKER_IDS}: {', '.join(map(str, live))}")
    if dead:
        parts.append(f"only in replica assignments (not running?): {', '.join(map(str, dead))}")
    return (
        f"{len(missing)} broker(s) did not register with the KRaft controller at {runtime.describe()} within "
        f"{timeout:g}s ({'; '.join(parts)}); registered: {', '.join(map(str, sorted(have))) or 'none'}. "
        "Check zookeeper.metadata.migration.enable and controller.quorum.voters on those brokers"
    )


def _preflight(
    client: KazooClient,
    facts: Facts,
    opts: DriverOptions,
    yes: bool,
    confirm: Confirm | None,
    result: MigrateResult,
) -> None:
    """MigrationIneligible → MigratingZkData: no blockers, brokers ready, the operator agrees."""
    opts.note("checking eligibility")
    layout, findings = _read_view(client)
    blockers = tuple(
        f.code for f in findings if f.severity == checks.Severity.BLOCKER and f.code not in _SELF_RESOLVED
    )
    if blockers:
        detail = "; ".join(
            f"{f.code}: {f.message}"
            for f in findings
            if f.code in blockers and f.severity == checks.Severity.BLOCKER
        )
        try:
            transition(S.MIGRATION_INELIGIBLE, E.START, GuardFacts(blockers=blockers, confirmed=yes))
        except TransitionRefused as e:
            raise RefusedError(f"{e}. {detail}") from None
    image = layout.image
    pending = set(image.pending_deletions)
    topics = [t for t in image.topics if t not in pending]
    partitions = sum(len(image.topics[t].partitions) for t in topics)
    extra = ""
    if facts.log.foreign_cluster is not None:
        extra += (
            f" The log directory holds cluster {facts.log.foreign_cluster}'s log: it will be renamed aside "
            "(kept) and a fresh one created."
        )
    if facts.zk.migration is not None:
        extra += " The /migration znode left by an earlier attempt will be removed; the copy starts afresh."
    question = (
        f"Migrate cluster {image.cluster_id} ({len(topics)} topics, {partitions} partitions, "
        f"{len(image.brokers)} brokers registered in ZooKeeper) into {opts.log_dir} as KRaft controller "
        f"{opts.node_id}? ZooKeeper-mode controllers stop being elected from now on.{extra}"
    )
    confirmed = yes or (confirm is not None and confirm(question))
    _transition(S.MIGRATION_INELIGIBLE, E.START, GuardFacts(blockers=(), confirmed=confirmed))
    result.actions.append("pre-flight passed: no blockers" + (" (confirmed)" if confirmed else ""))


def _archive(path: Path, why: str) -> str:
    """Rename a log directory aside (never delete it), under its writer lock; returns the new path."""
    from migrator.kraft.lock import WriterLock

    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.{why}-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.{why}-{stamp}-{n}")
    lock = WriterLock(path).acquire()
    try:
        os.rename(path, target)
        fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise UnreachableError(f"cannot rename {path} to {target}: {e.strerror}") from None
    finally:
        lock.release()
    return str(target)


def _remove_stale_migration(client: KazooClient, facts: Facts) -> dict[str, int]:
    """Delete a /migration left by an earlier attempt (the Strimzi #11262 trap): never resume from it."""
    m = facts.zk.migration
    assert m is not None
    try:
        retry_transient(lambda: client.delete(P.MIGRATION, version=m.zk_version), f"deleting {P.MIGRATION}")
    except NoNodeError:
        pass
    except BadVersionError:
        raise FencedError(
            f"{P.MIGRATION} changed while zk2kraft removed it: another controller is active"
        ) from None
    except NoAuthError:
        raise permission_denied(P.MIGRATION) from None
    crash_point("stale-migration.removed")
    return {
        "kraft_controller_id": m.kraft_controller_id,
        "kraft_controller_epoch": m.kraft_controller_epoch,
        "kraft_metadata_offset": m.kraft_metadata_offset,
        "kraft_metadata_epoch": m.kraft_metadata_epoch,
    }


def _claim_and_copy(
    client: KazooClient,
    log: MetadataLog,
    facts: Facts,
    opts: DriverOptions,
    result: MigrateResult,
    timings: dict[str, float],
    progress: Progress | None,
) -> GuardedSyncer:
    """MigratingZkData: claim, bootstrap a fresh log, abort an interrupted copy, copy, first sync.

    timings["dark_window"] spans the claim to DualWriteMetadata: the controller serves nothing but
    registrations and heartbeats meanwhile (KIP-866), so it is the figure the single-read work targets.
    """
    t0 = time.perf_counter()
    with stopping.phase(*_COPYING):
        syncer_args = _claim_and_copy_only(client, log, facts, opts, result, timings, progress)
    with stopping.phase(*_SYNCING):
        syncer = _first_sync(client, *syncer_args, opts, result, timings)
    timings["dark_window"] = round(time.perf_counter() - t0, 3)
    return syncer


def _claim_and_copy_only(
    client: KazooClient,
    log: MetadataLog,
    facts: Facts,
    opts: DriverOptions,
    result: MigrateResult,
    timings: dict[str, float],
    progress: Progress | None,
) -> tuple[MetadataLog, Facts, Claim, MigrationZnode, ZkTree | None]:
    t0 = time.perf_counter()
    opts.note("claiming ZooKeeper controllership")
    claim, migration = _claim(client, log, facts, opts.node_id, (-1, -1))
    result.claim = ClaimInfo(
        kraft_controller_id=claim.kraft_controller_id,
        kraft_epoch=claim.kraft_epoch,
        zk_controller_epoch=claim.zk_controller_epoch,
    )
    result.actions.append(
        f"claimed /controller as KRaft controller {claim.kraft_controller_id} in epoch {claim.kraft_epoch} "
        f"(/controller_epoch {claim.zk_controller_epoch})"
    )
    timings["claim"] = round(time.perf_counter() - t0, 3)
    lf = facts.log
    replay = lf.replay
    if lf.migration_code is None and (replay is None or "metadata.version" not in replay.feature_levels):
        copy_mod.append_bootstrap(log, claim.kraft_epoch)
        result.actions.append(
            f"wrote the bootstrap records (metadata.version {copy_mod.BOOTSTRAP_METADATA_VERSION}, PRE_MIGRATION)"
        )
    if lf.open_transaction is not None:
        txn = lf.open_transaction
        _transition(S.MIGRATING_ZK_DATA, E.ABORT_COPY, GuardFacts(copy_transaction_open=True))
        offset = copy_mod.abort_open_transaction(log, claim.kraft_epoch, txn, _abort_reason(txn))
        result.aborted_transaction = f"{txn.name!r} begun at offset {txn.begin_offset}, aborted at {offset}"
        result.actions.append(
            f"aborted the interrupted transaction {result.aborted_transaction}; copying again"
        )
    opts.note("reading ZooKeeper")
    t1 = time.perf_counter()
    layout, zxid, consistent, tree = copy_mod.read_zk_tree_image(client)
    read_seconds = time.perf_counter() - t1
    opts.note("copying into the log")
    manifest = copy_mod.copy_zk_data(
        log,
        claim.kraft_epoch,
        layout,
        zxid=zxid,
        consistent=consistent,
        read_seconds=read_seconds,
        progress=progress,
    )
    timings["copy"] = manifest.duration_seconds
    result.manifest = manifest
    result.actions.append(
        f"copied {manifest.records} records ({manifest.topics} topics, {manifest.partitions} partitions) in "
        f"{manifest.batches} batches, offsets {manifest.first_offset}-{manifest.last_offset}"
    )
    facts = gather(client, opts.log_dir, log)
    _transition(S.MIGRATING_ZK_DATA, E.COMMIT_COPY, GuardFacts(copy_committed=facts.log.migration_code == 1))
    # The claim fences every other controller before this read, so the first sync reconciles from it
    # instead of reading ZooKeeper again; a read that was not one consistent view is not reused.
    return log, facts, claim, migration, (tree if consistent else None)


def _first_sync(
    client: KazooClient,
    log: MetadataLog,
    facts: Facts,
    claim: Claim,
    migration: MigrationZnode,
    tree: ZkTree | None,
    opts: DriverOptions,
    result: MigrateResult,
    timings: dict[str, float],
) -> GuardedSyncer:
    """SYNC_KRAFT_TO_ZK: ZooKeeper reconciled against the image (from the copy's `tree`), then the records."""
    opts.note("reconciling ZooKeeper with the log")
    t0 = time.perf_counter()
    # the copy is committed now: its (offset, epoch) joins the log identity bound to the claim
    log_binding.record_claim(client, claim, log_binding.identity_of(log, facts, claim.kraft_epoch))
    syncer = _syncer(client, log, claim, migration, facts)
    syncer.metrics = opts.metrics
    repairs = syncer.reconcile(_replay_of(facts), tree)
    crash_point("sync.after-reconcile")
    result.repairs = [_jsonable(r) for r in repairs]
    timings["reconcile"] = round(time.perf_counter() - t0, 3)
    t1 = time.perf_counter()
    report = syncer.sync()
    crash_point("sync.after-sync")
    result.sync = _jsonable(report)
    timings["sync"] = round(time.perf_counter() - t1, 3)
    result.actions.append(
        f"reconciled ZooKeeper ({len(repairs)} repair{'s' if len(repairs) != 1 else ''}) and synced the log"
    )
    return syncer


def _resume_dual_write(
    client: KazooClient,
    log: MetadataLog,
    facts: Facts,
    opts: DriverOptions,
    result: MigrateResult,
    timings: dict[str, float],
) -> GuardedSyncer:
    """DualWriteMetadata after a restart: close a dangling transaction, re-claim, reconcile, sync."""
    t0 = time.perf_counter()
    covered = _covered(facts, log)
    claim, migration = _claim(client, log, facts, opts.node_id, covered)
    result.claim = ClaimInfo(
        kraft_controller_id=claim.kraft_controller_id,
        kraft_epoch=claim.kraft_epoch,
        zk_controller_epoch=claim.zk_controller_epoch,
    )
    result.actions.append(
        f"re-claimed /controller in epoch {claim.kraft_epoch}"
        + (
            ""
            if covered[0] >= 0
            else "; /migration did not cover this log, so ZooKeeper is reconciled in full"
        )
    )
    timings["claim"] = round(time.perf_counter() - t0, 3)
    txn = facts.log.open_transaction
    if txn is not None:
        offset = copy_mod.abort_open_transaction(log, claim.kraft_epoch, txn, _abort_reason(txn))
        result.aborted_transaction = f"{txn.name!r} begun at offset {txn.begin_offset}, aborted at {offset}"
        result.actions.append(f"aborted the dangling transaction {result.aborted_transaction}")
        facts = gather(client, opts.log_dir, log)
    # after a takeover ZooKeeper is reconciled from a fresh read: another writer may have been at work
    return _first_sync(client, log, facts, claim, migration, None, opts, result, timings)


# --- follow: stay the controller ------------------------------------------------------------------


def _live_brokers(client: KazooClient, ids: Sequence[int]) -> dict[int, str | None]:
    """Registered ZooKeeper brokers and their racks (for replica placement)."""
    out: dict[int, str | None] = {}
    for broker_id in ids:
        path = P.broker_path(broker_id)
        node = read_znode(client, path)
        if node is not None:
            out[broker_id] = codec.decode_broker(path, node[0], broker_id).rack
    return out


class _Controller:
    """What a running writer keeps: the log, its image, the claim's syncer."""

    def __init__(
        self,
        client: KazooClient,
        log: MetadataLog,
        syncer: GuardedSyncer,
        epoch: int,
        facts: Facts,
        service: ControllerService | None = None,
    ) -> None:
        self.client = client
        self.log = log
        self.syncer = syncer
        self.epoch = epoch
        assert facts.log.replay is not None
        # With a protocol service running, its image is the one image: admin changes replay into it.
        self.builder = service.builder if service is not None else ImageBuilder(facts.log.replay)
        self.service = service

    @property
    def image(self) -> ClusterImage:
        return self.builder.image

    def apply(self, change: AdminChange, after_append: str, validate_only: bool = False) -> AdminReply:
        """Validate, append, sync: the one way an admin change enters the migration (the inbox's and
        the protocol's, `controller.admin_api`). `validate_only`: validate and stop there."""
        needs_brokers = change.kind in ("create-topic", "add-partitions", "alter-broker-config")
        if self.service is not None and change.kind != "alter-broker-config":
            # The live ZooKeeper brokers (ids refreshed by the follow loop) and unfenced KRaft brokers,
            # racks from their registrations: no ZooKeeper read per broker per topic (issue 13's bench).
            zk_ids = self.service.core.zk_broker_ids
            regs = self.image.brokers
            brokers = {i: regs[i].rack if i in regs else None for i in zk_ids}
            brokers.update(
                {b.id: b.rack for b in regs.values() if not b.fenced and not b.is_migrating_zk_broker}
            )
        else:
            brokers = (
                _live_brokers(self.client, gather_zk(self.client).registered_brokers) if needs_brokers else {}
            )
        planned = plan_change(change, self.image, brokers)
        if planned.noop:
            return AdminReply(ok=True, message=planned.summary, follower_pid=os.getpid())
        records: list[MetadataRecord] = planned.records
        if len(records) > BIG_CHANGE_RECORDS:
            records = [
                record("BeginTransactionRecord", 0, Name=f"zk2kraft {change.kind}"),
                *records,
                record("EndTransactionRecord", 0),
            ]
        # Before anything is appended: a write ZooKeeper can never take would stall the lag for good.
        refuse_oversized_change(self.syncer.writer, self.image, records, self.syncer.inner.state_epoch)
        if validate_only:
            return AdminReply(ok=True, message=planned.summary, follower_pid=os.getpid())
        first, last = self.log.append(records, self.epoch, max_batch_records=DEFAULT_MAX_BATCH_RECORDS)
        for i, rec in enumerate(records):
            self.builder.replay(first + i, rec)
        self.builder.finish()
        crash_point(after_append)
        self.syncer.sync()
        crash_point("admin.synced")
        covered = self.syncer.writer.migration.kraft_metadata_offset
        return AdminReply(
            ok=True,
            message=planned.summary,
            first_offset=first,
            last_offset=last,
            records=len(records),
            migration_offset=covered,
            topic_id=planned.topic_id,
            follower_pid=os.getpid(),
        )


def _follow(
    client: KazooClient,
    log: MetadataLog,
    syncer: GuardedSyncer,
    opts: DriverOptions,
    result: MigrateResult,
    stop: threading.Event,
    poll_interval: float,
    service: ControllerService | None = None,
) -> None:
    """Keep running as the controller: serve the admin inbox, sync what the log holds, until `stop`.

    A lost ZooKeeper is retried with backoff (the syncer resumes from /migration); being fenced by a
    newer controller ends the loop with FencedError. With a protocol `service`, its lock orders the
    admin changes and syncs here with the brokers' requests (one writer of the log, one image).
    """
    facts = gather(client, opts.log_dir, log)
    if facts.derived.state is not S.DUAL_WRITE_METADATA:
        raise RefusedError(
            f"--follow needs DualWriteMetadata; the migration is in {_public(facts.derived.state)}"
        )
    assert result.claim is not None
    ctl = _Controller(client, log, syncer, result.claim.kraft_epoch, facts, service)

    def exclusive() -> AbstractContextManager[None]:
        return service.exclusive() if service is not None else nullcontext()

    if opts.metrics is not None:
        opts.metrics.track_lag(syncer.lag)  # read at each scrape, so a sync stuck on ZooKeeper shows
    inbox = Inbox(opts.log_dir)
    inbox.announce()
    if service is not None:

        def admin(change: AdminChange, validate_only: bool) -> AdminReply:
            with exclusive():
                reply = ctl.apply(change, "follow.appended", validate_only)
                result.changes_applied += 0 if reply.records == 0 else 1
            return reply

        service.admin = admin  # the protocol's admin APIs, until this loop ends
    started = time.perf_counter()
    delay = poll_interval
    ids_read = time.monotonic()
    opts.note(f"following as the controller (pid {os.getpid()}); stop with SIGTERM or Ctrl-C")
    try:
        while not stop.is_set():
            if service is not None and service.fenced:  # outside the retry: it cannot serve again
                raise service.failure or FencedError(
                    "the controller was fenced by a newer one while serving brokers"
                )
            try:
                for path in inbox.pending():
                    rid, change, error = inbox.take(path)
                    if change is None:
                        if error != "withdrawn":
                            inbox.answer(rid, AdminReply(ok=False, exit_code=2, message=error))
                        continue
                    try:
                        with exclusive():
                            reply = ctl.apply(change, "follow.appended")
                        result.changes_applied += 0 if reply.records == 0 else 1
                    except FencedError:
                        inbox.answer(
                            rid, reply_of(FencedError("the follower was fenced by a newer controller"))
                        )
                        raise
                    except (
                        stopping.Stopped
                    ) as e:  # the change may be in the log: ZooKeeper gets it next start
                        inbox.answer(rid, reply_of(UnreachableError(f"the follower was {e}")))
                        raise
                    except (BadInputError, FindingsError) as e:
                        reply = reply_of(e)
                    inbox.answer(rid, reply)
                    opts.note(health.admin_line(change.describe(), reply))
                with exclusive():
                    if syncer.lag() > 0:
                        syncer.sync()
                    if opts.metrics is not None:
                        brokers = ctl.image.brokers.values()
                        opts.metrics.on_follow(
                            syncer.lag(), sum(1 for b in brokers if b.is_migrating_zk_broker)
                        )
                if service is not None and time.monotonic() - ids_read >= 2.0:
                    # A ZooKeeper broker that stopped frees its id for a KRaft broker (the roll).
                    service.core.zk_broker_ids = frozenset(gather_zk(client).registered_brokers)
                    ids_read = time.monotonic()
                delay = poll_interval
            except FencedError:
                raise
            except UnreachableError as e:
                opts.note(f"ZooKeeper unavailable ({e}); retrying in {delay:.1f}s")
                delay = min(delay * 2, 5.0)
            stop.wait(delay)
    finally:
        if service is not None:
            service.admin = None
        inbox.retire()
        result.followed_seconds = round(time.perf_counter() - started, 3)


# --- plan ------------------------------------------------------------------------------------------


def plan(opts: DriverOptions) -> PlanResult:
    """The copy as a dry run: reads ZooKeeper and the log, writes nothing anywhere."""
    with _zk(opts) as client:
        facts = gather(client, opts.log_dir)
        state = facts.derived.state
        if state not in (S.MIGRATION_INELIGIBLE, S.MIGRATING_ZK_DATA):
            return PlanResult(
                state=_public(state),
                message=f"nothing to copy: the migration is in {_public(state)} (see `zk2kraft status`)",
            )
        tree, layout, read_seconds = estimate.read_view(client)
    fresh = not facts.log.exists or (
        facts.log.migration_code is None
        and (facts.log.replay is None or "metadata.version" not in facts.log.replay.feature_levels)
    )
    p = copy_mod.plan_copy(layout, fresh_log=fresh, read_seconds=read_seconds)
    phases = estimate.estimate_phases(tree, layout, read_seconds, p)
    return PlanResult(
        state=_public(state),
        plan=p,
        phases=phases,
        message=(
            f"the copy would append {p.records} records ({p.bytes} bytes) in {p.batches} batches; "
            f"{phases.describe()}"
        ),
    )


# --- status ----------------------------------------------------------------------------------------


def _writer_holder(log_dir: str) -> str | None:
    """Who holds the log's writer lock now, without taking it."""
    if not writer_lock_held(Path(log_dir)):
        return None
    holder = read_holder(Path(log_dir) / LOCK_FILE)
    return holder.describe() if holder else "an unnamed process"


def _next_action(facts: Facts) -> str:
    state = facts.derived.state
    lag = facts.lag
    if state is S.DUAL_WRITE_METADATA:
        if lag > 0:
            return (
                f"{lag} committed records are not in ZooKeeper yet: keep `zk2kraft migrate --follow` running "
                "or run `zk2kraft migrate` once; then roll brokers to KRaft and `zk2kraft finalize`"
            )
        if facts.zk.registered_brokers:
            ids = ", ".join(map(str, facts.zk.registered_brokers))
            return (
                f"roll the brokers to KRaft mode (still registered in ZooKeeper: {ids}), then "
                "`zk2kraft finalize`; `zk2kraft rollback` is still possible"
            )
    return facts.derived.next_action


def status(opts: DriverOptions) -> StatusResult:
    """Everything an operator asks before the next step; reads both sides, writes nothing."""
    stuck = None
    with _zk(opts) as client:
        facts = gather(client, opts.log_dir)
        unbound = log_binding.problem(client, facts, opts.log_dir)
        if facts.lag > 0 and facts.zk.migration is not None and log_exists(opts.log_dir):
            with MetadataLog.open(opts.log_dir) as mlog:
                stuck = find_stuck(client, mlog, facts.zk.migration)
    d = facts.derived
    zk = facts.zk
    lf = facts.log
    last: TransitionInfo | None = None
    if lf.migration_code is not None and lf.migration_offset is not None:
        ts = lf.migration_timestamp_ms
        last = TransitionInfo(
            kafka_code=lf.migration_code,
            kafka_state=_kafka_name(lf.migration_code) or "",
            offset=lf.migration_offset,
            timestamp_ms=ts,
            time=None if ts is None else time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(ts / 1000)),
        )
    m = zk.migration
    c = zk.controller
    writer = _writer_holder(opts.log_dir) if log_exists(opts.log_dir) else None
    follower = Inbox(opts.log_dir).follower_pid() if writer else None
    channels = zk_propagator_status(opts.log_dir, follower) if follower else None
    writer_info = health.read_writer(opts.log_dir)
    next_action, notes = health.status_advice(facts, writer_info, _next_action(facts))
    anomalies = list(d.anomalies) + notes
    if unbound is not None:  # first: nothing else said about this log matters while it is not the one
        anomalies.insert(0, unbound.message)
        next_action = "check --log-dir: ZooKeeper's claim belongs to the log directory named above"
    if stuck is not None:
        anomalies.append(f"{stuck}; the lag can never drain: run `zk2kraft log truncate-unsynced --yes`")
    if lf.foreign_cluster is not None:
        anomalies.append(
            f"the log directory belongs to cluster {lf.foreign_cluster}, not to ZooKeeper's {zk.cluster_id}"
        )
    return StatusResult(
        state=_public(d.state),
        state_code=int(d.state),
        kafka_code=int(d.kafka_code) if d.kafka_code is not None else None,
        kafka_state=d.kafka_code.name if d.kafka_code is not None else None,
        reason=d.reason,
        next_action=next_action,
        anomalies=anomalies,
        log_binding=None if unbound is None else unbound.message,
        cluster_id=zk.cluster_id,
        controller_id=c.broker_id if c is not None else None,
        controller_is_kraft=zk.kraft_holds_controller,
        kraft_epoch=c.kraft_controller_epoch if c is not None and zk.kraft_holds_controller else None,
        zk_controller_epoch=zk.zk_controller_epoch,
        migration_znode=(
            None
            if m is None
            else {
                "kraft_controller_id": m.kraft_controller_id,
                "kraft_controller_epoch": m.kraft_controller_epoch,
                "kraft_metadata_offset": m.kraft_metadata_offset,
                "kraft_metadata_epoch": m.kraft_metadata_epoch,
                "zk_version": m.zk_version,
            }
        ),
        log_dir=opts.log_dir,
        log_exists=lf.exists,
        log_end_offset=lf.end_offset,
        log_last_record_offset=lf.last_record_offset,
        log_epoch=lf.latest_epoch,
        open_transaction=(
            None
            if lf.open_transaction is None
            else f"{lf.open_transaction.name!r} since offset {lf.open_transaction.begin_offset}"
        ),
        write_behind_lag=facts.lag,
        stuck_record=None if stuck is None else str(stuck),
        zk_registered_brokers=zk.registered_brokers,
        kraft_registered_brokers=sorted(lf.replay.image.brokers) if lf.replay is not None else [],
        migrating_zk_brokers=(
            sorted(b.id for b in lf.replay.image.brokers.values() if b.is_migrating_zk_broker)
            if lf.replay is not None
            else []
        ),
        last_transition=last,
        writer=writer,
        writer_info=writer_info,
        follower_pid=follower,
        zk_broker_channels=channels,
        manifest=copy_mod.read_manifest(opts.log_dir) if lf.exists else None,
    )


# --- finalize --------------------------------------------------------------------------------------


def finalize(opts: DriverOptions, *, yes: bool = False, rehearsal: bool = False) -> FinalizeResult:
    """DualWriteMetadata → MigrationFinalized: POST_MIGRATION in the log; ZooKeeper is not written again."""
    with _zk(opts) as client:
        facts = gather(client, opts.log_dir)
        log_binding.guard(client, facts, opts.log_dir)
        state = facts.derived.state
        _guard_finalize(state, facts, yes)
        require_own_log(facts)
        log = _open_log(
            opts.log_dir,
            facts.zk.cluster_id,
            opts.node_id if facts.log.node_id is None else facts.log.node_id,
        )
        try:
            facts = gather(client, opts.log_dir, log)
            _guard_finalize(facts.derived.state, facts, yes)
            health.require_kraft_brokers(facts, rehearsal)
            crash_point("finalize.before-record")
            epoch = _next_epoch(log, facts)
            _, offset = log.append(
                [
                    record(
                        "ZkMigrationStateRecord", 0, ZkMigrationState=int(KafkaMigrationCode.POST_MIGRATION)
                    )
                ],
                epoch,
            )
            after = gather(client, opts.log_dir, log)
            handover.prepare(log)  # issue 15: the directory Kafka's own controller starts from
        finally:
            log.close()
    return FinalizeResult(
        state_before=_public(state),
        state_after=_public(after.derived.state),
        offset=offset,
        epoch=epoch,
        message=(
            f"wrote ZkMigrationStateRecord(POST_MIGRATION) at offset {offset}: the migration is finalized and "
            "ZooKeeper receives no more writes; it cannot be rolled back"
        ),
    )


def _guard_finalize(state: MigrationState, facts: Facts, yes: bool) -> None:
    _transition(
        state,
        E.FINALIZE,
        GuardFacts(
            write_behind_lag=facts.lag,
            zk_registered_brokers=tuple(facts.zk.registered_brokers),
            confirmed=yes,
        ),
    )


# --- rollback --------------------------------------------------------------------------------------


def rollback(
    opts: DriverOptions, *, yes: bool = False, force_orphaned: bool = False, accept_drift: bool = False
) -> RollbackResult:
    """Back to ZooKeeper mode from MigratingZkData or DualWriteMetadata.

    Drains the syncer first (ZooKeeper must hold everything the log committed), then renames the log
    directory aside (kept for forensics) *before* releasing ZooKeeper, so a crash in between never
    leaves a log that a later `migrate` could resume from. The release deletes /controller and
    /migration and lifts /controller_epoch above every KRaft epoch (KAFKA-20488).
    """
    with _zk(opts) as client:
        facts = gather(client, opts.log_dir)
        takeover = log_binding.guard(
            client, facts, opts.log_dir, takeover=_ORPHANED if force_orphaned else None, archived_ok=True
        )
        state = facts.derived.state
        # Refuses a state without rollback (finalized, ineligible) or a missing --yes before any write;
        # the lag guard is checked again once the syncer has drained.
        _transition(state, E.ROLLBACK, GuardFacts(confirmed=yes))
        result = RollbackResult(
            state_before=_public(state), state_after=_public(state), kraft_epoch=-1, zk_controller_epoch=-1
        )
        if takeover is not None:
            result.actions.append(takeover)
        log: MetadataLog | None = None
        if facts.log.exists:
            log = _open_log(
                opts.log_dir,
                facts.zk.cluster_id,
                facts.log.node_id if facts.log.node_id is not None else opts.node_id,
            )
        elif facts.log.foreign_cluster is not None:
            require_own_log(facts)
        try:
            claim: Claim | None = None
            if log is not None:
                facts = gather(client, opts.log_dir, log)
                state = facts.derived.state
                if state is S.DUAL_WRITE_METADATA and (facts.lag > 0 or _covered(facts, log)[0] < 0):
                    claim, drained = _drain(client, log, facts, opts)
                    result.drained_records = drained
                    result.actions.append(f"drained the syncer: {drained} records written to ZooKeeper")
                    facts = gather(client, opts.log_dir, log)
            lag = facts.lag if state is S.DUAL_WRITE_METADATA else 0
            _transition(state, E.ROLLBACK, GuardFacts(write_behind_lag=lag, confirmed=yes))
            if state is S.DUAL_WRITE_METADATA and facts.log.replay is not None:
                kept = drift.refuse_drift(
                    drift.zk_drift(client, facts.log.replay, facts.zk.controller), accept_drift
                )
                if kept is not None:
                    result.actions.append(kept)
            crash_point("rollback.drained")
            kraft_epoch = max(
                facts.log.latest_epoch,
                facts.zk.controller.kraft_controller_epoch if facts.zk.controller is not None else -1,
                facts.zk.migration.kraft_controller_epoch if facts.zk.migration is not None else -1,
                claim.kraft_epoch if claim is not None else -1,
            )
            result.kraft_epoch = kraft_epoch
            if log is not None:
                log.close()
                log = None
                result.archived_log = _archive(Path(opts.log_dir), "rolled-back")
                result.actions.append(f"archived the log directory to {result.archived_log}")
                crash_point("rollback.archived")
            result.zk_controller_epoch, result.removed = _release(client, claim, kraft_epoch)
            log_binding.forget(client)
            crash_point("rollback.released")
            result.actions.append(
                f"released ZooKeeper: removed {', '.join(result.removed) or 'nothing'}; /controller_epoch is now "
                f"{result.zk_controller_epoch}, above KRaft epoch {kraft_epoch}"
            )
            after = gather(client, opts.log_dir)
            result.state_after = _public(after.derived.state)
        finally:
            if log is not None:
                log.close()
    return result


def _drain(client: KazooClient, log: MetadataLog, facts: Facts, opts: DriverOptions) -> tuple[Claim, int]:
    """Bring ZooKeeper up to the log's last record under a fresh claim; (claim, records synced)."""
    covered = _covered(facts, log)
    node = facts.log.node_id if facts.log.node_id is not None else opts.node_id
    claim, migration = _claim(client, log, facts, node, covered)
    syncer = _syncer(client, log, claim, migration, facts)
    syncer.reconcile(_replay_of(facts))
    syncer.sync()
    lag = syncer.lag()
    if lag > 0:
        raise RefusedError(
            f"cannot roll back: {lag} committed records are still not in ZooKeeper after a sync"
        )
    return claim, max(0, facts.log.last_record_offset - max(covered[0], -1))


def _release(client: KazooClient, claim: Claim | None, kraft_epoch: int) -> tuple[int, list[str]]:
    """Delete /controller and /migration and lift /controller_epoch above `kraft_epoch`."""
    before = gather_zk(client)
    removed = [
        p
        for p, present in (
            (P.CONTROLLER, before.kraft_holds_controller),
            (P.MIGRATION, before.migration is not None),
        )
        if present
    ]
    if claim is None:
        claim = read_claim(client)
    if claim is not None:
        return release_controller(client, claim, bump_above=kraft_epoch), removed
    # No KRaft claim left (a crash after part of an earlier release): remove /migration and lift the
    # epoch with a version-checked set, so a ZooKeeper controller elected meanwhile is never overwritten.
    epoch = before.zk_controller_epoch
    if epoch is None or before.controller_epoch_zk_version is None:
        raise BadInputError(f"{P.CONTROLLER_EPOCH} missing: is this a Kafka cluster?")
    new_epoch = max(epoch, kraft_epoch) + 1
    txn = client.transaction()
    txn.set_data(
        P.CONTROLLER_EPOCH, codec.encode_controller_epoch(new_epoch), before.controller_epoch_zk_version
    )
    if before.migration is not None:
        txn.delete(P.MIGRATION, before.migration.zk_version)
    results = retry_transient(lambda: txn.commit(), "releasing ZooKeeper")
    if any(isinstance(r, Exception) for r in results):
        raise FencedError(f"{P.CONTROLLER_EPOCH} or {P.MIGRATION} changed during the rollback; run it again")
    return new_epoch, removed


# --- admin -----------------------------------------------------------------------------------------


def admin(opts: DriverOptions, change: AdminChange, *, timeout: float = 60.0) -> AdminResult:
    """Apply one change in DualWriteMetadata: handed to a running follower, or appended and synced here."""
    return admin_many(opts, [change], timeout=timeout)[0]


def admin_many(
    opts: DriverOptions,
    changes: Iterable[AdminChange],
    *,
    timeout: float = 60.0,
    on_result: Callable[[AdminResult], None] | None = None,
) -> list[AdminResult]:
    """Apply changes in order, each validated, appended and synced before the next; the first refused
    one raises (the ones before it stay applied). One claim and one reconciliation for all of them."""
    results: list[AdminResult] = []

    def done(result: AdminResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    with _zk(opts) as client:
        facts = gather(client, opts.log_dir)
        log_binding.guard(client, facts, opts.log_dir)
        if facts.derived.state is not S.DUAL_WRITE_METADATA:
            raise _refused_admin(facts, opts)
        require_own_log(facts)
        node_id = facts.log.node_id if facts.log.node_id is not None else opts.node_id
        try:
            log = _open_log(opts.log_dir, facts.zk.cluster_id, node_id)
        except FencedError:
            inbox = Inbox(opts.log_dir)
            pid = inbox.follower_pid()
            holder = read_holder(Path(opts.log_dir) / LOCK_FILE)
            if pid is None or holder is None or holder.pid != pid:
                raise
            for change in changes:
                reply = inbox.wait(inbox.submit(change), pid, timeout)
                done(_admin_result(change, reply, f"follower pid {pid}"))
            return results
        try:
            facts = gather(client, opts.log_dir, log)
            if facts.derived.state is not S.DUAL_WRITE_METADATA:
                raise refused_state(_public(facts.derived.state))
            claim, migration = _claim(client, log, facts, node_id, _covered(facts, log))
            syncer = _syncer(client, log, claim, migration, facts)
            syncer.reconcile(_replay_of(facts))  # every new writer first repairs drift, as Kafka's does
            ctl = _Controller(client, log, syncer, claim.kraft_epoch, facts)
            for change in changes:
                done(_admin_result(change, ctl.apply(change, "admin.appended"), "direct"))
        finally:
            log.close()
    return results


def _refused_admin(facts: Facts, opts: DriverOptions) -> FindingsError:
    """Admin outside DualWriteMetadata; a controller in soft start (it holds the log before the copy)
    is named, since its brokers may already be talking to it."""
    state = facts.derived.state
    holder = _writer_holder(opts.log_dir) if log_exists(opts.log_dir) else None
    if state in (S.MIGRATION_INELIGIBLE, S.MIGRATING_ZK_DATA) and holder is not None:
        return FindingsError(
            f"the KRaft controller ({holder}) is in soft start: brokers are registering and the copy is not "
            "committed yet, so it accepts no admin changes (KIP-866); make the change in ZooKeeper mode "
            "now, or wait for DualWriteMetadata"
        )
    return refused_state(_public(state))


def _admin_result(change: AdminChange, reply: AdminReply, via: str) -> AdminResult:
    if not reply.ok:
        error: ZkKraftError
        if reply.exit_code == FencedError.exit_code:
            error = FencedError(reply.message)
        elif reply.exit_code == UnreachableError.exit_code:
            error = UnreachableError(reply.message)
        elif reply.exit_code == FindingsError.exit_code:
            error = FindingsError(reply.message)
        else:
            error = BadInputError(reply.message)
        raise error
    return AdminResult(
        change=change.describe(),
        summary=reply.message,
        via=via,
        records=reply.records,
        first_offset=reply.first_offset,
        last_offset=reply.last_offset,
        migration_offset=reply.migration_offset,
        topic_id=reply.topic_id,
        noop=reply.records == 0,
    )
