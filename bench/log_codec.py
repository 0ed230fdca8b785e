"""Metadata log codec benchmark: zk2kraft against kafka-python, side by side in one run.

What each row measures (PartitionRecord v0, as Kafka's ZooKeeper migration writes it: 3 replicas out of
12 brokers, ISR = replicas except 1% of partitions with a shrunk ISR, leader, epochs, topics of 50
partitions with their own Uuid):

  encode+append
    zk2kraft full       MetadataRecords -> encode_record_batch (record codec + batch framing, CRC-32C,
                        <= --batch records per batch) -> write to a segment file; one fsync at the end.
    zk2kraft framing    the same pre-encoded values -> encode_batch -> write (batch framing only).
    kafka-python        the same pre-encoded values -> DefaultRecordBatchBuilder.append/build, base offset
                        and epoch patched in -> write (kafka-python only frames; it has no metadata codec).
  read+decode
    zk2kraft full       read the file -> iter_batches (CRC checked) -> decode_batch_records: every record
                        decoded to a MetadataRecord with its fields.
    zk2kraft framing    read -> iter_batches (CRC checked) -> RecordBatch.values() (bytes only).
    kafka-python        read -> MemoryRecords -> validate_crc() -> iterate records and take .value
                        (framing only: values stay bytes).

Record construction is outside the timings. Each figure is the median of --runs runs.
Usage: .venv/bin/python bench/log_codec.py [--records N] [--runs R] [--batch B]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import struct
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402
from kafka.record.memory_records import MemoryRecords  # noqa: E402

from migrator.kraft.batch import (  # noqa: E402
    decode_batch_records,
    encode_batch,
    encode_record_batch,
    iter_batches,
)
from migrator.kraft.records import MetadataRecord, encode_value, record  # noqa: E402

EPOCH = 5
TIMESTAMP = 1_700_000_000_000


def partition_records(n: int, start: int, seed: int = 7) -> list[MetadataRecord]:
    """Records start..start+n of a deterministic, realistic cluster layout."""
    out = []
    for i in range(start, start + n):
        rng = random.Random(seed * 1_000_003 + i)
        topic = i // 50
        topic_id = uuid.UUID(int=random.Random(topic).getrandbits(128))
        replicas = rng.sample(range(1, 13), 3)
        isr = replicas if rng.random() < 0.99 else replicas[:2]
        out.append(
            record(
                "PartitionRecord",
                0,
                PartitionId=i % 50,
                TopicId=topic_id,
                Replicas=replicas,
                Isr=isr,
                Leader=isr[0],
                LeaderEpoch=rng.randint(0, 40),
                PartitionEpoch=rng.randint(0, 200),
            )
        )
    return out


def chunks(n: int, size: int) -> Iterator[tuple[int, int]]:
    for start in range(0, n, size):
        yield start, min(size, n - start)


def zk2kraft_encode_full(path: Path, n: int, batch: int) -> float:
    elapsed = 0.0
    with open(path, "wb") as f:
        for start, count in chunks(n, batch):
            recs = partition_records(count, start)
            t0 = time.perf_counter()
            f.write(encode_record_batch(start, EPOCH, recs, TIMESTAMP))
            elapsed += time.perf_counter() - t0
        t0 = time.perf_counter()
        f.flush()
        os.fsync(f.fileno())
        elapsed += time.perf_counter() - t0
    return elapsed


def zk2kraft_encode_framing(path: Path, values: list[bytes], batch: int) -> float:
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        for start, count in chunks(len(values), batch):
            f.write(encode_batch(start, EPOCH, values[start : start + count], TIMESTAMP))
        f.flush()
        os.fsync(f.fileno())
    return time.perf_counter() - t0


def kafka_python_encode(path: Path, values: list[bytes], batch: int) -> float:
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        for start, count in chunks(len(values), batch):
            builder = DefaultRecordBatchBuilder(
                magic=2,
                compression_type=0,
                is_transactional=False,
                producer_id=-1,
                producer_epoch=-1,
                base_sequence=-1,
                batch_size=1 << 30,
            )
            append = builder.append
            for i in range(count):
                append(i, TIMESTAMP, None, values[start + i], [])
            buf = builder.build()
            struct.pack_into(">q", buf, 0, start)
            struct.pack_into(">i", buf, 12, EPOCH)
            f.write(buf)
        f.flush()
        os.fsync(f.fileno())
    return time.perf_counter() - t0


def zk2kraft_decode_full(path: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    data = path.read_bytes()
    n = 0
    for b in iter_batches(data, str(path)):
        n += len(decode_batch_records(b))
    return time.perf_counter() - t0, n


def zk2kraft_decode_framing(path: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    data = path.read_bytes()
    n = 0
    for b in iter_batches(data, str(path)):
        n += len(b.values())
    return time.perf_counter() - t0, n


def kafka_python_decode(path: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    data = path.read_bytes()
    records = MemoryRecords(data)
    n = 0
    while records.has_next():
        b = records.next_batch()
        if not b.validate_crc():
            raise RuntimeError("kafka-python found a CRC mismatch")
        for r in b:
            r.value  # noqa: B018 - touching the value is the work being measured
            n += 1
    return time.perf_counter() - t0, n


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()
    n, runs, batch = args.records, args.runs, args.batch

    values = [encode_value(r) for start, count in chunks(n, batch) for r in partition_records(count, start)]
    with tempfile.TemporaryDirectory(prefix="zk2kraft-bench-") as tmp:
        ours = Path(tmp) / "00000000000000000000.log"
        theirs = Path(tmp) / "kafka-python.log"
        framing = Path(tmp) / "framing.log"

        def checked(fn: Callable[[Path], tuple[float, int]]) -> float:
            seconds, count = fn(ours)
            if count != n:
                raise SystemExit(f"{fn.__name__} read {count} records, expected {n}")
            return seconds

        # The six measurements are interleaved run by run, so that load from other processes on a
        # shared machine affects all of them alike; each figure is the median over the runs.
        phases: dict[str, Callable[[], float]] = {
            "enc_full": lambda: zk2kraft_encode_full(ours, n, batch),
            "enc_frame": lambda: zk2kraft_encode_framing(framing, values, batch),
            "enc_kp": lambda: kafka_python_encode(theirs, values, batch),
            "dec_full": lambda: checked(zk2kraft_decode_full),
            "dec_frame": lambda: checked(zk2kraft_decode_framing),
            "dec_kp": lambda: checked(kafka_python_decode),
        }
        times: dict[str, list[float]] = {name: [] for name in phases}
        for _ in range(runs):
            for name, fn in phases.items():
                times[name].append(fn())
                if name == "enc_kp" and not (
                    ours.read_bytes() == framing.read_bytes() == theirs.read_bytes()
                ):
                    raise SystemExit("zk2kraft and kafka-python wrote different bytes for the same records")
        size = ours.stat().st_size
        rate = {name: n / statistics.median(ts) for name, ts in times.items()}
        enc_full, enc_frame, enc_kp = rate["enc_full"], rate["enc_frame"], rate["enc_kp"]
        dec_full, dec_frame, dec_kp = rate["dec_full"], rate["dec_frame"], rate["dec_kp"]

    print(
        f"{n:,} PartitionRecord v0 in batches of {batch}, {size / n:.1f} bytes/record on disk, median of {runs}"
    )
    print(f"{'':30}{'records/s':>12}")
    print("encode+append")
    print(f"  {'zk2kraft full (codec+batch)':28}{enc_full:12,.0f}")
    print(f"  {'zk2kraft framing only':28}{enc_frame:12,.0f}")
    print(f"  {'kafka-python framing only':28}{enc_kp:12,.0f}")
    print("read+decode")
    print(f"  {'zk2kraft full (batch+codec)':28}{dec_full:12,.0f}")
    print(f"  {'zk2kraft framing only':28}{dec_frame:12,.0f}")
    print(f"  {'kafka-python framing only':28}{dec_kp:12,.0f}")
    print("ratios (zk2kraft / kafka-python)")
    print(f"  encode+append: full {enc_full / enc_kp:.2f}x, framing {enc_frame / enc_kp:.2f}x")
    print(f"  read+decode:   full {dec_full / dec_kp:.2f}x, framing {dec_frame / dec_kp:.2f}x")


if __name__ == "__main__":
    main()
