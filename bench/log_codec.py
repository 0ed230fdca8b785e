"""Metadata log codec benchmark: zk2kraft against kafka-python, side by side in one run.

What each row measures (PartitionRecord v0, as Kafka's ZooKeeper migration writes it: 3 replicas out of
12 brokers, ISR = replicas except 1% of partitions with a shrunk ISR, leader, epochs, topics of 50
partitions with their own Uuid):

  encode+append
    zk2kraft full       MetadataRecords -> encode_record_batch (record codec + batch framing, CRC-32C,
                        <= --batch records per batch) -> write to a segment file; one fsync at the end.
    zk2kraft log        MetadataLog.append, what the migration calls: the same records, one append (and
                        one fsync) per turn of --group batches, in a real log directory with its lock.
    zk2kraft framing    the same pre-encoded values -> encode_batch -> write (batch framing only).
    kafka-python        the same pre-encoded values -> DefaultRecordBatchBuilder.append/build, base offset
                        and epoch patched in -> write (kafka-python only frames; it has no metadata codec).
  read+decode
    zk2kraft full       read the file -> iter_batches (CRC checked) -> decode_batch_records: every record
                        decoded to a MetadataRecord with its fields.
    zk2kraft framing    read -> iter_batches (CRC checked) -> RecordBatch.values() (bytes only).
    zk2kraft log        MetadataLog.open + read(): (offset, epoch, MetadataRecord) of every record, what
                        `zk2kraft log dump` and the audit read through.
    kafka-python        read -> MemoryRecords -> validate_crc() -> iterate records and take .value
                        (framing only: values stay bytes).

Record construction is outside the timings. The implementations take turns every --group batches (so
load from other processes on a shared machine falls on all of them alike); each figure is the median of
--runs runs. The three segment files must come out byte-identical and the log must read back the same
records, or the run fails. The native packer and unpacker are used when built; ZK2KRAFT_PURE_PYTHON=1
measures the pure-Python codec instead.
Usage: .venv/bin/python bench/log_codec.py [--records N] [--runs R] [--batch B] [--group G]
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import statistics
import struct
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402
from kafka.record.memory_records import MemoryRecords  # noqa: E402

from migrator.kraft.batch import iter_batches
from migrator.kraft.batch_decode import decode_batch_records
from migrator.kraft.batch_encode import encode_batch, encode_record_batch
from migrator.kraft.log import MetadataLog  # noqa: E402
from migrator.kraft.native import NATIVE_PACK_RECORDS
from migrator.kraft.records import MetadataRecord, encode_value, record  # noqa: E402

EPOCH = 5
TIMESTAMP = 1_700_000_000_000


def partition_records(n: int, start: int, seed: int = 7) -> list[MetadataRecord]:
    """Records start..start+n of a deterministic, realistic cluster layout (same chunks, same records)."""
    rng = random.Random(seed * 1_000_003 + start)
    topic_ids: dict[int, uuid.UUID] = {}
    out = []
    for i in range(start, start + n):
        topic = i // 50
        topic_id = topic_ids.get(topic)
        if topic_id is None:
            topic_id = topic_ids[topic] = uuid.UUID(int=random.Random(topic).getrandbits(128))
        replicas = rng.sample(range(1, 13), 3)
        isr = list(replicas) if rng.random() < 0.99 else replicas[:2]
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


def kafka_python_batch(base_offset: int, values: list[bytes]) -> bytearray:
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
    for i, value in enumerate(values):
        append(i, TIMESTAMP, None, value, [])
    buf = builder.build()
    struct.pack_into(">q", buf, 0, base_offset)  # kafka-python's builder writes 0 for both
    struct.pack_into(">i", buf, 12, EPOCH)
    return buf


def clock() -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process): CPU time is the steadier figure on a shared machine."""
    return time.perf_counter(), time.process_time()


def add(total: list[float], start: tuple[float, float], end: tuple[float, float]) -> None:
    total[0] += end[0] - start[0]
    total[1] += end[1] - start[1]


def encode_run(
    n: int, batch: int, group: int, values: list[bytes], files: list[Path], log_dir: Path
) -> list[list[float]]:
    """[wall, CPU] seconds of [zk2kraft full, zk2kraft framing, kafka-python, zk2kraft log], in turns.

    Taking turns every ``group`` batches keeps load from other processes on a shared machine falling on
    all of them alike; doing a group of batches per turn keeps each one's code and data warm in the
    caches, as in real use.
    """
    spent = [[0.0, 0.0] for _ in range(4)]
    outs = [open(path, "wb") for path in files]
    log = MetadataLog.open(log_dir, writable=True, cluster_id="bench-cluster-id-0000w", node_id=1)
    try:
        full, framing, theirs = outs
        spans = list(chunks(n, batch))
        for g in range(0, len(spans), group):
            turn = spans[g : g + group]
            recs = [partition_records(count, start) for start, count in turn]  # not measured
            flat = [r for chunk_recs in recs for r in chunk_recs]
            t0 = clock()
            for (start, _), chunk_recs in zip(turn, recs, strict=True):
                full.write(encode_record_batch(start, EPOCH, chunk_recs, TIMESTAMP))
            t1 = clock()
            for start, count in turn:
                framing.write(encode_batch(start, EPOCH, values[start : start + count], TIMESTAMP))
            t2 = clock()
            for start, count in turn:
                theirs.write(kafka_python_batch(start, values[start : start + count]))
            t3 = clock()
            log.append(flat, EPOCH, TIMESTAMP, max_batch_records=batch)
            t4 = clock()
            add(spent[0], t0, t1)
            add(spent[1], t1, t2)
            add(spent[2], t2, t3)
            add(spent[3], t3, t4)
            del recs, flat
        for k, f in enumerate(outs):
            t0 = clock()
            f.flush()
            os.fsync(f.fileno())
            add(spent[k], t0, clock())
    finally:
        for f in outs:
            f.close()
        log.close()
    return spent


def decode_run(path: Path, n: int, group: int, batch: int, log_dir: Path) -> list[list[float]]:
    """[wall, CPU] seconds of [zk2kraft full, zk2kraft framing, kafka-python, zk2kraft log] reading.

    The segment is read once (the read time is charged to the first three); then the readers take
    turns, ``group`` batches each. The log reader opens ``log_dir`` itself (open and recovery timed).
    """
    t0 = clock()
    data = path.read_bytes()
    t1 = clock()
    spent = [[0.0, 0.0] for _ in range(4)]
    for k in range(3):
        add(spent[k], t0, t1)
    full = iter_batches(data, str(path))
    framing = iter_batches(data, str(path))
    theirs = MemoryRecords(data)
    t0 = clock()
    log = MetadataLog.open(log_dir)
    ours = log.read()
    add(spent[3], t0, clock())
    counts = [0, 0, 0, 0]
    done = False
    while not done:
        done = True
        t3 = clock()
        got, last = 0, None
        for got, last in enumerate(itertools.islice(ours, group * batch), 1):  # noqa: B007
            pass  # each record dropped as the next arrives, as a consumer (dump, replay, audit) does
        add(spent[3], t3, clock())
        counts[3] += got
        if last is not None and last[2].api_key != 3:  # PartitionRecord
            raise SystemExit(f"the log read back {last[2].name}")
        t0 = clock()
        for b in itertools.islice(full, group):
            counts[0] += len(decode_batch_records(b))
            done = False
        t1 = clock()
        for b in itertools.islice(framing, group):
            counts[1] += len(b.values())
        t2 = clock()
        for _ in range(group):
            if not theirs.has_next():
                break
            kb = theirs.next_batch()
            if not kb.validate_crc():
                raise SystemExit("kafka-python found a CRC mismatch")
            for r in kb:
                r.value  # noqa: B018 - taking the value is the work being measured
                counts[2] += 1
        t3 = clock()
        add(spent[0], t0, t1)
        add(spent[1], t1, t2)
        add(spent[2], t2, t3)
    log.close()
    if counts != [n, n, n, n]:
        raise SystemExit(f"readers saw {counts} records, expected {n} each")
    return spent


NAMES = [
    "zk2kraft full (codec+batch)",
    "zk2kraft framing only",
    "kafka-python framing only",
    "zk2kraft MetadataLog",
]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--group", type=int, default=20, help="batches per turn when taking turns")
    args = parser.parse_args()
    n, runs, batch, group = args.records, args.runs, args.batch, args.group

    load_before = os.getloadavg()[0]
    values = [encode_value(r) for start, count in chunks(n, batch) for r in partition_records(count, start)]
    enc: list[list[list[float]]] = [[], [], [], []]
    dec: list[list[list[float]]] = [[], [], [], []]
    with tempfile.TemporaryDirectory(prefix="zk2kraft-bench-") as tmp:
        files = [Path(tmp) / name for name in ("00000000000000000000.log", "framing.log", "kafka-python.log")]
        for run in range(runs):
            log_dir = Path(tmp) / f"log-{run}"
            for k, seconds in enumerate(encode_run(n, batch, group, values, files, log_dir)):
                enc[k].append(seconds)
            contents = [f.read_bytes() for f in files]
            if not contents[0] == contents[1] == contents[2]:
                raise SystemExit("zk2kraft and kafka-python wrote different bytes for the same records")
            del contents
            for k, seconds in enumerate(decode_run(files[0], n, group, batch, log_dir)):
                dec[k].append(seconds)
        size = files[0].stat().st_size

    def rates(samples: list[list[list[float]]], which: int) -> list[float]:
        return [n / statistics.median(s[which] for s in per_impl) for per_impl in samples]

    print(
        f"load average (1 min) {load_before:.1f} before, {os.getloadavg()[0]:.1f} after; {os.cpu_count()} cores"
    )
    print(
        f"{n:,} PartitionRecord v0 in batches of {batch}, {size / n:.1f} bytes/record on disk, median of {runs}"
    )
    print(
        f"record codec: {'native packer and unpacker (migrator/kraft/_speedups.c)' if NATIVE_PACK_RECORDS else 'pure Python'}"
    )
    print(f"{'records/s':30}{'wall':>12}{'CPU':>12}")
    for title, samples in (("encode+append", enc), ("read+decode", dec)):
        print(title)
        for name, wall, cpu in zip(NAMES, rates(samples, 0), rates(samples, 1), strict=True):
            print(f"  {name:28}{wall:12,.0f}{cpu:12,.0f}")
    print("ratios zk2kraft / kafka-python (wall, CPU)")
    for title, samples in (("encode+append", enc), ("read+decode", dec)):
        wall, cpu = rates(samples, 0), rates(samples, 1)
        print(
            f"  {title + ':':15} full {wall[0] / wall[2]:.2f}x, {cpu[0] / cpu[2]:.2f}x;"
            f"  framing {wall[1] / wall[2]:.2f}x, {cpu[1] / cpu[2]:.2f}x;"
            f"  MetadataLog {wall[3] / wall[2]:.2f}x, {cpu[3] / cpu[2]:.2f}x"
        )


if __name__ == "__main__":
    main()
