"""The pre-kio bounds walk folds runs of fixed-size fields into one check: arrays of scalars stay arrays.

An array of int32 (`tuple[i32, ...]`) carries the element's kafka_type, and a nullable one is
`tuple[i32, ...] | None`: folding either into a run of fixed fields misreads every field after it
(AlterPartitionReassignments' nullable Replicas was refused that way, the controller closing the
connection). Every frame kio writes passes the walk; one byte short fails it.
"""

from __future__ import annotations

import datetime

import pytest

from migrator.controller.protocol import wire
from migrator.controller.protocol.kio_apis import schema_module
from migrator.controller.protocol.wire_bounds import _check_body
from migrator.controller.protocol.wire_versions import _classes


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
