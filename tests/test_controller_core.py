"""The controller's decisions (migrator.controller.core) over a replayed image, with no I/O.

A small harness plays the service's part: it appends each decision's records at consecutive offsets
and replays them into an ImageBuilder before the next decision, as the service does with the log.
"""

from __future__ import annotations

import uuid

import pytest

from migrator.controller.core import (
    EVENT_OFFLINE,
    AlterPartition,
    AlterPartitionReply,
    AlterReplicaState,
    AlterReplicaStateReply,
    BrokerState,
    ControllerConfig,
    ControllerCore,
    Decision,
    Heartbeat,
    HeartbeatReply,
    IsrMember,
    Listener,
    PartitionAlter,
    Registration,
    RegistrationReply,
    TopicAlter,
    state_of,
)
from migrator.controller.protocol import kafka_errors as E
from migrator.kraft.image import ImageBuilder
from migrator.kraft.records import record, uuid_to_kafka
from migrator.model import Partition

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
MV = 21
TOPIC_ID = uuid.UUID(int=0x1234)
TID = uuid_to_kafka(TOPIC_ID)


class Harness:
    """The service without I/O: offsets, replay, a clock."""

    def __init__(self, *, active: bool = True, session_ms: int = 1000) -> None:
        self.core = ControllerCore(ControllerConfig(CLUSTER, 3000, MV, session_timeout_ms=session_ms))
        self.core.active = active
        self.builder = ImageBuilder()
        self.offset = 0
        self.now = 1_000_000
        self.incarnations: dict[int, str] = {}
        self.epochs: dict[int, int] = {}

    @property
    def image(self):  # noqa: ANN201
        return self.builder.image

    def apply(self, d: Decision) -> object:
        for rec in d.records:
            self.builder.replay(self.offset, rec)
            self.offset += 1
        return d.reply

    def topic(self, name: str = "t", assignments: dict[int, list[int]] | None = None, tid=TOPIC_ID) -> None:  # noqa: ANN001
        self.apply(Decision([record("TopicRecord", 0, Name=name, TopicId=tid)], None))
        for pid, replicas in (assignments or {0: [1, 2]}).items():
            rec = record(
                "PartitionRecord",
                0,
                PartitionId=pid,
                TopicId=tid,
                Replicas=replicas,
                Isr=list(replicas),
                RemovingReplicas=[],
                AddingReplicas=[],
                Leader=replicas[0],
                LeaderRecoveryState=0,
                LeaderEpoch=0,
                PartitionEpoch=0,
            )
            self.apply(Decision([rec], None))

    def register(self, broker_id: int, *, new_incarnation: bool = False, **kw: object) -> RegistrationReply:
        if new_incarnation or broker_id not in self.incarnations:
            self.incarnations[broker_id] = uuid_to_kafka(uuid.uuid4())
        args: dict[str, object] = {
            "broker_id": broker_id,
            "cluster_id": CLUSTER,
            "incarnation_id": self.incarnations[broker_id],
            "listeners": (Listener("PLAINTEXT", f"b{broker_id}", 9092),),
            "features": {"metadata.version": (1, MV)},
            "is_migrating_zk_broker": True,
        }
        args.update(kw)
        reply = self.apply(self.core.register(self.image, Registration(**args), self.offset, self.now))  # type: ignore[arg-type]
        assert isinstance(reply, RegistrationReply)
        if reply.error == E.NONE:
            self.epochs[broker_id] = reply.broker_epoch
        return reply

    def beat(
        self, broker_id: int, target: BrokerState = BrokerState.ACTIVE, epoch: int | None = None
    ) -> HeartbeatReply:
        hb = Heartbeat.of(broker_id, self.epochs[broker_id] if epoch is None else epoch, target, self.offset)
        reply = self.apply(self.core.heartbeat(self.image, hb, self.now))
        assert isinstance(reply, HeartbeatReply)
        return reply

    def up(self, *ids: int) -> None:
        for b in ids:
            assert self.register(b).error == E.NONE
            assert not self.beat(b).is_fenced

    def part(self, pid: int = 0, name: str = "t") -> Partition:
        return self.image.topics[name].partitions[pid]

    def alter(
        self,
        leader: int,
        isr: list[int] | list[tuple[int, int]],
        *,
        pid: int = 0,
        version: int = 3,
        leader_epoch: int | None = None,
        partition_epoch: int | None = None,
        broker_epoch: int | None = None,
        topic_id: str | None = TID,
        name: str | None = "t",
    ) -> tuple[int, AlterPartitionReply]:
        topic = self.image.topics.get(name or "t")
        p = topic.partitions.get(pid) if topic is not None else None
        members = tuple(
            IsrMember(*m)
            if isinstance(m, tuple)
            else IsrMember(m, self.epochs.get(m, -1) if version >= 3 else -1)
            for m in isr
        )
        pa = PartitionAlter(
            pid,
            p.leader_epoch if leader_epoch is None and p is not None else (leader_epoch or 0),
            members,
            p.partition_epoch if partition_epoch is None and p is not None else (partition_epoch or 0),
        )
        req = AlterPartition(
            leader,
            self.epochs[leader] if broker_epoch is None else broker_epoch,
            (TopicAlter(name if version < 2 else None, topic_id if version >= 2 else None, (pa,)),),
            version,
        )
        reply = self.apply(self.core.alter_partition(self.image, req))
        assert isinstance(reply, AlterPartitionReply)
        err = reply.error if reply.error != E.NONE else reply.topics[0].partitions[0].error
        return err, reply


@pytest.fixture
def h() -> Harness:
    return Harness()


# --- registration -----------------------------------------------------------------------------------


def test_broker_epoch_is_the_offset_of_the_register_record(h: Harness) -> None:
    h.offset = 41
    r = h.register(1)
    assert r.error == E.NONE and r.broker_epoch == 41
    b = h.image.brokers[1]
    assert b.broker_epoch == 41 and b.fenced and b.is_migrating_zk_broker
    assert state_of(b) is BrokerState.INACTIVE and state_of(None) is BrokerState.INITIAL


def test_wrong_cluster_id_is_refused(h: Harness) -> None:
    r = h.register(1, cluster_id="other")
    assert r.error == E.INCONSISTENT_CLUSTER_ID and "other" in (r.message or "")
    assert 1 not in h.image.brokers


@pytest.mark.parametrize("rng", [(1, 20), (22, 25), None])
def test_metadata_version_outside_the_brokers_range_is_refused(
    h: Harness, rng: tuple[int, int] | None
) -> None:
    r = h.register(1, features={} if rng is None else {"metadata.version": rng})
    assert r.error == E.UNSUPPORTED_VERSION and 1 not in h.image.brokers


def test_kraft_broker_refused_during_soft_start() -> None:
    h = Harness(active=False)
    assert h.register(1, is_migrating_zk_broker=False).error == E.BROKER_ID_NOT_REGISTERED
    assert h.register(1).error == E.NONE  # a migrating ZooKeeper broker is welcome


def test_kraft_broker_may_not_take_a_zookeeper_brokers_id(h: Harness) -> None:
    h.up(1)
    assert (
        h.register(1, new_incarnation=True, is_migrating_zk_broker=False).error
        == E.DUPLICATE_BROKER_REGISTRATION
    )
    h.core.zk_broker_ids = frozenset({5})
    assert h.register(5, is_migrating_zk_broker=False).error == E.DUPLICATE_BROKER_REGISTRATION
    assert h.register(6, is_migrating_zk_broker=False).error == E.NONE


def test_incarnations_older_refused_newer_replaces(h: Harness) -> None:
    h.up(1)
    old = h.incarnations[1]
    # A different incarnation while the registered one has a live session: Kafka's duplicate.
    assert h.register(1, new_incarnation=True).error == E.DUPLICATE_BROKER_REGISTRATION
    h.incarnations[1] = old
    h.now += 5000  # the session expires
    r = h.register(1, new_incarnation=True)
    assert r.error == E.NONE and h.image.brokers[1].incarnation_id == h.incarnations[1] != old
    # The replaced incarnation is older: refused even once the new one is silent.
    h.now += 5000
    assert h.register(1, incarnation_id=old).error == E.DUPLICATE_BROKER_REGISTRATION
    assert h.image.brokers[1].incarnation_id != old


def test_bad_incarnation_and_negative_id(h: Harness) -> None:
    assert h.register(1, incarnation_id="not a uuid!").error == E.INVALID_REQUEST
    assert h.register(-3).error == E.INVALID_REQUEST


# --- heartbeats -------------------------------------------------------------------------------------


def test_heartbeat_unfences_once_caught_up(h: Harness) -> None:
    h.register(1)
    hb = Heartbeat(1, h.epochs[1], current_metadata_offset=h.epochs[1] - 1)
    reply = h.apply(h.core.heartbeat(h.image, hb, h.now))
    assert isinstance(reply, HeartbeatReply) and reply.is_fenced and not reply.is_caught_up
    reply = h.beat(1)
    assert not reply.is_fenced and reply.is_caught_up and reply.state is BrokerState.ACTIVE
    assert not h.image.brokers[1].fenced


def test_heartbeat_with_stale_epoch(h: Harness) -> None:
    h.up(1)
    assert h.beat(1, epoch=h.epochs[1] + 7).error == E.STALE_BROKER_EPOCH
    h.epochs[9] = 0
    assert h.beat(9).error == E.STALE_BROKER_EPOCH


def test_inactive_target_fences_and_active_target_unfences(h: Harness) -> None:
    h.up(1, 2)
    h.topic(assignments={0: [1, 2]})
    r = h.beat(1, BrokerState.INACTIVE)
    assert r.is_fenced and h.image.brokers[1].fenced
    p = h.part()
    assert p.isr == [2] and p.leader == 2
    assert not h.beat(1).is_fenced


def test_session_timeout_fences_and_moves_leaders(h: Harness) -> None:
    h.up(1, 2, 3)
    h.topic(assignments={0: [1, 2, 3], 1: [2, 1], 2: [1]})
    h.now += 600
    h.beat(2)
    h.beat(3)
    h.now += 600  # broker 1 silent for 1200 ms > 1000
    assert h.core.expired_brokers(h.image, h.now) == [1]
    before = h.part(0).leader_epoch
    d = h.core.fence(h.image, 1)
    assert d.records[-1].name == "BrokerRegistrationChangeRecord" and d.records[-1].fields["Fenced"] == 1
    h.apply(d)
    assert h.image.brokers[1].fenced
    p0, p1, p2 = h.part(0), h.part(1), h.part(2)
    assert p0.isr == [2, 3] and p0.leader == 2 and p0.leader_epoch == before + 1
    assert p1.isr == [2] and p1.leader == 2
    # KIP-903's exception: the last ISR member stays in the ISR, the partition has no leader.
    assert p2.isr == [1] and p2.leader == -1
    assert h.core.expired_brokers(h.image, h.now) == []
    # The fenced broker heartbeats again: unfenced, and it leads its leaderless partition again.
    assert not h.beat(1).is_fenced
    assert h.part(2).leader == 1 and h.part(2).isr == [1]


#: Kafka 3.9's MetadataVersion levels around KRaft's fencing records (server-common MetadataVersion.java):
#: IBP_3_3_IV2 "In KRaft mode, use BrokerRegistrationChangeRecord instead of UnfenceBrokerRecord and
#: FenceBrokerRecord" (isBrokerRegistrationChangeRecordSupported).
IBP_3_3_IV1 = 5
IBP_3_3_IV2 = 6


@pytest.mark.parametrize(
    ("level", "fence", "unfence"),
    [
        (IBP_3_3_IV1, "FenceBrokerRecord", "UnfenceBrokerRecord"),
        (IBP_3_3_IV2, "BrokerRegistrationChangeRecord", "BrokerRegistrationChangeRecord"),
    ],
)
def test_fence_records_follow_kafkas_metadata_version_boundary(level: int, fence: str, unfence: str) -> None:
    h = Harness()
    h.core = ControllerCore(ControllerConfig(CLUSTER, 3000, level, session_timeout_ms=1000))
    h.core.active = True
    features = {"metadata.version": (1, level)}
    assert h.register(1, features=features).error == E.BROKER_ID_NOT_REGISTERED
    h.register(1, features=features, is_migrating_zk_broker=False)
    beat = h.core.heartbeat(h.image, Heartbeat(1, h.epochs[1], h.offset), h.now)
    assert [r.name for r in beat.records] == [unfence]
    assert h.apply(beat).is_fenced is False  # type: ignore[attr-defined]
    h.now += 2000
    d = h.core.fence(h.image, 1)
    assert [r.name for r in d.records] == [fence]
    h.apply(d)
    assert h.image.brokers[1].fenced


def test_controlled_shutdown_moves_leadership_before_stopping(h: Harness) -> None:
    h.up(1, 2)
    h.topic(assignments={0: [1, 2], 1: [2, 1]})
    r = h.beat(1, BrokerState.STOPPING)
    # Stopping: leadership and ISR places move away first; the broker keeps serving.
    assert not r.should_shut_down and not r.is_fenced and r.state is BrokerState.ACTIVE
    assert h.image.brokers[1].in_controlled_shutdown and state_of(h.image.brokers[1]) is BrokerState.STOPPING
    p0 = h.part(0)
    assert p0.leader == 2 and p0.isr == [2]
    assert h.part(1).isr == [2]
    # It may not come back to active.
    r = h.beat(1, BrokerState.ACTIVE)
    assert not r.is_fenced and h.image.brokers[1].in_controlled_shutdown
    # The next heartbeat finds it leading nothing: it stops, fenced.
    r = h.beat(1, BrokerState.STOPPING)
    assert r.should_shut_down and r.is_fenced and h.image.brokers[1].fenced
    # Kafka's BrokerHeartbeatManager after SHUTDOWN_NOW: the fence ended the controlled shutdown, so
    # the broker is FENCED like any other. Asking wantShutDown again is granted at once; a heartbeat
    # without it (Kafka's broker sends none after shouldShutDown) unfences it once caught up, and the
    # registration keeps InControlledShutdown (BrokerRegistration.cloneWith): no leadership comes back.
    r = h.beat(1, BrokerState.STOPPING)
    assert r.should_shut_down and r.is_fenced and h.image.brokers[1].fenced
    r = h.beat(1, BrokerState.ACTIVE)
    assert not r.should_shut_down and not r.is_fenced and not h.image.brokers[1].fenced
    assert h.image.brokers[1].in_controlled_shutdown and h.part(0).leader == 2
    h.now += 10_000  # it stops heartbeating: fenced when its session ends, then a restart registers anew
    h.apply(h.core.fence(h.image, 1))
    assert h.register(1, new_incarnation=True).error == E.NONE
    r = h.beat(1, BrokerState.ACTIVE)
    assert not r.should_shut_down and not r.is_fenced and not h.image.brokers[1].in_controlled_shutdown


def test_controlled_shutdown_of_a_broker_leading_nothing(h: Harness) -> None:
    h.up(1, 2)
    h.topic(assignments={0: [2, 1]})
    r = h.beat(1, BrokerState.STOPPING)
    assert r.should_shut_down and r.is_fenced and h.part().isr == [2]


# --- AlterPartition ---------------------------------------------------------------------------------


def test_isr_shrink_and_expand_accepted_with_new_partition_epoch(h: Harness) -> None:
    h.up(1, 2)
    h.topic(assignments={0: [1, 2]})
    err, reply = h.alter(1, [1])
    res = reply.topics[0].partitions[0]
    assert err == E.NONE and res.isr == (1,) and res.partition_epoch == 1 and res.leader == 1
    assert h.part().isr == [1] and h.part().partition_epoch == 1
    assert res.leader_epoch == h.part().leader_epoch == 1  # a shrink bumps it while migrating
    err, reply = h.alter(1, [1, 2])
    res = reply.topics[0].partitions[0]
    assert err == E.NONE and res.partition_epoch == 2 and res.leader_epoch == 1
    assert h.part().isr == [1, 2]


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("stale-broker-epoch", E.STALE_BROKER_EPOCH),
        ("unknown-topic-name-v1", E.UNKNOWN_TOPIC_OR_PARTITION),
        ("unknown-topic-id-v2", E.UNKNOWN_TOPIC_ID),
        ("unknown-partition", E.UNKNOWN_TOPIC_OR_PARTITION),
        ("not-leader", E.NOT_LEADER_OR_FOLLOWER),
        ("old-leader-epoch", E.FENCED_LEADER_EPOCH),
        ("newer-leader-epoch", E.NOT_CONTROLLER),
        ("newer-partition-epoch", E.NOT_CONTROLLER),
        ("old-partition-epoch", E.INVALID_UPDATE_VERSION),
        ("empty-isr", E.INVALID_REQUEST),
        ("outside-assignment", E.INVALID_REQUEST),
        ("duplicate-member", E.INVALID_REQUEST),
        ("leader-not-in-isr", E.INVALID_REQUEST),
        ("fenced-member", E.INELIGIBLE_REPLICA),
        ("fenced-member-v1", E.OPERATION_NOT_ATTEMPTED),
        ("shutting-down-member", E.INELIGIBLE_REPLICA),
        ("unregistered-member", E.INELIGIBLE_REPLICA),
        ("stale-member-epoch-v3", E.INELIGIBLE_REPLICA),
    ],
)
def test_alter_partition_errors(h: Harness, case: str, expected: int) -> None:
    h.up(1, 2, 3, 4)
    h.topic(assignments={0: [1, 2, 3]})
    h.alter(1, [1, 2])  # partition epoch 1, leader epoch 1
    before = h.part().model_copy()
    kw: dict[str, object] = {}
    isr: list[int] | list[tuple[int, int]] = [1, 2]
    if case == "stale-broker-epoch":
        kw["broker_epoch"] = h.epochs[1] - 1
    elif case == "unknown-topic-name-v1":
        kw.update(version=1, name="nope")
    elif case == "unknown-topic-id-v2":
        kw.update(version=2, topic_id=uuid_to_kafka(uuid.UUID(int=99)))
    elif case == "unknown-partition":
        kw["pid"] = 7
    elif case == "not-leader":
        isr = [1, 2]
        kw["leader"] = 2
    elif case == "old-leader-epoch":
        kw["leader_epoch"] = before.leader_epoch - 1
    elif case == "newer-leader-epoch":
        kw["leader_epoch"] = before.leader_epoch + 1
    elif case == "newer-partition-epoch":
        kw["partition_epoch"] = before.partition_epoch + 1
    elif case == "old-partition-epoch":
        kw["partition_epoch"] = before.partition_epoch - 1
    elif case == "empty-isr":
        isr = []
    elif case == "outside-assignment":
        isr = [1, 4]
    elif case == "duplicate-member":
        isr = [1, 2, 2]
    elif case == "leader-not-in-isr":
        isr = [2, 3]
    elif case in ("fenced-member", "fenced-member-v1"):
        h.beat(3, BrokerState.INACTIVE)
        isr = [1, 2, 3]
        if case.endswith("v1"):
            kw["version"] = 1
    elif case == "shutting-down-member":
        h.topic("u", {0: [3, 4]}, tid=uuid.UUID(int=77))  # broker 3 leads something: it stays STOPPING
        h.beat(3, BrokerState.STOPPING)
        assert h.image.brokers[3].in_controlled_shutdown and not h.image.brokers[3].fenced
        isr = [1, 2, 3]
    elif case == "unregistered-member":
        h.topic("v", {0: [1, 5]}, tid=uuid.UUID(int=78))
        h.alter(1, [1], pid=0, topic_id=uuid_to_kafka(uuid.UUID(int=78)), name="v")
    elif case == "stale-member-epoch-v3":
        isr = [(1, h.epochs[1]), (2, h.epochs[2] - 1)]
    leader = kw.pop("leader", 1)
    if case == "unregistered-member":
        p = h.image.topics["v"].partitions[0]
        err, _ = h.alter(
            1,
            [1, 5],
            topic_id=uuid_to_kafka(uuid.UUID(int=78)),
            name="v",
            leader_epoch=p.leader_epoch,
            partition_epoch=p.partition_epoch,
        )
    else:
        err, _ = h.alter(leader, isr, **kw)  # type: ignore[arg-type]
    assert E.name_of(err) == E.name_of(expected)
    after = h.part()
    assert (after.isr, after.partition_epoch) == (before.isr, before.partition_epoch)


def test_not_controller_during_soft_start() -> None:
    h = Harness(active=False)
    h.up(1, 2)
    h.topic()
    err, _ = h.alter(1, [1])
    assert err == E.NOT_CONTROLLER and h.part().isr == [1, 2]
    req = AlterReplicaState(1, h.epochs[1], EVENT_OFFLINE, "disk", (("t", (0,)),))
    assert h.core.alter_replica_state(h.image, req).reply.error == E.NOT_CONTROLLER  # type: ignore[attr-defined]


def test_v0_names_topics_and_skips_member_epochs(h: Harness) -> None:
    h.up(1, 2)
    h.topic()
    err, reply = h.alter(1, [1], version=0)
    assert err == E.NONE and reply.topics[0].name == "t" and h.part().isr == [1]


def test_kip497_two_in_flight_requests_on_one_partition_epoch(h: Harness) -> None:
    """Two AlterPartitions built on the same partition epoch: exactly one wins."""
    h.up(1, 2, 3)
    h.topic(assignments={0: [1, 2, 3]})
    p = h.part()
    first = (p.leader_epoch, p.partition_epoch)
    err_a, reply_a = h.alter(1, [1, 2], leader_epoch=first[0], partition_epoch=first[1])
    err_b, _ = h.alter(1, [1, 3], leader_epoch=first[0], partition_epoch=first[1])
    assert err_a == E.NONE and reply_a.topics[0].partitions[0].partition_epoch == first[1] + 1
    # The shrink bumped the leader epoch, so the second is older on both counts: Kafka checks the leader
    # epoch first. Built on expansions (no epoch bump) it is INVALID_UPDATE_VERSION.
    assert err_b in (E.FENCED_LEADER_EPOCH, E.INVALID_UPDATE_VERSION)
    assert h.part().isr == [1, 2]
    # Expansions: the leader epoch stays, the partition epoch decides.
    p = h.part()
    start = (p.leader_epoch, p.partition_epoch)
    results = [
        h.alter(1, isr, leader_epoch=start[0], partition_epoch=start[1])[0] for isr in ([1, 2, 3], [1, 3, 2])
    ]
    assert results == [E.NONE, E.INVALID_UPDATE_VERSION]
    assert h.part().isr == [1, 2, 3] and h.part().partition_epoch == start[1] + 1


def test_kip903_six_steps(h: Harness) -> None:
    """KIP-903: a delayed AlterPartition may not add a broker that rebooted with an empty disk."""
    # 1. A leads with ISR {A}; B is a follower.
    a, b = 1, 2
    h.up(a, b)
    h.topic(assignments={0: [a, b]})
    h.alter(a, [a])
    assert h.part().isr == [a]
    # 2. B catches up; A learns B's broker epoch from B's fetches and builds the AlterPartition
    #    adding B, but it is delayed.
    p = h.part()
    delayed = dict(leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch)
    b_epoch_seen_by_a = h.epochs[b]
    # 3. B fails hard; the controller fences it when its session runs out (B is not in the ISR, so
    #    no partition changes).
    h.now += 600
    h.beat(a)
    h.now += 600
    assert h.core.expired_brokers(h.image, h.now) == [b]
    fence = h.core.fence(h.image, b)
    assert [r.name for r in fence.records] == ["BrokerRegistrationChangeRecord"]
    h.apply(fence)
    # 4./5. B comes back with its disk replaced: a new incarnation registers and gets a new epoch.
    reply = h.register(b, new_incarnation=True)
    assert reply.error == E.NONE and reply.broker_epoch > b_epoch_seen_by_a
    assert not h.beat(b).is_fenced  # it is even unfenced again: only the epoch tells them apart
    # 6. The delayed AlterPartition arrives, naming B's old epoch: INELIGIBLE_REPLICA, B stays out.
    err, _ = h.alter(a, [(a, h.epochs[a]), (b, b_epoch_seen_by_a)], **delayed)  # type: ignore[arg-type]
    assert err == E.INELIGIBLE_REPLICA
    assert h.part().isr == [a] and h.part().partition_epoch == delayed["partition_epoch"]
    # The same request with B's current epoch (once A has seen B fetch again) is accepted.
    err, reply2 = h.alter(a, [(a, h.epochs[a]), (b, h.epochs[b])], **delayed)  # type: ignore[arg-type]
    assert err == E.NONE and h.part().isr == [a, b]
    assert reply2.topics[0].partitions[0].partition_epoch == delayed["partition_epoch"] + 1


def test_reregistration_without_previous_epoch_leaves_isrs(h: Harness) -> None:
    """A broker that restarts uncleanly leaves every ISR it was in but a last one."""
    h.up(1, 2)
    h.topic(assignments={0: [1, 2], 1: [2]})
    h.beat(2, BrokerState.INACTIVE)  # no live session any more
    assert h.part(0).isr == [1]
    h.beat(2)
    h.alter(1, [1, 2])
    assert h.part(0).isr == [1, 2]
    h.now += 5000
    h.beat(1)
    h.register(2, new_incarnation=True)
    assert h.part(0).isr == [1] and h.part(1).isr == [2] and h.part(1).leader == -1


# --- AlterReplicaState (KIP-589) --------------------------------------------------------------------


def _ars(
    h: Harness,
    broker: int,
    topics: tuple[tuple[str, tuple[int, ...]], ...],
    *,
    broker_epoch: int | None = None,
    event_type: int = EVENT_OFFLINE,
) -> AlterReplicaStateReply:
    epoch = h.epochs[broker] if broker_epoch is None else broker_epoch
    req = AlterReplicaState(broker, epoch, event_type, "log dir failed", topics)
    reply = h.apply(h.core.alter_replica_state(h.image, req))
    assert isinstance(reply, AlterReplicaStateReply)
    return reply


def test_alter_replica_state_offline(h: Harness) -> None:
    h.up(1, 2, 3)
    h.topic(assignments={0: [1, 2, 3], 1: [2, 1], 2: [1]})
    reply = _ars(h, 1, (("t", (0, 1, 2, 9)), ("gone", (0,))))
    assert reply.error == E.NONE
    assert dict(reply.topics)["t"] == (
        (0, E.NONE),
        (1, E.NONE),
        (2, E.NONE),
        (9, E.UNKNOWN_TOPIC_OR_PARTITION),
    )
    assert dict(reply.topics)["gone"] == ((0, E.UNKNOWN_TOPIC_OR_PARTITION),)
    assert h.part(0).isr == [2, 3] and h.part(0).leader == 2
    assert h.part(1).isr == [2] and h.part(1).leader == 2
    assert h.part(2).isr == [1] and h.part(2).leader == -1  # the last ISR member stays
    # An offline replica may not rejoin the ISR, nor lead after an election.
    err, _ = h.alter(2, [2, 1], pid=1)
    assert err == E.INELIGIBLE_REPLICA
    # Idempotent: a retry changes nothing.
    offset = h.offset
    assert _ars(h, 1, (("t", (0, 1, 2)),)).error == E.NONE and h.offset == offset
    # A new broker epoch (the broker restarted) brings its replicas back.
    h.now += 5000
    h.beat(2)
    h.beat(3)
    h.register(1)
    h.beat(1)
    assert h.alter(2, [2, 1], pid=1)[0] == E.NONE


def test_alter_replica_state_errors(h: Harness) -> None:
    h.up(1, 2)
    h.topic()
    assert _ars(h, 1, (("t", (0,)),), broker_epoch=h.epochs[1] + 1).error == E.STALE_BROKER_EPOCH
    assert _ars(h, 1, (("t", (0,)),), event_type=2).error == E.UNKNOWN_EVENT_TYPE
    assert h.part().isr == [1, 2]
