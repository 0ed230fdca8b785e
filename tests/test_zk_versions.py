"""The ZooKeeper releases operators run behind Kafka 2.x-3.9 (3.5 to 3.9), each a real server.

multiRead (opcode 22) and getAllChildrenNumber (104) arrived in ZooKeeper 3.6.0; a 3.5 server answers
either with UNIMPLEMENTED and then closes the connection. Each zk2kraft path that uses them is run
here against a real 3.5 server, where it must detect the release once per connection and use what 3.5
serves, without losing the session. The core migration tests (marked `zk_matrix`) run against every
release through the matrix in tests/conftest.py; this module checks that plumbing too.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import spark_session
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError, UnimplementedError
from migrate_helpers import assert_consistent, cluster
from test_zk_reader import assert_same_tree, kazoo_walk

from migrator import commands
from migrator.controller.managers.change import AdminChange
from migrator.errors import BadInputError
from migrator.zk import multiread as mr
from migrator.zk.connection import close, connect
from migrator.zk.read_reuse import OwnWrites, refresh
from migrator.zk.reader import BulkReader, read_tree
from spark_audit.audit import AuditOptions, run_audit
from zk_fixtures.kafka_dist import ZOOKEEPER_VERSIONS
from zk_fixtures.server import ZkServer, four_letter

pytestmark = pytest.mark.zk

OLDEST = ZOOKEEPER_VERSIONS[0]  # 3.5.x: no multiRead, no getAllChildrenNumber


@pytest.fixture(scope="module")
def old_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZkServer]:
    server = ZkServer(tmp_path_factory.mktemp("zk-old"), version=OLDEST).start()
    try:
        yield server
    finally:
        server.stop()


class Drops:
    """Counts the times a client lost its connection (what an UNIMPLEMENTED answer costs on 3.5)."""

    def __init__(self, client: KazooClient) -> None:
        self.count = 0
        client.add_listener(self)

    def __call__(self, state: KazooState) -> None:
        if state == KazooState.SUSPENDED:
            self.count += 1


@pytest.fixture
def old(old_server: ZkServer) -> Iterator[KazooClient]:
    """A session on the 3.5 server, confined to a fresh chroot holding a small tree."""
    chroot = f"/v-{uuid.uuid4().hex[:10]}"
    admin = connect(old_server.connect_string)
    admin.create(chroot)
    client = connect(old_server.connect_string + chroot)
    try:
        client.create("/t/ünï/名前", "ü".encode(), makepath=True)
        client.create("/t/many")
        tx = client.transaction()
        for i in range(300):
            tx.create(f"/t/many/c{i:03d}", b'{"i":%d}' % i)
        assert not any(isinstance(r, Exception) for r in tx.commit())
        client.create("/t/deep/a/b/c", b"leaf", makepath=True)
        yield client
    finally:
        close(client)
        admin.delete(chroot, recursive=True)
        close(admin)


@pytest.mark.zk_matrix
def test_session_server_is_the_release_asked_for(zk_server: str, zk_version: str | None) -> None:
    """The matrix's plumbing: the server a zk_matrix test talks to is the release it is named after."""
    host, _, port = zk_server.partition(",")[0].rpartition(":")
    version = mr.parse_srvr_version(four_letter(host, int(port), "srvr"))
    assert version is not None
    if zk_version is not None:
        assert version == tuple(int(x) for x in zk_version.split("."))


def test_35_is_detected_by_srvr_and_read_with_single_requests(old: KazooClient) -> None:
    drops = Drops(old)
    assert mr.supports_multi_read(old) is False  # from `srvr`: no request reached the session
    reader = BulkReader(old, ["/t"])
    tree = reader.read()
    assert reader.stats.method == "async" and tree.consistent
    assert_same_tree(tree, kazoo_walk(old, ["/t"]))
    assert drops.count == 0
    with pytest.raises(BadInputError, match=r"does not serve multiRead \(it needs 3\.6\+\)"):
        BulkReader(old, ["/t"], method="multiread").read()


def test_35_in_session_probe_costs_a_reconnect_not_the_session(old: KazooClient) -> None:
    """Without `srvr` (a proxy, a TLS-only port) the probe is an empty multiRead: 3.5 refuses it and
    drops the connection; the session, its ephemerals and the next read survive."""
    old.create("/mine", ephemeral=True)
    session = old.client_id
    drops = Drops(old)
    assert mr.supports_multi_read(old, use_srvr=False) is False
    assert drops.count == 1  # the server did close the connection, as 3.5 does
    assert old.client_id == session and old.exists("/mine") is not None
    reader = BulkReader(old, ["/t"])
    assert reader.read().consistent and reader.stats.method == "async"
    assert drops.count == 1  # detected once per client: no second refusal


def test_35_refusing_a_multiread_mid_read_switches_to_single_requests(old: KazooClient) -> None:
    """A client that believed its server served multiRead (it reconnected from a 3.6 member of a
    mixed ensemble to a 3.5 one) gets UNIMPLEMENTED: the read is redone with single requests."""
    mr._support[old] = True
    with pytest.raises(UnimplementedError):  # what the server really answers
        mr.multi_read(old, [(mr.OP_GET_DATA, "/t")])
    mr.wait_for_session(old, 10)
    reader = BulkReader(old, ["/t"])
    tree = reader.read()
    assert reader.stats.method == "async" and mr._support[old] is False
    assert_same_tree(tree, kazoo_walk(old, ["/t"]))


def test_35_get_all_children_number_counts_by_walking(old: KazooClient) -> None:
    drops = Drops(old)
    want = len(kazoo_walk(old, ["/t"])) - 1
    assert mr.get_all_children_number(old, "/t") == want == 307
    assert mr.get_all_children_number(old, "/t/many") == 300
    assert mr.get_all_children_number(old, "/t/deep/a/b/c") == 0
    assert drops.count == 0
    with pytest.raises(NoNodeError):
        mr.get_all_children_number(old, "/absent")


def test_35_refresh_proves_the_reread_with_single_requests(tmp_path: Path) -> None:
    """`migrate` reuses its pre-flight read on 3.5 too: the changed paths are read again in pipelined
    single requests whose replies all carry one zxid; a write landing among them refuses the reuse.
    A server of its own: a session of another test expiring there is a foreign transaction too."""
    with ZkServer(tmp_path / "zk", version=OLDEST) as server:
        old = connect(server.connect_string)
        try:
            _refresh_on(old, server)
        finally:
            close(old)


def _refresh_on(old: KazooClient, old_server: ZkServer) -> None:
    old.create("/t/many", makepath=True)
    old.create("/config/topics/a", b"{}", makepath=True)
    tree = read_tree(old, ["/config"])
    with OwnWrites(old) as own:
        old.set("/config/topics/a", b'{"x":1}')
        old.create("/config/topics/b", b"{}")
        assert refresh(old, tree, own, roots=["/config"]) is None
    fresh = read_tree(old, ["/config"])
    assert tree.read_zxid == fresh.read_zxid
    assert_same_tree(tree, fresh)

    ops = [(mr.OP_GET_DATA, "/config/topics/a")] * 2000
    quiet = mr.pipelined_read(old, ops)
    assert quiet is not None and quiet.zxid == old.last_zxid and len(quiet.results) == len(ops)

    other = connect(old_server.connect_string)
    done = threading.Event()

    def write() -> None:  # another session writing all along
        while not done.is_set():
            other.set("/t/many", uuid.uuid4().bytes)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert any(mr.pipelined_read(old, ops) is None for _ in range(5))
    finally:
        done.set()
        writer.join()
        close(other)


@pytest.mark.zk_matrix
@pytest.mark.spark
def test_migration_copy_dual_write_audit_rollback_on_this_release(
    zk_version: str | None, tmp_path: Path
) -> None:
    """The migration's core on one release: the copy, changes dual-written through fenced multis, the
    ZooKeeper equal to the log, the Spark audit clean from the server's own snapshot and txn-log files
    (whose trailers and digests differ from release to release), then the rollback."""
    with ZkServer(tmp_path / "zk", snap_count=20, version=zk_version) as server:
        client = connect(server.connect_string)
        log_dir = tmp_path / "meta"
        try:
            with cluster(client, server.connect_string) as generated:
                commands.migrate(server.connect_string, str(log_dir), yes=True, brokers_from_zk=True)
                topic = sorted(
                    t for t in generated.image.topics if t not in generated.image.pending_deletions
                )[0]
                for change in (
                    AdminChange(kind="create-topic", topic="during-dual-write", partitions=3),
                    AdminChange(kind="alter-topic-config", topic=topic, configs={"retention.ms": "60000"}),
                ):
                    commands.admin(server.connect_string, str(log_dir), change)
                zk_image, _ = assert_consistent(client, log_dir)
                assert "during-dual-write" in zk_image.topics

                # The audit from the server's own files: what differs between releases is there (live
                # ZooKeeper against the log is assert_consistent above, through the bulk reader).
                audit = run_audit(
                    AuditOptions(
                        log_dir=str(log_dir),
                        zk_snapshot=str(tmp_path / "zk" / "data"),
                        master=spark_session.MASTER,
                        limit=5,
                    )
                )
                assert (audit.phase, audit.exit_code) == ("dual-write", 0), audit.differences[:5]
                assert audit.zookeeper["source"] == "zk-snapshot" and audit.zookeeper["consistent"]
                assert audit.zookeeper["replayed_txns"] > 0

                rolled = commands.rollback(server.connect_string, str(log_dir), yes=True)
                assert rolled.state_after == "MigrationIneligible"
                assert client.exists("/brokers/topics/during-dual-write") is not None
        finally:
            close(client)
