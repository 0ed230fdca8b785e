"""The dual-write syncer: committed metadata records after `/migration`'s offset → ZooKeeper, fenced.

ZooKeeper is the log's write-behind copy (DESIGN.md invariant 1). The syncer keeps the image at the
offset ZooKeeper covers and a picture of what ZooKeeper holds at the paths it owns (`zk_diff.ZkCache`,
built by one full reconcile). A sync replays the next records into the image, collects the entities
they touched (a topic, a partition's state, a config entity, a quota/SCRAM user, an ACL resource, a
token, the producer id block), and diffs only those against the picture: so a sync reads nothing
from ZooKeeper, and ten changes of one partition in a chunk become one write. Each chunk of records
is one `OpGroup` covering the offset of its last record; the fenced writer packs groups into
pipelined multis, each moving `/migration` with the data it covers.

Metadata transactions (KIP-868) are honoured: records between BeginTransactionRecord and
EndTransactionRecord reach ZooKeeper together, covered by the End's offset; an aborted transaction
writes nothing; an open one is not written and holds `/migration` before its Begin.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.client import KazooClient

from migrator import stop
from migrator.bulk import without_gc
from migrator.errors import BadInputError, UnreachableError
from migrator.kraft.image import (
    ImageBuilder,
    ReplayResult,
)
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import MetadataRecord, OpaqueRecord, kafka_to_uuid
from migrator.kraft.snapshot import list_snapshots, read_snapshot
from migrator.migration.log_tail import LogTail
from migrator.migration.zk_diff import (
    Repair,
    ZkCache,
    ZkPicture,
    is_state_path,
    notification_for,
    plan,
    repairs_of,
)
from migrator.migration.zk_fit import Key, entity_key
from migrator.migration.zk_stream import plan_chunks
from migrator.model import ClusterImage, ControllerZnode, MigrationZnode, ZkControlState
from migrator.zk import paths as P
from migrator.zk.migration_client import (
    FencedZkWriter,
    OpGroup,
    OversizedWriteError,
    ZkOp,
    ZkTree,
    layout,
    read_tree,
)

__all__ = [
    "DEFAULT_CHUNK_KEYS",
    "DEFAULT_CHUNK_RECORDS",
    "DEFAULT_MAX_LAG_RECORDS",
    "Repair",
    "SyncReport",
    "ZkSyncer",
]

DEFAULT_MAX_LAG_RECORDS = 50_000
# A group is written when it touched this many entities or read this many records: big enough that
# repeated changes of one partition coalesce into one write, small enough that /migration advances
# every fraction of a second under load.
DEFAULT_CHUNK_KEYS = 10_000
DEFAULT_CHUNK_RECORDS = 50_000

_BEGIN, _END, _ABORT = 23, 24, 25

_ABSENT = object()


@dataclass
class SyncReport:
    """One `sync` call: what it read, what it wrote, where /migration stands."""

    from_offset: int
    to_offset: int
    records: int = 0
    entities: int = 0  # entities written after coalescing
    ops: int = 0
    multis: int = 0
    seconds: float = 0.0
    lag: int = 0
    open_transaction: int | None = None  # Begin offset of a transaction left for later
    repairs: list[Repair] = field(default_factory=list)  # when the sync began with a full reconcile


@dataclass
class _Counters:
    records: int = 0
    entities: int = 0


def _never_synced(e: OversizedWriteError) -> OversizedWriteError:
    """The writer's refusal with the way out: the record stays in the log until it is cut off."""
    return OversizedWriteError(
        f"{e}; a record after /migration's offset can never be synced: `zk2kraft status` names it, "
        "`zk2kraft log truncate-unsynced --yes` removes it"
    )


class ZkSyncer:
    """Write-behind of one metadata log into ZooKeeper under one controller claim (`writer.claim`)."""

    def __init__(
        self,
        client: KazooClient,
        log: MetadataLog,
        writer: FencedZkWriter,
        *,
        max_lag_records: int = DEFAULT_MAX_LAG_RECORDS,
        chunk_keys: int = DEFAULT_CHUNK_KEYS,
        chunk_records: int = DEFAULT_CHUNK_RECORDS,
        notifications: bool = True,
    ) -> None:
        if max_lag_records < 1 or chunk_keys < 1 or chunk_records < 1:
            raise BadInputError("max_lag_records, chunk_keys and chunk_records must be positive")
        self.client = client
        self.log = log
        self.writer = writer
        self.max_lag_records = max_lag_records
        self.chunk_keys = chunk_keys
        self.chunk_records = chunk_records
        self.notifications = notifications
        claim = writer.claim
        self.control = ZkControlState(
            controller=ControllerZnode(
                json_version=2,
                broker_id=claim.kraft_controller_id,
                kraft_controller_epoch=claim.kraft_epoch,
                is_kraft=True,
                ephemeral=False,
            )
        )
        # Partition states written by the KRaft controller carry its epoch (as Kafka's do).
        self.state_epoch = layout.partition_state_epoch(self.control)
        # Metrics (Kafka's ZkWriteSnapshotTimeMs / ZkWriteDeltaTimeMs).
        self.last_reconcile_ms: float | None = None
        self.last_delta_ms: float | None = None
        self.delta_write_ms: deque[float] = deque(maxlen=1024)
        self._lock = threading.RLock()
        self._progress = threading.Condition()
        self._tail = LogTail(log)  # reads from where the last read stopped, not the segment's start
        writer.listeners.append(self._on_landed)
        self._reset()
        # Retention (kraft.retention) never deletes records this syncer has yet to read; before its
        # first load it reads from the newest snapshot, which retention always keeps.
        log.retain_from = lambda: self._next_read if self._builder is not None else log.end_offset

    # -- state ------------------------------------------------------------------------------------

    def _reset(self) -> None:
        """Forget the image and the picture of ZooKeeper; the next sync starts with a reconcile."""
        self._builder: ImageBuilder | None = None
        self._cache: ZkCache | None = None
        self._topic_ids: dict[uuid.UUID, str] = {}
        self._txn: int | None = None  # Begin offset of an open transaction
        self._pending: list[tuple[int, MetadataRecord | OpaqueRecord]] = []
        self._covered = (-1, -1)  # (offset, epoch) the image is at
        self._next_read = 0
        # Records `fetch` read from the log (offsets from _next_read on, in order) for a sync that
        # runs without the log's writer lock; and the log's committed end when they were read.
        self._fetched: deque[tuple[int, int, MetadataRecord | OpaqueRecord]] = deque()
        self._fetched_end = -1
        self._loaded = False  # `fetch` loaded the image for the reconcile that comes first
        # Each partition state znode's version, as ZooKeeper holds it (read at reconcile, counted on
        # every write since): Kafka's ZooKeeper controller reads it as the partition epoch.
        self._state_versions: dict[str, int] = {}

    @property
    def ready(self) -> bool:
        """True once a reconcile built the picture of ZooKeeper that syncs diff against."""
        return self._cache is not None

    @property
    def image(self) -> ClusterImage | None:
        """The image at the offset ZooKeeper covers (None before the first reconcile)."""
        return None if self._builder is None else self._builder.image

    def replay_at_log_end(self) -> ReplayResult | None:
        """The syncer's image as the replay of the whole log, when it has read every record and holds no
        open transaction (what `MetadataLog.load_image` would build again); else None. Live: it moves
        with the next sync, so only a caller that syncs no more may keep it."""
        with self._lock:
            if self._builder is None or self._txn is not None or self._next_read < self.log.end_offset:
                return None
            return self._builder.finish()

    @property
    def migration(self) -> MigrationZnode:
        return self.writer.migration

    def committed_end(self) -> int:
        """Offset of the last record in the log (every appended record is committed: one voter)."""
        return self.log.end_offset - 1

    def lag(self) -> int:
        """Kafka's ZkWriteBehindLag: records in the log that ZooKeeper does not cover yet."""
        return max(0, self.committed_end() - self.writer.migration.kraft_metadata_offset)

    def _on_landed(self, migration: MigrationZnode) -> None:
        with self._progress:
            self._progress.notify_all()

    # -- loading the image ------------------------------------------------------------------------

    def _load(self) -> None:
        """Replay the log to its end (from its newest snapshot), tracking nothing."""
        self._reset()
        builder = self._builder = ImageBuilder()
        start = 0
        snaps = list_snapshots(Path(self.log.partition_dir))
        if snaps:
            snap = snaps[-1]
            at = snap.end_offset - 1
            for _offset, rec in read_snapshot(snap.path).records:
                builder.replay(at, rec)
            start = snap.end_offset
            self._covered = (at, snap.epoch)
        elif self.log.log_start_offset > 0:
            raise BadInputError(
                f"{self.log.partition_dir}: the log starts at offset {self.log.log_start_offset} and no "
                "snapshot covers the offsets before it"
            )
        self._next_read = start
        for offset, epoch, rec in self.log.read(start):
            self._next_read = offset + 1
            self._feed(offset, epoch, rec, None)
        if self._txn is None:
            self._cover_tail()
        self._topic_ids = {
            kafka_to_uuid(t.topic_id): name
            for name, t in builder.image.topics.items()
            if t.topic_id is not None
        }

    def _adopt(self, result: ReplayResult, take: bool = False) -> None:
        if result.open_transaction is not None:
            raise ValueError("reconcile needs an image without an open transaction (pass None to load it)")
        self._reset()
        self._builder = ImageBuilder(result, copy=not take)
        image = self._builder.image
        self._topic_ids = {
            kafka_to_uuid(t.topic_id): n for n, t in image.topics.items() if t.topic_id is not None
        }
        offset = result.last_offset
        self._covered = (offset, self.log.epoch_for_offset(offset))
        self._next_read = offset + 1

    def _cover_tail(self, end: int | None = None) -> None:
        """Control batches (a new epoch's LeaderChange) after the last record carry no metadata:
        with no transaction open, ZooKeeper covers them too, so the lag can reach zero. `end`: the
        committed end when the records just written were read (default: now)."""
        end = self.committed_end() if end is None else end
        if end > self._covered[0]:
            self._covered = (end, self.log.epoch_for_offset(end))
        self._next_read = max(self._next_read, end + 1)

    # -- records ----------------------------------------------------------------------------------

    def _feed(
        self, offset: int, epoch: int, rec: MetadataRecord | OpaqueRecord, touched: dict[Key, None] | None
    ) -> None:
        """One record, with KIP-868 transactions: buffered until End, dropped on Abort."""
        api = rec.api_key
        if api in (_BEGIN, _END, _ABORT) and isinstance(rec, MetadataRecord):
            if api == _BEGIN:
                if self._txn is not None:
                    raise BadInputError(
                        f"offset {offset}: BeginTransactionRecord while the transaction begun at offset "
                        f"{self._txn} is still open"
                    )
                self._txn = offset
                self._pending = []
                return
            if self._txn is None:
                raise BadInputError(f"offset {offset}: {rec.name} without a BeginTransactionRecord")
            pending, self._pending, self._txn = self._pending, [], None
            if api == _END:
                for o, r in pending:
                    self._apply(o, r, touched)
            self._covered = (offset, epoch)
            return
        if self._txn is not None:
            self._pending.append((offset, rec))
            return
        self._apply(offset, rec, touched)
        self._covered = (offset, epoch)

    def _apply(
        self, offset: int, rec: MetadataRecord | OpaqueRecord, touched: dict[Key, None] | None
    ) -> None:
        builder = self._builder
        assert builder is not None
        if touched is not None and isinstance(rec, MetadataRecord):
            key = self._key(rec)
            if key is not None:
                touched[key] = None
        builder.replay(offset, rec)

    def _key(self, rec: MetadataRecord) -> Key | None:
        """The entity a record touches in ZooKeeper (looked up before the record is applied)."""
        assert self._builder is not None
        return entity_key(rec, self._topic_ids, self._builder.image)

    # -- from touched entities to ops -------------------------------------------------------------

    def _want(
        self, touched: dict[Key, None]
    ) -> tuple[dict[str, bytes | None], list[tuple[str, bytes]], set[str]]:
        """Desired data (None: absent) of every znode of the touched entities, the partition states
        apart (the hot path), and the paths whose change is announced to ZK-mode brokers."""
        assert self._builder is not None and self._cache is not None
        image = self._builder.image
        cache = self._cache
        want: dict[str, bytes | None] = {}
        states: list[tuple[str, bytes]] = []
        announce: set[str] = set()
        topics = {k[1] for k in touched if k[0] == "topic"}
        state_znode = layout.partition_state_znode
        epoch = self.state_epoch
        for key in touched:
            kind = key[0]
            if kind == "state":
                name, pid = key[1], key[2]
                if name in topics:
                    continue
                topic = image.topics.get(name)  # type: ignore[call-overload]
                part = None if topic is None else topic.partitions.get(pid)
                if part is not None:
                    found = state_znode(name, part, epoch)  # type: ignore[arg-type]
                    if found is not None:
                        states.append(found)
            elif kind == "topic":
                name = key[1]
                znodes = layout.topic_znodes(image, name, self.state_epoch)  # type: ignore[arg-type]
                for path in cache.subtree(P.topic_path(name)):  # type: ignore[arg-type]
                    if path not in znodes:
                        want[path] = None
                config = P.config_entity_path(P.CONFIG_TYPE_TOPICS, name)  # type: ignore[arg-type]
                if config not in znodes and config in cache:
                    want[config] = None
                want.update(znodes)
            elif kind == "config":
                found_config = layout.config_znode(image, key[1], key[2])  # type: ignore[arg-type]
                if found_config is not None:
                    want[found_config[0]] = found_config[1]
                    announce.add(found_config[0])
            elif kind == "client":
                root = key[1]
                znodes = layout.client_config_znodes(image, root)  # type: ignore[arg-type]
                for path in cache.subtree(root):  # type: ignore[arg-type]
                    if path not in znodes:
                        want[path] = None
                        announce.add(path)
                want.update(znodes)
                announce.update(znodes)
            elif kind == "acl":
                path, data = layout.acl_znode(image, key[1], key[2], key[3])  # type: ignore[arg-type]
                want[path] = data
                announce.add(path)
            elif kind == "token":
                path, data = layout.token_znode(image, key[1])  # type: ignore[arg-type]
                want[path] = data
                announce.add(path)
            elif kind == "pid":
                path, data = layout.producer_id_block_znode(image)
                if data is not None:
                    want[path] = data
        return want, states, announce

    def _notes(self, changes: list[tuple[str, str]], announce: set[str] | None) -> list[ZkOp]:
        """Change notifications for what changed, in the same multi group as the data they announce."""
        if not self.notifications:
            return []
        assert self._cache is not None
        notes: list[ZkOp] = []
        seen: set[str] = set()
        for path, _kind in changes:
            if path in seen or (announce is not None and path not in announce):
                continue
            seen.add(path)
            note = notification_for(path)
            if note is None:
                continue
            parent = P.parent(note.path)
            missing = []
            while parent != "/" and parent not in self._cache:
                missing.append(parent)
                parent = P.parent(parent)
            for p in reversed(missing):
                notes.append(ZkOp.create(p))
                self._cache.put(p, b"")
            notes.append(note)
        return notes

    def _flush(self, touched: dict[Key, None], counters: _Counters) -> OpGroup:
        assert self._cache is not None
        ops: list[ZkOp] = []
        if touched:
            cache = self._cache
            want, states, announce = self._want(touched)
            # A touched partition's state is compared by bytes only: a record changed it, and Kafka
            # rewrites it too. Reconcile compares by meaning (zk_diff.same); states it left with a
            # ZooKeeper controller's epoch are rewritten with the KRaft epoch once touched.
            data_of = cache.data
            set_state = ZkOp.set
            set_ops = []
            for path, data in states:
                old = data_of.get(path, _ABSENT)
                if old is _ABSENT:
                    want[path] = data  # drift: the state znode vanished; plan() recreates it
                elif old != data:
                    set_ops.append(set_state(path, data))
                    data_of[path] = data
            ops, changes = plan(want, cache)
            cache.apply(ops)
            ops.extend(set_ops)
            _count_versions(self._state_versions, ops)
            ops.extend(self._align_epochs(self._touched_partitions(touched)))
            ops.extend(self._notes(changes, announce))
            counters.entities += len(touched)
        return OpGroup(ops, self._covered[0], self._covered[1])

    def _touched_partitions(self, touched: dict[Key, None]) -> Iterator[tuple[str, int]]:
        assert self._builder is not None
        topics = self._builder.image.topics
        for key in touched:
            if key[0] == "state":
                yield key[1], key[2]  # type: ignore[misc]
            elif key[0] == "topic":
                topic = topics.get(key[1])  # type: ignore[call-overload]
                if topic is not None:
                    for pid in topic.partitions:
                        yield key[1], pid  # type: ignore[misc]

    def _align_epochs(self, partitions: Iterable[tuple[str, int]]) -> list[ZkOp]:
        """Rewrites that bring each state znode's version up to its partition's epoch.

        Kafka's ZooKeeper controller takes a state znode's version as the partition epoch, and after a
        rollback it is ZooKeeper's controller again: a version behind the epoch the brokers hold from
        this controller's LeaderAndIsr makes it refuse their AlterPartition (NOT_CONTROLLER) until the
        next election. One write per record would keep them equal; a coalesced write, or a change that
        leaves the state's bytes alone (a reassignment step), needs the difference made up, with the
        same bytes, in the same multi group. A version ahead of the epoch (ZooKeeper's controller would
        answer the brokers' AlterPartition INVALID_UPDATE_VERSION) cannot be moved back by a write: the
        znode is deleted and created again with the same bytes (version 0) in the same multi, then
        raised to the epoch (DESIGN.md invariant 9). A re-created topic's znodes are created afresh
        by `zk_diff.plan` already; this repairs what an older sync left.
        """
        assert self._builder is not None and self._cache is not None
        versions = self._state_versions
        if not versions:
            return []
        topics = self._builder.image.topics
        data_of = self._cache.data
        state_path = P.partition_state_path
        ops: list[ZkOp] = []
        for name, pid in partitions:
            path = state_path(name, pid)
            version = versions.get(path)
            if version is None:
                continue
            topic = topics.get(name)
            part = None if topic is None else topic.partitions.get(pid)
            data = data_of.get(path)
            if part is None or data is None or part.partition_epoch == version:
                continue
            if version > part.partition_epoch:
                ops.append(ZkOp.delete(path))
                ops.append(ZkOp.create(path, data))
                version = 0
            ops.extend(ZkOp.set(path, data) for _ in range(part.partition_epoch - version))
            versions[path] = part.partition_epoch
        return ops

    # -- reconcile --------------------------------------------------------------------------------

    def reconcile(
        self,
        image: ReplayResult | None = None,
        tree: ZkTree | ZkPicture | None = None,
        *,
        take: bool = False,
        loaded: bool = False,
    ) -> list[Repair]:
        """Make ZooKeeper match the image (default: the log's committed end) and list each repair.

        Reads every Kafka znode with the bulk reader (or uses `tree`), writes the differences at the
        owned paths as fenced multis with notifications, and sets /migration to the image's offset.
        Drift of every kind is repaired: missing or extra topics and partitions, changed partition
        states, configs, quotas, SCRAM credentials, ACLs, tokens, the producer id block, and pending
        deletions left in /admin/delete_topics. `take`: the syncer takes `image` (and `tree`) over
        instead of copying it (its giver never uses them again).
        """
        with without_gc():  # whole-cluster images and diffs: see migrator.bulk
            return self._reconcile(image, tree, take, loaded)

    def _reconcile(
        self,
        image: ReplayResult | None,
        tree: ZkTree | ZkPicture | None,
        take: bool = False,
        loaded: bool = False,
    ) -> list[Repair]:
        with self._lock:
            started = time.perf_counter()
            try:
                if image is None:
                    if not (loaded and self._loaded):  # else `fetch` loaded it under the log's lock
                        self._load()
                else:
                    self._adopt(image, take)
                assert self._builder is not None
                offset, epoch = self._covered
                # What /migration says now (a write that stopped with multis in flight may have
                # left more than the writer saw land); it must still be this claim's.
                current = self.writer.resync().kraft_metadata_offset
                if current > offset:
                    raise BadInputError(
                        f"/migration covers offset {current} but the log at {self.log.partition_dir} "
                        f"ends at {offset}: this is not the log ZooKeeper was migrated from, or it lost "
                        "records"
                    )
                if tree is None:
                    tree, take = read_tree(self.client), True  # its own read: nobody else holds it
                # `take`: the caller gave the tree away too; its znodes go before the image's are built
                if isinstance(tree, ZkPicture):
                    picture, ours = tree, take
                else:
                    picture, ours = ZkPicture.of(tree, take=take), True
                del tree
                actual, versions = picture.actual, picture.versions
                if not ours:  # the caller's picture stays as it was
                    actual, versions = dict(actual), dict(versions)
                cache = ZkCache.adopt(actual)  # the picture's dict itself, not a copy of it
                # the desired znodes a topic at a time, never all of them (2M at 1M partitions)
                ops, changes = plan_chunks(layout.znode_chunks(self._builder.image, self.control), cache)
                cache.apply(ops)
                self._cache = cache
                self._state_versions = versions
                _count_versions(self._state_versions, ops)
                image_topics = self._builder.image.topics
                behind = self._align_epochs(
                    (name, pid) for name, t in image_topics.items() for pid in t.partitions
                )
                changed = {c[0] for c in changes}
                for op in behind:
                    if op.path not in changed:
                        changed.add(op.path)
                        changes.append((op.path, "update"))
                ops.extend(behind)
                ops.extend(self._notes(changes, None))
                self.writer.write_groups([OpGroup(ops, offset, epoch)])
            except OversizedWriteError as e:
                self._reset()
                raise _never_synced(e) from None
            except BaseException:
                self._reset()
                raise
            self.last_reconcile_ms = (time.perf_counter() - started) * 1000
            return repairs_of(changes)

    # -- sync ---------------------------------------------------------------------------------------

    def fetch(self) -> list[tuple[int, int, MetadataRecord | OpaqueRecord]] | None:
        """Read the committed records after those already read into memory, where no append runs at
        the same time (the controller's commit lock), for `sync(fetched_only=True)` to write outside
        that lock: a ZooKeeper outage met mid-write (retries up to minutes) then holds no append up.
        Before the first reconcile (or after an error) it loads the image that reconcile needs.
        Returns the records read (None: an image was loaded, or a sync held the syncer)."""
        if self._cache is None:
            # Not while a sync holds the syncer (it may be waiting on ZooKeeper): that sync's own
            # reconcile or the next fetch loads the image.
            if self._lock.acquire(blocking=False):
                try:
                    if self._cache is None and not self._loaded:
                        self._load()  # the log part of the first reconcile; ZooKeeper's is the sync's
                        self._loaded = True
                finally:
                    self._lock.release()
            return None
        # Without the syncer's lock: a sync writing earlier records may hold it through a ZooKeeper
        # outage. It takes records from the left of the deque and moves _next_read before each pop.
        try:
            start = self._fetched[-1][0] + 1
        except IndexError:
            start = self._next_read
        got = list(self._tail.read(start))
        self._fetched.extend(got)
        self._fetched_end = self.committed_end()
        return got

    def sync(self, until_offset: int | None = None, *, fetched_only: bool = False) -> SyncReport:
        """Write every committed record after what ZooKeeper covers (up to `until_offset`), in order.

        The first call (or the first after an error) reconciles the whole image instead.
        `fetched_only`: write only what `fetch` read (the log is not read: the caller need not hold
        the log's writer lock), or reconcile the image `fetch` loaded.
        """
        with self._lock:
            started = time.perf_counter()
            before = self.writer.migration.kraft_metadata_offset
            stats = (self.writer.stats.ops, self.writer.stats.multis)
            report = SyncReport(from_offset=before, to_offset=before)
            if self._cache is None:
                if not fetched_only:
                    report.repairs = self.reconcile()
                elif self._loaded:
                    report.repairs = self.reconcile(loaded=True)
            else:
                counters = _Counters()
                try:
                    self.writer.write_groups(self._groups(until_offset, counters, fetched_only))
                except OversizedWriteError as e:
                    self._reset()
                    raise _never_synced(e) from None
                except BaseException:
                    self._reset()
                    raise
                report.records = counters.records
                report.entities = counters.entities
                elapsed = (time.perf_counter() - started) * 1000
                if counters.records:
                    self.last_delta_ms = elapsed
                    self.delta_write_ms.append(elapsed)
            report.to_offset = self.writer.migration.kraft_metadata_offset
            report.ops = self.writer.stats.ops - stats[0]
            report.multis = self.writer.stats.multis - stats[1]
            report.seconds = time.perf_counter() - started
            report.lag = self.lag()
            report.open_transaction = self._txn
            return report

    def _records(self, fetched_only: bool) -> Iterator[tuple[int, int, MetadataRecord | OpaqueRecord]]:
        """What `fetch` read, then (unless `fetched_only`) the log after it. A fetched record leaves
        memory once the next is asked for: one the consumer stopped before stays for the next sync."""
        fetched = self._fetched
        while fetched:
            entry = fetched[0]
            if entry[0] >= self._next_read:
                yield entry
            fetched.popleft()
        if not fetched_only:
            yield from self._tail.read(self._next_read)

    def _groups(
        self, until: int | None, counters: _Counters, fetched_only: bool = False
    ) -> Iterator[OpGroup]:
        touched: dict[Key, None] = {}
        since = 0
        chunk_keys, chunk_records = self.chunk_keys, self.chunk_records
        feed = self._feed
        assert self._builder is not None
        replay = self._builder.replay
        topic_ids = self._topic_ids
        short = False
        for offset, epoch, rec in self._records(fetched_only):
            if until is not None and offset > until:
                short = True
                break
            self._next_read = offset + 1
            since += 1
            if rec.api_key == 5 and self._txn is None and type(rec) is MetadataRecord:
                # The hot path, inlined: what _feed, _apply and _key do for a PartitionChangeRecord.
                f = rec.fields
                name = topic_ids.get(f["TopicId"])
                if name is not None:
                    if (
                        f.get("Replicas") is None
                        and f.get("AddingReplicas") is None
                        and f.get("RemovingReplicas") is None
                    ):
                        touched[("state", name, f["PartitionId"])] = None
                    else:
                        touched[("topic", name)] = None
                replay(offset, rec)
                self._covered = (offset, epoch)
            else:
                feed(offset, epoch, rec, touched)
            if self._txn is None and (len(touched) >= chunk_keys or since >= chunk_records):
                counters.records += since
                yield self._flush(touched, counters)
                touched = {}
                since = 0
        counters.records += since
        if fetched_only:
            end = self._fetched_end  # read before the deque is seen empty: a fetch extends it first
            if self._txn is None and not short and not self._fetched and end >= 0:
                self._cover_tail(end)
        elif self._txn is None and (until is None or until >= self.committed_end()):
            self._cover_tail()
        yield self._flush(touched, counters)

    # -- bounding the lag ----------------------------------------------------------------------------

    def over_lag_bound(self) -> bool:
        return self.lag() > self.max_lag_records

    def wait_for_lag_below(self, n: int | None = None, timeout: float = 60.0) -> int:
        """Block until the write-behind lag is below `n` (default: the configured bound); returns it.

        Appenders call this before appending when the lag exceeds the bound. When no other thread
        is syncing, the caller's thread syncs itself; otherwise it waits for that thread's progress.
        Raises UnreachableError when the lag stays too high for `timeout` seconds.
        """
        bound = self.max_lag_records if n is None else n
        deadline = time.monotonic() + timeout
        while True:
            lag = self.lag()
            if lag < bound:
                return lag
            stop.check(f"write-behind lag {lag}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise UnreachableError(
                    f"ZooKeeper write-behind lag is {lag} records, not below {bound} after {timeout:g}s: "
                    "ZooKeeper is not keeping up (check it with `zk2kraft status`)"
                )
            if self._lock.acquire(blocking=False):
                try:
                    report = self.sync()
                finally:
                    self._lock.release()
                if report.open_transaction is not None and self.lag() >= bound:
                    # An open transaction holds /migration back; only its End can release it.
                    with self._progress:
                        self._progress.wait(min(remaining, 0.2))
            else:
                with self._progress:
                    self._progress.wait(min(remaining, 0.5))


def _count_versions(versions: dict[str, int], ops: Iterable[ZkOp]) -> None:
    """Each write to a state znode as ZooKeeper counts it: create → 0, set → +1, delete → gone."""
    for op in ops:
        path = op.path
        if not is_state_path(path):
            continue
        if op.kind == "set":
            if path in versions:
                versions[path] += 1
        elif op.kind == "create":
            versions[path] = 0
        elif op.kind == "delete":
            versions.pop(path, None)
