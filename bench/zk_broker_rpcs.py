"""ZK broker RPCs: the full fan-out after activation and the latency of one leader change to every broker.

N simulated ZooKeeper-mode brokers (zk_fixtures.zk_broker_server: an inter-broker listener on a
loopback port and a ZK broker's metadata cache each) and a propagator (controller.zk_propagator, its
channels over TCP) fed images of P partitions (replication factor 3) directly, without the log or
ZooKeeper: what is timed is the propagation.

1. Full fan-out: from the first image to every broker having acknowledged UpdateMetadata FULL (every
   partition) and LeaderAndIsr FULL (its partitions). Baselines, side by side: building and encoding
   the same requests without I/O (the controller's CPU share of the fan-out), with the compiled
   writer (`zk_broker_codec`) and with kio's generic one (before it).
2. Leader changes at a given rate: one thread changes a partition's leader (new leader epoch) in the
   working image at `--rate` per second; the propagation loop takes the image as it stands (as the
   service's committed image is taken after each commit, several commits coalescing, with
   `zk_propagator.snapshot`) and propagates it. Latency: from the change to every broker's cache
   holding it, p50/p99. Run twice, side by side: snapshots visiting every partition (the baseline,
   before changed keys) and snapshots from the changed keys (as the image builder hands them over).

The simulated brokers run in this process and share its interpreter with the controller, so the
figures include their decoding and bookkeeping.

    .venv/bin/python bench/zk_broker_rpcs.py [--brokers 50] [--partitions 100000] [--rate 1000] [--changes 2000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from migrator.controller import zk_broker_messages as Z  # noqa: E402
from migrator.controller import zk_broker_requests  # noqa: E402
from migrator.controller.zk_broker_requests import (  # noqa: E402
    Header,
    Item,
    build_request,
    encode_body,
    encode_entity,
)
from migrator.controller.zk_propagator import Snapshot, ZkPropagator, snapshot  # noqa: E402
from migrator.kraft.image import ImageChanges  # noqa: E402
from migrator.kraft.records import uuid_to_kafka  # noqa: E402
from migrator.model import Broker, ClusterImage, Endpoint, FeatureRange, Partition, Topic  # noqa: E402
from zk_fixtures.zk_broker_server import ZkBrokerCache, ZkBrokerServer  # noqa: E402

PER_TOPIC = 50


def build(brokers: int, partitions: int, servers: dict[int, ZkBrokerServer]) -> ClusterImage:
    img = ClusterImage()
    for b in range(1, brokers + 1):
        host, port = servers[b].address
        img.brokers[b] = Broker(
            id=b,
            endpoints=[Endpoint(listener="PLAINTEXT", host=host, port=port, security_protocol="PLAINTEXT")],
            features={"metadata.version": FeatureRange(min_version=1, max_version=21)},
            broker_epoch=100 + b,
            fenced=False,
            is_migrating_zk_broker=True,
        )
    for t in range(0, partitions, PER_TOPIC):
        name = f"bench-{t // PER_TOPIC}"
        topic = img.topics[name] = Topic(name=name, topic_id=uuid_to_kafka(uuid.UUID(int=t // PER_TOPIC + 1)))
        for p in range(min(PER_TOPIC, partitions - t)):
            replicas = [(t + p + k) % brokers + 1 for k in range(3)]
            topic.partitions[p] = Partition(partition=p, replicas=replicas, isr=replicas, leader=replicas[0])
    return img


def encode_only(snap: Snapshot) -> float:
    """The baseline: the fan-out's requests built and encoded, no I/O (UpdateMetadata once, as sent)."""
    t0 = time.perf_counter()
    um = Item(Z.UPDATE_METADATA, partitions=snap.parts, live_brokers=snap.live, full=True, shared=True)
    for b, broker in snap.brokers.items():
        h = Header(3000, 5, broker.broker_epoch)
        encode_body(um, 8, h, shared=True)
        mine = {k: s for k, s in snap.parts.items() if b in s.replicas}
        encode_body(Item(Z.LEADER_AND_ISR, partitions=mine, full=True, is_new=frozenset(mine)), 7, h)
    return time.perf_counter() - t0


def encode_with_kio(snap: Snapshot) -> float:
    """The same requests encoded by kio's generic writer (what the channels used before
    `zk_broker_codec`), for a side-by-side ratio."""
    t0 = time.perf_counter()
    um = Item(Z.UPDATE_METADATA, partitions=snap.parts, live_brokers=snap.live, full=True, shared=True)
    encode_entity(Z.request_class(Z.UPDATE_METADATA, 8), build_request(um, 8, Header(3000, 5, -1)))
    for b, broker in snap.brokers.items():
        h = Header(3000, 5, broker.broker_epoch)
        mine = {k: s for k, s in snap.parts.items() if b in s.replicas}
        item = Item(Z.LEADER_AND_ISR, partitions=mine, full=True, is_new=frozenset(mine))
        encode_entity(Z.request_class(Z.LEADER_AND_ISR, 7), build_request(item, 7, h))
    return time.perf_counter() - t0


def leader_changes(
    args: argparse.Namespace,
    img: ClusterImage,
    snap: Snapshot,
    prop: ZkPropagator,
    caches: dict[int, ZkBrokerCache],
    by_keys: bool,
) -> Snapshot:
    """Phase 2 (see the module docstring); `by_keys`: each snapshot reads only the changed keys (as the
    image builder reports them), else every partition (the baseline, as before changed keys)."""
    lock = threading.Lock()
    sent: dict[tuple[str, int], tuple[int, float]] = {}  # key -> (leader epoch, when)
    latencies: list[float] = []
    done = threading.Event()
    keys = list(snap.parts)
    version = [0]  # changes made so far: the loop propagates only a changed image, as the service
    changes = ImageChanges()  # what the changer touched since the last snapshot (ImageBuilder's part)
    first = version_offset[0]

    def changer() -> None:
        period = 1.0 / args.rate
        nxt = time.perf_counter()
        for i in range(args.changes):
            topic, p = keys[(i * 7919 + first) % len(keys)]
            with lock:  # as ImageBuilder replays a PartitionChangeRecord: in place, epochs bumped
                d = img.topics[topic].partitions[p].__dict__
                d["leader"] = d["replicas"][(d["replicas"].index(d["leader"]) + 1) % len(d["replicas"])]
                d["leader_epoch"] += 1
                d["partition_epoch"] += 1
                changes.partitions.add((topic, p))
                sent[(topic, p)] = (d["leader_epoch"], time.perf_counter())
                version[0] += 1
            nxt += period
            time.sleep(max(0.0, nxt - time.perf_counter()))
        done.set()

    def checker() -> None:
        while not (done.is_set() and not sent):
            with lock:
                pending = list(sent.items())
            for key, (epoch, when) in pending:
                if all(
                    (p := c.partitions.get(key)) is not None and p.leader_epoch >= epoch
                    for c in caches.values()
                ):
                    now = time.perf_counter()
                    with lock:
                        if sent.get(key, (None,))[0] == epoch:
                            del sent[key]
                            latencies.append(now - when)
            time.sleep(0.005)  # every cache is scanned per pending change: not too often (the GIL)

    threads = [threading.Thread(target=changer), threading.Thread(target=checker)]
    for t in threads:
        t.start()
    rounds, seen, t1, held = 0, 0, time.perf_counter(), 0.0
    while not (done.is_set() and not sent):
        with lock:
            t2 = time.perf_counter()
            changed = version[0] != seen
            seen = version[0]
            now = None
            if changed:
                taken = ImageChanges(partitions=set(changes.partitions))
                changes.partitions.clear()
                now = snapshot(img, snap, taken if by_keys else None)
            held += time.perf_counter() - t2
        if now is None:
            time.sleep(0.001)
            continue
        version_offset[0] += 1
        rounds += 1
        snap = now
        prop.propagate(version_offset[0], snap)
    elapsed = time.perf_counter() - t1
    for t in threads:
        t.join()
    lat = sorted(latencies)
    p50 = statistics.median(lat) * 1000
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
    print(
        f"leader changes ({'changed keys' if by_keys else 'baseline: every partition per snapshot'}): "
        f"{len(lat)} at {args.rate:g}/s offered ({len(lat) / elapsed:.0f}/s done) to "
        f"{args.brokers} brokers: p50 {p50:.0f} ms, p99 {p99:.0f} ms (target 100 ms: {p99 / 100:.2f}x); "
        f"{rounds} propagations, image lock held {held / max(rounds, 1) * 1000:.1f} ms per snapshot"
    )
    return snap


version_offset = [0]  # the metadata offset propagated last (both phases continue it)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--changes", type=int, default=2000)
    args = ap.parse_args()

    caches = {b: ZkBrokerCache(b, lambda b=b: 100 + b) for b in range(1, args.brokers + 1)}
    servers = {b: ZkBrokerServer(c).start() for b, c in caches.items()}
    img = build(args.brokers, args.partitions, servers)
    snap = snapshot(img)
    base = encode_only(snap)
    zk_broker_requests._STATE_BYTES.clear()  # the fan-out below starts with no state encoded
    with_kio = encode_with_kio(snap)
    print(
        f"build+encode of the fan-out's requests, no I/O: {base:.2f} s with zk_broker_codec, "
        f"{with_kio:.2f} s with kio's writer (ratio {with_kio / base:.2f})"
    )

    prop = ZkPropagator(None, 3000, 5)
    try:
        t0 = time.perf_counter()
        prop.propagate(0, snap)
        while not prop.in_sync():
            time.sleep(0.01)
        fanout = time.perf_counter() - t0
        assert all(len(c.partitions) == args.partitions for c in caches.values())
        print(
            f"full fan-out: {args.brokers} brokers x {args.partitions:,} partitions: {fanout:.2f} s "
            f"(target 10 s: {fanout / 10:.2f}x); build+encode only {base:.2f} s; ratio {fanout / base:.2f}"
        )

        for by_keys in (False, True):
            snap = leader_changes(args, img, snap, prop, caches, by_keys)
    finally:
        prop.stop()
        for s in servers.values():
            s.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
