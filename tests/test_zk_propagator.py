"""What the propagator sends whom, over TCP to simulated ZK brokers, fed images directly.

The cases the controller-level test (test_zk_broker_rpcs.py) does not reach: KRaft-mode brokers and a
ZK broker registered under a KRaft broker's id get nothing; a reassignment's removed replica gets
StopReplica(delete) and the added one LeaderAndIsr; a re-registration (new broker epoch) gets the
full state again.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from migrator.controller.zk_brokers.zk_broker_channel import wait_until
from migrator.controller.zk_brokers.zk_broker_requests import PartitionState
from migrator.controller.zk_brokers.zk_propagator import Snapshot, ZkPropagator, snapshot
from migrator.kraft.records import uuid_to_kafka
from migrator.model import Broker, ClusterImage, Endpoint, Partition, Topic
from zk_fixtures.zk_broker_server import ZkBrokerCache, ZkBrokerServer

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


@pytest.fixture
def brokers() -> Iterator[dict[int, tuple[ZkBrokerCache, ZkBrokerServer]]]:
    epochs = {b: 10 + b for b in range(1, 5)}
    out = {}
    for b in range(1, 5):
        cache = ZkBrokerCache(b, lambda b=b: epochs[b])
        out[b] = (cache, ZkBrokerServer(cache).start())
    yield out
    for _, server in out.values():
        server.stop()


def image(
    servers: dict[int, tuple[ZkBrokerCache, ZkBrokerServer]], kraft: set[int], replicas: list[int]
) -> ClusterImage:
    img = ClusterImage()
    for b, (_, server) in servers.items():
        host, port = server.address
        img.brokers[b] = Broker(
            id=b,
            endpoints=[Endpoint(listener="PLAINTEXT", host=host, port=port, security_protocol="PLAINTEXT")],
            broker_epoch=10 + b,
            fenced=False,
            is_migrating_zk_broker=b not in kraft,
        )
    img.topics["t"] = Topic(
        name="t",
        topic_id=TOPIC_ID,
        partitions={
            0: Partition(partition=0, replicas=replicas, isr=replicas, leader=replicas[0], leader_epoch=1)
        },
    )
    return img


def test_kraft_brokers_get_nothing_and_a_reassignment_stops_the_removed_replica(brokers):
    prop = ZkPropagator(None, 3000, 7)
    try:
        # Broker 4 is a KRaft broker (a ZK broker registering with its id: test_zk_broker_triggers).
        prop.propagate(1, snapshot(image(brokers, {4}, [1, 2, 4])))
        assert wait_until(prop.in_sync, 10)
        assert sorted(prop.channels) == [1, 2, 3]
        assert brokers[4][0].requests == {}
        assert brokers[1][0].roles == {("t", 0): (True, 1, 0)} and brokers[3][0].roles == {}
        assert all(("t", 0) in brokers[b][0].partitions for b in (1, 2, 3))

        # Reassign [1, 2, 4] → [3, 2, 4]: 3 gets LeaderAndIsr (it leads now), 1 StopReplica(delete).
        img = image(brokers, {4}, [3, 2, 4])
        img.topics["t"].partitions[0].leader_epoch = 2
        prop.propagate(2, snapshot(img))
        assert wait_until(prop.in_sync, 10)
        assert brokers[1][0].roles == {} and brokers[1][0].requests.get("StopReplica") == 1
        assert brokers[3][0].roles == {("t", 0): (True, 2, 0)}
        assert brokers[2][0].roles == {("t", 0): (False, 2, 0)}
        assert all(brokers[b][0].partitions[("t", 0)].replicas == (3, 2, 4) for b in (1, 2, 3))
        assert brokers[4][0].requests == {}
    finally:
        prop.stop()


def test_a_new_broker_epoch_gets_the_full_state_again(brokers):
    prop = ZkPropagator(None, 3000, 7)
    try:
        img = image(brokers, set(), [1, 2])
        prop.propagate(1, snapshot(img))
        assert wait_until(prop.in_sync, 10)
        cache = brokers[2][0]
        assert cache.requests == {"UpdateMetadata": 1, "LeaderAndIsr": 1}
        cache.reset()  # an empty disk
        img.brokers[2].broker_epoch = 99  # and its new registration
        prop.propagate(2, snapshot(img))
        assert wait_until(lambda: prop.in_sync() and cache.requests.get("UpdateMetadata") == 2, 10), (
            cache.requests
        )
        assert ("t", 0) in cache.partitions and cache.roles == {("t", 0): (False, 1, 0)}
        assert brokers[1][0].requests == {"UpdateMetadata": 1, "LeaderAndIsr": 1}  # nothing changed for 1
    finally:
        prop.stop()


def test_deleted_topics_leave_the_caches_with_leader_minus_two(brokers):
    prop = ZkPropagator(None, 3000, 7)
    try:
        img = image(brokers, set(), [1, 2])
        prop.propagate(1, snapshot(img))
        assert wait_until(prop.in_sync, 10)
        del img.topics["t"]
        prop.propagate(2, snapshot(img))
        assert wait_until(prop.in_sync, 10)
        for b in (1, 2, 3, 4):
            cache = brokers[b][0]
            assert cache.partitions == {} and cache.roles == {}
        assert brokers[3][0].requests.get("StopReplica") is None  # not a replica: only UpdateMetadata
    finally:
        prop.stop()


def test_snapshot_marks_replicas_on_fenced_brokers_offline(brokers):
    img = image(brokers, set(), [1, 2])
    img.brokers[2].fenced = True
    snap: Snapshot = snapshot(img)
    state: PartitionState = snap.parts[("t", 0)]
    assert state.offline == (2,) and state.topic_id == uuid.UUID(int=1)
    assert sorted(snap.zk) == [1, 3, 4] and [b.broker_id for b in snap.live] == [1, 3, 4]
    assert dataclasses.replace(state, offline=()).replicas == (1, 2)


def test_snapshot_reuses_unchanged_partitions_and_sees_changes_made_in_place(brokers):
    img = image(brokers, set(), [1, 2])
    key = ("t", 0)
    s1 = snapshot(img)
    s2 = snapshot(img, s1)
    assert s2.parts[key] is s1.parts[key]
    # As ImageBuilder replays a PartitionChangeRecord: in place, the partition epoch bumped.
    d = img.topics["t"].partitions[0].__dict__
    d["leader"], d["leader_epoch"], d["partition_epoch"] = 2, d["leader_epoch"] + 1, d["partition_epoch"] + 1
    s3 = snapshot(img, s2)
    assert s3.parts[key].leader == 2 and s3.parts[key].leader_epoch == 2
    img.brokers[2].fenced = True  # liveness changes every partition's offline replicas
    assert snapshot(img, s3).parts[key].offline == (2,)
    # A topic deleted and re-created under the same name: a new topic id, never the old state.
    img.topics["t"] = Topic(
        name="t",
        topic_id="AAAAAAAAAAAAAAAAAAAAAg",
        partitions={0: Partition(partition=0, replicas=[1, 2], isr=[1, 2], leader=1, leader_epoch=0)},
    )
    assert snapshot(img, s3).parts[key].topic_id == uuid.UUID(int=2)


def test_snapshot_by_changed_keys_equals_a_full_one() -> None:
    """The image builder's changed keys (partition changes, a topic created and one removed, a broker
    fenced) give the snapshot a full visit of the image gives, and name every key that differs."""
    from migrator.kraft.image import ImageBuilder
    from migrator.kraft.records import record

    start = ClusterImage()
    for b in range(1, 5):
        start.brokers[b] = Broker(id=b, broker_epoch=10 + b, fenced=False, is_migrating_zk_broker=True)
    for name, tid in (("a", 1), ("b", 2)):
        start.topics[name] = Topic(
            name=name,
            topic_id=uuid_to_kafka(uuid.UUID(int=tid)),
            partitions={
                p: Partition(partition=p, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1) for p in range(3)
            },
        )
    builder = ImageBuilder(start)
    builder.track_changes()
    prev = snapshot(builder.image)
    builder.take_changes()
    builder.replay(0, record("PartitionChangeRecord", TopicId=uuid.UUID(int=1), PartitionId=1, Leader=2))
    builder.replay(1, record("RemoveTopicRecord", TopicId=uuid.UUID(int=2)))
    builder.replay(2, record("TopicRecord", Name="c", TopicId=uuid.UUID(int=3)))
    builder.replay(
        3,
        record(
            "PartitionRecord", TopicId=uuid.UUID(int=3), PartitionId=0, Replicas=[4, 1], Isr=[4, 1], Leader=4
        ),
    )
    builder.replay(4, record("FenceBrokerRecord", Id=3, Epoch=13))
    changes = builder.take_changes()
    assert (
        changes is not None and changes.partitions and changes.topics == {"b", "c"} and changes.brokers == {3}
    )
    by_changes = snapshot(builder.image, prev, changes)
    full = snapshot(builder.image)
    assert by_changes.parts == full.parts and by_changes.topic_parts == full.topic_parts
    assert by_changes.base == prev.seq and by_changes.touched is not None
    differs = {k for k in prev.parts.keys() | full.parts.keys() if prev.parts.get(k) != full.parts.get(k)}
    assert differs and differs <= by_changes.touched
    assert full.parts[("a", 0)].offline == (3,) and ("b", 0) not in full.parts


def _returns(fn, guard_s: float = 60.0) -> bool:
    """``fn()`` returned within the guard (which only keeps a broken build from hanging the suite)."""
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    t.join(guard_s)
    return not t.is_alive()


def test_pace_waits_for_delivery_but_never_past_the_tick(brokers):
    """Between propagations the loop waits until every channel delivered the last one, at most
    tick_ms: a broker that cannot be reached holds the others back no longer than that."""
    prop = ZkPropagator(None, 3000, 7, tick_ms=600_000)
    try:
        img = image(brokers, set(), [1, 2])
        prop.propagate(1, snapshot(img))
        assert wait_until(prop.in_sync, 60)
        # all delivered: with a ten-minute tick, only the delivery can end the wait within the guard
        assert _returns(prop.pace)
        brokers[4][1].stop()  # broker 4 gone: its channel cannot deliver
        img.brokers[4].broker_epoch = 99  # a re-registration: a full resend it will never get
        img.topics["t"].partitions[0].leader_epoch = 2
        prop.tick_ms = 300
        t0 = time.monotonic()
        prop.propagate(2, snapshot(img))
        assert _returns(prop.pace)  # the tick ends it, though broker 4 never delivers
        assert time.monotonic() >= t0 + 0.3 and not prop.in_sync()  # not before the tick
        assert wait_until(lambda: brokers[1][0].partitions[("t", 0)].leader_epoch == 2, 60)
    finally:
        prop.stop()
