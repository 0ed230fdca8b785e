"""Partition reassignments as Kafka 3.9's controller makes them: the replica sets of a move, its
revert, and the PartitionChangeRecord its `PartitionChangeBuilder` writes (ELR off, as in a migration).

A reassignment goes in two records. The first lists target + removing replicas with AddingReplicas and
RemovingReplicas set; once the ISR holds every target replica (an AlterPartition from the leader), the
record that carries that ISR also drops the removing replicas and clears both lists, electing a new
leader if the old one was removed. A move that only reorders or shrinks completes at once.
Cancelling reverts to the original replicas (the ISR without the adding ones).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from migrator.kraft.records import MetadataRecord, record
from migrator.model import Partition

__all__ = ["NO_LEADER", "Moves", "Revert", "build_change", "in_progress", "moves", "revert"]

NO_LEADER = -1


@dataclass(frozen=True)
class Moves:
    """PartitionReassignmentReplicas: what a target assignment adds, removes, and the replicas meanwhile."""

    removing: list[int]
    adding: list[int]
    replicas: list[int]


@dataclass(frozen=True)
class Revert:
    """PartitionReassignmentRevert: the replicas and ISR after a cancel; unclean when the ISR had only
    adding replicas (its first remaining replica is then put in the ISR)."""

    replicas: list[int]
    isr: list[int]
    unclean: bool


def in_progress(p: Partition) -> bool:
    return bool(p.adding_replicas or p.removing_replicas)


def moves(current: Sequence[int], target: Sequence[int]) -> Moves:
    removing = sorted(set(current) - set(target))
    adding = sorted(set(target) - set(current))
    return Moves(removing, adding, [*target, *removing])


def revert(p: Partition) -> Revert:
    replicas = [r for r in p.replicas if r not in p.adding_replicas]
    isr = [r for r in p.isr if r not in p.adding_replicas]
    if isr:
        return Revert(replicas, isr, False)
    if not replicas:
        raise ValueError("Invalid replica assignment: addingReplicas contains all replicas.")
    return Revert(replicas, [replicas[0]], True)


def _complete(
    removing: list[int], adding: list[int], replicas: list[int], isr: list[int]
) -> tuple[list[int], list[int]] | None:
    """maybeCompleteReassignment: (replicas, isr) once the ISR holds every target replica."""
    if not removing and not adding:
        return None
    new_isr, new_replicas = list(isr), replicas
    if removing:
        new_isr = [r for r in isr if r not in removing]
        if not new_isr:
            return None
        new_replicas = [r for r in replicas if r not in removing]
        if not new_replicas:
            return None
    if not set(new_replicas) <= set(new_isr):
        return None
    return new_replicas, new_isr


def build_change(
    p: Partition,
    topic_id: uuid.UUID,
    acceptable: Callable[[int], bool],
    *,
    isr: Sequence[int] | None = None,
    replicas: Sequence[int] | None = None,
    adding: Sequence[int] | None = None,
    removing: Sequence[int] | None = None,
    unclean: bool = False,
    preferred: bool = False,
    recovery: int | None = None,
    zk_migration: bool = True,
) -> MetadataRecord | None:
    """PartitionChangeBuilder.build: the record moving `p` to the targets (None: nothing changes).

    Targets left None keep the partition's current value, as the builder's defaults do. `acceptable`
    is the LeaderAcceptor (registered, unfenced, not shutting down, its log directory online).
    `unclean`: Election.UNCLEAN; `preferred`: Election.PREFERRED (the first target replica if it may
    lead, else the current leader if it still may, else the next target replica that may); neither:
    Election.ONLINE. Either way a reassignment whose targets are all in the ISR completes first."""
    t_isr = list(p.isr if isr is None else isr)
    t_replicas = list(p.replicas if replicas is None else replicas)
    t_adding = list(p.adding_replicas if adding is None else adding)
    t_removing = list(p.removing_replicas if removing is None else removing)
    done = _complete(t_removing, t_adding, t_replicas, t_isr)
    if done is not None:
        t_replicas, t_isr = done
        t_adding, t_removing = [], []

    fields: dict[str, object] = {}

    def valid(r: int) -> bool:
        return r in t_isr and acceptable(r)

    leader, was_unclean = NO_LEADER, False
    if preferred:  # electPreferredLeader
        if t_replicas and valid(t_replicas[0]):
            leader = t_replicas[0]
        elif p.leader != NO_LEADER and valid(p.leader):
            leader = p.leader
        else:
            leader = next((r for r in t_replicas[1:] if valid(r)), NO_LEADER)
    # electAnyLeader (an ONLINE or UNCLEAN election)
    elif p.leader != NO_LEADER and valid(p.leader):
        leader = p.leader
    else:
        leader = next((r for r in t_replicas if valid(r)), NO_LEADER)
        if leader == NO_LEADER and unclean:
            leader = next((r for r in t_replicas if acceptable(r)), NO_LEADER)
            was_unclean = leader != NO_LEADER
    if leader != p.leader:
        fields["Leader"] = leader
        if was_unclean:
            fields["Isr"] = [leader]
            if p.leader_recovery_state != 1:
                fields["LeaderRecoveryState"] = 1
    # a replica set that drops a current replica bumps the leader epoch
    if "Leader" not in fields and not set(p.replicas) <= set(t_replicas):
        fields["Leader"] = p.leader
    if "Isr" not in fields and t_isr and t_isr != list(p.isr):
        fields["Isr"] = t_isr
    # while migrating an ISR shrink bumps the leader epoch (ZooKeeper-mode brokers see it)
    isr_now = fields.get("Isr")
    if (
        zk_migration
        and "Leader" not in fields
        and isinstance(isr_now, list)
        and not set(p.isr) <= set(isr_now)
    ):
        fields["Leader"] = p.leader
    if t_replicas and t_replicas != list(p.replicas):
        fields["Replicas"] = t_replicas
    if t_removing != list(p.removing_replicas):
        fields["RemovingReplicas"] = t_removing
    if t_adding != list(p.adding_replicas):
        fields["AddingReplicas"] = t_adding
    if recovery is not None and recovery != p.leader_recovery_state and "LeaderRecoveryState" not in fields:
        fields["LeaderRecoveryState"] = recovery
    if not fields:
        return None
    return record("PartitionChangeRecord", 0, PartitionId=p.partition, TopicId=topic_id, **fields)
