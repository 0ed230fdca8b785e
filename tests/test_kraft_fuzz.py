"""Bounded fuzzing of the batch reader and record decoders: mutated input raises only our typed errors.

Mutations are seeded (reproducible) and cover bit flips, overwrites, truncation, insertion and deletion,
each with and without recomputing batch CRCs afterwards — without the CRC fix almost every mutation
stops at the CRC check, with it the record framing and the generated value decoders see the damage.
Where the fast batch decoder succeeds, its result must equal decoding each value on its own.
"""

import random
import struct
import uuid

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

from migrator.kraft.batch import CorruptLogError, MissingCodecError, iter_batches
from migrator.kraft.batch_decode import decode_batch_records
from migrator.kraft.batch_encode import encode_batch, encode_control_batch
from migrator.kraft.control import (
    LeaderChange,
    SnapshotFooter,
    SnapshotHeader,
    Voter,
    decode_control_record,
    encode_control_record,
)
from migrator.kraft.records import CorruptRecordError, decode_value, encode_value, record

TYPED = (CorruptLogError, CorruptRecordError, MissingCodecError)
T1 = uuid.UUID("7d4c4d3e-8f0a-4a7e-9a43-2c1e8d5b6f01")


def sample_records() -> list:
    recs = []
    for i in range(40):
        reps = [i % 4, (i + 1) % 4, (i + 2) % 4][: 1 + i % 3]
        recs.append(
            record(
                "PartitionRecord",
                i % 3,
                PartitionId=i,
                TopicId=T1,
                Replicas=reps,
                Isr=reps,
                Leader=reps[0],
                LeaderRecoveryState=i % 2,
                **({"Directories": [T1] * len(reps)} if i % 3 else {}),
            )
        )
    recs += [
        record("TopicRecord", Name="orders", TopicId=T1),
        record("ConfigRecord", ResourceType=2, ResourceName="orders", Name="retention.ms", Value=None),
        record("ConfigRecord", ResourceType=4, ResourceName="1", Name="x", Value="é" * 5),
        record(
            "RegisterBrokerRecord",
            BrokerId=1,
            IncarnationId=T1,
            EndPoints=[{"Name": "PLAINTEXT", "Host": "h1", "Port": 9092, "SecurityProtocol": 0}],
            Features=[{"Name": "metadata.version", "MinSupportedVersion": 1, "MaxSupportedVersion": 21}],
            Rack=None,
            LogDirs=[T1],
        ),
        record("ClientQuotaRecord", Entity=[{"EntityType": "user", "EntityName": None}], Key="k", Value=1.5),
        record(
            "UserScramCredentialRecord",
            Name="u",
            Mechanism=1,
            Salt=b"s",
            StoredKey=b"k" * 32,
            ServerKey=b"v" * 32,
        ),
        record("PartitionChangeRecord", PartitionId=1, TopicId=T1, Isr=[1], Leader=1, Directories=[T1]),
        record("DelegationTokenRecord", Owner="User:a", Requester="User:a", Renewers=["User:b"], TokenId="t"),
        record("BeginTransactionRecord", Name="copy"),
        record("ZkMigrationStateRecord", ZkMigrationState=1),
        record("EndTransactionRecord"),
        record("NoOpRecord"),
    ]
    return recs


def corpus() -> bytes:
    recs = sample_records()
    values = [encode_value(r) for r in recs]
    parts = [
        encode_control_batch(
            0, 1, [encode_control_record(LeaderChange(1, (Voter(1), Voter(2)), (Voter(1),)))], 5
        ),
        encode_batch(1, 1, values[:40], 5),
        encode_batch(41, 1, values[40:], 6),
        encode_control_batch(
            53, 1, [encode_control_record(SnapshotHeader(7)), encode_control_record(SnapshotFooter())], 7
        ),
    ]
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=1,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, v in enumerate(values[:10]):
        builder.append(i, 5, None, v, [])
    gz = builder.build()
    struct.pack_into(">q", gz, 0, 55)
    parts.append(bytes(gz))
    return b"".join(parts)


def fix_crcs(buf: bytearray) -> None:
    """Recompute the CRC of every batch whose declared length still fits."""
    pos = 0
    while pos + 61 <= len(buf):
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        if length < 49 or pos + 12 + length > len(buf):
            return
        struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : pos + 12 + length])))
        pos += 12 + length


def mutate(rng: random.Random, data: bytes) -> bytearray:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(6)
        at = rng.randrange(max(1, len(buf)))
        if kind == 0 and buf:
            buf[at] ^= 1 << rng.randrange(8)
        elif kind == 1 and buf:
            n = rng.randint(1, 8)
            buf[at : at + n] = bytes(rng.randrange(256) for _ in range(n))
        elif kind == 2:
            del buf[at:]
        elif kind == 3:
            buf[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
        elif kind == 4:
            del buf[at : at + rng.randint(1, 6)]
        elif buf:
            buf[at] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF])
    return buf


def mutate_inside_a_batch(rng: random.Random, data: bytes) -> bytearray:
    """Damage only one batch's records section, then repair its length and CRC: reaches the decoders."""
    batches = [(b.position, b.size) for b in iter_batches(data)]
    pos, size = rng.choice(batches)
    inner = mutate(rng, data[pos + 61 : pos + size])
    batch = bytearray(data[pos : pos + 61]) + inner
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    if rng.random() < 0.2:
        struct.pack_into(">i", batch, 57, rng.choice([0, 1, 2, 39, 40, 41, 1 << 20]))
    fix_crcs(batch)
    return bytearray(data[:pos]) + batch + bytearray(data[pos + size :])


def exercise(buf: bytes) -> None:
    """Read everything there is to read; only typed errors may escape."""
    for batch in iter_batches(buf, "fuzz.log"):
        if batch.is_control:
            for ctype, value in batch.control_records():
                decode_control_record(ctype, value, where="fuzz.log")
            continue
        try:
            fast = decode_batch_records(batch)
        except TYPED:
            fast = None
        try:
            values = batch.values()
            slow = [decode_value(v, "fuzz.log") for v in values]
        except TYPED:
            slow = None
        if fast is not None:
            assert slow is not None, "fast path accepted a batch the general path rejects"
            assert [rec for _, rec in fast] == slow
            offsets = [off for off, _ in fast]
            assert offsets == sorted(set(offsets))
            assert all(batch.base_offset <= off <= batch.last_offset for off in offsets)


#: cases per seed: fixed, so every run (and every machine) tries the same seeded mutations
LOG_CASES, VALUE_CASES = 500, 3000


@pytest.mark.parametrize("seed", range(4))
def test_mutated_logs_raise_only_typed_errors(seed):
    rng = random.Random(seed)
    base = corpus()
    exercise(base)
    for _ in range(LOG_CASES):
        if rng.random() < 0.6:
            buf = mutate_inside_a_batch(rng, base)
        else:
            buf = mutate(rng, base)
            if rng.random() < 0.7:
                fix_crcs(buf)
        try:
            exercise(bytes(buf))
        except TYPED:
            pass


@pytest.mark.parametrize("seed", range(2))
def test_mutated_values_raise_only_corrupt_record_errors(seed):
    rng = random.Random(100 + seed)
    values = [encode_value(r) for r in sample_records()]
    for _ in range(VALUE_CASES):
        raw = bytes(mutate(rng, rng.choice(values)))
        try:
            rec = decode_value(raw, "v")
        except CorruptRecordError:
            pass
        else:
            # Whatever decodes must encode back to a value that decodes to the same record.
            assert decode_value(encode_value(rec)) == rec


def test_random_bytes_never_escape():
    rng = random.Random(7)
    for _ in range(2000):
        raw = bytes(rng.randrange(256) for _ in range(rng.randint(0, 80)))
        for call, args in (
            (iter_batches, (raw, "r")),
            (decode_value, (raw, "r")),
            (decode_control_record, (rng.randrange(7), raw, "r")),
        ):
            try:
                result = call(*args)
                if call is iter_batches:
                    list(result)
            except TYPED:
                pass
