"""The fenced writer against a real ZooKeeper: fencing, packing under jute.maxbuffer, retries."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss

from migrator.errors import FencedError
from migrator.model import MigrationZnode
from migrator.zk import admin_codec, config_codec
from migrator.zk.bulk_write import JUTE_MAXBUFFER
from migrator.zk.connection import close, connect
from migrator.zk.fenced_writer import FencedZkWriter, OpGroup, ZkOp
from migrator.zk.leadership import Claim, claim_controller, read_migration, write_migration_unconditionally
from zk_fixtures.server import ZkServer

pytestmark = pytest.mark.zk


def _setup(zk: KazooClient, controller_id: int = 3000) -> tuple[Claim, MigrationZnode]:
    if zk.exists("/controller_epoch") is None:
        zk.create("/controller_epoch", b"3")
        zk.ensure_path("/config/topics")
        zk.ensure_path("/config/changes")
    claim = claim_controller(zk, controller_id)
    m = write_migration_unconditionally(
        zk,
        MigrationZnode(
            kraft_controller_id=controller_id,
            kraft_controller_epoch=claim.kraft_epoch,
            kraft_metadata_offset=100,
            kraft_metadata_epoch=1,
        ),
        claim,
    )
    return claim, m


def _migration(zk: KazooClient) -> tuple[int, int, int]:
    m = read_migration(zk)
    assert m is not None
    return m.kraft_metadata_offset, m.kraft_metadata_epoch, m.zk_version


@pytest.mark.zk_matrix
def test_write_lands_data_and_migration_together(zk: KazooClient) -> None:
    claim, m = _setup(zk)
    writer = FencedZkWriter(zk, claim, m)
    ops = [
        ZkOp.create("/config/topics/a", config_codec.encode_config({"x": "1"})),
        ZkOp.create(
            "/config/changes/config_change_", admin_codec.encode_config_change("topics/a"), sequential=True
        ),
    ]
    after = writer.write(ops, 105, 2)
    assert after.kraft_metadata_offset == 105 and after.zk_version == m.zk_version + 1
    assert _migration(zk) == (105, 2, m.zk_version + 1)
    assert config_codec.decode_config("/config/topics/a", zk.get("/config/topics/a")[0]) == {"x": "1"}
    changes = zk.get_children("/config/changes")
    assert changes == ["config_change_0000000000"]
    raw = json.loads(zk.get("/migration")[0])
    assert raw["kraft_controller_id"] == 3000 and raw["kraft_controller_epoch"] == claim.kraft_epoch
    # An empty group still advances /migration (records with nothing for ZooKeeper).
    writer.write([], 110, 2)
    assert _migration(zk) == (110, 2, m.zk_version + 2)


@pytest.mark.zk_matrix
def test_old_claim_is_fenced_and_nothing_of_its_multi_lands(zk: KazooClient) -> None:
    """Invariant 3: after a newer claim, every path of the old claim's multi is unchanged."""
    claim, m = _setup(zk)
    zk.create("/config/topics/keep", config_codec.encode_config({"a": "1"}))
    zk.create("/config/topics/gone", config_codec.encode_config({"b": "2"}))
    old = FencedZkWriter(zk, claim, m)
    old.write([ZkOp.set("/config/topics/keep", config_codec.encode_config({"a": "2"}))], 101, 1)
    newer, newer_m = _setup(zk, controller_id=3001)
    assert newer.kraft_epoch > claim.kraft_epoch
    paths = [
        "/config/topics/keep",
        "/config/topics/gone",
        "/config/topics/new",
        "/migration",
        "/config/changes",
    ]
    before = {p: zk.exists(p) for p in paths}
    before_children = zk.get_children("/config/changes")
    ops = [
        ZkOp.set("/config/topics/keep", config_codec.encode_config({"a": "3"})),
        ZkOp.delete("/config/topics/gone"),
        ZkOp.create("/config/topics/new", config_codec.encode_config({})),
        ZkOp.create(
            "/config/changes/config_change_", admin_codec.encode_config_change("topics/keep"), sequential=True
        ),
    ]
    with pytest.raises(FencedError, match="fenced by a newer controller") as e:
        old.write(ops, 102, 1)
    assert e.value.exit_code == 4
    assert {p: zk.exists(p) for p in paths} == before
    assert zk.get_children("/config/changes") == before_children
    assert json.loads(zk.get("/migration")[0])["kraft_controller_id"] == 3001
    # The newer claim writes fine.
    FencedZkWriter(zk, newer, newer_m).write(ops, 102, 2)
    assert zk.exists("/config/topics/gone") is None


def test_another_writer_on_migration_is_fenced(zk: KazooClient) -> None:
    claim, m = _setup(zk)
    writer = FencedZkWriter(zk, claim, m)
    zk.set("/migration", zk.get("/migration")[0])  # someone moved /migration's version
    with pytest.raises(FencedError, match="another writer changed /migration"):
        writer.write([ZkOp.create("/config/topics/x", b"")], 101, 1)
    assert zk.exists("/config/topics/x") is None


def test_multis_stay_under_jute_maxbuffer_with_large_configs(zk: KazooClient) -> None:
    claim, m = _setup(zk)
    writer = FencedZkWriter(zk, claim, m)
    big = {f"k{i}": "v" * 600 for i in range(1000)}  # ~600 KB config znodes
    groups = []
    for i in range(5):
        data = config_codec.encode_config(big | {"n": str(i)})
        assert 590_000 < len(data) < 650_000
        groups.append(OpGroup([ZkOp.create(f"/config/topics/big{i}", data)], 200 + i, 1))
    # Many small ops too: thousands of creates that need several multis.
    small = [ZkOp.create(f"/config/topics/t{i:05d}", b"v" * 1000) for i in range(2000)]
    groups.append(OpGroup(small, 300, 1))
    sizes: list[int] = []
    original = writer._send

    def recording_send(multi, expected):  # type: ignore[no-untyped-def]
        sent = original(multi, expected)
        sizes.append(writer.request_bytes(multi.ops))
        return sent

    writer._send = recording_send  # type: ignore[method-assign]
    writer.write_groups(groups)
    assert max(sizes) < JUTE_MAXBUFFER and max(sizes) <= writer.max_multi_bytes
    assert len(sizes) >= 6  # each big config alone, the small ones in more than one multi
    assert _migration(zk)[0] == 300
    assert len(zk.get_children("/config/topics")) == 2005
    assert config_codec.decode_config("/config/topics/big3", zk.get("/config/topics/big3")[0])["n"] == "3"
    # Deletes pack far more per multi; they clear the lot quickly.
    sizes.clear()
    writer.write([ZkOp.delete(f"/config/topics/{c}") for c in zk.get_children("/config/topics")], 301, 1)
    assert zk.get_children("/config/topics") == [] and len(sizes) == 1


def test_group_larger_than_a_multi_claims_the_previous_offset_until_complete(zk: KazooClient) -> None:
    claim, m = _setup(zk)
    writer = FencedZkWriter(zk, claim, m, max_multi_bytes=20_000)
    seen: list[int] = []
    original = writer._landed

    def recording_landed(sent):  # type: ignore[no-untyped-def]
        original(sent)
        seen.append(writer.migration.kraft_metadata_offset)

    writer._landed = recording_landed  # type: ignore[method-assign]
    ops = [ZkOp.create(f"/config/topics/p{i}", b"x" * 1000) for i in range(50)]
    writer.write_groups([OpGroup(ops[:5], 101, 1), OpGroup(ops[5:], 102, 1)])
    assert seen[0] == 101  # the first multi holds the whole first group
    assert set(seen[1:-1]) == {101}  # the big group is incomplete until the last multi
    assert seen[-1] == 102
    assert len(seen) > 3


def test_existing_and_missing_znodes_are_rebuilt_not_skipped(zk: KazooClient) -> None:
    claim, m = _setup(zk)
    zk.create("/config/topics/exists", b"old")
    zk.create("/config/topics/parent/child", b"c", makepath=True)
    writer = FencedZkWriter(zk, claim, m)
    ops = [
        ZkOp.create("/config/topics/exists", b"new"),  # NodeExists → set
        ZkOp.set("/config/topics/missing", b"m"),  # NoNode → create
        ZkOp.delete("/config/topics/never"),  # NoNode → dropped
        ZkOp.delete("/config/topics/parent"),  # NotEmpty → children first
        ZkOp.create("/brokers/topics/t/partitions/0/state", b"s"),  # missing parents → created
    ]
    writer.write(ops, 101, 1)
    assert zk.get("/config/topics/exists")[0] == b"new"
    assert zk.get("/config/topics/missing")[0] == b"m"
    assert zk.exists("/config/topics/parent") is None
    assert zk.get("/brokers/topics/t/partitions/0/state")[0] == b"s"
    assert writer.stats.rebuilds >= 1
    assert _migration(zk)[0] == 101


def test_pipelined_multis_chain_migration_versions(zk: KazooClient) -> None:
    claim, m = _setup(zk)
    writer = FencedZkWriter(zk, claim, m, max_multi_bytes=4_000, in_flight=6)
    groups = [OpGroup([ZkOp.create(f"/config/topics/g{i}", b"d" * 500)], 101 + i, 1) for i in range(60)]
    after = writer.write_groups(groups)
    assert after.kraft_metadata_offset == 160
    assert after.zk_version == m.zk_version + writer.stats.multis
    assert _migration(zk) == (160, 1, after.zk_version)
    assert writer.stats.multis >= 8


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[ZkServer]:
    server = ZkServer(tmp_path / "zk").start()
    try:
        yield server
    finally:
        server.stop()


def test_connection_loss_mid_write_retries_without_duplicates_or_gaps(own_server: ZkServer) -> None:
    client = connect(own_server.connect_string)
    try:
        claim, m = _setup(client)
        writer = FencedZkWriter(client, claim, m, max_multi_bytes=30_000, in_flight=4)
        n = 400
        groups = [
            OpGroup(
                [
                    ZkOp.create(f"/config/topics/r{i:04d}", config_codec.encode_config({"i": str(i)})),
                    ZkOp.create(
                        "/config/changes/config_change_",
                        admin_codec.encode_config_change(f"topics/r{i:04d}"),
                        sequential=True,
                    ),
                ],
                101 + i,
                1,
            )
            for i in range(n)
        ]

        def slow_groups():  # type: ignore[no-untyped-def]
            for i, g in enumerate(groups):
                if i % 40 == 0:
                    time.sleep(0.05)
                yield g

        restarter = threading.Thread(target=lambda: (time.sleep(0.15), own_server.restart()))
        restarter.start()
        after = writer.write_groups(slow_groups())
        restarter.join()
        assert after.kraft_metadata_offset == 100 + n
        assert _migration(client)[0] == 100 + n
        assert _migration(client)[2] == after.zk_version
        topics = client.get_children("/config/topics")
        assert sorted(topics) == [f"r{i:04d}" for i in range(n)]
        # Every notification exactly once: a re-sent multi that had landed would double them.
        changes = client.get_children("/config/changes")
        assert len(changes) == n
        announced = sorted(
            admin_codec.decode_config_change(c, client.get(f"/config/changes/{c}")[0]) for c in changes
        )
        assert announced == [f"topics/r{i:04d}" for i in range(n)]
    finally:
        close(client)


class _LostReply:
    """The reply of a multi that landed, lost with the connection: the caller only sees ConnectionLoss."""

    def __init__(self, real: object) -> None:
        real.get(timeout=30)  # type: ignore[attr-defined]

    def ready(self) -> bool:
        return True

    def get(self, timeout: float | None = None) -> object:
        raise ConnectionLoss()


@pytest.mark.zk_matrix
def test_replies_lost_after_multis_landed_are_not_applied_twice(zk: KazooClient) -> None:
    claim, m = _setup(zk)
    writer = FencedZkWriter(zk, claim, m, max_multi_bytes=5_000, in_flight=4)
    original = writer._send
    sent_count = 0

    def losing_send(multi, expected):  # type: ignore[no-untyped-def]
        nonlocal sent_count
        sent = original(multi, expected)
        sent_count += 1
        if sent_count in (3, 7, 8):
            sent.result = _LostReply(sent.result)
        return sent

    writer._send = losing_send  # type: ignore[method-assign]
    n = 60
    groups = [
        OpGroup(
            [
                ZkOp.create(f"/config/topics/q{i:03d}", b"x" * 300),
                ZkOp.create(
                    "/config/changes/config_change_",
                    admin_codec.encode_config_change(f"topics/q{i:03d}"),
                    sequential=True,
                ),
            ],
            101 + i,
            1,
        )
        for i in range(n)
    ]
    after = writer.write_groups(groups)
    assert after.kraft_metadata_offset == 100 + n
    assert writer.stats.retries == 0  # every multi whose reply was lost had landed: none re-sent
    assert sent_count == writer.stats.multis
    assert sorted(zk.get_children("/config/topics")) == [f"q{i:03d}" for i in range(n)]
    assert len(zk.get_children("/config/changes")) == n
    assert _migration(zk) == (100 + n, 1, after.zk_version)


def test_a_write_stopped_by_its_groups_leaves_the_writer_usable(zk: KazooClient) -> None:
    """A bad record stops a write with multis in flight: the writer accounts for those that land."""
    from migrator.errors import BadInputError

    claim, m = _setup(zk)
    writer = FencedZkWriter(zk, claim, m, max_multi_bytes=3_000, in_flight=8)

    def groups():  # type: ignore[no-untyped-def]
        for i in range(30):
            yield OpGroup([ZkOp.create(f"/config/topics/s{i:02d}", b"x" * 1000)], 101 + i, 1)
        raise BadInputError("offset 131: a record the syncer cannot apply")

    with pytest.raises(BadInputError, match="offset 131"):
        writer.write_groups(groups())
    offset, _, version = _migration(zk)
    assert (writer.migration.kraft_metadata_offset, writer.migration.zk_version) == (offset, version)
    # What landed is exactly what /migration covers (groups still being packed were never sent).
    landed = sorted(zk.get_children("/config/topics"))
    assert landed == [f"s{i:02d}" for i in range(offset - 100)] and len(landed) > 20
    after = writer.write([ZkOp.create("/config/topics/after", b"")], 200, 1)
    assert _migration(zk) == (200, 1, after.zk_version)
