"""`all_clear` against kio's reader: the channel's shortcut gives kio's verdict on every response it accepts.

Random LeaderAndIsr (v0-7) and UpdateMetadata (v0-8) responses, encoded by kio's writer from the
entities of `zk_broker_messages`, mostly without errors: where `all_clear` returns a correlation id,
kio decodes the frame with that id, top-level error 0 and no partition error; for a well-formed frame
without errors it must return it (the shortcut is taken); an error anywhere, a tagged field, a
truncated or overlong frame and StopReplica are left to kio (None), as is anything kio refuses.
"""

from __future__ import annotations

import io
import random
import uuid
from typing import Any

import pytest
from kio.serial import entity_writer

from migrator.controller.zk_brokers import zk_broker_messages as Z
from migrator.controller.zk_brokers.zk_broker_requests import decode_response_frame, response_errors
from migrator.controller.zk_brokers.zk_broker_responses import all_clear

CASES = [(Z.LEADER_AND_ISR, v) for v in range(8)] + [(Z.UPDATE_METADATA, v) for v in range(9)]


def _frame(api_key: int, version: int, cid: int, body: Any) -> bytes:
    hcls = Z.response_header_class(api_key, version)
    buf = io.BytesIO()
    entity_writer(hcls)(buf, hcls(correlation_id=cid))
    entity_writer(Z.response_class(api_key, version))(buf, body)
    return buf.getvalue()


def _response(rng: random.Random, api_key: int, version: int, p_error: float) -> Any:
    cls = Z.response_class(api_key, version)
    top = rng.choice([11, 41, -1]) if rng.random() < p_error else 0
    if api_key == Z.UPDATE_METADATA:
        return cls(error_code=top)

    def err() -> int:
        return rng.choice([6, 74, 3]) if rng.random() < p_error else 0

    if version <= 4:
        parts = tuple(
            cls.PartitionError(
                topic_name=f"t{rng.randrange(50)}-é", partition_index=rng.randrange(1 << 20), error_code=err()
            )
            for _ in range(rng.randrange(0, 40))
        )
        return cls(error_code=top, partition_errors=parts)
    topics = tuple(
        cls.TopicError(
            topic_id=uuid.UUID(int=rng.getrandbits(128)),
            partition_errors=tuple(
                cls.PartitionError(partition_index=rng.randrange(1 << 20), error_code=err())
                for _ in range(rng.randrange(0, 130))  # past 127: a two-byte compact length
            ),
        )
        for _ in range(rng.randrange(0, 12))
    )
    return cls(error_code=top, topics=topics)


def _kio_verdict(api_key: int, version: int, frame: bytes) -> tuple[int, int, list[Any]] | None:
    try:
        cid, body = decode_response_frame(api_key, version, frame)
    except ValueError:
        return None
    top, failed = response_errors(api_key, body)
    return cid, top, failed


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=[f"{k}-v{v}" for k, v in CASES])
def test_all_clear_agrees_with_kio(api_key: int, version: int) -> None:
    rng = random.Random(f"{api_key}-{version}")
    for i in range(300):
        body = _response(rng, api_key, version, p_error=0.0 if i % 3 == 0 else 0.02)
        cid = rng.randrange(-(1 << 31), 1 << 31)
        frame = _frame(api_key, version, cid, body)
        want = _kio_verdict(api_key, version, frame)
        assert want is not None and want[0] == cid
        got = all_clear(api_key, version, frame)
        clean = want[1] == 0 and not want[2]
        assert got == (cid if clean else None), (i, want)
        # Damaged frames: never accepted where kio would not accept them without errors.
        for bad in (frame[:-1], frame + b"\x00", frame[: rng.randrange(len(frame))], _flip(rng, frame)):
            fast = all_clear(api_key, version, bad)
            if fast is not None:
                slow = _kio_verdict(api_key, version, bad)
                assert slow is not None and slow == (fast, 0, []), (i, bad.hex())


def _flip(rng: random.Random, frame: bytes) -> bytes:
    b = bytearray(frame)
    b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    return bytes(b)


@pytest.mark.parametrize("version", [4, 7])
def test_a_tagged_field_is_left_to_kio(version: int) -> None:
    """A tagged field (in the header or the body) is never the shortcut's to judge: the frame goes to
    kio's reader, whose verdict the channel had before (it refuses a tag these schemas do not declare)."""
    cls = Z.response_class(Z.LEADER_AND_ISR, version)
    body = cls(error_code=0)
    frame = _frame(Z.LEADER_AND_ISR, version, 5, body)
    assert all_clear(Z.LEADER_AND_ISR, version, frame) == 5
    tagged = frame[:-1] + b"\x01\x07\x01\x00"  # one unknown tag (7) of one byte in the body
    assert all_clear(Z.LEADER_AND_ISR, version, tagged) is None
    assert _kio_verdict(Z.LEADER_AND_ISR, version, tagged) is None
    header_tagged = frame[:4] + b"\x01\x07\x01\x00" + frame[5:]
    assert all_clear(Z.LEADER_AND_ISR, version, header_tagged) is None


def test_stop_replica_is_always_decoded_in_full() -> None:
    cls = Z.response_class(Z.STOP_REPLICA, 4)
    frame = _frame(Z.STOP_REPLICA, 4, 9, cls(error_code=0))
    assert all_clear(Z.STOP_REPLICA, 4, frame) is None
