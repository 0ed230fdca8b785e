"""The pre-kio bounds walk folds runs of fixed-size fields into one check: arrays of scalars stay arrays.

An array of int32 (`tuple[i32, ...]`) carries the element's kafka_type, and a nullable one is
`tuple[i32, ...] | None`: folding either into a run of fixed fields misreads every field after it
(AlterPartitionReassignments' nullable Replicas was refused that way, the controller closing the
connection). Every frame kio writes, for random entities of every served request class, passes the
walk; one byte short fails it.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import random
import typing
import uuid
from typing import Any

import pytest
from kio.serial import entity_writer

from migrator.controller.protocol import wire
from migrator.controller.protocol.kio_apis import schema_module
from migrator.controller.protocol.wire_bounds import _check_body, _unwrap
from migrator.controller.protocol.wire_versions import SUPPORTED, _classes


def _reassignments(replicas: tuple[int, ...] | None) -> object:
    apr = schema_module(45, 0, "request")
    return apr.AlterPartitionReassignmentsRequest(
        timeout=datetime.timedelta(seconds=30),
        topics=(
            apr.ReassignableTopic(
                name="t",
                partitions=(
                    apr.ReassignablePartition(partition_index=0, replicas=replicas),
                    apr.ReassignablePartition(partition_index=1, replicas=()),
                ),
            ),
        ),
    )


@pytest.mark.parametrize("replicas", [(3, 2), (1, 2, 3, 4, 5), None], ids=["two", "five", "cancel"])
def test_nullable_int_arrays_are_walked_as_arrays(replicas: tuple[int, ...] | None) -> None:
    frame = wire.encode_request(45, 0, 1, "x", _reassignments(replicas))[4:]
    header, request = wire.decode_request(frame)
    assert request.topics[0].partitions[0].replicas == replicas
    _, pos = wire.decode_request_header(frame)
    cls = _classes(45, 0)[0]
    _check_body(cls, frame, pos)
    with pytest.raises(wire.WireError):
        _check_body(cls, frame[:-1], pos)


def _value(rng: random.Random, tp: Any, kafka_type: str | None, depth: int) -> Any:
    """A random value of a kio field (its annotation and kafka_type), small and valid."""
    inner, nullable = _unwrap(tp)
    if nullable and rng.random() < 0.3:
        return None
    if typing.get_origin(inner) is tuple:
        element = typing.get_args(inner)[0]
        return tuple(
            _value(rng, element, kafka_type, depth + 1)
            for _ in range(rng.randrange(0, 3 if depth < 3 else 1))
        )
    if dataclasses.is_dataclass(inner):
        return _entity(rng, inner, depth + 1)
    ranges = {"int8": (-128, 128), "int16": (-1000, 1000), "error_code": (0, 100), "uint16": (0, 1000),
              "int32": (-5, 1 << 20), "uint32": (0, 1 << 20), "int64": (-5, 1 << 40)}  # fmt: skip
    if kafka_type in ranges:
        return inner(rng.randrange(*ranges[kafka_type]))
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "float64":
        return rng.random()
    if kafka_type == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if kafka_type == "string":
        return "s" * rng.randrange(0, 5)
    if kafka_type in ("bytes", "records"):
        return b"x" * rng.randrange(0, 5)
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=rng.randrange(0, 10_000))
    if kafka_type == "datetime_i64":
        return datetime.datetime.fromtimestamp(rng.randrange(0, 1 << 30), datetime.UTC)
    raise TypeError(f"no random value for {tp!r} ({kafka_type})")


def _entity(rng: random.Random, cls: Any, depth: int = 0) -> Any:
    return cls(
        **{f.name: _value(rng, f.type, f.metadata.get("kafka_type"), depth) for f in dataclasses.fields(cls)}
    )


SERVED = [(api, v) for api, (lo, hi) in sorted(SUPPORTED.items()) for v in range(lo, hi + 1)]


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=[f"{a}-v{v}" for a, v in SERVED])
def test_every_frame_kio_writes_passes_the_walk(api_key: int, version: int) -> None:
    """Random entities of every request class the listener serves (the admin APIs too), written by
    kio's writer: the walk lets each through, and refuses it one byte short."""
    rng = random.Random(f"{api_key}-{version}")
    cls = _classes(api_key, version)[0]
    for _ in range(30):
        buf = io.BytesIO()
        entity_writer(cls)(buf, _entity(rng, cls))
        frame = buf.getvalue()
        _check_body(cls, frame, 0)
        if frame:  # ApiVersions v0-2 has no field at all
            with pytest.raises(wire.WireError):
                _check_body(cls, frame[:-1], 0)
