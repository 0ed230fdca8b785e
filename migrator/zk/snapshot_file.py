"""ZooKeeper's own snapshot files (`snapshot.<hexzxid>`, `.gz`, `.snappy`) read into a `ZkTree`.

An audit can then run from a copy of a data directory, without a live server and without loading the
ensemble. The layout is ZooKeeper's `FileSnap` / `DataTree.serialize` / `SnapStream` (3.5 to 3.9+);
docs/zk-snapshot.md describes it and what the reader checks. A snapshot is *fuzzy* (taken while writes
go on); `migrator.zk.txnlog_file.replay` makes it consistent.

The parser reads the whole (decompressed) stream into memory once and walks it with precompiled
structs: it is a hot loop over hundreds of thousands of znodes, so per-node work is kept minimal.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import re
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from migrator.bulk import without_gc
from migrator.errors import BadInputError
from migrator.zk.tree import ZNODE_TWIN, ZkTree, ZNode

__all__ = [
    "CONTAINER_OWNER",
    "JUTE_MAXBUFFER",
    "OPEN_ACL_UNSAFE",
    "SNAP_MAGIC",
    "TTL_OWNER_MASK",
    "NoSnapshotError",
    "SnapshotChecksumError",
    "SnapshotFileError",
    "SnapshotFormatError",
    "SnapshotTruncatedError",
    "SnappyUnavailableError",
    "ZkAcl",
    "ZkSnapshot",
    "ZkFileError",
    "ZxidDigest",
    "is_extended_owner",
    "jute_limit",
    "latest_snapshot",
    "list_snapshots",
    "read_acl_vector",
    "read_buffer",
    "read_snapshot",
    "read_ustring",
    "snapshot_zxid",
]

log = logging.getLogger(__name__)

SNAP_MAGIC = 0x5A4B534E  # "ZKSN"
SNAP_VERSION = 2
JUTE_MAXBUFFER = 0xFFFFF  # ZooKeeper's default jute.maxbuffer
CONTAINER_OWNER = -(1 << 63)  # EphemeralType.CONTAINER_EPHEMERAL_OWNER (Long.MIN_VALUE)
TTL_OWNER_MASK = -(1 << 56)  # EphemeralType.EXTENDED_MASK 0xff00000000000000: TTL owners are mask | ttl
OPEN_ACL_ID = -1  # ReferenceCountedACLCache's id for OPEN_ACL_UNSAFE, which has no map entry
# xerial snappy-java's SnappyOutputStream header: magic, then int version and int compatible version
SNAPPY_MAGIC = b"\x82SNAPPY\x00"
SNAPPY_HEADER_LEN = 16
# a chunk length equal to the magic's first four bytes starts a concatenated stream
_SNAPPY_MAGIC_HEAD = struct.unpack(">i", SNAPPY_MAGIC[:4])[0]
_NAME = re.compile(r"^snapshot\.([0-9a-fA-F]+)(?:\.(gz|snappy))?$")

_I32 = struct.Struct(">i").unpack_from
_I64 = struct.Struct(">q").unpack_from
_HEADER = struct.Struct(">iiq").unpack_from
_SESSION = struct.Struct(">qi").unpack_from
_U32 = struct.Struct(">I").unpack_from
# DataNode after its data: acl id, then StatPersisted (czxid, mzxid, ctime, mtime, version, cversion,
# aversion, ephemeralOwner, pzxid): 8 + 60 bytes. The times and aversion are skipped as padding: the
# tree has no field for them, and not making their ints is measurable at 400,000 znodes.
_NODE_TAIL = struct.Struct(">qqq16xii4xqq").unpack_from
_NODE_TAIL_LEN = 68
_DIGEST_HEAD = struct.Struct(">qi").unpack_from


def jute_limit(jute_maxbuffer: int = JUTE_MAXBUFFER, extrasize: int | None = None) -> int:
    """The longest string or buffer ZooKeeper's BinaryInputArchive accepts (maxbuffer + extrasize)."""
    extra = jute_maxbuffer if extrasize is None else extrasize
    return jute_maxbuffer + max(extra, 1024)


class ZkFileError(BadInputError):
    """A ZooKeeper data file (snapshot or transaction log) ZooKeeper would refuse; the message names
    the file and the byte offset, so the operator knows which copy to replace."""

    def __init__(self, file: Path | str, offset: int | None, problem: str) -> None:
        self.file = str(file)
        self.offset = offset
        where = "" if offset is None else f" at byte {offset}"
        super().__init__(f"{file}: {problem}{where}")


class SnapshotFileError(ZkFileError):
    """A snapshot file ZooKeeper would refuse."""


class SnapshotTruncatedError(SnapshotFileError):
    """The file ends inside a record: copied while being written, or cut short."""


class SnapshotChecksumError(SnapshotFileError):
    """A seal's Adler32 does not match the bytes before it."""


class SnapshotFormatError(SnapshotFileError):
    """Not ZooKeeper's layout: bad magic or version, unreasonable length, dangling node or ACL."""


class SnappyUnavailableError(SnapshotFileError):
    """A `.snappy` snapshot, and no snappy decoder can be loaded."""


class NoSnapshotError(BadInputError):
    """A directory with no usable `snapshot.<zxid>` file."""


@dataclass(frozen=True, slots=True)
class ZkAcl:
    perms: int
    scheme: str
    id: str


OPEN_ACL_UNSAFE: tuple[ZkAcl, ...] = (ZkAcl(31, "world", "anyone"),)


@dataclass(frozen=True, slots=True)
class ZxidDigest:
    """The tree digest ZooKeeper (3.6+) stores after seal 1: of the tree at `zxid` (0 = none recorded)."""

    zxid: int
    version: int
    value: int


@dataclass(slots=True)
class ZkSnapshot:
    """One snapshot file as ZooKeeper would load it. `tree` is fuzzy: see txnlog_file.replay."""

    file: Path
    zxid: int  # from the file name: every txn up to it is in the tree (later ones may be too)
    tree: ZkTree
    sessions: dict[int, int]  # session id -> timeout (ms)
    acls: dict[str, tuple[ZkAcl, ...]]  # resolved ACL of every znode, by path
    # child version of each znode that has one (absent = 0): replay needs it to set pzxid as ZooKeeper does
    cversions: dict[str, int]
    acl_cache: dict[int, tuple[ZkAcl, ...]] = field(default_factory=dict)  # the file's id -> ACL list map
    # Raw ephemeralOwner of container and TTL znodes; their ZNode shows 0, as ZooKeeper's Stat does.
    extended_owners: dict[str, int] = field(default_factory=dict)
    digest: ZxidDigest | None = None  # the 3.6+ trailer, when written
    last_processed_zxid: int | None = None  # the 3.9+ trailer, when written
    compression: str = ""  # "", "gz" or "snappy"
    stream_bytes: int = 0  # length of the uncompressed stream
    seals_verified: int = 0  # Adler32 seals checked (0 with verify=False)

    @property
    def fuzzy_end_zxid(self) -> int | None:
        """The newest zxid whose effects may be in the tree, when the file records it (digest or 3.9 trailer)."""
        known = [z for z in (self.last_processed_zxid, self.digest.zxid if self.digest else 0) if z]
        return max(known) if known else None


def snapshot_zxid(path: Path | str) -> int | None:
    """The zxid in a `snapshot.<hex>[.gz|.snappy]` file name, None for other names."""
    m = _NAME.match(Path(path).name)
    return int(m.group(1), 16) if m else None


def _compression(path: Path) -> str:
    m = _NAME.match(path.name)
    return (m.group(2) or "") if m else ""


def list_snapshots(data_dir: Path | str) -> list[Path]:
    """Snapshot files in `data_dir/version-2` (or `data_dir` itself), newest zxid first."""
    base = Path(data_dir)
    found: list[tuple[int, Path]] = []
    for d in (base / "version-2", base):
        if d.is_dir():
            for p in d.iterdir():
                z = snapshot_zxid(p)
                if z is not None and p.is_file():
                    found.append((z, p))
            if found:
                break
    found.sort(key=lambda zp: (-zp[0], zp[1].name))
    return [p for _, p in found]


def _looks_complete(path: Path) -> bool:
    """ZooKeeper's SnapStream.isValidSnapshot: the quick check that skips a snapshot still being written."""
    try:
        with path.open("rb") as f:
            kind = _compression(path)
            if kind == "gz":
                return f.read(2) == b"\x1f\x8b"
            if kind == "snappy":
                return f.read(len(SNAPPY_MAGIC)) == SNAPPY_MAGIC
            f.seek(0, 2)
            if f.tell() < 10:
                return False
            f.seek(-5, 2)
            return f.read(5) == b"\x00\x00\x00\x01/"
    except OSError:
        return False


def latest_snapshot(data_dir: Path | str) -> Path:
    """The newest complete snapshot under a ZooKeeper dataDir (`version-2/`), or in the directory itself.

    Like ZooKeeper at startup it skips newer files that fail the quick completeness check (a snapshot
    being written as we look); a file path is returned as is.
    """
    base = Path(data_dir)
    if base.is_file():
        return base
    if not base.is_dir():
        raise NoSnapshotError(f"{base}: no such directory (expected a ZooKeeper dataDir)")
    snaps = list_snapshots(base)
    if not snaps:
        raise NoSnapshotError(f"{base}: no snapshot.<zxid> files (looked in {base / 'version-2'} and {base})")
    for p in snaps:
        if _looks_complete(p):
            if p != snaps[0]:
                log.warning("skipping incomplete newer snapshot(s); using %s", p)
            return p
    raise NoSnapshotError(
        f"{base}: none of {len(snaps)} snapshot files is complete (newest: {snaps[0].name} does not end "
        "with ZooKeeper's seal)"
    )


# --- decompression ----------------------------------------------------------------------------------


def _gunzip(raw: bytes, file: Path) -> bytes:
    out: list[bytes] = []
    data = raw
    while True:
        d = zlib.decompressobj(wbits=31)
        try:
            out.append(d.decompress(data))
        except zlib.error as e:
            raise SnapshotFormatError(file, None, f"corrupt gzip stream ({e})") from None
        if not d.eof:
            raise SnapshotTruncatedError(
                file, len(raw), "gzip stream ends early (file truncated; offset is in the compressed file)"
            )
        data = d.unused_data
        if not data.strip(b"\x00"):
            return b"".join(out)


@functools.cache
def _snappy_decoders() -> list[tuple[str, Callable[[bytes], bytes]]]:
    """Raw-snappy block decoders in order of preference: cramjam, python-snappy, then libsnappy via ctypes."""
    found: list[tuple[str, Callable[[bytes], bytes]]] = []
    try:
        import cramjam  # type: ignore[import-not-found]

        found.append(("cramjam", lambda b: bytes(cramjam.snappy.decompress_raw(b))))
    except ImportError:
        pass
    try:
        import snappy  # type: ignore[import-not-found]

        found.append(("python-snappy", snappy.uncompress))
    except ImportError:
        pass
    lib_name = ctypes.util.find_library("snappy")
    if lib_name:
        try:
            lib = ctypes.CDLL(lib_name)
            length_of = lib.snappy_uncompressed_length
            length_of.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
            uncompress = lib.snappy_uncompress
            uncompress.argtypes = [
                ctypes.c_char_p,
                ctypes.c_size_t,
                ctypes.c_char_p,
                ctypes.POINTER(ctypes.c_size_t),
            ]

            def libsnappy(block: bytes) -> bytes:
                n = ctypes.c_size_t(0)
                if length_of(block, len(block), ctypes.byref(n)) != 0:
                    raise ValueError("invalid snappy block header")
                out = ctypes.create_string_buffer(n.value)
                if uncompress(block, len(block), out, ctypes.byref(n)) != 0:
                    raise ValueError("invalid snappy block")
                return out.raw[: n.value]

            found.append((f"libsnappy ({lib_name})", libsnappy))
        except (OSError, AttributeError):
            pass
    return found


def _unsnappy(raw: bytes, file: Path) -> bytes:
    """xerial snappy-java's SnappyOutputStream framing: 16-byte header, then (int32 length, raw block)*."""
    decoders = _snappy_decoders()
    if not decoders:
        raise SnappyUnavailableError(
            file,
            None,
            "snappy-compressed snapshot but no snappy decoder is available: "
            "pip install cramjam (or python-snappy), or apt-get install libsnappy1v5",
        )
    decode = decoders[0][1]
    size = len(raw)
    if raw[: len(SNAPPY_MAGIC)] != SNAPPY_MAGIC:
        raise SnapshotFormatError(file, 0, "not a snappy-java stream (bad magic header)")
    pos = SNAPPY_HEADER_LEN
    out: list[bytes] = []
    while pos < size:
        if pos + 4 > size:
            raise SnapshotTruncatedError(file, pos, "snappy chunk length cut short (compressed file offset)")
        (n,) = _I32(raw, pos)
        if n == _SNAPPY_MAGIC_HEAD and raw[pos : pos + len(SNAPPY_MAGIC)] == SNAPPY_MAGIC:
            pos += SNAPPY_HEADER_LEN  # concatenated stream
            continue
        if n < 0:
            raise SnapshotFormatError(file, pos, f"negative snappy chunk length {n} (compressed file offset)")
        if pos + 4 + n > size:
            raise SnapshotTruncatedError(file, pos, "snappy chunk cut short (compressed file offset)")
        try:
            out.append(decode(raw[pos + 4 : pos + 4 + n]))
        except Exception as e:  # each backend raises its own type
            raise SnapshotFormatError(
                file, pos, f"corrupt snappy chunk ({e}) (compressed file offset)"
            ) from None
        pos += 4 + n
    return b"".join(out)


# --- parsing ----------------------------------------------------------------------------------------


def is_extended_owner(owner: int) -> bool:
    """A container or TTL znode's ephemeralOwner (EphemeralType), which clients see as 0.

    TTL owners are recognised by their 0xFF top byte, as a server with extended types enabled (the only
    kind that can create TTL nodes) does; such a server refuses server id 255, so no session has it."""
    return owner == CONTAINER_OWNER or owner >> 56 == -1


def _decode_jute(raw: bytes) -> str:
    """Jute writes each UTF-16 unit on its own, so a supplementary character arrives as two encoded
    surrogates (CESU-8): join them back into the character the writer had."""
    try:
        s = raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # not even CESU-8: Java's decoder would substitute U+FFFD
        return raw.decode("utf-8", "replace")
    return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _signed(n: int) -> int:
    return n - (1 << 32) if n >= 1 << 31 else n


def read_acl_vector(buf: bytes, pos: int, limit: int) -> tuple[tuple[ZkAcl, ...] | None, int]:
    """A jute vector<ACL> at `pos`: (acls or None for a null vector, next position)."""
    (count,) = _I32(buf, pos)
    pos += 4
    if count == -1:
        return None, pos
    if count < 0 or count > limit:
        raise ValueError(f"unreasonable ACL count {count}")
    acls = []
    for _ in range(count):
        (perms,) = _I32(buf, pos)
        scheme, pos = read_ustring(buf, pos + 4, limit)
        ident, pos = read_ustring(buf, pos, limit)
        acls.append(ZkAcl(perms, scheme or "", ident or ""))
    return tuple(acls), pos


def read_ustring(buf: bytes, pos: int, limit: int) -> tuple[str | None, int]:
    raw, pos = read_buffer(buf, pos, limit)
    if raw is None:
        return None, pos
    try:
        return raw.decode(), pos
    except UnicodeDecodeError:
        return _decode_jute(raw), pos


def read_buffer(buf: bytes, pos: int, limit: int) -> tuple[bytes | None, int]:
    (n,) = _I32(buf, pos)
    pos += 4
    if n == -1:
        return None, pos
    if n < 0 or n > limit:
        raise ValueError(f"unreasonable length {n}")
    end = pos + n
    if end > len(buf):
        raise struct.error("short buffer")
    return buf[pos:end], end


def read_snapshot(
    path: Path | str, verify: bool = True, *, jute_maxbuffer: int = JUTE_MAXBUFFER
) -> ZkSnapshot:
    """Parse one snapshot file (plain, `.gz` or `.snappy`) into a fuzzy `ZkSnapshot`.

    `verify` checks every Adler32 seal as ZooKeeper does when it loads the file; structure, lengths and
    references are always checked. Every problem raises a `SnapshotFileError` subclass naming the file
    and the byte offset (in the uncompressed stream for `.gz` / `.snappy`).
    """
    file = Path(path)
    zxid = snapshot_zxid(file)
    if zxid is None:
        raise SnapshotFormatError(
            file, None, "not a snapshot file name (expected snapshot.<hex zxid>[.gz|.snappy])"
        )
    try:
        raw = file.read_bytes()
    except IsADirectoryError:
        raise SnapshotFormatError(file, None, "is a directory (use latest_snapshot for a dataDir)") from None
    except OSError as e:
        raise SnapshotFormatError(file, None, f"cannot read ({e.strerror})") from None
    kind = _compression(file)
    if kind == "gz":
        buf = _gunzip(raw, file)
    elif kind == "snappy":
        buf = _unsnappy(raw, file)
    else:
        buf = raw
    del raw
    # ~5 objects per znode, none freed, no cycles: the collector cost a third of the time (migrator.bulk)
    with without_gc():
        snap = _parse(buf, file, zxid, verify, jute_limit(jute_maxbuffer))
    snap.compression = kind
    return snap


def _parse(buf: bytes, file: Path, zxid: int, verify: bool, limit: int) -> ZkSnapshot:
    size = len(buf)
    where = " (uncompressed stream)" if _compression(file) else ""
    pos = rec = 0  # rec: where the record being read starts, for a truncation's offset
    try:
        if size < 16:
            raise struct.error
        magic, version, _dbid = _HEADER(buf, 0)
        if magic != SNAP_MAGIC:
            raise SnapshotFormatError(file, 0, f"bad magic {magic:#010x} (expected ZKSN {SNAP_MAGIC:#010x})")
        if version != SNAP_VERSION:
            raise SnapshotFormatError(file, 4, f"unsupported snapshot version {version} (expected 2)")
        pos = rec = 16

        # sessions
        (count,) = _I32(buf, pos)
        if count < 0:
            raise SnapshotFormatError(file, pos, f"negative session count {count}")
        pos += 4
        sessions: dict[int, int] = {}
        for _ in range(count):
            rec = pos
            sid, timeout = _SESSION(buf, pos)
            sessions[sid] = timeout
            pos += 12

        # ACL cache
        rec = pos
        (count,) = _I32(buf, pos)
        if count < 0:
            raise SnapshotFormatError(file, pos, f"negative ACL map size {count}")
        pos += 4
        acl_cache: dict[int, tuple[ZkAcl, ...]] = {}
        for _ in range(count):
            rec = pos
            (acl_id,) = _I64(buf, pos)
            try:
                acls, pos = read_acl_vector(buf, pos + 8, limit)
            except ValueError as e:
                raise SnapshotFormatError(file, rec, f"ACL map entry {acl_id}: {e}") from None
            if acls is None:
                raise SnapshotFormatError(file, rec, f"ACL map entry {acl_id} has a null ACL list")
            acl_cache[acl_id] = acls
        resolve = dict(acl_cache)
        resolve[OPEN_ACL_ID] = OPEN_ACL_UNSAFE

        # nodes, pre-order; the root is written as "" and the list ends with "/". The hot loop: lengths
        # are read unsigned so one comparison rejects negative ones too (-1, null data, is 0xFFFFFFFF),
        # and a slice running past the end needs no check of its own, as the next unpack fails.
        nodes: dict[str, Any] = {}  # twins until the child counts are in, then ZNodes
        children: dict[str, list[str]] = {}
        node_acls: dict[str, tuple[ZkAcl, ...]] = {}
        cversions: dict[str, int] = {}
        extended: dict[str, int] = {}
        u32 = _U32
        tail = _NODE_TAIL
        get_acl = resolve.get
        twin = ZNODE_TWIN
        max_zxid = 0
        last_parent = None
        last_kids: list[str] = []
        while True:
            rec = pos
            (n,) = u32(buf, pos)
            if n > limit:
                raise SnapshotFormatError(file, rec, f"unreasonable path length {_signed(n)}{where}")
            pos += 4
            end = pos + n
            raw_path = buf[pos:end]
            try:
                path = raw_path.decode()
            except UnicodeDecodeError:
                path = _decode_jute(raw_path)
            pos = end
            if path == "/":
                break
            (n,) = u32(buf, pos)
            pos += 4
            if n > limit:
                if n != 0xFFFFFFFF:
                    raise SnapshotFormatError(
                        file, pos - 4, f"unreasonable data length {_signed(n)} of {path or '/'}{where}"
                    )
                data = None
                n = 0
            else:
                end = pos + n
                data = buf[pos:end]
                pos = end
            acl_id, czxid, mzxid, version, cversion, owner, pzxid = tail(buf, pos)
            pos += _NODE_TAIL_LEN
            acl = get_acl(acl_id)
            if acl is None:
                raise SnapshotFormatError(
                    file, rec, f"znode {path or '/'} refers to unknown ACL id {acl_id}{where}"
                )
            slash = path.rfind("/")
            if slash < 0:
                if path:
                    raise SnapshotFormatError(file, rec, f"znode path {path!r} is not absolute{where}")
                path = "/"
            else:
                parent = path[:slash] or "/"
                if parent != last_parent:
                    kids = children.get(parent)
                    if kids is None:
                        if parent not in nodes:
                            raise SnapshotFormatError(
                                file, rec, f"znode {path} comes before its parent {parent}{where}"
                            )
                        kids = children[parent] = []
                    last_parent = parent
                    last_kids = kids
                last_kids.append(path[slash + 1 :])
            if owner < 0 and is_extended_owner(owner):
                extended[path] = owner
                owner = 0
            if twin is not None:  # becomes a ZNode below, once its child count is known
                node = twin(path, data, version, czxid, mzxid, owner, 0, n, pzxid)
            else:
                node = ZNode(
                    path=path,
                    data=data,
                    version=version,
                    czxid=czxid,
                    mzxid=mzxid,
                    ephemeral_owner=owner,
                    data_length=n,
                    pzxid=pzxid,
                )
            nodes[path] = node
            node_acls[path] = acl
            if cversion:
                cversions[path] = cversion
            if mzxid > max_zxid:
                max_zxid = mzxid
            if pzxid > max_zxid:
                max_zxid = pzxid
        if "/" not in nodes:
            raise SnapshotFormatError(file, 16, f"no root znode{where}")
        if twin is not None:
            # ZNode's frozen __init__ skipped the one way (migrator.zk.tree): the twins get their child
            # counts by plain stores, then become ZNodes
            for parent, kids in children.items():
                nodes[parent].num_children = len(kids)
            for node in nodes.values():
                node.__class__ = ZNode
        else:
            for parent, kids in children.items():
                nodes[parent] = replace(nodes[parent], num_children=len(kids))

        # seal 1, then the optional digest (3.6+) and lastProcessedZxid (3.9+) trailers, each sealed
        seals = 0
        checked = 0
        running = 1  # Adler32 of nothing
        rec = pos
        pos, running, checked = _seal(buf, pos, file, verify, running, checked, where)
        seals += 1
        digest = None
        last_zxid = None
        # What follows seal 1 tells the trailers apart: 21 bytes are lastProcessedZxid and its seal alone
        # (digest disabled), more start with a digest; any trailer and its seal take at least 21.
        if 0 < size - pos < 21:
            raise struct.error
        if size - pos > 21:
            rec = pos
            dz, dver = _DIGEST_HEAD(buf, pos)
            pos += 12
            if dver >= 2:
                (value,) = _I64(buf, pos)
                pos += 8
            else:
                text, pos = read_ustring(buf, pos, limit)
                try:
                    value = int(text, 16) if text else 0
                except ValueError:
                    raise SnapshotFormatError(file, rec, f"digest {text!r} is not hex{where}") from None
            digest = ZxidDigest(dz, dver, value)
            pos, running, checked = _seal(buf, pos, file, verify, running, checked, where)
            seals += 1
        if pos < size:
            rec = pos
            (last_zxid,) = _I64(buf, pos)
            pos += 8
            pos, running, checked = _seal(buf, pos, file, verify, running, checked, where)
            seals += 1
        if pos != size:
            raise SnapshotFormatError(file, pos, f"{size - pos} unexpected bytes after the last seal{where}")
    except struct.error:
        raise SnapshotTruncatedError(
            file, min(rec, size), f"file ends ({size} bytes) inside the record starting{where}"
        ) from None
    except ValueError as e:
        raise SnapshotFormatError(file, min(rec, size), f"{e}{where}") from None

    tree = ZkTree(nodes=nodes, children=children, max_zxid=max_zxid, consistent=False, read_zxid=zxid)
    return ZkSnapshot(
        file=file,
        zxid=zxid,
        tree=tree,
        sessions=sessions,
        acls=node_acls,
        cversions=cversions,
        acl_cache=acl_cache,
        extended_owners=extended,
        digest=digest,
        last_processed_zxid=last_zxid,
        stream_bytes=size,
        seals_verified=seals if verify else 0,
    )


def _seal(
    buf: bytes, pos: int, file: Path, verify: bool, running: int, checked: int, where: str
) -> tuple[int, int, int]:
    """SnapStream.checkSealIntegrity: long Adler32 of every byte before it, then the string "/"."""
    (value,) = _I64(buf, pos)
    if verify:
        running = zlib.adler32(memoryview(buf)[checked:pos], running)
        checked = pos
        if value != running:
            raise SnapshotChecksumError(
                file, pos, f"checksum mismatch: seal says {value:#010x}, bytes give {running:#010x}{where}"
            )
    (n,) = _I32(buf, pos + 8)
    if n != 1 or buf[pos + 12 : pos + 13] != b"/":
        if pos + 13 > len(buf):
            raise struct.error
        raise SnapshotFormatError(file, pos + 8, f'seal is not followed by "/"{where}')
    return pos + 13, running, checked
