"""Dual-write throughput: zk2kraft's syncer vs one fenced multi per record (Kafka's shape), one run.

    .venv/bin/python bench/dual_write.py                     # 10,000 partitions, 100,000 changes, 3 runs
    .venv/bin/python bench/dual_write.py --records 20000     # quick

Starts its own ZooKeeper (zk_fixtures.server.ZkServer) in a temporary directory, writes a generated
Kafka cluster, copies it into a metadata log (one transaction, as the migration does), claims the
controller, then appends a stream of PartitionChangeRecords (leader and ISR changes of random
partitions). Each run makes ZooKeeper's states match the copy again (untimed), then times one of:

- zk2kraft: `ZkSyncer.sync()` — records read from the log, changes coalesced per entity, packed into
  pipelined fenced multis of up to ~950 KB;
- baseline: what Kafka's `KRaftMigrationZkWriter` sends for the same stream — for each record one
  multi of check(/controller_epoch) + setData(state) + setData(/migration), 10 in flight
  (`zookeeper.max.in.flight.requests`), sent over the same raw-request path zk2kraft uses, so the
  ratio measures the write shape, not the client library;
- kazoo baseline (`--kazoo-baseline`): the same shape through kazoo's public transaction API.

Both read the records from the same log and replay them into an image to render the state JSON.
Prints records/s per run, the medians and their ratio. Every run must leave the same states.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kazoo.client import KazooClient  # noqa: E402

from migrator.kraft.image import ImageBuilder, ReplayResult, records_from_image  # noqa: E402
from migrator.kraft.log import MetadataLog  # noqa: E402
from migrator.kraft.records import kafka_to_uuid, record  # noqa: E402
from migrator.migration.zk_sync import ZkSyncer  # noqa: E402
from migrator.model import MigrationZnode  # noqa: E402
from migrator.zk import codec, layout  # noqa: E402
from migrator.zk import paths as P  # noqa: E402
from migrator.zk.connection import close, connect  # noqa: E402
from migrator.zk.fenced_writer import FencedZkWriter, ZkOp, _Multi  # noqa: E402
from migrator.zk.leadership import Claim, claim_controller, write_migration_unconditionally  # noqa: E402
from migrator.zk.reader import read_tree  # noqa: E402
from zk_fixtures.generator import ClusterSpec, load_cluster  # noqa: E402
from zk_fixtures.server import ZkServer  # noqa: E402

BASELINE_IN_FLIGHT = 10
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Timing:
    records: int
    wall: float
    client_cpu: float  # this process, every thread
    server_cpu: float  # the ZooKeeper JVM
    writes: int = 0  # znode writes sent (zk2kraft coalesces repeated changes of a partition)
    multis: int = 0

    @property
    def rate(self) -> float:
        return self.records / self.wall

    @property
    def cpu_us(self) -> float:
        """Client plus server CPU per record: what the work costs, whatever else runs on the machine."""
        return (self.client_cpu + self.server_cpu) / self.records * 1e6


class Clock:
    """Wall time and CPU time of this process and of the ZooKeeper server over a timed section."""

    server_pid = 0

    def __enter__(self) -> Clock:
        self.t = time.perf_counter()
        self.c = time.process_time()
        self.s = _server_cpu(self.server_pid)
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.t
        self.client = time.process_time() - self.c
        self.server = _server_cpu(self.server_pid) - self.s

    def timing(self, records: int, writes: int | None = None, multis: int | None = None) -> Timing:
        return Timing(
            records,
            self.wall,
            self.client,
            self.server,
            records if writes is None else writes,
            records if multis is None else multis,
        )


def _server_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime


def changes(image_topics: dict, n: int, seed: int = 7) -> list:
    """n PartitionChangeRecords: a new leader from the replicas and an ISR around it."""
    rng = random.Random(seed)
    parts = [(kafka_to_uuid(t.topic_id), p) for t in image_topics.values() for p in t.partitions.values()]
    out = []
    for _ in range(n):
        tid, p = rng.choice(parts)
        leader = rng.choice(p.replicas)
        isr = [leader] + [r for r in p.replicas if r != leader and rng.random() < 0.8]
        out.append(
            record("PartitionChangeRecord", PartitionId=p.partition, TopicId=tid, Leader=leader, Isr=isr)
        )
    return out


def image_at(log: MetadataLog, offset: int) -> ReplayResult:
    builder = ImageBuilder()
    for o, _epoch, rec in log.read(0):
        if o > offset:
            break
        builder.replay(o, rec)
    return builder.finish()


def reset_migration(client: KazooClient, claim: Claim, offset: int) -> MigrationZnode:
    return write_migration_unconditionally(
        client,
        MigrationZnode(
            kraft_controller_id=claim.kraft_controller_id,
            kraft_controller_epoch=claim.kraft_epoch,
            kraft_metadata_offset=offset,
            kraft_metadata_epoch=claim.kraft_epoch,
        ),
        claim,
    )


def run_syncer(
    client: KazooClient, log: MetadataLog, claim: Claim, start: ReplayResult, copy_end: int, limit: int
) -> Timing:
    writer = FencedZkWriter(client, claim, reset_migration(client, claim, copy_end))
    syncer = ZkSyncer(client, log, writer)
    syncer.reconcile(start)  # untimed: ZooKeeper back to the copy's states, the picture of it built
    with Clock() as clock:
        report = syncer.sync(until_offset=copy_end + limit)
    assert report.to_offset == copy_end + limit, report
    return clock.timing(report.records, report.ops, report.multis)


def _baseline_records(log: MetadataLog, builder: ImageBuilder, copy_end: int, epoch: int, limit: int):  # type: ignore[no-untyped-def]
    names = {kafka_to_uuid(t.topic_id): n for n, t in builder.image.topics.items()}
    for offset, _e, rec in log.read(copy_end + 1):
        if offset > copy_end + limit:
            break
        builder.replay(offset, rec)
        name = names[rec.fields["TopicId"]]
        part = builder.image.topics[name].partitions[rec.fields["PartitionId"]]
        path, data = layout.partition_state_znode(name, part, epoch)  # type: ignore[misc]
        yield offset, path, data


def run_baseline(
    client: KazooClient, log: MetadataLog, claim: Claim, start: ReplayResult, copy_end: int, limit: int
) -> Timing:
    """One multi per record on zk2kraft's own raw-request path: Kafka's shape, same transport."""
    writer = FencedZkWriter(client, claim, reset_migration(client, claim, copy_end))
    version = writer.migration.zk_version
    window: deque = deque()
    count = 0
    builder = ImageBuilder(start)  # untimed: a copy of the image at the copy's end
    clock = Clock().__enter__()
    for offset, path, data in _baseline_records(log, builder, copy_end, claim.kraft_epoch, limit):
        op = ZkOp.set(path, data)
        enc = [writer._encode(op)]
        window.append(writer._send(_Multi([op], enc, len(enc[0]), (offset, claim.kraft_epoch)), version))
        version += 1
        count += 1
        if len(window) >= BASELINE_IN_FLIGHT:
            sent = window.popleft()
            outcome = writer._wait(sent)
            assert not isinstance(outcome, BaseException) and writer_ok(outcome, 3), outcome
    while window:
        sent = window.popleft()
        outcome = writer._wait(sent)
        assert not isinstance(outcome, BaseException) and writer_ok(outcome, 3), outcome
    clock.__exit__()
    return clock.timing(count)


def writer_ok(outcome: tuple[bytes, int], count: int) -> bool:
    from migrator.zk.fenced_writer import _failure

    return _failure(*outcome, count) is None


def run_kazoo_baseline(
    client: KazooClient, log: MetadataLog, claim: Claim, start: ReplayResult, copy_end: int, limit: int
) -> Timing:
    """The same shape through kazoo's transaction API."""
    m = reset_migration(client, claim, copy_end)
    version = m.zk_version
    window: deque = deque()
    count = 0
    builder = ImageBuilder(start)  # untimed: a copy of the image at the copy's end
    clock = Clock().__enter__()
    for offset, path, data in _baseline_records(log, builder, copy_end, claim.kraft_epoch, limit):
        txn = client.transaction()
        txn.check(P.CONTROLLER_EPOCH, claim.controller_epoch_zk_version)
        txn.set_data(path, data)
        migration = m.model_copy(update={"kraft_metadata_offset": offset})
        txn.set_data(P.MIGRATION, codec.encode_migration(migration), version)
        window.append(txn.commit_async())
        version += 1
        count += 1
        if len(window) >= BASELINE_IN_FLIGHT:
            results = window.popleft().get()
            assert not any(isinstance(r, Exception) for r in results), results
    while window:
        results = window.popleft().get()
        assert not any(isinstance(r, Exception) for r in results), results
    clock.__exit__()
    return clock.timing(count)


def states(client: KazooClient) -> dict[str, tuple]:
    image = layout.image_from_tree(read_tree(client, roots=[P.TOPICS])).image
    return {
        f"{n}-{p.partition}": (p.leader, p.leader_epoch, tuple(p.isr))
        for n, t in image.topics.items()
        for p in t.partitions.values()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=10_000, help="partitions of the generated cluster")
    ap.add_argument("--records", type=int, default=100_000, help="PartitionChangeRecords in the stream")
    ap.add_argument(
        "--baseline-records",
        type=int,
        default=10_000,
        help="records the baselines are timed on (the stream's first ones; their cost per record does not "
        "depend on the stream's length, and one multi each takes minutes for 100,000 on a busy machine)",
    )
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kazoo-baseline", action="store_true", help="also time the kazoo transaction baseline")
    args = ap.parse_args()
    per_topic = 100 if args.partitions >= 100 else args.partitions
    spec = ClusterSpec(
        topics=max(1, args.partitions // per_topic),
        partitions=per_topic,
        brokers=6,
        topic_configs=0,
        acls=0,
        quota_users=0,
        quota_clients=0,
        quota_user_clients=0,
        quota_ips=0,
        scram_users=0,
        tokens=0,
        pending_deletions=0,
        reassignments=0,
        offline_partitions=0,
        legacy_topics=0,
        broker_configs=0,
    )
    with tempfile.TemporaryDirectory(prefix="zk2kraft-bench-") as tmp, ZkServer(Path(tmp) / "zk") as server:
        client = connect(server.connect_string)
        try:
            t = time.perf_counter()
            load_cluster(client, spec)
            result = layout.image_from_tree(read_tree(client))
            claim = claim_controller(client, 3000)
            log = MetadataLog.open(
                Path(tmp) / "meta", writable=True, cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=3000
            )
            copy = [
                record("BeginTransactionRecord", Name="ZK Migration"),
                *records_from_image(result.image),
                record("ZkMigrationStateRecord", ZkMigrationState=1),
                record("EndTransactionRecord"),
            ]
            _, copy_end = log.append(copy, epoch=claim.kraft_epoch)
            stream = changes(result.image.topics, args.records)
            for i in range(0, len(stream), 10_000):
                log.append(stream[i : i + 10_000], epoch=claim.kraft_epoch)
            start = image_at(log, copy_end)
            print(
                f"cluster: {result.image.partition_count():,} partitions; stream: {len(stream):,} "
                f"PartitionChangeRecords (set up in {time.perf_counter() - t:.1f}s)"
            )
            runners = [("zk2kraft", run_syncer), ("baseline", run_baseline)]
            if args.kazoo_baseline:
                runners.append(("kazoo baseline", run_kazoo_baseline))
            Clock.server_pid = server.proc.pid  # type: ignore[union-attr]
            timings: dict[str, list[Timing]] = {name: [] for name, _ in runners}
            expected: dict[int, dict] = {}
            final = {
                f"{n}-{p.partition}": (p.leader, p.leader_epoch, tuple(p.isr))
                for n, t in log.load_image().result.image.topics.items()
                for p in t.partitions.values()
            }
            # Warm ZooKeeper's JIT up on both request shapes, untimed.
            for _name, fn in runners:
                fn(client, log, claim, start, copy_end, min(2_000, len(stream)))
            for run in range(1, args.runs + 1):
                for name, fn in runners:
                    limit = len(stream) if name == "zk2kraft" else min(args.baseline_records, len(stream))
                    timing = fn(client, log, claim, start, copy_end, limit)
                    timings[name].append(timing)
                    got = states(client)
                    if name == "zk2kraft" and limit == len(stream):
                        assert got == final, "zk2kraft left partition states that differ from the log's image"
                    expected.setdefault(limit, got)
                    assert got == expected[limit], f"{name} left different partition states"
                    print(
                        f"run {run}: {name:15s} {timing.rate:10,.0f} records/s  {timing.records:,} records in "
                        f"{timing.wall:.2f}s; CPU {timing.cpu_us:,.1f} us/record (client "
                        f"{timing.client_cpu:.2f}s + ZooKeeper {timing.server_cpu:.2f}s); "
                        f"{timing.writes:,} state writes in {timing.multis:,} multis"
                    )
            medians = {name: statistics.median(t.rate for t in ts) for name, ts in timings.items()}
            cpu = {name: statistics.median(t.cpu_us for t in ts) for name, ts in timings.items()}
            print()
            for name, value in medians.items():
                print(f"median {name:15s} {value:10,.0f} records/s  {cpu[name]:8,.1f} CPU us/record")
            for name in medians:
                if name != "zk2kraft":
                    print(
                        f"ratio zk2kraft / {name}: {medians['zk2kraft'] / medians[name]:.1f}x records/s, "
                        f"{cpu[name] / cpu['zk2kraft']:.1f}x less CPU per record"
                    )
            print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
            log.close()
        finally:
            close(client)


if __name__ == "__main__":
    main()
