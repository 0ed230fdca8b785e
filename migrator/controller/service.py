"""The running controller: the core's decisions made durable, one request at a time.

`ControllerService` is the protocol server's handler. Every request and the session timer take one
lock, so decisions are made against an image with every earlier decision applied: the core decides,
the records are appended to the metadata log (this process holds the log's writer lock: it is the
`migrate --follow` / `controller` process), replayed into the shared image and, once the copy is
committed, carried to ZooKeeper by the dual-write syncer before the reply goes out.

ZooKeeper is written behind, as Kafka's migration driver writes it: a reply goes out once its records
are in the log (the source of truth), and a sync thread carries whatever has accumulated to ZooKeeper
in as few fenced multis as it can (`write_behind=False` syncs before each reply instead; `flush`
waits for ZooKeeper to catch up).

Soft start (KIP-866): until the copy is committed the service answers BrokerRegistration and
BrokerHeartbeat only; AlterPartition and AlterReplicaState get NOT_CONTROLLER. `activate` ends soft
start once the driver has copied and synced.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from migrator.controller import core
from migrator.controller.protocol import kafka_errors as E
from migrator.controller.refused_brokers import RefusedBrokers
from migrator.errors import FencedError, UnreachableError, ZkKraftError
from migrator.kraft.image import ImageBuilder
from migrator.kraft.log import DEFAULT_MAX_BATCH_RECORDS, MetadataLog
from migrator.kraft.records import MetadataRecord
from migrator.lock_rule import GuardedLock, allowed
from migrator.model import ClusterImage

__all__ = ["ControllerService", "ServiceStats", "Syncer", "monotonic_ms"]


class Syncer(Protocol):
    def sync(self) -> object: ...

    def lag(self) -> int: ...


class FetchingSyncer(Syncer, Protocol):
    """A syncer that can read the log under the commit lock and write ZooKeeper after releasing it."""

    def fetch(self) -> None: ...

    def sync(self, fetched_only: bool = False) -> object: ...


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass
class ServiceStats:
    requests: dict[str, int] = field(default_factory=dict)
    records: int = 0
    fenced_by_timeout: int = 0
    sync_errors: int = 0
    last_sync_error: str | None = None


class ControllerService:
    """Serialises the controller's requests onto one lock; appends, replays and syncs their records."""

    def __init__(
        self,
        log: MetadataLog,
        builder: ImageBuilder,
        config: core.ControllerConfig,
        epoch: int,
        *,
        syncer: Syncer | None = None,
        clock: Callable[[], int] = monotonic_ms,
        say: Callable[[str], None] | None = None,
        write_behind: bool = True,
    ) -> None:
        self.log = log
        self.builder = builder
        self.core = core.ControllerCore(config)
        self.epoch = epoch
        self.syncer = syncer
        self.clock = clock
        self.say = say
        # Guarded (migrator.lock_rule): a ZooKeeper wait under either lock raises instead of holding
        # every heartbeat up for the whole of a ZooKeeper outage (DESIGN.md invariant 8).
        self.lock = GuardedLock("the controller service's lock", reentrant=True)
        self.stats = ServiceStats()
        self.fenced = False  # a newer controller took over: refuse everything
        self._timer: threading.Thread | None = None
        self._stop = threading.Event()
        self._changed = threading.Condition(self.lock)
        self.write_behind = write_behind
        self._dirty = threading.Event()
        self._syncer_thread: threading.Thread | None = None
        # Group commit: decisions are replayed and staged under `lock`; one thread at a time appends
        # everything staged with one fsync under `_commit_lock` (taken before `lock`, never after).
        self._commit_lock = GuardedLock("the controller's commit lock")
        self._staged: list[MetadataRecord] = []
        self._next = self._log_next()
        self._durable_next = self._next
        self.failure: ZkKraftError | None = None  # why the service stopped serving
        self.zk_propagator: Any = None  # the ZK-mode brokers' channels, once active (zk_propagator)
        # Installed by the driver while it follows in DualWriteMetadata: (AdminChange, validate_only)
        # -> AdminReply, durable and synced on return; None refuses admin APIs (controller.apis.admin_api).
        self.admin: Callable[[Any, bool], Any] | None = None
        self.advertised: tuple[str, int] | None = None  # the listener's address, named by Metadata
        # Registrations refused with Kafka's error, for `zk2kraft status` (refused_brokers)
        self.refused = RefusedBrokers(getattr(log, "log_dir", None) if log.writable else None)
        self.core.activate(self.image, clock())  # registered brokers get a fresh session
        if syncer is not None:
            self.core.active = True

    # -- state ---------------------------------------------------------------------------------

    @property
    def image(self) -> ClusterImage:
        return self.builder.image

    @property
    def soft_start(self) -> bool:
        return not self.core.active

    @property
    def committed_offset(self) -> int | None:
        """Under `lock`: the offset after the last record in the log if the image holds nothing else
        (no staged record replayed ahead of its append), else None. Propagation to brokers waits on it."""
        return self._durable_next if not self._staged and self._durable_next >= self._next else None

    def _note(self, text: str) -> None:
        if self.say is not None:
            self.say(text)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold off every request and the timer while the caller writes the log (the copy, admin,
        a sync): what is staged is appended first, and the caller's appends are counted after."""
        with self._commit_lock, self.lock:
            self._append_staged()
            try:
                yield
            finally:
                if not self._staged:
                    self._next = self._durable_next = self._log_next()

    def activate(self, builder: ImageBuilder, syncer: Syncer, epoch: int) -> None:
        """End of soft start: the copy is committed and ZooKeeper reconciled; serve everything."""
        with self._commit_lock, self.lock:
            self._append_staged()
            # Requests served between the caller's read of the log and now: replay them too.
            for offset, _epoch, rec in self.log.read(builder.finish().last_offset + 1):
                builder.replay(offset, rec)
            builder.finish()
            self.builder = builder
            self.syncer = syncer
            self.epoch = epoch
            self._next = self._durable_next = self._log_next()
            self.core.active = True
            self.core.activate(self.image, self.clock())
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[ClusterImage], bool], timeout: float) -> bool:
        """Block until `predicate(image)` holds after some request (or `timeout` seconds pass)."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while not predicate(self.image):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.5))
            return True

    # -- the commit path -----------------------------------------------------------------------

    def _log_next(self) -> int:
        return self.log.end_offset + (1 if self.epoch > self.log.latest_epoch else 0)

    def next_offset(self) -> int:
        """Where the next staged record lands (a broker epoch handed out now): after the log's end, a
        new epoch's LeaderChange, and what is staged already."""
        return self._next

    def _commit(self, records: list[MetadataRecord]) -> int:
        """Under `lock`: replay `records` at the offsets they will get and stage them; returns the
        offset that must be durable before anyone is told (see `_wait_durable`)."""
        if records:
            first = self._next
            for i, rec in enumerate(records):
                self.builder.replay(first + i, rec)
            self.builder.finish()
            self._staged.extend(records)
            self._next += len(records)
            self.stats.records += len(records)
        return self._next

    def _append_staged(self) -> None:
        """Under `_commit_lock` and `lock`: append everything staged (one fsync)."""
        if not self._staged:
            return
        batch, self._staged = self._staged, []
        self._write(batch, self._next - len(batch))

    def _write(self, batch: list[MetadataRecord], first: int) -> None:
        try:
            got, _ = self.log.append(batch, self.epoch, max_batch_records=DEFAULT_MAX_BATCH_RECORDS)
            if got != first:  # the broker epochs handed out would be wrong: never carry on
                raise FencedError(f"records landed at offset {got}, expected {first}: another writer?")
        except Exception as e:
            # The image holds records the log does not: this controller may not answer again.
            failure = e if isinstance(e, ZkKraftError) else UnreachableError(f"cannot append to the log: {e}")
            self.fenced = True
            self.failure = failure
            self._note(f"controller stopped serving: {failure}")
            raise failure from None
        with self.lock:
            self._durable_next = first + len(batch)
            self._changed.notify_all()
            if self.syncer is not None:
                if self.write_behind and self._syncer_thread is not None:
                    self._dirty.set()
                else:
                    with allowed(
                        "no sync thread (write_behind=False, or not started): it syncs before answering"
                    ):
                        self._sync_now()

    def _wait_durable(self, target: int) -> bool:
        """Outside `lock`: return once the log holds every offset below `target`, appending what is
        staged (others' records too: they share the fsync) if no one else is; False if it failed."""
        while True:
            with self._commit_lock:
                if self._durable_next >= target:
                    return True
                if self.failure is not None:
                    return False
                with self.lock:
                    batch, self._staged = self._staged, []
                    first = self._next - len(batch)
                if not batch:
                    return self._durable_next >= target
                # Appended outside `lock`: requests keep deciding and staging meanwhile.
                try:
                    self._write(batch, first)
                except ZkKraftError:
                    return False

    def _sync_now(self, step: Callable[[], object] | None = None) -> bool:
        """One sync (or `step` of one); False if it failed. A lost ZooKeeper is counted and retried
        later (the records are committed in the log; the sync thread and the follow loop retry)."""
        if self.syncer is None:
            return True
        try:
            (step or self.syncer.sync)()
            return True
        except FencedError as e:
            self.fenced = True
            self._note(f"controller fenced: {e}")
        except ZkKraftError as e:  # unreachable ZooKeeper, or finalized meanwhile (RefusedError)
            self.stats.sync_errors += 1
            self.stats.last_sync_error = str(e)
            self._dirty.set()
        return False

    @property
    def syncs_behind(self) -> bool:
        """True while the write-behind sync thread runs (it, not the caller, writes ZooKeeper)."""
        return self._syncer_thread is not None

    def nudge(self) -> None:
        """Have the sync thread look at the log now (records appended around the service)."""
        self._dirty.set()

    def carry(self, done: Callable[[], bool], timeout: float = 120.0) -> None:
        """Outside the service's locks: sync until `done()` (an admin change's offset is in
        ZooKeeper). The log is read under the commit lock and ZooKeeper written after it is released,
        as the sync thread does; what the sync raises (ZooKeeper unreachable, fenced) is raised."""
        syncer = self.syncer
        if syncer is None:
            return
        deadline = time.monotonic() + timeout
        while not done():
            if self.failure is not None:
                raise self.failure
            if time.monotonic() > deadline:
                raise UnreachableError(f"ZooKeeper did not take the change within {timeout:g}s")
            if not hasattr(syncer, "fetch"):
                with self._commit_lock:
                    with allowed("a syncer that cannot fetch writes under the commit lock (tests)"):
                        syncer.sync()
                continue
            fetching: FetchingSyncer = syncer  # type: ignore[assignment]
            with self._commit_lock:
                fetching.fetch()
            fetching.sync(fetched_only=True)

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until ZooKeeper covers every record appended so far (write-behind lag 0)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._commit_lock, self.lock:
                self._append_staged()
                if self.syncer is None or self.syncer.lag() == 0:
                    return True
                if self._syncer_thread is None:
                    with allowed("no sync thread: the caller asked to wait for ZooKeeper"):
                        self._sync_now()
                    continue
            if time.monotonic() > deadline:
                return False
            self._dirty.set()
            time.sleep(0.005)

    def _decide(self, kind: str, decide: Callable[[], core.Decision], refused: object) -> object:
        with self.lock:
            self.stats.requests[kind] = self.stats.requests.get(kind, 0) + 1
            if self.fenced:
                return refused
            decision = decide()
            target = self._commit(decision.records)
        if not self._wait_durable(target):
            return refused
        for note in decision.notes:
            self._note(note)
        return decision.reply

    # -- requests ------------------------------------------------------------------------------

    def register(self, req: core.Registration) -> core.RegistrationReply:
        reply = self._decide(
            "BrokerRegistration",
            lambda: self.core.register(self.image, req, self.next_offset(), self.clock()),
            core.RegistrationReply(E.NOT_CONTROLLER),
        )
        assert isinstance(reply, core.RegistrationReply)
        if reply.error == E.NONE:
            self.refused.registered(req.broker_id)
        elif reply.error != E.NOT_CONTROLLER:
            name = E.name_of(reply.error)
            self.refused.refuse(req.broker_id, name, reply.message or "")
            self._note(f"refused broker {req.broker_id}'s registration: {name}: {reply.message or ''}")
        return reply

    def heartbeat(self, req: core.Heartbeat) -> core.HeartbeatReply:
        reply = self._decide(
            "BrokerHeartbeat",
            lambda: self.core.heartbeat(self.image, req, self.clock()),
            core.HeartbeatReply(E.NOT_CONTROLLER),
        )
        assert isinstance(reply, core.HeartbeatReply)
        return reply

    def alter_partition(self, req: core.AlterPartition) -> core.AlterPartitionReply:
        reply = self._decide(
            "AlterPartition",
            lambda: self.core.alter_partition(self.image, req),
            core.AlterPartitionReply(E.NOT_CONTROLLER),
        )
        assert isinstance(reply, core.AlterPartitionReply)
        return reply

    def alter_replica_state(self, req: core.AlterReplicaState) -> core.AlterReplicaStateReply:
        reply = self._decide(
            "AlterReplicaState",
            lambda: self.core.alter_replica_state(self.image, req),
            core.AlterReplicaStateReply(E.NOT_CONTROLLER),
        )
        assert isinstance(reply, core.AlterReplicaStateReply)
        return reply

    def handle(self, api_key: int, api_version: int, request: Any, client_id: str | None = None) -> Any:
        """The protocol server's entry point: wire messages in, wire messages out."""
        from migrator.controller.network import listener_runtime  # the wire types, only where needed

        return listener_runtime.dispatch(self, api_key, api_version, request, client_id)

    def api_versions_features(self, answer: Any) -> Any:
        """ApiVersions' feature fields from the image (the listener answers ApiVersions itself)."""
        from migrator.controller.apis.admin_features_api import api_versions_features

        return api_versions_features(self, answer)

    # -- the session timer ---------------------------------------------------------------------

    def tick(self) -> list[int]:
        """Fence every broker silent past the session timeout, one at a time (each against the image
        with the previous one applied); returns the ids fenced."""
        fenced: list[int] = []
        notes: list[str] = []
        with self.lock:
            if self.fenced:
                return fenced
            target = self._next
            for broker_id in self.core.expired_brokers(self.image, self.clock()):
                decision = self.core.fence(self.image, broker_id)
                target = self._commit(decision.records)
                fenced.append(broker_id)
                notes += decision.notes
        if not self._wait_durable(target):
            return []
        self.stats.fenced_by_timeout += len(fenced)
        for note in notes:
            self._note(note)
        return fenced

    def timer_wait(self, every: float) -> float:
        """Seconds until the session timer's next tick: the oldest live session's expiry, at most `every`."""
        with self.lock:
            expiry = None if self.fenced else self.core.next_expiry_ms(self.image)
        if expiry is None:
            return every
        return min(every, max(0.01, (expiry - self.clock()) / 1000))  # never a spin on an unfenceable one

    def start_timer(self, interval: float | None = None) -> None:
        if self._timer is not None:
            return
        every = interval if interval is not None else max(0.05, self.core.config.session_timeout_ms / 4000)

        def run() -> None:
            # Wake at the oldest session's expiry, as Kafka's controller does, not on the next round
            # of `every`: a quarter of the timeout later would add up to that much to each failover.
            while not self._stop.wait(self.timer_wait(every)):
                try:
                    self.tick()
                except UnreachableError as e:  # the log's disk: keep trying, say so
                    self._note(f"session timer: {e}")

        self._timer = threading.Thread(target=run, name="controller-session-timer", daemon=True)
        self._timer.start()
        if self.write_behind and self._syncer_thread is None:
            self._syncer_thread = threading.Thread(
                target=self._sync_loop, name="controller-sync", daemon=True
            )
            self._syncer_thread.start()

    def _sync_loop(self, linger: float = 0.002) -> None:
        """Write behind: after a short linger (requests arriving meanwhile share the multi), sync."""
        while not self._stop.is_set():
            if not self._dirty.wait(0.2):
                continue
            time.sleep(linger)
            if not self._zookeeper_connected():
                # Holding the commit lock through ZooKeeper's retries would stall every request that
                # needs an append (heartbeats included) for the whole outage: wait outside it.
                self._stop.wait(0.5)
                continue
            self._dirty.clear()
            syncer = self.syncer
            if not hasattr(syncer, "fetch"):
                with self._commit_lock:
                    with allowed("a syncer that cannot fetch writes under the commit lock (tests)"):
                        ok = self.fenced or self._sync_now()
            else:
                # The log is read under the commit lock (no append meanwhile; requests go on deciding
                # and staging, and the next append takes all of them at once); ZooKeeper is written
                # after it is released, so ZooKeeper dropping mid-write (its retries take up to
                # minutes) holds up no append: brokers' heartbeats and AlterPartition are answered
                # through an outage. The records stay in order in the syncer; /migration fences them.
                fetching: FetchingSyncer = syncer  # type: ignore[assignment]
                with self._commit_lock:
                    ok = self.fenced or self._sync_now(fetching.fetch)
                if ok and not self.fenced:
                    ok = self._sync_now(functools.partial(fetching.sync, fetched_only=True))
            if not ok:
                self._stop.wait(0.5)  # ZooKeeper is away: do not spin

    def _zookeeper_connected(self) -> bool:
        client = getattr(getattr(self.syncer, "writer", None), "client", None)
        return client is None or bool(getattr(client, "connected", True))

    def stop(self) -> None:
        self._stop.set()
        for thread in (self._timer, self._syncer_thread):
            if thread is not None:
                thread.join(timeout=5)
        self._timer = self._syncer_thread = None
        with self._commit_lock, self.lock:
            if self.failure is None:
                try:
                    self._append_staged()
                except ZkKraftError:
                    return
                with allowed("the last sync of a stopping controller: no request is answered after it"):
                    self._sync_now()  # leave ZooKeeper covering what was answered, if it can
