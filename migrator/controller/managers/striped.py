"""Replica placement as Kafka 3.9's KRaft controller does it (`StripedReplicaPlacer`).

During the migration the KRaft controller places the replicas of new topics and partitions, so
zk2kraft places them the way that controller would: racks round-robin from a random starting rack
that advances by one per partition (the "stripes"), brokers round-robin inside each rack from a
random offset, unfenced brokers before fenced ones and never a fenced leader, the rack and broker
lists reshuffled once every unfenced broker has led. Brokers without a rack form one rack of their
own (no rack), as in Kafka; there is no "all or none" rule as in ZooKeeper mode's AdminUtils.

Randomness goes through `rng.randrange(n)`, Java's `Random.nextInt(n)`, and the shuffles and the
order the racks draw their offsets in follow Java's `Collections.shuffle` and `HashMap` iteration:
fed Kafka's own test generator (`MockRandom`), the placer returns what Kafka's unit tests expect.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from migrator.errors import BadInputError

__all__ = ["PlacementError", "RackList", "RandomSource", "UsableBroker", "place"]


class RandomSource(Protocol):
    def randrange(self, stop: int) -> int: ...


class PlacementError(BadInputError):
    """Kafka's InvalidReplicationFactorException: the placer cannot reach the replication factor."""

    kafka_code = 38  # INVALID_REPLICATION_FACTOR


@dataclass(frozen=True)
class UsableBroker:
    """A registered broker not shutting down (Kafka's UsableBroker): its rack, and whether fenced."""

    id: int
    rack: str | None = None
    fenced: bool = False


@dataclass
class _BrokerList:
    brokers: list[int] = field(default_factory=list)
    index: int = 0
    offset: int = 0
    epoch: int = 0

    def initialize(self, rng: RandomSource) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = rng.randrange(len(self.brokers))

    def next(self, epoch: int) -> int:
        """The next broker of this iteration epoch, -1 once each was returned (a new epoch restarts
        one further along)."""
        n = len(self.brokers)
        if n == 0:
            return -1
        if self.epoch != epoch:
            self.epoch, self.index, self.offset = epoch, 0, (self.offset + 1) % n
        if self.index >= n:
            return -1
        broker = self.brokers[(self.index + self.offset) % n]
        self.index += 1
        return broker


@dataclass
class _Rack:
    fenced: _BrokerList = field(default_factory=_BrokerList)
    unfenced: _BrokerList = field(default_factory=_BrokerList)

    def next(self, epoch: int) -> int:
        broker = self.unfenced.next(epoch)
        return broker if broker >= 0 else self.fenced.next(epoch)


def _java_shuffle(items: list, rng: RandomSource) -> None:  # type: ignore[type-arg]
    for i in range(len(items), 1, -1):
        j = rng.randrange(i)
        items[i - 1], items[j] = items[j], items[i - 1]


def _java_string_hash(s: str) -> int:
    """String.hashCode over UTF-16 code units, as an unsigned 32-bit value."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def _hashmap_order(racks: Sequence[str | None]) -> list[str | None]:
    """The order a java.util.HashMap keyed by Optional<String> iterates `racks` (inserted in this
    order): by bucket of the spread hash at the table's capacity, ties in insertion order."""
    capacity = 16
    while len(racks) > capacity * 3 // 4:
        capacity *= 2

    def bucket(rack: str | None) -> int:
        h = 0 if rack is None else _java_string_hash(rack)
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(racks, key=bucket)  # stable: insertion order within a bucket


def _rack_key(rack: str | None) -> tuple[int, bytes]:
    """OptionalStringComparator: no rack first, then String.compareTo (UTF-16 code units)."""
    return (0, b"") if rack is None else (1, rack.encode("utf-16-be"))


def _check(replication_factor: int, total: int, unfenced: int, fenced_first: bool) -> None:
    """Kafka's three refusals; the placer checks "all fenced" before "too few", each partition's
    placement after it (both orders are Kafka's)."""
    if replication_factor <= 0:
        raise PlacementError(
            f"Invalid replication factor {replication_factor}: the replication factor must be positive."
        )
    if fenced_first and unfenced == 0:
        raise PlacementError("All brokers are currently fenced.")
    if replication_factor > total:
        raise PlacementError(
            f"The target replication factor of {replication_factor} cannot be reached because only "
            f"{total} broker(s) are registered."
        )
    if unfenced == 0:
        raise PlacementError("All brokers are currently fenced.")


class RackList:
    """Kafka's RackList: the racks, their brokers, the iteration epoch and the starting rack."""

    def __init__(self, rng: RandomSource, brokers: Iterable[UsableBroker]) -> None:
        self.rng = rng
        self.racks: dict[str | None, _Rack] = {}
        self.total = self.unfenced = 0
        for b in brokers:
            rack = self.racks.setdefault(b.rack, _Rack())
            (rack.fenced if b.fenced else rack.unfenced).brokers.append(b.id)
            self.total += 1
            self.unfenced += 0 if b.fenced else 1
        for name in _hashmap_order(list(self.racks)):
            self.racks[name].fenced.initialize(rng)
            self.racks[name].unfenced.initialize(rng)
        self.names = sorted(self.racks, key=_rack_key)
        self.epoch = 0
        self.offset = rng.randrange(len(self.names)) if self.names else 0

    def place(self, replication_factor: int) -> list[int]:
        """One partition's replicas: the leader from the first rack with an unfenced broker left,
        then one per rack onwards, skipping the leader's rack once."""
        _check(replication_factor, self.total, self.unfenced, fenced_first=False)
        if self.epoch == self.unfenced and self.unfenced > 1:
            _java_shuffle(self.names, self.rng)
            for rack in _hashmap_order(list(self.racks)):
                _java_shuffle(self.racks[rack].fenced.brokers, self.rng)
                _java_shuffle(self.racks[rack].unfenced.brokers, self.rng)
            self.epoch = 0
        if self.offset == len(self.names):
            self.offset = 0
        first = self.offset
        while True:
            leader = self.racks[self.names[first]].unfenced.next(self.epoch)
            if leader >= 0:
                break
            first = (first + 1) % len(self.names)
        replicas = [leader]
        index = self.offset
        for _ in range(1, replication_factor):
            broker = -1
            while broker < 0:
                if index == first:
                    first = -1  # the leader's rack gave its broker for this round
                else:
                    broker = self.racks[self.names[index]].next(self.epoch)
                index = (index + 1) % len(self.names)
            replicas.append(broker)
        self.epoch += 1
        self.offset += 1
        return replicas


def place(
    partitions: int, replication_factor: int, brokers: Iterable[UsableBroker], rng: RandomSource
) -> list[list[int]]:
    """The replicas of `partitions` new partitions, leader first (Kafka's StripedReplicaPlacer.place)."""
    racks = RackList(rng, brokers)
    _check(replication_factor, racks.total, racks.unfenced, fenced_first=True)
    return [racks.place(replication_factor) for _ in range(partitions)]
