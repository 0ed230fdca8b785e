"""Whether a consistent read of ZooKeeper still holds after this session's own writes, proved by zxids.

`migrate` reads ZooKeeper for its pre-flight check before it claims, and the copy needs ZooKeeper as
it is after the claim. Reading 400k znodes twice is what this module avoids, when it can prove the
second read would give the first one plus this session's own writes.

The proof. ZooKeeper gives every transaction (a write that succeeded, a write that failed, a session
opened or closed) the next zxid of the leader's epoch, so within one epoch the transactions between a
read served at zxid Z0 and a read served at Zc are exactly Z0+1..Zc. A read's reply header carries the
zxid the server had applied when it served it; a write's successful reply carries its own
transaction's zxid (the server applies writes one at a time and answers with the zxid it just
applied). `OwnWrites` records, for this session, the zxid and paths of every write that got a
successful reply. If those zxids cover Z0+1..Zc, nothing happened in ZooKeeper since the read but
these writes, and ZooKeeper at Zc is the old tree with the paths they wrote (and their parents) read
again — which `refresh` does in one multiRead, whose reply zxid is that Zc (on ZooKeeper 3.5, which
has no multiRead, in pipelined single reads that must all answer at one zxid, `pipelined_read`).
Anything else — a gap (a write by anyone else, a session opened or closed, a write of ours that failed
or whose reply was lost), another leader epoch, a read that was not one snapshot, writes landing while
a 3.5 server answers the single reads — and `refresh` says why and the caller reads ZooKeeper afresh: the check can only cost a read, never
hide a change.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from migrator.zk.multiread import (
    OP_GET_CHILDREN,
    OP_GET_DATA,
    multi_read,
    pipelined_read,
    supports_multi_read,
)
from migrator.zk.paths import CONTROLLER_EPOCH, KAFKA_ROOTS
from migrator.zk.reader import children_reply_bytes
from migrator.zk.tree import ZkTree, make_znode

__all__ = ["OwnWrites", "refresh"]

# ZooKeeper's write opcodes (ZooDefs.OpCode): create, delete, setData, setACL, check, multi, create2,
# reconfig, createContainer, deleteContainer, createTTL. Reads are not recorded: their reply zxid
# names whatever the server applied last, anyone's write.
_WRITES = frozenset((1, 2, 5, 7, 13, 14, 15, 16, 19, 20, 21))
_CHECK = 13


class _Recorded:
    """Stands in for a write's async result in kazoo's queue: notes the reply's zxid, then passes it on.

    kazoo's connection thread sets `client.last_zxid` from a reply's header just before it sets that
    reply's result, and nothing else moves it meanwhile, so inside `set` it is this reply's zxid.
    """

    __slots__ = ("inner", "owner", "paths")

    def __init__(self, owner: OwnWrites, paths: tuple[str, ...], inner: Any) -> None:
        self.owner = owner
        self.paths = paths
        self.inner = inner

    def set(self, value: Any = None) -> None:
        # a multi whose ops failed still answers "successfully", with the failures in its results
        failed = isinstance(value, list) and any(isinstance(r, BaseException) for r in value)
        if not failed:
            self.owner._landed(int(self.owner.client.last_zxid), self.paths)
        self.inner.set(value)

    def set_exception(self, exception: BaseException) -> None:
        self.inner.set_exception(exception)  # not recorded: its transaction, if any, stays a gap


class OwnWrites:
    """Records this session's successful writes (zxid, paths) while active; a context manager."""

    def __init__(self, client: KazooClient) -> None:
        self.client = client
        self.writes: list[tuple[int, tuple[str, ...]]] = []
        self.patched: list[str] = []  # the paths `refresh` read again into the tree
        self._lock = threading.Lock()
        self._call: Any = None

    def __enter__(self) -> OwnWrites:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Wrap the session's one request entry point (`KazooClient._call`, as `multiread` uses it)."""
        client = self.client
        original = client._call
        chroot = client.chroot or ""

        def call(request: Any, async_object: Any) -> Any:
            if getattr(request, "type", None) in _WRITES and async_object is not None:
                async_object = _Recorded(self, _paths_of(request, chroot), async_object)
            return original(request, async_object)

        self._call = call
        client._call = call

    def stop(self) -> None:
        if self._call is not None and self.client.__dict__.get("_call") is self._call:
            del self.client.__dict__["_call"]
        self._call = None

    def _landed(self, zxid: int, paths: tuple[str, ...]) -> None:
        with self._lock:
            self.writes.append((zxid, paths))


def _paths_of(request: Any, chroot: str) -> tuple[str, ...]:
    ops = getattr(request, "operations", None)
    items = ops if ops is not None else [request]
    out = []
    for op in items:
        path = getattr(op, "path", None)
        if path is None or getattr(op, "type", None) == _CHECK:
            continue
        if chroot and path.startswith(chroot):
            path = path[len(chroot) :] or "/"
        out.append(path)
    return tuple(out)


def _in_scope(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r + "/") for r in roots)


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def refresh(
    client: KazooClient, tree: ZkTree, own: OwnWrites, roots: Sequence[str] = KAFKA_ROOTS
) -> str | None:
    """Bring `tree` (read before `own` started) to ZooKeeper's present if only `own`'s writes happened
    since; returns None when it did, else why not (then `tree` is unchanged and must be read afresh)."""
    if not tree.consistent:
        return "the pre-flight read was not one snapshot"
    with own._lock:
        writes = list(own.writes)
    z0 = tree.read_zxid
    touched = {p for _, paths in writes for p in paths}
    paths = sorted({q for p in touched for q in (p, _parent(p)) if _in_scope(q, roots)})
    ops = [(op, p) for p in paths for op in (OP_GET_DATA, OP_GET_CHILDREN)]
    ops = ops or [(OP_GET_DATA, CONTROLLER_EPOCH)]
    if supports_multi_read(client):
        reply = multi_read(client, ops)
    else:  # ZooKeeper 3.5: single reads, proven to share one zxid (multiread.pipelined_read)
        maybe = pipelined_read(client, ops)
        if maybe is None:
            return "ZooKeeper applied writes while the changed paths were read again (a server without multiRead)"
        reply = maybe
    zc = reply.zxid
    if zc >> 32 != z0 >> 32:
        return "a new ZooKeeper leader epoch began since the pre-flight read"
    ours = {z for z, _ in writes if z0 < z <= zc}
    others = (zc - z0) - len(ours)
    if others:
        return (
            f"{others} transaction(s) not this session's since the pre-flight read (zxid {z0:#x} → {zc:#x})"
        )
    if paths:
        _patch(tree, paths, reply.results)
    own.patched = paths
    tree.read_zxid = zc
    return None


def _patch(tree: ZkTree, paths: Iterable[str], results: list[Any]) -> None:
    """Replace each path's node and child list with what the multiRead found (absent: gone, with all
    below it; ZooKeeper deletes only leaves, so what was below went in writes of ours too)."""
    it = iter(results)
    for path in paths:
        got, kids = next(it), next(it)
        if isinstance(got, NoNodeError):
            prefix = path + "/"
            for p in [p for p in tree.nodes if p == path or p.startswith(prefix)]:
                tree.nodes.pop(p, None)
                tree.children.pop(p, None)
                tree.children_reply_bytes.pop(p, None)
            continue
        if isinstance(got, BaseException):
            raise got
        data, stat = got
        node = make_znode(
            path,
            data,
            stat.version,
            stat.czxid,
            stat.mzxid,
            stat.ephemeralOwner,
            stat.numChildren,
            stat.dataLength,
            stat.pzxid,
        )
        names = [] if isinstance(kids, BaseException) else list(kids)
        tree.add(node, names if names else None)
        if names:
            tree.children_reply_bytes[path] = children_reply_bytes(names)
        else:
            tree.children.pop(path, None)
            tree.children_reply_bytes.pop(path, None)
