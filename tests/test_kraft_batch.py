"""Record batches v2 and control records: reference bytes, kafka-python and kio interop, corruption."""

import gzip
import importlib.util
import io
import mmap
import re
import struct
import uuid

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kio.schema.leader_change_message.v0.data import LeaderChangeMessage as KioLeaderChangeV0
from kio.schema.leader_change_message.v0.data import Voter as KioVoterV0
from kio.schema.leader_change_message.v1.data import LeaderChangeMessage as KioLeaderChangeV1
from kio.schema.leader_change_message.v1.data import Voter as KioVoterV1
from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord as KioFooter
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord as KioHeader
from kio.serial import entity_writer

from migrator.errors import BadInputError
from migrator.kraft.batch import (
    ATTR_CONTROL,
    CorruptLogError,
    MissingCodecError,
    RecordBatch,
    TruncatedBatchError,
    iter_batches,
)
from migrator.kraft.batch_decode import decode_batch_records
from migrator.kraft.batch_encode import encode_batch, encode_control_batch, encode_record_batch
from migrator.kraft.control import (
    ControlType,
    KRaftVersion,
    LeaderChange,
    SnapshotFooter,
    SnapshotHeader,
    UnknownControl,
    Voter,
    Voters,
    decode_control_record,
    encode_control_record,
)
from migrator.kraft.records import (
    CorruptRecordError,
    MetadataRecord,
    OpaqueRecord,
    decode_value,
    encode_value,
    encode_values,
    record,
)
from migrator.kraft.varint import read_zigzag as _read_varint

TS = 1_700_000_000_123
T1 = uuid.UUID("7d4c4d3e-8f0a-4a7e-9a43-2c1e8d5b6f01")
MIGRATING = uuid.UUID(int=1)


def fix_crc(buf: bytearray, pos: int = 0) -> bytearray:
    """Recompute the CRC of the batch at ``pos`` after a deliberate edit, so deeper checks run."""
    (length,) = struct.unpack_from(">i", buf, pos + 8)
    struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : pos + 12 + length])))
    return buf


def partition(i: int, replicas: list[int] | None = None, version: int = 0) -> MetadataRecord:
    reps = replicas if replicas is not None else [i % 5, (i + 1) % 5, (i + 2) % 5]
    extra = {"Directories": [MIGRATING] * len(reps)} if version >= 1 else {}
    return record(
        "PartitionRecord",
        version,
        PartitionId=i,
        TopicId=T1,
        Replicas=reps,
        Isr=reps,
        Leader=reps[0] if reps else -1,
        LeaderEpoch=i % 3,
        PartitionEpoch=i,
        **extra,
    )


def kp_batch(
    values: list[bytes],
    base_offset: int,
    epoch: int,
    offsets: list[int] | None = None,
    timestamps: list[int] | None = None,
    keys: list[bytes | None] | None = None,
    headers: list[list[tuple[str, bytes]]] | None = None,
    compression: int = 0,
) -> bytes:
    """A batch built by kafka-python (base offset and epoch patched in: its builder writes 0)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i, value in enumerate(values):
        builder.append(
            offsets[i] if offsets else i,
            timestamps[i] if timestamps else TS,
            keys[i] if keys else None,
            value,
            headers[i] if headers else [],
        )
    buf = builder.build()
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">i", buf, 12, epoch)
    return bytes(buf)


# ----------------------------------------------------------------------------------------------
# Layout


def test_noop_as_first_record_of_a_batch_matches_reference_bytes():
    batch = encode_batch(0, 1, [encode_value(record("NoOpRecord"))], TS)
    assert batch[61:] == bytes.fromhex("14 00 00 00 01 08 01 14 00 00 00")


def test_batch_header_layout():
    values = [encode_value(partition(i)) for i in range(3)]
    batch = encode_batch(1234, 7, values, TS)
    (
        base,
        length,
        epoch,
        magic,
        crc,
        attrs,
        last_delta,
        first_ts,
        max_ts,
        pid,
        pepoch,
        seq,
        count,
    ) = struct.unpack_from(">qiibIhiqqqhii", batch)
    assert (base, length, epoch, magic) == (1234, len(batch) - 12, 7, 2)
    assert crc == crc32c(batch[21:])
    assert (attrs, last_delta, first_ts, max_ts) == (0, 2, TS, TS)
    assert (pid, pepoch, seq, count) == (-1, -1, -1, 3)
    parsed = next(iter_batches(batch, "x"))
    assert (parsed.base_offset, parsed.partition_leader_epoch, parsed.records_count) == (1234, 7, 3)
    assert (parsed.last_offset, parsed.next_offset, parsed.size, parsed.position) == (
        1236,
        1237,
        len(batch),
        0,
    )
    assert not parsed.is_control and parsed.compression == 0 and parsed.compression_name == "none"
    assert parsed.values() == values
    assert parsed.raw() == batch


def test_empty_batches_are_refused():
    with pytest.raises(ValueError):
        encode_batch(0, 0, [], TS)
    with pytest.raises(ValueError):
        encode_control_batch(0, 0, [], TS)


# ----------------------------------------------------------------------------------------------
# kafka-python interop


def test_kafka_python_reads_our_batches():
    values_a = [encode_value(partition(i)) for i in range(1000)]
    values_b = [encode_value(record("TopicRecord", Name="t" * i, TopicId=T1)) for i in range(70)]
    values_c = [encode_value(record("NoOpRecord"))]
    buf = (
        encode_batch(0, 3, values_a, TS)
        + encode_batch(1000, 3, values_b, TS + 1)
        + encode_batch(1070, 4, values_c, TS + 2)
    )
    records = MemoryRecords(buf)
    seen = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        assert not batch.is_control_batch and batch.compression_type == 0
        for rec in batch:
            assert rec.key is None and rec.headers == []
            seen.append((rec.offset, batch.leader_epoch, rec.timestamp, rec.value))
    expected = (
        [(i, 3, TS, v) for i, v in enumerate(values_a)]
        + [(1000 + i, 3, TS + 1, v) for i, v in enumerate(values_b)]
        + [(1070, 4, TS + 2, values_c[0])]
    )
    assert seen == expected


def test_we_read_kafka_python_batches():
    values = [encode_value(partition(i)) for i in range(200)]
    buf = kp_batch(values, 500, 9)
    batch = next(iter_batches(buf, "kp.log"))
    assert (batch.base_offset, batch.partition_leader_epoch, batch.records_count) == (500, 9, 200)
    assert batch.values() == values
    assert decode_batch_records(batch) == [(500 + i, partition(i)) for i in range(200)]


def test_kafka_python_batches_with_gaps_keys_headers_and_timestamps():
    values = [encode_value(partition(i)) for i in range(100)]
    offsets = [i * 3 for i in range(100)]
    timestamps = [TS + i * 1000 for i in range(100)]
    keys = [None if i % 2 else b"k%d" % i for i in range(100)]
    headers = [[("h", b"v")] if i % 3 == 0 else [] for i in range(100)]
    buf = kp_batch(values, 10, 2, offsets, timestamps, keys, headers)
    batch = next(iter_batches(buf))
    assert batch.values() == values
    assert decode_batch_records(batch) == [(10 + 3 * i, partition(i)) for i in range(100)]


def test_gzip_batches_from_kafka_python_decompress():
    values = [encode_value(partition(i)) for i in range(300)]
    buf = kp_batch(values, 0, 1, compression=1)
    batch = next(iter_batches(buf, "gz.log"))
    assert batch.compression == 1 and batch.compression_name == "gzip"
    assert batch.values() == values
    assert decode_batch_records(batch) == [(i, partition(i)) for i in range(300)]


@pytest.mark.parametrize(
    ("codec", "module", "package"),
    [(2, "snappy", "python-snappy"), (3, "lz4", "lz4"), (4, "zstandard", "zstandard")],
)
def test_other_codecs_need_their_library(codec, module, package):
    buf = bytearray(encode_batch(0, 1, [b"\x01\x14\x00\x00"], TS))
    struct.pack_into(">h", buf, 21, codec)
    batch = next(iter_batches(bytes(fix_crc(buf)), "c.log"))
    assert batch.compression == codec
    if importlib.util.find_spec(module) is None:
        with pytest.raises(
            MissingCodecError, match=re.escape(f"install the Python package {package!r}")
        ) as info:
            batch.values()
        assert isinstance(info.value, BadInputError) and not isinstance(info.value, CorruptLogError)
        assert str(info.value).startswith("c.log: batch at byte 0 is compressed with ")
    else:
        with pytest.raises(CorruptLogError, match="cannot decompress"):
            batch.values()


def test_unknown_codec_is_corrupt():
    buf = bytearray(encode_batch(0, 1, [b"\x01\x14\x00\x00"], TS))
    struct.pack_into(">h", buf, 21, 5)
    batch = next(iter_batches(bytes(fix_crc(buf)), "c.log"))
    with pytest.raises(CorruptLogError, match="unknown compression codec 5"):
        decode_batch_records(batch)


def test_gzip_garbage_is_corrupt():
    body = b"not gzip at all"
    buf = bytearray(encode_batch(0, 1, [b"\x01\x14\x00\x00"], TS)[:61] + body)
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">h", buf, 21, 1)
    batch = next(iter_batches(bytes(fix_crc(buf)), "g.log"))
    with pytest.raises(CorruptLogError, match="cannot decompress gzip records"):
        batch.values()
    good = gzip.compress(b"")  # decompresses to nothing while one record is claimed
    buf2 = bytearray(buf[:61] + good)
    struct.pack_into(">i", buf2, 8, len(buf2) - 12)
    with pytest.raises(CorruptLogError, match="claims 1 records"):
        next(iter_batches(bytes(fix_crc(buf2)), "g.log")).values()


# ----------------------------------------------------------------------------------------------
# Control batches and control records


def test_control_batch_layout_and_kafka_python_view():
    header = encode_control_record(SnapshotHeader(TS))
    footer = encode_control_record(SnapshotFooter())
    buf = encode_control_batch(0, 5, [header, footer], TS)
    (attrs,) = struct.unpack_from(">h", buf, 21)
    assert attrs == ATTR_CONTROL
    kb = DefaultRecordBatch(buf)
    assert kb.is_control_batch and kb.validate_crc() and kb.leader_epoch == 5
    assert [(r.version, r.type) for r in kb] == [(0, 3), (0, 4)]
    batch = next(iter_batches(buf, "snap"))
    assert batch.is_control
    assert batch.control_records() == [header, footer]
    assert [decode_control_record(t, v) for t, v in batch.control_records()] == [
        SnapshotHeader(TS),
        SnapshotFooter(),
    ]
    with pytest.raises(ValueError, match="control batch"):
        decode_batch_records(batch)


def test_control_records_of_a_data_batch_is_an_error():
    batch = next(iter_batches(encode_batch(0, 1, [b"\x01\x14\x00\x00"], TS)))
    with pytest.raises(ValueError, match="not a control batch"):
        batch.control_records()


def kio_body(obj) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


def test_control_bodies_equal_kio():
    d1, d2 = uuid.uuid4(), uuid.uuid4()
    assert encode_control_record(SnapshotHeader(TS))[1] == kio_body(
        KioHeader(version=0, last_contained_log_timestamp=TS)
    )
    assert encode_control_record(SnapshotFooter())[1] == kio_body(KioFooter(version=0))
    v0 = LeaderChange(3, (Voter(1), Voter(2), Voter(3)), (Voter(3), Voter(1)))
    assert encode_control_record(v0) == (
        ControlType.LEADER_CHANGE,
        kio_body(
            KioLeaderChangeV0(
                version=0,
                leader_id=3,
                voters=(KioVoterV0(voter_id=1), KioVoterV0(voter_id=2), KioVoterV0(voter_id=3)),
                granting_voters=(KioVoterV0(voter_id=3), KioVoterV0(voter_id=1)),
            )
        ),
    )
    v1 = LeaderChange(1, (Voter(1, d1), Voter(2, d2)), (Voter(1, d1),), version=1)
    assert encode_control_record(v1)[1] == kio_body(
        KioLeaderChangeV1(
            version=1,
            leader_id=1,
            voters=(
                KioVoterV1(voter_id=1, voter_directory_id=d1),
                KioVoterV1(voter_id=2, voter_directory_id=d2),
            ),
            granting_voters=(KioVoterV1(voter_id=1, voter_directory_id=d1),),
        )
    )


@pytest.mark.parametrize(
    "msg",
    [
        SnapshotHeader(TS),
        SnapshotFooter(),
        LeaderChange(1),
        LeaderChange(2, (Voter(1), Voter(2)), (Voter(2),)),
        LeaderChange(2, (Voter(1, uuid.uuid4()),), (), version=1),
        KRaftVersion(1),
        Voters(
            (
                {
                    "VoterId": 1,
                    "VoterDirectoryId": T1,
                    "Endpoints": [{"Name": "CONTROLLER", "Host": "c1", "Port": 9093}],
                    "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1},
                },
            )
        ),
        UnknownControl(1, b"\x00\x00\x00\x00\x00\x07"),
    ],
)
def test_control_messages_round_trip_through_a_control_batch(msg):
    buf = encode_control_batch(10, 2, [encode_control_record(msg)], TS)
    [(ctype, value)] = next(iter_batches(buf)).control_records()
    assert decode_control_record(ctype, value) == msg


def test_leader_change_v0_cannot_carry_directory_ids():
    with pytest.raises(ValueError, match="v0"):
        encode_control_record(LeaderChange(1, (Voter(1, T1),)))


@pytest.mark.parametrize(
    ("ctype", "value", "reason"),
    [
        (ControlType.SNAPSHOT_HEADER, b"\x00", "only 1 bytes"),
        (ControlType.SNAPSHOT_HEADER, b"\x00\x00\x00", "truncated"),
        (ControlType.SNAPSHOT_HEADER, b"\x00\x05" + bytes(9), "version 5"),
        (ControlType.SNAPSHOT_FOOTER, b"\x00\x00\x00\x00", "left over"),
        (ControlType.LEADER_CHANGE, b"\xff\xff", "version -1"),
    ],
)
def test_corrupt_control_values(ctype, value, reason):
    with pytest.raises(CorruptRecordError, match=re.escape(reason)) as info:
        decode_control_record(ctype, value, where="00000000000000000100-0000000002.checkpoint")
    assert str(info.value).startswith("00000000000000000100-0000000002.checkpoint: ")


def test_control_record_with_a_short_key_is_corrupt():
    buf = bytearray(encode_control_batch(0, 1, [encode_control_record(SnapshotFooter())], TS))
    # key length 4 -> 1 would misalign everything; instead make the key version negative.
    key_at = 61 + 1 + 3 + 1
    struct.pack_into(">h", buf, key_at, -1)
    batch = next(iter_batches(bytes(fix_crc(buf)), "s"))
    with pytest.raises(CorruptLogError, match="key version -1"):
        batch.control_records()


# ----------------------------------------------------------------------------------------------
# Corruption: every error is typed and names the file and byte position


def two_batches() -> tuple[bytes, int]:
    first = encode_batch(0, 1, [encode_value(partition(i)) for i in range(2)], TS)
    second = encode_batch(2, 1, [encode_value(record("NoOpRecord"))], TS)
    return first + second, len(first)


def test_every_truncation_names_the_torn_batch():
    buf, split = two_batches()
    for cut in range(len(buf)):
        data = buf[:cut]
        if cut in (0, split):
            assert len(list(iter_batches(data, "00000000000000000000.log"))) == (0 if cut == 0 else 1)
            continue
        with pytest.raises(TruncatedBatchError) as info:
            list(iter_batches(data, "00000000000000000000.log"))
        expected = 0 if cut < split else split
        assert info.value.offset == expected and info.value.file == "00000000000000000000.log"
        assert str(info.value).startswith(
            f"00000000000000000000.log: corrupt record batch at byte {expected}: "
        )


def test_every_flipped_bit_is_caught_unless_it_is_outside_the_crc():
    buf, split = two_batches()
    clean = [(b.base_offset, b.partition_leader_epoch) for b in iter_batches(buf)]
    for byte in range(len(buf)):
        for bit in range(8):
            data = bytearray(buf)
            data[byte] ^= 1 << bit
            rel = byte - (0 if byte < split else split)
            if rel < 8 or 12 <= rel < 16:
                # baseOffset and partitionLeaderEpoch are outside the CRC, as in Kafka; they parse.
                got = [(b.base_offset, b.partition_leader_epoch) for b in iter_batches(bytes(data))]
                assert got != clean
                continue
            with pytest.raises(CorruptLogError) as info:
                for batch in iter_batches(bytes(data), "seg.log"):
                    decode_batch_records(batch)
            assert info.value.offset == (0 if byte < split else split), (byte, bit, str(info.value))


def test_crc_mismatch_message():
    buf, _ = two_batches()
    data = bytearray(buf)
    data[70] ^= 0x10
    with pytest.raises(CorruptLogError) as info:
        list(iter_batches(bytes(data), "seg.log"))
    assert re.fullmatch(
        r"seg\.log: corrupt record batch at byte 0: CRC mismatch \(stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}\)",
        str(info.value),
    )
    assert not isinstance(info.value, TruncatedBatchError)
    assert info.value.reason.startswith("CRC mismatch")
    assert len(list(iter_batches(bytes(data), "seg.log", verify_crc=False))) == 2


def test_wrong_magic():
    buf, split = two_batches()
    data = bytearray(buf)
    data[split + 16] = 1
    with pytest.raises(CorruptLogError, match=f"at byte {split}: unsupported magic 1") as info:
        list(iter_batches(bytes(data), "seg.log"))
    assert not isinstance(info.value, TruncatedBatchError)


def test_length_past_the_end_is_truncated_and_too_small_is_corrupt():
    buf, split = two_batches()
    data = bytearray(buf)
    struct.pack_into(">i", data, split + 8, 10_000)
    with pytest.raises(TruncatedBatchError, match=f"at byte {split}: batch length 10000 runs past the end"):
        list(iter_batches(bytes(data), "seg.log"))
    struct.pack_into(">i", data, split + 8, 20)
    with pytest.raises(CorruptLogError, match="batch length 20 is below the minimum 49") as info:
        list(iter_batches(bytes(data), "seg.log"))
    assert not isinstance(info.value, TruncatedBatchError)
    with pytest.raises(CorruptLogError, match="below the minimum") as info:
        list(iter_batches(bytes(data[: split + 30]), "seg.log"))
    assert not isinstance(info.value, TruncatedBatchError)


def test_zero_filled_tail_is_corrupt_at_its_start():
    buf, split = two_batches()
    with pytest.raises(CorruptLogError, match=f"at byte {len(buf)}: batch length 0") as info:
        list(iter_batches(buf + bytes(4096), "seg.log"))
    assert not isinstance(info.value, TruncatedBatchError)


def batch_with_records(raw_records: bytes, count: int, base: int = 0) -> bytes:
    """A batch around hand-made record bytes (valid header and CRC)."""
    head = bytearray(encode_batch(base, 1, [b"\x01\x14\x00\x00"], TS)[:61])
    struct.pack_into(">i", head, 8, 49 + len(raw_records))
    struct.pack_into(">i", head, 57, count)
    struct.pack_into(">i", head, 23, count - 1)
    return bytes(fix_crc(bytearray(head + raw_records)))


@pytest.mark.parametrize(
    ("records", "count", "reason"),
    [
        (b"\xff\xff\xff\xff\xff\x01" + bytes(10), 1, "longer than 5 bytes"),
        (bytes.fromhex("14 00 00 00 01 08 01 14 00 00 00") + b"\x00", 1, "1 bytes left over after 1 records"),
        (
            bytes.fromhex("14 00 00 00 01 08 01 14 00 00 00 14 00 00 02 01 08 01 14 00 00 00"),
            3,
            "runs past the end of the batch",
        ),
        (
            bytes.fromhex("14 00 00 00 01 08 01 14 00 00 00 16 00 00 02 01 08 01 14 00 00 00"),
            2,
            "record length disagrees",
        ),
        (bytes.fromhex("14 00 00 00 01 08 01 14 00 00 00") * 2, 2, "offset delta 0 does not increase"),
        (bytes.fromhex("0a 00 00 00 01 01 00") + bytes(6), 1, "null value"),
        (bytes.fromhex("14 00 00 00 01 08 01 14 00 00 02") + bytes(1), 1, "record"),
        (bytes.fromhex("16 00 00 00 01 08 01 14 00 00 00"), 1, "record"),
        (bytes(7) * 1, 2, "claims 2 records"),
    ],
)
def test_bad_record_framing_names_file_and_byte(records, count, reason):
    buf = batch_with_records(records, count)
    batch = next(iter_batches(buf, "seg.log"))
    with pytest.raises(CorruptLogError, match=re.escape(reason)) as info:
        decode_batch_records(batch)
    assert info.value.file == "seg.log" and info.value.offset >= 61
    assert "\n" not in str(info.value)
    with pytest.raises(CorruptLogError):
        batch.values()


def test_offset_deltas_must_increase_within_the_batch_range():
    values = [b"\x01\x14\x00\x00"] * 3
    for offsets, reason in (([0, 2, 2], "does not increase"), ([0, 0, 1], "does not increase")):
        buf = kp_batch(values, 0, 1, offsets=offsets)
        batch = next(iter_batches(buf, "k.log"))
        with pytest.raises(CorruptLogError, match=reason):
            decode_batch_records(batch)
        with pytest.raises(CorruptLogError, match=reason):
            batch.values()
    buf = bytearray(encode_batch(0, 1, values, TS))
    struct.pack_into(">i", buf, 23, 1)  # last offset delta 1, but three records with deltas 0, 1, 2
    batch = next(iter_batches(bytes(fix_crc(buf)), "k.log"))
    with pytest.raises(CorruptLogError, match="offset delta 2 is beyond the batch's last offset delta 1"):
        decode_batch_records(batch)
    # the same through the run decoder: many same-layout records
    many = [encode_value(partition(i)) for i in range(300)]
    buf = bytearray(encode_batch(0, 1, many, TS))
    struct.pack_into(">i", buf, 23, 250)
    batch = next(iter_batches(bytes(fix_crc(buf)), "k.log"))
    with pytest.raises(CorruptLogError, match="offset delta 251 is beyond"):
        decode_batch_records(batch)
    # gaps are fine (compacted batches)
    buf = kp_batch(values, 0, 1, offsets=[0, 5, 9])
    assert [o for o, _ in decode_batch_records(next(iter_batches(buf)))] == [0, 5, 9]


def test_negative_record_count_and_offset_delta():
    buf = bytearray(encode_batch(0, 1, [b"\x01\x14\x00\x00"], TS))
    struct.pack_into(">i", buf, 57, -1)
    with pytest.raises(CorruptLogError, match="negative record count"):
        list(iter_batches(bytes(fix_crc(buf)), "seg.log"))
    buf = bytearray(encode_batch(0, 1, [b"\x01\x14\x00\x00"], TS))
    struct.pack_into(">i", buf, 23, -5)
    with pytest.raises(CorruptLogError, match="negative last offset delta"):
        list(iter_batches(bytes(fix_crc(buf)), "seg.log"))


def test_bad_value_in_a_batch_is_a_corrupt_record_naming_offset_and_byte():
    values = [encode_value(partition(i)) for i in range(3)] + [b"\x02\x14\x00\x00"]
    buf = encode_batch(100, 1, values, TS)
    batch = next(iter_batches(b"\x00" * 0 + buf, "00000000000000000100.log"))
    with pytest.raises(CorruptRecordError, match="unknown frame version 2") as info:
        decode_batch_records(batch)
    value_at = buf.index(b"\x02\x14\x00\x00")
    assert info.value.where == f"00000000000000000100.log: record at offset 103 (byte {value_at})"


def test_bad_body_inside_a_batch_names_its_offset():
    good = encode_value(partition(1))
    bad = good[:-1] + b"\x01"  # the tagged section now claims a field that is not there
    buf = encode_batch(50, 1, [good, good, bad], TS)
    with pytest.raises(CorruptRecordError, match=r"record at offset 52 \(byte \d+\)"):
        decode_batch_records(next(iter_batches(buf, "x.log")))


# ----------------------------------------------------------------------------------------------
# Buffers, positions and the run decoder


def test_memoryview_mmap_and_start_position(tmp_path):
    values = [encode_value(partition(i)) for i in range(50)]
    buf = encode_batch(0, 1, values[:20], TS) + encode_batch(20, 1, values[20:], TS)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(buf)
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        view = memoryview(mm)
        try:
            batches = list(iter_batches(view, str(path)))
            assert [b.position for b in batches] == [0, len(buf) - batches[1].size]
            decoded = [r for b in batches for r in decode_batch_records(b)]
            assert decoded == [(i, partition(i)) for i in range(50)]
            assert [b.values() for b in batches] == [values[:20], values[20:]]
            second = list(iter_batches(view, str(path), start=batches[1].position))
            assert len(second) == 1 and second[0].base_offset == 20
            del batches, second
        finally:
            view.release()
    assert [b.base_offset for b in iter_batches(bytearray(buf))] == [0, 20]


def test_runs_of_many_layouts_and_offsets_past_the_one_byte_varints():
    recs = []
    for i in range(2500):
        if i % 97 == 0:
            recs.append(record("TopicRecord", Name=f"topic-{i}", TopicId=T1))
        elif i % 13 == 0:
            recs.append(partition(i, [1, 2, 3, 4], version=1))
        elif i % 7 == 0:
            recs.append(partition(i, [1]))
        else:
            recs.append(partition(i))
    values = [encode_value(r) for r in recs]
    buf = encode_batch(0, 1, values[:2000], TS) + encode_batch(2000, 1, values[2000:], TS)
    decoded = [r for b in iter_batches(buf) for r in decode_batch_records(b)]
    assert decoded == list(enumerate(recs))


def test_one_batch_past_the_two_byte_offset_deltas():
    recs = [partition(i, [1, 2, 3]) for i in range(9000)]
    buf = encode_record_batch(0, 1, recs, TS)
    assert decode_batch_records(next(iter_batches(buf))) == list(enumerate(recs))


def metadata_records() -> st.SearchStrategy[MetadataRecord]:
    replicas = st.lists(st.integers(0, 2**31 - 1), max_size=4)
    return st.one_of(
        st.builds(
            lambda pid, reps, isr, ver, tagged: record(
                "PartitionRecord",
                ver,
                PartitionId=pid,
                TopicId=T1,
                Replicas=reps,
                Isr=isr,
                LeaderRecoveryState=tagged,
                **({"Directories": [MIGRATING] * len(reps)} if ver else {}),
            ),
            st.integers(-(2**31), 2**31 - 1),
            replicas,
            replicas,
            st.integers(0, 2),
            st.sampled_from([0, 0, 0, 1]),
        ),
        st.builds(lambda n: record("TopicRecord", Name=n, TopicId=T1), st.text(max_size=80)),
        st.builds(lambda s: record("ZkMigrationStateRecord", ZkMigrationState=s), st.integers(0, 3)),
        st.just(record("NoOpRecord")),
    )


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    st.lists(st.lists(metadata_records(), min_size=1, max_size=150), min_size=1, max_size=4),
    st.integers(0, 2**40),
    st.integers(0, 2**31 - 1),
)
def test_batches_round_trip_and_agree_with_per_value_decoding(groups, base, epoch):
    buf = b""
    expected = []
    offset = base
    for group in groups:
        values = [encode_value(r) for r in group]
        buf += encode_batch(offset, epoch, values, TS)
        expected += [(offset + i, decode_value(v)) for i, v in enumerate(values)]
        offset += len(group)
    batches = list(iter_batches(buf, "h.log"))
    assert [b.records_count for b in batches] == [len(g) for g in groups]
    assert [r for b in batches for r in decode_batch_records(b)] == expected
    assert [rec for _, rec in expected] == [r for g in groups for r in g]


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    st.lists(metadata_records(), min_size=1, max_size=120), st.integers(0, 2**40), st.integers(0, 2**31 - 1)
)
def test_encode_record_batch_equals_encode_batch_of_values(recs, base, epoch):
    assert encode_record_batch(base, epoch, recs, TS) == encode_batch(base, epoch, encode_values(recs), TS)


def test_encode_record_batch_past_the_one_and_two_byte_offset_deltas():
    recs = [partition(i, [1, 2, 3][: 1 + i % 3]) for i in range(9000)]
    recs[100] = OpaqueRecord(99, 0, b"\x01\x02")
    assert encode_record_batch(7, 1, recs, TS) == encode_batch(7, 1, encode_values(recs), TS)
    with pytest.raises(ValueError, match="cannot encode PartitionRecord"):
        encode_record_batch(0, 1, [partition(1), record("PartitionRecord", 0, PartitionId=1 << 40)], TS)
    with pytest.raises(ValueError):
        encode_record_batch(0, 1, [], TS)


def test_batch_with_unknown_records_decodes_to_opaque_and_re_encodes_identically():
    values = [
        encode_value(partition(0)),
        bytes([1, 99, 0]) + b"future",  # unknown apiKey
        bytes([1, 3, 9]) + b"\x00" * 5,  # PartitionRecord v9, unknown version
        bytes([1, 0xC8, 0x01, 0]) + b"x",  # two-byte apiKey varint
        encode_value(record("NoOpRecord")),
    ]
    buf = encode_batch(40, 3, values, TS)
    decoded = decode_batch_records(next(iter_batches(buf)))
    assert [type(r) for _, r in decoded] == [
        MetadataRecord,
        OpaqueRecord,
        OpaqueRecord,
        OpaqueRecord,
        MetadataRecord,
    ]
    assert decoded[1][1] == OpaqueRecord(99, 0, b"future") and decoded[3][1].api_key == 200
    assert encode_record_batch(40, 3, [r for _, r in decoded], TS) == buf


def test_record_batch_is_a_dataclass_with_header_fields():
    batch = next(iter_batches(encode_batch(3, 4, [b"\x01\x14\x00\x00"], TS), "f"))
    assert isinstance(batch, RecordBatch)
    assert (batch.magic, batch.attributes, batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        2,
        0,
        -1,
        -1,
        -1,
    )
    assert (batch.base_timestamp, batch.max_timestamp, batch.last_offset_delta, batch.file) == (
        TS,
        TS,
        0,
        "f",
    )


def test_an_offset_delta_that_goes_back_after_a_skip_is_caught_even_where_runs_apply():
    """Runs decode records whose offset delta equals their index; after a delta that skipped ahead
    (0, 1, 5, then 3) the next record must not be taken by a run, or offsets 5, 3, 4, 5 would pass."""
    recs = [partition(i) for i in range(6)]
    decode_batch_records(next(iter_batches(encode_record_batch(0, 1, recs, TS))))  # runs learned
    buf = bytearray(encode_record_batch(0, 1, recs, TS))
    pos, attrs = 61, []
    for _ in recs:  # each record: length varint, then attributes, timestampDelta, offsetDelta
        length, pos = _read_varint(buf, pos)
        attrs.append(pos)
        pos += length
    assert buf[attrs[2] + 2] == 4  # zigzag(2)
    buf[attrs[2] + 2] = 10  # record 2 claims offset delta 5
    struct.pack_into(">i", buf, 23, 5)  # lastOffsetDelta
    with pytest.raises(CorruptLogError, match="offset delta 3 does not increase"):
        decode_batch_records(next(iter_batches(bytes(fix_crc(buf)))))
