"""Bulk creation against a real ZooKeeper: batching under jute.maxbuffer, ordering, exist_ok, errors."""

from __future__ import annotations

import pytest
from kazoo.protocol.serialization import Create, Transaction
from kazoo.security import OPEN_ACL_UNSAFE, make_acl, make_digest_acl

from migrator.errors import BadInputError, PermissionDeniedError, UnreachableError
from migrator.zk.bulk_write import (
    JUTE_MAXBUFFER,
    ZnodeExistsError,
    acl_request_bytes,
    create_all,
    create_request_bytes,
    multi_request_bytes,
)
from migrator.zk.connection import close, connect

pytestmark = pytest.mark.zk


def _tree(topics: int, partitions: int) -> dict[str, bytes]:
    out = {"/brokers": b"", "/brokers/topics": b""}
    for t in range(topics):
        base = f"/brokers/topics/t{t}"
        out[base] = b'{"version":3,"partitions":{}}'
        out[base + "/partitions"] = b""
        for p in range(partitions):
            out[f"{base}/partitions/{p}"] = b""
            out[f"{base}/partitions/{p}/state"] = b'{"leader":%d}' % p
    return out


def _read_all(zk, root: str = "/") -> dict[str, bytes]:
    out = {}
    for child in zk.get_children(root):
        path = ("" if root == "/" else root) + "/" + child
        out[path] = zk.get(path)[0]
        out.update(_read_all(zk, path))
    return out


def test_request_size_matches_kazoo_serialisation(zk):
    acl = [make_digest_acl("kafka", "secret", all=True), *OPEN_ACL_UNSAFE]
    ops = [Create("/chroot/a/ü", b"x" * 1000, acl, 0), Create("/chroot/b", b"", acl, 1)]
    expected = 8 + len(Transaction(ops).serialize())
    computed = multi_request_bytes(
        sum(create_request_bytes(o.path, o.data, acl_request_bytes(acl)) for o in ops)
    )
    assert computed == expected


def test_creates_everything_with_exact_bytes_in_batches(zk):
    znodes = _tree(topics=20, partitions=10)
    batches: list[int] = []
    n = create_all(zk, znodes, max_multi_bytes=4_000, in_flight=3, progress=batches.append)
    assert n == len(znodes) == 2 + 20 * (2 + 2 * 10)
    assert len(batches) > 10, "a small multi limit must split the work into many multis"
    assert sum(batches) == n
    assert _read_all(zk) == znodes


def test_children_listed_before_parents_wait_for_them(zk):
    znodes = {
        "/a/b/c": b"c",
        "/a/b": b"b",
        "/x/y": b"y",
        "/a": b"a",
        "/x": b"x",
        "/a/b/d": b"d",
    }
    # One znode per multi, all in flight: a child's multi must still be sent after its parent's.
    assert create_all(zk, znodes, max_multi_bytes=1, in_flight=8) == 6
    assert _read_all(zk) == znodes


def test_large_znodes_are_packed_under_jute_maxbuffer(zk):
    big = {f"/big{i}": bytes([65 + i]) * 400_000 for i in range(6)}
    sizes: list[int] = []
    assert create_all(zk, big, progress=sizes.append) == 6
    # 400 KB each: two fit under 900 KB, three would not (the server would drop the connection).
    assert sizes == [2, 2, 2]
    for path, data in big.items():
        assert zk.get(path)[0] == data


def test_single_znode_at_the_exact_limit(zk):
    overhead = multi_request_bytes(
        create_request_bytes(zk.chroot + "/edge", b"", acl_request_bytes(OPEN_ACL_UNSAFE))
    )
    data = b"e" * (JUTE_MAXBUFFER - overhead)
    assert create_all(zk, {"/edge": data}) == 1  # bigger than max_multi_bytes, so it goes alone
    assert zk.get("/edge")[0] == data
    with pytest.raises(BadInputError, match=r"znode /over: .* over ZooKeeper's jute.maxbuffer"):
        create_all(zk, {"/over": data + b"!"})
    assert zk.exists("/over") is None
    assert zk.connected


def test_oversized_request_the_server_refuses_is_unreachable_error(zk_connect):
    # Pretend the server allowed 2 MB: the real one drops the connection, which must become one line.
    client = connect(zk_connect)
    try:
        with pytest.raises(UnreachableError, match=r"lost ZooKeeper while creating /huge .*ConnectionLoss"):
            create_all(
                client, {"/huge": b"h" * 1_200_000}, max_multi_bytes=2_000_000, jute_maxbuffer=2_000_000
            )
    finally:
        close(client)


def test_existing_znode_is_a_clear_error_or_skipped(zk):
    znodes = _tree(topics=10, partitions=5)
    zk.create("/brokers/topics/t3/partitions", b"kept", makepath=True)
    with pytest.raises(ZnodeExistsError, match=r"znode /brokers/topics/t3/partitions already exists") as e:
        create_all(
            zk,
            {p: d for p, d in znodes.items() if not zk.exists(p) or p.count("/") > 3},
            max_multi_bytes=2_000,
            in_flight=4,
        )
    assert e.value.path == "/brokers/topics/t3/partitions"
    assert e.value.exit_code == 2

    zk.delete("/brokers", recursive=True)
    zk.create("/brokers/topics/t3/partitions", b"kept", makepath=True)
    zk.create("/brokers/topics/t7/partitions/2/state", b"kept", makepath=True)
    pre_existing = {p for p in znodes if zk.exists(p)}
    # Small multis, many in flight: the children of /brokers/topics/t3/partitions sit in multis that
    # were sent before the failing one was resolved, and must be resent after it.
    n = create_all(zk, znodes, max_multi_bytes=1_500, in_flight=6, exist_ok=True)
    assert n == len(znodes) - len(pre_existing)
    tree = _read_all(zk)
    assert set(tree) == set(znodes)
    assert tree["/brokers/topics/t3/partitions"] == b"kept"
    assert tree["/brokers/topics/t7/partitions/2/state"] == b"kept"
    assert all(tree[p] == znodes[p] for p in znodes if p not in pre_existing)
    # Everything exists now: a rerun creates nothing and changes nothing.
    assert create_all(zk, znodes, max_multi_bytes=1_500, in_flight=6, exist_ok=True) == 0
    assert _read_all(zk) == tree


def test_missing_external_parent_is_named(zk):
    with pytest.raises(BadInputError, match=r"cannot create /nope/child: its parent /nope does not exist"):
        create_all(zk, {"/nope/child": b""})
    assert zk.get_children("/") == []


def test_bad_paths_and_data(zk):
    for bad in ("relative", "/trailing/", "/a//b", "/a/../b", "/"):
        with pytest.raises(BadInputError, match="bad znode path"):
            create_all(zk, {bad: b""})
    with pytest.raises(BadInputError, match="data must be bytes"):
        create_all(zk, {"/s": "text"})  # type: ignore[dict-item]
    assert zk.get_children("/") == []


def test_ephemeral_znodes_belong_to_the_session(zk):
    zk.create("/ids")
    n = create_all(zk, {"/ids/1": b"one", "/ids/2": b"two"}, ephemeral=True)
    assert n == 2
    session_id = zk.client_id[0]
    for path in ("/ids/1", "/ids/2"):
        assert zk.exists(path).ephemeralOwner == session_id
    with pytest.raises(BadInputError, match="ephemeral znodes cannot have children"):
        create_all(zk, {"/e": b"", "/e/c": b""}, ephemeral=True)


def test_acl_is_applied_and_no_auth_is_permission_denied(zk_connect):
    owner = connect(zk_connect, auth=["digest:kafka:secret"])
    stranger = connect(zk_connect)
    try:
        digest = make_digest_acl("kafka", "secret", all=True)
        world_read = make_acl("world", "anyone", read=True)
        assert create_all(owner, {"/secure": b"s", "/secure/a": b"a"}, acl=[digest, world_read]) == 2
        acls, _ = owner.get_acls("/secure/a")
        assert sorted((a.id.scheme, a.perms) for a in acls) == [("digest", 31), ("world", 1)]
        with pytest.raises(PermissionDeniedError, match=r"denied creating /secure/b") as e:
            create_all(stranger, {"/secure/b": b"b"})
        assert e.value.exit_code == 3
    finally:
        owner.delete("/secure", recursive=True)
        close(owner)
        close(stranger)


def test_nothing_to_do(zk):
    assert create_all(zk, {}) == 0
    with pytest.raises(BadInputError, match="in_flight"):
        create_all(zk, {"/a": b""}, in_flight=0)
