"""The AlterPartition answer's generated writer against kio's, on random responses in every served version.

`wire.encode_response` writes an AlterPartition response straight from `messages` with a
`protocol.fast_writer` generated from kio's classes of its version (`wire_responses.alter_partition_bytes`).
The reference is the path it replaced: `_response_to_kio`'s entity written by kio's writer, under
kio's response header. Byte-equal for random topics, partitions, ISRs (past a one-byte compact
length), error codes (kio's, and codes kio does not know), throttle times, absent names and ids.
"""

from __future__ import annotations

import random
import uuid

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1

from migrator.controller.protocol import messages as M
from migrator.controller.protocol import wire
from migrator.controller.protocol.fast_writer import encode_fast
from migrator.controller.protocol.wire_responses import _response_to_kio
from migrator.controller.protocol.wire_versions import SUPPORTED, _classes, _write

VERSIONS = list(range(SUPPORTED[M.ALTER_PARTITION][0], SUPPORTED[M.ALTER_PARTITION][1] + 1))
_CODES = [int(c) for c in ErrorCode]


def _code(rng: random.Random) -> int:
    return rng.choice([0, 0, 0, rng.choice(_CODES), rng.choice([9999, -300, 32767])])


def _i32(rng: random.Random) -> int:
    return rng.choice([-1, 0, rng.randrange(-(1 << 31), 1 << 31)])


def _response(rng: random.Random, version: int) -> M.AlterPartitionResponse:
    topics = []
    for t in range(rng.randrange(0, 5)):
        parts = [
            M.AlterPartitionPartitionResponse(
                partition_index=_i32(rng),
                error_code=_code(rng),
                leader_id=_i32(rng),
                leader_epoch=_i32(rng),
                isr=[_i32(rng) for _ in range(rng.choice([0, 1, 3, 140]))],
                leader_recovery_state=rng.randrange(0, 2) if version >= 1 else 0,
                partition_epoch=_i32(rng),
            )
            for _ in range(rng.randrange(0, 60))
        ]
        if version <= 1:
            name = rng.choice([None, "", "t", "tópico", "x" * 200]) or None
            topics.append(M.AlterPartitionTopicResponse(name and f"{name}{t}", None, parts))
        else:
            tid = rng.choice([None, uuid.UUID(int=rng.getrandbits(128))])
            topics.append(M.AlterPartitionTopicResponse(None, tid, parts))
    return M.AlterPartitionResponse(_code(rng), topics, rng.choice([0, 0, rng.randrange(1 << 31)]))


def _kio_frame(version: int, correlation_id: int, resp: M.AlterPartitionResponse) -> bytes:
    _, cls = _classes(M.ALTER_PARTITION, version)
    hdr = _write(ResponseHeaderV1, ResponseHeaderV1(correlation_id=correlation_id))
    if not wire.is_flexible(M.ALTER_PARTITION, version):
        hdr = _write(ResponseHeaderV0, ResponseHeaderV0(correlation_id=correlation_id))
    return wire.frame(hdr + _write(cls, _response_to_kio(M.ALTER_PARTITION, version, cls, resp)))


@pytest.mark.parametrize("version", VERSIONS)
def test_alter_partition_answer_is_kio_bytes(version: int) -> None:
    rng = random.Random(f"alter-partition-{version}")
    _, cls = _classes(M.ALTER_PARTITION, version)
    for _ in range(300):
        resp = _response(rng, version)
        cid = _i32(rng)
        header = wire.RequestHeader(M.ALTER_PARTITION, version, cid, "c")
        expected = _kio_frame(version, cid, resp)
        assert wire.encode_response(header, resp) == expected
        # writer_for on kio's own entity (error_code and timedelta_i32 kinds) gives the same body
        entity = _response_to_kio(M.ALTER_PARTITION, version, cls, resp)
        assert encode_fast(cls, entity) == _write(cls, entity)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_wrong_field_is_caught(version: int) -> None:
    """The comparison sees one field moved: an answer differing in one partition's epoch differs."""
    part = M.AlterPartitionPartitionResponse(3, 0, 1, 5, [1, 2], 0, 7)
    tid = uuid.UUID(int=5)
    resp = M.AlterPartitionResponse(0, [M.AlterPartitionTopicResponse("t", tid, [part])])
    other = M.AlterPartitionResponse(
        0,
        [
            M.AlterPartitionTopicResponse(
                "t", tid, [M.AlterPartitionPartitionResponse(3, 0, 1, 5, [1, 2], 0, 8)]
            )
        ],
    )
    header = wire.RequestHeader(M.ALTER_PARTITION, version, 1, None)
    assert wire.encode_response(header, resp) == _kio_frame(version, 1, resp)
    assert wire.encode_response(header, resp) != _kio_frame(version, 1, other)
