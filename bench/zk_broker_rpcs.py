"""ZK broker RPCs: the full fan-out after activation and the latency of one leader change to every broker.

N simulated ZooKeeper-mode brokers (zk_fixtures.zk_broker_server: an inter-broker listener on a
loopback port and a ZK broker's metadata cache each) run in child processes (`--per-process` brokers
each), so that this process holds only the controller's side: a propagator (controller.zk_brokers.zk_propagator,
its channels over TCP) fed images of P partitions (replication factor 3) directly, without the log or
ZooKeeper. What is timed is the propagation.

1. Full fan-out: from the first image to every broker having acknowledged UpdateMetadata FULL (every
   partition) and LeaderAndIsr FULL (its partitions); CPU seconds of this process (the controller)
   and of the brokers' processes beside it. Baseline, side by side: the CPU of building and encoding
   the fan-out's requests without I/O as the channels do it (UpdateMetadata FULL encoded once for all
   brokers, LeaderAndIsr from partition states encoded once) against the old per-broker path (each
   broker's requests built and encoded for it alone; timed on `--baseline-brokers` brokers, scaled).
2. Leader changes at a given rate: one thread changes a partition's leader (new leader epoch) in the
   working image at `--rate` per second; the propagation loop takes the image as it stands (as the
   service's committed image is taken after each commit, several commits coalescing, with
   `zk_propagator.snapshot`, from the changed keys) and propagates it, waiting between propagations
   as the service's loop does (`ZkPropagator.pace`: until every channel delivered the last one,
   `--tick-ms` at most). Latency: from the change to the moment the last broker's cache held it
   (each broker process stamps when it applied each partition state, on the same monotonic clock),
   p50/p99. Run twice, side by side: without pacing (the baseline: a propagation per change seen, as
   before) and with it.

After each phase every broker's metadata cache (partition states, live brokers) and replica roles
are compared with the controller's image (a digest computed in the broker's process and here; on a
mismatch the differing partitions are counted and the run fails). After the fan-out the brokers'
processes freeze their heaps (`gc.freeze`: the 100,000-entry caches live on, and each later
request's collections would rescan them, tripling a broker's cost per request). The load average is
printed beside every figure: the machine is shared.

    .venv/bin/python bench/zk_broker_rpcs.py [--brokers 50] [--partitions 100000] [--rate 1000] [--changes 2000]
        [--tick-ms 50] [--per-process 10]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import multiprocessing as mp
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Iterable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from migrator.controller.protocol.fast_writer import encode_fast  # noqa: E402
from migrator.controller.zk_brokers import zk_broker_messages as Z  # noqa: E402
from migrator.controller.zk_brokers import zk_broker_requests  # noqa: E402
from migrator.controller.zk_brokers.zk_broker_requests import (  # noqa: E402
    Header,
    Item,
    build_request,
    encode_body,
)
from migrator.controller.zk_brokers.zk_propagator import Snapshot, ZkPropagator, snapshot  # noqa: E402
from migrator.kraft.image import ImageChanges  # noqa: E402
from migrator.kraft.records import uuid_to_kafka  # noqa: E402
from migrator.model import Broker, ClusterImage, Endpoint, FeatureRange, Partition, Topic  # noqa: E402
from zk_fixtures.zk_broker_server import ZkBrokerCache, ZkBrokerServer, full_from_kraft  # noqa: E402

Key = tuple[str, int]

PER_TOPIC = 50


def build(brokers: int, partitions: int, addresses: dict[int, tuple[str, int]]) -> ClusterImage:
    img = ClusterImage()
    for b in range(1, brokers + 1):
        host, port = addresses[b]
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


VERSIONS = {Z.LEADER_AND_ISR: 7, Z.UPDATE_METADATA: 8, Z.STOP_REPLICA: 4}


def encode_fanout(snap: Snapshot) -> float:
    """CPU seconds to build and encode the fan-out's requests as the channels do, without I/O: each
    broker's full state from the propagator, UpdateMetadata FULL encoded once for all (the broker's
    epoch patched in), LeaderAndIsr per broker from partition states encoded once."""
    zk_broker_requests._STATE_BYTES.clear()
    prop = ZkPropagator(None, 3000, 5)
    prop._snap, prop._offset = snap, 0
    got: list[Item] = []
    c0 = time.process_time()
    for b, broker in snap.zk.items():
        prop._full_state(b, lambda items, _: got.extend(items))
        h = Header(3000, 5, broker.broker_epoch)
        for it in got:
            encode_body(it, VERSIONS[it.api_key], h, shared=it.shared)
        got.clear()
    spent = time.process_time() - c0
    zk_broker_requests._STATE_BYTES.clear()  # the fan-out measured next starts with nothing encoded
    return spent


def encode_per_broker(snap: Snapshot, brokers: int) -> float:
    """The baseline, the old per-broker path: for each broker its UpdateMetadata FULL and its
    LeaderAndIsr FULL built and encoded for it alone (its partitions found by a scan, every state
    encoded in each request, the cyclic GC running), on the first `brokers` brokers, CPU seconds
    scaled to all of them."""
    zk = list(snap.zk.items())
    c0 = time.process_time()
    for b, broker in zk[:brokers]:
        h = Header(3000, 5, broker.broker_epoch)
        um = Item(Z.UPDATE_METADATA, partitions=snap.parts, live_brokers=snap.live, full=True)
        encode_fast(Z.request_class(Z.UPDATE_METADATA, 8), build_request(um, 8, h))
        mine = {k: s for k, s in snap.parts.items() if b in s.replicas}
        lai = Item(Z.LEADER_AND_ISR, partitions=mine, full=True, is_new=frozenset(mine))
        encode_fast(Z.request_class(Z.LEADER_AND_ISR, 7), build_request(lai, 7, h))
    return (time.process_time() - c0) * len(zk) / min(brokers, len(zk))


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


# -- the simulated brokers, in their own processes -------------------------------------------------


class StampingCache(ZkBrokerCache):
    """A broker's cache that notes when each partition state reached it (for the latency figures)."""

    def __init__(self, broker_id: int) -> None:
        super().__init__(broker_id, lambda: 100 + broker_id)
        self.seen: list[tuple[str, int, int, float]] = []  # (topic, partition, leader epoch, when)

    def update_metadata(self, version: int, req: Any) -> Any:
        resp = super().update_metadata(version, req)
        now = time.monotonic()
        if full_from_kraft(req):
            return resp
        with self.lock:  # the parent swaps `seen` for an empty list under it
            seen = self.seen
            for t in req.topic_states:
                seen += [(t.topic_name, s.partition_index, s.leader_epoch, now) for s in t.partition_states]
        return resp


def cache_digest(
    parts: Iterable[tuple[Key, tuple[Any, ...]]],
    roles: Iterable[tuple[Key, tuple[bool, int, int]]],
    live: Iterable[tuple[int, tuple[tuple[str, str, int], ...]]],
) -> str:
    """One hash of a broker's partition states, replica roles and live brokers (sorted, as plain tuples)."""
    h = hashlib.sha256()
    h.update(repr(sorted((k, tuple(v)) for k, v in parts)).encode())
    h.update(repr(sorted(roles)).encode())
    h.update(repr(sorted(live)).encode())
    return h.hexdigest()


def broker_group(ids: list[int], conn: Connection) -> None:
    """A child process: brokers `ids`, serving until told to stop; answers the parent's questions."""
    caches = {b: StampingCache(b) for b in ids}
    servers = {b: ZkBrokerServer(c).start() for b, c in caches.items()}
    conn.send({b: s.address for b, s in servers.items()})
    while True:
        cmd, arg = conn.recv()
        if cmd == "seen":  # what each broker applied since the last call
            out = {}
            for b, c in caches.items():
                with c.lock:
                    out[b], c.seen = c.seen, []
            conn.send(out)
        elif cmd == "digest":
            out = {}
            for b, c in caches.items():
                with c.lock:
                    live = {k: tuple((ln, h, p) for ln, h, p in v) for k, v in c.live_brokers.items()}
                    out[b] = cache_digest(c.partitions.items(), c.roles.items(), live.items())
            conn.send(out)
        elif cmd == "freeze":  # the caches live on: later requests' GCs need not rescan them
            gc.freeze()
            conn.send({ids[0]: gc.get_freeze_count()})
        elif cmd == "cpu":  # this process's CPU seconds, once for its brokers
            conn.send({ids[0]: time.process_time()})
        elif cmd == "cache":  # one broker's cache, to count the differences after a mismatch
            c = caches[arg]
            with c.lock:
                conn.send(({k: tuple(v) for k, v in c.partitions.items()}, dict(c.roles)))
        else:
            break
    for s in servers.values():
        s.stop()
    conn.send("stopped")


class Brokers:
    """The child processes holding the simulated brokers, `per_process` each."""

    def __init__(self, count: int, per_process: int) -> None:
        ctx = mp.get_context("spawn")
        ids = list(range(1, count + 1))
        self.procs: list[tuple[BaseProcess, Connection, list[int]]] = []
        for i in range(0, count, per_process):
            mine = ids[i : i + per_process]
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=broker_group, args=(mine, child), daemon=True)
            proc.start()
            self.procs.append((proc, parent, mine))
        self.addresses: dict[int, tuple[str, int]] = {}
        for _, conn, _ in self.procs:
            self.addresses.update(conn.recv())

    def ask(self, cmd: str) -> dict[int, Any]:
        for _, conn, _ in self.procs:
            conn.send((cmd, None))
        out: dict[int, Any] = {}
        for _, conn, _ in self.procs:
            out.update(conn.recv())
        return out

    def cache(self, broker: int) -> tuple[dict[Key, tuple[Any, ...]], dict[Key, Any]]:
        conn = next(c for _, c, mine in self.procs if broker in mine)
        conn.send(("cache", broker))
        return conn.recv()  # type: ignore[no-any-return]

    def stop(self) -> None:
        for _, conn, _ in self.procs:
            try:
                conn.send(("stop", None))
                conn.recv()
            except (OSError, EOFError):
                pass
        for proc, _, _ in self.procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()


def expected(
    snap: Snapshot,
) -> tuple[dict[Key, tuple[Any, ...]], dict[int, dict[Key, tuple[bool, int, int]]]]:
    """What every broker's cache and each broker's roles must hold for `snap`."""
    parts = {
        k: (s.leader, s.leader_epoch, s.isr, s.partition_epoch, s.replicas) for k, s in snap.parts.items()
    }
    roles: dict[int, dict[Key, tuple[bool, int, int]]] = {b: {} for b in snap.zk}
    for k, s in snap.parts.items():
        for r in s.replicas:
            if r in roles:
                roles[r][k] = (s.leader == r, s.leader_epoch, s.partition_epoch)
    return parts, roles


def verify(brokers: Brokers, snap: Snapshot) -> str:
    """Every broker's cache, roles and live brokers equal `snap`'s; raises on any difference."""
    parts, roles = expected(snap)
    live = {b.broker_id: tuple((e[0], e[1], e[2]) for e in b.endpoints) for b in snap.live}
    got = brokers.ask("digest")
    wrong = []
    for b in sorted(snap.zk):
        if got.get(b) != cache_digest(parts.items(), roles[b].items(), live.items()):
            cparts, croles = brokers.cache(b)
            bad = sum(1 for k in parts.keys() | cparts.keys() if parts.get(k) != cparts.get(k))
            bad_roles = sum(1 for k in roles[b].keys() | croles.keys() if roles[b].get(k) != croles.get(k))
            wrong.append(f"broker {b}: {bad} partition states and {bad_roles} roles differ (or live brokers)")
    if wrong:
        raise SystemExit("caches differ from the controller's image: " + "; ".join(wrong))
    return f"all {len(got)} brokers' caches and roles equal the image ({len(parts):,} partitions)"


# -- the measurements ---------------------------------------------------------------------------------


def leader_changes(
    args: argparse.Namespace,
    img: ClusterImage,
    snap: Snapshot,
    prop: ZkPropagator,
    brokers: Brokers,
    tick_ms: int,
) -> Snapshot:
    """Phase 2 (see the module docstring), with the propagator's bounded delay `tick_ms` (0: the
    baseline, a propagation per change seen, as before the tick)."""
    prop.tick_ms = tick_ms
    lock = threading.Lock()
    sent: list[tuple[Key, int, float]] = []  # (key, leader epoch, when)
    done = threading.Event()
    keys = list(snap.parts)
    version = [0]  # changes made so far: the loop propagates only a changed image, as the service
    changes = ImageChanges()  # what the changer touched since the last snapshot (ImageBuilder's part)
    first = version_offset[0]
    brokers.ask("seen")  # forget what the fan-out applied

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
                sent.append(((topic, p), d["leader_epoch"], time.monotonic()))
                version[0] += 1
            nxt += period
            time.sleep(max(0.0, nxt - time.perf_counter()))
        done.set()

    thread = threading.Thread(target=changer)
    load0 = load()
    c0, b0 = time.process_time(), sum(brokers.ask("cpu").values())
    thread.start()
    rounds, seen, t1, held = 0, 0, time.perf_counter(), 0.0
    while True:
        prop.pace()  # as the service's propagation loop: at most one propagation per tick
        finished = done.is_set()
        with lock:
            t2 = time.perf_counter()
            changed = version[0] != seen
            seen = version[0]
            now = None
            if changed:
                taken = ImageChanges(partitions=set(changes.partitions))
                changes.partitions.clear()
                now = snapshot(img, snap, taken)
            held += time.perf_counter() - t2
        if now is None:
            if finished:
                break
            time.sleep(0.001)
            continue
        version_offset[0] += 1
        rounds += 1
        snap = now
        prop.propagate(version_offset[0], snap)
    while not prop.in_sync():
        time.sleep(0.005)
    elapsed = time.perf_counter() - t1
    cpu, broker_cpu = time.process_time() - c0, sum(brokers.ask("cpu").values()) - b0
    thread.join()
    load1 = load()
    applied: dict[Key, list[list[tuple[int, float]]]] = {}
    for _, log in sorted(brokers.ask("seen").items()):
        per: dict[Key, list[tuple[int, float]]] = {}
        for t, p, e, when in log:
            per.setdefault((t, p), []).append((e, when))
        for k, v in per.items():
            applied.setdefault(k, []).append(v)
    lat: list[float] = []
    missing = 0
    for key, epoch, when in sent:
        per_broker = applied.get(key, [])
        firsts = [next((w for e, w in v if e >= epoch), None) for v in per_broker]
        if len(per_broker) < args.brokers or None in firsts:
            missing += 1
            continue
        lat.append(max(firsts) - when)  # type: ignore[type-var]
    lat.sort()
    p50 = statistics.median(lat) * 1000
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
    print(
        f"leader changes ({f'tick {tick_ms} ms' if tick_ms else 'baseline: no tick, a propagation per change seen'}): "
        f"{len(lat)} at {args.rate:g}/s offered ({len(lat) / elapsed:.0f}/s done) to "
        f"{args.brokers} brokers: p50 {p50:.0f} ms, p99 {p99:.0f} ms (target 100 ms: {p99 / 100:.2f}x); "
        f"{rounds} propagations, image lock held {held / max(rounds, 1) * 1000:.1f} ms per snapshot; "
        f"CPU {cpu:.2f} s here, {broker_cpu:.2f} s in the brokers' processes over {elapsed:.1f} s "
        f"[{load0} -> {load1}]"
    )
    if missing:
        raise SystemExit(f"{missing} changes never reached every broker's cache")
    print(f"  {verify(brokers, snap)}")
    return snap


version_offset = [0]  # the metadata offset propagated last (both phases continue it)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--changes", type=int, default=2000)
    ap.add_argument("--tick-ms", type=int, default=50, help="the propagator's bounded delay")
    ap.add_argument("--baseline-brokers", type=int, default=5, help="brokers the old path is timed on")
    ap.add_argument("--per-process", type=int, default=10, help="simulated brokers per child process")
    args = ap.parse_args()

    brokers = Brokers(args.brokers, args.per_process)
    try:
        img = build(args.brokers, args.partitions, brokers.addresses)
        snap = snapshot(img)
        load0 = load()
        base = encode_per_broker(snap, args.baseline_brokers)
        load1 = load()
        fast = encode_fanout(snap)
        print(
            f"build+encode of the fan-out's requests, no I/O, CPU: {fast:.2f} s as the channels do it; "
            f"baseline, the old per-broker path: {base:.2f} s (measured on {args.baseline_brokers} brokers, "
            f"scaled); ratio {base / fast:.1f}x [{load0} -> {load1} -> {load()}]"
        )

        prop = ZkPropagator(None, 3000, 5)
        try:
            load0 = load()
            b0 = sum(brokers.ask("cpu").values())
            t0, c0 = time.perf_counter(), time.process_time()
            prop.propagate(0, snap)
            while not prop.in_sync():
                time.sleep(0.01)
            fanout, cpu = time.perf_counter() - t0, time.process_time() - c0
            broker_cpu = sum(brokers.ask("cpu").values()) - b0
            print(
                f"full fan-out: {args.brokers} brokers x {args.partitions:,} partitions: {fanout:.2f} s "
                f"(target 10 s: {fanout / 10:.2f}x); CPU {cpu:.2f} s here (the controller), "
                f"{broker_cpu:.2f} s in the brokers' processes [{load0} -> {load()}]"
            )
            print(f"  {verify(brokers, snap)}")
            brokers.ask("freeze")

            for tick in (0, args.tick_ms):
                snap = leader_changes(args, img, snap, prop, brokers, tick)
        finally:
            prop.stop()
    finally:
        brokers.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
