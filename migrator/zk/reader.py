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
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
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

from migrator.errors import BadInputError, PermissionDeniedError, UnreachableError
from migrator.zk.connection import permission_denied
from migrator.zk.multiread import (
    OP_GET_CHILDREN,
    OP_GET_DATA,
    ChildList,
    MultiReadRequest,
    RawReply,
    encode_ops,
    mark_unsupported,
    parse_multi_read,
    server_path,
    supports_multi_read,
    wait_for_session,
)
from migrator.zk.tree import ZkTree, ZNode

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

JUTE_MAXBUFFER = 1_048_575  # ZooKeeper's default for a packet, in both directions (0xfffff)
DEFAULT_MAX_BATCH_BYTES = 512 * 1024  # expected reply (and request) bytes per multiRead
DEFAULT_MAX_OPS = 1000
DEFAULT_IN_FLIGHT = 4
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
    round_zxids: list[tuple[int, int]] = field(default_factory=list)  # (lowest, highest) reply zxid per round
    largest_reply: int = 0  # bytes of the largest multiRead reply frame (after the length prefix)
    largest_request: int = (
        0  # bytes of the largest multiRead request frame; the server's jute.maxbuffer applies
    )


def _znode_factory() -> Callable[..., ZNode]:
    """ZNode's frozen-dataclass __init__ costs ~2 µs; filling its slots directly costs a third of that."""
    expected = (
        "path",
        "data",
        "version",
        "czxid",
        "mzxid",
        "ephemeral_owner",
        "num_children",
        "data_length",
        "pzxid",
    )
    if tuple(f.name for f in fields(ZNode)) != expected:

        def make_slow(*values: Any) -> ZNode:
            return ZNode(**dict(zip(expected, values, strict=True)))

        return make_slow
    new = object.__new__
    s0, s1, s2, s3, s4, s5, s6, s7, s8 = (ZNode.__dict__[name].__set__ for name in expected)

    def make(
        path: str,
        data: bytes | None,
        version: int,
        czxid: int,
        mzxid: int,
        ephemeral_owner: int,
        num_children: int,
        data_length: int,
        pzxid: int,
    ) -> ZNode:
        node = new(ZNode)
        s0(node, path)
        s1(node, data)
        s2(node, version)
        s3(node, czxid)
        s4(node, mzxid)
        s5(node, ephemeral_owner)
        s6(node, num_children)
        s7(node, data_length)
        s8(node, pzxid)
        return node

    return make


_make_znode = _znode_factory()


def _kafka_roots() -> Sequence[str]:
    from migrator.zk.paths import KAFKA_ROOTS

    return KAFKA_ROOTS


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


# An op is (path, kind, depth, hint, parent): hint is the expected data length (-1 unknown) of a
# getData and the child count of a getChildren; parent keys the size statistics of a getData.
Op = tuple[str, int, int, int, "str | None"]


class _MultiReadExecutor:
    """One multiRead per batch; replies come back whole, with their zxid, parsed off kazoo's thread."""

    name = "multiread"
    encodes = True

    def __init__(self, client: KazooClient, timeout: float) -> None:
        self.client = client
        self.timeout = timeout
        self.largest_reply = 0
        self.largest_request = 0

    def submit(self, batch: list[Op], payload: bytes) -> Any:
        if len(payload) + 8 > self.largest_request:
            self.largest_request = len(payload) + 8  # xid and type precede the body
        result = self.client.handler.async_result()
        self.client._call(MultiReadRequest(payload, len(batch)), result)
        return result

    def collect(self, handle: Any) -> tuple[int | None, list[Any]]:
        raw: RawReply = handle.get(timeout=self.timeout)
        if len(raw.buffer) > self.largest_reply:
            self.largest_reply = len(raw.buffer)
        try:
            return raw.zxid, parse_multi_read(raw.buffer, raw.offset)
        except ValueError as e:
            raise UnreachableError(f"ZooKeeper sent a reply zk2kraft cannot parse: {e}") from None


class _AsyncExecutor:
    """The fallback: one kazoo request per znode, a chunk issued before any reply is gathered."""

    name = "async"
    encodes = False
    largest_reply = largest_request = 0

    def __init__(self, client: KazooClient, timeout: float) -> None:
        self.client = client
        self.timeout = timeout

    def submit(self, batch: list[Op], payload: bytes) -> Any:
        get_async = self.client.get_async
        children_async = self.client.get_children_async
        return [(get_async if op[1] == DATA else children_async)(op[0]) for op in batch]

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
    replies: list[tuple[int | None, list[Op]]]
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
    """Running data and name sizes, to predict the reply of reads whose sizes ZooKeeper has not told.

    A znode's length only arrives with its data, so a first read is sized from its siblings (same
    parent) or else from znodes at the same depth, with 4x headroom over their mean; ZooKeeper lists
    children in hash order, so big and small siblings mix rather than cluster. Nothing known yet means
    "assume it fills a batch": the first reads at a new depth go alone until sizes are known. A reply
    over the budget costs memory, not correctness: ZooKeeper and kazoo accept replies of any size (a 6 MB
    multiRead reply was verified); only a *request* over the server's jute.maxbuffer drops the
    connection, and request sizes are exact.
    """

    __slots__ = ("depth_cnt", "depth_sum", "name_cnt", "name_sum", "parent")

    def __init__(self) -> None:
        self.depth_sum: list[int] = [0] * 64
        self.depth_cnt: list[int] = [0] * 64
        self.name_sum: list[int] = [0] * 64
        self.name_cnt: list[int] = [0] * 64
        self.parent: dict[str | None, list[int]] = {}

    def grow(self, depth: int) -> None:
        while depth >= len(self.depth_sum):
            for stat in (self.depth_sum, self.depth_cnt, self.name_sum, self.name_cnt):
                stat.extend([0] * 64)


class BulkReader:
    """Reads subtrees of one ZooKeeper session; `stats` describes the last `read()`."""

    def __init__(
        self,
        client: KazooClient,
        roots: Sequence[str] | None = None,
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
        self.roots = _normalise_roots(_kafka_roots() if roots is None else roots)
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
                for op in batch:
                    (data if op[1] == DATA else lists).add(op[0])
        return _Reuse(data, lists, rnd.nodes, rnd.children, rnd.reply_bytes)

    def _round(self, executor: _MultiReadExecutor | _AsyncExecutor, reuse: _Reuse | None) -> _Round:
        """One breadth-first walk of every root."""
        nodes: dict[str, ZNode] = {}
        children: dict[str, list[str]] = {}
        reply_bytes: dict[str, int] = {}
        replies: list[tuple[int | None, list[Op]]] = []
        vanished: list[str] = []
        queue: deque[Op] = deque()
        hits: list[Op] = []
        make = _make_znode
        sizes = self._sizes
        depth_sum, depth_cnt, name_sum, name_cnt = (
            sizes.depth_sum,
            sizes.depth_cnt,
            sizes.name_sum,
            sizes.name_cnt,
        )
        parent_sizes = sizes.parent
        max_zxid = 0

        if reuse is None:
            push = queue.append
        else:
            reuse_data, reuse_lists, old_nodes = reuse.data, reuse.lists, reuse.nodes

            def push(op: Op) -> None:
                path, kind = op[0], op[1]
                if path in (reuse_data if kind == DATA else reuse_lists):
                    hits.append(op)
                elif kind == DATA and op[3] < 0 and (old := old_nodes.get(path)) is not None:
                    queue.append((path, DATA, op[2], old.data_length, op[4]))
                else:
                    queue.append(op)

        for root in self.roots:
            depth = _depth(root)
            sizes.grow(depth + 2)
            push((root, DATA, depth, -1, None))

        def fail(path: str, code: int) -> NoReturn:
            if code == NO_AUTH:
                raise permission_denied(server_path(self.client.chroot, path))
            name = EXCEPTIONS[code].__name__ if code in EXCEPTIONS else str(code)
            raise UnreachableError(f"ZooKeeper at {self._hosts()} answered {name} reading {path}")

        def apply(batch: list[Op], results: list[Any]) -> None:
            nonlocal max_zxid
            if len(results) != len(batch):
                raise UnreachableError(
                    f"ZooKeeper answered {len(results)} results to a multiRead of {len(batch)} reads"
                )
            for op, res in zip(batch, results, strict=True):
                path = op[0]
                if res.__class__ is int:
                    if res == NO_NODE:  # deleted after its parent was listed (or after it was read)
                        vanished.append(path)
                        continue
                    fail(path, res)
                if op[1] == DATA:
                    data, st = res
                    # Stat: czxid mzxid ctime mtime version cversion aversion ephemeralOwner dataLength numChildren pzxid
                    nodes[path] = make(path, data, st[4], st[0], st[1], st[7], st[9], st[8], st[10])
                    if st[1] > max_zxid:
                        max_zxid = st[1]
                    if st[10] > max_zxid:
                        max_zxid = st[10]
                    depth = op[2]
                    depth_sum[depth] += st[8]
                    depth_cnt[depth] += 1
                    if op[4] is not None:
                        seen = parent_sizes.get(op[4])
                        if seen is None:
                            parent_sizes[op[4]] = [st[8], 1]
                        else:
                            seen[0] += st[8]
                            seen[1] += 1
                    if st[9]:
                        push((path, LIST, depth, st[9], None))
                else:
                    names, nbytes = res
                    children[path] = names
                    reply_bytes[path] = _CHILDREN2_FIXED + 4 * len(names) + nbytes
                    depth = op[2] + 1
                    sizes.grow(depth + 2)
                    name_sum[depth] += nbytes
                    name_cnt[depth] += len(names)
                    prefix = "/" if path == "/" else path + "/"
                    key = path if len(names) > 1 else None  # an only child is sized by its depth
                    for name in names:
                        push((prefix + name, DATA, depth, -1, key))

        def apply_reused(ops: list[Op]) -> None:
            nonlocal max_zxid
            assert reuse is not None
            for path, kind, depth, _, _ in ops:
                if kind == DATA:
                    node = reuse.nodes.get(path)
                    if node is None:
                        vanished.append(path)
                        continue
                    nodes[path] = node
                    max_zxid = max(max_zxid, node.mzxid, node.pzxid)
                    if node.num_children:
                        push((path, LIST, depth, node.num_children, None))
                else:
                    names = reuse.children.get(path)
                    if names is None:
                        vanished.append(path)
                        continue
                    children[path] = names
                    reply_bytes[path] = reuse.reply_bytes[path]
                    sizes.grow(depth + 3)
                    prefix = "/" if path == "/" else path + "/"
                    key = path if len(names) > 1 else None
                    for name in names:
                        push((prefix + name, DATA, depth + 1, -1, key))

        in_flight: deque[tuple[Any, list[Op]]] = deque()
        window = self.in_flight if executor.encodes else 2
        max_ops = self.max_ops if executor.encodes else ASYNC_CHUNK
        min_fill = max(1, max_ops // 2)
        requests = ops = 0
        zmin: int | None = None
        zmax: int | None = None
        progress = self.progress
        while True:
            while hits:
                batch, hits = hits, []
                apply_reused(batch)
            while queue and len(in_flight) < window:
                if in_flight and len(queue) < min_fill:
                    break  # a reply on its way will add work: send fuller batches
                batch, payload = self._next_batch(queue, max_ops, executor.encodes)
                in_flight.append((executor.submit(batch, payload), batch))
                requests += 1
                ops += len(batch)
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
            apply(batch, results)
            if progress is not None:
                progress(len(nodes))

        missing_roots = set(self.roots)
        lost = sum(1 for path in vanished if path not in missing_roots)
        if vanished:
            self._drop_vanished(vanished, nodes, children)
        return _Round(nodes, children, reply_bytes, replies, zmin, zmax, max_zxid, requests, ops, lost)

    def _next_batch(self, queue: deque[Op], max_ops: int, encode: bool) -> tuple[list[Op], bytes]:
        """Take ops off the queue while the expected reply and the request stay within the budget."""
        batch: list[Op] = []
        if not encode:
            for _ in range(min(max_ops, len(queue))):
                batch.append(queue.popleft())
            return batch, b""
        budget = self.max_batch_bytes
        chroot = self.client.chroot or ""
        sizes = self._sizes
        depth_sum, depth_cnt, name_sum, name_cnt = (
            sizes.depth_sum,
            sizes.depth_cnt,
            sizes.name_sum,
            sizes.name_cnt,
        )
        parent_sizes = sizes.parent
        parts: list[tuple[int, str]] = []
        reply = _REPLY_FIXED
        request = _REQUEST_FIXED
        while queue and len(batch) < max_ops:
            op = queue[0]
            path, kind, depth, hint, parent = op
            if kind == DATA:
                if hint >= 0:
                    expect = _DATA_REPLY_FIXED + hint
                elif (seen := parent_sizes.get(parent)) is not None:
                    expect = _DATA_REPLY_FIXED + 4 * seen[0] // seen[1]
                elif depth_cnt[depth]:
                    expect = _DATA_REPLY_FIXED + 4 * depth_sum[depth] // depth_cnt[depth]
                else:
                    expect = budget  # nothing known: it goes alone
            else:
                d = depth + 1
                mean_name = 2 * name_sum[d] // name_cnt[d] if name_cnt[d] else _UNKNOWN_NAME_GUESS
                expect = 13 + hint * (4 + mean_name)
            size = 14 + len(chroot) + 4 * len(path)  # UTF-8 needs at most 4 bytes per code point
            if batch and (reply + expect > budget or request + size > budget):
                break
            queue.popleft()
            batch.append(op)
            parts.append((kind, path))
            reply += expect
            request += size
        return batch, encode_ops(parts, chroot)

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
    roots: Sequence[str] | None = None,
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


def read_cluster(client: KazooClient, strict: bool = True, **kwargs: Any) -> Any:
    """Kafka's metadata as the model sees it: `read_tree` of Kafka's roots, then the layout decode."""
    from migrator.zk.layout import image_from_tree

    return image_from_tree(read_tree(client, **kwargs), strict=strict)
