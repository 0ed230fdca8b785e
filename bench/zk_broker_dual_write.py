"""The channels' CPU per AlterPartition change, in process: what dual-write costs the propagation to ZK-mode brokers.

A 20,000-partition image (200 topics x 100, RF 3) with 6 migrating ZK-mode brokers, as
bench/kafka_side_by_side.py's cluster; each round changes `--changes` partitions' ISRs in place (as
ImageBuilder replays a PartitionChangeRecord), then, timed apart with the process's CPU clock:

- **snapshot**: `zk_propagator.snapshot` from the changed keys;
- **propagate**: `ZkPropagator.propagate`'s diff and the items it queues per broker (channels are
  stand-ins that keep the items);
- **encode**: each broker's items encoded as its channel does (`encode_body`, `encode_request_frame`;
  LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4);
- **answer**: each request's response, written beforehand by kio as a broker would send it (every
  error 0), read as the channel reads it.

No sockets, no brokers: the CPU a change costs the channels' threads and the propagator, without the
I/O and the GIL's contention the bench measures end to end. Medians over rounds 6-30, µs per change.

    PYTHONPATH=. .venv/bin/python bench/zk_broker_dual_write.py [--changes 300]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kio.serial import entity_writer  # noqa: E402

from migrator.controller.zk_brokers import zk_broker_messages as Z  # noqa: E402
from migrator.controller.zk_brokers import zk_broker_requests as R  # noqa: E402
from migrator.controller.zk_brokers.zk_broker_responses import all_clear  # noqa: E402
from migrator.controller.zk_brokers.zk_propagator import ZkPropagator, snapshot  # noqa: E402
from migrator.kraft.image import ImageChanges  # noqa: E402
from migrator.kraft.records import uuid_to_kafka  # noqa: E402
from migrator.model import Broker, ClusterImage, Endpoint, FeatureRange, Partition, Topic  # noqa: E402

BROKERS, TOPICS, PER_TOPIC = 6, 200, 100
VERSIONS = {Z.LEADER_AND_ISR: 7, Z.UPDATE_METADATA: 8, Z.STOP_REPLICA: 4}


class Kept:
    """A channel stand-in: keeps what the propagator queues for its broker."""

    def __init__(self) -> None:
        self.items: list[R.Item] = []

    def enqueue(self, items: list[R.Item], offset: int) -> None:
        self.items.extend(items)


def image() -> ClusterImage:
    img = ClusterImage()
    for b in range(1, BROKERS + 1):
        img.brokers[b] = Broker(
            id=b,
            endpoints=[Endpoint(listener="PLAINTEXT", host="127.0.0.1", port=9000 + b, security_protocol="PLAINTEXT")],
            features={"metadata.version": FeatureRange(min_version=1, max_version=21)},
            broker_epoch=100 + b,
            fenced=False,
            is_migrating_zk_broker=True,
        )  # fmt: skip
    for t in range(TOPICS):
        topic = img.topics[f"topic-{t}"] = Topic(
            name=f"topic-{t}", topic_id=uuid_to_kafka(uuid.UUID(int=t + 1))
        )
        for p in range(PER_TOPIC):
            replicas = [(t * PER_TOPIC + p + k) % BROKERS + 1 for k in range(3)]
            topic.partitions[p] = Partition(partition=p, replicas=replicas, isr=replicas, leader=replicas[0])
    return img


def answer(item: R.Item, version: int) -> bytes:
    """A broker's response to `item` with every error 0, as kio writes it (header included)."""
    cls: Any = Z.response_class(item.api_key, version)
    if item.api_key == Z.LEADER_AND_ISR:
        by: dict[uuid.UUID, list[Any]] = {}
        for (_, p), s in item.partitions.items():
            by.setdefault(s.topic_id, []).append(cls.PartitionError(partition_index=p, error_code=0))
        errors = tuple(cls.TopicError(topic_id=t, partition_errors=tuple(ps)) for t, ps in by.items())
        body = cls(error_code=0, topics=errors)
    else:
        body = cls(error_code=0)
    hcls: Any = Z.response_header_class(item.api_key, version)
    buf = io.BytesIO()
    entity_writer(hcls)(buf, hcls(correlation_id=7))
    entity_writer(cls)(buf, body)
    return buf.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--changes", type=int, default=300, help="ISR changes per propagation")
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    img = image()
    prop = ZkPropagator(None, 3000, 5)
    prop._manage_channels = lambda snap: None  # type: ignore[method-assign]
    kept = {b: Kept() for b in range(1, BROKERS + 1)}
    prop.channels = kept  # type: ignore[assignment]
    prev = snapshot(img)
    prop.propagate(0, prev)
    keys = list(prev.parts)
    rows: list[tuple[float, float, float, float]] = []
    at = 0
    for rnd in range(args.rounds):
        changes = ImageChanges()
        for _ in range(args.changes):
            topic, p = keys[(at * 7919) % len(keys)]
            at += 1
            d = img.topics[topic].partitions[p].__dict__
            d["isr"] = d["replicas"][:2] if len(d["isr"]) == 3 else list(d["replicas"])
            d["partition_epoch"] += 1
            changes.partitions.add((topic, p))
        for k in kept.values():
            k.items.clear()
        c0 = time.process_time()
        snap = snapshot(img, prev, changes)
        c1 = time.process_time()
        prop.propagate(rnd + 1, snap)
        c2 = time.process_time()
        sent = []
        for b, k in kept.items():
            h = R.Header(3000, 5, 100 + b)
            for it in k.items:
                v = VERSIONS[it.api_key]
                body = R.encode_body(it, v, h, shared=it.shared)
                R.encode_request_frame(it.api_key, v, 7, "zk2kraft-controller-3000", body)
                sent.append((it, v))
        c3 = time.process_time()
        answers = [(it, v, answer(it, v)) for it, v in sent]
        c4 = time.process_time()
        for it, v, frame in answers:
            if all_clear(it.api_key, v, frame) is None:
                R.response_errors(it.api_key, R.decode_response_frame(it.api_key, v, frame)[1])
        c5 = time.process_time()
        rows.append((c1 - c0, c2 - c1, c3 - c2, c5 - c4))
        prev = snap
    total = 0.0
    for name, col in zip(
        ("snapshot", "propagate", "encode", "answer"), zip(*rows[5:], strict=True), strict=True
    ):
        us = statistics.median(col) / args.changes * 1e6
        total += us
        print(f"{name:10s} {us:7.2f} us/change")
    print(f"{'total':10s} {total:7.2f} us/change ({args.changes} changes a propagation, {BROKERS} brokers)")


if __name__ == "__main__":
    main()
