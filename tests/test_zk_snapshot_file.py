"""ZooKeeper's own snapshot and txn-log files, written by a real server, read back without it.

Every check compares the files against what a live kazoo client reads from the same server: the
snapshot plus the replayed logs must be exactly the server's tree (paths, data, versions, zxids,
ephemeral owners, child lists, ACLs) at the server's last zxid.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import struct
import subprocess
import time
import zlib
from collections import namedtuple
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.serialization import Create, Create2
from kazoo.security import OPEN_ACL_UNSAFE as KAZOO_OPEN_ACL
from kazoo.security import make_digest_acl

from migrator.errors import BadInputError
from migrator.zk import snapshot_file
from migrator.zk.multiread import parse_srvr_version
from migrator.zk.snapshot_file import (
    NoSnapshotError,
    SnappyUnavailableError,
    SnapshotChecksumError,
    SnapshotFileError,
    SnapshotFormatError,
    SnapshotTruncatedError,
    ZkAcl,
    ZkFileError,
    latest_snapshot,
    list_snapshots,
    read_snapshot,
)
from migrator.zk.tree import ZkTree, ZNode, join
from migrator.zk.txnlog_file import (
    MissingTxnsError,
    TxnLogChecksumError,
    TxnLogError,
    TxnLogFile,
    TxnLogFormatError,
    log_files,
    replay,
    replay_report,
)
from zk_fixtures.server import ZkServer, find_classpath, four_letter

pytestmark = pytest.mark.zk

BIG = bytes(range(256)) * 1954  # 500,224 bytes: half of jute.maxbuffer
DIGEST_ACL = make_digest_acl("alice", "secret", all=True)


class _CreateContainer(Create2):
    type = 19  # kazoo 2.11 has no container or TTL create; the wire format is Create2's (+ ttl)


class _CreateTTL(namedtuple("_CreateTTL", "path data acl flags ttl")):
    type = 21

    def serialize(self) -> bytearray:
        b = Create2(self.path, self.data, self.acl, self.flags).serialize()
        b.extend(struct.pack(">q", self.ttl))
        return b

    deserialize = Create2.deserialize


def _raw(client: KazooClient, request: object) -> object:
    result = client.handler.async_result()
    client._call(request, result)
    return result.get(timeout=10)


def _server_zxid(server: ZkServer) -> int:
    m = re.search(r"Zxid: (0x[0-9a-f]+)", four_letter(server.host, server.port, "srvr"))
    assert m, "srvr gave no zxid"
    return int(m.group(1), 16)


def _release(server: ZkServer) -> tuple[int, ...]:
    version = parse_srvr_version(four_letter(server.host, server.port, "srvr"))
    assert version, "srvr gave no version"
    return version


def _trailers(release: tuple[int, ...]) -> tuple[bool, bool]:
    """(digest, lastProcessedZxid) after a snapshot's first seal: the digest from 3.6, the zxid from 3.9."""
    return release >= (3, 6), release >= (3, 9)


def _live(client: KazooClient) -> tuple[dict[str, tuple], dict[str, tuple]]:
    """Every znode as a client sees it, and its ACL."""
    view: dict[str, tuple] = {}
    acls: dict[str, tuple] = {}

    def walk(path: str) -> None:
        data, st = client.get(path)
        kids = client.get_children(path)
        view[path] = (
            data,
            st.version,
            st.czxid,
            st.mzxid,
            st.pzxid,
            st.ephemeralOwner,
            st.numChildren,
            st.dataLength,
            sorted(kids),
        )
        acls[path] = tuple((a.perms, a.id.scheme, a.id.id) for a in client.get_acls(path)[0])
        for kid in kids:
            walk(join(path, kid))

    walk("/")
    return view, acls


def _view(tree: ZkTree) -> dict[str, tuple]:
    return {
        p: (
            n.data,
            n.version,
            n.czxid,
            n.mzxid,
            n.pzxid,
            n.ephemeral_owner,
            n.num_children,
            n.data_length,
            sorted(tree.child_names(p)),
        )
        for p, n in tree.nodes.items()
    }


def _acl_view(acls: dict[str, tuple[ZkAcl, ...]]) -> dict[str, tuple]:
    return {p: tuple((a.perms, a.scheme, a.id) for a in acl) for p, acl in acls.items()}


@dataclass
class Workload:
    server: ZkServer
    data_dir: Path  # ZooKeeper's dataDir (holds version-2/)
    live: dict[str, tuple]
    live_acls: dict[str, tuple]
    zxid: int
    live_session: int
    closed_session: int
    mid_zxid: int
    mid_live: dict[str, tuple]
    release: tuple[int, ...] = (3, 8, 0)  # the server's ZooKeeper version (its files' trailers differ)


def _write_workload(client: KazooClient, other: KazooClient) -> None:
    client.create("/kafka/brokers/topics", makepath=True)
    for t in range(12):
        client.create(f"/kafka/brokers/topics/t{t}", b'{"version":2,"partitions":{"0":[1,2,3]}}')
        client.create(f"/kafka/brokers/topics/t{t}/partitions/0/state", b'{"leader":1}', makepath=True)
    client.create("/kafka/ünïcödé/日本語/ключ", b"\xe2\x82\xac", makepath=True)
    client.create("/kafka/empty", b"")
    _raw(client, Create("/kafka/null", None, KAZOO_OPEN_ACL, 0))  # null data, as Kafka's Java client writes
    client.create("/kafka/big", BIG)
    client.create("/kafka/secure", b"digest-only", acl=[DIGEST_ACL])
    client.create("/kafka/secure/child", b"c", acl=[DIGEST_ACL])
    for i in range(5):
        client.create("/kafka/seq/item-", b"%d" % i, sequence=True, makepath=True)
    client.create("/kafka/brokers/ids/1", b'{"host":"a"}', ephemeral=True, makepath=True)
    other.create("/kafka/brokers/ids/2", b'{"host":"b"}', ephemeral=True)
    other.create("/kafka/gone-with-session", b"x", ephemeral=True)
    _raw(client, _CreateContainer("/kafka/container", b"c", KAZOO_OPEN_ACL, 4))
    client.create("/kafka/container/kid", b"k")
    _raw(client, _CreateTTL("/kafka/ttl", b"t", KAZOO_OPEN_ACL, 5, 3_600_000))
    # a burst of async writes, so the snapshot thread runs while writes keep landing (a fuzzy snapshot)
    for r in [client.create_async(f"/kafka/burst-{i}", b"b" * 90) for i in range(150)]:
        r.get(timeout=10)
    for r in [client.set_async(f"/kafka/burst-{i}", b"B" * 91) for i in range(0, 150, 3)]:
        r.get(timeout=10)
    for r in [client.delete_async(f"/kafka/burst-{i}") for i in range(1, 150, 3)]:
        r.get(timeout=10)


def _write_more(client: KazooClient) -> None:
    client.set("/kafka/big", BIG[::-1])
    client.set("/kafka/empty", b"now-set", version=0)
    client.set_acls("/kafka/brokers/topics/t0", [DIGEST_ACL, make_digest_acl("bob", "pw", read=True)])
    tx = client.transaction()
    tx.create("/kafka/multi", b"m")
    tx.create("/kafka/multi/a", b"a")
    tx.set_data("/kafka/brokers/topics/t1", b'{"version":2}')
    tx.delete("/kafka/brokers/topics/t2/partitions/0/state")
    tx.check("/kafka/brokers/topics/t3", 0)
    assert not any(isinstance(r, Exception) for r in tx.commit())
    failed = client.transaction()  # a failed multi logs error txns and changes nothing
    failed.create("/kafka/never", b"n")
    failed.check("/kafka/brokers/topics/t3", 42)
    assert any(isinstance(r, Exception) for r in failed.commit())
    client.delete("/kafka/brokers/topics/t5", recursive=True)
    client.delete("/kafka/seq", recursive=True)
    client.create("/kafka/seq/again-", b"", sequence=True, makepath=True)


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory, zk_version: str | None) -> Iterator[Workload]:
    base = tmp_path_factory.mktemp("zk-snapfile")
    server = ZkServer(
        base, snap_count=100, jvm_opts=["-Dzookeeper.extendedTypesEnabled=true"], version=zk_version
    ).start()
    client = KazooClient(server.connect_string, auth_data=[("digest", "alice:secret")])
    other = KazooClient(server.connect_string)
    client.start(timeout=15)
    other.start(timeout=15)
    try:
        _write_workload(client, other)
        mid_zxid = _server_zxid(server)
        mid_live, _ = _live(client)
        closed_session = other.client_id[0]
        other.stop()  # closeSession deletes its ephemerals
        other.close()
        _write_more(client)
        live, live_acls = _live(client)
        yield Workload(
            server=server,
            data_dir=base / "data",
            live=live,
            live_acls=live_acls,
            zxid=_server_zxid(server),
            live_session=client.client_id[0],
            closed_session=closed_session,
            mid_zxid=mid_zxid,
            mid_live=mid_live,
            release=_release(server),
        )
    finally:
        client.stop()
        client.close()
        server.stop()


def _copy_dir(src: Path, dst: Path) -> Path:
    """A copy of version-2/ to damage; the server's own files stay as written. Logs keep their
    preallocated size, as a sparse tail of zeros (a plain copy would write 64 MiB per log)."""
    out = dst / "version-2"
    out.mkdir(parents=True)
    for f in (src / "version-2").iterdir():
        if f.name.startswith("log."):
            reader = TxnLogFile(f)
            for _ in reader:
                pass
            with f.open("rb") as i, (out / f.name).open("wb") as o:
                o.write(i.read(reader.end_offset))
                o.truncate(f.stat().st_size)
        else:
            shutil.copy(f, out / f.name)
    return dst


# --- the happy path against the live server ------------------------------------------------------


@pytest.mark.zk_matrix
def test_each_snapshot_plus_logs_equals_the_live_tree(workload: Workload) -> None:
    snaps = list_snapshots(workload.data_dir)
    assert len(snaps) >= 3, [p.name for p in snaps]  # snapCount=100 forced several
    for snap_path in snaps:
        snap = read_snapshot(snap_path)
        report = replay_report(snap, workload.data_dir)
        assert report.zxid == workload.zxid, snap_path.name
        assert report.consistent and report.tree.consistent and report.tree.read_zxid == workload.zxid
        assert not report.torn
        assert _view(report.tree) == workload.live, snap_path.name
        assert _acl_view(report.acls) == workload.live_acls, snap_path.name
        assert workload.live_session in report.sessions
        assert workload.closed_session not in report.sessions
        assert report.extended_owners["/kafka/container"] == -(1 << 63)
        assert report.extended_owners["/kafka/ttl"] == -(1 << 56) | 3_600_000


def test_replay_stops_at_a_zxid(workload: Workload) -> None:
    snap = read_snapshot(list_snapshots(workload.data_dir)[-1])  # snapshot.0, before any write
    assert snap.zxid <= workload.mid_zxid
    tree = replay(snap, workload.data_dir, up_to_zxid=workload.mid_zxid)
    assert tree.read_zxid == workload.mid_zxid
    assert _view(tree) == workload.mid_live
    assert not tree.consistent  # snapshot.0 records no digest zxid: stopping early cannot be proven exact
    if workload.release < (3, 6):
        return  # 3.5 writes no digest: no snapshot says where its fuzzy changes end
    # a snapshot whose digest says where its changes end is exact once replay passes that zxid
    proven = [
        s
        for s in map(read_snapshot, list_snapshots(workload.data_dir))
        if s.fuzzy_end_zxid and s.fuzzy_end_zxid <= workload.mid_zxid
    ]
    assert proven
    for s in proven:
        report = replay_report(s, workload.data_dir, up_to_zxid=workload.mid_zxid)
        assert report.consistent and report.zxid == workload.mid_zxid and not report.warnings
        assert _view(report.tree) == workload.mid_live
    with pytest.raises(BadInputError, match="before the snapshot"):
        replay(read_snapshot(latest_snapshot(workload.data_dir)), workload.data_dir, up_to_zxid=0)


@pytest.mark.zk_matrix
def test_snapshot_contents(workload: Workload) -> None:
    path = latest_snapshot(workload.data_dir)
    assert path == list_snapshots(workload.data_dir)[0]
    assert latest_snapshot(path.parent) == path and latest_snapshot(path) == path
    snap = read_snapshot(path)
    assert snap.zxid == int(path.name.split(".")[1], 16) and snap.compression == ""
    digest, last = _trailers(workload.release)
    assert snap.seals_verified == 1 + digest + last  # seal 1, then one per trailer this release writes
    if digest:
        assert snap.digest is not None and snap.digest.version == 2 and snap.digest.zxid >= snap.zxid
    else:
        assert snap.digest is None
    if last:
        assert snap.last_processed_zxid is not None and snap.last_processed_zxid >= snap.zxid
    else:
        assert snap.last_processed_zxid is None
    tree = snap.tree
    assert not tree.consistent and tree.read_zxid == snap.zxid
    assert {"zookeeper", "kafka"} <= set(tree.child_names("/"))
    assert tree["/kafka/big"].data_length == len(BIG)
    assert tree["/kafka/null"].data is None and tree["/kafka/null"].data_length == 0
    assert tree["/kafka/ünïcödé/日本語/ключ"].data == "€".encode()
    assert snap.acls["/kafka/secure"] == (ZkAcl(31, "digest", DIGEST_ACL.id.id),)
    assert snap.acls["/"] == snapshot_file.OPEN_ACL_UNSAFE
    for p, node in tree.nodes.items():
        assert node.num_children == len(tree.child_names(p))
        assert node.data_length == len(node.data or b"")
        assert type(node) is ZNode  # built the one fast way (migrator.zk.tree), a ZNode in every respect
    with pytest.raises(dataclasses.FrozenInstanceError):
        tree["/kafka/big"].data = b"changed"  # type: ignore[misc]
    assert tree.max_zxid == max(max(n.mzxid, n.pzxid) for n in tree.nodes.values())
    assert read_snapshot(path, verify=False).seals_verified == 0


@pytest.mark.zk_matrix
def test_zookeepers_snapshot_formatter_agrees(workload: Workload) -> None:
    """ZooKeeper's own SnapshotFormatter reads the same nodes and stats from the same file."""
    path = latest_snapshot(workload.data_dir)
    out = subprocess.run(
        [
            "java",
            "-cp",
            find_classpath(workload.server.version),
            "org.apache.zookeeper.server.SnapshotFormatter",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    theirs: dict[str, dict[str, int]] = {}
    for block in out.split("----\n"):
        lines = block.splitlines()
        if not lines or not lines[0].startswith("/"):
            continue
        fields = dict(re.findall(r"^  (\w+) = (.*)$", block, re.M))
        theirs[lines[0]] = {
            k: int(fields[k], 16) if fields[k].startswith("0x") else int(fields[k])
            for k in ("cZxid", "mZxid", "pZxid", "dataVersion", "ephemeralOwner", "dataLength", "cversion")
        }
    snap = read_snapshot(path)
    # DataTree counts the root twice (under "" and "/")
    assert f"ZNode Details (count={len(snap.tree) + 1})" in out
    ours = {
        p: {
            "cZxid": n.czxid,
            "mZxid": n.mzxid,
            "pZxid": n.pzxid,
            "dataVersion": n.version,
            "ephemeralOwner": snap.extended_owners.get(p, n.ephemeral_owner) & (2**64 - 1),
            "dataLength": n.data_length,
            "cversion": snap.cversions.get(p, 0),
        }
        for p, n in snap.tree.nodes.items()
    }
    assert ours == theirs


# --- compressed snapshots -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compressed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workload]:
    """One dataDir written first with gz snapshots, then (after a restart) with snappy ones."""
    base = tmp_path_factory.mktemp("zk-snapfile-z")
    server = ZkServer(base, snap_count=100, jvm_opts=["-Dzookeeper.snapshot.compression.method=gz"]).start()
    try:
        client = KazooClient(server.connect_string)
        client.start(timeout=15)
        for r in [client.create_async(f"/gz-{i}", b"g" * i) for i in range(160)]:
            r.get(timeout=10)
        # a restart mid-write would leave half a file; the first .gz may predate the data
        _await_whole_snapshots(base / "data", ".gz", holding=b"gggg")
        client.stop()
        client.close()
        server.jvm_opts = ["-Dzookeeper.snapshot.compression.method=snappy"]
        server.restart()
        client = KazooClient(server.connect_string)
        client.start(timeout=15)
        for r in [client.create_async(f"/snappy-{i}", b"s" * i) for i in range(160)]:
            r.get(timeout=10)
        _await_whole_snapshots(base / "data", ".snappy")
        live, live_acls = _live(client)
        yield Workload(
            server, base / "data", live, live_acls, _server_zxid(server), client.client_id[0], 0, 0, {}
        )
        client.stop()
        client.close()
    finally:
        server.stop()


def _await_whole_snapshots(data_dir: Path, suffix: str, holding: bytes = b"", timeout: float = 60.0) -> None:
    """ZooKeeper writes a snapshot on its own thread: wait until one with `suffix` (and, for .gz,
    `holding` in its stream) exists and every snapshot reads whole (a loaded machine may still be
    writing one when the writes return)."""
    deadline = time.monotonic() + timeout
    while True:
        snaps = list_snapshots(data_dir)
        try:
            for p in snaps:
                try:
                    read_snapshot(p)
                except SnappyUnavailableError:
                    pass
            if any(
                p.suffix == suffix and (not holding or holding in zlib.decompress(p.read_bytes(), wbits=31))
                for p in snaps
            ):
                return
        except (BadInputError, OSError, zlib.error):
            pass
        assert time.monotonic() < deadline, (
            f"no whole {suffix} snapshot in {data_dir}: {[p.name for p in snaps]}"
        )
        time.sleep(0.1)


def test_gz_and_snappy_snapshots(compressed: Workload) -> None:
    snaps = list_snapshots(compressed.data_dir)
    kinds = {p.suffix for p in snaps}
    assert {".gz", ".snappy"} <= kinds, [p.name for p in snaps]
    if not snapshot_file._snappy_decoders():
        with pytest.raises(SnappyUnavailableError):
            read_snapshot(next(p for p in snaps if p.suffix == ".snappy"))
        snaps = [p for p in snaps if p.suffix != ".snappy"]
    for p in snaps:
        snap = read_snapshot(p)
        assert snap.compression == p.suffix[1:]
        assert snap.seals_verified == 2
        report = replay_report(snap, compressed.data_dir)
        assert report.zxid == compressed.zxid
        assert _view(report.tree) == compressed.live, p.name


def test_without_a_snappy_decoder_the_error_says_what_to_install(
    compressed: Workload, monkeypatch: pytest.MonkeyPatch
) -> None:
    snappy = next(p for p in list_snapshots(compressed.data_dir) if p.suffix == ".snappy")
    monkeypatch.setattr(snapshot_file, "_snappy_decoders", lambda: [])
    with pytest.raises(SnappyUnavailableError, match="cramjam") as e:
        read_snapshot(snappy)
    assert str(snappy) in str(e.value)


def test_damaged_gz_snapshot(compressed: Workload, tmp_path: Path) -> None:
    # the first .gz snapshot may predate the workload's data: take one that holds it
    gzs = [p for p in list_snapshots(compressed.data_dir) if p.suffix == ".gz"]
    gz = next(p for p in gzs if b"gggg" in zlib.decompress(p.read_bytes(), wbits=31))
    raw = gz.read_bytes()
    cut = tmp_path / gz.name
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(SnapshotTruncatedError, match="gzip stream ends early"):
        read_snapshot(cut)
    # a valid gzip of a stream with one flipped byte: gzip's CRC is fine, ZooKeeper's seal is not
    inner = bytearray(zlib.decompress(raw, wbits=31))
    i = inner.index(b"gggg")
    inner[i] ^= 1
    flipped = tmp_path / "flipped" / gz.name
    flipped.parent.mkdir()
    flipped.write_bytes(_gzip(bytes(inner)))
    with pytest.raises(SnapshotChecksumError, match="uncompressed stream"):
        read_snapshot(flipped)


def _gzip(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=31)
    return c.compress(data) + c.flush()


# --- damaged snapshots ----------------------------------------------------------------------------


def _snap_copy(workload: Workload, tmp_path: Path) -> tuple[Path, bytes]:
    src = latest_snapshot(workload.data_dir)
    dst = tmp_path / src.name
    shutil.copy(src, dst)
    return dst, dst.read_bytes()


def _one_line(err: BaseException, file: Path) -> None:
    msg = str(err)
    assert "\n" not in msg and str(file) in msg and "byte" in msg, msg


def test_truncated_snapshot(workload: Workload, tmp_path: Path) -> None:
    path, raw = _snap_copy(workload, tmp_path)
    for cut in (len(raw) // 2, len(raw) - 3, 10):
        path.write_bytes(raw[:cut])
        with pytest.raises(SnapshotTruncatedError) as e:
            read_snapshot(path)
        _one_line(e.value, path)
        assert e.value.offset is not None and e.value.offset <= cut
        assert isinstance(e.value, BadInputError) and e.value.exit_code == 2


def test_flipped_byte_fails_the_checksum(workload: Workload, tmp_path: Path) -> None:
    path, raw = _snap_copy(workload, tmp_path)
    i = raw.index(b"digest-only")
    path.write_bytes(raw[:i] + b"D" + raw[i + 1 :])
    with pytest.raises(SnapshotChecksumError, match="checksum mismatch") as e:
        read_snapshot(path)
    _one_line(e.value, path)
    assert read_snapshot(path, verify=False).tree["/kafka/secure"].data == b"Digest-only"
    # a flip inside the digest trailer is caught by the second seal
    path.write_bytes(raw[:-20] + bytes([raw[-20] ^ 0x40]) + raw[-19:])
    with pytest.raises(SnapshotChecksumError):
        read_snapshot(path)


def test_bad_magic_version_and_lengths(workload: Workload, tmp_path: Path) -> None:
    path, raw = _snap_copy(workload, tmp_path)
    path.write_bytes(b"ZKLG" + raw[4:])
    with pytest.raises(SnapshotFormatError, match="bad magic") as e:
        read_snapshot(path)
    _one_line(e.value, path)
    path.write_bytes(raw[:4] + struct.pack(">i", 3) + raw[8:])
    with pytest.raises(SnapshotFormatError, match="version 3"):
        read_snapshot(path)
    i = raw.index(b"/kafka/big") - 4  # the length of that path
    path.write_bytes(raw[:i] + struct.pack(">i", 0x7FFFFFFF) + raw[i + 4 :])
    with pytest.raises(SnapshotFormatError, match="unreasonable path length") as e:
        read_snapshot(path)
    assert e.value.offset == i
    j = i + 4 + len(b"/kafka/big")  # its data length: 500,224 is over a 256 KiB limit
    path.write_bytes(raw)
    with pytest.raises(SnapshotFormatError, match="unreasonable data length"):
        read_snapshot(tmp_path / path.name, jute_maxbuffer=128 * 1024)
    assert struct.unpack(">i", raw[j : j + 4])[0] == len(BIG)
    with pytest.raises(SnapshotFormatError, match="not a snapshot file name"):
        read_snapshot(tmp_path)


def test_snapshot_and_log_errors_share_one_base(tmp_path: Path) -> None:
    snap, log = tmp_path / "snapshot.1", tmp_path / "log.1"
    snap.write_bytes(b"\0" * 32)
    log.write_bytes(b"\0" * 32)
    with pytest.raises(SnapshotFormatError) as s:
        read_snapshot(snap)
    with pytest.raises(TxnLogFormatError) as t:
        list(TxnLogFile(log))
    for err, file in ((s.value, snap), (t.value, log)):
        assert (
            isinstance(err, ZkFileError) and err.exit_code == 2 and (err.file, err.offset) == (str(file), 0)
        )
        _one_line(err, file)
    assert not isinstance(s.value, TxnLogError) and not isinstance(t.value, SnapshotFileError)


def test_latest_snapshot_skips_an_incomplete_newer_file(workload: Workload, tmp_path: Path) -> None:
    data = _copy_dir(workload.data_dir, tmp_path)
    newest = list_snapshots(data)[0]
    partial = newest.parent / "snapshot.ffffff"
    partial.write_bytes(newest.read_bytes()[:1000])  # a snapshot still being written
    assert latest_snapshot(data) == newest
    assert latest_snapshot(data / "version-2") == newest


def test_directories_without_snapshots(tmp_path: Path) -> None:
    with pytest.raises(NoSnapshotError, match="no snapshot"):
        latest_snapshot(tmp_path)
    (tmp_path / "version-2").mkdir()
    (tmp_path / "version-2" / "snapshot.5").write_bytes(b"ZKSN")
    with pytest.raises(NoSnapshotError, match="none of 1 snapshot files is complete"):
        latest_snapshot(tmp_path)
    with pytest.raises(NoSnapshotError, match="no such directory"):
        latest_snapshot(tmp_path / "missing")


# --- damaged logs ---------------------------------------------------------------------------------


def _entries(log: Path) -> list[tuple[int, int, int]]:
    """(offset, zxid, end) of every entry."""
    out = []
    with log.open("rb") as f:
        for e in TxnLogFile(log):
            f.seek(e.offset + 8)
            (n,) = struct.unpack(">i", f.read(4))
            out.append((e.offset, e.zxid, e.offset + 12 + n + 1))
    return out


def _patch(file: Path, offset: int, data: bytes) -> None:
    with file.open("r+b") as f:
        f.seek(offset)
        f.write(data)


@pytest.mark.zk_matrix
def test_log_iteration(workload: Workload) -> None:
    logs = log_files(workload.data_dir)
    assert len(logs) >= 3 and logs == sorted(logs, key=lambda p: int(p.name[4:], 16))
    zxids = []
    types = set()
    for log in logs:
        reader = TxnLogFile(log)
        for e in reader:
            zxids.append(e.zxid)
            types.add(e.header.type)
            if e.header.type != -1 and workload.release >= (3, 6):  # error txns carry no digest, nor 3.5's
                assert e.digest is not None and e.digest[0] == 2
            elif workload.release < (3, 6):
                assert e.digest is None
        assert reader.torn is None and reader.entries > 0
        assert os.path.getsize(log) > reader.end_offset  # preallocated zeros follow
    assert zxids == list(range(1, workload.zxid + 1))
    assert {1, 2, 5, 7, 14, 19, 21, -10, -11} <= types  # create, delete, setData, setACL, multi, ...


def test_corrupt_log_entry(workload: Workload, tmp_path: Path) -> None:
    data = _copy_dir(workload.data_dir, tmp_path)
    log = log_files(data)[-1]
    entries = _entries(log)
    offset, zxid, end = entries[len(entries) // 2]
    with log.open("rb") as f:
        f.seek(end - 2)
        byte = f.read(1)[0]
    _patch(log, end - 2, bytes([byte ^ 0xFF]))  # inside the txn bytes
    with pytest.raises(TxnLogChecksumError, match="checksum mismatch") as e:
        replay(read_snapshot(latest_snapshot(data)), data)
    _one_line(e.value, log)
    assert e.value.offset == offset


def test_torn_final_entry_ends_the_replay_there(workload: Workload, tmp_path: Path) -> None:
    data = _copy_dir(workload.data_dir, tmp_path)
    log = log_files(data)[-1]
    offset, zxid, end = _entries(log)[-1]
    assert zxid == workload.zxid
    _patch(log, offset + 20, bytes(end - offset - 20))  # the crash left the entry's start only
    report = replay_report(read_snapshot(latest_snapshot(data)), data)
    assert report.zxid == workload.zxid - 1
    assert [(t.file, t.offset) for t in report.torn] == [(log, offset)]
    assert "torn final entry" in report.warnings[0] and str(log) in report.warnings[0]
    # the same partial entry with data after it is corruption, not a torn write
    _patch(log, end + 4096, b"\x01")
    with pytest.raises(TxnLogFormatError, match="followed by more data"):
        replay(read_snapshot(latest_snapshot(data)), data)


def test_a_missing_log_file_is_reported(workload: Workload, tmp_path: Path) -> None:
    data = _copy_dir(workload.data_dir, tmp_path)
    oldest = list_snapshots(data)[-1]
    logs = log_files(data, 0)
    logs[1].unlink()
    with pytest.raises(MissingTxnsError, match="missing"):
        replay(read_snapshot(oldest), data)


def test_bad_log_magic(workload: Workload, tmp_path: Path) -> None:
    data = _copy_dir(workload.data_dir, tmp_path)
    log = log_files(data)[-1]
    _patch(log, 0, b"ZKSN")
    with pytest.raises(TxnLogFormatError, match="bad magic") as e:
        list(TxnLogFile(log))
    _one_line(e.value, log)


# --- trailers other ZooKeeper versions write ------------------------------------------------------


def _sealed(body: bytes) -> bytes:
    """`body` followed by SnapStream's seal: Adler32 of everything so far, then the string "/"."""
    return body + struct.pack(">q", zlib.adler32(body)) + struct.pack(">i", 1) + b"/"


@pytest.mark.parametrize(
    ("trailer", "digest", "last_zxid", "seals"),
    [
        ("none", None, None, 1),  # 3.5, or digest disabled
        ("digest+last", (0x42, 2, 123456789), 0x43, 3),  # 3.9+ defaults
        ("last", None, 0x43, 2),  # 3.9+ with zookeeper.digest.enabled=false
        ("hex-digest", (0x42, 1, 0xABCDEF), None, 2),  # digest version 1 wrote the value as hex text
    ],
)
def test_snapshot_trailers_of_other_versions(
    workload: Workload, tmp_path: Path, trailer: str, digest: tuple | None, last_zxid: int | None, seals: int
) -> None:
    src = latest_snapshot(workload.data_dir)
    raw = src.read_bytes()
    digest_written, last_written = _trailers(workload.release)
    # after seal 1: the digest (20 bytes) and its seal (13), lastProcessedZxid (8) and its seal
    body = raw[: len(raw) - 33 * digest_written - 21 * last_written]
    assert (
        body.endswith(b"\x00\x00\x00\x01/")
        and zlib.adler32(body[:-13]) == struct.unpack(">q", body[-13:-5])[0]
    )
    if trailer in ("digest+last", "hex-digest"):
        zxid, version, value = digest
        if version >= 2:
            body = _sealed(body + struct.pack(">qiq", zxid, version, value))
        else:
            text = f"{value:x}".encode()
            body = _sealed(body + struct.pack(">qii", zxid, version, len(text)) + text)
    if last_zxid is not None:
        body = _sealed(body + struct.pack(">q", last_zxid))
    path = tmp_path / src.name
    path.write_bytes(body)
    snap = read_snapshot(path)
    assert snap.seals_verified == seals
    assert (
        (snap.digest.zxid, snap.digest.version, snap.digest.value) == digest
        if digest
        else snap.digest is None
    )
    assert snap.last_processed_zxid == last_zxid
    assert snap.fuzzy_end_zxid == (max(digest[0], last_zxid or 0) if digest else last_zxid)
    assert _view(snap.tree) == _view(read_snapshot(src).tree)
    path.write_bytes(body[:-3])  # the last trailer cut short
    with pytest.raises(SnapshotTruncatedError):
        read_snapshot(path)


def test_jute_strings_with_surrogate_pairs() -> None:
    """Jute writes each UTF-16 unit on its own: U+1F600 arrives as two encoded surrogates."""
    cesu = "a😀b".encode("utf-16-le").decode("utf-16-le")
    java_bytes = b"a" + bytes([0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80]) + b"b"
    assert snapshot_file._decode_jute(java_bytes) == cesu == "a😀b"
    assert snapshot_file._decode_jute(b"\xff") == "\ufffd"  # not UTF-8 at all: Java substitutes
