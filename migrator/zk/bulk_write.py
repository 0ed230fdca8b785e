"""Create many znodes fast: size-bounded multi transactions, several pipelined on one session.

One create per round trip manages a few thousand znodes a second through kazoo; a 200k-partition
cluster has over 400k znodes. Packing creates into multis of up to ~900 KB and keeping a few of them
in flight lets the server apply one while the client serialises the next. ZooKeeper applies the
requests of one session in order, so a multi may create children of nodes created by an earlier multi
that is still in flight.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionLoss,
    InvalidACLError,
    KazooException,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.serialization import Create
from kazoo.security import ACL, OPEN_ACL_UNSAFE

from migrator.errors import BadInputError, PermissionDeniedError, UnreachableError, ZkKraftError
from migrator.zk.connection import is_sensitive, sensitive_acl

__all__ = [
    "DEFAULT_IN_FLIGHT",
    "DEFAULT_MAX_MULTI_BYTES",
    "JUTE_MAXBUFFER",
    "ZnodeExistsError",
    "acl_request_bytes",
    "create_all",
    "create_request_bytes",
    "multi_request_bytes",
]

log = logging.getLogger(__name__)

# ZooKeeper's default jute.maxbuffer (0xfffff): the server drops the connection when a request
# packet (everything after the 4-byte length prefix) is longer. Verified exact against ZK 3.8.0.
JUTE_MAXBUFFER = 1_048_575
DEFAULT_MAX_MULTI_BYTES = 900_000
DEFAULT_IN_FLIGHT = 4

_REQUEST_HEADER = 8  # xid + op type
_MULTI_HEADER = 9  # per op: type int, done bool, err int
_MULTI_END = 9  # the closing header {-1, true, -1}
_RESULT_TIMEOUT = 120.0
_MAX_EXISTS_RETRIES = 5


class ZnodeExistsError(BadInputError):
    """A znode to create is already there and the caller did not ask to skip existing ones."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


def acl_request_bytes(acl: Sequence[ACL]) -> int:
    """Bytes of an ACL vector in a create request."""
    total = 4  # vector length
    for entry in acl:
        total += 4 + 4 + len(entry.id.scheme.encode()) + 4 + len(entry.id.id.encode())
    return total


def create_request_bytes(full_path: str, data: bytes, acl_bytes: int) -> int:
    """Bytes one create adds to a multi request: op header, path, data, ACL vector, flags."""
    return _MULTI_HEADER + 4 + len(full_path.encode()) + 4 + len(data) + acl_bytes + 4


def multi_request_bytes(op_bytes: int) -> int:
    """Request packet length (as the server checks it against jute.maxbuffer) of a multi."""
    return _REQUEST_HEADER + op_bytes + _MULTI_END


def _parent(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


def _validate_path(path: str) -> None:
    if (
        not isinstance(path, str)
        or not path.startswith("/")
        or path == "/"
        or path.endswith("/")
        or "//" in path
        or "\x00" in path
        or "/./" in path
        or "/../" in path
        or path.endswith(("/.", "/.."))
    ):
        raise BadInputError(f"bad znode path {path!r}: expected /absolute/path without a trailing slash")


def _parents_first(znodes: Mapping[str, bytes]) -> list[str]:
    """The given order, except that a node listed before its parent waits until the parent is placed."""
    placed: set[str] = set()
    waiting: dict[str, list[str]] = {}
    order: list[str] = []
    for path in znodes:
        parent = _parent(path)
        if parent in znodes and parent not in placed:
            waiting.setdefault(parent, []).append(path)
            continue
        stack = [path]
        while stack:
            p = stack.pop()
            placed.add(p)
            order.append(p)
            stack.extend(reversed(waiting.pop(p, [])))
    if waiting:  # only a cycle could leave nodes waiting, and paths cannot form one
        raise BadInputError(f"cannot order znodes under {next(iter(waiting))}")
    return order


@dataclass(slots=True)
class _Batch:
    paths: list[str]
    retries: int = 0
    result: object = field(default=None)


def _batches(
    order: Iterable[str],
    znodes: Mapping[str, bytes],
    chroot: str,
    acl_bytes: int,
    max_multi_bytes: int,
    jute_maxbuffer: int,
) -> Iterator[_Batch]:
    paths: list[str] = []
    size = 0
    for path in order:
        data = znodes[path]
        if not isinstance(data, bytes):
            raise BadInputError(f"znode {path}: data must be bytes, got {type(data).__name__}")
        op = create_request_bytes(chroot + path, data, acl_bytes)
        alone = multi_request_bytes(op)
        if alone > jute_maxbuffer:
            raise BadInputError(
                f"znode {path}: a create of {len(data):,} data bytes is a {alone:,}-byte request, over "
                f"ZooKeeper's jute.maxbuffer of {jute_maxbuffer:,} bytes"
            )
        if paths and multi_request_bytes(size + op) > max_multi_bytes:
            yield _Batch(paths)
            paths, size = [], 0
        paths.append(path)
        size += op
    if paths:
        yield _Batch(paths)


def _first_failure(results: Sequence[object]) -> tuple[int, Exception] | None:
    """Index and error of the op that failed a multi; kazoo returns errors instead of raising.

    Ops before the failing one come back as RolledBackError, ops after it as RuntimeInconsistency.
    """
    first: tuple[int, Exception] | None = None
    for i, r in enumerate(results):
        if isinstance(r, Exception):
            if not isinstance(r, RolledBackError | RuntimeInconsistency):
                return i, r
            if first is None:
                first = (i, r)
    return first


class _Writer:
    def __init__(
        self,
        client: KazooClient,
        znodes: Mapping[str, bytes],
        ephemeral: bool,
        acl: Sequence[ACL],
        exist_ok: bool,
        in_flight: int,
        progress: Callable[[int], None] | None,
    ) -> None:
        self.client = client
        self.znodes = znodes
        self.ephemeral = ephemeral
        self.acl = list(acl)
        self.exist_ok = exist_ok
        self.in_flight = in_flight
        self.progress = progress
        self.created = 0
        self.skipped = 0
        self.flags = 1 if ephemeral else 0
        self.chroot = client.chroot or ""

    def _submit(self, batch: _Batch) -> object:
        # TransactionRequest.create re-normalises every path (a third of the client's time at 400k
        # znodes); paths are validated once up front, so the ops are appended as kazoo would build them.
        txn = self.client.transaction()
        znodes, acl, flags, chroot = self.znodes, self.acl, self.flags, self.chroot
        txn.operations.extend(Create(chroot + path, znodes[path], acl, flags) for path in batch.paths)
        return txn.commit_async()

    def _wait(self, batch: _Batch, pending: object) -> list[object] | Exception:
        try:
            return list(pending.get(timeout=_RESULT_TIMEOUT))  # type: ignore[attr-defined]
        except KazooTimeoutError:
            return OperationTimeoutError()
        except KazooException as e:
            return e

    def _unreachable(self, batch: _Batch, err: Exception) -> ZkKraftError:
        return UnreachableError(
            f"lost ZooKeeper while creating {batch.paths[0]} and {len(batch.paths) - 1} more znodes "
            f"({type(err).__name__}); {self.created:,} znodes were created before, rerun skipping existing "
            "znodes to resume"
        )

    def _translate(self, path: str, err: Exception) -> ZkKraftError:
        if isinstance(err, NodeExistsError):
            return ZnodeExistsError(
                f"znode {path} already exists; {self.created:,} znodes were created before it",
                path,
            )
        if isinstance(err, NoNodeError):
            return BadInputError(f"cannot create {path}: its parent {_parent(path)} does not exist")
        if isinstance(err, NoAuthError):
            return PermissionDeniedError(
                f"ZooKeeper denied creating {path} (no CREATE permission on {_parent(path)}): "
                "check --zk-auth credentials and the parent's ACL"
            )
        if isinstance(err, NoChildrenForEphemeralsError):
            return BadInputError(f"cannot create {path}: its parent {_parent(path)} is ephemeral")
        if isinstance(err, InvalidACLError):
            return BadInputError(f"cannot create {path}: ZooKeeper rejected its ACL as invalid")
        if isinstance(err, ConnectionLoss | SessionExpiredError | OperationTimeoutError):
            return UnreachableError(f"lost ZooKeeper while creating {path} ({type(err).__name__})")
        return BadInputError(f"cannot create {path}: ZooKeeper answered {type(err).__name__} {err}".rstrip())

    def _prune_existing(self, batch: _Batch, start: int) -> _Batch:
        """Drop the batch's nodes that exist now; those before `start` were reported as creatable."""
        tail = batch.paths[start:]
        pendings = [self.client.exists_async(p) for p in tail]
        keep = batch.paths[:start]
        for path, pending in zip(tail, pendings, strict=True):
            try:
                stat = pending.get(timeout=_RESULT_TIMEOUT)
            except (KazooException, KazooTimeoutError) as e:
                raise self._translate(path, e) from None
            if stat is None:
                keep.append(path)
            else:
                self.skipped += 1
        return _Batch(keep, retries=batch.retries + 1)

    def run(self, batches: Iterator[_Batch]) -> int:
        queue: deque[_Batch] = deque()
        window: deque[tuple[_Batch, object]] = deque()

        def next_batch() -> _Batch | None:
            if queue:
                return queue.popleft()
            return next(batches, None)

        while True:
            while len(window) < self.in_flight:
                batch = next_batch()
                if batch is None:
                    break
                if batch.paths:
                    window.append((batch, self._submit(batch)))
            if not window:
                return self.created
            batch, pending = window.popleft()
            outcome = self._wait(batch, pending)
            if isinstance(outcome, Exception):
                if isinstance(outcome, NoAuthError):
                    raise self._translate(batch.paths[0], outcome)
                raise self._unreachable(batch, outcome)
            failure = _first_failure(outcome)
            if failure is None:
                self._count(len(batch.paths))
                continue
            # Later multis in the window may have failed only because this one did (their parents were
            # in it): let them finish, then resend the failed ones in order after this one is resolved.
            retry = [self._resolve(batch, *failure)]
            for later, later_pending in window:
                later_outcome = self._wait(later, later_pending)
                if isinstance(later_outcome, Exception):
                    raise self._unreachable(later, later_outcome)
                if _first_failure(later_outcome) is None:
                    self._count(len(later.paths))
                else:
                    retry.append(later)
            window.clear()
            queue.extendleft(reversed(retry))

    def _resolve(self, batch: _Batch, index: int, err: Exception) -> _Batch:
        path = batch.paths[index]
        if not (self.exist_ok and isinstance(err, NodeExistsError)):
            raise self._translate(path, err)
        if batch.retries >= _MAX_EXISTS_RETRIES:
            raise ZnodeExistsError(
                f"znode {path} keeps appearing and vanishing while it is being created: another "
                "client is writing the same paths",
                path,
            )
        return self._prune_existing(batch, index)

    def _count(self, n: int) -> None:
        self.created += n
        if self.progress is not None:
            self.progress(n)


def _check_external_parents(client: KazooClient, znodes: Mapping[str, bytes], ephemeral: bool) -> None:
    outside: set[str] = set()
    for path in znodes:
        _validate_path(path)
        parent = _parent(path)
        if parent in znodes:
            if ephemeral:
                raise BadInputError(
                    f"cannot create {path}: its parent {parent} would be ephemeral, and ephemeral "
                    "znodes cannot have children"
                )
        elif parent != "/":
            outside.add(parent)
    pendings = {p: client.exists_async(p) for p in sorted(outside)}
    for parent, pending in pendings.items():
        try:
            stat = pending.get(timeout=_RESULT_TIMEOUT)
        except NoAuthError:
            raise PermissionDeniedError(
                f"ZooKeeper denied access to {parent}: check --zk-auth credentials and the znode's ACL"
            ) from None
        except (KazooException, KazooTimeoutError) as e:
            raise UnreachableError(f"lost ZooKeeper while checking {parent} ({type(e).__name__})") from None
        if stat is None:
            child = next(p for p in znodes if _parent(p) == parent)
            raise BadInputError(
                f"cannot create {child}: its parent {parent} does not exist in ZooKeeper and is not "
                "among the znodes to create"
            )


def create_all(
    client: KazooClient,
    znodes: Mapping[str, bytes],
    ephemeral: bool = False,
    acl: Sequence[ACL] | None = None,
    max_multi_bytes: int = DEFAULT_MAX_MULTI_BYTES,
    in_flight: int = DEFAULT_IN_FLIGHT,
    exist_ok: bool = False,
    progress: Callable[[int], None] | None = None,
    jute_maxbuffer: int = JUTE_MAXBUFFER,
) -> int:
    """Create every znode of `znodes` (path → data) and return how many were created.

    Parents are created before children even if a child is listed first; parents that are not in
    `znodes` must already exist. Each multi's request stays under `max_multi_bytes` (a single larger
    znode goes alone, up to `jute_maxbuffer`). With `exist_ok`, znodes that already exist are left
    untouched and not counted; otherwise the first one raises ZnodeExistsError. Multis are not atomic
    together: on an error the znodes of earlier multis stay created.
    """
    if in_flight < 1:
        raise BadInputError(f"in_flight must be at least 1, got {in_flight}")
    if not znodes:
        return 0
    sensitive = sensitive_acl(client) if acl is None else None
    if sensitive is not None and any(is_sensitive(p) for p in znodes):
        # --zk-set-acl: Kafka's sensitive paths get creator-only ACLs. Their parents are never
        # sensitive unless listed too (the check is a prefix), so the open ones go first.
        parts = (
            (
                {p: d for p, d in znodes.items() if not is_sensitive(p)},
                list(client.default_acl or OPEN_ACL_UNSAFE),
            ),
            ({p: d for p, d in znodes.items() if is_sensitive(p)}, sensitive),
        )
        return sum(
            create_all(
                client,
                part,
                ephemeral,
                part_acl,
                max_multi_bytes,
                in_flight,
                exist_ok,
                progress,
                jute_maxbuffer,
            )
            for part, part_acl in parts
        )
    if acl is None:
        acl = client.default_acl or OPEN_ACL_UNSAFE
    if not acl:
        raise BadInputError("an empty ACL list cannot be set on a znode")
    _check_external_parents(client, znodes, ephemeral)
    chroot = client.chroot or ""
    batches = _batches(
        _parents_first(znodes),
        znodes,
        chroot,
        acl_request_bytes(acl),
        min(max_multi_bytes, jute_maxbuffer),
        jute_maxbuffer,
    )
    writer = _Writer(client, znodes, ephemeral, acl, exist_ok, in_flight, progress)
    created = writer.run(batches)
    log.debug("created %d znodes, skipped %d existing", created, writer.skipped)
    return created
