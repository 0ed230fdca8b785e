"""The durable facts of a migration and the one state they derive; every command learns the state here.

There is no side state file. The log says what was committed (its last ZkMigrationStateRecord, an
open metadata transaction at its end); ZooKeeper says who holds the cluster (`/controller`) and what
its data covers (`/migration`). `state_machine.derive_state` turns exactly these into one state, so a
crash at any instant leaves facts from which the next run resumes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError

from migrator.errors import BadInputError
from migrator.kraft import dirfiles
from migrator.kraft.image import OpenTransaction, ReplayResult
from migrator.kraft.log import METADATA_PARTITION, MetadataLog
from migrator.kraft.log_image import LoadedImage
from migrator.model import ControllerZnode, MigrationZnode
from migrator.zk import paths as P
from migrator.zk.migration_client import codec, permission_denied, read_migration, retry_transient
from state_machine import DerivedState, DurableFacts, KafkaMigrationCode, derive_state

__all__ = ["Facts", "LogFacts", "ZkFacts", "gather", "gather_zk", "log_exists", "read_log_facts"]

COPY_TRANSACTION_NAME = "ZK Migration"


@dataclass
class LogFacts:
    """What the metadata log directory says; `exists` is False for a missing or foreign log."""

    log_dir: str
    exists: bool = False
    foreign_cluster: str | None = None  # cluster id of a log that belongs to another cluster
    cluster_id: str | None = None
    node_id: int | None = None
    end_offset: int = 0
    latest_epoch: int = -1
    last_record_offset: int = -1  # offset of the last metadata record applied (control batches excluded)
    migration_code: int | None = None  # Kafka's ZkMigrationState of the last committed record
    migration_offset: int | None = None
    migration_timestamp_ms: int | None = None  # append time of the batch holding it
    open_transaction: OpenTransaction | None = None
    replay: ReplayResult | None = None
    #: a read-only open's load and the log's identity then: the writable open adopts it (no replay)
    handover: tuple[LoadedImage, tuple[int | None, ...]] | None = field(default=None, repr=False)

    @property
    def records(self) -> bool:
        return self.end_offset > 0


@dataclass
class ZkFacts:
    cluster_id: str | None = None
    controller: ControllerZnode | None = None
    controller_zk_version: int | None = None
    zk_controller_epoch: int | None = None
    controller_epoch_zk_version: int | None = None
    migration: MigrationZnode | None = None
    registered_brokers: list[int] = field(default_factory=list)

    @property
    def kraft_holds_controller(self) -> bool:
        c = self.controller
        return c is not None and (c.kraft_controller_epoch > 0 or not c.ephemeral)


@dataclass
class Facts:
    log: LogFacts
    zk: ZkFacts
    durable: DurableFacts
    derived: DerivedState

    @property
    def lag(self) -> int:
        """Committed records not yet covered by /migration (Kafka's ZkWriteBehindLag)."""
        return write_behind_lag(self.log, self.zk)


def write_behind_lag(log: LogFacts, zk: ZkFacts) -> int:
    """`last committed record offset − /migration offset`, 0 before the copy is recorded (as Kafka) and
    after finalize: ZooKeeper is no longer written, so nothing is behind it (the records after
    POST_MIGRATION never go there)."""
    m = zk.migration
    if log.migration_code is None or m is None or m.kraft_metadata_offset < 0:
        return 0
    if log.migration_code == KafkaMigrationCode.POST_MIGRATION:
        return 0
    return max(0, log.last_record_offset - m.kraft_metadata_offset)


def log_exists(log_dir: str | os.PathLike[str]) -> bool:
    """A formatted metadata log directory (meta.properties), the only kind the state derives from."""
    path = Path(log_dir)
    return (path / dirfiles.META_PROPERTIES).is_file() and (path / METADATA_PARTITION).is_dir()


def read_log_facts(
    log_dir: str | os.PathLike[str],
    log: MetadataLog | None = None,
    zk_cluster_id: str | None = None,
    replay: ReplayResult | None = None,
) -> LogFacts:
    """Replay the log (read-only unless the caller passes its writable `log`) into its facts; `replay`:
    the log's replay to its end, already at hand (the first sync's syncer holds one), used instead."""
    facts = LogFacts(log_dir=str(log_dir))
    if log is None and not log_exists(log_dir):
        return facts
    own = log is None
    if own:
        log = MetadataLog.open(log_dir)
    assert log is not None
    try:
        meta = log.meta
        facts.cluster_id = meta.cluster_id if meta else None
        facts.node_id = meta.node_id if meta else None
        if zk_cluster_id is not None and facts.cluster_id not in (None, zk_cluster_id):
            facts.foreign_cluster = facts.cluster_id
            return facts
        facts.exists = True
        if replay is None:
            loaded = log.load_image()
            replay = loaded.result
            if own:
                facts.handover = (loaded, log.identity())
        facts.replay = replay
        facts.end_offset = log.end_offset
        facts.latest_epoch = log.latest_epoch
        facts.last_record_offset = replay.last_offset
        facts.migration_code = replay.migration_state
        facts.migration_offset = replay.migration_state_offset
        if replay.migration_state_offset is not None:
            facts.migration_timestamp_ms = log.timestamp_of(replay.migration_state_offset)
        facts.open_transaction = replay.open_transaction
    finally:
        if own:
            log.close()
    return facts


def read_znode(client: KazooClient, path: str) -> tuple[bytes, object] | None:
    """(data, stat) of ``path`` with transient errors retried; None when it does not exist."""
    try:
        return retry_transient(lambda: client.get(path), f"reading {path}")  # type: ignore[no-any-return]
    except NoNodeError:
        return None
    except NoAuthError:
        raise permission_denied(path) from None


def gather_zk(client: KazooClient) -> ZkFacts:
    """/cluster/id, /controller, /controller_epoch, /migration and the live broker registrations."""
    zk = ZkFacts()
    node = read_znode(client, P.CLUSTER_ID)
    if node is not None:
        zk.cluster_id = codec.decode_cluster_id(P.CLUSTER_ID, node[0])
    node = read_znode(client, P.CONTROLLER_EPOCH)
    if node is not None:
        zk.zk_controller_epoch = codec.decode_controller_epoch(P.CONTROLLER_EPOCH, node[0])
        zk.controller_epoch_zk_version = node[1].version  # type: ignore[attr-defined]
    node = read_znode(client, P.CONTROLLER)
    if node is not None:
        data, stat = node
        zk.controller = codec.decode_controller(P.CONTROLLER, data, ephemeral=stat.ephemeralOwner != 0)  # type: ignore[attr-defined]
        zk.controller_zk_version = stat.version  # type: ignore[attr-defined]
    zk.migration = read_migration(client)
    try:
        names = retry_transient(lambda: client.get_children(P.BROKER_IDS), f"listing {P.BROKER_IDS}")
    except NoNodeError:
        names = []
    except NoAuthError:
        raise permission_denied(P.BROKER_IDS) from None
    zk.registered_brokers = sorted(int(n) for n in names if n.lstrip("-").isdigit())
    return zk


def derive(log: LogFacts, zk: ZkFacts) -> Facts:
    durable = DurableFacts(
        log_exists=log.exists,
        last_migration_code=log.migration_code,
        open_transaction=(
            (log.open_transaction.name or "(unnamed)") if log.open_transaction is not None else None
        ),
        migration_znode_offset=zk.migration.kraft_metadata_offset if zk.migration is not None else None,
        controller_kraft_epoch=(
            max(zk.controller.kraft_controller_epoch, 0)
            if zk.controller is not None and zk.kraft_holds_controller
            else None
        ),
    )
    return Facts(log=log, zk=zk, durable=durable, derived=derive_state(durable))


def gather(
    client: KazooClient,
    log_dir: str | os.PathLike[str],
    log: MetadataLog | None = None,
    replay: ReplayResult | None = None,
) -> Facts:
    """Read both sides and derive the state. With `log`, the caller's (writable) open log is used;
    `replay`, the replay of that log to its end if the caller has one (see `read_log_facts`)."""
    zk = gather_zk(client)
    return derive(read_log_facts(log_dir, log, zk.cluster_id, replay), zk)


def require_own_log(facts: Facts) -> None:
    """Refuse a log directory that belongs to another cluster: it is never written nor archived."""
    if facts.log.foreign_cluster is not None:
        raise BadInputError(
            f"log directory {facts.log.log_dir} belongs to cluster {facts.log.foreign_cluster}, but "
            f"ZooKeeper holds cluster {facts.zk.cluster_id}: point --log-dir at an empty directory"
        )
