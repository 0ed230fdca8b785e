"""The migration driver's one door to ZooKeeper, as Kafka's `MigrationClient` is its migration driver's.

Everything the driver and its steps ask of ZooKeeper goes through here: ZooKeeper's view of the
cluster, the /controller claim and its release, the /migration znode, the broker ids a replica
assignment names and the live brokers' racks. Each read retries lost connections (`zk.retry`) and
turns a missing permission into the one-line error; the codecs and kazoo stay behind this door.

The migration's other modules (facts, copy, the dual-write syncer and its diff, log binding, drift,
estimates) read and write ZooKeeper through what this module exports too: the bulk reader, the layout
codecs (znodes <-> image), the fenced writer and its ops, the claim and the retry policy. So
`migrator.migration` imports nothing of `migrator.zk` but this door and `paths`
(tests/test_architecture.py), and the migration's whole use of ZooKeeper is listed in one place.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoAuthError, NoNodeError

from migrator.errors import FencedError
from migrator.model import MigrationZnode
from migrator.zk import acl_codec, admin_codec, codec, config_codec, credential_codec, layout
from migrator.zk import paths as P
from migrator.zk.connection import ZkSecurity, close, permission_denied
from migrator.zk.fenced_writer import FencedZkWriter, OpGroup, OversizedWriteError, ZkOp
from migrator.zk.layout import LayoutResult, image_from_tree, with_control_from
from migrator.zk.leadership import (
    Claim,
    claim_controller,
    read_claim,
    read_migration,
    release_controller,
    write_migration_unconditionally,
)
from migrator.zk.read_reuse import OwnWrites, refresh
from migrator.zk.reader import read_tree
from migrator.zk.retry import TRANSIENT, retry_transient
from migrator.zk.tree import ZkTree

__all__ = [
    # the driver's door
    "Claim",
    "LayoutResult",
    "MigrationClient",
    "OwnWrites",
    "ZkSecurity",
    "ZkTree",
    # what the migration's other modules use of ZooKeeper
    "FencedZkWriter",
    "OpGroup",
    "OversizedWriteError",
    "ZkOp",
    "acl_codec",
    "admin_codec",
    "codec",
    "config_codec",
    "credential_codec",
    "image_from_tree",
    "layout",
    "permission_denied",
    "read_migration",
    "read_tree",
    "TRANSIENT",
    "retry_transient",
    "with_control_from",
]


class MigrationClient:
    """ZooKeeper as the migration sees it; `zk` is the kazoo session underneath."""

    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk

    @classmethod
    @contextmanager
    def over(cls, client: KazooClient) -> Iterator[MigrationClient]:
        """The door over a session its caller opened (the Target's `connect`), closed with the door."""
        try:
            yield cls(client)
        finally:
            close(client)

    # --- reads -----------------------------------------------------------------------------------

    def _get(self, path: str) -> bytes | None:
        try:
            data, _stat = retry_transient(lambda: self.zk.get(path), f"reading {path}")
        except NoNodeError:
            return None
        except NoAuthError:
            raise permission_denied(path) from None
        return data  # type: ignore[no-any-return]

    def read_view(self) -> tuple[ZkTree, LayoutResult]:
        """The whole cluster tree and the image it decodes to (problems kept, not raised)."""
        tree = read_tree(self.zk)
        return tree, image_from_tree(tree, strict=False)

    def record_own_writes(self) -> OwnWrites:
        """Start recording this session's writes, so a read just made can be reused after them."""
        own = OwnWrites(self.zk)
        own.start()
        return own

    def refresh(self, tree: ZkTree, own: OwnWrites) -> str | None:
        """`tree` brought to ZooKeeper's present if only `own`'s writes happened since it was read
        (zk.read_reuse); None when it was, else why it must be read again."""
        try:
            return retry_transient(lambda: refresh(self.zk, tree, own), "checking ZooKeeper for changes")
        finally:
            own.stop()

    def topic_names(self) -> list[str]:
        try:
            return list(retry_transient(lambda: self.zk.get_children(P.TOPICS), f"listing {P.TOPICS}"))
        except NoNodeError:
            return []
        except NoAuthError:
            raise permission_denied(P.TOPICS) from None

    def assignment_broker_ids(self) -> set[int]:
        """Every broker id in a replica assignment under /brokers/topics (a full scan, as Kafka's)."""
        ids: set[int] = set()
        for name in self.topic_names():
            path = P.topic_path(name)
            data = self._get(path)
            if data is None:
                continue
            topic = codec.decode_topic(path, data)
            for replicas in (*topic.partitions.values(), *topic.adding_replicas.values()):
                ids.update(replicas)
        return ids

    def live_brokers(self, ids: Sequence[int]) -> dict[int, str | None]:
        """Registered ZooKeeper brokers among `ids` and their racks (for replica placement)."""
        out: dict[int, str | None] = {}
        for broker_id in ids:
            path = P.broker_path(broker_id)
            data = self._get(path)
            if data is not None:
                out[broker_id] = codec.decode_broker(path, data, broker_id).rack
        return out

    def read_claim(self) -> Claim | None:
        return read_claim(self.zk)

    # --- the claim and /migration ------------------------------------------------------------------

    def claim(self, node_id: int, epoch: int) -> Claim:
        """/controller and /controller_epoch for KRaft controller `node_id` in `epoch` (fences the rest)."""
        return claim_controller(self.zk, node_id, epoch)

    def write_migration(self, znode: MigrationZnode, claim: Claim) -> MigrationZnode:
        """/migration written whatever it held, under `claim` (KAFKA-16171)."""
        return write_migration_unconditionally(self.zk, znode, claim)

    def delete_migration(self, version: int) -> None:
        """Delete /migration at `version`; gone already is fine, changed meanwhile is a fence."""
        try:
            retry_transient(lambda: self.zk.delete(P.MIGRATION, version=version), f"deleting {P.MIGRATION}")
        except NoNodeError:
            pass
        except BadVersionError:
            raise FencedError(
                f"{P.MIGRATION} changed while zk2kraft removed it: another controller is active"
            ) from None
        except NoAuthError:
            raise permission_denied(P.MIGRATION) from None

    # --- the release -------------------------------------------------------------------------------

    def release(self, claim: Claim, bump_above: int) -> int:
        """Give ZooKeeper back under `claim`: /controller and /migration go, the epoch above `bump_above`."""
        return release_controller(self.zk, claim, bump_above=bump_above)

    def release_unclaimed(
        self,
        controller_epoch: int,
        controller_epoch_version: int,
        migration_version: int | None,
        bump_above: int,
    ) -> int:
        """The release with no KRaft claim left (a crash after part of an earlier one): /migration goes and
        /controller_epoch is lifted with version-checked writes, so a ZooKeeper controller elected
        meanwhile is never overwritten. Returns the new epoch."""
        new_epoch = max(controller_epoch, bump_above) + 1
        txn = self.zk.transaction()
        txn.set_data(P.CONTROLLER_EPOCH, codec.encode_controller_epoch(new_epoch), controller_epoch_version)
        if migration_version is not None:
            txn.delete(P.MIGRATION, migration_version)
        results = retry_transient(lambda: txn.commit(), "releasing ZooKeeper")
        if any(isinstance(r, Exception) for r in results):
            raise FencedError(
                f"{P.CONTROLLER_EPOCH} or {P.MIGRATION} changed during the rollback; run it again"
            )
        return new_epoch
