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
from contextlib import AbstractContextManager, nullcontext

from migrator.controller.service import ControllerService
from migrator.errors import BadInputError, FencedError, FindingsError, UnreachableError
from migrator.kraft.image import ImageBuilder
from migrator.kraft.log import DEFAULT_MAX_BATCH_RECORDS, MetadataLog
from migrator.kraft.records import MetadataRecord, record
from migrator.migration import health
from migrator.migration.admin import BIG_CHANGE_RECORDS, AdminChange, AdminReply, plan_change
from migrator.migration.admin import follower as follower_file
from migrator.migration.facts import Facts, gather_zk
from migrator.migration.faults import crash_point
from migrator.migration.steps.claim import GuardedSyncer
from migrator.migration.steps.run import RefusedError, Run, S, public
from migrator.migration.zk_fit import refuse_oversized_change
from migrator.model import ClusterImage
from migrator.zk import paths as P
from migrator.zk.migration_client import MigrationClient

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

    @property
    def image(self) -> ClusterImage:
        return self.builder.image

    def apply(
        self, change: AdminChange, after_append: str, validate_only: bool = False, sync: bool = True
    ) -> AdminReply:
        """Validate, append, sync: the one way an admin change enters the migration (the protocol's,
        `controller.admin_api`, and `zk2kraft admin`'s direct path). `validate_only`: validate and stop
        there. `sync` False: the caller carries it to ZooKeeper after releasing the service
        (`ControllerService.carry`)."""
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
            brokers = self.zk.live_brokers(gather_zk(self.zk.zk).registered_brokers) if needs_brokers else {}
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
        refuse_oversized_change(
            self.syncer.writer, self.image, records, self.syncer.inner.state_epoch, self.builder.topic_names
        )
        if validate_only:
            return AdminReply(ok=True, message=planned.summary, follower_pid=os.getpid())
        first, last = self.log.append(records, self.epoch, max_batch_records=DEFAULT_MAX_BATCH_RECORDS)
        for i, rec in enumerate(records):
            self.builder.replay(first + i, rec)
        self.builder.finish()
        crash_point(after_append)
        if sync:
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

        def admin(change: AdminChange, validate_only: bool) -> AdminReply:
            try:
                with exclusive():
                    reply = ctl.apply(change, "follow.appended", validate_only, sync=False)
                    result.changes_applied += 0 if reply.records == 0 else 1
            except (BadInputError, FindingsError) as e:
                if not validate_only:
                    opts.note(
                        health.admin_line(
                            change.describe(), AdminReply(ok=False, exit_code=e.exit_code, message=str(e))
                        )
                    )
                raise
            if reply.last_offset is not None:
                # Answered once in ZooKeeper too, written without the service's locks: brokers'
                # requests go on meanwhile, and a ZooKeeper outage holds up only this reply.
                last = reply.last_offset
                service.carry(lambda: syncer.writer.migration.kraft_metadata_offset >= last)
                crash_point("admin.synced")
                reply.migration_offset = syncer.writer.migration.kraft_metadata_offset
            if not validate_only:
                opts.note(health.admin_line(change.describe(), reply))
            return reply

        service.admin = admin  # the protocol's admin APIs, until this loop ends
    # once the admin APIs are served: `zk2kraft admin` finds the listener here
    follower_file.announce(opts.log_dir, served_listeners(run.runtime.server if run.runtime else None))
    started = time.perf_counter()
    delay = poll_interval
    ids_read = time.monotonic()
    ids_changed = threading.Event()  # a /brokers/ids child watch: a rolled broker's id frees at once
    opts.note(f"following as the controller (pid {os.getpid()}); stop with SIGTERM or Ctrl-C")
    try:
        while not stop.is_set():
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
            except UnreachableError as e:
                opts.note(f"ZooKeeper unavailable ({e}); retrying in {delay:.1f}s")
                delay = min(delay * 2, 5.0)
            stop.wait(delay)
    finally:
        if service is not None:
            service.admin = None
        follower_file.retire(opts.log_dir)
        result.followed_seconds = round(time.perf_counter() - started, 3)


def served_listeners(server: object | None) -> list[tuple[str, str, str, int]]:
    """(name, protocol, host, port) of each listener this controller serves, for `zk2kraft admin`."""
    if server is None:
        return []
    many = getattr(server, "servers", None)
    if many is not None:  # a Kafka `listeners` value, each with its security
        return [(s.security.name, s.security.protocol, *s.address[:2]) for s in many]
    host, port = server.address  # type: ignore[attr-defined]
    return [] if port == 0 else [("CONTROLLER", "PLAINTEXT", host, port)]
