"""The migration: migrate, plan, status, finalize, rollback, admin, truncate-unsynced.

Each hands the driver the Target whole (the driver opens its ZooKeeper session and log through it) and
calls the driver; `migrate` passes its `MigrateOptions` on as it was built. The driver derives the state
from the durable facts (the log and ZooKeeper) every time, so these functions keep nothing between
calls.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from migrator.commands.target_arg import takes_target
from migrator.controller.managers.change import AdminChange
from migrator.controller.security.client_security import ClientSecurity
from migrator.errors import FindingsError
from migrator.metrics import MigrationMetrics
from migrator.migration import driver, unsynced
from migrator.migration.driver import DriverOptions, MigrateOptions
from migrator.results import (
    AdminResult,
    FinalizeResult,
    MigrateResult,
    PlanResult,
    RollbackResult,
    StatusResult,
    TruncateUnsyncedResult,
)
from migrator.target import Target
from migrator.zk.connection import close
from migrator.zk.leadership import read_migration


def driver_options(
    target: Target, say: Callable[[str], None] | None = None, metrics: MigrationMetrics | None = None
) -> DriverOptions:
    """The driver's options: the Target whole, and how this invocation reports."""
    return DriverOptions(target, say=say, metrics=metrics)


@contextmanager
def _metrics(
    target: Target,
    metrics: MigrationMetrics | None,
    on_metrics: Callable[[str, int], None] | None,
) -> Iterator[MigrationMetrics | None]:
    """The caller's gauges, or served at the Target's metrics address for the run's duration."""
    if metrics is not None or not target.metrics_listen:
        yield metrics
        return
    served = MigrationMetrics()
    try:
        host, port = served.serve(target.metrics_listen)
        if on_metrics is not None:
            on_metrics(host, port)
        yield served
    finally:
        served.close()


@takes_target(log_dir_positional=True)
def migrate(
    target: Target,
    options: MigrateOptions | None = None,
    *,
    say: Callable[[str], None] | None = None,
    metrics: MigrationMetrics | None = None,
    on_metrics: Callable[[str, int], None] | None = None,
    **changes: Any,
) -> MigrateResult:
    """Run the migration from wherever it is to DualWriteMetadata; with `follow`, stay the controller
    until `stop` is set. With the Target's `listen` (HOST:PORT) the controller protocol is served there:
    brokers register before the copy (which waits up to `broker_wait_timeout` seconds for all of them)
    and talk to the controller after it. With its `metrics_listen` (and no `metrics` given) Prometheus
    gauges are served there while this runs (`on_metrics` is told where). Refusals raise RefusedError
    (1), bad input 2, unreachable 3, fenced/locked 4; brokers that never registered raise
    BrokersNotReadyError (1). `options` is migrate's one definition (the CLI builds it); an in-process
    caller may give its fields as keywords instead (`changes`, applied over `options`)."""
    chosen = dataclasses.replace(options or MigrateOptions(), **changes)
    with _metrics(target, metrics, on_metrics) as gauges:
        return driver.migrate(driver_options(target, say, gauges), chosen)


@takes_target(log_dir_positional=True)
def plan(target: Target) -> PlanResult:
    """The copy as a dry run: records and bytes per type, batches, an estimate; writes nothing."""
    return driver.plan(driver_options(target))


@takes_target(log_dir_positional=True)
def status(target: Target) -> StatusResult:
    """State, controller and epochs, /migration, log end, lag, brokers, last transition, next action."""
    return driver.status(driver_options(target))


@takes_target(log_dir_positional=True)
def finalize(target: Target, *, yes: bool = False, rehearsal: bool = False) -> FinalizeResult:
    """POST_MIGRATION; refused while lag > 0, while brokers are ZooKeeper-registered, while a broker of the
    copy has not registered as a KRaft broker (unless `rehearsal`), or without `yes`."""
    return driver.finalize(driver_options(target), yes=yes, rehearsal=rehearsal)


@takes_target(log_dir_positional=True)
def rollback(
    target: Target, *, yes: bool = False, force_orphaned: bool = False, accept_drift: bool = False
) -> RollbackResult:
    """Back to ZooKeeper mode (not after finalize): drain, compare ZooKeeper with the log (refused when
    they differ unless `accept_drift`), archive the log, release ZooKeeper.
    `force_orphaned`: release although the bound log directory is lost (nothing is drained)."""
    return driver.rollback(
        driver_options(target), yes=yes, force_orphaned=force_orphaned, accept_drift=accept_drift
    )


@takes_target(log_dir_positional=True)
def admin(
    target: Target,
    change: AdminChange,
    *,
    timeout: float = 60.0,
    bootstrap: str | None = None,
    security: ClientSecurity | None = None,
) -> AdminResult:
    """One change in DualWriteMetadata: over Kafka's protocol to the running controller (`bootstrap`,
    default from `--config` or the follower's announcement), or appended and synced here."""
    return driver.admin(
        driver_options(target), change, timeout=timeout, bootstrap=bootstrap, security=security
    )


@takes_target(log_dir_positional=True)
def admin_many(
    target: Target,
    changes: Iterable[AdminChange],
    *,
    timeout: float = 60.0,
    on_result: Callable[[AdminResult], None] | None = None,
    bootstrap: str | None = None,
    security: ClientSecurity | None = None,
) -> list[AdminResult]:
    """Changes in order, each durable before the next; the first refused one raises."""
    return driver.admin_many(
        driver_options(target),
        changes,
        timeout=timeout,
        on_result=on_result,
        bootstrap=bootstrap,
        security=security,
    )


@takes_target(log_dir_positional=True)
def truncate_unsynced(target: Target, *, yes: bool = False) -> TruncateUnsyncedResult:
    """Cut the log back to `/migration`'s offset when a record after it can never reach ZooKeeper.

    Refused (exit 1) without `yes`, (exit 2) when every record after the offset can still be synced,
    (exit 4) while another process holds the log's writer lock; docs/dual-write.md has the rule.
    """
    if not yes:
        raise FindingsError("truncate-unsynced drops records from the log: not confirmed (pass --yes)")
    client = target.connect()
    try:
        done = unsynced.truncate_unsynced(client, target.log_dir, read_migration(client))
    finally:
        close(client)
    return TruncateUnsyncedResult(
        stuck_record=str(done.stuck),
        end_offset_before=done.end_offset_before,
        end_offset=done.end_offset,
        migration_offset=done.migration_offset,
        dropped_offsets=done.end_offset_before - done.end_offset,
    )
