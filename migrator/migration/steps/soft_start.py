"""The controller protocol around the copy: soft start, the wait for brokers, then serving in full.

Before the copy a KIP-866 controller in PRE_MIGRATION serves registration and heartbeats only, and the
copy waits until every ZooKeeper broker has registered as a migrating one (WAIT_FOR_BROKERS); once the
copy is committed the same service is activated with the syncer and ZooKeeper-mode brokers are told
of every change from then on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from migrator import stop as stopping
from migrator.bulk import with_gc
from migrator.controller import core as ctl_core
from migrator.controller.network.listener_config import default_properties
from migrator.controller.network.listener_runtime import start_server
from migrator.controller.service import ControllerService
from migrator.controller.zk_brokers.inter_broker import inter_broker_config
from migrator.controller.zk_brokers.zk_propagator import ZkPropagator, read_status
from migrator.errors import FindingsError
from migrator.kraft.image import ImageBuilder
from migrator.migration import copy as copy_mod
from migrator.migration import health
from migrator.migration.facts import Facts, gather_zk
from migrator.migration.steps.claim import abort_reason, next_epoch
from migrator.migration.steps.run import DriverOptions, E, Run, replay_of
from migrator.zk import paths as P

BROKERS_FLAG_MESSAGE = (
    "the copy waits for every ZooKeeper broker to register with the KRaft controller: pass --listen "
    "HOST:PORT (the controller address the brokers are configured with), or --brokers-from-zk to treat "
    "the live ZooKeeper registrations under /brokers/ids as migration-ready (a rehearsal option, see "
    "docs/migration.md)"
)

# What the stop line (SIGTERM/SIGINT, migrator.stop) says while the copy waits for brokers.
WAITING = (
    "while waiting for brokers to register, before the copy",
    "nothing was copied; the next `zk2kraft migrate` waits for them again",
)


class BrokersNotReadyError(FindingsError):
    """Wait-for-brokers timed out: the message names every broker that has not registered."""


def zk_propagator_status(log_dir: str, pid: int) -> list[dict[str, Any]] | None:
    return read_status(log_dir, pid)


class Listener:
    """The controller service and its protocol server, as the driver runs them."""

    def __init__(self, service: ControllerService, listen: str) -> None:
        self.service = service
        # How ZK-mode brokers are reached once active; a bad setting fails here, before serving.
        self.inter_broker = inter_broker_config(default_properties())
        self.server = start_server(service, listen)
        self.address: tuple[str, int] = self.server.address
        self.propagator: ZkPropagator | None = None
        service.advertised = getattr(self.server, "advertised", None) or self.address
        service.start_timer()

    def describe(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    def propagate_to_zk_brokers(self, zk_controller_epoch: int, opts: DriverOptions) -> None:
        """From activation on, ZK-mode brokers learn every change from this controller (KIP-866)."""
        if self.propagator is None:
            svc = self.service
            self.propagator = ZkPropagator(
                svc,
                svc.core.config.node_id,
                zk_controller_epoch,
                inter_broker=self.inter_broker,
                request_timeout=self.inter_broker.request_timeout_s,
                say=svc.say,
                status_dir=opts.target.log_dir,
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


def controller_config(
    facts: Facts, opts: DriverOptions, session_timeout_ms: int
) -> ctl_core.ControllerConfig:
    replay = facts.log.replay
    mv = (replay.feature_levels if replay is not None else {}).get(
        "metadata.version", copy_mod.BOOTSTRAP_METADATA_VERSION
    )
    cluster_id = facts.zk.cluster_id or facts.log.cluster_id
    assert cluster_id is not None
    node_id = facts.log.node_id if facts.log.node_id is not None else opts.target.node_id
    return ctl_core.ControllerConfig(
        cluster_id=cluster_id, node_id=node_id, metadata_version=mv, session_timeout_ms=session_timeout_ms
    )


def soft_start(run: Run) -> Listener:
    """Serve registration and heartbeats before the copy, as a KIP-866 controller in PRE_MIGRATION.

    The registrations go into the log before the copy transaction (as Kafka's do), in an epoch of their
    own below the claim's. An interrupted copy is aborted first, so nothing lands inside it; a fresh log
    gets its bootstrap records first. The copy itself never writes RegisterBrokerRecords.
    """
    log, result, opts = run.log, run.result, run.opts
    assert log is not None
    epoch = next_epoch(log, run.facts)
    txn = run.facts.log.open_transaction
    if txn is not None:
        run.advance(E.ABORT_COPY)
        offset = copy_mod.abort_open_transaction(log, epoch, txn, abort_reason(txn))
        result.aborted_transaction = f"{txn.name!r} begun at offset {txn.begin_offset}, aborted at {offset}"
        result.actions.append(f"aborted the interrupted transaction {result.aborted_transaction}")
    lf = run.facts.log
    if lf.migration_code is None and (
        lf.replay is None or "metadata.version" not in lf.replay.feature_levels
    ):
        copy_mod.append_bootstrap(log, epoch)
        result.actions.append(
            f"wrote the bootstrap records (metadata.version {copy_mod.BOOTSTRAP_METADATA_VERSION}, PRE_MIGRATION)"
        )
    facts = run.regather()
    service = ControllerService(
        log,
        ImageBuilder(replay_of(facts)),
        controller_config(facts, opts, run.migrate.session_timeout_ms),
        epoch,
        say=opts.say,
    )
    service.core.zk_broker_ids = frozenset(facts.zk.registered_brokers)
    assert run.target.listen is not None
    runtime = Listener(service, run.target.listen)
    if opts.metrics is not None:  # the log holds PRE_MIGRATION and brokers can register: say so now,
        # not before the listener is bound (a watcher that saw state 2 then found the port closed)
        opts.metrics.on_state(facts.log.migration_code)
        opts.metrics.watch_brokers(lambda: health.migrating_broker_count(service))
    result.actions.append(f"soft start: serving broker registration on {runtime.describe()}")
    opts.note(f"controller listening on {runtime.describe()} (soft start: registration and heartbeats only)")
    return runtime


def soft_start_and_wait(run: Run) -> None:
    """Soft start, then WAIT_FOR_BROKERS, when the copy is to wait for brokers over the protocol."""
    m = run.migrate
    if run.target.listen is None or m.brokers_from_zk:
        return
    with run.timed("wait_for_brokers"):
        if run.runtime is None:  # not bound before the pre-flight (preflight.bind_early)
            run.runtime = soft_start(run)
            if m.on_listen is not None:
                m.on_listen(run.runtime.service, run.runtime.address)
        with stopping.phase(*WAITING):
            wait_for_brokers(run, run.runtime)
    run.regather()


def serve(run: Run) -> None:
    """After the first sync: activate the soft-started service with the syncer, or start one now."""
    m, claim, syncer = run.migrate, run.result.claim, run.syncer
    assert run.target.listen is not None and claim is not None and syncer is not None
    if run.runtime is None:
        service = ControllerService(
            run.log,
            ImageBuilder(replay_of(run.facts)),
            controller_config(run.facts, run.opts, m.session_timeout_ms),
            claim.kraft_epoch,
            syncer=syncer,
            say=run.opts.say,
        )
        service.core.zk_broker_ids = frozenset(run.facts.zk.registered_brokers)
        run.runtime = Listener(service, run.target.listen)
        if m.on_listen is not None:
            m.on_listen(run.runtime.service, run.runtime.address)
    else:
        run.runtime.service.activate(ImageBuilder(replay_of(run.facts)), syncer, claim.kraft_epoch)
    run.runtime.propagate_to_zk_brokers(claim.zk_controller_epoch, run.opts)
    run.result.actions.append(f"serving the controller protocol on {run.runtime.describe()}")


def brokers_missing(registered: set[int], zk_ids: set[int], assigned: set[int]) -> list[int]:
    """Kafka's areZkBrokersReadyForMigration as a list of what is missing (empty: ready)."""
    return sorted((zk_ids | assigned) - registered)


def wait_for_brokers(run: Run, runtime: Listener) -> None:
    """WAIT_FOR_BROKERS: every id in /brokers/ids and in any replica assignment has registered over the
    protocol as a migrating ZooKeeper broker; unlike Kafka's driver this gives up after the timeout,
    naming each missing broker and where ZooKeeper mentions it."""
    service = runtime.service
    timeout, stop = run.migrate.broker_wait_timeout, run.migrate.stop
    deadline = time.monotonic() + timeout

    def registered() -> set[int]:
        return {b.id for b in service.image.brokers.values() if b.is_migrating_zk_broker}

    with with_gc():  # `migrate` pauses the collector for its bulk steps; this wait can last hours
        _wait(run, runtime, registered, deadline, timeout, stop)


def _wait(
    run: Run,
    runtime: Listener,
    registered: Callable[[], set[int]],
    deadline: float,
    timeout: float,
    stop: Any,
) -> None:
    service = runtime.service
    last_read = -1e9
    zk_ids: set[int] = set()
    assigned: set[int] = set()
    said: list[int] | None = None
    while True:
        now = time.monotonic()
        if now - last_read >= 2.0:
            zk_ids = set(gather_zk(run.client).registered_brokers)
            assigned = run.zk.assignment_broker_ids()
            service.core.zk_broker_ids = frozenset(zk_ids)
            last_read = now
        with service.lock:
            have = registered()
        missing = brokers_missing(have, zk_ids, assigned)
        if not missing and have and zk_ids:
            run.result.actions.append(
                f"all {len(zk_ids | assigned)} ZooKeeper brokers registered with the KRaft controller: "
                + ", ".join(map(str, sorted(zk_ids | assigned)))
            )
            return
        if missing != said:
            run.note(
                "waiting for brokers to register with the KRaft controller: "
                + (", ".join(map(str, missing)) if missing else "no broker is registered in ZooKeeper")
            )
            said = missing
        stopping.check(f"missing: {', '.join(map(str, missing)) or 'any broker'}")
        if now >= deadline or (stop is not None and stop.is_set()):
            raise BrokersNotReadyError(missing_report(missing, zk_ids, assigned, have, runtime, timeout))
        service.wait_for(lambda image, seen=have: registered() != seen, min(0.5, max(0.0, deadline - now)))


def missing_report(
    missing: list[int],
    zk_ids: set[int],
    assigned: set[int],
    have: set[int],
    runtime: Listener,
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


__all__ = [
    "BROKERS_FLAG_MESSAGE",
    "BrokersNotReadyError",
    "Listener",
    "brokers_missing",
    "serve",
    "soft_start_and_wait",
    "zk_propagator_status",
]
