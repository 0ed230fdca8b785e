"""Catch-up answers sent from the segment file (controller/raft/raft_slices.py): on the wire they are the very
bytes of the answer built in memory, over plaintext (sendfile) and TLS (the standard library's fallback);
the cut the offset index finds without reading the bytes is the scan's cut; a slice outlives retention."""

from __future__ import annotations

import os
import random
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_listener_tls_sasl import _props, certs, service  # noqa: F401
from test_long_polls import _fetch_frame, _parse_fetch, _read_frame, _server
from test_offset_index import build, raw_batches
from test_raft_leader import CLUSTER, NO_RETENTION, NODE, offsets_in

from migrator.controller.network.listener_config import start_listeners
from migrator.controller.network.listener_runtime import _attach_raft
from migrator.controller.raft import raft_slices
from migrator.controller.raft.raft_fetch import SLICE_MIN_BYTES
from migrator.kraft.log import MetadataLog
from migrator.kraft.offset_index import LogIndex
from migrator.kraft.records import record


def _big(i: int, n: int = 100) -> list:
    return [
        record("ConfigRecord", 0, ResourceType=4, ResourceName="", Name=f"b{i}.{j}", Value="v" * 200)
        for j in range(n)
    ]


@pytest.fixture
def big_log(tmp_path: Path) -> Iterator[MetadataLog]:
    """About 1 MB in batches of ~25 KB over several segments: answers well past `SLICE_MIN_BYTES`."""
    mlog = MetadataLog.open(
        tmp_path / "log",
        writable=True,
        cluster_id=CLUSTER,
        node_id=NODE,
        segment_bytes=400_000,
        retention=NO_RETENTION,
    )
    for i in range(40):
        mlog.append(_big(i), 1)
    try:
        yield mlog
    finally:
        mlog.close()


@pytest.fixture
def sends(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The record byte counts of every `SlicedAnswer` sent (proof that the sliced path ran)."""
    sent: list[int] = []
    real = raft_slices.SlicedAnswer.send

    def spy(self: raft_slices.SlicedAnswer, conn: socket.socket) -> None:
        sent.append(self.records.count)
        real(self, conn)

    monkeypatch.setattr(raft_slices.SlicedAnswer, "send", spy)
    return sent


def _batch_starts(log: MetadataLog) -> list[int]:
    return [b for s in log.segments for _pos, b, _last, _ts in raw_batches(s.path)]


def _compare(sock: socket.socket, raft: Any, offsets: list[int], log: MetadataLog) -> None:
    """Each Fetch's frame on the wire equals the leader's in-memory answer to the same request."""
    cid = 0
    for offset in offsets:
        epoch = 1 if offset else 0
        for max_bytes in (1, 100_000, 8 << 20):
            cid += 1
            frame = _fetch_frame(cid, offset, epoch, 0, max_bytes=max_bytes)
            sock.sendall(frame)
            got = _read_frame(sock)
            want = raft.answer(frame[4:])
            assert isinstance(want, bytes)
            assert got == want[4:], (offset, max_bytes)
            part = _parse_fetch(got)
            assert part.error_code == 0 and part.high_watermark == log.end_offset
            assert [o for o, _ in offsets_in(part.records)][0] <= offset


def test_a_catch_up_answer_from_the_segment_is_the_in_memory_answer_byte_for_byte(
    big_log: MetadataLog, sends: list[int]
) -> None:
    server = _server(big_log)
    sock = socket.create_connection(server.address, timeout=30)
    try:
        starts = _batch_starts(big_log)
        rnd = random.Random(5)
        _compare(
            sock, server.raft, [0, *rnd.sample(starts, 8), *rnd.sample(range(big_log.end_offset), 8)], big_log
        )
        assert sends and all(n > SLICE_MIN_BYTES for n in sends)
        # the connection goes on after sliced answers: a long poll at the end is answered by an append
        end = big_log.end_offset
        sock.sendall(_fetch_frame(999, end, 1, 0))
        assert _parse_fetch(_read_frame(sock)).high_watermark == end
    finally:
        sock.close()
        server.close()


def test_a_catch_up_answer_from_the_segment_over_tls_is_the_in_memory_answer(
    service: Any,  # noqa: F811
    certs: Any,  # noqa: F811
    sends: list[int],
) -> None:
    import ssl

    props = _props(
        certs,
        **{
            "listeners": "TLS://127.0.0.1:0",
            "listener.name.tls.ssl.client.auth": "none",
            "authorizer.class.name": "",
        },
    )
    for i in range(12):
        service.log.append(_big(i), 1)
    running = start_listeners(service, "TLS://127.0.0.1:0", props)
    _attach_raft(running.servers, service, "TLS")
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    sock = ctx.wrap_socket(socket.create_connection(running.address, timeout=30), server_hostname="127.0.0.1")
    try:
        _compare(sock, running.servers[0].raft, [0, 1], service.log)
        assert sends
    finally:
        sock.close()
        running.stop()


def test_the_index_cut_is_the_scans_cut_for_any_high_watermark(tmp_path: Path) -> None:
    """`LogIndex.locate` finds the end from index entries and a few headers: whole batches, all below
    ``upto``, at most ``max_bytes`` (at least one), from one segment, as reading every header finds."""
    log = build(tmp_path)
    try:
        index = LogIndex(log)
        segs = [(s.base_offset, raw_batches(s.path), os.path.getsize(s.path)) for s in log.segments]
        rnd = random.Random(11)
        hw = log.end_offset
        for _ in range(600):
            offset = rnd.randrange(hw)
            upto = rnd.randrange(offset, hw + 1)
            max_bytes = rnd.choice((1, 500, 4096, 20_000, 90_000, 8 << 20))
            batches, size = next((b, z) for base, b, z in reversed(segs) if base <= offset)
            ends = [p for p, *_ in batches[1:]] + [size]
            first = next(i for i, (_p, _b, last, _t) in enumerate(batches) if last >= offset)
            pos = batches[first][0]
            cut = pos
            for (_p, _b, last, _t), e in zip(batches[first:], ends[first:], strict=True):
                if last >= upto or (e - pos > max_bytes and cut > pos):
                    break
                cut = e
                if e - pos >= max_bytes:
                    break
            got = index.locate(offset, max_bytes, upto)
            if cut == pos:
                assert got is None, (offset, upto, max_bytes)
                continue
            assert got is not None
            fd, at, count = got
            os.close(fd)
            assert (at, count) == (pos, cut - pos), (offset, upto, max_bytes)
    finally:
        log.close()


def test_a_slice_outlives_the_deletion_of_its_segment(big_log: MetadataLog) -> None:
    index = LogIndex(big_log)
    seg = big_log.segments[0]
    found = index.locate(0, 8 << 20, big_log.end_offset)
    assert found is not None
    part = raft_slices.SegmentSlice(*found)
    want = seg.path.read_bytes()[found[1] : found[1] + found[2]]
    os.unlink(seg.path)  # what retention does to a whole segment below the log start
    try:
        assert part.read() == want
        (length,) = struct.unpack_from(">i", want, 8)
        assert 12 + length <= len(want)
    finally:
        part.close()
