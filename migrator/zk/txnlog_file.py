"""ZooKeeper's transaction logs (`log.<hexzxid>`), and their replay onto a fuzzy snapshot.

A snapshot is written while the server keeps applying writes, so it holds every txn up to its file
zxid plus an arbitrary subset of later ones. ZooKeeper restores by replaying, from the log, every txn
with a zxid above the snapshot's: each txn is idempotent on such a tree (a create of a node that is
already there, a delete of one that is gone, a setData that sets the same version again), so the
result is the server's state at the last replayed zxid. `replay` does exactly that, with the same
rules as ZooKeeper's `DataTree.processTxn` for pzxid and cversion. docs/zk-snapshot.md has the details.

Log layout (`FileTxnLog`): FileHeader (ZKLG, 2, dbid), then entries of long Adler32 of txnBytes, int
length, txnBytes, byte 'B'. The file is preallocated with zeros; a zero length ends it. An entry
without its 'B' or running past the end is a torn write (the server died mid-append): the file ends
there, as ZooKeeper treats it, and the reader reports it.
"""

from __future__ import annotations

import logging
import mmap
import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from migrator.errors import BadInputError
from migrator.zk.snapshot_file import (
    CONTAINER_OWNER,
    JUTE_MAXBUFFER,
    TTL_OWNER_MASK,
    ZkAcl,
    ZkFileError,
    ZkSnapshot,
    jute_limit,
    read_acl_vector,
    read_buffer,
    read_ustring,
)
from migrator.zk.tree import ZkTree, ZNode

__all__ = [
    "LOG_MAGIC",
    "OP",
    "MissingTxnsError",
    "Replay",
    "TornEntry",
    "Txn",
    "TxnEntry",
    "TxnHeader",
    "TxnLogChecksumError",
    "TxnLogError",
    "TxnLogFile",
    "TxnLogFormatError",
    "log_files",
    "log_zxid",
    "replay",
    "replay_report",
]

log = logging.getLogger(__name__)

LOG_MAGIC = 0x5A4B4C47  # "ZKLG"
LOG_VERSION = 2
_NAME = re.compile(r"^log\.([0-9a-fA-F]+)$")

# ZooDefs.OpCode values that appear in the log
OP = {
    "notification": 0,
    "create": 1,
    "delete": 2,
    "exists": 3,
    "getData": 4,
    "setData": 5,
    "getACL": 6,
    "setACL": 7,
    "getChildren": 8,
    "sync": 9,
    "ping": 11,
    "getChildren2": 12,
    "check": 13,
    "multi": 14,
    "create2": 15,
    "reconfig": 16,
    "checkWatches": 17,
    "removeWatches": 18,
    "createContainer": 19,
    "deleteContainer": 20,
    "createTTL": 21,
    "multiRead": 22,
    "createSession": -10,
    "closeSession": -11,
    "error": -1,
}
CREATE, DELETE, SET_DATA, SET_ACL, CHECK, MULTI = 1, 2, 5, 7, 13, 14
CREATE2, RECONFIG, CREATE_CONTAINER, DELETE_CONTAINER, CREATE_TTL = 15, 16, 19, 20, 21
CREATE_SESSION, CLOSE_SESSION, ERROR = -10, -11, -1
_CREATES = (CREATE, CREATE2, CREATE_CONTAINER, CREATE_TTL)
# what DataTree.processTxn accepts inside a multi (create2 too: it is a CreateTxn like create)
_MULTI_OPS = frozenset((*_CREATES, DELETE, DELETE_CONTAINER, SET_DATA, CHECK, ERROR))


_FILE_HEADER = struct.Struct(">iiq").unpack_from
_ENTRY_HEAD = struct.Struct(">qi").unpack_from
_TXN_HEADER = struct.Struct(">qiqqi").unpack_from  # clientId, cxid, zxid, time, type
_TXN_HEADER_LEN = 32
_I32 = struct.Struct(">i").unpack_from
_I64 = struct.Struct(">q").unpack_from
_TXN_DIGEST = struct.Struct(">iq").unpack_from


class TxnLogError(ZkFileError):
    """A transaction log file ZooKeeper would refuse."""


class TxnLogChecksumError(TxnLogError):
    """An entry's Adler32 does not match its bytes: the log is corrupt."""


class TxnLogFormatError(TxnLogError):
    """Not ZooKeeper's layout: bad magic, unreasonable length, undecodable txn, data after a torn entry."""


class MissingTxnsError(BadInputError):
    """The logs do not cover every zxid between the snapshot and the end: a log file was removed."""


@dataclass(frozen=True, slots=True)
class TxnHeader:
    client_id: int  # session id
    cxid: int
    zxid: int
    time: int  # ms since the epoch
    type: int


@dataclass(frozen=True, slots=True)
class Txn:
    """A decoded txn body; which fields are set depends on `type` (the jute record it came from)."""

    type: int
    path: str = ""
    data: bytes | None = None
    acl: tuple[ZkAcl, ...] = ()
    ephemeral: bool = False
    parent_cversion: int = -1  # -1: the V0 create form, or "parent's cversion + 1"
    ttl: int = 0
    version: int = 0
    timeout: int = 0  # createSession
    paths: tuple[str, ...] | None = None  # closeSession's paths2Delete (3.6+), None when not written
    err: int = 0  # error
    ops: tuple[Txn, ...] = ()  # multi


@dataclass(frozen=True, slots=True)
class TxnEntry:
    file: Path
    offset: int  # of the entry's checksum
    header: TxnHeader
    txn: Txn
    digest: tuple[int, int] | None = None  # (version, tree digest) when written (3.6+)

    @property
    def zxid(self) -> int:
        return self.header.zxid


@dataclass(frozen=True, slots=True)
class TornEntry:
    """Where a log file ends in a partial entry: ZooKeeper stops reading that file there."""

    file: Path
    offset: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: torn final entry at byte {self.offset} ({self.reason}); the file ends there"


def log_zxid(path: Path | str) -> int | None:
    m = _NAME.match(Path(path).name)
    return int(m.group(1), 16) if m else None


def _log_dir(logs_dir: Path | str) -> Path:
    base = Path(logs_dir)
    if (base / "version-2").is_dir():
        return base / "version-2"
    if base.is_dir():
        return base
    raise BadInputError(f"{base}: no such directory (expected a ZooKeeper dataLogDir)")


def log_files(logs_dir: Path | str, snapshot_zxid: int = 0) -> list[Path]:
    """The logs holding txns after `snapshot_zxid`, oldest first (ZooKeeper's FileTxnLog.getLogFiles):
    the newest log starting at or before it, and every later one."""
    found = []
    for p in _log_dir(logs_dir).iterdir():
        z = log_zxid(p)
        if z is not None and p.is_file():
            found.append((z, p))
    found.sort()
    start = 0
    for z, _ in found:
        if z > snapshot_zxid:
            break
        start = z
    return [p for z, p in found if z >= start]


class TxnLogFile:
    """One log file. Iterating yields its entries in order; afterwards `torn` tells whether it ended in
    a partial entry and `end_offset` where reading stopped."""

    def __init__(self, path: Path | str, *, jute_maxbuffer: int = JUTE_MAXBUFFER) -> None:
        self.path = Path(path)
        self.zxid = log_zxid(self.path)
        self.limit = jute_limit(jute_maxbuffer)
        self.torn: TornEntry | None = None
        self.end_offset = 0
        self.entries = 0

    def __iter__(self) -> Iterator[TxnEntry]:
        try:
            f = self.path.open("rb")
        except OSError as e:
            raise TxnLogFormatError(self.path, None, f"cannot read ({e.strerror})") from None
        with f:
            size = f.seek(0, 2)
            if size == 0:
                self.torn = TornEntry(self.path, 0, "empty file: the server died before writing its header")
                return
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                yield from self._entries(mm, size)

    def _entries(self, buf: mmap.mmap, size: int) -> Iterator[TxnEntry]:
        file = self.path
        if size < 16:
            self._torn(buf, size, 0, 16, "file shorter than its 16-byte header")
            return
        magic, version, _dbid = _FILE_HEADER(buf, 0)
        if magic != LOG_MAGIC:
            raise TxnLogFormatError(file, 0, f"bad magic {magic:#010x} (expected ZKLG {LOG_MAGIC:#010x})")
        if version != LOG_VERSION:
            raise TxnLogFormatError(file, 4, f"unsupported log version {version} (expected 2)")
        pos = 16
        limit = self.limit
        while True:
            self.end_offset = pos
            if pos + 12 > size:
                if buf[pos:size].strip(b"\x00"):
                    self._torn(buf, size, pos, size, "entry header cut short")
                return
            crc, n = _ENTRY_HEAD(buf, pos)
            if n == 0:
                if crc:  # a checksum with no length after it: the write stopped inside the entry
                    self._torn(buf, size, pos, pos + 12, "checksum written, length not")
                return  # preallocated zeros: the end of the log
            if n < 0 or n > limit:
                raise TxnLogFormatError(file, pos, f"unreasonable entry length {n}")
            end = pos + 12 + n
            if end + 1 > size:
                self._torn(buf, size, pos, size, f"entry of {n} bytes runs past the end of the file")
                return
            if buf[end] != 0x42:  # 'B'
                self._torn(buf, size, pos, end + 1, "no end-of-entry 'B' marker")
                return
            body = buf[pos + 12 : end]
            computed = zlib.adler32(body)
            if computed != crc:
                raise TxnLogChecksumError(
                    file, pos, f"checksum mismatch in txn entry (stored {crc:#x}, computed {computed:#x})"
                )
            try:
                entry = _decode_entry(body, file, pos, limit)
            except (struct.error, ValueError, IndexError) as e:
                raise TxnLogFormatError(
                    file, pos, f"undecodable txn entry ({str(e) or 'too short'})"
                ) from None
            self.entries += 1
            yield entry
            pos = end + 1

    def _torn(self, buf: mmap.mmap, size: int, pos: int, after: int, reason: str) -> None:
        """A partial entry is only a torn write if nothing but preallocated zeros follows it."""
        chunk = 1 << 20
        for start in range(after, size, chunk):
            if buf[start : min(size, start + chunk)].strip(b"\x00"):
                raise TxnLogFormatError(
                    self.path,
                    pos,
                    f"partial entry ({reason}) followed by more data: the log is corrupt, not torn",
                )
        self.torn = TornEntry(self.path, pos, reason)
        self.end_offset = pos


def _decode_entry(body: bytes, file: Path, offset: int, limit: int) -> TxnEntry:
    client_id, cxid, zxid, time, typ = _TXN_HEADER(body, 0)
    header = TxnHeader(client_id, cxid, zxid, time, typ)
    pos = _TXN_HEADER_LEN
    if typ == CLOSE_SESSION:
        txn, pos = _decode_close_session(body, pos, limit)
    else:
        txn, pos = _decode_txn(typ, body, pos, limit, file, offset)
    digest = None
    rest = len(body) - pos
    if rest >= 12:
        digest = _TXN_DIGEST(body, pos)
        rest -= 12
    if rest:
        raise ValueError(f"{rest} unexpected bytes after the txn")
    return TxnEntry(file, offset, header, txn, digest)


def _decode_close_session(b: bytes, pos: int, limit: int) -> tuple[Txn, int]:
    """CloseSessionTxn (paths2Delete) since 3.6; older servers, or closeSessionTxn.enabled=false, write no
    body. Only a list that uses the bytes exactly (optionally before a 12-byte TxnDigest) counts."""
    try:
        (count,) = _I32(b, pos)
        end = pos + 4
        if 0 <= count <= limit:
            paths: list[str] = []
            for _ in range(count):
                p, end = read_ustring(b, end, limit)
                paths.append(p or "")
            if len(b) - end in (0, 12):
                return Txn(CLOSE_SESSION, paths=tuple(paths)), end
    except (struct.error, ValueError):
        pass
    return Txn(CLOSE_SESSION), pos


def _decode_txn(typ: int, b: bytes, pos: int, limit: int, file: Path, offset: int) -> tuple[Txn, int]:
    """SerializeUtils.deserializeTxn: the jute record for `typ` at `pos`."""
    if typ in (CREATE, CREATE2):
        path, pos = read_ustring(b, pos, limit)
        data, pos = read_buffer(b, pos, limit)
        acl, pos = read_acl_vector(b, pos, limit)
        ephemeral = b[pos] != 0
        pos += 1
        remaining = len(b) - pos
        if typ == CREATE and remaining in (0, 12):  # CreateTxnV0: no parentCVersion
            return Txn(typ, path or "", data, acl or (), ephemeral, -1), pos
        (pcv,) = _I32(b, pos)
        return Txn(typ, path or "", data, acl or (), ephemeral, pcv), pos + 4
    if typ in (CREATE_CONTAINER, CREATE_TTL):
        path, pos = read_ustring(b, pos, limit)
        data, pos = read_buffer(b, pos, limit)
        acl, pos = read_acl_vector(b, pos, limit)
        (pcv,) = _I32(b, pos)
        pos += 4
        ttl = 0
        if typ == CREATE_TTL:
            (ttl,) = _I64(b, pos)
            pos += 8
        return Txn(typ, path or "", data, acl or (), False, pcv, ttl), pos
    if typ in (DELETE, DELETE_CONTAINER):
        path, pos = read_ustring(b, pos, limit)
        return Txn(typ, path or ""), pos
    if typ in (SET_DATA, RECONFIG):
        path, pos = read_ustring(b, pos, limit)
        data, pos = read_buffer(b, pos, limit)
        (version,) = _I32(b, pos)
        return Txn(typ, path or "", data, version=version), pos + 4
    if typ == SET_ACL:
        path, pos = read_ustring(b, pos, limit)
        acl, pos = read_acl_vector(b, pos, limit)
        (version,) = _I32(b, pos)
        return Txn(typ, path or "", acl=acl or (), version=version), pos + 4
    if typ == CHECK:
        path, pos = read_ustring(b, pos, limit)
        (version,) = _I32(b, pos)
        return Txn(typ, path or "", version=version), pos + 4
    if typ == CREATE_SESSION:
        (timeout,) = _I32(b, pos)
        return Txn(typ, timeout=timeout), pos + 4
    if typ == ERROR:
        (err,) = _I32(b, pos)
        return Txn(typ, err=err), pos + 4
    if typ == MULTI:
        (count,) = _I32(b, pos)
        pos += 4
        ops: list[Txn] = []
        for _ in range(max(count, 0)):
            (sub_type,) = _I32(b, pos)
            sub, pos = read_buffer(b, pos + 4, limit)
            sub = sub or b""
            if sub_type not in _MULTI_OPS:
                raise TxnLogFormatError(file, offset, f"multi txn holds an op of type {sub_type}")
            ops.append(_decode_txn(sub_type, sub, 0, limit, file, offset)[0])
        return Txn(typ, ops=tuple(ops)), pos
    raise TxnLogFormatError(file, offset, f"unsupported txn type {typ}")


# --- replay -----------------------------------------------------------------------------------------


@dataclass
class Replay:
    """What `replay_report` did, for the audit report and the CLI."""

    tree: ZkTree
    acls: dict[str, tuple[ZkAcl, ...]]
    sessions: dict[int, int]
    extended_owners: dict[str, int]  # container and TTL znodes' raw ephemeralOwner, as in ZkSnapshot
    snapshot_zxid: int
    zxid: int  # the state's zxid: last applied txn (the snapshot's when none)
    applied: int = 0  # txns applied (a multi counts once)
    files: list[Path] = field(default_factory=list)
    torn: list[TornEntry] = field(default_factory=list)
    consistent: bool = False  # the tree is the server's state at `zxid`, not a fuzzy mix

    @property
    def warnings(self) -> list[str]:
        out = [str(t) for t in self.torn]
        if not self.consistent:
            out.append(
                f"the tree may mix states: replay reached {self.zxid:#x}, which may not cover every "
                "change the fuzzy snapshot holds"
            )
        return out


class _State:
    """The snapshot's tree under replay: dicts copied shallowly, child lists copied on first change."""

    def __init__(self, snap: ZkSnapshot) -> None:
        self.nodes: dict[str, ZNode] = dict(snap.tree.nodes)
        self.children: dict[str, list[str]] = dict(snap.tree.children)
        self.kids: dict[str, dict[str, None]] = {}  # changed child lists, as ordered sets
        self.acls = dict(snap.acls)
        self.cversions = dict(snap.cversions)
        self.extended = dict(snap.extended_owners)
        self.sessions = dict(snap.sessions)
        self.max_zxid = snap.tree.max_zxid
        self.ephemerals: dict[int, dict[str, None]] | None = None

    def _kids(self, parent: str) -> dict[str, None]:
        kids = self.kids.get(parent)
        if kids is None:
            kids = self.kids[parent] = dict.fromkeys(self.children.get(parent, ()))
        return kids

    def _touch_zxid(self, zxid: int) -> None:
        if zxid > self.max_zxid:
            self.max_zxid = zxid

    def _owned(self) -> dict[int, dict[str, None]]:
        if self.ephemerals is None:
            self.ephemerals = {}
            for path, node in self.nodes.items():
                if node.ephemeral_owner:
                    self.ephemerals.setdefault(node.ephemeral_owner, {})[path] = None
        return self.ephemerals

    # DataTree.createNode / deleteNode / setData / setACL / setCversionPzxid, minus watches and quotas
    def create(self, t: Txn, hdr: TxnHeader, op_type: int) -> None:
        path = t.path
        slash = path.rfind("/")
        parent = path[:slash] or "/"
        name = path[slash + 1 :]
        pnode = self.nodes.get(parent)
        if pnode is None or slash < 0:
            return  # NoNode: the parent is gone in this (later) state
        kids = self._kids(parent)
        zxid = hdr.zxid
        if name in kids:
            if op_type == CREATE:  # NodeExists on replay: ZooKeeper still moves the parent's cversion
                self._set_cversion_pzxid(parent, t.parent_cversion, zxid)
            return
        pcv = t.parent_cversion
        current = self.cversions.get(parent, 0)
        if pcv == -1:
            pcv = current + 1
        if pcv > current:
            self.cversions[parent] = pcv
            self.nodes[parent] = replace(pnode, pzxid=zxid)
        kids[name] = None
        owner = hdr.client_id if t.ephemeral else 0
        if op_type == CREATE_CONTAINER:
            self.extended[path] = CONTAINER_OWNER
        elif op_type == CREATE_TTL:
            self.extended[path] = TTL_OWNER_MASK | t.ttl
        data = t.data
        self.nodes[path] = ZNode(
            path, data, 0, zxid, zxid, owner, data_length=len(data) if data else 0, pzxid=zxid
        )
        self.acls[path] = t.acl
        if owner and self.ephemerals is not None:
            self.ephemerals.setdefault(owner, {})[path] = None
        self._touch_zxid(zxid)

    def _set_cversion_pzxid(self, path: str, cversion: int, zxid: int) -> None:
        node = self.nodes.get(path)
        if node is None:
            return
        current = self.cversions.get(path, 0)
        if cversion == -1:
            cversion = current + 1
        if cversion > current:
            self.cversions[path] = cversion
            self.nodes[path] = replace(node, pzxid=zxid)
            self._touch_zxid(zxid)

    def delete(self, path: str, zxid: int) -> None:
        slash = path.rfind("/")
        parent = path[:slash] or "/"
        pnode = self.nodes.get(parent)
        if pnode is None or slash < 0:
            return
        self._kids(parent).pop(path[slash + 1 :], None)
        if zxid > pnode.pzxid:
            self.nodes[parent] = replace(pnode, pzxid=zxid)
            self._touch_zxid(zxid)
        self._purge(path)

    def _purge(self, path: str) -> None:
        """Forget a node and, should it still have any, its descendants.

        ZooKeeper never deletes a node with children, and a fuzzy tree only holds children a later txn
        re-creates; dropping them keeps the tree free of orphans either way."""
        node = self.nodes.pop(path, None)
        if node is None:
            return
        self.acls.pop(path, None)
        self.cversions.pop(path, None)
        self.extended.pop(path, None)
        listed = self.children.pop(path, None)
        changed = self.kids.pop(path, None)
        for child in list(changed if changed is not None else listed or ()):
            self._purge(path + "/" + child)
        owner = node.ephemeral_owner
        if owner and self.ephemerals is not None and owner in self.ephemerals:
            self.ephemerals[owner].pop(path, None)

    def set_data(self, t: Txn, zxid: int) -> None:
        node = self.nodes.get(t.path)
        if node is None:
            return
        data = t.data
        self.nodes[t.path] = replace(
            node, data=data, version=t.version, mzxid=zxid, data_length=len(data) if data else 0
        )
        self._touch_zxid(zxid)

    def set_acl(self, t: Txn) -> None:
        if t.path in self.nodes:
            self.acls[t.path] = t.acl

    def close_session(self, t: Txn, hdr: TxnHeader) -> None:
        session = hdr.client_id
        self.sessions.pop(session, None)
        local = self._owned().pop(session, {})
        for path in t.paths or ():
            local.pop(path, None)
            self.delete(path, hdr.zxid)
        for path in list(local):
            self.delete(path, hdr.zxid)

    def apply(self, e: TxnEntry) -> None:
        hdr, t = e.header, e.txn
        typ = hdr.type
        if typ == MULTI:
            if any(op.type == ERROR for op in t.ops):
                return  # a failed multi changes nothing
            for op in t.ops:
                self._apply_one(op, hdr, op.type)
        else:
            self._apply_one(t, hdr, typ)

    def _apply_one(self, t: Txn, hdr: TxnHeader, typ: int) -> None:
        if typ in _CREATES:
            self.create(t, hdr, typ)
        elif typ in (DELETE, DELETE_CONTAINER):
            self.delete(t.path, hdr.zxid)
        elif typ in (SET_DATA, RECONFIG):
            self.set_data(t, hdr.zxid)
        elif typ == SET_ACL:
            self.set_acl(t)
        elif typ == CREATE_SESSION:
            self.sessions[hdr.client_id] = t.timeout
        elif typ == CLOSE_SESSION:
            self.close_session(t, hdr)
        # error and check change nothing

    def tree(self, zxid: int, consistent: bool) -> ZkTree:
        nodes, children = self.nodes, self.children
        for parent, kids in self.kids.items():
            node = nodes.get(parent)
            if node is None:
                continue
            if kids:
                children[parent] = list(kids)
            else:
                children.pop(parent, None)
            if node.num_children != len(kids):
                nodes[parent] = replace(node, num_children=len(kids))
        return ZkTree(
            nodes=nodes, children=children, max_zxid=self.max_zxid, consistent=consistent, read_zxid=zxid
        )


def replay_report(
    snapshot: ZkSnapshot,
    logs_dir: Path | str,
    up_to_zxid: int | None = None,
    *,
    jute_maxbuffer: int = JUTE_MAXBUFFER,
) -> Replay:
    """Apply, in zxid order and across log files, every txn after the snapshot's zxid (up to
    `up_to_zxid` when given) to the snapshot's tree; see `Replay` for what comes back."""
    if up_to_zxid is not None and up_to_zxid < snapshot.zxid:
        raise BadInputError(
            f"cannot replay to zxid {up_to_zxid:#x}: it is before the snapshot {snapshot.file.name} ({snapshot.zxid:#x})"
        )
    state = _State(snapshot)
    files = log_files(logs_dir, snapshot.zxid)
    report = Replay(
        tree=snapshot.tree,
        acls=state.acls,
        sessions=state.sessions,
        extended_owners=state.extended,
        snapshot_zxid=snapshot.zxid,
        zxid=snapshot.zxid,
        files=files,
    )
    last = snapshot.zxid
    last_file: Path | None = None
    stopped = False
    for path in files:
        reader = TxnLogFile(path, jute_maxbuffer=jute_maxbuffer)
        for entry in reader:
            zxid = entry.header.zxid
            if zxid <= last:
                continue  # already in the snapshot, or before it in the first log
            if up_to_zxid is not None and zxid > up_to_zxid:
                stopped = True
                break
            if zxid != last + 1 and zxid >> 32 == last >> 32:
                before = f"{last_file.name}" if last_file else f"snapshot {snapshot.file.name}"
                raise MissingTxnsError(
                    f"{path}: txns {last + 1:#x}..{zxid - 1:#x} are missing between {before} and "
                    f"byte {entry.offset} of {path.name} (a log file was removed?)"
                )
            state.apply(entry)
            report.applied += 1
            last = zxid
            last_file = path
        if reader.torn is not None:
            report.torn.append(reader.torn)
            log.warning("%s", reader.torn)
        if stopped:
            break
    fuzzy_end = snapshot.fuzzy_end_zxid
    # The snapshot holds changes up to `fuzzy_end` when it records it (digest, 3.9 trailer); otherwise,
    # as every txn is logged before it is applied, reading its logs to their end passes its last change.
    if fuzzy_end is not None:
        consistent = last >= fuzzy_end
    else:
        consistent = bool(files) and not stopped
    if up_to_zxid is not None and not stopped and up_to_zxid > last:
        log.info("logs end at %#x, before the requested zxid %#x", last, up_to_zxid)
    report.tree = state.tree(last, consistent)
    report.zxid = last
    report.consistent = consistent
    return report


def replay(snapshot: ZkSnapshot, logs_dir: Path | str, up_to_zxid: int | None = None) -> ZkTree:
    """The server's tree at the newest logged zxid (or `up_to_zxid`): the snapshot plus its logs.

    A torn final entry ends its file, as when ZooKeeper restarts; it is logged as a warning (use
    `replay_report` to get it, with sessions and ACLs).
    """
    return replay_report(snapshot, logs_dir, up_to_zxid).tree
