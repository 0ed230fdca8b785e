"""The metadata log directory: layout, append/read across segments, recovery, damage, the writer lock."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from migrator.errors import EXIT_FENCED, BadInputError, FencedError, UnreachableError
from migrator.kraft import dirfiles
from migrator.kraft.batch import CorruptLogError, iter_batches
from migrator.kraft.log import METADATA_PARTITION, MetadataLog
from migrator.kraft.log_verify import verify_log
from migrator.kraft.records import decode_value, record

REPO = Path(__file__).resolve().parent.parent
CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
TID = uuid.UUID(int=42)


def partitions(n: int, start: int = 0) -> list:
    return [
        record(
            "PartitionRecord",
            0,
            PartitionId=i,
            TopicId=TID,
            Replicas=[1, 2, 3],
            Isr=[1, 2, 3],
            Leader=1,
            LeaderEpoch=0,
            PartitionEpoch=0,
        )
        for i in range(start, start + n)
    ]


def new_log(path: Path, **kw) -> MetadataLog:
    return MetadataLog.open(path, writable=True, cluster_id=CLUSTER, node_id=3000, **kw)


def tree_digest(root: Path) -> dict[str, str]:
    """Every file's hash, except the lock file a writable open stamps with its holder by design."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "zk2kraft.lock"
    }


def pdir(root: Path) -> Path:
    return root / METADATA_PARTITION


# -- layout ----------------------------------------------------------------------------------------


def test_fresh_directory_has_kafkas_layout(tmp_path):
    with new_log(tmp_path / "meta") as log:
        assert log.report.created and log.end_offset == 0
        first, last = log.append(
            [record("TopicRecord", 0, Name="t", TopicId=TID)], epoch=5, timestamp_ms=1700
        )
    # offset 0 is the LeaderChangeMessage a new epoch starts with
    assert (first, last) == (1, 1)
    root = tmp_path / "meta"
    meta = dirfiles.parse_properties((root / "meta.properties").read_text())
    assert meta["version"] == "1" and meta["cluster.id"] == CLUSTER and meta["node.id"] == "3000"
    assert len(meta["directory.id"]) == 22
    p = pdir(root)
    assert (p / "partition.metadata").read_text() == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"
    assert (p / "leader-epoch-checkpoint").read_text() == "0\n1\n5 0\n"
    quorum = json.loads((p / "quorum-state").read_text())
    assert quorum["leaderId"] == 3000 and quorum["leaderEpoch"] == 5 and quorum["data_version"] == 0
    assert not (p / "quorum-state.tmp").exists()
    assert sorted(x.name for x in p.iterdir() if x.name.startswith("0000")) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
    ]
    assert (p / "00000000000000000000.index").stat().st_size == 0


def test_meta_properties_v0_and_v1(tmp_path):
    v0 = tmp_path / "v0.properties"
    v0.write_text("#\n#Tue Nov 22 07:00:00 UTC 2022\nbroker.id=2\nversion=0\ncluster.id=abc\n")
    m = dirfiles.read_meta_properties(v0)
    assert (m.version, m.node_id, m.cluster_id) == (0, 2, "abc")
    v1 = tmp_path / "v1.properties"
    dirfiles.write_meta_properties(v1, dirfiles.MetaProperties(1, 3000, CLUSTER, "J8aAPcfLQt2bqs1JT_rMgQ"))
    m = dirfiles.read_meta_properties(v1)
    assert (m.version, m.node_id, m.cluster_id, m.directory_id) == (
        1,
        3000,
        CLUSTER,
        "J8aAPcfLQt2bqs1JT_rMgQ",
    )
    bad = tmp_path / "bad.properties"
    for text, msg in [
        ("version=1\nnode.id=1\n", "requires cluster.id"),
        ("version=1\ncluster.id=x\n", "requires node.id"),
        ("version=7\n", "unsupported meta.properties version 7"),
        ("node.id=1\n", "no version"),
        ("version=0\nbroker.id=one\n", "not an integer"),
    ]:
        bad.write_text(text)
        with pytest.raises(BadInputError, match=msg):
            dirfiles.read_meta_properties(bad)


def test_v0_directory_opens_and_is_kept(tmp_path):
    root = tmp_path / "zkbroker"
    root.mkdir()
    (root / "meta.properties").write_text("version=0\nbroker.id=2\ncluster.id=abc\n")
    with MetadataLog.open(root, writable=True) as log:
        assert log.meta is not None and log.meta.node_id == 2
        log.append([record("NoOpRecord", 0)], epoch=1)
    assert (root / "meta.properties").read_text() == "version=0\nbroker.id=2\ncluster.id=abc\n"
    with MetadataLog.open(root) as log:
        assert log.meta is not None and (log.meta.version, log.meta.cluster_id) == (0, "abc")
        assert [r.name for _, _, r in log.read()] == ["NoOpRecord"]


def test_wrong_cluster_or_unformatted_directory(tmp_path):
    new_log(tmp_path / "m").close()
    with pytest.raises(BadInputError, match="belongs to cluster"):
        MetadataLog.open(tmp_path / "m", writable=True, cluster_id="other", node_id=3000)
    with pytest.raises(BadInputError, match="belongs to node"):
        MetadataLog.open(tmp_path / "m", writable=True, node_id=1)
    with pytest.raises(BadInputError, match="not formatted"):
        MetadataLog.open(tmp_path / "empty", writable=True)
    with pytest.raises(UnreachableError, match="does not exist"):
        MetadataLog.open(tmp_path / "nowhere")
    (tmp_path / "plain").mkdir()
    with pytest.raises(BadInputError, match="not a KRaft metadata log directory"):
        MetadataLog.open(tmp_path / "plain")


# -- append / read ---------------------------------------------------------------------------------


def test_segments_roll_and_offsets_continue_across_reopen(tmp_path):
    root = tmp_path / "m"
    with new_log(root, segment_bytes=4096) as log:
        a = log.append(
            [record("TopicRecord", 0, Name="t", TopicId=TID), *partitions(60)], epoch=1, max_batch_records=10
        )
        b = log.append(partitions(40, 60), epoch=1, max_batch_records=7)
    assert a == (1, 61) and b == (62, 101)
    segs = sorted(p.name for p in pdir(root).glob("*.log"))
    assert len(segs) >= 3 and segs[0] == "00000000000000000000.log"
    bases = [int(s[:20]) for s in segs]
    for seg, base in zip(segs, bases, strict=True):
        size = (pdir(root) / seg).stat().st_size
        batches = list(iter_batches((pdir(root) / seg).read_bytes(), seg))
        assert batches[0].base_offset == base
        assert size <= 4096 or len(batches) == 1
        assert (pdir(root) / seg.replace(".log", ".index")).exists()
        assert (pdir(root) / seg.replace(".log", ".timeindex")).exists()
    with new_log(root, segment_bytes=4096) as log:
        assert log.end_offset == 102 and log.report.truncated_bytes == 0
        assert log.append([record("NoOpRecord", 0)], epoch=2) == (103, 103)  # 102 = LeaderChange of epoch 2
        assert log.leader_epochs == [(1, 0), (2, 102)]
        assert log.epoch_for_offset(101) == 1 and log.epoch_for_offset(103) == 2
    with MetadataLog.open(root) as log:
        got = list(log.read())
        assert [o for o, _, _ in got] == [*range(1, 102), 103]
        assert got[0][2].name == "TopicRecord" and got[-1][1] == 2
        assert [o for o, _, _ in log.read(from_offset=95)] == [*range(95, 102), 103]
        assert [r.fields["PartitionId"] for o, _, r in log.read(50) if o < 55] == [
            48,
            49,
            50,
            51,
            52,
        ]  # offset 2 is partition 0


def test_batches_respect_max_batch_records(tmp_path):
    with new_log(tmp_path / "m") as log:
        log.append(partitions(25), epoch=1, max_batch_records=10)
        sizes = [b.records_count for b in log.batches() if not b.is_control]
        assert sizes == [10, 10, 5]


def test_single_batch_append_refuses_records_one_batch_cannot_hold(tmp_path, monkeypatch):
    """An atomic request's records are one batch or nothing is written (the caller then wraps them in
    a metadata transaction): by record count and by bytes."""
    from migrator.kraft import log as log_module
    from migrator.kraft.log import SplitBatchError

    with new_log(tmp_path / "m") as log:
        first, last = log.append(partitions(10), epoch=1, max_batch_records=10, single_batch=True)
        assert last - first == 9
        end = log.end_offset
        with pytest.raises(SplitBatchError):
            log.append(partitions(11), epoch=1, max_batch_records=10, single_batch=True)
        monkeypatch.setattr(log_module, "MAX_BATCH_BYTES", 4096)
        big = [
            record("ConfigRecord", 0, ResourceType=2, ResourceName="t", Name=f"c{i}", Value="v" * 1000)
            for i in range(5)
        ]
        with pytest.raises(SplitBatchError):
            log.append(big, epoch=1, single_batch=True)
        assert log.end_offset == end
        assert [b.records_count for b in log.batches() if not b.is_control] == [10]


def test_batches_stay_under_the_byte_limit_and_a_record_too_big_goes_alone(tmp_path, monkeypatch):
    from migrator.kraft import log as log_module

    monkeypatch.setattr(log_module, "MAX_BATCH_BYTES", 4096)
    big = [
        record("ConfigRecord", 0, ResourceType=2, ResourceName="t", Name=f"c{i}", Value="v" * 1000)
        for i in range(9)
    ]
    huge = record("ConfigRecord", 0, ResourceType=2, ResourceName="t", Name="huge", Value="h" * 10000)
    with new_log(tmp_path / "m") as log:
        log.append([*big[:5], huge, *big[5:], *partitions(3)], epoch=1)
        batches = [b for b in log.batches() if not b.is_control]
        assert [b.records_count for b in batches] == [3, 2, 1, 3, 4]
        assert all(b.size <= 4096 for b in batches if b.records_count > 1)
        assert [b.base_offset for b in batches] == [1, 4, 6, 7, 10]
        assert [r for _, _, r in log.read()] == [*big[:5], huge, *big[5:], *partitions(3)]
    assert verify_log(tmp_path / "m").ok


def test_a_record_that_cannot_be_encoded_fails_the_append_before_anything_is_written(tmp_path):
    bad = record("PartitionRecord", 0, PartitionId=1, TopicId=TID)
    bad.fields["Leader"] = 1 << 40
    with new_log(tmp_path / "m") as log:
        log.append(partitions(3), epoch=1)
        before = tree_digest(tmp_path / "m")
        with pytest.raises(ValueError, match="cannot encode PartitionRecord"):
            log.append([*partitions(20000, 3), bad], epoch=2, max_batch_records=1000)
        assert tree_digest(tmp_path / "m") == before and log.end_offset == 4
        log.append(partitions(2, 3), epoch=2)
        assert log.end_offset == 7


def test_older_epoch_is_fenced(tmp_path):
    with new_log(tmp_path / "m") as log:
        log.append([record("NoOpRecord", 0)], epoch=7)
        with pytest.raises(FencedError, match="epoch 6.*epoch 7") as err:
            log.append([record("NoOpRecord", 0)], epoch=6)
        assert err.value.exit_code == EXIT_FENCED
        assert log.end_offset == 2


def test_read_only_open_rejects_append(tmp_path):
    new_log(tmp_path / "m").close()
    with MetadataLog.open(tmp_path / "m") as log, pytest.raises(BadInputError, match="read-only"):
        log.append([record("NoOpRecord", 0)], epoch=1)


def test_single_segment_and_partition_dir_open(tmp_path):
    root = tmp_path / "m"
    with new_log(root, segment_bytes=2048) as log:
        log.append(partitions(40), epoch=1, max_batch_records=5)
    second = sorted(pdir(root).glob("*.log"))[1]
    with MetadataLog.open(second) as log:
        offsets = [o for o, _, _ in log.read()]
        assert offsets[0] == int(second.name[:20]) and offsets == list(range(offsets[0], offsets[-1] + 1))
    with MetadataLog.open(pdir(root)) as log:
        assert log.end_offset == 41
    with pytest.raises(BadInputError, match="only be opened for reading"):
        MetadataLog.open(second, writable=True)


def test_kafka_python_parses_every_segment(tmp_path):
    from kafka.record.memory_records import MemoryRecords

    root = tmp_path / "m"
    recs = [record("TopicRecord", 0, Name="t", TopicId=TID), *partitions(120)]
    with new_log(root, segment_bytes=3000) as log:
        log.append(recs, epoch=3, max_batch_records=9)
    seen = []
    controls = 0
    for seg in sorted(pdir(root).glob("*.log")):
        mr = MemoryRecords(seg.read_bytes())
        while mr.has_next():
            batch = mr.next_batch()
            assert batch.validate_crc()
            assert batch.leader_epoch == 3
            if batch.is_control_batch:
                controls += 1
                continue
            for rec in batch:
                assert rec.key is None
                seen.append((rec.offset, decode_value(rec.value)))
    assert controls == 1
    assert [o for o, _ in seen] == list(range(1, 122))
    assert [r for _, r in seen] == recs


# -- recovery and damage ---------------------------------------------------------------------------


def _last_segment(root: Path) -> Path:
    return sorted(pdir(root).glob("*.log"))[-1]


def test_torn_tail_is_truncated_and_reported(tmp_path):
    root = tmp_path / "m"
    with new_log(root) as log:
        log.append(partitions(5), epoch=1)
        good_size = _last_segment(root).stat().st_size
        log.append(partitions(5, 5), epoch=1)
    seg = _last_segment(root)
    full = seg.read_bytes()
    seg.write_bytes(full[: good_size + (len(full) - good_size) // 2])  # the second append half written
    torn = seg.stat().st_size - good_size
    before = tree_digest(root)
    with MetadataLog.open(root) as ro:  # read-only: reported, nothing changed
        assert ro.report.truncated_bytes == torn and ro.report.truncated_at == good_size
        assert ro.end_offset == 6 and [o for o, _, _ in ro.read()] == [1, 2, 3, 4, 5]
    assert tree_digest(root) == before
    with new_log(root) as log:
        assert log.recovered_bytes == torn and log.report.truncated_file == str(seg)
        assert seg.stat().st_size == good_size
        assert log.append(partitions(1, 5), epoch=1) == (6, 6)
    assert verify_log(root).ok


@pytest.mark.parametrize("tail", [b"\x00" * 4096, b"\x00" * 7, bytes(range(256)) * 3])
def test_trailing_zeros_or_garbage_are_a_torn_tail(tmp_path, tail):
    root = tmp_path / "m"
    with new_log(root) as log:
        log.append(partitions(3), epoch=1)
    seg = _last_segment(root)
    size = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(tail)
    with new_log(root) as log:
        assert log.recovered_bytes == len(tail)
        assert seg.stat().st_size == size and log.end_offset == 4


def test_flipped_bit_in_middle_batch_is_never_skipped(tmp_path):
    root = tmp_path / "m"
    with new_log(root) as log:
        log.append(partitions(4), epoch=1)
        log.append(partitions(4, 4), epoch=1)
        log.append(partitions(4, 8), epoch=1)
    seg = _last_segment(root)
    batches = list(iter_batches(seg.read_bytes(), str(seg)))
    victim = batches[2]  # a data batch with valid batches after it
    data = bytearray(seg.read_bytes())
    data[victim.position + 70] ^= 0x10
    seg.write_bytes(bytes(data))
    before = tree_digest(root)
    for writable in (False, True):
        with pytest.raises(CorruptLogError) as err:
            MetadataLog.open(root, writable=writable)
        assert err.value.file == str(seg) and err.value.offset == victim.position
        assert "CRC mismatch" in str(err.value) and f"byte {victim.position}" in str(err.value)
        assert str(seg) in str(err.value)
    assert tree_digest(root) == before
    report = verify_log(root)
    assert [(d.file, d.position, d.kind) for d in report.damage] == [(str(seg), victim.position, "batch")]


def test_flipped_length_bit_in_middle_batch_is_not_a_torn_tail(tmp_path):
    root = tmp_path / "m"
    with new_log(root) as log:
        for i in range(3):
            log.append(partitions(4, 4 * i), epoch=1)
    seg = _last_segment(root)
    victim = list(iter_batches(seg.read_bytes()))[1]
    data = bytearray(seg.read_bytes())
    data[victim.position + 9] ^= 0x40  # batchLength now runs past the end of the file
    seg.write_bytes(bytes(data))
    before = tree_digest(root)
    with pytest.raises(CorruptLogError, match=f"byte {victim.position}.*a valid batch follows"):
        new_log(root)
    assert tree_digest(root) == before


def test_damage_in_an_older_segment_surfaces_on_read(tmp_path):
    root = tmp_path / "m"
    with new_log(root, segment_bytes=1500) as log:
        log.append(partitions(30), epoch=1, max_batch_records=4)
    first = sorted(pdir(root).glob("*.log"))[0]
    data = bytearray(first.read_bytes())
    last_batch = list(iter_batches(bytes(data)))[-1]
    data[last_batch.position + 65] ^= 0x01  # the final batch of a sealed segment: not a torn tail
    first.write_bytes(bytes(data))
    with MetadataLog.open(root) as log:
        with pytest.raises(CorruptLogError, match=f"byte {last_batch.position}"):
            list(log.read())
    report = verify_log(root)
    assert [(d.file, d.position) for d in report.damage] == [(str(first), last_batch.position)]


def test_offsets_must_increase(tmp_path):
    root = tmp_path / "m"
    with new_log(root) as log:
        log.append(partitions(2), epoch=1)
    seg = _last_segment(root)
    data = seg.read_bytes()
    seg.write_bytes(data + data[-(len(data) - list(iter_batches(data))[-1].position) :])  # replay last batch
    with pytest.raises(CorruptLogError, match="offsets must increase"):
        MetadataLog.open(root)


def test_leader_epoch_checkpoint_rebuilt_when_missing(tmp_path):
    root = tmp_path / "m"
    with new_log(root) as log:
        log.append(partitions(2), epoch=1)
        log.append(partitions(2), epoch=4)
    (pdir(root) / "leader-epoch-checkpoint").unlink()
    with MetadataLog.open(root) as log:
        assert log.leader_epochs == [(1, 0), (4, 3)]
    assert not (pdir(root) / "leader-epoch-checkpoint").exists()
    with new_log(root) as log:
        assert log.leader_epochs == [(1, 0), (4, 3)]
    assert (pdir(root) / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n4 3\n"


# -- the writer lock -------------------------------------------------------------------------------

HOLDER = textwrap.dedent(
    """
    import sys
    from migrator.kraft.log import MetadataLog
    log = MetadataLog.open(sys.argv[1], writable=True, cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=3000)
    print("ready", flush=True)
    sys.stdin.readline()
    log.close()
    """
)

CONTENDER = textwrap.dedent(
    """
    import sys
    from migrator.errors import ZkKraftError
    from migrator.kraft.log import MetadataLog
    try:
        MetadataLog.open(sys.argv[1], writable=True)
    except ZkKraftError as e:
        print(e)
        sys.exit(e.exit_code)
    """
)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def test_second_writer_in_another_process_is_refused(tmp_path):
    root = tmp_path / "m"
    with new_log(root) as log:
        proc = subprocess.run(
            [sys.executable, "-c", CONTENDER, str(root), "--tag-for-cmdline"],
            capture_output=True,
            text=True,
            env=_env(),
            cwd=REPO,
            timeout=60,
        )
        assert proc.returncode == EXIT_FENCED, proc.stderr
        msg = proc.stdout.strip()
        assert f"pid {os.getpid()}" in msg and socket.gethostname() in msg
        assert "locked by another writer" in msg and "since 20" in msg
        assert "pytest" in msg or "python" in msg  # the holder's command line
        log.append([record("NoOpRecord", 0)], epoch=1)  # the holder is unaffected


def test_holder_in_another_process_is_named_and_released_on_death(tmp_path):
    root = tmp_path / "m"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=REPO,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(FencedError, match=f"pid {holder.pid} on {socket.gethostname()}") as err:
            MetadataLog.open(root, writable=True)
        assert "migrator.kraft.log" in str(err.value) or "python" in str(err.value)
        with MetadataLog.open(root) as reader:  # readers need no lock
            assert reader.end_offset == 0
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        with MetadataLog.open(root, writable=True) as log:  # the kernel dropped the dead holder's lock
            assert log.append([record("NoOpRecord", 0)], epoch=1) == (1, 1)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=30)


def test_lock_is_released_on_close_in_process(tmp_path):
    root = tmp_path / "m"
    new_log(root).close()
    with MetadataLog.open(root, writable=True) as log:
        assert log.writable


def test_temporaries_a_crash_left_are_removed_by_the_next_writer_only(tmp_path):
    """`atomic_write` crashed between write and rename leaves `<name>.tmp`; the next writer sweeps it."""
    log = MetadataLog.open(tmp_path, writable=True, cluster_id=CLUSTER, node_id=3000)
    log.close()
    part = tmp_path / METADATA_PARTITION
    left = [
        tmp_path / "meta.properties.tmp",
        part / "quorum-state.tmp",
        part / "leader-epoch-checkpoint.tmp",
    ]
    for p in left:
        p.write_bytes(b"half")
    MetadataLog.open(tmp_path).close()  # a reader changes nothing on disk
    assert all(p.exists() for p in left)
    MetadataLog.open(tmp_path, writable=True).close()
    assert not any(p.exists() for p in left)
    assert (tmp_path / "meta.properties").exists()


# -- the kept image ----------------------------------------------------------------------------------


def _topic(name: str) -> list:
    return [record("TopicRecord", 0, Name=name, TopicId=TID)]


def test_load_image_goes_on_from_the_last_one_and_equals_a_fresh_replay(tmp_path):
    """load_image keeps its last answer: unchanged when nothing was appended, continued (on a copy)
    after appends, dropped after a truncation; always what a fresh reader of the directory loads."""
    log = new_log(tmp_path)

    def fresh():
        reader = MetadataLog.open(tmp_path)
        try:
            return reader.load_image().result
        finally:
            reader.close()

    log.append(_topic("t"), 1)
    log.append(partitions(3), 1)
    first = log.load_image()
    assert log.load_image() is first and first.result == fresh()
    held = first.result.model_dump()
    log.append(partitions(2, start=3), 1)
    log.append([record("PartitionChangeRecord", 0, PartitionId=0, TopicId=TID, Leader=2)], 1)
    second = log.load_image()
    assert (
        second is not first
        and second.result == fresh()
        and len(second.result.image.topics["t"].partitions) == 5
    )
    assert first.result.model_dump() == held  # what was handed out did not move
    # An open transaction is not continued from: the next answer replays from the start.
    log.append([record("BeginTransactionRecord", 0, Name="x"), *partitions(1, start=5)], 1)
    assert log.load_image().result.open_transaction is not None
    log.append([record("EndTransactionRecord", 0)], 1)
    assert log.load_image().result == fresh() and 5 in log.load_image().result.image.topics["t"].partitions
    log.truncate_to(second.end_offset - 1)  # the leader change is cut off
    after = log.load_image()
    assert after.result == fresh() and after.result.image.topics["t"].partitions[0].leader == 1
    log.close()
