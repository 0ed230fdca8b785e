"""The bulk reader against a real ZooKeeper: same answers as plain kazoo, batching, consistency, errors."""

from __future__ import annotations

import dataclasses
import uuid
from collections import deque
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.serialization import Create
from kazoo.security import OPEN_ACL_UNSAFE, make_digest_acl

from migrator.errors import BadInputError, PermissionDeniedError, UnreachableError
from migrator.zk import multiread as mr
from migrator.zk.connection import close, connect
from migrator.zk.reader import JUTE_MAXBUFFER, BulkReader, children_reply_bytes, read_tree
from migrator.zk.tree import ZkTree, ZNode
from zk_fixtures.server import ZkServer

pytestmark = pytest.mark.zk

BIG = 900_000


def create_null(client: KazooClient, path: str) -> None:
    """A znode with null data, as Kafka's Java client creates its parent znodes (kazoo only writes bytes)."""
    result = client.handler.async_result()
    client._call(Create(mr.server_path(client.chroot, path), None, OPEN_ACL_UNSAFE, 0), result)
    result.get(timeout=10)


def kazoo_walk(client: KazooClient, roots: list[str]) -> ZkTree:
    """The reference: one plain kazoo get / get_children per znode."""
    tree = ZkTree()
    stack = list(roots)
    while stack:
        path = stack.pop()
        try:
            data, st = client.get(path)
            names = client.get_children(path) if st.numChildren else None
        except NoNodeError:
            continue
        node = ZNode(
            path,
            data,
            st.version,
            st.czxid,
            st.mzxid,
            st.ephemeralOwner,
            st.numChildren,
            st.dataLength,
            st.pzxid,
        )
        tree.add(node, names)
        if names:
            tree.children_reply_bytes[path] = children_reply_bytes(names)
            stack.extend(("" if path == "/" else path) + "/" + n for n in names)
    return tree


def assert_same_tree(got: ZkTree, want: ZkTree) -> None:
    assert set(got.nodes) == set(want.nodes)
    for path, node in want.nodes.items():
        assert got.nodes[path] == node, path
    assert {p: sorted(c) for p, c in got.children.items()} == {p: sorted(c) for p, c in want.children.items()}
    assert got.children_reply_bytes == want.children_reply_bytes
    assert got.max_zxid == want.max_zxid


def bulk_delete(client: KazooClient, root: str = "/") -> None:
    """Empty `root` with a few multi deletes: the shared fixture's one-by-one delete takes seconds."""
    tree = read_tree(client, [root], retries=0)
    paths = sorted((p for p in tree.nodes if p != root), key=lambda p: p.count("/"), reverse=True)
    for start in range(0, len(paths), 500):
        tx = client.transaction()
        for path in paths[start : start + 500]:
            tx.delete(path)
        assert not any(isinstance(r, Exception) for r in tx.commit())


@pytest.fixture(scope="module")
def sample(zk_server: str) -> Iterator[tuple[KazooClient, list[str]]]:
    """Built once, only read: empty, null, large and unicode znodes, a wide parent and a deep chain."""
    chroot = f"/zk2kraft-reader-{uuid.uuid4().hex[:12]}"
    admin = connect(zk_server)
    admin.create(chroot)
    zk = connect(zk_server + chroot)
    try:
        zk.create("/t/empty", b"", makepath=True)
        create_null(zk, "/t/null")
        zk.create("/t/big", b"b" * BIG)
        zk.create("/t/ünï/名前", "ü".encode(), makepath=True)
        zk.create("/t/deep/a/b/c/d", b"leaf", makepath=True)
        zk.create("/t/many", b"{}")
        for start in range(0, 2500, 500):
            tx = zk.transaction()
            for i in range(start, start + 500):
                tx.create(f"/t/many/child-{i:05d}", b'{"i":%d}' % i)
            assert not any(isinstance(r, Exception) for r in tx.commit())
        zk.create("/other", b"o")
        yield zk, ["/t", "/other", "/absent"]
    finally:
        bulk_delete(zk)
        close(zk)
        admin.delete(chroot)
        close(admin)


@pytest.fixture
def zkc(zk: KazooClient) -> Iterator[KazooClient]:
    """`zk`, emptied fast after the test."""
    yield zk
    bulk_delete(zk)


def test_multi_read_ops_equal_kazoo(sample):
    zk, _ = sample
    paths = ["/t", "/t/empty", "/t/null", "/t/big", "/t/ünï/名前", "/t/many", "/absent", "/t/ünï"]
    ops = [(mr.OP_GET_DATA, p) for p in paths] + [(mr.OP_GET_CHILDREN, p) for p in paths]
    reply = mr.multi_read(zk, ops)
    assert len(reply.results) == len(ops)
    for (op, path), result in zip(ops, reply.results, strict=True):
        if path == "/absent":
            assert isinstance(result, NoNodeError)
        elif op == mr.OP_GET_DATA:
            assert result == zk.get(path)
        else:
            assert result == zk.get_children(path)
    data, stat = reply.results[paths.index("/t/null")]
    assert data is None and stat.dataLength == 0
    assert len(reply.results[paths.index("/t/big")][0]) == BIG
    assert len(reply.results[len(paths) + paths.index("/t/many")]) == 2500
    with pytest.raises(ValueError, match="multiRead supports getData"):
        mr.encode_ops([(mr.OP_GET_ALL_CHILDREN_NUMBER, "/t")])
    # The reply header's zxid is the server's last applied zxid: nothing was written since the sample.
    zk.sync("/")
    assert reply.zxid == zk.last_zxid


def test_malformed_replies_are_value_errors():
    good = mr.encode_ops([])  # an empty result list is just the end marker, like a request's
    assert mr.parse_multi_read(b"\0" * 16 + good, 16) == []
    one = mr.OP_HEAD.pack(mr.OP_GET_DATA, 0, 0, 3) + b"abc" + mr.STAT.pack(*range(11)) + good
    assert mr.parse_multi_read(one, 0) == [(b"abc", tuple(range(11)))]
    for bad in (one[:-1], one[:20], one + b"x", mr.OP_HEAD.pack(99, 0, 0, 0) + good):
        with pytest.raises(ValueError, match="malformed multiRead reply"):
            mr.parse_multi_read(bad, 0)


def test_get_all_children_number(sample):
    zk, _ = sample
    want = kazoo_walk(zk, ["/t"])
    assert mr.get_all_children_number(zk, "/t") == len(want) - 1
    assert mr.get_all_children_number(zk, "/t/many") == 2500


@pytest.mark.parametrize("method", ["multiread", "async", "auto"])
def test_read_tree_equals_plain_kazoo(sample, method):
    zk, roots = sample
    want = kazoo_walk(zk, ["/t", "/other"])
    reader = BulkReader(zk, roots, method=method)
    tree = reader.read()
    assert_same_tree(tree, want)
    assert tree.data("/t/null") is None and tree.data("/t/empty") == b""
    assert type(tree["/t"]) is ZNode
    with pytest.raises(dataclasses.FrozenInstanceError):
        tree["/t"].data = b"changed"  # type: ignore[misc]
    assert tree.data("/t/ünï/名前") == "ü".encode()
    assert "/absent" not in tree
    assert reader.stats.method == ("async" if method == "async" else "multiread")
    assert tree.consistent and tree.read_zxid >= tree.max_zxid
    zk.sync("/")
    assert tree.read_zxid == zk.last_zxid


def test_chroot_and_root_slash(sample):
    zk, _ = sample
    """`/` inside a chroot is the chroot itself; nested roots are read once."""
    tree = read_tree(zk, ["/", "/t", "/t/many"])
    assert_same_tree(tree, kazoo_walk(zk, ["/"]))
    assert set(tree.child_names("/")) == {"t", "other"}


def test_several_megabytes_read_fine(zkc):
    zk = zkc
    """Eight 700 KB znodes (5.6 MB) among many small ones."""
    zk.create("/fat", b"")
    for i in range(8):
        zk.create(f"/fat/blob-{i}", bytes([i]) * 700_000)
    tx = zk.transaction()
    for i in range(300):
        tx.create(f"/fat/small-{i}", b"x" * 100)
    tx.commit()
    reader = BulkReader(zk, ["/fat"], method="multiread")
    tree = reader.read()
    assert_same_tree(tree, kazoo_walk(zk, ["/fat"]))
    assert sum(len(n.data or b"") for n in tree.nodes.values()) > 5_600_000
    assert reader.stats.requests > 2
    assert reader.stats.largest_request <= reader.max_batch_bytes


def test_requests_never_exceed_jute_maxbuffer(zkc):
    zk = zkc
    """1,500 children with 700-character names: one multiRead of all of them would be a 1.1 MB request,
    which the server answers by dropping the connection."""
    zk.create("/long", b"")
    for start in range(0, 1500, 250):
        tx = zk.transaction()
        for i in range(start, start + 250):
            tx.create(f"/long/{i:04d}" + "n" * 696, b"v")
        tx.commit()
    reader = BulkReader(zk, ["/long"], max_batch_bytes=JUTE_MAXBUFFER, max_ops=5000, method="multiread")
    tree = reader.read()
    assert_same_tree(tree, kazoo_walk(zk, ["/long"]))
    assert len(tree.child_names("/long")) == 1500
    assert reader.stats.requests >= 3  # root, listing, then the reads split by request size
    assert reader.stats.largest_request <= JUTE_MAXBUFFER
    # the listing alone is over 1 MiB: a Java client with the default jute.maxbuffer cannot read it
    assert tree.children_reply_bytes["/long"] == 88 + 1500 * 704 > JUTE_MAXBUFFER


def test_known_sizes_plan_replies_under_the_budget(zk):
    """With sizes known (re-read passes), each huge znode goes alone and the rest share batches."""
    reader = BulkReader(zk, ["/x"], method="multiread")
    sizes = [100] * 3000
    for at in (0, 1500, 2999):
        sizes[at] = 700_000
    paths = [f"/x/n{i}" for i in range(3000)]
    queue = deque([[mr.OP_GET_DATA, 2, paths, sizes, 0]])
    batches = []
    while queue:
        batch, payload, count = reader._next_batch(queue, reader.max_ops, True)
        assert len(payload) < JUTE_MAXBUFFER
        hints = [h for segment in batch for h in segment[3]]
        assert count == len(hints)
        assert count == 1 or 29 + sum(81 + h for h in hints) <= reader.max_batch_bytes
        batches.append(hints)
    assert sum(map(len, batches)) == 3000
    assert [b for b in batches if 700_000 in b] == [[700_000]] * 3


def test_small_budget_splits_child_lists_and_data(sample):
    zk, _ = sample
    reader = BulkReader(zk, ["/t"], max_batch_bytes=4096, max_ops=7, in_flight=3, method="multiread")
    tree = reader.read()
    assert_same_tree(tree, kazoo_walk(zk, ["/t"]))
    assert reader.stats.requests > 2500 // 7


@pytest.mark.parametrize("method", ["multiread", "async"])
def test_no_auth_names_the_path(zk, method):
    zk.create("/acl/open/inner", b"ok", makepath=True)
    zk.create("/acl/open/secret", b"hidden", acl=[make_digest_acl("someone-else", "pw", all=True)])
    try:
        with pytest.raises(PermissionDeniedError, match="/acl/open/secret") as e:
            read_tree(zk, ["/acl"], method=method)
        assert e.value.exit_code == 3
    finally:
        zk.delete("/acl/open/secret")  # the fixture's recursive delete could not list it


def test_reading_with_the_right_identity_works(zk_connect):
    admin = connect(zk_connect, auth=["digest:admin:pw"])
    try:
        admin.create("/acl", b"")
        admin.create("/acl/secret", b"hidden", acl=[make_digest_acl("admin", "pw", all=True)])
        tree = read_tree(admin, ["/acl"])
        assert tree.data("/acl/secret") == b"hidden"
        admin.delete("/acl/secret")
    finally:
        close(admin)


def at_reply(k, action):
    """A progress callback that runs `action` once, right after the k-th reply (counting all passes)."""
    seen = [0]

    def callback(znodes: int) -> None:
        seen[0] += 1
        if seen[0] == k:
            action()

    return callback


def make_family(zk: KazooClient, n: int = 10) -> None:
    tx = zk.transaction()
    tx.create("/fam", b"parent")
    for i in range(n):
        tx.create(f"/fam/c{i}", b"v%d" % i)
    tx.commit()


def test_node_deleted_mid_read_is_skipped_and_reread_converges(zk, zk_connect):
    """A child deleted after its parent was listed: gone from nodes and from the parent's list."""
    make_family(zk)
    other = connect(zk_connect)
    try:
        # One op per request, one request in flight: reply 1 is /fam's data, reply 2 its listing, so the
        # delete lands between the listing and the reads of the children.
        delete_c5 = at_reply(2, lambda: other.delete("/fam/c5"))
        reader = BulkReader(
            zk, ["/fam"], max_ops=1, in_flight=1, retries=0, method="multiread", progress=delete_c5
        )
        tree = reader.read()
        assert "/fam/c5" not in tree
        assert sorted(tree.child_names("/fam")) == sorted(f"c{i}" for i in range(10) if i != 5)
        assert reader.stats.vanished == 1
        assert not tree.consistent  # the listing and the reads saw different zxids

        other.create("/fam/c5", b"again")
        delete_again = at_reply(2, lambda: other.delete("/fam/c5"))
        reader = BulkReader(
            zk, ["/fam"], max_ops=1, in_flight=1, retries=2, method="multiread", progress=delete_again
        )
        tree = reader.read()
        assert tree.consistent and reader.stats.rounds == 2
        assert_same_tree(tree, kazoo_walk(zk, ["/fam"]))
        # the second pass re-read only what the first read before the delete: /fam and its listing
        assert reader.stats.ops == 2 + 10 + 2
    finally:
        close(other)


@pytest.mark.parametrize("method", ["multiread", "async"])
def test_writes_during_read_are_caught_up(zk, zk_connect, method):
    make_family(zk)
    other = connect(zk_connect)
    try:
        reader = BulkReader(
            zk,
            ["/fam"],
            max_ops=1,
            in_flight=1,
            method=method,
            progress=at_reply(1, lambda: (other.set("/fam/c0", b"changed"), other.create("/fam/new", b"n"))),
        )
        tree = reader.read()
        assert tree.consistent and reader.stats.rounds == 2
        assert tree.data("/fam/c0") == b"changed" and tree.data("/fam/new") == b"n"
        assert_same_tree(tree, kazoo_walk(zk, ["/fam"]))
        assert reader.stats.round_zxids[0][0] < reader.stats.round_zxids[0][1] == tree.read_zxid
    finally:
        close(other)


def test_constant_writes_give_up_and_say_so(zk, zk_connect):
    make_family(zk)
    other = connect(zk_connect)
    try:
        reader = BulkReader(
            zk,
            ["/fam"],
            max_ops=2,
            in_flight=1,
            retries=2,
            method="multiread",
            progress=lambda n: other.set("/fam", uuid.uuid4().bytes),
        )
        tree = reader.read()
        assert not tree.consistent and reader.stats.rounds == 3
        assert set(tree.child_names("/fam")) == {f"c{i}" for i in range(10)}  # structure stays coherent
    finally:
        close(other)


def test_detection(zk, zk_connect):
    assert mr.parse_srvr_version("Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024") == (3, 8, 0)
    assert mr.parse_srvr_version("Zookeeper version: 3.5.9-83df9301, built on 01/06/2021 20:03 GMT") == (
        3,
        5,
        9,
    )
    assert mr.parse_srvr_version("srvr is not executed because it is not in the whitelist.\n") is None
    assert mr.supports_multi_read(zk) is True
    assert mr._support.get(zk) is True  # cached for this client
    # Without srvr (a proxy, a TLS-only port): an empty multiRead in the session answers instead.
    fresh = connect(zk_connect)
    try:
        assert fresh not in mr._support
        assert mr.supports_multi_read(fresh, use_srvr=False) is True
        assert read_tree(fresh, ["/"]).consistent  # the session is fine after the probe
    finally:
        close(fresh)


def test_server_stopping_under_a_read_is_unreachable(tmp_path):
    """A private server (the session's one must survive) stops between two replies: exit code 3."""
    server = ZkServer(tmp_path / "zk").start()
    try:
        client = connect(server.connect_string, timeout=5.0)
        try:
            client.create("/x/y", b"1", makepath=True)
            for i in range(50):
                client.create(f"/x/n{i}", b"v")
            with pytest.raises(UnreachableError, match="lost ZooKeeper") as e:
                read_tree(
                    client, ["/x"], max_ops=5, in_flight=1, timeout=5.0, progress=at_reply(1, server.stop)
                )
            assert e.value.exit_code == 3
            with pytest.raises(UnreachableError):  # and a read on the dead session fails the same way
                read_tree(client, ["/x"], timeout=3.0)
        finally:
            close(client)
    finally:
        server.stop()


def test_bad_arguments(zk):
    with pytest.raises(BadInputError, match="unknown ZooKeeper read method"):
        read_tree(zk, ["/t"], method="fast")
    with pytest.raises(BadInputError, match="jute.maxbuffer"):
        read_tree(zk, ["/t"], max_batch_bytes=2 * JUTE_MAXBUFFER)
    with pytest.raises(BadInputError, match="absolute"):
        read_tree(zk, ["brokers"])


def test_default_roots_are_kafkas(zk):
    zk.create("/brokers/ids/1", b"{}", makepath=True)
    zk.create("/controller_epoch", b"5")
    zk.create("/consumers/old-group/offsets", b"", makepath=True)  # pre-0.9 offsets: not migrated
    zk.create("/unrelated", b"x")
    tree = read_tree(zk)
    assert set(tree.nodes) == {"/brokers", "/brokers/ids", "/brokers/ids/1", "/controller_epoch"}


def test_read_cluster_decodes_what_the_generator_wrote(zkc):
    from migrator.zk.reader import read_cluster
    from zk_fixtures.generator import ClusterSpec, load_cluster

    generated = load_cluster(zkc, ClusterSpec(topics=6, partitions=4))
    result = read_cluster(zkc)
    assert not result.problems
    assert result.image.topics == generated.image.topics
    assert sorted(a.key() for a in result.image.acls) == sorted(a.key() for a in generated.image.acls)
    assert result.control.controller_epoch == generated.control.controller_epoch
