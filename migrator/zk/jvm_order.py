"""The order Kafka's maps iterate in, so encoders write each znode object's keys as Kafka 3.9 does.

`Map(...)` with more than four entries and `mutable.Map` are Scala hash maps, `java.util.HashMap` and
`Properties` are Java's: their order is computed here with the same hash functions (String.hashCode,
Scala's CHAMP improvement, HashMap's spread and table sizes). tests/test_zk_codec.py checks it against
a Java oracle."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

__all__ = [
    "config_key_order",
    "java_hashmap_cached",
    "java_hashmap_order",
    "ordered",
    "properties_order",
    "scala_immutable_cached",
    "scala_immutable_order",
    "scala_mutable_cached",
    "scala_mutable_order",
]


_M32 = 0xFFFFFFFF


def _java_hash(s: str) -> int:
    """String.hashCode as an unsigned 32-bit value (over UTF-16 code units, like Java)."""
    h = 0
    if s.isascii():
        for ch in s:
            h = (31 * h + ord(ch)) & _M32
        return h
    b = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(b), 2):
        h = (31 * h + ((b[i] << 8) | b[i + 1])) & _M32
    return h


def _signed(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


def _champ_improve(h: int) -> int:
    """scala.collection.Hashing.improve, the hash scrambler of 2.13's immutable.HashMap."""
    h = (h + (~(h << 9) & _M32)) & _M32
    h ^= h >> 14
    h = (h + (h << 4)) & _M32
    return h ^ (h >> 10)


def scala_immutable_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a Scala 2.13 immutable Map built from `keys` in this order.

    Up to four entries Map1..Map4 keep insertion order; beyond that a CHAMP trie iterates each
    node's own entries in 5-bit hash-fragment order, then its sub-nodes in fragment order.
    """
    unique = list(dict.fromkeys(keys))
    if len(unique) <= 4:
        return unique
    hashes = {k: _champ_improve(_java_hash(k)) for k in unique}
    out: list[str] = []

    def walk(group: list[str], shift: int) -> None:
        if shift >= 32:  # equal hashes: a collision node keeps insertion order
            out.extend(group)
            return
        by_fragment: dict[int, list[str]] = {}
        for k in group:
            by_fragment.setdefault((hashes[k] >> shift) & 31, []).append(k)
        subs = []
        for fragment in sorted(by_fragment):
            members = by_fragment[fragment]
            if len(members) == 1:
                out.append(members[0])
            else:
                subs.append(members)
        for members in subs:
            walk(members, shift + 5)

    walk(unique, 0)
    return out


def scala_mutable_order(keys: Sequence[str], initial: int = 0) -> list[str]:
    """Iteration order of a Scala 2.13 mutable.HashMap: `mutable.Map(first `initial` keys)` then puts.

    The table starts at tableSizeFor((initial + 1) / 0.75) (16 when empty) and doubles before the put
    that would reach 3/4 full; iteration is by bucket (hash ^ hash >>> 16, masked), then by signed hash.
    """
    unique = list(dict.fromkeys(keys))
    cap = int((initial + 1) / 0.75) if initial > 0 else 16
    table = min((1 << (max(cap - 1, 4).bit_length() - 1)) * 2, 1 << 30)
    size = initial
    for _ in unique[initial:]:
        if size + 1 >= int(table * 0.75):
            table *= 2
        size += 1
    mask = table - 1

    def key(k: str) -> tuple[int, int]:
        h = _java_hash(k)
        h ^= h >> 16
        return (h & mask, _signed(h))

    return sorted(unique, key=key)


def java_hashmap_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a java.util.HashMap filled in this order (default capacity 16, load 0.75)."""
    unique = list(dict.fromkeys(keys))
    table = 16
    while len(unique) > table * 0.75:
        table *= 2
    mask = table - 1

    def bucket(k: str) -> int:
        h = _java_hash(k)
        return (h ^ (h >> 16)) & mask

    return sorted(unique, key=bucket)  # stable: insertion order within a bucket


def properties_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a fresh java.util.Properties (Java 9+: a ConcurrentHashMap of 16 bins)."""
    return _properties(keys)[0]


def _spread(k: str) -> int:
    h = _java_hash(k)
    return (h ^ (h >> 16)) & 0x7FFFFFFF


def _properties(keys: Sequence[str]) -> tuple[list[str], int]:
    """Iteration order and final table size of a fresh Properties filled with `keys` in this order.

    Bins append; a resize at 3/4 full splits each bin keeping its last same-bit run and prepending
    the nodes before it; a bin of 9 in a table under 64 triples the table instead of becoming a tree,
    and tree bins prepend new nodes and split in order.
    """

    spread = _spread
    n = 16
    size_ctl = 12
    tab: list[list[Any] | None] = [None] * n  # each bin: [is_tree, keys]
    count = 0

    def transfer() -> None:
        nonlocal tab, n, size_ctl
        new: list[list[Any] | None] = [None] * (2 * n)
        for i, b in enumerate(tab):
            if not b:
                continue
            tree, members = b
            bits = [spread(x) & n for x in members]
            if tree:
                lo = [x for x, bit in zip(members, bits, strict=True) if bit == 0]
                hi = [x for x, bit in zip(members, bits, strict=True) if bit != 0]
                new[i] = [len(lo) > 6, lo] if lo else None
                new[i + n] = [len(hi) > 6, hi] if hi else None
                continue
            run, last = bits[0], 0
            for j in range(1, len(members)):
                if bits[j] != run:
                    run, last = bits[j], j
            lo = members[last:] if run == 0 else []
            hi = members[last:] if run != 0 else []
            for j in range(last):
                (lo if bits[j] == 0 else hi).insert(0, members[j])
            new[i] = [False, lo] if lo else None
            new[i + n] = [False, hi] if hi else None
        tab, n = new, 2 * n
        size_ctl = n - (n >> 2)

    for k in keys:
        h = spread(k)
        b = tab[h & (n - 1)]
        if b is None:
            tab[h & (n - 1)] = [False, [k]]
        elif k in b[1]:
            continue
        elif b[0]:
            b[1].insert(0, k)
        else:
            before = len(b[1])
            b[1].append(k)
            if before >= 8:
                if n < 64:
                    target = 1 << (3 * n).bit_length()  # tableSizeFor(3n + 1)
                    while target > size_ctl:
                        transfer()
                else:
                    b[0] = True
        count += 1
        while count >= size_ctl:
            transfer()
    return [k for b in tab if b for k in b[1]], n


def config_key_order(keys: Sequence[str]) -> list[str]:
    """The key order to write a config in.

    Kafka writes a Properties, whose order depends on the hash table's history, not only on its keys.
    Keys already in an order such a table iterates in (by bin of the table a fresh Properties of this
    size has) are kept, so a config Kafka wrote comes back byte for byte; any other order is the one
    of a fresh Properties filled in the given order, which is what Kafka's own writers build.
    """
    if len(keys) < 2:
        return list(keys)
    fresh, n = _properties(keys)
    if fresh == list(keys):
        return fresh
    bins = [_spread(k) & (n - 1) for k in keys]
    if all(a <= b for a, b in zip(bins, bins[1:], strict=False)):
        return list(keys)
    return fresh


scala_immutable_cached = lru_cache(maxsize=256)(lambda keys: tuple(scala_immutable_order(keys)))
scala_mutable_cached = lru_cache(maxsize=256)(lambda keys, initial: tuple(scala_mutable_order(keys, initial)))
java_hashmap_cached = lru_cache(maxsize=256)(lambda keys: tuple(java_hashmap_order(keys)))


def ordered(fields: dict[str, Any], order: Iterable[str]) -> dict[str, Any]:
    return {k: fields[k] for k in order}
