"""One read per `migrate`: the pre-flight read is reused after the claim only when the zxids prove that
nothing but the run's own writes happened in between (zk.read_reuse); any other change is caught.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError
from migrate_helpers import assert_consistent, cluster, log_replay

from migrator import commands
from migrator.zk import paths as P
from migrator.zk.connection import close, connect
from migrator.zk.read_reuse import OwnWrites, refresh
from migrator.zk.reader import read_tree

pytestmark = pytest.mark.zk


def _same(a: object, b: object) -> None:
    ta, tb = a, b
    assert {p: (n.data, n.version, n.mzxid) for p, n in ta.nodes.items()} == {  # type: ignore[attr-defined]
        p: (n.data, n.version, n.mzxid)
        for p, n in tb.nodes.items()  # type: ignore[attr-defined]
    }
    assert {p: sorted(c) for p, c in ta.children.items() if c} == {  # type: ignore[attr-defined]
        p: sorted(c)
        for p, c in tb.children.items()
        if c  # type: ignore[attr-defined]
    }


@pytest.mark.zk_matrix
def test_own_writes_only_refresh_to_a_fresh_read(zk: KazooClient) -> None:
    """Our own creates, sets and deletes (single and in a multi) since the read: the refreshed tree is
    what a fresh read gives, at the fresh read's zxid."""
    zk.create("/config/topics/a", b'{"version":1,"config":{}}', makepath=True)
    zk.create("/config/topics/gone", b"{}")
    tree = read_tree(zk)
    assert tree.consistent
    with OwnWrites(zk) as own:
        zk.set("/config/topics/a", b'{"version":1,"config":{"x":"1"}}')
        zk.delete("/config/topics/gone")
        txn = zk.transaction()
        txn.create("/config/topics/b", b"{}")
        txn.create("/controller_epoch", b"7")
        txn.commit()
        assert refresh(zk, tree, own) is None
    fresh = read_tree(zk)
    assert tree.read_zxid == fresh.read_zxid
    _same(tree, fresh)


def test_a_change_by_anyone_else_is_caught(zk: KazooClient, zk_connect: str) -> None:
    """Another client's write, even deep in the tree where no top-level stat moves, is a gap: no reuse;
    and so is a write of ours that failed (it took a zxid but left no reply to record)."""
    zk.create("/brokers/topics/t/partitions/0/state", b'{"leader":1}', makepath=True)
    tree = read_tree(zk)
    other = connect(zk_connect)
    try:
        with OwnWrites(zk) as own:
            zk.create("/controller", b"ours")
            other.set("/brokers/topics/t/partitions/0/state", b'{"leader":2}')
            why = refresh(zk, tree, own)
        assert why is not None and "not this session's" in why
        assert tree.data("/brokers/topics/t/partitions/0/state") == b'{"leader":1}'  # left as read
        tree = read_tree(zk)
        with OwnWrites(zk) as own:
            with pytest.raises(NodeExistsError):
                zk.create("/controller", b"again")
            why = refresh(zk, tree, own)
        assert why is not None and "not this session's" in why
    finally:
        close(other)


def _move_leader(zk: KazooClient, topic: str) -> int:
    path = P.partition_state_path(topic, 0)
    data, stat = zk.get(path)
    state = json.loads(data)
    new_leader = next(b for b in state["isr"] if b != state["leader"])
    state.update(leader=new_leader, leader_epoch=state["leader_epoch"] + 1)
    zk.set(path, json.dumps(state).encode(), version=stat.version)
    return int(new_leader)


@pytest.mark.zk_matrix
def test_migrate_reuses_the_preflight_read_when_nothing_changed(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        result = commands.migrate(zk_connect, str(log_dir), yes=True, brokers_from_zk=True)
        assert any(
            a.startswith("reused the pre-flight read of ZooKeeper and its decode") for a in result.actions
        ), result.actions
        assert result.manifest is not None and result.manifest.zk_consistent
        assert_consistent(zk, log_dir)


def test_migrate_catches_a_change_between_preflight_and_claim(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """A partition's leader moves while the operator is asked (after the pre-flight read, before the
    claim): the copy must carry the new leader, so ZooKeeper is read again."""
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect) as generated:
        topic = next(t for t in generated.image.topics if t not in generated.image.pending_deletions)
        moved: list[int] = []

        def confirm(_question: str) -> bool:
            moved.append(_move_leader(zk, topic))
            return True

        result = commands.migrate(zk_connect, str(log_dir), confirm=confirm, brokers_from_zk=True)
        assert moved and any(a.startswith("read ZooKeeper again") for a in result.actions), result.actions
        replay, _ = log_replay(log_dir)
        assert replay.image.topics[topic].partitions[0].leader == moved[0]
        assert_consistent(zk, log_dir)


def test_migrate_reconcile_repairs_drift_the_single_read_cannot_see(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """A topic config changed in ZooKeeper after the copy's read: the first sync (from that read) cannot
    see it, `--reconcile`'s fresh read does, repairs it and is timed apart from the dark window."""
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect) as generated:
        topic = next(t for t in generated.image.topics if t not in generated.image.pending_deletions)
        path = P.config_entity_path(P.CONFIG_TYPE_TOPICS, topic)
        drifted: list[bool] = []

        def progress(done: int, _total: int) -> None:
            if not drifted:  # the copy is being appended: its read is done
                zk.set(path, b'{"version":1,"config":{"retention.ms":"1234"}}')
                drifted.append(True)

        result = commands.migrate(
            zk_connect, str(log_dir), yes=True, brokers_from_zk=True, progress=progress, reconcile=True
        )
        assert drifted and "full_reconcile" in result.timings and "dark_window" in result.timings
        assert any(path in json.dumps(r) for r in result.repairs), result.repairs
        assert any(a.startswith("--reconcile:") for a in result.actions), result.actions
        assert_consistent(zk, log_dir)
