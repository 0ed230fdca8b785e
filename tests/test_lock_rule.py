"""migrator.lock_rule: a ZooKeeper wait under a guarded lock raises at once (DESIGN.md invariant 8)."""

from __future__ import annotations

import threading

import pytest
from kazoo.client import KazooClient

from migrator.lock_rule import GuardedLock, ZooKeeperUnderLockError, allowed, held_locks
from migrator.zk.connection import close, connect

pytestmark = pytest.mark.zk


def test_a_zookeeper_read_under_a_guarded_lock_raises_and_an_allowed_one_does_not(zk_connect: str) -> None:
    client: KazooClient = connect(zk_connect)
    try:
        lock = GuardedLock("the service's lock", reentrant=True)
        assert client.exists("/") is not None  # no lock: fine
        with lock:
            with lock:  # reentrant
                assert held_locks() == ("the service's lock", "the service's lock")
            with pytest.raises(ZooKeeperUnderLockError, match="the service's lock"):
                client.get_children("/")
            with allowed("a declared exception"):
                assert client.exists("/") is not None
        assert held_locks() == ()
        assert client.exists("/") is not None
    finally:
        close(client)


def test_a_condition_on_a_guarded_lock_waits_releases_and_restores() -> None:
    lock = GuardedLock("the service's lock", reentrant=True)
    changed = threading.Condition(lock)  # type: ignore[arg-type]
    seen: list[tuple[str, ...]] = []

    def other() -> None:
        with changed:
            seen.append(held_locks())
            changed.notify_all()

    with changed:
        t = threading.Thread(target=other)
        t.start()
        assert changed.wait(10)
        assert held_locks() == ("the service's lock",)
    t.join(10)
    assert seen == [("the service's lock",)] and held_locks() == ()
