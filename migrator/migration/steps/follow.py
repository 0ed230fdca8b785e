"""Following: the run stays the controller, serving admin changes (the listener's admin APIs, which
`zk2kraft admin` speaks too) and syncing until SIGTERM/SIGINT.

A lost ZooKeeper is retried with backoff (the syncer resumes from /migration); being fenced by a
newer controller ends the loop with FencedError. With a protocol service, its lock orders the admin
changes and syncs here with the brokers' requests (one writer of the log, one image).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext

from migrator.controller import follower as follower_file
from migrator.controller.managers.change import (
    AdminChange,
    AdminReply,
    Pending,
    Placing,
    Planned,
    plan_change,
)
from migrator.controller.managers.topic_defaults import TopicDefaults
from migrator.controller.network.listener_config import default_properties
from migrator.controller.service import ControllerService
from migrator.errors import BadInputError, FencedError, UnreachableError
from migrator.kraft.image import ImageBuilder
from migrator.kraft.log import DEFAULT_MAX_BATCH_RECORDS, MetadataLog, SplitBatchError
from migrator.kraft.records import record
from migrator.migration import health
from migrator.migration.facts import Facts, gather_zk
from migrator.migration.faults import crash_point
from migrator.migration.steps.claim import GuardedSyncer
from migrator.migration.steps.run import RefusedError, Run, S, public
from migrator.migration.zk_fit import refuse_oversized_change
from migrator.model import ClusterImage
from migrator.zk import paths as P
from migrator.zk.migration_client import TRANSIENT, MigrationClient

# What the stop line says while following, and what the next run does.
FOLLOWING = (
    "while following as the controller",
    "records in the log that ZooKeeper lacks are carried to it by the next `zk2kraft migrate --follow` "
    "or `controller`",
)


class Controller:
    """What a running writer keeps: the log, its image, the claim's syncer."""

    def __init__(
        self,
        zk: MigrationClient,
        log: MetadataLog,
        syncer: GuardedSyncer,
        epoch: int,
        facts: Facts,
        service: ControllerService | None = None,
    ) -> None:
        self.zk = zk
        self.log = log
        self.syncer = syncer
        self.epoch = epoch
        assert facts.log.replay is not None
        # With a protocol service running, its image is the one image: admin changes replay into it.
        self.builder = service.builder if service is not None else ImageBuilder(facts.log.replay)
        self.service = service
        # CreateTopics' -1 defaults, from the controller's properties (`--config`), as Kafka's
        self.topic_defaults = TopicDefaults.from_properties(default_properties())
        self.last_batch_end: int | None = None  # the last offset of apply_many's batch, if it appended

    @property
    def image(self) -> ClusterImage:
        return self.builder.image

    def brokers(self, changes: Sequence[AdminChange]) -> tuple[dict[int, str | None], dict[int, str | None]]:
        """(live, fenced) brokers with their racks, for placement and the broker checks: live
        replicas and leaders go to the first, the registered fenced ones only when needed (Kafka's
        usable brokers: none in controlled shutdown)."""
        kinds = {c.kind for c in changes}
        if not kinds & {"create-topic", "add-partitions", "alter-broker-config"}:
            return {}, {}
        if self.service is None:  # `zk2kraft admin`'s direct path: no service, no lock held
            return self.zk.live_brokers(gather_zk(self.zk.zk).registered_brokers), {}
        # The live ZooKeeper brokers (ids refreshed by the follow loop; a registered one as its
        # registration says, fenced or not) and unfenced KRaft brokers, racks from their
        # registrations: no ZooKeeper read per broker per topic (issue 13's bench), and none at all
        # under the service's lock, which the caller holds (DESIGN.md invariant 8: a ZooKeeper
        # hiccup must not hold up heartbeats behind one config change).
        regs = self.image.brokers
        live: dict[int, str | None] = {}
        fenced: dict[int, str | None] = {}
        for i in self.service.core.zk_broker_ids:
            b = regs.get(i)
            if b is None:
                live[i] = None
            elif not b.in_controlled_shutdown:
                (fenced if b.fenced else live)[i] = b.rack
        for b in regs.values():
            if not b.in_controlled_shutdown and not b.is_migrating_zk_broker:
                (fenced if b.fenced else live)[b.id] = b.rack
        return live, fenced

    def apply_many(
        self,
        changes: Sequence[AdminChange],
        after_append: str,
        validate_only: bool = False,
        sync: bool = True,
    ) -> list[AdminReply | BadInputError]:
        """Validate every change of one request, then append the records of the valid ones as one
        batch (Kafka's ControllerResult.atomic: one request, one batch; when one batch cannot hold it, a
        metadata transaction) and sync: the one way admin changes enter the migration (the protocol's,
        `controller.apis.admin_api`, and `zk2kraft admin`'s direct path). Each change gets its reply or its
        refusal. `validate_only`: validate and stop there. `sync` False: the caller carries the batch
        to ZooKeeper after releasing the service (`ControllerService.carry`)."""
        live, fenced = self.brokers(changes)
        placing = Placing(fenced=fenced, defaults=self.topic_defaults)
        pending = Pending()
        outcomes: list[Planned | BadInputError] = []
        for change in changes:
            # a broker's config needs it registered, fenced or not (placement wants live ones only)
            known = {**fenced, **live} if change.kind == "alter-broker-config" else live
            try:
                planned = plan_change(change, self.image, known, placing, pending)
                # Before anything is appended: a write ZooKeeper can never take would stall the lag.
                if planned.records:
                    refuse_oversized_change(
                        self.syncer.writer,
                        self.image,
                        planned.records,
                        self.syncer.inner.state_epoch,
                        self.builder.topic_names,
                    )
            except BadInputError as e:
                outcomes.append(e)
            else:
                outcomes.append(planned)
        records = [r for o in outcomes if isinstance(o, Planned) for r in o.records]
        first = None
        self.last_batch_end = None
        if records and not validate_only:
            batch = records
            try:
                first, self.last_batch_end = self.log.append(
                    batch, self.epoch, max_batch_records=DEFAULT_MAX_BATCH_RECORDS, single_batch=True
                )
            except SplitBatchError:
                # more than one batch holds: a metadata transaction keeps the request atomic (KIP-868)
                kinds = sorted({c.kind for c in changes})
                batch = [
                    record("BeginTransactionRecord", 0, Name=f"zk2kraft {' '.join(kinds)}"),
                    *records,
                    record("EndTransactionRecord", 0),
                ]
                first, self.last_batch_end = self.log.append(
                    batch, self.epoch, max_batch_records=DEFAULT_MAX_BATCH_RECORDS
                )
            for i, rec in enumerate(batch):
                self.builder.replay(first + i, rec)
            self.builder.finish()
            crash_point(after_append)
            if sync:
                self.syncer.sync()
                crash_point("admin.synced")
            first += 1 if len(batch) > len(records) else 0  # past the BeginTransactionRecord
        covered = self.syncer.writer.migration.kraft_metadata_offset
        replies: list[AdminReply | BadInputError] = []
        at = first
        for o in outcomes:
            if isinstance(o, BadInputError):
                replies.append(o)
                continue
            reply = AdminReply(
                ok=True,
                message=o.summary,
                topic_id=o.topic_id,
                follower_pid=os.getpid(),
                partitions=o.partitions,
                replication_factor=o.replication_factor,
            )
            if at is not None and o.records:
                reply.first_offset, reply.last_offset = at, at + len(o.records) - 1
                reply.records, reply.migration_offset = len(o.records), covered
                at += len(o.records)
            replies.append(reply)
        return replies

    def apply(
        self, change: AdminChange, after_append: str, validate_only: bool = False, sync: bool = True
    ) -> AdminReply:
        """One change alone (`zk2kraft admin`'s direct path): its reply, or its refusal raised."""
        (outcome,) = self.apply_many([change], after_append, validate_only, sync)
        if isinstance(outcome, BadInputError):
            raise outcome
        return outcome


def follow(run: Run) -> None:
    """Keep running as the controller: serve the admin APIs, sync what the log holds, until stopped."""
    log, syncer, opts, result = run.log, run.syncer, run.opts, run.result
    assert log is not None and syncer is not None and result.claim is not None
    service = run.runtime.service if run.runtime is not None else None
    stop = run.migrate.stop or threading.Event()
    poll_interval = run.migrate.poll_interval
    facts = run.regather()
    if facts.derived.state is not S.DUAL_WRITE_METADATA:
        raise RefusedError(
            f"--follow needs DualWriteMetadata; the migration is in {public(facts.derived.state)}"
        )
    ctl = Controller(run.zk, log, syncer, result.claim.kraft_epoch, facts, service)

    def exclusive() -> AbstractContextManager[None]:
        return service.exclusive() if service is not None else nullcontext()

    if opts.metrics is not None:
        opts.metrics.track_lag(syncer.lag)  # read at each scrape, so a sync stuck on ZooKeeper shows
    if service is not None:

        def admin(changes: Sequence[AdminChange], validate_only: bool) -> list[AdminReply | BadInputError]:
            """One request's changes: validated, appended as one batch, answered once in ZooKeeper."""
            with exclusive():
                outcomes = ctl.apply_many(changes, "follow.appended", validate_only, sync=False)
                end = ctl.last_batch_end
            applied = [o for o in outcomes if isinstance(o, AdminReply) and o.records]
            result.changes_applied += len(applied)
            if end is not None and not validate_only:
                # Answered once in ZooKeeper too, written without the service's locks: brokers'
                # requests go on meanwhile, and a ZooKeeper outage holds up only this reply.
                service.carry(lambda: syncer.writer.migration.kraft_metadata_offset >= end)
                crash_point("admin.synced")
                for reply in applied:
                    reply.migration_offset = syncer.writer.migration.kraft_metadata_offset
            if not validate_only:
                for change, o in zip(changes, outcomes, strict=True):
                    if isinstance(o, BadInputError):
                        o_reply = AdminReply(ok=False, exit_code=o.exit_code, message=str(o))
                        opts.note(health.admin_line(change.describe(), o_reply))
                    else:
                        opts.note(health.admin_line(change.describe(), o))
            return outcomes

        service.admin = admin  # the protocol's admin APIs, until this loop ends
    # once the admin APIs are served: `zk2kraft admin` finds the listener here
    follower_file.announce(opts.target.log_dir, served_listeners(run.runtime.server if run.runtime else None))
    started = time.perf_counter()
    delay = poll_interval
    ids_read = time.monotonic()
    ids_changed = threading.Event()  # a /brokers/ids child watch: a rolled broker's id frees at once
    opts.note(f"following as the controller (pid {os.getpid()}); stop with SIGTERM or Ctrl-C")
    beat = Heartbeat(run.migrate.heartbeat, log.end_offset)
    try:
        while not stop.is_set():
            if beat.due():
                zk_ids = service.core.zk_broker_ids if service is not None else frozenset()
                opts.note(beat.line(ctl.image, zk_ids, syncer.lag(), log.end_offset, service is not None))
            if service is not None and service.fenced:  # outside the retry: it cannot serve again
                raise service.failure or FencedError(
                    "the controller was fenced by a newer one while serving brokers"
                )
            try:
                with exclusive():
                    if syncer.lag() > 0:
                        if service is not None and service.syncs_behind:
                            service.nudge()  # its sync thread writes ZooKeeper outside the commit lock
                        else:
                            syncer.sync()
                    if opts.metrics is not None:
                        brokers = ctl.image.brokers.values()
                        opts.metrics.on_follow(
                            syncer.lag(), sum(1 for b in brokers if b.is_migrating_zk_broker)
                        )
                if service is not None and (ids_changed.is_set() or time.monotonic() - ids_read >= 2.0):
                    # A ZooKeeper broker that stopped frees its id for a KRaft broker (the roll).
                    ids_changed.clear()
                    run.client.get_children(P.BROKER_IDS, watch=lambda _event: ids_changed.set())
                    service.core.zk_broker_ids = frozenset(gather_zk(run.client).registered_brokers)
                    ids_read = time.monotonic()
                delay = poll_interval
            except FencedError:
                raise
            except (UnreachableError, *TRANSIENT) as e:
                # (a bare kazoo call, the /brokers/ids watch, raises kazoo's own ConnectionLoss)
                opts.note(f"ZooKeeper unavailable ({e or type(e).__name__}); retrying in {delay:.1f}s")
                delay = min(delay * 2, 5.0)
            stop.wait(delay)
    finally:
        if service is not None:
            service.admin = None
        follower_file.retire(opts.target.log_dir)
        result.followed_seconds = round(time.perf_counter() - started, 3)


class Heartbeat:
    """The follower's periodic line: what it does now (brokers served, lag, the last change), never a
    repeat of the last event, which would read as a stuck retry."""

    def __init__(self, every: float, end_offset: int) -> None:
        self.every = every
        self.next = time.monotonic() + every
        self.end_offset = end_offset
        self.changed: str | None = None  # wall-clock time the log's end last moved

    def due(self) -> bool:
        return self.every > 0 and time.monotonic() >= self.next

    def line(
        self, image: ClusterImage, zk_ids: frozenset[int], lag: int, end_offset: int, serving: bool
    ) -> str:
        """`zk_ids`: the brokers registered in ZooKeeper, served through their ZooKeeper-mode
        channels whether or not they registered with this controller too."""
        self.next = time.monotonic() + self.every
        if end_offset != self.end_offset:
            self.end_offset, self.changed = end_offset, time.strftime("%H:%M:%S")
        kraft = {b.id for b in image.brokers.values() if not b.is_migrating_zk_broker}
        zk_mode = (set(zk_ids) | {b.id for b in image.brokers.values() if b.is_migrating_zk_broker}) - kraft
        who = (
            f"serving {len(kraft | zk_mode)} brokers ({len(zk_mode)} in ZooKeeper mode)"
            if serving
            else "following without a listener"
        )
        last = f"last change at {self.changed}" if self.changed else "no change since start"
        return f"{who}, write-behind lag {lag}, log end offset {end_offset}, {last}"


def served_listeners(server: object | None) -> list[tuple[str, str, str, int]]:
    """(name, protocol, host, port) of each listener this controller serves, for `zk2kraft admin`."""
    if server is None:
        return []
    many = getattr(server, "servers", None)
    if many is not None:  # a Kafka `listeners` value, each with its security
        # as `advertised.listeners` names them (a wildcard bind is no address to connect to)
        return [
            (s.security.name, s.security.protocol, *(s.security.advertised or s.address[:2])) for s in many
        ]
    host, port = server.address  # type: ignore[attr-defined]
    return [] if port == 0 else [("CONTROLLER", "PLAINTEXT", host, port)]
