"""The native packer and unpacker (`migrator/kraft/_speedups.c`) do exactly what the Python codec does.

The Python codec is the reference: every batch here is encoded twice, with the packer and with it
switched off, and the bytes must be equal; every record the packer declines (a non-default tagged
field, unknown tagged fields, a value of an odd type or out of range) must come out as Python writes
it, or fail with Python's error. Decoding likewise: the same records with the same dict key order, and
on damaged batches (differential fuzzing) the same typed error with the same message.
"""

from __future__ import annotations

import os
import random
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_kraft_fuzz import TYPED, corpus, fix_crcs, mutate, mutate_inside_a_batch
from test_kraft_records import ALL_VERSIONS, any_record

from migrator.kraft import batch_decode as BD
from migrator.kraft import batch_encode as BE
from migrator.kraft import native as N
from migrator.kraft import uuids as U
from migrator.kraft.batch import iter_batches
from migrator.kraft.batch_decode import decode_batch_records
from migrator.kraft.batch_encode import encode_batch, encode_record_batch
from migrator.kraft.records import (
    UNKNOWN_TAGGED_FIELDS,
    MetadataRecord,
    OpaqueRecord,
    encode_values,
    record,
)
from migrator.kraft.schema import schema_by_name
from migrator.kraft.varint import read_zigzag as _read_varint

TS = 1_700_000_000_000
T1 = uuid.UUID("7a3b6c1e-5f52-4f0a-9d1e-2b8c3d4e5f60")
NATIVE = N.NATIVE_PACK_RECORDS
UNPACK = N.NATIVE_UNPACK_RECORDS


def python_batch(base: int, epoch: int, recs: list[Any]) -> bytes:
    saved = BE.NATIVE_PACK_RECORDS
    BE.NATIVE_PACK_RECORDS = None
    try:
        return encode_record_batch(base, epoch, recs, TS)
    finally:
        BE.NATIVE_PACK_RECORDS = saved


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
    plans = N.native_plans()
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

    good = N.native_plans()
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


# -- unpacking -------------------------------------------------------------------------------------


def python_decode(batch: Any) -> Any:
    saved = BD.NATIVE_UNPACK_RECORDS
    BD.NATIVE_UNPACK_RECORDS = None
    try:
        return decode_batch_records(batch)
    finally:
        BD.NATIVE_UNPACK_RECORDS = saved


def outcome(decode: Any, batch: Any) -> Any:
    """What decoding gives, as text (so a NaN equals itself): the records with each dict's key order,
    or the typed error and its message."""
    try:
        records = [
            (off, type(r), getattr(r, "api_key", None), list(getattr(r, "fields", {}).items()), r)
            for off, r in decode(batch)
        ]
    except TYPED as e:
        return repr((type(e), str(e)))
    return repr(records)


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_record(), min_size=1, max_size=40), st.integers(0, 2**40))
def test_every_record_type_and_version_unpacks_as_python_decodes_it(recs, base):
    batch = next(iter_batches(encode_record_batch(base, 1, recs, TS)))
    assert outcome(decode_batch_records, batch) == outcome(python_decode, batch)
    assert [r for _, r in decode_batch_records(batch)] == recs


@needs_native
def test_what_the_unpacker_takes_and_what_it_leaves_to_python():
    recs = [
        partition(0),
        partition(1, LeaderRecoveryState=1),  # a tagged field in the record: Python's
        partition(2),
        OpaqueRecord(99, 0, b"\x01\x02"),
        record("RegisterBrokerRecord", 0, BrokerId=1, IncarnationId=T1, BrokerEpoch=5),
        record("TopicRecord", 0, Name="t-é-" + "x" * 200, TopicId=T1),
        record("ConfigRecord", 0, ResourceType=2, ResourceName="t", Name="retention.ms", Value=None),
        record(
            "PartitionRecord", 1, PartitionId=7, TopicId=T1, Replicas=list(range(130)), Directories=[T1] * 3
        ),
        record("PartitionChangeRecord", 0, PartitionId=1, TopicId=T1),  # all tagged fields at defaults
        record("ZkMigrationStateRecord", 0, ZkMigrationState=1),
    ]
    batch = next(iter_batches(encode_record_batch(3, 1, recs, TS)))
    data, pos, end, _ = batch.records_section()
    taken = []
    out: list[Any] = [None] * len(recs)
    i = 0
    while i < len(recs):
        j, pos2 = UNPACK(data, pos, end, i, len(recs), 3, out)
        taken += range(i, j)
        if j == len(recs):
            break
        # skip the declined record as Python would: its length varint says how far
        length, k = _read_varint(data, pos2)
        pos, i = k + length, j + 1
    assert taken == [0, 2, 5, 6, 7, 8, 9]
    assert [pair[1] for pair in out if pair is not None] == [recs[k] for k in taken]
    assert outcome(decode_batch_records, batch) == outcome(python_decode, batch)


@needs_native
def test_configure_decoding_refuses_malformed_plans():
    from migrator.kraft import _speedups  # type: ignore[attr-defined]

    good = N.native_plans(N.native_decode_plan)
    names, ops, defaults = good[schema_by_name("PartitionRecord").api_key][0]
    maker = U.make_uuid
    for plans in (
        [None],
        ((("not", "a", "plan"),),),
        (((names, ops, defaults[:-1]),),),  # a default missing
        (((names, ops[:-1], defaults),),),  # an operation missing
        (((names, ops + b"i", defaults),),),  # one too many
        (((names, ops.replace(b"ai", b"aa", 1), defaults),),),  # an array of arrays
        (((names, ops.replace(b"i", b"x", 1), defaults),),),  # an unknown operation
        (((names * 7, ops * 7, defaults * 7),),),  # more fields than the unpacker holds
    ):
        with pytest.raises(TypeError):
            _speedups.configure_decoding(plans, U.UUID_CACHE, maker)
    with pytest.raises(TypeError):
        _speedups.configure_decoding(good, U.UUID_CACHE, "not callable")
    _speedups.configure_decoding(good, U.UUID_CACHE, maker)
    batch = next(iter_batches(encode_record_batch(0, 1, [partition(0)], TS)))
    assert outcome(decode_batch_records, batch) == outcome(python_decode, batch)


@needs_native
def test_unpacker_arguments_out_of_range_decode_nothing():
    batch = next(iter_batches(encode_record_batch(0, 1, [partition(0), partition(1)], TS)))
    data, pos, end, _ = batch.records_section()
    for args in ((pos, end, 0, 0), (end, end, 0, 2), (-5, end, 0, 2), (pos, pos, 0, 2), (pos, end, 1, 2)):
        out: list[Any] = [None, None]
        stop, _ = UNPACK(data, *args, 0, out)
        assert stop == args[2] and out == [None, None], args
    out = [None]  # shorter than limit: stops at the list's end
    assert UNPACK(data, pos, end, 0, 2, 0, out)[0] == 1
    with pytest.raises(TypeError):
        UNPACK(data, pos, end, 0, 2, 0, (None, None))


FUZZ_CASES = 250


@needs_native
@pytest.mark.parametrize("seed", range(3))
def test_mutated_batches_decode_the_same_with_and_without_the_unpacker(seed):
    """Differential fuzzing: on damaged input the unpacker declines, so the result -- records or the
    typed error and its message -- is exactly what the Python decoders give."""
    rng = random.Random(500 + seed)
    base = corpus()
    compared = 0
    for _ in range(FUZZ_CASES):  # a fixed count: every run tries the same seeded mutations
        buf = mutate_inside_a_batch(rng, base) if rng.random() < 0.8 else mutate(rng, base)
        if rng.random() < 0.5:
            fix_crcs(buf)
        try:
            batches = [b for b in iter_batches(bytes(buf), "fuzz.log") if not b.is_control]
        except TYPED:
            batches = []
        for batch in batches:
            assert outcome(decode_batch_records, batch) == outcome(python_decode, batch)
            compared += 1
    assert compared >= 200
