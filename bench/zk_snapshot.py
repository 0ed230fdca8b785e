"""Parse a Kafka-sized ZooKeeper snapshot: migrator.zk.snapshot_file against ZooKeeper's SnapshotFormatter.

Writes a snapshot in ZooKeeper's own format (FileHeader, sessions, ACL cache, pre-order nodes, seal,
empty digest, seal) shaped like a ZK-mode Kafka cluster of 200,000 partitions (~420,000 znodes),
checks that ZooKeeper accepts it (SnapshotFormatter reads it; optionally a real server loads it and
verifies the seal), then times, in one run, on the same file, each reader N times round robin (so a
change in the shared machine's load falls on all alike), and reports medians of wall and CPU seconds:

- zk2kraft's `read_snapshot` in this process (file read + Adler32 + full ZkTree), and with verify=False;
- the same from a fresh `python` process (interpreter start + import + parse);
- `java ... org.apache.zookeeper.server.SnapshotFormatter FILE > /dev/null` (Debian's jars), and on a
  tiny snapshot for the JVM's start-up cost, reported raw and net of it;
- ZooKeeper's own loader without SnapshotFormatter's text output (`FileSnap.deserialize` plus the
  seal check, what a server does at start-up), through a ten-line Java main compiled here: in a fresh
  JVM, and warm (the second load in one JVM, after the JIT has compiled it).

    .venv/bin/python bench/zk_snapshot.py [--partitions 200000] [--per-topic 30] [--runs 3] [--no-server-check]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from migrator.zk.snapshot_file import read_snapshot  # noqa: E402
from zk_fixtures.server import ZkServer, find_classpath, four_letter  # noqa: E402

SESSION = 0x1000A2B3C4D0000
NODE_TAIL = struct.Struct(">qqqqqiiiqq")  # acl id, then StatPersisted
T0 = 1_700_000_000_000

# Calls ZooKeeper's public persistence API; the timing is of ZooKeeper's code, not of this file.
JAVA_LOADER = """
import java.io.File;
import java.util.HashMap;
import java.util.zip.CheckedInputStream;
import org.apache.jute.BinaryInputArchive;
import org.apache.jute.InputArchive;
import org.apache.zookeeper.server.DataTree;
import org.apache.zookeeper.server.persistence.FileSnap;
import org.apache.zookeeper.server.persistence.SnapStream;

public class ZkSnapshotLoad {
    public static void main(String[] args) throws Exception {
        for (int r = 0; r < Integer.parseInt(args[1]); r++) {
            long t = System.nanoTime();
            DataTree tree = new DataTree();
            try (CheckedInputStream in = SnapStream.getInputStream(new File(args[0]))) {
                InputArchive ia = BinaryInputArchive.getArchive(in);
                new FileSnap(null).deserialize(tree, new HashMap<>(), ia);
                long sum = in.getChecksum().getValue();
                if (ia.readLong("val") != sum) throw new IllegalStateException("seal mismatch");
            }
            System.out.println(tree.getNodeCount() + " " + (System.nanoTime() - t) / 1e9);
        }
    }
}
"""


def kafka_nodes(partitions: int, per_topic: int, brokers: int = 12) -> list[tuple[str, bytes | None, int]]:
    """(path, data, ephemeralOwner) of a ZK-mode Kafka cluster, in creation (and pre-)order."""
    topics = -(-partitions // per_topic)
    out: list[tuple[str, bytes | None, int]] = [
        ("", None, 0),
        ("/zookeeper", b"", 0),
        ("/zookeeper/quota", b"", 0),
    ]
    add = out.append
    add(("/zookeeper/config", b"", 0))
    add(("/cluster", None, 0))
    add(("/cluster/id", b'{"version":"1","id":"Yx7fQ2mTR4ao3kq9ZfT0Ag"}', 0))
    add(("/controller_epoch", b"12", 0))
    add(
        (
            "/controller",
            b'{"version":2,"brokerid":3,"timestamp":"1700000000000","kraftControllerEpoch":-1}',
            SESSION,
        )
    )
    add(("/brokers", None, 0))
    add(("/brokers/ids", None, 0))
    for b in range(1, brokers + 1):
        add(
            (
                f"/brokers/ids/{b}",
                json.dumps(
                    {
                        "features": {},
                        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
                        "endpoints": [f"PLAINTEXT://broker-{b}.kafka.svc:9092"],
                        "jmx_port": -1,
                        "port": 9092,
                        "host": f"broker-{b}.kafka.svc",
                        "version": 5,
                        "timestamp": "1700000000000",
                    },
                    separators=(",", ":"),
                ).encode(),
                SESSION + b,
            )
        )
    add(("/brokers/seqid", None, 0))
    add(("/brokers/topics", None, 0))
    made = 0
    for t in range(topics):
        n = min(per_topic, partitions - made)
        made += n
        name = f"topic-{t:05d}"
        assign = {str(p): [(p + t + r) % brokers + 1 for r in range(3)] for p in range(n)}
        topic_json = json.dumps(
            {
                "partitions": assign,
                "topic_id": f"{t:022d}",
                "adding_replicas": {},
                "removing_replicas": {},
                "version": 3,
            },
            separators=(",", ":"),
        ).encode()
        add((f"/brokers/topics/{name}", topic_json, 0))
        add((f"/brokers/topics/{name}/partitions", None, 0))
        for p in range(n):
            base = f"/brokers/topics/{name}/partitions/{p}"
            isr = assign[str(p)]
            add((base, None, 0))
            state = (
                f'{{"controller_epoch":12,"leader":{isr[0]},"version":1,"leader_epoch":{(p * 7 + t) % 50},'
                f'"isr":[{isr[0]},{isr[1]},{isr[2]}]}}'
            ).encode()
            add((base + "/state", state, 0))
    add(("/config", None, 0))
    add(("/config/changes", None, 0))
    add(("/config/clients", None, 0))
    add(("/config/users", None, 0))
    add(("/config/brokers", None, 0))
    add(("/config/topics", None, 0))
    for t in range(topics):
        add((f"/config/topics/topic-{t:05d}", b'{"version":1,"config":{"retention.ms":"604800000"}}', 0))
    add(("/admin", None, 0))
    add(("/admin/delete_topics", None, 0))
    add(("/isr_change_notification", None, 0))
    add(("/latest_producer_id_block", b'{"version":1,"broker":3,"block_start":"0","block_end":"999"}', 0))
    add(("/log_dir_event_notification", None, 0))
    add(("/feature", b'{"features":{},"version":2,"status":1}', 0))
    return out


def write_snapshot(path: Path, nodes: list[tuple[str, bytes | None, int]]) -> int:
    """ZooKeeper's FileSnap.serialize layout; node zxids follow creation order. Returns the zxid."""
    index = {p: i for i, (p, _, _) in enumerate(nodes)}
    pzxid = [i + 1 for i in range(len(nodes))]
    cversion = [0] * len(nodes)
    for i, (p, _, _) in enumerate(nodes[1:], start=1):
        parent = index[p[: p.rfind("/")]]
        pzxid[parent] = i + 1
        cversion[parent] += 1
    zxid = len(nodes)
    out = bytearray(struct.pack(">iiq", 0x5A4B534E, 2, -1))
    sessions = sorted({o for _, _, o in nodes if o})
    out += struct.pack(">i", len(sessions))
    for s in sessions:
        out += struct.pack(">qi", s, 18000)
    acl = struct.pack(">i", 31) + struct.pack(">i", 5) + b"world" + struct.pack(">i", 6) + b"anyone"
    out += struct.pack(">i", 1) + struct.pack(">q", 1) + struct.pack(">i", 1) + acl
    pack = NODE_TAIL.pack
    i32 = struct.Struct(">i").pack
    for i, (p, data, owner) in enumerate(nodes):
        raw = p.encode()
        out += i32(len(raw))
        out += raw
        if data is None:
            out += i32(-1)
        else:
            out += i32(len(data))
            out += data
        z = i + 1
        out += pack(-1 if i == 0 else 1, z, z, T0 + i, T0 + i, 0, cversion[i], 0, owner, pzxid[i])
    out += i32(1) + b"/"
    out += struct.pack(">q", zlib.adler32(out)) + i32(1) + b"/"
    out += struct.pack(">qiq", 0, 2, 0)  # an empty digest, as ZooKeeper writes before its first txn
    out += struct.pack(">q", zlib.adler32(out)) + i32(1) + b"/"
    path.write_bytes(out)
    return zxid


def _cpu() -> float:
    """CPU seconds of this process and its finished children (user + system)."""
    me = time.process_time()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me + kids.ru_utime + kids.ru_stime


def measure(fn) -> tuple[float, float]:
    """(wall, CPU) seconds of one call. CPU time is steadier than wall on a shared machine; a JVM's
    counts its JIT and GC threads too. The result is freed after the clocks stop (freeing is not parsing)."""
    c = _cpu()
    t = time.perf_counter()
    result = fn()
    wall = time.perf_counter() - t
    cpu = _cpu() - c
    del result
    return wall, cpu


def compile_loader(tmp: Path) -> Path:
    src = tmp / "ZkSnapshotLoad.java"
    src.write_text(JAVA_LOADER)
    subprocess.run(["javac", "-cp", find_classpath(), "-d", str(tmp), str(src)], check=True)
    return tmp


def java_loader(classes: Path, file: Path, loads: int) -> list[tuple[int, float]]:
    """(znode count, seconds) of each load, measured inside the JVM."""
    out = subprocess.run(
        ["java", "-cp", f"{classes}:{find_classpath()}", "ZkSnapshotLoad", str(file), str(loads)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [(int(c), float(t)) for c, t in (line.split() for line in out.splitlines())]


def java_formatter(file: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["java", "-cp", find_classpath(), "org.apache.zookeeper.server.SnapshotFormatter", str(file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=True,
    )


def server_accepts(snapshot: Path, expect: int) -> str:
    """Start a real ZooKeeper on a copy of the snapshot: it checks the seal and loads every node (and
    then writes its own snapshot, which is why it gets a copy)."""
    with tempfile.TemporaryDirectory(prefix="zk-snapshot-bench-server-") as tmp:
        (Path(tmp) / "data" / "version-2").mkdir(parents=True)
        shutil.copy(snapshot, Path(tmp) / "data" / "version-2" / snapshot.name)
        return _load(Path(tmp), expect)


def _load(base: Path, expect: int) -> str:
    server = ZkServer(base).start(timeout=120)
    try:
        m = re.search(r"zk_znode_count\s+(\d+)", four_letter(server.host, server.port, "mntr"))
        count = int(m.group(1)) if m else -1
    finally:
        server.stop()
    assert count == expect, f"ZooKeeper loaded {count} znodes, expected {expect}"
    return f"a ZooKeeper 3.8 server loaded it ({count} znodes)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=200_000)
    ap.add_argument("--per-topic", type=int, default=30)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-server-check", action="store_true", help="skip loading the file into a real server")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="zk-snapshot-bench-") as tmp:
        v2 = Path(tmp) / "data" / "version-2"
        v2.mkdir(parents=True)
        nodes = kafka_nodes(args.partitions, args.per_topic)
        t = time.perf_counter()
        zxid = write_snapshot(v2 / "snapshot.0", nodes)
        big = v2 / f"snapshot.{zxid:x}"
        (v2 / "snapshot.0").rename(big)
        wrote = time.perf_counter() - t
        size = big.stat().st_size
        tiny_dir = Path(tmp) / "tiny"
        tiny_dir.mkdir()
        tiny = tiny_dir / "snapshot.4"
        write_snapshot(tiny, nodes[:4])
        print(
            f"snapshot: {len(nodes):,} znodes, {size / 1e6:.1f} MB, written in {wrote:.2f}s by the bench's writer"
        )

        snap = read_snapshot(big)
        assert len(snap.tree) == len(nodes) and snap.seals_verified == 2
        java_formatter(big)  # ZooKeeper's own reader accepts the file (it would throw otherwise)
        classes = compile_loader(Path(tmp))
        loaded = java_loader(classes, big, 1)[0][0]
        assert loaded == len(nodes) + 1, loaded  # DataTree counts the root twice ("" and "/")
        checks = [
            "SnapshotFormatter read it",
            f"FileSnap.deserialize loaded it and its seal matched ({loaded})",
        ]
        if not args.no_server_check:
            checks.append(server_accepts(big, len(nodes) + 1))  # mntr counts the root twice
        print("checks:", "; ".join(checks))

        cmd = [
            sys.executable,
            "-c",
            f"import sys, re; sys.path.insert(0, {str(ROOT)!r}); "
            "from migrator.zk.snapshot_file import read_snapshot; read_snapshot(sys.argv[1]); "
            # VmHWM, not ru_maxrss: a forked child's ru_maxrss starts at its parent's
            "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))",
            str(big),
        ]
        rss: list[int] = []
        measures = {
            "ours": lambda: read_snapshot(big),
            "ours_noverify": lambda: read_snapshot(big, verify=False),
            "ours_proc": lambda: rss.append(
                int(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            ),
            "java_big": lambda: java_formatter(big),
            "java_tiny": lambda: java_formatter(tiny),
            "load_fresh": lambda: java_loader(classes, big, 1),
        }
        # Round robin, so that a change in the shared machine's load falls on every reader alike.
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in measures}
        warm: list[float] = []
        for _ in range(args.runs):
            for name, fn in measures.items():
                samples[name].append(measure(fn))
            warm.append(java_loader(classes, big, 2)[1][1])  # the second load in one JVM: JIT warm
        med = {
            k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
            for k, v in samples.items()
        }
        ours, ours_noverify, ours_proc = med["ours"], med["ours_noverify"], med["ours_proc"]
        java_big, java_tiny, load_fresh = med["java_big"], med["java_tiny"], med["load_fresh"]
        java_net = (java_big[0] - java_tiny[0], java_big[1] - java_tiny[1])
        load_warm = (statistics.median(warm), None)

    mb = size / 1e6

    def row(name: str, t: tuple[float, float | None]) -> str:
        wall, cpu = t
        cpu_s = "n/a" if cpu is None else f"{cpu:.2f}"
        return f"| {name} | {wall:.2f} | {cpu_s} | {mb / wall:.1f} | {len(nodes) / wall / 1e3:.0f} |"

    load = os.getloadavg()
    print()
    print(
        f"{len(nodes):,} znodes, {mb:.1f} MB, median of {args.runs}, {os.cpu_count()} cores, "
        f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}"
    )
    print("| reader | wall s | CPU s | MB/s (wall) | k znodes/s (wall) |")
    print("| --- | --- | --- | --- | --- |")
    print(row("zk2kraft read_snapshot, in process (Adler32 verified)", ours))
    print(row("zk2kraft read_snapshot, in process, verify=False", ours_noverify))
    print(row("zk2kraft, fresh python process (start + import + parse)", ours_proc))
    print(row("ZooKeeper SnapshotFormatter (raw, JVM start included)", java_big))
    print(row("ZooKeeper SnapshotFormatter (net of JVM start)", java_net))
    print(row("ZooKeeper FileSnap.deserialize + seal, fresh JVM", load_fresh))
    print(row("ZooKeeper FileSnap.deserialize + seal, warm JIT, in JVM", load_warm))
    print(
        f"JVM start + SnapshotFormatter on a 4-node snapshot: {java_tiny[0]:.2f}s wall, {java_tiny[1]:.2f}s CPU"
    )
    print(f"zk2kraft process peak RSS: {statistics.median(rss) / 1024:.0f} MiB")
    print(
        f"wall ratios (above 1: zk2kraft is faster): SnapshotFormatter raw / zk2kraft process = "
        f"{java_big[0] / ours_proc[0]:.2f}x; SnapshotFormatter net / zk2kraft in process = "
        f"{java_net[0] / ours[0]:.2f}x; ZooKeeper loader fresh JVM / zk2kraft process = "
        f"{load_fresh[0] / ours_proc[0]:.2f}x; ZooKeeper loader warm / zk2kraft in process = "
        f"{load_warm[0] / ours[0]:.2f}x"
    )


if __name__ == "__main__":
    main()
