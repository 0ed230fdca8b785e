"""The bulk reader: Kafka's subtrees of ZooKeeper into a `ZkTree`, fast and as consistent as ZooKeeper allows.

The walk goes breadth first over one work queue: getData of a znode gives its data and Stat, and a
non-zero `numChildren` in that Stat queues a getChildren of it, whose names queue getData of the
children. Work is packed into multiReads sized by the reply they will produce and several are kept in
flight, so the server, the socket and the parser all stay busy. Servers older than 3.6 (no multiRead)
get the same walk with kazoo's pipelined `get_async` / `get_children_async`.

ZooKeeper has no multi-path snapshot read. Every reply carries the zxid the server had applied when it
served it, and a server applies no write while it serves a read, so a walk whose replies all carry one
zxid *is* the tree at that zxid. When they differ, the walk is redone, reusing what was read at the
newest zxid, a bounded number of times. docs/zk-reader.md states the guarantee exactly.
"""

from __future__ import annotations

import logging
import struct
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, NoReturn

from kazoo.client import KazooClient
from kazoo.exceptions import (
    EXCEPTIONS,
    AuthFailedError,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NoNodeError,
    SessionExpiredError,
    UnimplementedError,
)
from kazoo.handlers.threading import KazooTimeoutError

from migrator import stop
from migrator.bulk import without_gc
from migrator.errors import BadInputError, PermissionDeniedError, UnreachableError
from migrator.zk.connection import permission_denied
from migrator.zk.layout import LayoutResult, image_from_tree
from migrator.zk.multiread import (
    INT,
    OP_GET_CHILDREN,
    OP_GET_DATA,
    OP_HEAD,
    STAT,
    ChildList,
    MultiReadRequest,
    RawReply,
    join_ops,
    mark_unsupported,
    server_path,
    supports_multi_read,
    wait_for_session,
)
from migrator.zk.paths import KAFKA_ROOTS
from migrator.zk.tree import ZNODE_TWIN, ZkTree, ZNode, make_znode

__all__ = [
    "DEFAULT_IN_FLIGHT",
    "DEFAULT_MAX_BATCH_BYTES",
    "DEFAULT_MAX_OPS",
    "JUTE_MAXBUFFER",
    "BulkReader",
    "ReadStats",
    "children_reply_bytes",
    "read_cluster",
    "read_tree",
]

log = logging.getLogger(__name__)

# ZooKeeper's default jute.maxbuffer (0xfffff): the server drops the connection on a longer request,
# a Java client refuses a longer reply.
JUTE_MAXBUFFER = 1_048_575
DEFAULT_MAX_BATCH_BYTES = 512 * 1024  # expected reply (and request) bytes per multiRead
DEFAULT_MAX_OPS = 2000
DEFAULT_IN_FLIGHT = 8
DEFAULT_RETRIES = 2
ASYNC_CHUNK = 5000  # fallback: requests issued per chunk, two chunks in flight
METHODS = ("auto", "multiread", "async")

DATA = OP_GET_DATA
LIST = OP_GET_CHILDREN
NO_NODE = NoNodeError.code
NO_AUTH = NoAuthError.code

# A getChildren2 reply frame (what Kafka's Java client asks for) after the 4-byte length prefix: reply
# header 16, child count 4, then 4 + len per name, then Stat 68. The Java client refuses a frame
# longer than its jute.maxbuffer.
_CHILDREN2_FIXED = 16 + 4 + 68
_DATA_REPLY_FIXED = 9 + 4 + 68  # per-op header, length, Stat
_UNKNOWN_NAME_GUESS = 64
_REQUEST_FIXED = 4 + 8 + 9  # length prefix, xid + type, done header
_REPLY_FIXED = 4 + 16 + 9  # length prefix, reply header, done header


def children_reply_bytes(names: Sequence[str]) -> int:
    """Bytes of the getChildren2 reply a Java client receives for these names (jute.maxbuffer applies)."""
    return _CHILDREN2_FIXED + sum(4 + len(n.encode()) for n in names)


@dataclass
class ReadStats:
    """What the last read did: for benchmarks, logs and `check`."""

    method: str = ""
    rounds: int = 0
    requests: int = 0
    ops: int = 0
    znodes: int = 0
    vanished: int = 0
    seconds: float = 0.0
    consistent: bool = False
    zxid: int = 0
    # (lowest, highest) reply zxid of each pass
    round_zxids: list[tuple[int, int]] = field(default_factory=list)
    # largest multiRead frames, after the length prefix; the server's jute.maxbuffer bounds requests
    largest_reply: int = 0
    largest_request: int = 0


# the hot loop inlines the twin when it works (one call per znode less): migrator.zk.tree's one way
_make_znode, _TWIN = make_znode, ZNODE_TWIN


def _depth(path: str) -> int:
    return 0 if path == "/" else path.count("/")


def _normalise_roots(roots: Sequence[str]) -> list[str]:
    """Absolute, without trailing slash, and without roots nested in another root."""
    cleaned = []
    for root in roots:
        if not root.startswith("/"):
            raise BadInputError(f"ZooKeeper path {root!r} must be absolute (start with /)")
        cleaned.append(root.rstrip("/") or "/")
    out: list[str] = []
    for root in sorted(set(cleaned)):
        if any(parent == "/" or root.startswith(parent + "/") for parent in out):
            continue
        out.append(root)
    return out


# Work is queued in runs of same-kind reads at one depth: [kind, depth, paths, hints, next index].
# Hints are the expected data lengths of getData paths (None or -1: unknown) and the child counts of
# getChildren paths. A batch is a list of segments, each a slice of one run: (kind, depth, paths, hints).
# Handling whole runs with list comprehensions and one loop per reply keeps per-znode work small.
Run = list[Any]
Segment = tuple[int, int, list[str], "list[int] | None"]
Batch = list[Segment]


class _MultiReadExecutor:
    """One multiRead per batch; replies come back whole, with their zxid, parsed off kazoo's thread."""

    name = "multiread"
    encodes = True

    def __init__(self, client: KazooClient, timeout: float) -> None:
        self.client = client
        self.timeout = timeout
        self.largest_reply = 0
        self.largest_request = 0

    def submit(self, batch: Batch, payload: bytes) -> Any:
        if len(payload) + 8 > self.largest_request:
            self.largest_request = len(payload) + 8  # xid and type precede the body
        result = self.client.handler.async_result()
        self.client._call(MultiReadRequest(payload, sum(len(seg[2]) for seg in batch)), result)
        return result

    def collect(self, handle: Any) -> tuple[int | None, RawReply]:
        """The reply frame, unparsed: the walk parses and applies it in one pass."""
        raw: RawReply = handle.get(timeout=self.timeout)
        if len(raw.buffer) > self.largest_reply:
            self.largest_reply = len(raw.buffer)
        return raw.zxid, raw


class _AsyncExecutor:
    """The fallback: one kazoo request per znode, a chunk issued before any reply is gathered."""

    name = "async"
    encodes = False
    largest_reply = largest_request = 0

    def __init__(self, client: KazooClient, timeout: float) -> None:
        self.client = client
        self.timeout = timeout

    def submit(self, batch: Batch, payload: bytes) -> Any:
        pending = []
        for kind, _, paths, _ in batch:
            call = self.client.get_async if kind == DATA else self.client.get_children_async
            pending.extend([call(path) for path in paths])
        return pending

    def collect(self, handle: Any) -> tuple[int | None, list[Any]]:
        out: list[Any] = []
        timeout = self.timeout
        for result in handle:
            try:
                value = result.get(timeout=timeout)
            except (NoNodeError, NoAuthError) as e:
                out.append(e.code)
                continue
            if type(value) is list:
                out.append(ChildList(value, sum(len(n.encode()) for n in value)))
            else:
                out.append(value)
        return None, out


@dataclass
class _Round:
    nodes: dict[str, ZNode]
    children: dict[str, list[str]]
    reply_bytes: dict[str, int]
    replies: list[tuple[int | None, Batch]]
    zmin: int | None
    zmax: int | None
    max_zxid: int
    requests: int
    ops: int
    vanished: int


@dataclass
class _Reuse:
    """What an earlier round read at the target zxid, so the next round need not ask again."""

    data: set[str]
    lists: set[str]
    nodes: dict[str, ZNode]
    children: dict[str, list[str]]
    reply_bytes: dict[str, int]


class _Sizes:
    """Running data and name sizes per depth, to predict replies ZooKeeper has not sized yet.

    A znode's length only arrives with its data, so a first read is sized from the znodes already read
    at the same depth, with 4x headroom over their mean (ZooKeeper lists children in hash order, so big
    and small siblings mix rather than cluster). Nothing read yet at a depth means "assume it fills a
    batch": the first reads at each new depth go alone. Re-read passes know every size exactly. A reply
    over the budget costs memory, not correctness: ZooKeeper and kazoo accept replies of any size (a
    6 MB multiRead reply was verified); only a *request* over the server's jute.maxbuffer drops the
    connection, and request sizes are exact.
    """

    __slots__ = ("depth_cnt", "depth_sum", "name_cnt", "name_sum")

    def __init__(self) -> None:
        self.depth_sum: list[int] = [0] * 64
        self.depth_cnt: list[int] = [0] * 64
        self.name_sum: list[int] = [0] * 64
        self.name_cnt: list[int] = [0] * 64

    def grow(self, depth: int) -> None:
        while depth >= len(self.depth_sum):
            for stat in (self.depth_sum, self.depth_cnt, self.name_sum, self.name_cnt):
                stat.extend([0] * 64)


class BulkReader:
    """Reads subtrees of one ZooKeeper session; `stats` describes the last `read()`."""

    def __init__(
        self,
        client: KazooClient,
        roots: Sequence[str] = KAFKA_ROOTS,
        *,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_ops: int = DEFAULT_MAX_OPS,
        in_flight: int = DEFAULT_IN_FLIGHT,
        method: str = "auto",
        retries: int = DEFAULT_RETRIES,
        timeout: float = 30.0,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        if method not in METHODS:
            raise BadInputError(
                f"unknown ZooKeeper read method {method!r}: expected one of {', '.join(METHODS)}"
            )
        if not 4096 <= max_batch_bytes <= JUTE_MAXBUFFER:
            raise BadInputError(
                f"max batch bytes {max_batch_bytes} out of range: 4096..{JUTE_MAXBUFFER} (ZooKeeper's jute.maxbuffer)"
            )
        if max_ops < 1 or in_flight < 1 or retries < 0:
            raise BadInputError("max_ops and in_flight must be at least 1, retries at least 0")
        self.client = client
        self.roots = _normalise_roots(roots)
        self.max_batch_bytes = max_batch_bytes
        self.max_ops = max_ops
        self.in_flight = in_flight
        self.method = method
        self.retries = retries
        self.timeout = timeout
        self.progress = progress  # called after each reply with the znodes read so far in this pass
        self.stats = ReadStats()
        self._sizes = _Sizes()

    # -- public -------------------------------------------------------------------------------

    def read(self) -> ZkTree:
        started = time.perf_counter()
        self.stats = ReadStats()
        # Hundreds of thousands of new, never-cyclic objects: no collector passes meanwhile (migrator.bulk)
        with without_gc():
            try:
                tree = self._read()
            except (ConnectionLoss, SessionExpiredError, KazooTimeoutError) as e:
                raise UnreachableError(
                    f"lost ZooKeeper at {self._hosts()} while reading {', '.join(self.roots)}: "
                    f"{type(e).__name__} {e}".rstrip()
                ) from None
            except AuthFailedError:
                raise PermissionDeniedError(
                    f"ZooKeeper at {self._hosts()} rejected the session's credentials: check --zk-auth"
                ) from None
            except KazooException as e:
                raise UnreachableError(
                    f"ZooKeeper at {self._hosts()} failed a read of {', '.join(self.roots)}: {type(e).__name__} {e}".rstrip()
                ) from None
        self.stats.seconds = time.perf_counter() - started
        self.stats.znodes = len(tree)
        log.info(
            "read %d znodes in %.2fs (%s, %d rounds, %d requests, consistent=%s at zxid %#x)",
            len(tree),
            self.stats.seconds,
            self.stats.method,
            self.stats.rounds,
            self.stats.requests,
            tree.consistent,
            tree.read_zxid,
        )
        return tree

    # -- internals ----------------------------------------------------------------------------

    def _hosts(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.client.hosts) + (self.client.chroot or "")

    def _read(self) -> ZkTree:
        use_multi = self.method == "multiread" or (
            self.method == "auto" and supports_multi_read(self.client, self.timeout)
        )
        if use_multi:
            try:
                return self._read_with(_MultiReadExecutor(self.client, self.timeout))
            except UnimplementedError:
                # An ensemble member older than 3.6 (e.g. after a reconnect during a rolling upgrade).
                mark_unsupported(self.client)
                if self.method == "multiread":
                    raise BadInputError(
                        f"ZooKeeper at {self._hosts()} does not serve multiRead (it needs 3.6+); "
                        "use method 'auto' or 'async'"
                    ) from None
                log.warning("ZooKeeper refused multiRead; reading with pipelined single requests instead")
                wait_for_session(self.client, self.timeout)
                self.stats = ReadStats()
        return self._read_with(_AsyncExecutor(self.client, self.timeout))

    def _sync(self) -> int:
        """Let the server catch up with the leader; return the zxid it answered at."""
        self.client.sync_async("/").get(timeout=self.timeout)
        return int(self.client.last_zxid)

    def _read_with(self, executor: _MultiReadExecutor | _AsyncExecutor) -> ZkTree:
        stats = self.stats
        stats.method = executor.name
        start_zxid = self._sync()
        reuse: _Reuse | None = None
        target = 0
        consistent = False
        rnd: _Round | None = None
        for attempt in range(self.retries + 1):
            rnd = self._round(executor, reuse)
            stats.rounds += 1
            stats.requests += rnd.requests
            stats.ops += rnd.ops
            if executor.name == "multiread":
                lo, hi = rnd.zmin, rnd.zmax
                if hi is None:  # everything came from the previous round
                    lo = hi = target
                assert lo is not None
                consistent = lo == hi and (attempt == 0 or hi == target)
                target = max(target, hi)
            else:
                # Replies arrive in order and each moves kazoo's last_zxid: unchanged since the sync
                # (or since the previous round) means no write landed while the walk ran.
                lo, hi = start_zxid, int(self.client.last_zxid)
                consistent = lo == hi
                target = start_zxid = hi
            stats.round_zxids.append((lo, hi))
            if consistent:
                break
            if attempt < self.retries:
                log.info(
                    "writes landed during the read (zxid %#x..%#x); re-reading what they may have changed",
                    lo,
                    hi,
                )
                reuse = self._reuse_from(rnd, target) if executor.name == "multiread" else None
        assert rnd is not None
        stats.consistent = consistent
        stats.zxid = target
        stats.vanished = rnd.vanished
        stats.largest_reply = executor.largest_reply
        stats.largest_request = executor.largest_request
        tree = ZkTree(nodes=rnd.nodes, children=rnd.children, children_reply_bytes=rnd.reply_bytes)
        tree.max_zxid = rnd.max_zxid
        tree.consistent = consistent
        tree.read_zxid = target
        return tree

    @staticmethod
    def _reuse_from(rnd: _Round, target: int) -> _Reuse:
        data: set[str] = set()
        lists: set[str] = set()
        for zxid, batch in rnd.replies:
            if zxid == target:
                for kind, _, paths, _ in batch:
                    (data if kind == DATA else lists).update(paths)
        return _Reuse(data, lists, rnd.nodes, rnd.children, rnd.reply_bytes)

    def _round(self, executor: _MultiReadExecutor | _AsyncExecutor, reuse: _Reuse | None) -> _Round:
        """One breadth-first walk of every root."""
        nodes: dict[str, ZNode] = {}
        children: dict[str, list[str]] = {}
        reply_bytes: dict[str, int] = {}
        replies: list[tuple[int | None, Batch]] = []
        vanished: list[str] = []
        queue: deque[Run] = deque()
        hits: list[tuple[int, int, str]] = []
        make = _make_znode
        twin = _TWIN
        sizes = self._sizes
        depth_sum, depth_cnt, name_sum, name_cnt = (
            sizes.depth_sum,
            sizes.depth_cnt,
            sizes.name_sum,
            sizes.name_cnt,
        )
        max_zxid = 0

        def enqueue(kind: int, depth: int, paths: list[str], hints: list[int] | None) -> None:
            last = queue[-1] if queue else None
            if (
                last is not None
                and last[0] == kind
                and last[1] == depth
                and (last[3] is None) == (hints is None)
            ):
                last[2].extend(paths)  # append to the open run: one run per depth, not one per parent
                if hints is not None:
                    last[3].extend(hints)
            else:
                queue.append([kind, depth, paths, hints, 0])

        if reuse is None:
            push = enqueue
        else:
            reuse_data, reuse_lists, old_nodes = reuse.data, reuse.lists, reuse.nodes

            def push(kind: int, depth: int, paths: list[str], hints: list[int] | None) -> None:
                """Reads done at the target zxid in the last pass are reused; others get known sizes."""
                done = reuse_data if kind == DATA else reuse_lists
                todo: list[str] = []
                todo_hints: list[int] = []
                for i, path in enumerate(paths):
                    if path in done:
                        hits.append((kind, depth, path))
                    else:
                        todo.append(path)
                        if kind == DATA:
                            old = old_nodes.get(path)
                            todo_hints.append(-1 if old is None else old.data_length)
                        else:
                            assert hints is not None
                            todo_hints.append(hints[i])
                if todo:
                    enqueue(kind, depth, todo, todo_hints)

        for root in self.roots:
            depth = _depth(root)
            sizes.grow(depth + 2)
            push(DATA, depth, [root], None)

        def fail(path: str, code: int) -> NoReturn:
            if code == NO_AUTH:
                raise permission_denied(server_path(self.client.chroot, path))
            name = EXCEPTIONS[code].__name__ if code in EXCEPTIONS else str(code)
            raise UnreachableError(f"ZooKeeper at {self._hosts()} answered {name} reading {path}")

        def add_children(path: str, depth: int, names: list[str], nbytes: int, out: list[str]) -> None:
            children[path] = names
            reply_bytes[path] = _CHILDREN2_FIXED + 4 * len(names) + nbytes
            name_sum[depth + 1] += nbytes
            name_cnt[depth + 1] += len(names)
            prefix = "/" if path == "/" else path + "/"
            out.extend([prefix + name for name in names])

        unpack_head = OP_HEAD.unpack_from
        unpack_stat = STAT.unpack_from
        unpack_int = INT.unpack_from

        def apply_raw(batch: Batch, buf: bytes, off: int) -> None:
            """Parse a multiRead reply (multiread.parse_multi_read's format) and apply it in one pass:
            this loop runs once per znode, so no intermediate objects."""
            nonlocal max_zxid
            for kind, depth, paths, _ in batch:
                if kind == DATA:
                    parents: list[str] = []
                    counts: list[int] = []
                    total = 0
                    for path in paths:
                        op, done, _, n = unpack_head(buf, off)
                        off += 13
                        if op == DATA:
                            if n < 0:
                                data = None
                            else:
                                data = buf[off : off + n]
                                off += n
                            czxid, mzxid, _, _, version, _, _, owner, length, count, pzxid = unpack_stat(
                                buf, off
                            )
                            off += 68
                            if twin is not None:
                                node = twin(path, data, version, czxid, mzxid, owner, count, length, pzxid)
                                node.__class__ = ZNode
                            else:
                                node = make(path, data, version, czxid, mzxid, owner, count, length, pzxid)
                            nodes[path] = node
                            if mzxid > max_zxid:
                                max_zxid = mzxid
                            if pzxid > max_zxid:
                                max_zxid = pzxid
                            total += length
                            if count:
                                parents.append(path)
                                counts.append(count)
                        elif op == -1:
                            if n != NO_NODE:
                                fail(path, n)
                            vanished.append(path)  # deleted after its parent was listed
                        else:
                            raise ValueError(f"result type {op} for a getData of {path}")
                        if done:
                            raise ValueError("a result flagged as the last one")
                    depth_sum[depth] += total
                    depth_cnt[depth] += len(paths)
                    if parents:
                        push(LIST, depth, parents, counts)
                else:
                    found: list[str] = []
                    sizes.grow(depth + 3)
                    for path in paths:
                        op, done, _, n = unpack_head(buf, off)
                        off += 13
                        if op == LIST:
                            names = []
                            nbytes = 0
                            for _ in range(n):
                                size = unpack_int(buf, off)[0]
                                off += 4
                                names.append(buf[off : off + size].decode())
                                off += size
                                nbytes += size
                            children[path] = names
                            reply_bytes[path] = _CHILDREN2_FIXED + 4 * n + nbytes
                            name_sum[depth + 1] += nbytes
                            name_cnt[depth + 1] += n
                            if n == 1:
                                found.append(("/" if path == "/" else path + "/") + names[0])
                            else:
                                prefix = "/" if path == "/" else path + "/"
                                found.extend([prefix + name for name in names])
                        elif op == -1:
                            if n != NO_NODE:
                                fail(path, n)
                            vanished.append(path)  # deleted after it was read
                        else:
                            raise ValueError(f"result type {op} for a getChildren of {path}")
                        if done:
                            raise ValueError("a result flagged as the last one")
                    if found:
                        push(DATA, depth + 1, found, None)
            if off != len(buf) - 9 or not buf[off + 4]:
                raise ValueError(f"{len(buf) - off} bytes where the 9-byte end marker belongs")

        def apply(batch: Batch, results: list[Any]) -> None:
            """The fallback's results: (data, ZnodeStat) / ChildList / error code per read, in order."""
            nonlocal max_zxid
            it = iter(results)
            for kind, depth, paths, _ in batch:
                parents: list[str] = []
                counts: list[int] = []
                found: list[str] = []
                for path in paths:
                    res = next(it)
                    if res.__class__ is int:
                        if res != NO_NODE:
                            fail(path, res)
                        vanished.append(path)
                    elif kind == DATA:
                        data, st = res
                        czxid, mzxid, _, _, version, _, _, owner, length, count, pzxid = st
                        nodes[path] = make(path, data, version, czxid, mzxid, owner, count, length, pzxid)
                        max_zxid = max(max_zxid, mzxid, pzxid)
                        depth_sum[depth] += length
                        depth_cnt[depth] += 1
                        if count:
                            parents.append(path)
                            counts.append(count)
                    else:
                        sizes.grow(depth + 3)
                        add_children(path, depth, res.names, res.name_bytes, found)
                if parents:
                    push(LIST, depth, parents, counts)
                if found:
                    push(DATA, depth + 1, found, None)

        def apply_reused(reused: list[tuple[int, int, str]]) -> None:
            nonlocal max_zxid
            assert reuse is not None
            for kind, depth, path in reused:
                if kind == DATA:
                    node = reuse.nodes.get(path)
                    if node is None:
                        vanished.append(path)
                        continue
                    nodes[path] = node
                    max_zxid = max(max_zxid, node.mzxid, node.pzxid)
                    if node.num_children:
                        push(LIST, depth, [path], [node.num_children])
                else:
                    names = reuse.children.get(path)
                    if names is None:
                        vanished.append(path)
                        continue
                    found: list[str] = []
                    sizes.grow(depth + 3)
                    add_children(
                        path, depth, names, reuse.reply_bytes[path] - _CHILDREN2_FIXED - 4 * len(names), found
                    )
                    push(DATA, depth + 1, found, None)

        in_flight: deque[tuple[Any, Batch]] = deque()
        window = self.in_flight if executor.encodes else 2
        max_ops = self.max_ops if executor.encodes else ASYNC_CHUNK
        min_fill = max(1, max_ops // 2)
        requests = ops = 0
        zmin: int | None = None
        zmax: int | None = None
        progress = self.progress
        while True:
            while hits:
                reused, hits = hits, []
                apply_reused(reused)
            while queue and len(in_flight) < window:
                if in_flight and sum(len(run[2]) - run[4] for run in queue) < min_fill:
                    break  # a reply on its way will add work: send fuller batches
                batch, payload, count = self._next_batch(queue, max_ops, executor.encodes)
                in_flight.append((executor.submit(batch, payload), batch))
                requests += 1
                ops += count
            if not in_flight:
                if hits:
                    continue
                break
            handle, batch = in_flight.popleft()
            zxid, results = executor.collect(handle)
            if zxid is not None:
                if zmin is None or zxid < zmin:
                    zmin = zxid
                if zmax is None or zxid > zmax:
                    zmax = zxid
            replies.append((zxid, batch))
            if executor.encodes:
                try:
                    apply_raw(batch, results.buffer, results.offset)
                except (struct.error, UnicodeDecodeError, ValueError, IndexError) as e:
                    raise UnreachableError(
                        f"ZooKeeper sent a multiRead reply zk2kraft cannot parse: {e}"
                    ) from None
            else:
                apply(batch, results)
            if progress is not None:
                progress(len(nodes))
            stop.check(f"{len(nodes):,} znodes read")  # a read-only walk: any reply is a safe point

        missing_roots = set(self.roots)
        lost = sum(1 for path in vanished if path not in missing_roots)
        if vanished:
            self._drop_vanished(vanished, nodes, children)
        return _Round(nodes, children, reply_bytes, replies, zmin, zmax, max_zxid, requests, ops, lost)

    def _next_batch(self, queue: deque[Run], max_ops: int, encode: bool) -> tuple[Batch, bytes, int]:
        """Slices of the queued runs while the expected reply and the exact request stay in budget."""
        batch: Batch = []
        count = 0
        if not encode:
            while queue and count < max_ops:
                run = queue[0]
                kind, depth, paths, hints, pos = run
                take = min(max_ops - count, len(paths) - pos)
                batch.append((kind, depth, paths[pos : pos + take], None))
                count += take
                run[4] = pos + take
                if run[4] == len(paths):
                    queue.popleft()
            return batch, b"", count
        budget = self.max_batch_bytes
        chroot = self.client.chroot or ""
        sizes = self._sizes
        pack = OP_HEAD.pack
        encoded: list[bytes] = []
        reply = _REPLY_FIXED
        request = _REQUEST_FIXED
        while queue and count < max_ops:
            run = queue[0]
            kind, depth, paths, hints, pos = run
            take = min(max_ops - count, len(paths) - pos)
            if kind == DATA:
                cnt = sizes.depth_cnt[depth]
                guess = _DATA_REPLY_FIXED + 4 * sizes.depth_sum[depth] // cnt if cnt else budget
                if hints is None:
                    fit = (budget - reply) // guess
                    expected = None
                else:
                    expected = list(
                        accumulate(
                            _DATA_REPLY_FIXED + h if h >= 0 else guess for h in hints[pos : pos + take]
                        )
                    )
                    fit = bisect_right(expected, budget - reply)
            else:
                cnt = sizes.name_cnt[depth + 1]
                per_name = 4 + (2 * sizes.name_sum[depth + 1] // cnt if cnt else _UNKNOWN_NAME_GUESS)
                expected = list(accumulate(13 + per_name * h for h in hints[pos : pos + take]))
                fit = bisect_right(expected, budget - reply)
            take = min(take, fit)
            if take == 0:
                if count:
                    break
                take = 1  # nothing known or too big: it goes alone
            chunk = paths[pos : pos + take]
            if chroot:
                raws = [(chroot + p if p != "/" else chroot).encode() for p in chunk]
            else:
                raws = [p.encode() for p in chunk]
            lengths = list(accumulate(14 + len(r) for r in raws))
            if lengths[-1] > budget - request:
                fit = bisect_right(lengths, budget - request)
                if fit == 0 and count:
                    break
                take = max(fit, 1)
                chunk, raws = chunk[:take], raws[:take]
            encoded.extend([pack(kind, 0, -1, len(r)) + r for r in raws])
            batch.append((kind, depth, chunk, hints[pos : pos + take] if hints is not None else None))
            request += lengths[take - 1]
            reply += guess * take if expected is None else expected[take - 1]
            count += take
            run[4] = pos + take
            if run[4] == len(paths):
                queue.popleft()
            elif take < min(max_ops - count + take, len(paths) - pos):
                break  # the budget is spent
        return batch, join_ops(encoded), count

    @staticmethod
    def _drop_vanished(vanished: list[str], nodes: dict[str, ZNode], children: dict[str, list[str]]) -> None:
        """A node deleted mid-walk is left out everywhere: no entry and no name in its parent's list."""
        parents = set()
        for path in vanished:
            nodes.pop(path, None)
            children.pop(path, None)
            parents.add(path.rsplit("/", 1)[0] or "/")
        for parent in parents:
            names = children.get(parent)
            if names is not None:
                prefix = "/" if parent == "/" else parent + "/"
                children[parent] = [n for n in names if prefix + n in nodes]


def read_tree(
    client: KazooClient,
    roots: Sequence[str] = KAFKA_ROOTS,
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    method: str = "auto",
    *,
    max_ops: int = DEFAULT_MAX_OPS,
    in_flight: int = DEFAULT_IN_FLIGHT,
    retries: int = DEFAULT_RETRIES,
    timeout: float = 30.0,
    progress: Callable[[int], None] | None = None,
) -> ZkTree:
    """Read `roots` (relative to the client's chroot; default Kafka's) and everything below them.

    Missing roots are absent from the tree. Raises PermissionDeniedError naming the first znode the
    session may not read, UnreachableError when the connection is lost.
    """
    reader = BulkReader(
        client,
        roots,
        max_batch_bytes=max_batch_bytes,
        max_ops=max_ops,
        in_flight=in_flight,
        method=method,
        retries=retries,
        timeout=timeout,
        progress=progress,
    )
    return reader.read()


def read_cluster(client: KazooClient, strict: bool = True, **kwargs: Any) -> LayoutResult:
    """Kafka's metadata as the model sees it: `read_tree` of Kafka's roots, then the layout decode.

    The tree's consistency is not re-checked here: callers that need a snapshot read the tree
    themselves (`read_tree`) and look at `tree.consistent` before decoding it.
    """
    return image_from_tree(read_tree(client, **kwargs), strict=strict)
