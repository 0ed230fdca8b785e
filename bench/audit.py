"""Audit a generated cluster of N partitions (default 1,000,000) in dual-write, both sides on disk.

Setup (not timed as the audit): the cluster as a model image, its metadata log written the way the
copy writes it (bootstrap, one `ZK Migration` transaction, MetadataLog.append in 10,000-record
batches), and ZooKeeper's view of the same cluster as a native snapshot file written in ZooKeeper's
own format by bench/zk_snapshot.py's writer (which checks against SnapshotFormatter and a real
server; that bench also compares the snapshot parser's MB/s with SnapshotFormatter). The snapshot
holds a KRaft-held /controller and a /migration at the log's last offset, as after the first sync.

Timed, side by side in one run: `python -m spark_audit.audit --zk-snapshot DIR --log-dir DIR --master M`
in a fresh process (JVM start included) for each of `--masters` (default local[2] and local[1]: the
speed-up), with `--old` also the whole fold of the log (`--whole-fold`, as before the map-reduce) on
local[2], with `--cluster` also a standalone cluster (tests/spark_cluster.py: a master and two
1-core workers, 2 GiB executors). Wall time; peak RSS of the JVMs, of the Python workers together
and of the largest single Python worker (one task at a time per worker: the peak per task), sampled
every 0.2 s; the load average before each run. Every audit must come back consistent (exit 0).
`--log-fold-cpu` instead measures the log's fold without Spark: CPU seconds of the whole replay
against the map-reduce's plan, map and fold steps.

    .venv/bin/python bench/audit.py [--partitions 1000000] [--per-topic 30] [--masters local[2],local[1]] [--old] [--cluster]
    .venv/bin/python bench/audit.py --partitions 200000 --log-fold-cpu
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from zk_snapshot import write_snapshot  # noqa: E402

from migrator.kraft.image import records_from_image  # noqa: E402
from migrator.kraft.log import MetadataLog  # noqa: E402
from migrator.kraft.records import record, uuid_to_kafka  # noqa: E402
from migrator.migration.copy import COPY_TRANSACTION, bootstrap_records  # noqa: E402
from migrator.model import (  # noqa: E402
    ClusterImage,
    ConfigEntity,
    ControllerZnode,
    MigrationZnode,
    Partition,
    ProducerIdBlock,
    Topic,
)
from migrator.zk import codec  # noqa: E402

CLUSTER_ID = "Yx7fQ2mTR4ao3kq9ZfT0Ag"
BROKERS = 12
SESSION = 0x1000A2B3C4D0000
NODE_ID = 3000
KRAFT_EPOCH = 7
ZK_CONTROLLER_EPOCH = 12


def topic_id(t: int) -> str:
    return uuid_to_kafka(uuid.UUID(int=(0x5EED << 96) | (t + 1)))


def replicas(t: int, p: int) -> list[int]:
    return [(p + t + r) % BROKERS + 1 for r in range(3)]


def leader_epoch(t: int, p: int) -> int:
    return (p * 7 + t) % 50


def topic_sizes(partitions: int, per_topic: int) -> list[int]:
    sizes = [per_topic] * (partitions // per_topic)
    if partitions % per_topic:
        sizes.append(partitions % per_topic)
    return sizes


def cluster_image(partitions: int, per_topic: int) -> ClusterImage:
    """The cluster as the model holds it (what the log's copy is made from)."""
    image = ClusterImage(cluster_id=CLUSTER_ID)
    for t, n in enumerate(topic_sizes(partitions, per_topic)):
        name = f"topic-{t:06d}"
        parts = {}
        for p in range(n):
            r = replicas(t, p)
            parts[p] = Partition.model_construct(
                partition=p,
                replicas=r,
                isr=list(r),
                leader=r[0],
                leader_epoch=leader_epoch(t, p),
                partition_epoch=0,
                leader_recovery_state=0,
                adding_replicas=[],
                removing_replicas=[],
                controller_epoch=None,
                has_state=True,
            )
        image.topics[name] = Topic.model_construct(
            name=name, topic_id=topic_id(t), partitions=parts, json_version=3
        )
        image.configs[("TOPIC", name)] = ConfigEntity(
            resource_type="TOPIC", name=name, configs={"retention.ms": "604800000"}
        )
    image.producer_id_block = ProducerIdBlock(broker=3, block_start=0, block_end=999)
    return image


def write_log(log_dir: Path, image: ClusterImage) -> int:
    """The copy as the driver writes it; returns the last offset."""
    records = list(records_from_image(image))
    with MetadataLog.open(log_dir, writable=True, cluster_id=CLUSTER_ID, node_id=NODE_ID) as log:
        log.append(bootstrap_records(), KRAFT_EPOCH)
        log.append([record("BeginTransactionRecord", 0, Name=COPY_TRANSACTION)], KRAFT_EPOCH)
        for i in range(0, len(records), 10_000):
            log.append(records[i : i + 10_000], KRAFT_EPOCH)
        _, last = log.append(
            [record("ZkMigrationStateRecord", 0, ZkMigrationState=1), record("EndTransactionRecord", 0)],
            KRAFT_EPOCH,
        )
    return last


def zk_nodes(partitions: int, per_topic: int, migration_offset: int) -> list[tuple[str, bytes | None, int]]:
    """(path, data, ephemeralOwner) of ZooKeeper in dual-write, pre-order, for bench/zk_snapshot's writer."""
    controller = ControllerZnode(
        broker_id=NODE_ID, timestamp=1_700_000_000_000, kraft_controller_epoch=KRAFT_EPOCH, ephemeral=False
    )
    migration = MigrationZnode(
        kraft_controller_id=NODE_ID,
        kraft_controller_epoch=KRAFT_EPOCH,
        kraft_metadata_offset=migration_offset,
        kraft_metadata_epoch=KRAFT_EPOCH,
    )
    out: list[tuple[str, bytes | None, int]] = [
        ("", None, 0),
        ("/zookeeper", b"", 0),
        ("/zookeeper/quota", b"", 0),
    ]
    add = out.append
    add(("/zookeeper/config", b"", 0))
    add(("/cluster", None, 0))
    add(("/cluster/id", json.dumps({"version": "1", "id": CLUSTER_ID}).encode(), 0))
    add(("/controller_epoch", str(KRAFT_EPOCH).encode(), 0))
    add(("/controller", codec.encode_controller(controller), 0))
    add(("/migration", codec.encode_migration(migration), 0))
    add(("/brokers", None, 0))
    add(("/brokers/ids", None, 0))
    for b in range(1, BROKERS + 1):
        reg = {
            "features": {},
            "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
            "endpoints": [f"PLAINTEXT://broker-{b}.kafka.svc:9092"],
            "jmx_port": -1,
            "port": 9092,
            "host": f"broker-{b}.kafka.svc",
            "version": 5,
            "timestamp": "1700000000000",
        }
        add((f"/brokers/ids/{b}", json.dumps(reg, separators=(",", ":")).encode(), SESSION + b))
    add(("/brokers/seqid", None, 0))
    add(("/brokers/topics", None, 0))
    sizes = topic_sizes(partitions, per_topic)
    for t, n in enumerate(sizes):
        name = f"topic-{t:06d}"
        assign = {str(p): replicas(t, p) for p in range(n)}
        topic_json = json.dumps(
            {
                "partitions": assign,
                "topic_id": topic_id(t),
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
            r = assign[str(p)]
            add((base, None, 0))
            state = (
                f'{{"controller_epoch":{KRAFT_EPOCH},"leader":{r[0]},"version":1,"leader_epoch":{leader_epoch(t, p)},'
                f'"isr":[{r[0]},{r[1]},{r[2]}]}}'
            ).encode()
            add((base + "/state", state, 0))
    for path in (
        "/config",
        "/config/changes",
        "/config/clients",
        "/config/users",
        "/config/brokers",
        "/config/topics",
    ):
        add((path, None, 0))
    for t in range(len(sizes)):
        add((f"/config/topics/topic-{t:06d}", b'{"version":1,"config":{"retention.ms":"604800000"}}', 0))
    for path in ("/admin", "/admin/delete_topics", "/isr_change_notification"):
        add((path, None, 0))
    add(("/latest_producer_id_block", b'{"version":1,"broker":3,"block_start":"0","block_end":"999"}', 0))
    add(("/log_dir_event_notification", None, 0))
    add(("/feature", b'{"features":{},"version":2,"status":1}', 0))
    return out


def _status(pid: int, field: str) -> int:
    try:
        m = re.search(rf"{field}:\s+(\d+)", Path(f"/proc/{pid}/status").read_text())
    except OSError:
        return 0
    return int(m.group(1)) * 1024 if m else 0


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids: list[str] = []
        try:
            for task in Path(f"/proc/{p}/task").iterdir():  # a JVM forks from its threads
                kids += (task / "children").read_text().split()
        except OSError:
            continue
        for k in map(int, kids):
            out.append(k)
            todo.append(k)
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Sampler(threading.Thread):
    """Peak RSS of the JVMs and of the Python workers under some processes, sampled: together, and
    the largest single worker (a worker runs one task at a time, so that is the peak per task)."""

    def __init__(self, *pids: int) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.jvm = 0
        self.workers = 0
        self.worker_max = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            jvm = workers = 0
            for p in (d for pid in self.pids for d in _descendants(pid)):
                rss = _status(p, "VmRSS")
                cmd = _cmdline(p)
                if "java" in cmd.split(" ")[0]:
                    jvm += rss
                elif "pyspark" in cmd or "daemon" in cmd or "worker" in cmd:
                    workers += rss
                    self.worker_max = max(self.worker_max, rss)
            self.jvm = max(self.jvm, jvm)
            self.workers = max(self.workers, workers)
            time.sleep(0.2)


DRIVER = """
import re, sys
from spark_audit.audit import main
rc = main(sys.argv[1:])
hwm = re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1)
print(f"driver-vmhwm-kib {hwm}", file=sys.stderr)
sys.exit(rc)
"""


def _audit(
    args: argparse.Namespace, master: str, whole: bool, zk_dir: Path, log_dir: Path, cluster: object
) -> dict:
    """One audit in a fresh process, sampled; its figures."""
    cmd = [sys.executable, "-c", DRIVER, "--zk-snapshot", str(zk_dir), "--log-dir", str(log_dir)]
    cmd += ["--master", master, "--json"]
    if args.slices:
        cmd += ["--slices", str(args.slices)]
    cmd.append("--whole-fold" if whole else "--spread")  # each side named: the default depends on the master
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    if cluster is not None:
        env.update(cluster.env())  # type: ignore[attr-defined]
    load = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    roots = [proc.pid] + ([p.pid for p in cluster.procs] if cluster is not None else [])  # type: ignore[attr-defined]
    sampler = Sampler(*roots)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    sampler.stop.set()
    sampler.join()
    if proc.returncode != 0:
        print(err[-3000:], file=sys.stderr)
        raise SystemExit(f"audit on {master} exited {proc.returncode}")
    result = json.loads(out)
    spark = sum(v for k, v in result.get("timings", {}).items() if "Spark)" in k or "again" in k)
    label = master if not whole else f"{master} whole fold (before)"
    if cluster is not None:
        label = "standalone cluster, 2 executors x 1 core, 2 GiB"
    print(f"{label}: {wall:.1f}s, {result['verdict']}", flush=True)
    return {
        "label": label,
        "verdict": result["verdict"].split(":")[0],
        "wall": wall,
        "spark": spark,
        "worker_max": sampler.worker_max,
        "workers": sampler.workers,
        "jvm": sampler.jvm,
        "load": load,
    }


def log_fold_cpu(log_dir: Path, tasks: int, reducers: int) -> None:
    """The log's fold without Spark in this process: CPU seconds of the whole replay (today's one task)
    against the map-reduce's plan, map and fold steps (each a set of tasks Spark runs in parallel),
    and the largest single map task and reducer (what bounds the wall time with enough cores)."""
    import zlib

    import pyarrow as pa

    from spark_audit.inputs import load_kraft
    from spark_audit.logfold import fold_rows, map_piece, plan_log
    from spark_audit.rows import image_batches

    cpu = time.process_time
    t = cpu()
    result, _ = load_kraft(log_dir)
    whole_rows = sum(b.num_rows for b in image_batches(result.image, side="kraft"))
    whole = cpu() - t
    del result
    t = cpu()
    plan = plan_log(log_dir, None, tasks)
    planned = cpu() - t
    shares: list[list[tuple[int, int, bytes]]] = [[] for _ in range(reducers)]
    map_max = map_all = 0.0
    for piece in plan.pieces:
        t = cpu()
        for batch in map_piece(plan, piece):
            c = batch.to_pydict()
            for g, o, q, v in zip(c["group"], c["offset"], c["seq"], c["value"], strict=True):
                shares[zlib.crc32(g.encode()) % reducers].append((o, q, v))
        took = cpu() - t
        map_max, map_all = max(map_max, took), map_all + took
    fold_max = fold_all = 0.0
    rows = 0
    for share in shares:
        share.sort(key=lambda r: (r[0], r[1]))
        batch = pa.RecordBatch.from_pydict({"offset": [r[0] for r in share], "value": [r[2] for r in share]})
        share.clear()
        t = cpu()
        rows += sum(b.num_rows for b in fold_rows(iter([batch])))
        took = cpu() - t
        fold_max, fold_all = max(fold_max, took), fold_all + took
    assert rows == whole_rows, (rows, whole_rows)
    print(
        f"log fold, CPU seconds in one process ({len(plan.pieces)} map tasks, {reducers} reducers, {rows:,} rows):"
    )
    print("| step | CPU s, all tasks | CPU s, largest task |")
    print("| --- | ---: | ---: |")
    print(f"| whole replay + rows (one task today) | {whole:.1f} | {whole:.1f} |")
    print(f"| plan on the driver | {planned:.1f} | {planned:.1f} |")
    print(f"| map: CRC, decode, group | {map_all:.1f} | {map_max:.1f} |")
    print(f"| reduce: decode, replay, rows | {fold_all:.1f} | {fold_max:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=1_000_000)
    ap.add_argument("--per-topic", type=int, default=30)
    ap.add_argument("--masters", default="local[2],local[1]", help="comma-separated, map-reduce fold")
    ap.add_argument("--old", action="store_true", help="also the whole fold (before) on local[2]")
    ap.add_argument("--cluster", action="store_true", help="also a standalone cluster: 2 workers, 2 GiB each")
    ap.add_argument("--slices", type=int)
    ap.add_argument(
        "--log-fold-cpu", action="store_true", help="only the log's fold without Spark: CPU seconds per step"
    )
    ap.add_argument("--keep", help="build the inputs in this directory and keep them")
    args = ap.parse_args()

    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="zk2kraft-audit-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    log_dir, zk_dir = tmp / "kraft", tmp / "zookeeper"
    t0 = time.perf_counter()
    if not (log_dir / "meta.properties").exists():
        image = cluster_image(args.partitions, args.per_topic)
        last = write_log(log_dir, image)
        del image
        (zk_dir / "version-2").mkdir(parents=True, exist_ok=True)
        nodes = zk_nodes(args.partitions, args.per_topic, last)
        zxid = write_snapshot(zk_dir / "version-2" / "snapshot.0", nodes)
        (zk_dir / "version-2" / "snapshot.0").rename(zk_dir / "version-2" / f"snapshot.{zxid:x}")
        del nodes
    setup = time.perf_counter() - t0
    snap = next((zk_dir / "version-2").glob("snapshot.*"))
    seg_bytes = sum(p.stat().st_size for p in (log_dir / "__cluster_metadata-0").glob("*.log"))
    print(
        f"inputs: {args.partitions:,} partitions; snapshot {snap.stat().st_size / 1e6:.0f} MB, "
        f"log {seg_bytes / 1e6:.0f} MB (setup {setup:.0f}s) in {tmp}"
    )

    if args.log_fold_cpu:
        log_fold_cpu(log_dir, 4, 8)
        runs = []
    else:
        runs: list[tuple[str, bool]] = [(m, False) for m in args.masters.split(",")]
    if args.old:
        runs.append(("local[2]", True))
    cluster = None
    if args.cluster:
        sys.path.insert(0, str(ROOT / "tests"))
        import spark_cluster

        cluster = spark_cluster.start(tmp / "spark-cluster")
        runs.append((cluster.url, False))
    results = []
    try:
        for master, whole in runs:
            on = cluster if cluster is not None and master == cluster.url else None
            results.append(_audit(args, master, whole, zk_dir, log_dir, on))
    finally:
        if cluster is not None:
            cluster.stop()
    load = os.getloadavg()
    gib = 1 << 30
    print(
        f"{args.partitions:,} partitions, {os.cpu_count()} cores, load average after the runs "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}"
    )
    if not results:
        print("(no Spark runs)")
    print(
        "| run | verdict | whole audit (s) | Spark step (s) | Python worker peak per task (GiB) | workers together (GiB) | JVMs (GiB) | load (1 min) before |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        print(
            f"| {r['label']} | {r['verdict']} | {r['wall']:.1f} | {r['spark']:.1f} | {r['worker_max'] / gib:.2f} | "
            f"{r['workers'] / gib:.2f} | {r['jvm'] / gib:.2f} | {r['load']:.1f} |"
        )
    by = {r["label"]: r for r in results}
    new2, new1, old2 = by.get("local[2]"), by.get("local[1]"), by.get("local[2] whole fold (before)")
    if new2 and new1:
        print(
            f"speed-up local[2] over local[1]: {new1['wall'] / new2['wall']:.2f}x whole, "
            f"{new1['spark'] / new2['spark']:.2f}x Spark step"
        )
    if new2 and old2:
        print(f"map-reduce vs whole fold on local[2]: {old2['wall'] / new2['wall']:.2f}x")
    if not args.keep:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
