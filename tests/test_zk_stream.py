"""The first sync's streamed diff (zk_stream.plan_chunks) against zk_diff.plan of all znodes at once.

Issue 29: the reconcile of a 1M-partition image built its 2M desired znodes before diffing. The
streamed plan must give exactly the ops and changes the whole plan gives (same order), on every
kind of drift, while no more than one topic's desired znodes exist at once.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator

import pytest

from migrator.migration import zk_stream
from migrator.migration.zk_diff import ZkCache, deletable, owned, plan, structural
from migrator.model import ClusterImage, ZkControlState
from migrator.zk import layout
from migrator.zk import paths as P
from zk_fixtures.generator import ClusterSpec, generate


def _picture(znodes: dict[str, bytes]) -> dict[str, bytes | None]:
    """What ZkPicture keeps of a read of these znodes: the owned and structural paths."""
    return {p: d for p, d in znodes.items() if owned(p) or structural(p)}


def _whole_plan(
    image: ClusterImage, control: ZkControlState | None, actual: dict[str, bytes | None]
) -> tuple:
    """The reconcile's plan as it was before issue 29: every desired znode first."""
    want: dict[str, bytes | None] = dict(layout.znodes_from_image(image, control))
    for p in [p for p in want if not (owned(p) or structural(p))]:
        del want[p]
    for path in actual:
        if path not in want and deletable(path):
            want[path] = None
    return plan(want, ZkCache.of(actual))


def _streamed(image: ClusterImage, control: ZkControlState | None, actual: dict[str, bytes | None]) -> tuple:
    return zk_stream.plan_chunks(layout.znode_chunks(image, control), ZkCache.of(actual))


def _drifted(image: ClusterImage) -> ClusterImage:
    """`image` with drift of each kind a reconcile repairs: a topic gone, one re-created under its
    name (new id), a partition more and one fewer, a changed ISR, a config, an ACL and a token gone."""
    d = image.deep_copy()
    names = sorted(d.topics)
    del d.topics[names[0]]
    recreated = d.topics[names[1]]
    if recreated.topic_id is not None:
        recreated.topic_id = "AAAAAAAAAAAAAAAAAAAAAA"
    grown = d.topics[names[2]]
    last = max(grown.partitions)
    grown.partitions[last + 1] = grown.partitions[last].model_copy(update={"partition": last + 1})
    shrunk = d.topics[names[3]]
    del shrunk.partitions[max(shrunk.partitions)]
    changed = next(iter(d.topics[names[4]].partitions.values()))
    changed.isr = changed.isr[:1]
    changed.leader_epoch += 7
    if d.configs:
        del d.configs[sorted(d.configs)[0]]
    if d.acls:
        d.acls = d.acls[1:]
    if d.delegation_tokens:
        del d.delegation_tokens[sorted(d.delegation_tokens)[0]]
    d.pending_deletions = []
    return d


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_streamed_plan_is_the_whole_plan(seed: int) -> None:
    g = generate(ClusterSpec(seed=seed))
    image, control = g.image, g.control
    cases = {
        "in step": _picture(layout.znodes_from_image(image, control)),
        "zookeeper drifted": _picture(layout.znodes_from_image(_drifted(image), control)),
        "image drifted": _picture(layout.znodes_from_image(image, control)),
        "another cluster": _picture(layout.znodes_from_image(generate(ClusterSpec(seed=seed + 10)).image)),
        "empty zookeeper": {},
    }
    for case, actual in cases.items():
        want_image = _drifted(image) if case == "image drifted" else image
        whole = _whole_plan(want_image, control, actual)
        assert _streamed(want_image, control, actual) == whole, case
        if case != "in step":
            assert whole[0], f"{case}: the drift was not seen at all"


def test_the_chunks_are_the_whole_layout_a_topic_at_a_time() -> None:
    g = generate(ClusterSpec())
    merged: dict[str, bytes] = {}
    for name, chunk in layout.znode_chunks(g.image, g.control):
        assert not set(chunk) & set(merged), f"{name}: a znode given twice"
        if name is not None:
            root = P.topic_path(name)
            config = P.config_entity_path(P.CONFIG_TYPE_TOPICS, name)
            assert all(
                p == root or p.startswith(root + "/") or p in (config, P.parent(config)) for p in chunk
            )
        merged.update(chunk)
    assert list(merged.items()) == list(layout.znodes_from_image(g.image, g.control).items())


class _Chunk(dict[str, bytes]):
    """A chunk a weak reference can watch (a plain dict cannot be referenced weakly)."""

    __slots__ = ("__weakref__",)


def test_a_reconcile_never_holds_two_topics_desired_znodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each chunk is dropped before the next one is built: when the generator is asked for a chunk,
    no chunk it gave before is alive (counted with weak references)."""
    g = generate(ClusterSpec(topics=30, partitions=20))
    real = layout.znode_chunks
    alive_at_ask: list[int] = []
    given = 0

    def watched(
        image: ClusterImage, control: ZkControlState | None = None
    ) -> Iterator[tuple[str | None, _Chunk]]:
        nonlocal given
        refs: list[weakref.ref[_Chunk]] = []
        for name, chunk in real(image, control):
            alive_at_ask.append(sum(r() is not None for r in refs))
            wrapped = _Chunk(chunk)
            del chunk
            refs.append(weakref.ref(wrapped))
            given += 1
            yield name, wrapped
            del wrapped

    actual = _picture(layout.znodes_from_image(_drifted(g.image), g.control))
    monkeypatch.setattr(layout, "znode_chunks", watched)
    zk_stream.plan_chunks(layout.znode_chunks(g.image, g.control), ZkCache.of(actual))
    assert given == len(g.image.topics) + 2
    assert max(alive_at_ask) == 0, alive_at_ask
