"""Fenced writes to ZooKeeper during dual-write: every multi is checked against the controller claim.

Each multi is ``check(/controller_epoch, claim version)``, the data operations, then
``set(/migration, covered offset, expected version)``. A newer controller bumps `/controller_epoch`
(its version changes), so every multi of an older claim fails as a whole; `/migration` is a
compare-and-set chain, so a multi lands at most once and ZooKeeper's data and the log offset that
`/migration` says it covers always move together (docs/dual-write.md).

Multis are sent as raw requests through kazoo's request layer (as `multiread` does): kazoo's
`Transaction` builds and parses a Python object per operation, which caps a syncer at a few thousand
znodes a second. Several multis are pipelined on the one session; ZooKeeper applies a session's
requests in order, and each multi expects the `/migration` version the one before it leaves.
"""

from __future__ import annotations

import logging
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import (
    EXCEPTIONS,
    AuthFailedError,
    BadVersionError,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import ACL, OPEN_ACL_UNSAFE

from migrator import stop
from migrator.errors import BadInputError, FencedError, PermissionDeniedError, UnreachableError, ZkKraftError
from migrator.model import MigrationZnode
from migrator.zk import codec
from migrator.zk import paths as P
from migrator.zk.bulk_write import JUTE_MAXBUFFER, acl_request_bytes
from migrator.zk.connection import is_sensitive, sensitive_acl
from migrator.zk.retry import DEFAULT_RETRY_TIMEOUT, is_transient, retry_transient, revive

if TYPE_CHECKING:
    from migrator.zk.leadership import Claim

__all__ = [
    "DEFAULT_IN_FLIGHT",
    "DEFAULT_MAX_MULTI_BYTES",
    "DEFAULT_RETRY_TIMEOUT",
    "FencedZkWriter",
    "OpGroup",
    "OversizedWriteError",
    "WriteStats",
    "ZkOp",
    "is_transient",
    "retry_transient",
    "revive",
]

log = logging.getLogger(__name__)

# jute.maxbuffer is 1 MiB - 1; ZooKeeper also re-reads each multi as one transaction-log record on
# restart (with only 1 KiB of slack), so stay well below it.
DEFAULT_MAX_MULTI_BYTES = 1_000_000 - 50_000
DEFAULT_IN_FLIGHT = 8
_RESULT_TIMEOUT = 60.0
_MAX_REBUILDS = 5

OP_CREATE = 1
OP_DELETE = 2
OP_SET = 5
OP_CHECK = 13
OP_MULTI = 14
_CODES = {"create": OP_CREATE, "delete": OP_DELETE, "set": OP_SET, "check": OP_CHECK}
_INT = struct.Struct("!i")
_HEADER = struct.Struct("!iBi")  # MultiHeader: type, done, err
_HEADS = {kind: _HEADER.pack(code, 0, -1) for kind, code in _CODES.items()}
_END = _HEADER.pack(-1, 1, -1)
_REQUEST_HEADER = 8  # xid + op type, counted by the server against jute.maxbuffer
_ERR_OK = 0
_ERR_RUNTIME_INCONSISTENCY = -2
_SEQUENTIAL = 2

T = TypeVar("T")


class OversizedWriteError(BadInputError):
    """A znode write no ZooKeeper request can carry (over jute.maxbuffer even alone in a multi)."""


@dataclass(frozen=True, slots=True)
class ZkOp:
    """One write of a multi. `version` -1 means any version; `sequential` appends ZooKeeper's counter."""

    kind: str  # "create" | "set" | "delete" | "check"
    path: str
    data: bytes = b""
    version: int = -1
    sequential: bool = False

    @classmethod
    def create(cls, path: str, data: bytes = b"", sequential: bool = False) -> ZkOp:
        return cls("create", path, data, -1, sequential)

    @classmethod
    def set(cls, path: str, data: bytes, version: int = -1) -> ZkOp:
        return cls("set", path, data, version)

    @classmethod
    def delete(cls, path: str, version: int = -1) -> ZkOp:
        return cls("delete", path, b"", version)

    @classmethod
    def check(cls, path: str, version: int) -> ZkOp:
        return cls("check", path, b"", version)


@dataclass(slots=True)
class OpGroup:
    """The ops that bring ZooKeeper up to `offset`: /migration may claim `offset` once all of them landed."""

    ops: Sequence[ZkOp]
    offset: int
    epoch: int


@dataclass(slots=True)
class WriteStats:
    multis: int = 0
    ops: int = 0
    bytes: int = 0
    retries: int = 0  # multis re-sent after a lost connection
    rebuilds: int = 0  # multis rebuilt from ZooKeeper's actual state after a NodeExists/NoNode


def _string(raw: bytes) -> bytes:
    return _INT.pack(len(raw)) + raw


def _acl_blob(acl: Sequence[ACL]) -> bytes:
    out = [_INT.pack(len(acl))]
    for entry in acl:
        out.append(_INT.pack(entry.perms))
        out.append(_string(entry.id.scheme.encode()))
        out.append(_string(entry.id.id.encode()))
    return b"".join(out)


class _MultiRequest:
    """A multi (opcode 14) as kazoo's connection loop expects a request; the reply is parsed later."""

    type = OP_MULTI
    __slots__ = ("count", "payload")

    def __init__(self, payload: bytes, count: int) -> None:
        self.payload = payload
        self.count = count

    def serialize(self) -> bytes:
        return self.payload

    @staticmethod
    def deserialize(buffer: bytes, offset: int) -> tuple[bytes, int]:
        return buffer, offset

    def __repr__(self) -> str:  # kazoo logs requests at DEBUG: never dump configs or credentials
        return f"FencedMulti({self.count} ops, {len(self.payload)} bytes)"


def _failure(buffer: bytes, offset: int, count: int) -> tuple[int, int] | None:
    """(index, error code) of the op that failed the multi, or None when it was applied.

    A failed multi answers every op with an error result: 0 for ops that would have succeeded, the
    real code for the failing one, RUNTIMEINCONSISTENCY for the ones after it. An applied multi
    answers with each op's own result type, so the first header tells.
    """
    op_type, _done, _err = _HEADER.unpack_from(buffer, offset)
    if op_type != -1:
        return None
    first: tuple[int, int] | None = None
    for i in range(count):
        op_type, done, _err = _HEADER.unpack_from(buffer, offset)
        if done:
            break
        code = _INT.unpack_from(buffer, offset + 9)[0]
        offset += 13
        if code not in (_ERR_OK, _ERR_RUNTIME_INCONSISTENCY):
            return i, code
        if first is None and code != _ERR_OK:
            first = (i, code)
    return first or (0, _ERR_RUNTIME_INCONSISTENCY)


@dataclass(slots=True)
class _Multi:
    ops: list[ZkOp]
    encoded: list[bytes]
    size: int
    target: tuple[int, int]  # (offset, epoch) /migration claims once this multi landed
    rebuilds: int = 0


@dataclass(slots=True)
class _Sent:
    multi: _Multi
    expected: int  # /migration version this multi expects
    result: Any = field(default=None)


class FencedZkWriter:
    """Writes op groups as fenced multis under one controller claim; see the module docstring."""

    def __init__(
        self,
        client: KazooClient,
        claim: Claim,
        migration: MigrationZnode,
        max_multi_bytes: int = DEFAULT_MAX_MULTI_BYTES,
        in_flight: int = DEFAULT_IN_FLIGHT,
        acl: Sequence[ACL] | None = None,
        retry_timeout: float = DEFAULT_RETRY_TIMEOUT,
        jute_maxbuffer: int = JUTE_MAXBUFFER,
    ) -> None:
        if migration.zk_version < 0:
            raise ValueError(
                "the /migration version is unknown: write it once with write_migration_unconditionally "
                "after the claim (KAFKA-16171)"
            )
        if in_flight < 1:
            raise BadInputError(f"in_flight must be at least 1, got {in_flight}")
        self.client = client
        self.claim = claim
        self.migration = migration
        self.in_flight = in_flight
        self.retry_timeout = retry_timeout
        self.jute_maxbuffer = jute_maxbuffer
        self.max_multi_bytes = min(max_multi_bytes, jute_maxbuffer)
        self.stats = WriteStats()
        self._stale = False
        # Called with the new /migration state after each multi lands (progress, lag waiters).
        self.listeners: list[Callable[[MigrationZnode], None]] = []
        self.chroot = client.chroot or ""
        sensitive = sensitive_acl(client) if acl is None else None
        acl = list(acl if acl is not None else (client.default_acl or OPEN_ACL_UNSAFE))
        self._acl = _acl_blob(acl)
        # --zk-set-acl: SCRAM credentials, broker configs and tokens are creator-only, as Kafka's.
        self._sensitive_acl = _acl_blob(sensitive) if sensitive else None
        if len(self._acl) != acl_request_bytes(acl):
            raise AssertionError("ACL encoding disagrees with bulk_write's size")
        self._check = self._encode(ZkOp.check(P.CONTROLLER_EPOCH, claim.controller_epoch_zk_version))
        self._migration_path = _string((self.chroot + P.MIGRATION).encode())
        # Bytes of a multi before its data ops: request header, the check, the /migration set
        # (its JSON is under 200 bytes), the end marker.
        self._fixed = _REQUEST_HEADER + len(self._check) + 9 + len(self._migration_path) + 4 + 256 + 4 + 9

    # -- encoding -----------------------------------------------------------------------------

    def _encode(self, op: ZkOp) -> bytes:
        path = _string((self.chroot + op.path).encode())
        kind = op.kind
        if kind == "set":
            return b"".join((_HEADS["set"], path, _INT.pack(len(op.data)), op.data, _INT.pack(op.version)))
        if kind == "create":
            flags = _SEQUENTIAL if op.sequential else 0
            acl = self._acl
            if self._sensitive_acl is not None and is_sensitive(op.path):
                acl = self._sensitive_acl
            return b"".join((_HEADS["create"], path, _INT.pack(len(op.data)), op.data, acl, _INT.pack(flags)))
        if kind in ("delete", "check"):
            return _HEADS[kind] + path + _INT.pack(op.version)
        raise ValueError(f"unknown ZooKeeper op kind {kind!r}")

    def _migration_json(self, target: tuple[int, int]) -> bytes:
        return codec.encode_migration(
            MigrationZnode(
                kraft_controller_id=self.claim.kraft_controller_id,
                kraft_controller_epoch=self.claim.kraft_epoch,
                kraft_metadata_offset=target[0],
                kraft_metadata_epoch=target[1],
            )
        )

    def _payload(self, multi: _Multi, expected: int) -> bytes:
        data = self._migration_json(multi.target)
        set_migration = b"".join(
            (_HEADS["set"], self._migration_path, _INT.pack(len(data)), data, _INT.pack(expected))
        )
        return b"".join((self._check, *multi.encoded, set_migration, _END))

    def request_bytes(self, ops: Sequence[ZkOp]) -> int:
        """Size of the multi request carrying `ops` as the server counts it against jute.maxbuffer."""
        multi = _Multi(list(ops), [self._encode(op) for op in ops], 0, (0, 0))
        return _REQUEST_HEADER + len(self._payload(multi, 0))

    def _too_big(self, op: ZkOp) -> OversizedWriteError:
        return OversizedWriteError(
            f"znode {op.path}: a {op.kind} of {len(op.data):,} data bytes does not fit "
            f"in one ZooKeeper request (jute.maxbuffer {self.jute_maxbuffer:,} bytes)"
        )

    def refuse_oversized(self, ops: Iterable[ZkOp], what: str = "") -> None:
        """Raise the BadInputError `_pack` would raise for the first op no multi can carry.

        A group is split across multis as needed, so only a single op alone with the fence and the
        /migration set can be too big; checked before a change is appended, this keeps a record
        ZooKeeper can never take out of the log.
        """
        hard = self.jute_maxbuffer - self._fixed
        for op in ops:
            if len(self._encode(op)) > hard:
                e = self._too_big(op)
                raise OversizedWriteError(f"{e}{what}") from None

    # -- packing ------------------------------------------------------------------------------

    def _pack(self, groups: Iterable[OpGroup]) -> Iterator[_Multi]:
        """Groups into multis: a group that fits goes whole into one multi; a bigger one is split,
        and its earlier multis claim the previous offset (the record is not complete in them)."""
        budget = self.max_multi_bytes - self._fixed
        hard = self.jute_maxbuffer - self._fixed
        last = (self.migration.kraft_metadata_offset, self.migration.kraft_metadata_epoch)
        emitted = last
        ops: list[ZkOp] = []
        encoded: list[bytes] = []
        size = 0
        encode = self._encode
        for group in groups:
            target = (group.offset, group.epoch)
            if target[0] < last[0]:
                raise ValueError(f"covered offset {target[0]} goes back from {last[0]}")
            enc = [encode(op) for op in group.ops]
            gsize = sum(map(len, enc))
            if ops and size + gsize > budget:
                yield _Multi(ops, encoded, size, last)
                emitted = last
                ops, encoded, size = [], [], 0
            if gsize <= budget:
                ops.extend(group.ops)
                encoded.extend(enc)
                size += gsize
            else:
                for op, e in zip(group.ops, enc, strict=True):
                    if len(e) > hard:
                        raise self._too_big(op)
                    if ops and size + len(e) > budget:
                        yield _Multi(ops, encoded, size, last)
                        emitted = last
                        ops, encoded, size = [], [], 0
                    ops.append(op)
                    encoded.append(e)
                    size += len(e)
            last = target
        if ops or last != emitted:
            yield _Multi(ops, encoded, size, last)

    # -- writing ------------------------------------------------------------------------------

    def write(self, ops: Sequence[ZkOp], covered_offset: int, covered_epoch: int) -> MigrationZnode:
        """Write `ops`; /migration then claims `covered_offset`. Returns the new /migration state."""
        return self.write_groups([OpGroup(ops, covered_offset, covered_epoch)])

    def write_groups(self, groups: Iterable[OpGroup]) -> MigrationZnode:
        """Write groups in order, several multis in flight; each multi claims its last complete group."""
        if self._stale:
            self.resync()
        window: deque[_Sent] = deque()
        try:
            return self._write(groups, window)
        except BaseException:
            if window:  # stopped with multis in flight (a bad group, fenced, unreachable)
                self._abandon(window)
            raise

    def resync(self) -> MigrationZnode:
        """Re-learn /migration (offset and version) from ZooKeeper; it must still be this claim's."""
        data, version, epoch_version = self._read_migration()
        if epoch_version != self.claim.controller_epoch_zk_version:
            raise self._fenced_by_controller()
        try:
            m = codec.decode_migration(P.MIGRATION, data, zk_version=version)
        except BadInputError:
            raise self._other_writer(self.migration.zk_version, version, data) from None
        if (m.kraft_controller_id, m.kraft_controller_epoch) != (
            self.claim.kraft_controller_id,
            self.claim.kraft_epoch,
        ):
            raise self._other_writer(self.migration.zk_version, version, data)
        self.migration = m
        self._stale = False
        return m

    def _abandon(self, window: deque[_Sent]) -> None:
        """Account for the multis in flight when a write stops, so the next one expects the right
        /migration version; if that cannot be known now, the next write re-reads it first."""
        try:
            self._settle(list(window), None)
        except (ZkKraftError, KazooException):
            self._stale = True
        window.clear()

    def _write(self, groups: Iterable[OpGroup], window: deque[_Sent]) -> MigrationZnode:
        queue: deque[_Multi] = deque()
        packer = self._pack(groups)
        next_version = self.migration.zk_version
        while True:
            while len(window) < self.in_flight:
                multi = queue.popleft() if queue else next(packer, None)
                if multi is None:
                    break
                window.append(self._send(multi, next_version))
                next_version += 1
            if not window:
                return self.migration
            sent = window.popleft()
            outcome = self._wait(sent)
            if isinstance(outcome, BaseException):
                self._unexpected(outcome)
                # The multi may or may not have landed; so may the ones behind it.
                resend = self._settle([sent, *window], outcome)
            else:
                failure = _failure(*outcome, len(sent.multi.ops) + 2)
                if failure is None:
                    self._landed(sent)
                    continue
                # The ones behind it expect a /migration version that can no longer come: they fail.
                later = list(window)
                outcomes = [self._wait(s) for s in later]
                if all(not isinstance(o, BaseException) and _failure(*o, 2) is not None for o in outcomes):
                    resend = [*self._failed(sent, *failure), *(s.multi for s in later)]
                else:  # a lost connection among them: let /migration's version tell what landed
                    resend = self._settle([sent, *later], None)
            window.clear()
            queue.extendleft(reversed(resend))
            next_version = self.migration.zk_version

    def _send(self, multi: _Multi, expected: int) -> _Sent:
        payload = self._payload(multi, expected)
        result = self.client.handler.async_result()
        self.client._call(_MultiRequest(payload, len(multi.ops) + 2), result)
        self.stats.bytes += len(payload) + _REQUEST_HEADER
        return _Sent(multi, expected, result)

    def _wait(self, sent: _Sent) -> tuple[bytes, int] | BaseException:
        # In slices, so a stop request ends a wait on a half-open connection (the multi landed or
        # not: the next writer learns which from /migration's version, as after a crash).
        deadline = time.monotonic() + _RESULT_TIMEOUT
        while True:
            try:
                return sent.result.get(timeout=min(0.5, max(0.0, deadline - time.monotonic())))  # type: ignore[no-any-return]
            except KazooTimeoutError as e:
                if time.monotonic() >= deadline:
                    return e
                stop.check("waiting for ZooKeeper to answer a fenced write")
            except KazooException as e:
                return e

    def _unexpected(self, error: BaseException) -> None:
        """Raise for a whole-request error that retrying cannot fix."""
        if isinstance(error, NoAuthError | AuthFailedError):
            raise PermissionDeniedError(
                f"ZooKeeper refused the session's credentials while writing {P.MIGRATION}: check --zk-auth"
            )
        if not is_transient(error):
            raise UnreachableError(
                f"ZooKeeper failed a fenced write: {type(error).__name__} {error}".rstrip()
            ) from error

    def _landed(self, sent: _Sent) -> None:
        multi = sent.multi
        self.migration = self._state(multi.target, sent.expected + 1)
        self.stats.multis += 1
        self.stats.ops += len(multi.ops)
        for listener in self.listeners:
            listener(self.migration)

    def _state(self, target: tuple[int, int], version: int) -> MigrationZnode:
        return MigrationZnode(
            kraft_controller_id=self.claim.kraft_controller_id,
            kraft_controller_epoch=self.claim.kraft_epoch,
            kraft_metadata_offset=target[0],
            kraft_metadata_epoch=target[1],
            zk_version=version,
        )

    # -- failures -----------------------------------------------------------------------------

    def _fenced_by_controller(self) -> FencedError:
        return FencedError(
            f"fenced by a newer controller: {P.CONTROLLER_EPOCH} is no longer at version "
            f"{self.claim.controller_epoch_zk_version} (claimed by KRaft controller "
            f"{self.claim.kraft_controller_id} in epoch {self.claim.kraft_epoch}); nothing of the "
            f"rejected write landed, /migration covers offset {self.migration.kraft_metadata_offset}"
        )

    def _denied(self, multi: _Multi, index: int | None) -> PermissionDeniedError:
        if index is None or index == 0:
            path = P.CONTROLLER_EPOCH
        elif index > len(multi.ops):
            path = P.MIGRATION
        else:
            path = multi.ops[index - 1].path
        return PermissionDeniedError(
            f"ZooKeeper denied writing {path}: check --zk-auth credentials and the znode's ACL"
        )

    def _read_migration(self) -> tuple[bytes | None, int, int]:
        """(/migration data, its version, /controller_epoch version), read after a sync so that
        requests this session sent before are applied first."""

        def read() -> tuple[bytes | None, int, int]:
            self.client.sync(P.MIGRATION)
            try:
                data, stat = self.client.get(P.MIGRATION)
            except NoNodeError:
                raise FencedError(
                    f"{P.MIGRATION} was deleted while zk2kraft was writing (a rollback by another "
                    "process?); stopping"
                ) from None
            epoch_stat = self.client.exists(P.CONTROLLER_EPOCH)
            return data, stat.version, -1 if epoch_stat is None else epoch_stat.version

        try:
            return retry_transient(read, "re-reading /migration", self.retry_timeout, self.client)
        except NoAuthError:
            raise PermissionDeniedError(
                f"ZooKeeper denied reading {P.MIGRATION}: check --zk-auth credentials and the znode's ACL"
            ) from None

    def _settle(self, sents: list[_Sent], cause: BaseException | None) -> list[_Multi]:
        """Find out which of `sents` (consecutive, in order) landed; return the others to resend.

        They land as a prefix, because each expects the /migration version the one before leaves.
        """
        for other in sents:
            if other.result is not None and not other.result.ready():
                self._wait(other)
        base = sents[0].expected
        data, version, epoch_version = self._read_migration()
        if epoch_version != self.claim.controller_epoch_zk_version:
            raise self._fenced_by_controller()
        landed = version - base
        if (
            landed < 0
            or landed > len(sents)
            or (landed > 0 and data != self._migration_json(sents[landed - 1].multi.target))
        ):
            raise self._other_writer(base, version, data)
        for sent in sents[:landed]:
            self._landed(sent)
        if cause is not None:
            self.stats.retries += len(sents) - landed
            log.info(
                "after %s: %d of %d multis in flight had landed", type(cause).__name__, landed, len(sents)
            )
        return [s.multi for s in sents[landed:]]

    def _other_writer(self, expected: int, version: int, data: bytes | None) -> FencedError:
        found = "unreadable"
        try:
            m = codec.decode_migration(P.MIGRATION, data)
            found = (
                f"offset {m.kraft_metadata_offset} by controller {m.kraft_controller_id} "
                f"epoch {m.kraft_controller_epoch}"
            )
        except BadInputError:
            pass
        return FencedError(
            f"another writer changed /migration: expected version {expected}, found version {version} "
            f"({found}); nothing of the rejected write landed"
        )

    def _failed(self, sent: _Sent, index: int, code: int) -> list[_Multi]:
        multi = sent.multi
        error = EXCEPTIONS[code]() if code in EXCEPTIONS else KazooException(f"error {code}")
        if isinstance(error, NoAuthError):
            raise self._denied(multi, index)
        if index == 0:
            raise self._fenced_by_controller()
        # An earlier attempt of this very multi may have landed (its reply was lost with the
        # connection): then /migration is already one version ahead with this multi's content.
        resend = self._settle([sent], None)
        if not resend:
            return []
        if index > len(multi.ops):  # /migration itself, unchanged by us: someone else moved it
            data, version, _ = self._read_migration()
            raise self._other_writer(sent.expected, version, data)
        op = multi.ops[index - 1]
        if not isinstance(error, NodeExistsError | NoNodeError | NotEmptyError):
            if isinstance(error, BadVersionError):
                raise FencedError(
                    f"znode {op.path} changed under zk2kraft (version {op.version} expected); "
                    "nothing of the rejected write landed"
                )
            raise BadInputError(
                f"ZooKeeper refused to {op.kind} {op.path}: {type(error).__name__}; nothing of the "
                "rejected write landed"
            )
        if multi.rebuilds >= _MAX_REBUILDS:
            raise BadInputError(
                f"znode {op.path} keeps changing while zk2kraft writes it ({type(error).__name__} "
                f"{_MAX_REBUILDS} times): another client is writing Kafka's znodes during dual-write"
            )
        log.info(
            "%s on %s %s: rebuilding the multi from ZooKeeper's state", type(error).__name__, op.kind, op.path
        )
        self.stats.rebuilds += 1
        return self._rebuild(multi)

    def _rebuild(self, multi: _Multi) -> list[_Multi]:
        """The same writes made valid against what ZooKeeper holds now: a create of an existing znode
        becomes a set, a set of a missing one a create (parents first), a delete of a missing one is
        dropped, a delete of a znode with unexpected children deletes them first."""
        exists = _Existence(self.client, self.retry_timeout)
        out: list[ZkOp] = []
        for op in multi.ops:
            path = op.path
            if op.kind == "check":
                out.append(op)
            elif op.kind == "create" and op.sequential:
                out.extend(exists.parents_for(path))
                out.append(op)
            elif op.kind in ("create", "set"):
                if exists.has(path):
                    out.append(ZkOp.set(path, op.data, op.version if op.kind == "set" else -1))
                else:
                    out.extend(exists.parents_for(path))
                    out.append(ZkOp.create(path, op.data))
                    exists.mark(path, True)
            elif op.kind == "delete":
                if exists.has(path):
                    for child in exists.descendants(path):
                        out.append(ZkOp.delete(child))
                        exists.mark(child, False)
                    out.append(op)
                    exists.mark(path, False)
        encoded = [self._encode(op) for op in out]
        budget = self.max_multi_bytes - self._fixed
        if sum(map(len, encoded)) <= budget:
            return [_Multi(out, encoded, sum(map(len, encoded)), multi.target, multi.rebuilds + 1)]
        # Grown past one request (many unexpected children): the earlier parts claim the offset
        # /migration holds now, the last one the multi's own target.
        current = (self.migration.kraft_metadata_offset, self.migration.kraft_metadata_epoch)
        parts: list[_Multi] = []
        ops: list[ZkOp] = []
        enc: list[bytes] = []
        size = 0
        for op, e in zip(out, encoded, strict=True):
            if ops and size + len(e) > budget:
                parts.append(_Multi(ops, enc, size, current, multi.rebuilds + 1))
                ops, enc, size = [], [], 0
            ops.append(op)
            enc.append(e)
            size += len(e)
        parts.append(_Multi(ops, enc, size, multi.target, multi.rebuilds + 1))
        return parts


class _Existence:
    """What exists in ZooKeeper now, as the ops of a multi being rebuilt change it in order."""

    def __init__(self, client: KazooClient, timeout: float) -> None:
        self.client = client
        self.timeout = timeout
        self.known: dict[str, bool] = {}

    def _call(self, fn: Callable[[], T], path: str) -> T:
        try:
            return retry_transient(fn, f"re-reading {path}", self.timeout, self.client)
        except NoAuthError:
            raise PermissionDeniedError(
                f"ZooKeeper denied reading {path}: check --zk-auth credentials and the znode's ACL"
            ) from None

    def has(self, path: str) -> bool:
        if path not in self.known:
            self.known[path] = self._call(lambda: self.client.exists(path), path) is not None
        return self.known[path]

    def mark(self, path: str, present: bool) -> None:
        self.known[path] = present

    def parents_for(self, path: str) -> list[ZkOp]:
        missing: list[str] = []
        parent = P.parent(path)
        while parent != "/" and not self.has(parent):
            missing.append(parent)
            parent = P.parent(parent)
        for p in missing:
            self.mark(p, True)
        return [ZkOp.create(p) for p in reversed(missing)]

    def descendants(self, path: str) -> list[str]:
        """Children before parents; only the ones that exist now."""
        out: list[str] = []

        def walk(p: str) -> None:
            try:
                children = self._call(lambda: self.client.get_children(p), p)
            except NoNodeError:
                return
            for child in sorted(children):
                c = f"{p}/{child}"
                if self.known.get(c, True):
                    walk(c)
                    out.append(c)

        walk(path)
        return out
