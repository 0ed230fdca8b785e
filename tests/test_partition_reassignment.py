"""Kafka 3.9's reassignment rules (PartitionReassignmentReplicas, PartitionReassignmentRevert and the
PartitionChangeBuilder's completion), cases taken from Kafka's own unit tests of those classes."""

from __future__ import annotations

import uuid

from test_controller_core import TOPIC_ID, Harness

from migrator.controller.core import Decision
from migrator.controller.managers.partition_reassignment import build_change, moves, revert
from migrator.kraft.records import record
from migrator.model import Partition

TID = uuid.UUID(int=7)


def part(replicas: list[int], isr: list[int], leader: int, adding=(), removing=()) -> Partition:
    return Partition(
        partition=0,
        replicas=replicas,
        isr=isr,
        leader=leader,
        adding_replicas=list(adding),
        removing_replicas=list(removing),
    )


def changed(rec) -> dict:
    """The fields a PartitionChangeRecord sets (record() fills the rest with "no change")."""
    assert rec is not None
    unset = {"Leader": -2, "LeaderRecoveryState": -1}
    return {
        k: v
        for k, v in rec.fields.items()
        if k not in ("PartitionId", "TopicId") and v is not None and unset.get(k, object()) != v
    }


def test_moves_add_remove_and_reorder():
    m = moves([0, 1, 2], [3, 4, 5])
    assert (m.removing, m.adding, m.replicas) == ([0, 1, 2], [3, 4, 5], [3, 4, 5, 0, 1, 2])
    m = moves([0, 1, 2], [0, 1, 3])
    assert (m.removing, m.adding, m.replicas) == ([2], [3], [0, 1, 3, 2])
    m = moves([0, 1, 2], [2, 1, 0])
    assert (m.removing, m.adding, m.replicas) == ([], [], [2, 1, 0])


def test_start_records_target_and_removing_with_both_lists():
    p = part([0, 1, 2], [0, 1, 2], 0)
    m = moves(p.replicas, [3, 4, 5])
    rec = build_change(p, TID, lambda r: True, replicas=m.replicas, adding=m.adding, removing=m.removing)
    # nothing dropped yet: no ISR change, no leader epoch bump
    assert changed(rec) == {
        "Replicas": [3, 4, 5, 0, 1, 2],
        "AddingReplicas": [3, 4, 5],
        "RemovingReplicas": [0, 1, 2],
    }


def test_reorder_completes_at_once_without_a_leader_bump():
    p = part([0, 1, 2], [0, 1, 2], 0)
    rec = build_change(p, TID, lambda r: True, replicas=[2, 1, 0])
    assert changed(rec) == {"Replicas": [2, 1, 0]}


def test_isr_with_every_target_completes_and_elects_from_the_target():
    p = part([3, 4, 5, 0, 1, 2], [0, 1, 2], 0, adding=[3, 4, 5], removing=[0, 1, 2])
    partial = build_change(p, TID, lambda r: True, isr=[0, 1, 2, 3])
    assert changed(partial) == {"Isr": [0, 1, 2, 3]}
    done = build_change(p, TID, lambda r: True, isr=[0, 1, 2, 3, 4, 5])
    assert changed(done) == {
        "Replicas": [3, 4, 5],
        "Isr": [3, 4, 5],
        "Leader": 3,
        "AddingReplicas": [],
        "RemovingReplicas": [],
    }
    # a target replica that may not lead (fenced) is passed over
    assert changed(build_change(p, TID, lambda r: r != 3, isr=[0, 1, 2, 3, 4, 5]))["Leader"] == 4


def test_completion_keeps_a_leader_that_stays():
    p = part([0, 1, 3, 2], [0, 1, 2], 0, adding=[3], removing=[2])
    done = build_change(p, TID, lambda r: True, isr=[0, 1, 2, 3])
    # the leader stays but the replica set lost 2: the leader epoch is bumped (Leader set to itself)
    assert changed(done) == {
        "Replicas": [0, 1, 3],
        "Isr": [0, 1, 3],
        "Leader": 0,
        "AddingReplicas": [],
        "RemovingReplicas": [],
    }


def test_revert_takes_the_adding_replicas_out_and_may_need_an_unclean_election():
    clean = revert(part([3, 0, 1, 2], [0, 1, 3], 0, adding=[3], removing=[2]))
    assert (clean.replicas, clean.isr, clean.unclean) == ([0, 1, 2], [0, 1], False)
    unclean = revert(part([3, 4, 5, 0, 1, 2], [3, 4], 3, adding=[3, 4, 5], removing=[0, 1, 2]))
    assert (unclean.replicas, unclean.isr, unclean.unclean) == ([0, 1, 2], [0], True)


def test_fencing_a_removing_replica_completes_the_move():
    """Kafka builds every ISR change with PartitionChangeBuilder, so a fence that leaves an ISR with
    every target replica completes a move, here one the copy carried over from ZooKeeper mid-way."""
    h = Harness()
    h.up(1, 2, 3, 4)
    h.topic("t", {0: [1, 2, 3, 4]})
    carried = record(
        "PartitionChangeRecord", 0, PartitionId=0, TopicId=TOPIC_ID, AddingReplicas=[4], RemovingReplicas=[3]
    )
    h.apply(Decision([carried], None))
    assert (h.part().replicas, h.part().adding_replicas, h.part().removing_replicas) == (
        [1, 2, 3, 4],
        [4],
        [3],
    )
    h.apply(h.core.fence(h.image, 3))
    done = h.part()
    assert (done.replicas, done.isr, done.adding_replicas, done.removing_replicas) == (
        [1, 2, 4],
        [1, 2, 4],
        [],
        [],
    )
    assert done.leader == 1


def test_preferred_election_completes_a_move_and_elects_the_first_target():
    """PartitionChangeBuilder with Election.PREFERRED (Kafka's testElectLeaderWithPreferred cases): the
    move whose targets are all in the ISR completes first, then the first target replica leads."""
    p = part([2, 3, 4, 1], [1, 2, 3, 4], 1, adding=[4], removing=[1])
    rec = build_change(p, TID, lambda r: True, preferred=True)
    assert changed(rec) == {
        "Leader": 2,
        "Isr": [2, 3, 4],
        "Replicas": [2, 3, 4],
        "AddingReplicas": [],
        "RemovingReplicas": [],
    }


def test_preferred_election_keeps_a_leader_that_may_lead_and_else_takes_the_next_target():
    # the first replica may not lead (fenced): the current leader stays, nothing changes
    p = part([1, 2, 3], [1, 2, 3], 2)
    assert build_change(p, TID, lambda r: r != 1, preferred=True) is None
    # neither the first replica nor the leader may lead: the next target replica in the ISR does
    p = part([1, 2, 3], [1, 2, 3], 2)
    assert changed(build_change(p, TID, lambda r: r == 3, preferred=True)) == {"Leader": 3}
    # none may: no leader (not unclean)
    assert changed(build_change(p, TID, lambda r: False, preferred=True)) == {"Leader": -1}
