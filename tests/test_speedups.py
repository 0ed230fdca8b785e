"""The native record packer (`migrator/kraft/_speedups.c`) writes exactly what the Python encoders write.

The Python codec is the reference: every batch here is encoded twice, with the packer and with it
switched off, and the bytes must be equal; every record the packer declines (a non-default tagged
field, unknown tagged fields, a value of an odd type or out of range) must come out as Python writes
it, or fail with Python's error.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_kraft_records import ALL_VERSIONS, any_record

from migrator.kraft import batch as B
from migrator.kraft import records as R
from migrator.kraft.batch import decode_batch_records, encode_batch, encode_record_batch, iter_batches
from migrator.kraft.records import (
    UNKNOWN_TAGGED_FIELDS,
    MetadataRecord,
    OpaqueRecord,
    encode_values,
    record,
)
from migrator.kraft.schema import schema_by_name

TS = 1_700_000_000_000
T1 = uuid.UUID("7a3b6c1e-5f52-4f0a-9d1e-2b8c3d4e5f60")
NATIVE = R.NATIVE_PACK_RECORDS


def python_batch(base: int, epoch: int, recs: list[Any]) -> bytes:
    saved = B.NATIVE_PACK_RECORDS
    B.NATIVE_PACK_RECORDS = None
    try:
        return encode_record_batch(base, epoch, recs, TS)
    finally:
        B.NATIVE_PACK_RECORDS = saved


def both(recs: list[Any], base: int = 0, epoch: int = 1) -> bytes:
    """The batch through the packer; asserts it equals the pure-Python batch and the per-value one."""
    native = encode_record_batch(base, epoch, recs, TS)
    assert native == python_batch(base, epoch, recs)
    assert native == encode_batch(base, epoch, encode_values(recs), TS)
    return native


def partition(i: int, replicas: list[int] | None = None, **kw: Any) -> MetadataRecord:
    reps = [1, 2, 3] if replicas is None else replicas
    return record(
        "PartitionRecord", 0, PartitionId=i, TopicId=T1, Replicas=reps, Isr=reps, Leader=reps[0], **kw
    )


def raw(name: str, version: int, **fields: Any) -> MetadataRecord:
    """A record whose fields bypass record()'s checks (what a caller with a bad dict would hand in)."""
    rec = record(name, version)
    rec.fields.update(fields)
    return rec


needs_native = pytest.mark.skipif(NATIVE is None, reason="native packer not built or disabled")


def test_the_packer_is_built():
    """CI builds the extension; a silent fall back to pure Python would hide a 4x slowdown."""
    if os.environ.get("ZK2KRAFT_PURE_PYTHON", "") not in ("", "0"):
        pytest.skip("ZK2KRAFT_PURE_PYTHON is set")
    assert NATIVE is not None, (
        "migrator/kraft/_speedups.c was not built: is a C compiler installed? (make deps)"
    )


@needs_native
def test_plans_cover_the_bulk_record_types_and_leave_structs_to_python():
    plans = R._native_plans()
    has = {
        (s.name, v)
        for s in map(schema_by_name, {n for n, _ in ALL_VERSIONS})
        for v in range(s.min_version, s.max_version + 1)
        if plans[s.api_key][v] is not None
    }
    for name in ("PartitionRecord", "TopicRecord", "ConfigRecord", "PartitionChangeRecord", "NoOpRecord"):
        assert (name, 0) in has, name
    assert ("RegisterBrokerRecord", 0) not in has  # endpoints: an array of structs
    prefix, names, ops, tagged = plans[schema_by_name("PartitionRecord").api_key][0]
    assert prefix == b"\x01\x03\x00"
    assert names == (
        "PartitionId",
        "TopicId",
        "Replicas",
        "Isr",
        "RemovingReplicas",
        "AddingReplicas",
        "Leader",
        "LeaderEpoch",
        "PartitionEpoch",
    )
    assert ops == b"iuaiaiaiaiiii"
    assert tagged == (("LeaderRecoveryState", b"=", 0),)


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_record(), min_size=1, max_size=40), st.integers(0, 2**40), st.integers(0, 2**31 - 1))
def test_every_record_type_and_version_packs_as_python_encodes_it(recs, base, epoch):
    buf = both(recs, base, epoch)
    assert [r for _, r in decode_batch_records(next(iter_batches(buf)))] == recs


@needs_native
def test_declined_records_come_out_as_python_writes_them():
    recs = [
        partition(0),
        partition(1, LeaderRecoveryState=1),  # a tagged field off its default
        partition(2),
        OpaqueRecord(99, 0, b"\x01\x02"),
        raw("PartitionRecord", 0, PartitionId=3, TopicId=T1, Leader=True),  # bool where an int32 goes
        raw("PartitionRecord", 0, PartitionId=4, TopicId=T1, Replicas=(1, 2)),  # a tuple is packed
        raw("PartitionRecord", 0, PartitionId=5, TopicId=T1, Replicas=range(2)),  # a range is not
        raw("PartitionRecord", 0, PartitionId=6, TopicId=T1, **{UNKNOWN_TAGGED_FIELDS: {9: b"\x07"}}),
        record("RegisterBrokerRecord", 0, BrokerId=1, IncarnationId=T1, BrokerEpoch=5),
        record("TopicRecord", 0, Name="t-é-" + "x" * 200, TopicId=T1),  # two-byte length varint
        record("ConfigRecord", 0, ResourceType=2, ResourceName="t", Name="retention.ms", Value=None),
        record(
            "PartitionRecord", 1, PartitionId=7, TopicId=T1, Replicas=list(range(130)), Directories=[T1] * 3
        ),
        record("ZkMigrationStateRecord", 0, ZkMigrationState=1),
    ]
    both(recs)
    packed = [i for i in range(len(recs)) if NATIVE(recs, i)[1] > i]
    assert packed == [0, 2, 5, 9, 10, 11, 12]


@needs_native
def test_offset_deltas_and_records_past_the_varint_widths():
    recs = [partition(i, [1, 2, 3][: 1 + i % 3]) for i in range(20000)]
    recs[64] = partition(64, LeaderRecoveryState=1)
    recs[8192] = OpaqueRecord(99, 0, b"")
    buf = both(recs, base=7)
    assert NATIVE(recs, 0)[1] == 64 and NATIVE(recs, 65)[1] == 8192 and NATIVE(recs, 8193)[1] == len(recs)
    assert decode_batch_records(next(iter_batches(buf)))[-1] == (20006, recs[-1])
    both(tuple(recs[:100]))  # a tuple, and any other sequence, works too
    both(recs[:100][::-1])


@needs_native
@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"PartitionId": 1 << 31}, "cannot encode PartitionRecord"),
        ({"PartitionId": -(1 << 31) - 1}, "cannot encode PartitionRecord"),
        ({"PartitionId": "7"}, "cannot encode PartitionRecord"),
        ({"Replicas": [1, 1 << 40]}, "cannot encode PartitionRecord"),
        ({"Replicas": [1, None]}, "cannot encode PartitionRecord"),
        ({"TopicId": "7a3b6c1e-5f52-4f0a-9d1e-2b8c3d4e5f60"}, "cannot encode PartitionRecord"),
        ({"Isr": None}, "cannot encode PartitionRecord"),
    ],
)
def test_values_python_rejects_are_rejected_with_pythons_error(fields, error):
    bad = raw("PartitionRecord", 0, **{"TopicId": T1, **fields})
    with pytest.raises(ValueError, match=error) as native:
        encode_record_batch(0, 1, [partition(0), bad], TS)
    with pytest.raises(ValueError, match=error) as python:
        python_batch(0, 1, [partition(0), bad])
    assert str(native.value) == str(python.value)


@needs_native
def test_a_missing_field_and_a_lone_surrogate_are_pythons_errors_too():
    missing = record("PartitionRecord", 0, TopicId=T1)
    del missing.fields["Isr"]
    surrogate = record("TopicRecord", 0, Name="t\udc80", TopicId=T1)
    for bad in (missing, surrogate):
        with pytest.raises(ValueError) as native:
            encode_record_batch(0, 1, [bad], TS)
        with pytest.raises(ValueError) as python:
            python_batch(0, 1, [bad])
        assert str(native.value) == str(python.value)


@needs_native
def test_configure_refuses_malformed_plans():
    from migrator.kraft import _speedups  # type: ignore[attr-defined]

    good = R._native_plans()
    plan = good[schema_by_name("PartitionRecord").api_key][0]
    for plans in (
        [None],
        (("not a plan tuple",),),
        ((plan[:3],),),
        (((plan[0], plan[1], b"iu", plan[3]),),),  # fewer operations than names
        (((plan[0], plan[1], plan[2] + b"i", plan[3]),),),  # more
        (((plan[0], plan[1], plan[2][:-5] + b"iiia", plan[3]),),),  # an array without its element
        (((plan[0], plan[1], plan[2], (("Leader", b"==", 0),)),),),
    ):
        with pytest.raises(TypeError):
            _speedups.configure(MetadataRecord, uuid.UUID, UNKNOWN_TAGGED_FIELDS, plans)
    with pytest.raises(TypeError):
        _speedups.configure(int, uuid.UUID, UNKNOWN_TAGGED_FIELDS, good)
    _speedups.configure(MetadataRecord, uuid.UUID, UNKNOWN_TAGGED_FIELDS, good)
    assert _speedups.pack_records("not a list", 0) == (b"", 0)
    assert _speedups.pack_records([partition(0)], 5) == (b"", 5)
    both([partition(0)])
