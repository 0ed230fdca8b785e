"""Kafka's offset index over real segments: a fetch at any offset reads what the segment scan reads, and
the `.index`/`.timeindex` files follow LogSegment's rules (checked by parsing the `.log` independently)."""

from __future__ import annotations

import random
import struct

from migrator.controller.raft.raft_fetch import LogView
from migrator.kraft.log import MetadataLog
from migrator.kraft.offset_index import INDEX_INTERVAL_BYTES, LogIndex, write_index_files
from migrator.kraft.records import record
from migrator.kraft.retention import RetentionConfig

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
NO_RETENTION = RetentionConfig(1 << 40, -1, -1, -1)


def build(tmp_path, appends: int = 400) -> MetadataLog:
    log = MetadataLog.open(
        tmp_path, writable=True, cluster_id=CLUSTER, node_id=1, segment_bytes=96_000, retention=NO_RETENTION
    )
    rnd = random.Random(7)
    for i in range(appends):  # batches of 1..60 records: many index entries, several segments
        n = rnd.randint(1, 60)
        recs = [
            record("ConfigRecord", 0, ResourceType=4, ResourceName="", Name=f"k{i}.{j}", Value="v" * 30)
            for j in range(n)
        ]
        log.append(recs, 1 + i // 150, timestamp_ms=1_700_000_000_000 + i)
    return log


def raw_batches(path) -> list[tuple[int, int, int, int]]:
    """(position, base offset, last offset, max timestamp) of every batch, from the bytes alone."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        (max_ts,) = struct.unpack_from(">q", data, pos + 35)
        out.append((pos, base, base + delta, max_ts))
        pos += 12 + length
    return out


def next_offset(records: bytes) -> int:
    pos, nxt = 0, -1
    while pos + 61 <= len(records):
        base, length = struct.unpack_from(">qi", records, pos)
        nxt = base + struct.unpack_from(">i", records, pos + 23)[0] + 1
        pos += 12 + length
    return nxt


def agrees(got: bytes, want: bytes, log: MetadataLog) -> bool:
    """Kafka reads from one segment: the scan's bytes, or their prefix ending at a segment's end."""
    if got == want:
        return True
    return bool(got) and want.startswith(got) and next_offset(got) in {s.base_offset for s in log.segments}


def test_every_fetch_offset_reads_what_the_segment_scan_reads(tmp_path) -> None:
    log = build(tmp_path)
    try:
        assert len(log.segments) >= 3
        scan, indexed = LogView(log, indexed=False), LogView(log)
        hw = log.end_offset
        rnd = random.Random(3)
        for offset in [0, 1, hw - 1, *rnd.sample(range(hw), 300)]:
            for max_bytes in (1, 3000, 50_000, 8 << 20):
                want = scan.read(offset, log.epoch_for_offset(offset - 1) if offset else 0, max_bytes)
                got = indexed.read(offset, log.epoch_for_offset(offset - 1) if offset else 0, max_bytes)
                assert got.verdict == want.verdict
                assert agrees(got.records, want.records, log), (offset, max_bytes)
                assert got.records  # at least one batch, even when it exceeds max_bytes
        # below the high watermark only: an index that knows a batch the hw does not cover hands it not out
        last_base = raw_batches(log.segments[-1].path)[-1][1]
        assert indexed.index is not None
        assert indexed.index.read(last_base, 8 << 20, last_base) == b""
    finally:
        log.close()


def test_index_files_follow_kafkas_entry_rules(tmp_path) -> None:
    log = build(tmp_path)
    try:
        index = LogIndex(log)
        checked = 0
        for seg in log.segments:
            si = index.segment(seg.base_offset)
            assert si is not None
            idx_path, time_path = write_index_files(si)
            entries = list(struct.iter_unpack(">ii", idx_path.read_bytes()))
            times = list(struct.iter_unpack(">qi", time_path.read_bytes()))
            batches = raw_batches(seg.path)
            # Kafka's LogSegment.recover over these batches, written out independently here
            want, want_times, last_entry, max_ts, max_off = [], [], 0, -1, -1
            for pos, _base, last, ts in batches:
                if ts > max_ts:
                    max_ts, max_off = ts, last
                if pos - last_entry > INDEX_INTERVAL_BYTES:
                    want.append((last - seg.base_offset, pos))
                    if not want_times or max_ts > want_times[-1][0]:
                        want_times.append((max_ts, max_off - seg.base_offset))
                    last_entry = pos
            if not want_times or max_ts > want_times[-1][0]:
                want_times.append((max_ts, max_off - seg.base_offset))
            assert entries == want
            assert times == want_times
            assert len(entries) > 5
            checked += 1
        assert checked == len(log.segments)
    finally:
        log.close()


def test_the_index_follows_appends_rolls_and_retention(tmp_path) -> None:
    log = build(tmp_path, appends=100)
    try:
        view = LogView(log)
        assert view.index is not None
        before = len(log.segments)
        for i in range(200):  # appends through the hook the leader chains: new batches, new segments
            log.append(
                [record("ConfigRecord", 0, ResourceType=4, ResourceName="", Name=f"n{i}", Value="x" * 900)], 2
            )
        assert len(log.segments) > before
        assert view.index.end_offset == log.end_offset == view.high_watermark
        scan = LogView(log, indexed=False)
        for offset in range(0, log.end_offset, 97):
            e = log.epoch_for_offset(offset - 1) if offset else 0
            assert agrees(view.read(offset, e, 20_000).records, scan.read(offset, e, 20_000).records, log)
        # retention deletes the first segments: reads above the new start still match
        from migrator.kraft.retention import snapshot_now

        snapshot_now(log)
        start = log.segments[2].base_offset
        log.advance_start(start)
        for offset in range(start, log.end_offset, 53):
            e = log.epoch_for_offset(offset - 1)
            got = view.read(offset, e, 20_000)
            assert got.verdict.kind == "valid"
            assert agrees(got.records, scan.read(offset, e, 20_000).records, log)
        assert view.index.first_base == log.segments[0].base_offset
    finally:
        log.close()
