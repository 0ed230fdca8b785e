"""`zk2kraft log dump|verify|image|snapshot` through click's CliRunner and the installed console script."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.log_cmds import MASK, is_secret_config, log
from cli.main import run
from migrator.kraft.batch import iter_batches
from migrator.kraft.log import METADATA_PARTITION, MetadataLog
from migrator.kraft.records import record
from migrator.kraft.snapshot import list_snapshots

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / ".venv" / "bin" / "zk2kraft"
CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
TID = uuid.UUID(int=7)
SALT = b"very-secret-salt"


def records(close: bool = True) -> list:
    recs = [
        record("FeatureLevelRecord", 0, Name="metadata.version", FeatureLevel=21),
        record("ZkMigrationStateRecord", 0, ZkMigrationState=2),
        record("BeginTransactionRecord", 0, Name="ZK Migration"),
        record("TopicRecord", 0, Name="orders", TopicId=TID),
        record("ConfigRecord", 0, ResourceType=2, ResourceName="orders", Name="retention.ms", Value="1000"),
        *[
            record(
                "PartitionRecord",
                0,
                PartitionId=i,
                TopicId=TID,
                Replicas=[1, 2],
                Isr=[1, 2],
                Leader=1,
                LeaderEpoch=0,
                PartitionEpoch=0,
            )
            for i in range(3)
        ],
        record(
            "ConfigRecord", 0, ResourceType=4, ResourceName="1", Name="ssl.keystore.password", Value="hunter2"
        ),
        record(
            "ConfigRecord",
            0,
            ResourceType=4,
            ResourceName="",
            Name="listener.name.sasl_ssl.plain.sasl.jaas.config",
            Value="org.apache.kafka.common.security.plain.PlainLoginModule required password=topsecret;",
        ),
        record(
            "UserScramCredentialRecord",
            0,
            Name="alice",
            Mechanism=1,
            Salt=SALT,
            StoredKey=b"K" * 32,
            ServerKey=b"S" * 32,
            Iterations=8192,
        ),
        record("ZkMigrationStateRecord", 0, ZkMigrationState=1),
    ]
    if close:
        recs.append(record("EndTransactionRecord", 0))
    return recs


def make_log(root: Path, close: bool = True, **kw) -> Path:
    with MetadataLog.open(root, writable=True, cluster_id=CLUSTER, node_id=3000, **kw) as mlog:
        mlog.append(records(close), epoch=2, timestamp_ms=1_700_000_000_000, max_batch_records=4)
    return root


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(log, list(args), env=env, catch_exceptions=False)


def secrets_absent(text: str) -> None:
    for secret in (
        "hunter2",
        "topsecret",
        base64.b64encode(SALT).decode(),
        base64.b64encode(b"K" * 32).decode(),
    ):
        assert secret not in text


def test_secret_config_names():
    assert is_secret_config("ssl.keystore.password") and is_secret_config("sasl.jaas.config")
    assert is_secret_config("listener.name.x.scram-sha-256.sasl.jaas.config")
    assert is_secret_config("password.encoder.secret") and is_secret_config("ssl.keystore.key")
    assert not is_secret_config("retention.ms") and not is_secret_config("sasl.enabled.mechanisms")


def test_dump_lines_and_masking(tmp_path):
    root = make_log(tmp_path / "m")
    res = invoke("dump", "--log-dir", str(root))
    assert res.exit_code == 0
    lines = res.output.splitlines()
    assert lines[0].startswith("offset: 0 epoch: 2 type: LeaderChangeMessage (control)")
    assert lines[4].startswith("offset: 4 epoch: 2 type: TopicRecord v0 ")
    assert '"Name": "orders"' in lines[4] and '"TopicId": "AAAAAAAAAAAAAAAAAAAABw"' in lines[4]
    assert len(lines) == 1 + len(records())
    assert '"retention.ms", "Value": "1000"' in res.output  # ordinary configs are shown
    assert res.output.count(MASK) == 2 + 3  # two password configs, three SCRAM fields
    secrets_absent(res.output)


def test_dump_json_from_offset_limit_and_env(tmp_path):
    root = make_log(tmp_path / "m")
    res = invoke("dump", "--json", "--from-offset", "5", "--limit", "3", env={"ZK2KRAFT_LOG_DIR": str(root)})
    assert res.exit_code == 0
    rows = [json.loads(line) for line in res.output.splitlines()]
    assert [r["offset"] for r in rows] == [5, 6, 7]
    assert rows[0]["type"] == "ConfigRecord" and rows[0]["control"] is False and rows[0]["epoch"] == 2
    assert rows[1]["fields"]["PartitionId"] == 0
    every = [json.loads(line) for line in invoke("dump", "--json", "-l", str(root)).output.splitlines()]
    scram = next(r for r in every if r["type"] == "UserScramCredentialRecord")
    assert scram["fields"] == {
        "Name": "alice",
        "Mechanism": 1,
        "Salt": MASK,
        "StoredKey": MASK,
        "ServerKey": MASK,
        "Iterations": 8192,
    }


def test_dump_single_segment_and_snapshot_file(tmp_path):
    root = make_log(tmp_path / "m", segment_bytes=700)
    segs = sorted((root / METADATA_PARTITION).glob("*.log"))
    assert len(segs) >= 2
    res = invoke("dump", "--json", "-l", str(segs[1]))
    offsets = [json.loads(line)["offset"] for line in res.output.splitlines()]
    assert offsets[0] == int(segs[1].name[:20])
    assert invoke("snapshot", "-l", str(root)).exit_code == 0
    snap = list_snapshots(root / METADATA_PARTITION)[-1].path
    rows = [json.loads(line) for line in invoke("dump", "--json", "-l", str(snap)).output.splitlines()]
    assert (
        rows[0]["type"] == "SnapshotHeaderRecord"
        and rows[0]["fields"]["LastContainedLogTimestamp"] == 1_700_000_000_000
    )
    assert rows[1]["type"] == "FeatureLevelRecord" and rows[1]["offset"] == 1
    secrets_absent(json.dumps(rows))


def test_verify_clean_then_damaged(tmp_path):
    root = make_log(tmp_path / "m")
    res = invoke("verify", "-l", str(root))
    assert res.exit_code == 0 and res.output.splitlines()[-1] == "clean"
    seg = root / METADATA_PARTITION / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    victim = list(iter_batches(bytes(data)))[1]
    data[victim.position + 80] ^= 0x01
    seg.write_bytes(bytes(data))
    res = invoke("verify", "-l", str(root))
    assert res.exit_code == 1
    assert f"damage: {seg} at byte {victim.position} (batch): CRC mismatch" in res.output
    res = invoke("verify", "--json", "-l", str(root))
    assert res.exit_code == 1
    report = json.loads(res.output)
    assert report["ok"] is False
    assert [(d["file"], d["position"]) for d in report["damage"]] == [(str(seg), victim.position)]
    assert report["files"][0]["ok"] is False


def test_verify_reports_an_emptied_segment_as_missing_offsets(tmp_path):
    """An empty (truncated) segment before another one is a hole in the log, not "clean"."""
    root = tmp_path / "m"
    with MetadataLog.open(root, writable=True, cluster_id=CLUSTER, node_id=3000) as mlog:
        mlog.append(records(), epoch=2, timestamp_ms=1_700_000_000_000, max_batch_records=4)
        mlog.roll()
        mlog.append(records(), epoch=2, timestamp_ms=1_700_000_000_000, max_batch_records=4)
        second = mlog.end_offset - len(records())
    first = root / METADATA_PARTITION / "00000000000000000000.log"
    first.write_bytes(b"")
    res = invoke("verify", "-l", str(root))
    assert res.exit_code == 1, res.output
    assert f"offsets 0-{second - 1} are missing" in res.output


def test_verify_reports_torn_tail(tmp_path):
    root = make_log(tmp_path / "m")
    seg = root / METADATA_PARTITION / "00000000000000000000.log"
    size = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(b"\x00" * 100)
    report = json.loads(invoke("verify", "--json", "-l", str(root)).output)
    assert [(d["position"], d["kind"]) for d in report["damage"]] == [(size, "torn-tail")]
    assert seg.stat().st_size == size + 100  # verify never repairs


def test_image_summary(tmp_path):
    root = make_log(tmp_path / "m")
    res = invoke("image", "--json", "-l", str(root))
    assert res.exit_code == 0
    s = json.loads(res.output)
    assert s["migration_state"] == {"code": 1, "name": "MIGRATION", "offset": len(records()) - 1}
    assert s["end_offset"] == len(records()) + 1 and s["open_transaction"] is None
    assert (
        s["counts"]["topics"] == 1
        and s["counts"]["partitions"] == 3
        and s["counts"]["scram_credentials"] == 1
    )
    assert s["counts"]["broker_configs"] == 2 and s["counts"]["topic_configs"] == 1
    assert s["feature_levels"] == {"metadata.version": 21} and s["cluster_id"] == CLUSTER
    secrets_absent(res.output)
    text = invoke("image", "-l", str(root)).output
    assert "migration state: MIGRATION (1)" in text and "open transaction: none" in text


def test_image_reports_open_transaction(tmp_path):
    root = make_log(tmp_path / "m", close=False)
    s = json.loads(invoke("image", "--json", "-l", str(root)).output)
    assert s["open_transaction"] == {"name": "ZK Migration", "begin_offset": 3, "pending_records": 9}
    assert s["migration_state"]["name"] == "PRE_MIGRATION" and s["counts"]["topics"] == 0


def test_snapshot_command(tmp_path):
    root = make_log(tmp_path / "m")
    res = invoke("snapshot", "-l", str(root))
    path = Path(res.output.strip())
    assert (
        res.exit_code == 0 and path.name == f"{len(records()) + 1:020d}-{2:010d}.checkpoint" and path.exists()
    )
    again = json.loads(invoke("snapshot", "--json", "-l", str(root)).output)
    assert again == {"path": str(path), "end_offset": len(records()) + 1, "epoch": 2, "created": False}
    s = json.loads(invoke("image", "--json", "-l", str(root)).output)
    assert s["snapshot"] == str(path) and s["counts"]["partitions"] == 3


def test_snapshot_with_open_transaction_ends_at_its_begin(tmp_path):
    root = make_log(tmp_path / "m", close=False)
    info = json.loads(invoke("snapshot", "--json", "-l", str(root)).output)
    assert info["end_offset"] == 3 and info["created"] is True
    s = json.loads(invoke("image", "--json", "-l", str(root)).output)
    assert s["open_transaction"] == {"name": "ZK Migration", "begin_offset": 3, "pending_records": 9}
    with MetadataLog.open(root, writable=True) as mlog:
        mlog.append([record("EndTransactionRecord", 0)], epoch=2)
    s = json.loads(invoke("image", "--json", "-l", str(root)).output)
    assert s["open_transaction"] is None and s["counts"]["partitions"] == 3 and s["snapshot"] == info["path"]


def test_errors_are_one_line_with_exit_codes(tmp_path, capsys):
    assert run(["log", "image", "-l", str(tmp_path / "missing")]) == 3
    err = capsys.readouterr().err
    assert err.startswith("zk2kraft: error: log directory") and len(err.strip().splitlines()) == 1
    root = make_log(tmp_path / "m")
    with MetadataLog.open(root, writable=True):
        assert run(["log", "snapshot", "-l", str(root)]) == 4
    err = capsys.readouterr().err
    assert f"pid {os.getpid()}" in err and "Traceback" not in err
    (tmp_path / "plain").mkdir()
    assert run(["log", "dump", "-l", str(tmp_path / "plain")]) == 2


def test_console_script(tmp_path):
    if not SCRIPT.exists():
        pytest.skip("console script not installed")
    root = make_log(tmp_path / "m")
    env = {**os.environ, "ZK2KRAFT_LOG_DIR": str(root)}
    out = subprocess.run(
        [str(SCRIPT), "log", "dump", "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == len(records()) + 1
    secrets_absent(out.stdout)
    seg = root / METADATA_PARTITION / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    victim = list(iter_batches(bytes(data)))[1]
    data[victim.position + 70] ^= 0x02
    seg.write_bytes(bytes(data))
    out = subprocess.run([str(SCRIPT), "log", "verify"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 1 and f"at byte {victim.position}" in out.stdout
    out = subprocess.run([str(SCRIPT), "log", "image"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2
    assert (
        f"{seg}: corrupt record batch at byte {victim.position}" in out.stderr
        and "Traceback" not in out.stderr
    )
