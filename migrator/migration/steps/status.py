"""The read-only commands: `plan` (the copy as a dry run) and `status` (both sides, the next step).

Neither writes anything anywhere; both derive the state from the same gathered facts as `migrate`.
"""

from __future__ import annotations

import time
from pathlib import Path

from migrator.controller.follower import read_follower, writer_lock_held
from migrator.controller.refused_brokers import read_refused
from migrator.kraft.lock import LOCK_FILE, read_holder
from migrator.kraft.log import MetadataLog
from migrator.migration import advice, estimate, health, log_binding
from migrator.migration import copy as copy_mod
from migrator.migration.facts import gather, log_exists
from migrator.migration.steps import kafka_companion
from migrator.migration.steps.run import DriverOptions, S, connected, kafka_name, public
from migrator.migration.steps.soft_start import zk_propagator_status
from migrator.migration.unsynced import find_stuck
from migrator.results import PlanResult, StatusResult, TransitionInfo


def plan(opts: DriverOptions) -> PlanResult:
    """The copy as a dry run: reads ZooKeeper and the log, writes nothing anywhere."""
    with connected(opts) as zk:
        facts = gather(zk.zk, opts.target.log_dir)
        state = facts.derived.state
        if state not in (S.MIGRATION_INELIGIBLE, S.MIGRATING_ZK_DATA):
            return PlanResult(
                state=public(state),
                message=f"nothing to copy: the migration is in {public(state)} (see `zk2kraft status`)",
            )
        tree, layout, read_seconds = estimate.read_view(zk.zk)
    fresh = not facts.log.exists or (
        facts.log.migration_code is None
        and (facts.log.replay is None or "metadata.version" not in facts.log.replay.feature_levels)
    )
    p = copy_mod.plan_copy(layout, fresh_log=fresh, read_seconds=read_seconds)
    phases = estimate.estimate_phases(tree, layout, read_seconds, p)
    return PlanResult(
        state=public(state),
        plan=p,
        phases=phases,
        message=(
            f"the copy would append {p.records} records ({p.bytes} bytes) in {p.batches} batches; "
            f"{phases.describe()}"
        ),
    )


def writer_holder(log_dir: str) -> str | None:
    """Who holds the log's writer lock now, without taking it."""
    if not writer_lock_held(Path(log_dir)):
        return None
    holder = read_holder(Path(log_dir) / LOCK_FILE)
    return holder.describe() if holder else "an unnamed process"


def status(opts: DriverOptions) -> StatusResult:
    """Everything an operator asks before the next step; reads both sides, writes nothing."""
    stuck = None
    with connected(opts) as zk:
        facts = gather(zk.zk, opts.target.log_dir)
        unbound = log_binding.problem(zk.zk, facts, opts.target.log_dir)
        wrong = None if unbound is None else advice.not_this_log(zk.zk, facts, opts.target.log_dir, unbound)
        if facts.lag > 0 and facts.zk.migration is not None and log_exists(opts.target.log_dir):
            with MetadataLog.open(opts.target.log_dir) as mlog:
                stuck = find_stuck(zk.zk, mlog, facts.zk.migration)
    d = facts.derived
    zk_facts = facts.zk
    lf = facts.log
    last: TransitionInfo | None = None
    if lf.migration_code is not None and lf.migration_offset is not None:
        ts = lf.migration_timestamp_ms
        last = TransitionInfo(
            kafka_code=lf.migration_code,
            kafka_state=kafka_name(lf.migration_code) or "",
            offset=lf.migration_offset,
            timestamp_ms=ts,
            time=None if ts is None else time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(ts / 1000)),
        )
    m = zk_facts.migration
    c = zk_facts.controller
    writer = writer_holder(opts.target.log_dir) if log_exists(opts.target.log_dir) else None
    announced = read_follower(opts.target.log_dir) if writer else None
    follower = announced.pid if announced is not None else None
    channels = zk_propagator_status(opts.target.log_dir, follower) if follower else None
    writer_info = health.read_writer(opts.target.log_dir)
    action, notes = advice.next_step(facts, writer_info)
    anomalies = list(d.anomalies) + notes
    state, kafka_code, reason = d.state, d.kafka_code, d.reason
    if wrong is not None:  # first: nothing else said about this log matters while it is not the one
        anomalies.insert(0, wrong[0])
        action = wrong[1]
        alone = advice.zk_alone(zk_facts)
        if alone is not None:  # the log here says nothing about the migration: ZooKeeper alone does
            state, kafka_code = alone.state, alone.kafka_code
            reason = f"{alone.proof}; -l {opts.target.log_dir} is not that controller's log"
    if stuck is not None:
        anomalies.append(f"{stuck}; the lag can never drain: run `zk2kraft log truncate-unsynced --yes`")
    holder = read_holder(Path(opts.target.log_dir) / LOCK_FILE) if writer else None
    if holder is not None:  # the running controller's refused registrations (soft start included)
        for r in read_refused(opts.target.log_dir, holder.pid):
            anomalies.append(
                f"broker {r.get('broker_id')}'s registration refused by the controller: {r.get('error')}: "
                f"{r.get('message')}"
            )
    if lf.foreign_cluster is not None:
        anomalies.append(
            f"the log directory belongs to cluster {lf.foreign_cluster}, not to ZooKeeper's {zk_facts.cluster_id}"
        )
    result = StatusResult(
        state=public(state),
        state_code=int(state),
        kafka_code=int(kafka_code) if kafka_code is not None else None,
        kafka_state=kafka_code.name if kafka_code is not None else None,
        reason=reason,
        next_action=action,
        anomalies=anomalies,
        log_binding=None if wrong is None else wrong[0],
        cluster_id=zk_facts.cluster_id,
        controller_id=c.broker_id if c is not None else None,
        controller_is_kraft=zk_facts.kraft_holds_controller,
        kraft_epoch=c.kraft_controller_epoch if c is not None and zk_facts.kraft_holds_controller else None,
        zk_controller_epoch=zk_facts.zk_controller_epoch,
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
        log_dir=opts.target.log_dir,
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
        zk_registered_brokers=zk_facts.registered_brokers,
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
        manifest=copy_mod.read_manifest(opts.target.log_dir) if lf.exists else None,
    )
    if kafka_companion.is_kafka_log(opts.target.log_dir):  # Kafka's own controller migrates
        return kafka_companion.companion_status(result, facts, opts.target.log_dir)
    return result
