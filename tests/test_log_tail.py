"""LogTail reads what MetadataLog.read reads: from its cursor, across new epochs, segment rolls and
readers that go back (issue 13: the syncer and the finalize guard no longer walk the active segment)."""

from __future__ import annotations

from pathlib import Path

from migrator.kraft.log import MetadataLog
from migrator.kraft.records import record
from migrator.migration.log_tail import LogTail


def _recs(n: int, start: int) -> list:  # type: ignore[type-arg]
    return [
        record("ProducerIdsRecord", BrokerId=1, BrokerEpoch=1, NextProducerId=start + i) for i in range(n)
    ]


def _key(entries: list) -> list:  # type: ignore[type-arg]
    return [(o, e, r.fields) for o, e, r in entries]


def test_tail_reads_what_the_log_reads(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path, writable=True, cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=3000,
                          segment_bytes=1500) as log:  # fmt: skip
        tail = LogTail(log)
        at = 0
        assert list(tail.read(0)) == []
        for step in range(40):
            log.append(_recs(1 + step % 5, step * 10), epoch=1 + step // 15)  # new epochs: control batches
            got = _key(list(tail.read(at)))
            assert got == _key(list(log.read(at))) and got, step
            at = got[-1][0] + 1
            if step % 7 == 6:  # a reader going back, then on from the cursor again
                back = max(0, at - 3)
                assert _key(list(tail.read(back))) == _key(list(log.read(back)))
        assert len(log.segments) >= 3  # rolled on the way
        assert list(tail.read(log.end_offset)) == []
        walked = []
        batches = log.batches
        log.batches = lambda *a, **k: walked.append(a) or batches(*a, **k)  # type: ignore[method-assign]
        end = log.end_offset
        log.append(_recs(3, 1000), epoch=3)
        assert _key(list(tail.read(end))) == _key(list(log.read(end))) and walked == [(end,)]
        walked.clear()
        assert [o for o, _, _ in tail.read(end + 3)] == [] and walked == []  # from the cursor
        log.append(_recs(2, 2000), epoch=3)
        assert [o for o, _, _ in tail.read(end + 3)] == [end + 3, end + 4] and walked == []
        half = list(tail.read(0))[:5]  # stopped early: the next read from where it stopped is right
        assert _key(list(tail.read(half[-1][0] + 1))) == _key(list(log.read(half[-1][0] + 1)))
