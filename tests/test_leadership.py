"""Controller leadership against a real ZooKeeper holding a generated Kafka cluster."""

from __future__ import annotations

import json

import pytest
from kazoo.client import KazooClient

from migrator.errors import BadInputError, FencedError
from migrator.model import MigrationZnode
from migrator.zk import codec
from migrator.zk.leadership import (
    claim_controller,
    read_claim,
    read_controller_state,
    read_migration,
    release_controller,
    write_migration_unconditionally,
)
from zk_fixtures.generator import ClusterSpec, load_cluster

pytestmark = pytest.mark.zk

SPEC = ClusterSpec(topics=4, partitions=2, acls=2, tokens=1, controller_epoch=5)


@pytest.fixture
def cluster(zk: KazooClient) -> KazooClient:
    """The cluster with a ZK-mode controller holding the ephemeral /controller, as a live one does."""
    generated = load_cluster(zk, SPEC)
    controller = generated.control.controller
    assert controller is not None
    zk.create("/controller", codec.encode_controller(controller), ephemeral=True)
    return zk


def test_claim_bumps_epoch_and_writes_persistent_kraft_controller(cluster: KazooClient) -> None:
    before_data, before_stat = cluster.get("/controller_epoch")
    assert before_data == b"5"
    assert cluster.exists("/controller").ephemeralOwner != 0
    claim = claim_controller(cluster, 3000)
    assert claim.kraft_controller_id == 3000
    assert claim.kraft_epoch == 6  # default: one above ZooKeeper's epoch
    assert claim.zk_controller_epoch == 6
    data, stat = cluster.get("/controller_epoch")
    assert data == b"6"
    assert stat.version == before_stat.version + 1 == claim.controller_epoch_zk_version
    raw, cstat = cluster.get("/controller")
    assert cstat.ephemeralOwner == 0
    obj = json.loads(raw)
    assert obj["version"] == 2 and obj["brokerid"] == 3000
    assert obj["kraftControllerEpoch"] == 6 and obj["isKRaft"] is True
    assert isinstance(obj["timestamp"], str) and int(obj["timestamp"]) > 0
    assert read_claim(cluster) == claim


def test_claim_with_an_explicit_epoch(cluster: KazooClient) -> None:
    assert read_claim(cluster) is None
    claim = claim_controller(cluster, 3000, kraft_epoch=9)
    assert claim.kraft_epoch == 9
    assert cluster.exists("/controller").ephemeralOwner == 0
    state = read_controller_state(cluster)
    assert state.controller is not None and state.controller.kraft_controller_epoch == 9


def test_claim_refused_when_a_newer_kraft_claim_exists(cluster: KazooClient) -> None:
    claim_controller(cluster, 3001, kraft_epoch=20)
    epoch_before = cluster.get("/controller_epoch")
    with pytest.raises(FencedError, match="held by KRaft controller 3001 in epoch 20") as e:
        claim_controller(cluster, 3000, kraft_epoch=20)
    assert e.value.exit_code == 4
    with pytest.raises(FencedError):
        claim_controller(cluster, 3000, kraft_epoch=12)
    assert cluster.get("/controller_epoch") == epoch_before  # nothing written
    # The default epoch is above every epoch seen, so a takeover succeeds.
    claim = claim_controller(cluster, 3000)
    assert claim.kraft_epoch == 21


def test_reclaim_with_the_same_epoch_keeps_the_claim(cluster: KazooClient) -> None:
    first = claim_controller(cluster, 3000, kraft_epoch=8)
    again = claim_controller(cluster, 3000, kraft_epoch=8)
    assert again == first
    assert cluster.get("/controller_epoch")[0] == b"6"


def test_kraft_epoch_must_exceed_zk_epoch(cluster: KazooClient) -> None:
    with pytest.raises(BadInputError, match="must exceed ZooKeeper's controller epoch 5"):
        claim_controller(cluster, 3000, kraft_epoch=5)
    assert cluster.get("/controller_epoch")[0] == b"5"


def test_missing_controller_epoch_is_not_a_kafka_cluster(zk: KazooClient) -> None:
    with pytest.raises(BadInputError, match="/controller_epoch missing: is this a Kafka cluster"):
        claim_controller(zk, 3000)


def test_claim_loses_a_race_on_controller_epoch(cluster: KazooClient, zk_connect: str) -> None:
    from migrator.zk.connection import close, connect

    other = connect(zk_connect)
    try:
        # Another controller is elected between our read and our multi: simulate by bumping the
        # version from a second session right before the claim's multi.
        original = cluster.transaction

        def racing_transaction():  # type: ignore[no-untyped-def]
            other.set("/controller_epoch", b"6")
            return original()

        cluster.transaction = racing_transaction  # type: ignore[method-assign]
        with pytest.raises(FencedError, match="lost the race for controllership: /controller_epoch changed"):
            claim_controller(cluster, 3000)
    finally:
        cluster.transaction = original  # type: ignore[method-assign]
        close(other)
    assert json.loads(cluster.get("/controller")[0])["kraftControllerEpoch"] == -1


def test_release_lifts_epoch_above_kraft_and_removes_controller_and_migration(cluster: KazooClient) -> None:
    claim = claim_controller(cluster, 3000, kraft_epoch=40)
    write_migration_unconditionally(
        cluster,
        MigrationZnode(
            kraft_controller_id=3000,
            kraft_controller_epoch=40,
            kraft_metadata_offset=10,
            kraft_metadata_epoch=40,
        ),
        claim,
    )
    new_epoch = release_controller(cluster, claim, bump_above=0)
    assert new_epoch == 41  # above the KRaft epoch 40, not just ZooKeeper's 6 (KAFKA-20488)
    assert cluster.get("/controller_epoch")[0] == b"41"
    assert cluster.exists("/controller") is None
    assert cluster.exists("/migration") is None
    # bump_above wins when the caller saw a higher controller_epoch in partition states.
    claim = claim_controller(cluster, 3000)
    assert claim.kraft_epoch == 42
    assert release_controller(cluster, claim, bump_above=100) == 101


def test_release_by_a_fenced_claim_is_refused(cluster: KazooClient) -> None:
    old = claim_controller(cluster, 3000)
    claim_controller(cluster, 3001)
    with pytest.raises(FencedError, match="another controller holds ZooKeeper now"):
        release_controller(cluster, old)
    assert cluster.exists("/controller") is not None


def test_migration_read_and_unconditional_write(cluster: KazooClient) -> None:
    assert read_migration(cluster) is None
    claim = claim_controller(cluster, 3000)
    m = MigrationZnode(
        kraft_controller_id=3000,
        kraft_controller_epoch=claim.kraft_epoch,
        kraft_metadata_offset=-1,
        kraft_metadata_epoch=-1,
    )
    written = write_migration_unconditionally(cluster, m, claim)
    assert written.zk_version == 0
    # Someone else bumps it: the unconditional write learns the real version.
    cluster.set("/migration", codec.encode_migration(m))
    cluster.set("/migration", codec.encode_migration(m))
    written = write_migration_unconditionally(
        cluster, m.model_copy(update={"kraft_metadata_offset": 7}), claim
    )
    assert written.zk_version == 3
    read = read_migration(cluster)
    assert read is not None and read.zk_version == 3 and read.kraft_metadata_offset == 7
    assert read.mtime_ms > 0
    claim_controller(cluster, 3001)
    with pytest.raises(FencedError, match="fenced by a newer controller"):
        write_migration_unconditionally(cluster, m, claim)
    assert read_migration(cluster).kraft_metadata_offset == 7  # type: ignore[union-attr]
