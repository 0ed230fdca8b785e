"""The channels' direct encoder against kio's writer, on random requests in every version the controller can send.

`encode_body` writes LeaderAndIsr and UpdateMetadata without building their partition and topic
entities (`protocol.fast_writer.writer_from` reads each field straight from the controller's
PartitionState; topics are written from their states' bytes). The reference is kio's own writer on
the entities `build_request` makes (the shape tests/test_zk_broker_messages.py checks against Kafka
3.9's schema): byte-equal for random partitions over several topics, IsNew subsets, full and
incremental, shared (epoch patched) or not, again from the state cache, and after a state changed.
"""

from __future__ import annotations

import dataclasses
import random
import uuid

import pytest

from migrator.controller.zk_brokers import zk_broker_messages as Z
from migrator.controller.zk_brokers import zk_broker_requests as R
from migrator.controller.zk_brokers.zk_broker_requests import (
    BrokerInfo,
    Header,
    Item,
    PartitionState,
    build_request,
    encode_body,
    encode_entity,
)

CASES = [(Z.LEADER_AND_ISR, v) for v in range(8)] + [(Z.UPDATE_METADATA, v) for v in range(9)]


def _ids(rng: random.Random, n: int) -> tuple[int, ...]:
    return tuple(rng.randrange(-1, 1 << 31) for _ in range(n))


def _state(rng: random.Random, topic: str, tid: uuid.UUID, p: int) -> PartitionState:
    return PartitionState(
        topic,
        p,
        tid,
        rng.choice([-1, -2, rng.randrange(1 << 31)]),
        rng.randrange(-1, 1 << 31),
        _ids(rng, rng.randrange(0, 5)),
        rng.randrange(-1, 1 << 31),
        _ids(rng, rng.choice([0, 1, 3, 140])),  # 140: past a one-byte compact length
        _ids(rng, rng.randrange(0, 3)),
        _ids(rng, rng.randrange(0, 3)),
        rng.randrange(0, 2),
        _ids(rng, rng.randrange(0, 3)),
    )


def _item(rng: random.Random, api_key: int) -> Item:
    parts: dict[tuple[str, int], PartitionState] = {}
    for t in range(rng.randrange(0, 6)):
        topic = rng.choice(["t", "tópico", "x" * 200]) + str(t)
        tid = uuid.UUID(int=rng.getrandbits(128))
        for p in rng.sample(range(300), rng.randrange(1, 8)):
            parts[(topic, p)] = _state(rng, topic, tid, p)
    new = frozenset(k for k in parts if rng.random() < 0.3)
    live = tuple(
        BrokerInfo(
            b,
            (("PLAINTEXT", f"h{b}", 9092, "PLAINTEXT"), ("SSL", f"h{b}", 9093, "SSL")),
            rng.choice([None, "r1"]),
        )
        for b in range(rng.randrange(0, 4))
    )
    leaders = {b: (f"h{b}", 9000 + b) for b in range(rng.randrange(0, 4))}
    return Item(
        api_key, partitions=parts, leaders=leaders, live_brokers=live, full=rng.random() < 0.3, is_new=new
    )


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=[f"{k}-v{v}" for k, v in CASES])
def test_the_direct_encoder_writes_kios_bytes(api_key: int, version: int) -> None:
    rng = random.Random(f"encode-{api_key}-{version}")
    cls = Z.request_class(api_key, version)
    R._STATE_BYTES.clear()
    for _ in range(60):
        item = _item(rng, api_key)
        h = Header(rng.randrange(1 << 31), rng.randrange(1 << 31), rng.randrange(-1, 1 << 62))
        want = encode_entity(cls, build_request(item, version, h))
        assert encode_body(item, version, h) == want
        assert encode_body(item, version, h) == want  # the states from the cache
        shared = dataclasses.replace(item, shared=True)
        assert encode_body(shared, version, h, shared=True) == want
        if item.partitions:  # a state changed under the same key is encoded again, not reused
            k = rng.choice(list(item.partitions))
            item.partitions[k] = dataclasses.replace(
                item.partitions[k], leader_epoch=item.partitions[k].leader_epoch ^ 1
            )
            assert encode_body(item, version, h) == encode_entity(cls, build_request(item, version, h))
