"""Controller leadership in ZooKeeper, claimed and released the way Kafka's KRaft controller does it.

A claim is one multi (`KafkaZkClient.tryRegisterKRaftControllerAsActiveController`): bump
`/controller_epoch` under a version check and replace `/controller` with a *persistent* node carrying
`kraftControllerEpoch`, so ZK-mode brokers stop electing a controller of their own. The claim's
`/controller_epoch` version is then the fence of every dual-write multi (fenced_writer).

The release is zk2kraft's rollback: one multi, fenced by the same version, that deletes `/controller`
and `/migration` (KAFKA-17146) and lifts `/controller_epoch` above the KRaft epoch. Partition state
znodes written during dual-write carry the KRaft epoch as their `controller_epoch`; a ZK controller
elected with a lower epoch is ignored by the brokers and partitions go offline (KAFKA-20488).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.protocol.states import ZnodeStat
from kazoo.security import OPEN_ACL_UNSAFE

from migrator.errors import BadInputError, FencedError, PermissionDeniedError, UnreachableError
from migrator.model import ControllerZnode, MigrationZnode
from migrator.zk import codec
from migrator.zk import paths as P
from migrator.zk.retry import DEFAULT_RETRY_TIMEOUT, TRANSIENT, retry_transient

__all__ = [
    "Claim",
    "ControllerState",
    "claim_controller",
    "read_claim",
    "read_controller_state",
    "read_migration",
    "release_controller",
    "write_migration_unconditionally",
]


@dataclass(frozen=True, slots=True)
class Claim:
    """A KRaft controller's hold on ZooKeeper: the fence every dual-write multi checks."""

    kraft_controller_id: int
    kraft_epoch: int
    zk_controller_epoch: int  # the value of /controller_epoch the claim wrote
    controller_epoch_zk_version: int  # the znode version of /controller_epoch after the claim


@dataclass(frozen=True, slots=True)
class ControllerState:
    """/controller_epoch and /controller as read together."""

    zk_controller_epoch: int
    controller_epoch_zk_version: int
    controller: ControllerZnode | None
    controller_zk_version: int | None


def _denied(path: str) -> PermissionDeniedError:
    return PermissionDeniedError(
        f"ZooKeeper denied access to {path}: check --zk-auth credentials and the znode's ACL"
    )


def _get(client: KazooClient, path: str) -> tuple[bytes, ZnodeStat] | None:
    try:
        return retry_transient(lambda: client.get(path), f"reading {path}", client=client)  # type: ignore[no-any-return]
    except NoNodeError:
        return None
    except NoAuthError:
        raise _denied(path) from None


def read_controller_state(client: KazooClient) -> ControllerState:
    """Both znodes; a missing /controller_epoch means this is not a Kafka cluster's ZooKeeper."""
    epoch_node = _get(client, P.CONTROLLER_EPOCH)
    if epoch_node is None:
        raise BadInputError(
            f"{P.CONTROLLER_EPOCH} missing: is this a Kafka cluster? (check the chroot of --zookeeper)"
        )
    epoch = codec.decode_controller_epoch(P.CONTROLLER_EPOCH, epoch_node[0])
    controller_node = _get(client, P.CONTROLLER)
    controller = None
    version = None
    if controller_node is not None:
        data, stat = controller_node
        controller = codec.decode_controller(P.CONTROLLER, data, ephemeral=stat.ephemeralOwner != 0)
        version = stat.version
    return ControllerState(epoch, epoch_node[1].version, controller, version)


def read_claim(client: KazooClient) -> Claim | None:
    """The claim a KRaft controller holds now (persistent /controller with kraftControllerEpoch), if any.

    What a restarted driver or a rollback uses to act under the existing claim without bumping it.
    """
    state = read_controller_state(client)
    c = state.controller
    if c is None or c.ephemeral or c.kraft_controller_epoch < 0:
        return None
    return Claim(
        c.broker_id, c.kraft_controller_epoch, state.zk_controller_epoch, state.controller_epoch_zk_version
    )


def _commit(build: object) -> list[object]:
    """Run a kazoo transaction; returns its per-op results (exceptions for a failed multi)."""
    try:
        return list(build.commit())  # type: ignore[attr-defined]
    except NoAuthError:
        raise _denied(P.CONTROLLER_EPOCH) from None


def _failure(results: list[object]) -> tuple[int, Exception] | None:
    first: tuple[int, Exception] | None = None
    for i, r in enumerate(results):
        if isinstance(r, Exception):
            if not isinstance(r, RolledBackError | RuntimeInconsistency):
                return i, r
            if first is None:
                first = (i, r)
    return first


def claim_controller(client: KazooClient, kraft_controller_id: int, kraft_epoch: int | None = None) -> Claim:
    """Claim ZooKeeper controllership for KRaft controller `kraft_controller_id`.

    `kraft_epoch` defaults to one above both the ZooKeeper controller epoch and any KRaft epoch
    already in /controller. Raises FencedError when another claimant holds an epoch ≥ ours or when a
    ZooKeeper controller changed the znodes between our read and our multi.
    """
    state = read_controller_state(client)
    existing = state.controller
    existing_kraft = existing.kraft_controller_epoch if existing is not None else -1
    if kraft_epoch is None:
        kraft_epoch = max(state.zk_controller_epoch, existing_kraft) + 1
    if existing is not None and existing_kraft >= kraft_epoch:
        if (
            existing.broker_id == kraft_controller_id
            and existing_kraft == kraft_epoch
            and not existing.ephemeral
        ):
            # Already ours (a restart after the claim landed): keep it, bumping nothing.
            return Claim(
                kraft_controller_id, kraft_epoch, state.zk_controller_epoch, state.controller_epoch_zk_version
            )
        raise FencedError(
            f"{P.CONTROLLER} is held by KRaft controller {existing.broker_id} in epoch {existing_kraft}, "
            f"not below ours ({kraft_epoch}): a newer controller has claimed ZooKeeper"
        )
    if kraft_epoch <= state.zk_controller_epoch:
        raise BadInputError(
            f"KRaft epoch {kraft_epoch} must exceed ZooKeeper's controller epoch "
            f"{state.zk_controller_epoch} (from {P.CONTROLLER_EPOCH}); omit the epoch to take the next one"
        )
    new_epoch = state.zk_controller_epoch + 1
    controller = ControllerZnode(
        json_version=2,
        broker_id=kraft_controller_id,
        timestamp=int(time.time() * 1000),
        kraft_controller_epoch=kraft_epoch,
        is_kraft=True,
        ephemeral=False,
    )
    acl = client.default_acl or OPEN_ACL_UNSAFE
    txn = client.transaction()
    txn.set_data(
        P.CONTROLLER_EPOCH, codec.encode_controller_epoch(new_epoch), state.controller_epoch_zk_version
    )
    if state.controller_zk_version is not None:
        txn.delete(P.CONTROLLER, state.controller_zk_version)
    txn.create(P.CONTROLLER, codec.encode_controller(controller), acl=acl)
    claim = Claim(kraft_controller_id, kraft_epoch, new_epoch, state.controller_epoch_zk_version + 1)
    try:
        results = _commit(txn)
    except TRANSIENT:
        # The multi may have landed: our /controller with our epoch and the bumped epoch tell.
        after = read_controller_state(client)
        c = after.controller
        if (
            c is not None
            and c.broker_id == kraft_controller_id
            and c.kraft_controller_epoch == kraft_epoch
            and after.controller_epoch_zk_version == claim.controller_epoch_zk_version
            and after.zk_controller_epoch == new_epoch
        ):
            return claim
        if after.controller_epoch_zk_version == state.controller_epoch_zk_version:
            return claim_controller(client, kraft_controller_id, kraft_epoch)
        raise FencedError(
            f"{P.CONTROLLER_EPOCH} changed while the claim's connection was lost: another controller "
            "was elected; retry the claim"
        ) from None
    failure = _failure(results)
    if failure is None:
        return claim
    index, error = failure
    if isinstance(error, NoAuthError):
        raise _denied([P.CONTROLLER_EPOCH, P.CONTROLLER, P.CONTROLLER][min(index, 2)])
    if index == 0 and isinstance(error, BadVersionError | NoNodeError):
        race = f"{P.CONTROLLER_EPOCH} changed (version {state.controller_epoch_zk_version} expected)"
    elif isinstance(error, NoNodeError):
        race = f"{P.CONTROLLER} vanished (its ZooKeeper controller's session ended)"
    elif isinstance(error, BadVersionError):
        race = f"{P.CONTROLLER} was rewritten (version {state.controller_zk_version} expected)"
    elif isinstance(error, NodeExistsError):
        race = f"{P.CONTROLLER} was created by a ZooKeeper broker's election"
    else:
        raise UnreachableError(
            f"ZooKeeper refused the controller claim: {type(error).__name__} at op {index}"
        )
    raise FencedError(f"lost the race for controllership: {race} between our read and our claim; retry")


def release_controller(client: KazooClient, claim: Claim, bump_above: int = -1) -> int:
    """Give ZooKeeper back to ZK-mode controllers (rollback); returns the new /controller_epoch.

    One multi fenced by the claim's /controller_epoch version: /controller_epoch becomes one above the
    current ZooKeeper epoch, the KRaft epoch and `bump_above` (the highest controller_epoch written
    into partition state znodes, when the caller knows it); /controller and /migration are deleted.
    """
    state = read_controller_state(client)
    if state.controller_epoch_zk_version != claim.controller_epoch_zk_version:
        raise FencedError(
            f"cannot release: {P.CONTROLLER_EPOCH} is at version {state.controller_epoch_zk_version}, not "
            f"the claim's {claim.controller_epoch_zk_version}: another controller holds ZooKeeper now"
        )
    new_epoch = max(state.zk_controller_epoch, claim.kraft_epoch, bump_above) + 1
    migration = _get(client, P.MIGRATION)
    txn = client.transaction()
    txn.set_data(
        P.CONTROLLER_EPOCH, codec.encode_controller_epoch(new_epoch), claim.controller_epoch_zk_version
    )
    if state.controller_zk_version is not None:
        txn.delete(P.CONTROLLER, state.controller_zk_version)
    if migration is not None:
        txn.delete(P.MIGRATION, migration[1].version)
    try:
        results = _commit(txn)
    except TRANSIENT:
        after = read_controller_state(client)
        if (
            after.controller_epoch_zk_version == claim.controller_epoch_zk_version + 1
            and after.zk_controller_epoch == new_epoch
            and after.controller is None
            and _get(client, P.MIGRATION) is None
        ):
            return new_epoch
        if after.controller_epoch_zk_version == claim.controller_epoch_zk_version:
            return release_controller(client, claim, bump_above)
        raise FencedError(
            f"{P.CONTROLLER_EPOCH} changed while the release's connection was lost; check `zk2kraft status`"
        ) from None
    failure = _failure(results)
    if failure is None:
        return new_epoch
    index, error = failure
    if isinstance(error, NoAuthError):
        raise _denied([P.CONTROLLER_EPOCH, P.CONTROLLER, P.MIGRATION][min(index, 2)])
    if index == 0:
        raise FencedError(
            f"cannot release: {P.CONTROLLER_EPOCH} changed (a newer controller claimed ZooKeeper)"
        )
    if isinstance(error, NoNodeError | BadVersionError):
        # /controller or /migration changed between the read and the multi: read again and retry.
        return release_controller(client, claim, bump_above)
    raise UnreachableError(f"ZooKeeper refused the release: {type(error).__name__} at op {index}")


def read_migration(client: KazooClient) -> MigrationZnode | None:
    """/migration with its znode version and mtime; None when it does not exist."""
    node = _get(client, P.MIGRATION)
    if node is None:
        return None
    data, stat = node
    m = codec.decode_migration(P.MIGRATION, data, zk_version=stat.version)
    m.mtime_ms = stat.mtime
    return m


def write_migration_unconditionally(
    client: KazooClient, m: MigrationZnode, claim: Claim | None = None
) -> MigrationZnode:
    """Write /migration with any version (creating it when missing) and return it with its new version.

    After a claim, the version read from /migration may be stale (ZooKeeper reads of other paths are
    not linearizable: KAFKA-16171/16667), so the first write learns it instead. With `claim`, the
    write is fenced by the claim's /controller_epoch version like every dual-write multi.
    """
    data = codec.encode_migration(m)
    deadline = time.monotonic() + DEFAULT_RETRY_TIMEOUT
    while True:
        txn = client.transaction()
        if claim is not None:
            txn.check(P.CONTROLLER_EPOCH, claim.controller_epoch_zk_version)
        exists = retry_transient(lambda: client.exists(P.MIGRATION), f"reading {P.MIGRATION}", client=client)
        if exists is None:
            txn.create(P.MIGRATION, data, acl=client.default_acl or OPEN_ACL_UNSAFE)
        else:
            txn.set_data(P.MIGRATION, data, -1)
        try:
            results = retry_transient(lambda t=txn: _commit(t), "writing /migration", client=client)
        except KazooException as e:
            raise UnreachableError(f"cannot write {P.MIGRATION}: {type(e).__name__}") from None
        failure = _failure(results)
        if failure is None:
            stat = results[-1]
            version = 0 if exists is None else stat.version  # type: ignore[attr-defined]
            return m.model_copy(update={"zk_version": version, "mtime_ms": -1})
        index, error = failure
        if isinstance(error, NoAuthError):
            raise _denied(P.MIGRATION)
        if claim is not None and index == 0:
            raise FencedError(
                f"fenced by a newer controller: {P.CONTROLLER_EPOCH} is no longer at version "
                f"{claim.controller_epoch_zk_version}; /migration was not written"
            )
        if not isinstance(error, NodeExistsError | NoNodeError) or time.monotonic() > deadline:
            raise UnreachableError(f"cannot write {P.MIGRATION}: {type(error).__name__}")
        # /migration appeared or vanished between exists() and the multi: try again.
