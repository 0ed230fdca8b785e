"""Replica placement for new topics and partitions, as Kafka's AdminUtils.assignReplicasToBrokers."""

from __future__ import annotations

import random
from collections.abc import Mapping

from migrator.errors import BadInputError

__all__ = ["assign_replicas"]


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _rack_alternated(racks: Mapping[int, str]) -> list[int]:
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    names = sorted(by_rack)
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        for rack in names:
            if i < len(by_rack[rack]):
                out.append(by_rack[rack][i])
        i += 1
    return out


def assign_replicas(
    partitions: int,
    replication_factor: int,
    brokers: Mapping[int, str | None],
    start_index: int = -1,
    start_partition: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replica lists for new partitions, as Kafka's AdminUtils places them (rack aware when every
    broker has a rack, refused when only some have one, as Kafka's enforced rack-aware mode does)."""
    if partitions < 1:
        raise BadInputError(f"number of partitions must be larger than 0, got {partitions}")
    if replication_factor < 1:
        raise BadInputError(f"replication factor must be larger than 0, got {replication_factor}")
    if replication_factor > len(brokers):
        raise BadInputError(
            f"replication factor: {replication_factor} larger than available brokers: {len(brokers)}"
        )
    rng = rng or random.Random()
    with_rack = {b: r for b, r in brokers.items() if r is not None}
    if with_rack and len(with_rack) != len(brokers):
        raise BadInputError("not all brokers have rack information for replica rack aware assignment")
    out: dict[int, list[int]] = {}
    if not with_rack:
        arranged = sorted(brokers)
        n = len(arranged)
        start = start_index if start_index >= 0 else rng.randrange(n)
        shift = start_index if start_index >= 0 else rng.randrange(n)
        pid = max(0, start_partition)
        for _ in range(partitions):
            if pid > 0 and pid % n == 0:
                shift += 1
            first = (pid + start) % n
            out[pid] = [arranged[first]] + [
                arranged[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
            ]
            pid += 1
        return out
    arranged = _rack_alternated(with_rack)
    n = len(arranged)
    num_racks = len(set(with_rack.values()))
    start = start_index if start_index >= 0 else rng.randrange(n)
    shift = start_index if start_index >= 0 else rng.randrange(n)
    pid = max(0, start_partition)
    for _ in range(partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {with_rack[leader]}
        used = {leader}
        k = 0
        for _r in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                rack = with_rack[broker]
                k += 1
                if (rack not in racks_used or len(racks_used) == num_racks) and (
                    broker not in used or len(used) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    used.add(broker)
                    break
        out[pid] = replicas
        pid += 1
    return out
