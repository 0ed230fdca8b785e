"""The rule that keeps the controller answering: no ZooKeeper wait while its commit or service lock is
held (DESIGN.md invariant 8, docs/architecture.md "Locks").

Every request of the brokers (heartbeats, AlterPartition) and of admins is decided under the
controller service's locks. A ZooKeeper read or write made there waits for ZooKeeper, with retries
for up to minutes during an outage, and every broker's heartbeat waits behind it: brokers fenced,
leaders moved for nothing. So the service's locks are `GuardedLock`s, and every synchronous kazoo
call waits through `zk.connection`, which calls `check_zookeeper_wait()`: a ZooKeeper wait on a
thread holding one of them raises `ZooKeeperUnderLockError` at once, naming the lock, instead of
freezing the controller. The few waits that are the point of holding a lock (the last sync of a
stopping controller, a service built without write-behind) say so with `allowed(reason)`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "DARK_WINDOW",
    "GuardedLock",
    "ZooKeeperUnderLockError",
    "allowed",
    "check_zookeeper_wait",
    "held_locks",
]

_local = threading.local()

#: The declared exception: from the copy's claim to DualWriteMetadata the service's lock is held on
#: purpose (KIP-866's dark window: brokers' heartbeats wait until the copy and the first sync are done).
DARK_WINDOW = "the copy and the first sync hold the brokers off until DualWriteMetadata (KIP-866)"


class ZooKeeperUnderLockError(RuntimeError):
    """A programming error: ZooKeeper I/O was attempted under a lock that heartbeats wait for."""


def _held() -> list[str]:
    held: list[str] | None = getattr(_local, "held", None)
    if held is None:
        held = _local.held = []
    return held


def held_locks() -> tuple[str, ...]:
    """The guarded locks the calling thread holds (innermost last)."""
    return tuple(_held())


@contextmanager
def allowed(reason: str) -> Iterator[None]:
    """A ZooKeeper wait under a guarded lock that is intended; `reason` says why, for the reader."""
    depth = getattr(_local, "allowed", 0)
    _local.allowed = depth + 1
    try:
        yield
    finally:
        _local.allowed = depth


def check_zookeeper_wait(what: str = "a ZooKeeper request") -> None:
    """Raise if the calling thread holds a guarded lock (outside an `allowed` section)."""
    held = _held()
    if held and not getattr(_local, "allowed", 0):
        raise ZooKeeperUnderLockError(
            f"{what} while holding {held[-1]}: no ZooKeeper wait may happen under the controller's "
            "commit or service lock (DESIGN.md invariant 8)"
        )


class GuardedLock:
    """A Lock or RLock that records, per thread, that it is held (for `check_zookeeper_wait`).

    It keeps the methods `threading.Condition` takes from an RLock, so a Condition built on it waits
    and is notified as on the RLock itself."""

    def __init__(self, name: str, reentrant: bool = False) -> None:
        self.name = name
        self._lock: Any = threading.RLock() if reentrant else threading.Lock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = bool(self._lock.acquire(blocking, timeout))
        if got:
            _held().append(self.name)
        return got

    def release(self) -> None:
        held = _held()
        for i in range(len(held) - 1, -1, -1):
            if held[i] == self.name:
                del held[i]
                break
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def locked(self) -> bool:
        return bool(self._lock.locked()) if hasattr(self._lock, "locked") else False

    # threading.Condition's hooks (an RLock's own, with the per-thread record kept in step)
    def _is_owned(self) -> bool:
        if hasattr(self._lock, "_is_owned"):
            return bool(self._lock._is_owned())  # noqa: SLF001 - Condition's protocol
        if self._lock.acquire(False):
            self._lock.release()
            return False
        return True

    def _release_save(self) -> Any:
        held = _held()
        count = held.count(self.name)
        held[:] = [h for h in held if h != self.name]
        state = self._lock._release_save() if hasattr(self._lock, "_release_save") else self._lock.release()  # noqa: SLF001
        return (state, count)

    def _acquire_restore(self, saved: Any) -> None:
        state, count = saved
        if hasattr(self._lock, "_acquire_restore"):
            self._lock._acquire_restore(state)  # noqa: SLF001 - Condition's protocol
        else:
            self._lock.acquire()
        _held().extend([self.name] * count)
