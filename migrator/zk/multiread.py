"""ZooKeeper's multiRead (opcode 22) and getAllChildrenNumber (opcode 104) for kazoo 2.11.0.

kazoo has neither, and one request per znode caps a Python reader at about 11k znodes/s. Both
requests go through kazoo's request layer: an object with `type`, `serialize()` and
`deserialize(buffer, offset)` handed to the private `client._call`, which is why pyproject pins kazoo
exactly. Replies are parsed here with `struct.unpack_from` over the whole frame instead of kazoo's
per-field helpers, because parsing is the client's bottleneck once requests are batched.

Wire facts (apache/zookeeper `MultiOperationRecord`, `MultiResponse`, `FinalRequestProcessor`):

- request: per op a `MultiHeader(type int, done bool, err int)` then the op's own request record
  (`GetDataRequest` / `GetChildrenRequest`: path ustring, watch bool), ended by `MultiHeader(-1, true,
  -1)`. Only getData (4) and getChildren (8) may appear; getChildren2 is refused by the server.
- reply: per op a `MultiHeader` then `GetDataResponse` (buffer data, Stat), `GetChildrenResponse`
  (vector<ustring>) or, for type -1, `ErrorResponse(int err)`; ended by a done header. A failing op
  (NoNode, NoAuth) is a per-op error, never an error of the whole request.
- the reply header's zxid is the server's last applied zxid when it served the request, and a server
  applies no write while it serves a read, so every op of one reply sees the state at that zxid.
- a server older than 3.6 answers an unknown opcode with UNIMPLEMENTED (-6) and then closes the
  connection (`UnimplementedRequestProcessor`); the session survives and kazoo reconnects. Both
  opcodes arrived in 3.6.0, so one per-client detection (`supports_multi_read`: the `srvr` version,
  else an empty multiRead) decides for both, and each caller has a 3.5 path: the reader's pipelined
  walk, `pipelined_read`, `get_all_children_number`'s counting walk. Checked against real 3.5.10 to
  3.9.3 servers (tests/test_zk_versions.py, the zk_matrix tests).
"""

from __future__ import annotations

import re
import struct
import time
import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple

from kazoo.client import KazooClient
from kazoo.exceptions import (
    EXCEPTIONS,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NoNodeError,
    UnimplementedError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat

from migrator import stop

__all__ = [
    "MIN_MULTI_READ_VERSION",
    "OP_GET_ALL_CHILDREN_NUMBER",
    "INT",
    "OP_HEAD",
    "STAT",
    "OP_GET_CHILDREN",
    "OP_GET_DATA",
    "OP_MULTI_READ",
    "ChildList",
    "GetAllChildrenNumberRequest",
    "MultiReadReply",
    "MultiReadRequest",
    "RawReply",
    "encode_op",
    "encode_ops",
    "join_ops",
    "mark_unsupported",
    "get_all_children_number",
    "multi_read",
    "parse_multi_read",
    "parse_srvr_version",
    "pipelined_read",
    "server_path",
    "supports_multi_read",
    "wait_for_session",
]

OP_GET_DATA = 4
OP_GET_CHILDREN = 8
OP_MULTI_READ = 22
OP_GET_ALL_CHILDREN_NUMBER = 104
OP_ERROR = -1
MIN_MULTI_READ_VERSION = (3, 6, 0)

INT = struct.Struct("!i")
_LONG = struct.Struct("!q")
_MULTI_HEADER = struct.Struct("!iBi")
STAT = struct.Struct("!qqqqiiiqiiq")
OP_HEAD = struct.Struct("!iBii")  # MultiHeader, then the op's first int
_REPLY_HEADER_SIZE = 16  # xid int, zxid long, err int
_READ_OPS = frozenset((OP_GET_DATA, OP_GET_CHILDREN))  # the only ops a multiRead may carry
_DONE = _MULTI_HEADER.pack(-1, 1, -1)


class RawReply(NamedTuple):
    """One reply frame as kazoo read it: parsed later, off kazoo's connection thread."""

    zxid: int  # the server's last applied zxid when it served the request
    buffer: bytes
    offset: int  # start of the body, just after the reply header


class ChildList(NamedTuple):
    names: list[str]
    name_bytes: int  # sum of the names' UTF-8 lengths, as they travelled on the wire


def server_path(chroot: str | None, path: str) -> str:
    """The path the server sees: kazoo prefixes the chroot for its own requests, `_call` does not."""
    if not chroot:
        return path
    return chroot if path == "/" else chroot + path


def encode_op(op: int, raw_path: bytes) -> bytes:
    """One op of a multiRead request, without its trailing watch flag (`join_ops` adds it)."""
    return OP_HEAD.pack(op, 0, -1, len(raw_path)) + raw_path


def join_ops(encoded: list[bytes]) -> bytes:
    """A request body from `encode_op` results: each op ends with watch=false, then the end marker.

    No watches: a bulk read must not leave hundreds of thousands of them behind on the server.
    """
    return b"\x00".join(encoded) + b"\x00" + _DONE if encoded else _DONE


def encode_ops(ops: Sequence[tuple[int, str]], chroot: str | None = None) -> bytes:
    """The body of a multiRead request for `(OP_GET_DATA|OP_GET_CHILDREN, path)` ops."""
    encoded = []
    for op, path in ops:
        if op not in _READ_OPS:
            raise ValueError(
                f"multiRead supports getData ({OP_GET_DATA}) and getChildren ({OP_GET_CHILDREN}), not {op}"
            )
        encoded.append(encode_op(op, server_path(chroot, path).encode()))
    return join_ops(encoded)


class MultiReadRequest:
    """A multiRead as kazoo's connection loop expects a request: `type`, `serialize`, `deserialize`."""

    type = OP_MULTI_READ
    __slots__ = ("count", "payload")

    def __init__(self, payload: bytes, count: int) -> None:
        self.payload = payload
        self.count = count

    def serialize(self) -> bytes:
        return self.payload

    @staticmethod
    def deserialize(buffer: bytes, offset: int) -> RawReply:
        # kazoo 2.11.0 passes the whole frame and the offset just after the 16-byte reply header.
        zxid = _LONG.unpack_from(buffer, offset - _REPLY_HEADER_SIZE + 4)[0]
        return RawReply(zxid, buffer, offset)

    def __repr__(self) -> str:  # kazoo logs requests at DEBUG; never dump a megabyte of paths
        return f"MultiReadRequest({self.count} ops, {len(self.payload)} bytes)"


class GetAllChildrenNumberRequest:
    """getAllChildrenNumber (104, ZooKeeper 3.6+): how many znodes live below a path, recursively."""

    type = OP_GET_ALL_CHILDREN_NUMBER
    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def serialize(self) -> bytes:
        raw = self.path.encode()
        return INT.pack(len(raw)) + raw

    @staticmethod
    def deserialize(buffer: bytes, offset: int) -> int:
        return int(INT.unpack_from(buffer, offset)[0])

    def __repr__(self) -> str:
        return f"GetAllChildrenNumberRequest({self.path!r})"


def parse_multi_read(buffer: bytes, offset: int) -> list[Any]:
    """Per-op results of a multiRead reply body, in request order.

    getData → `(data, stat)` with data `None` for a null znode and stat the 11-int Stat tuple in
    kazoo's `ZnodeStat` field order; getChildren → `ChildList`; a failed op → its int error code.
    """
    out: list[Any] = []
    append = out.append
    unpack_head = OP_HEAD.unpack_from
    unpack_stat = STAT.unpack_from
    unpack_int = INT.unpack_from
    # Every op result starts with its MultiHeader and one int (data length, child count or error
    # code), read in one call; the frame ends with a 9-byte done header.
    end = len(buffer) - 9
    try:
        while offset < end:
            op, done, _, n = unpack_head(buffer, offset)
            offset += 13
            if op == OP_GET_DATA:
                if n < 0:
                    append((None, unpack_stat(buffer, offset)))
                else:
                    append((buffer[offset : offset + n], unpack_stat(buffer, offset + n)))
                    offset += n
                offset += 68
            elif op == OP_GET_CHILDREN:
                names: list[str] = []
                total = 0
                for _ in range(n):
                    size = unpack_int(buffer, offset)[0]
                    offset += 4
                    names.append(buffer[offset : offset + size].decode())
                    offset += size
                    total += size
                append(ChildList(names, total))
            elif op == OP_ERROR:
                append(n)
            else:
                raise ValueError(f"unexpected op type {op} in a multiRead reply")
            if done:
                raise ValueError("a result flagged as the last one")
        if offset != end or not _MULTI_HEADER.unpack_from(buffer, offset)[1]:
            raise ValueError("no end marker")
    except (struct.error, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"malformed multiRead reply at byte {offset}: {e}") from None
    return out


class MultiReadReply(NamedTuple):
    zxid: int
    results: list[Any]  # (bytes|None, ZnodeStat) | list[str] | KazooException instance


def _as_kazoo(result: Any) -> Any:
    if type(result) is int:
        return EXCEPTIONS[result]()
    if isinstance(result, ChildList):
        return result.names
    data, stat = result
    return data, ZnodeStat._make(stat)


def multi_read(
    client: KazooClient, ops: Sequence[tuple[int, str]], timeout: float | None = 30.0
) -> MultiReadReply:
    """Run one multiRead; paths are relative to the client's chroot, results look like kazoo's.

    Failed ops come back as exception instances (as kazoo's transactions do); a refused or lost
    request raises the kazoo exception, and `KazooTimeoutError` after `timeout` seconds.
    """
    request = MultiReadRequest(encode_ops(ops, client.chroot), len(ops))
    result = client.handler.async_result()
    client._call(request, result)
    raw: RawReply = result.get(timeout=timeout)
    return MultiReadReply(raw.zxid, [_as_kazoo(r) for r in parse_multi_read(raw.buffer, raw.offset)])


def pipelined_read(
    client: KazooClient, ops: Sequence[tuple[int, str]], timeout: float = 30.0
) -> MultiReadReply | None:
    """The reads of `multi_read` for a server without multiRead (ZooKeeper 3.5): kazoo's single
    requests, all sent before any reply is awaited, after a sync. Results look like `multi_read`'s.

    A 3.5 server has no request that reads several paths at one zxid, but each reply header carries
    the zxid the server had applied when it served the request, replies come in request order, and
    kazoo keeps the newest in `last_zxid`. Unchanged from the sync's reply to the last read's, no
    write landed in between and every read saw the tree at that zxid: the reply is what a multiRead
    would have answered. Otherwise None: no one zxid covers the results.
    """
    client.sync_async("/").get(timeout=timeout)
    start = int(client.last_zxid)
    pending = [
        client.get_async(path) if op == OP_GET_DATA else client.get_children_async(path) for op, path in ops
    ]
    results: list[Any] = []
    for result in pending:
        try:
            results.append(result.get(timeout=timeout))
        except (NoNodeError, NoAuthError) as e:
            results.append(e)
    if int(client.last_zxid) != start:
        return None
    return MultiReadReply(start, results)


def get_all_children_number(client: KazooClient, path: str, timeout: float = 30.0) -> int:
    """Number of znodes below `path` (all depths, `path` itself excluded).

    ZooKeeper 3.6+ counts them in one request; getAllChildrenNumber came in the same release as
    multiRead (3.6.0), so the same per-client detection decides. A 3.5 server would answer the opcode
    with UNIMPLEMENTED and drop the connection: there a breadth-first walk of pipelined getChildren
    counts them instead (not at one zxid, as the server's own count is not either).
    """
    if not supports_multi_read(client, timeout):
        return _count_below(client, path, timeout)
    result = client.handler.async_result()
    client._call(GetAllChildrenNumberRequest(server_path(client.chroot, path)), result)
    return int(result.get(timeout=timeout))


def _count_below(client: KazooClient, path: str, timeout: float) -> int:
    total = 0
    level = [path]
    while level:
        pending = [(parent, client.get_children_async(parent)) for parent in level]
        level = []
        for parent, result in pending:
            try:
                names = result.get(timeout=timeout)
            except NoNodeError:
                if parent == path:
                    raise
                continue  # deleted while the walk ran
            total += len(names)
            prefix = "" if parent == "/" else parent
            level.extend(f"{prefix}/{name}" for name in names)
    return total


_SRVR_VERSION = re.compile(r"Zookeeper version:\s*(\d+)\.(\d+)\.(\d+)")


def parse_srvr_version(text: str) -> tuple[int, int, int] | None:
    """The server version from a `srvr` reply; None when `srvr` is not allowed or the reply is odd."""
    m = _SRVR_VERSION.search(text)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


_support: weakref.WeakKeyDictionary[KazooClient, bool] = weakref.WeakKeyDictionary()


def supports_multi_read(client: KazooClient, timeout: float = 10.0, *, use_srvr: bool = True) -> bool:
    """Whether the server this client talks to serves multiRead; cached per client.

    First `srvr` on a separate socket to the connected server, which cannot disturb the session
    (ZooKeeper 3.5.3+ serves `srvr` whatever its four-letter-word whitelist says, because zkServer.sh
    needs it). When that fails (a proxy, a port that only speaks TLS), an empty multiRead in the
    session: 3.6+ answers with an empty result; an older server answers UNIMPLEMENTED and drops the
    connection (not the session), after which this waits for kazoo to reconnect.
    """
    cached = _support.get(client)
    if cached is not None:
        return cached
    version = None
    # kazoo 2.11's command() passes the port as the TLS server name (AttributeError in ssl), so a
    # TLS session goes straight to the in-session probe.
    if use_srvr and not client.use_ssl:
        try:
            version = parse_srvr_version(client.command(b"srvr"))
        except (OSError, KazooException):
            version = None
    if version is not None:
        supported = version >= MIN_MULTI_READ_VERSION
    else:
        supported = _probe_in_session(client, timeout)
    _support[client] = supported
    return supported


def mark_unsupported(client: KazooClient) -> None:
    """Remember that this client's server refused multiRead (e.g. after a reconnect to an old member)."""
    _support[client] = False


def _probe_in_session(client: KazooClient, timeout: float) -> bool:
    result = client.handler.async_result()
    client._call(MultiReadRequest(_DONE, 0), result)
    try:
        result.get(timeout=timeout)
    except UnimplementedError:
        wait_for_session(client, timeout)
        return False
    return True


def wait_for_session(client: KazooClient, timeout: float) -> None:
    """Block until a sync goes through: after an old server dropped the connection kazoo reconnects."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.sync_async("/").get(timeout=max(0.1, deadline - time.monotonic()))
            return
        except (ConnectionLoss, KazooTimeoutError):
            if time.monotonic() >= deadline:
                raise
            stop.wait(0.05, "waiting for the ZooKeeper session")
