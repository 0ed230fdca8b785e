"""The audit in Spark against a real ZooKeeper and a real migration, phase by phase.

One ZooKeeper server of this module's own (snapCount small, so it writes snapshots and rolls its
transaction logs while the cluster loads and migrates) holds a generated Kafka cluster under a
unicode chroot, with unicode znodes, ephemeral broker registrations, a large znode, a big topic and
znode ACLs. The driver migrates it; the tests then audit each phase from each kind of input (live,
snapshot data dir, export), inject drift of every kind on either side, and finalize. The tests run
in file order and share the migration; one SparkSession serves them all (tests/spark_session.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import spark_cluster
import spark_session
from kazoo.client import KazooClient
from kazoo.security import make_acl, make_digest_acl

from cli.main import run as cli_run
from migrator import commands
from migrator.errors import BadInputError
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import kafka_to_uuid, record
from migrator.model import Acl, ClusterImage, ConfigEntity, Partition, ScramCredential, Topic
from migrator.zk import codec
from migrator.zk import layout as L
from migrator.zk import paths as P
from migrator.zk.bulk_write import create_all
from migrator.zk.connection import close, connect
from migrator.zk.layout import image_from_tree, znodes_from_image
from migrator.zk.leadership import read_migration
from migrator.zk.reader import read_tree
from migrator.zk.snapshot_file import list_snapshots
from spark_audit.audit import AuditOptions, AuditResult, run_audit
from zk_fixtures.brokers import BrokerSessions
from zk_fixtures.generator import ClusterSpec, GeneratedCluster, generate
from zk_fixtures.server import ZkServer

pytestmark = [pytest.mark.zk, pytest.mark.spark]

CHROOT = "/clüster-ü"
SPEC = ClusterSpec(
    topics=8,
    partitions=3,
    legacy_topics=0,
    reassignments=0,
    offline_partitions=0,
    epoch_bumps=0,
    acls=10,
    pending_deletions=1,
    tokens=2,
)
BIG_TOPIC = "big-topic"
BIG_PARTITIONS = 600
UNICODE_GROUP = "grüppe-✓-日本"
UNICODE_USER = "jürgen"


@pytest.fixture(scope="module")
def spark() -> object:
    return spark_session.get()


@dataclass
class Migration:
    server: ZkServer
    connect: str
    data_dir: Path
    log_dir: Path
    before: Path  # `zk export` taken before the copy
    generated: GeneratedCluster
    client: KazooClient
    sessions: BrokerSessions | None
    work: Path
    notes: dict[str, object] = field(default_factory=dict)

    def audit(self, **kw: object) -> AuditResult:
        args: dict[str, object] = {"log_dir": str(self.log_dir), "master": spark_session.MASTER, "limit": 50}
        args.update(kw)
        return run_audit(AuditOptions(**args))  # type: ignore[arg-type]

    def snapshot_audit(self, **kw: object) -> AuditResult:
        return self.audit(zk_snapshot=str(self.data_dir), zk_chroot=CHROOT, **kw)


def _extras(image: ClusterImage) -> None:
    """Unicode names, a big topic, a large znode, a KRaft-style SCRAM user: what real clusters carry."""
    image.topics[BIG_TOPIC] = Topic(
        name=BIG_TOPIC,
        topic_id="Q2FmZVRvcGljQmlnMDAwMQ",
        partitions={
            p: Partition(partition=p, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1 + p % 3)
            for p in range(BIG_PARTITIONS)
        },
    )
    image.acls.append(
        Acl(
            resource_type="GROUP",
            resource_name=UNICODE_GROUP,
            pattern_type="LITERAL",
            principal=f"User:{UNICODE_USER}",
            host="*",
            operation="READ",
            permission_type="ALLOW",
        )
    )
    image.scram_credentials[(UNICODE_USER, "SCRAM-SHA-512")] = ScramCredential(
        user=UNICODE_USER,
        mechanism="SCRAM-SHA-512",
        salt=b"\x01" * 20,
        stored_key=b"\x02" * 64,
        server_key=b"\x03" * 64,
        iterations=8192,
    )
    pem = "-----BEGIN CERTIFICATE-----\n" + "QUJD" * 100_000 + "\n-----END CERTIFICATE-----"
    image.configs[("BROKER", "1")] = ConfigEntity(
        resource_type="BROKER", name="1", configs={"ssl.truststore.certificates": pem, "num.io.threads": "8"}
    )


@pytest.fixture(scope="module")
def migration(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Migration]:
    work = tmp_path_factory.mktemp("audit")
    server = ZkServer(work / "zk", snap_count=10).start()
    root = connect(server.connect_string)
    client = None
    sessions = None
    try:
        root.create(CHROOT)
        # not Kafka's, but in the snapshot: a unicode path with data nobody but its owner may read
        root.create("/notes")
        root.create("/notes/ünïcödé ✓", b"\xff" * 3000, acl=[make_digest_acl("owner", "pw", all=True)])
        connect_string = server.connect_string + CHROOT
        client = connect(connect_string)
        generated = generate(SPEC)
        _extras(generated.image)
        create_all(client, znodes_from_image(generated.image, generated.control))
        # Kafka's secure mode: world may read, only the admin may write
        secured = P.topic_path(sorted(generated.image.topics)[0])
        client.set_acls(
            secured, [make_acl("world", "anyone", read=True), make_digest_acl("admin", "pw", all=True)]
        )
        sessions = BrokerSessions(connect_string, generated.image, generated.control).start()
        before = work / "before-copy.parquet"
        exported = commands.zk_export(connect_string, str(before))
        assert exported.consistent and exported.partitions == generated.image.partition_count()
        log_dir = work / "kraft"
        commands.migrate(connect_string, str(log_dir), yes=True, brokers_from_zk=True)
        yield Migration(
            server=server,
            connect=connect_string,
            data_dir=work / "zk" / "data",
            log_dir=log_dir,
            before=before,
            generated=generated,
            client=client,
            sessions=sessions,
            work=work,
        )
    finally:
        if sessions is not None:
            sessions.close()
        if client is not None:
            close(client)
        close(root)
        server.stop()


def _named(result: AuditResult, verdict: str = "mismatch") -> set[tuple[str, str]]:
    return {(d["kind"], d["status"]) for d in result.differences if d["verdict"] == verdict}


def _counts(result: AuditResult) -> dict[str, object]:
    return {c.kind: c for c in result.counts}


# --- clean audits -------------------------------------------------------------------------------------


def test_server_wrote_snapshots_and_logs(migration: Migration) -> None:
    snaps = list_snapshots(migration.data_dir)
    assert len(snaps) >= 2, snaps
    assert any(p.name.startswith("log.") for p in (migration.data_dir / "version-2").iterdir())


def test_copy_phase_against_the_export_taken_before_the_copy(spark: object, migration: Migration) -> None:
    result = migration.audit(zk_export=str(migration.before), phase="copy")
    assert result.exit_code == 0 and result.mismatches == 0, result.differences[:5]
    counts = _counts(result)
    image = migration.generated.image
    assert counts["partition"].kraft == image.partition_count() - sum(
        len(image.topics[t].partitions) for t in image.pending_deletions
    )
    for kind in (
        "topic",
        "partition",
        "topic_config",
        "broker_config",
        "client_quota",
        "scram_credential",
        "acl",
        "producer_id_block",
        "delegation_token",
        "broker",
    ):
        assert counts[kind].zookeeper > 0, kind
    # the pending deletion is informational, as are the ZooKeeper-only broker registrations
    reasons = {(d["kind"], d["reason"]) for d in result.differences if d["verdict"] == "info"}
    assert ("topic", "the topic is queued in /admin/delete_topics: Kafka's migration skips it") in reasons
    assert any(kind == "broker" for kind, _ in reasons)
    assert result.kraft["cut_offset"] == result.log_scan["copy_end_offset"]
    assert result.zookeeper["source"] == "zk-export" and result.zookeeper["consistent"]


def test_dual_write_from_a_snapshot_is_the_derived_phase_and_clean(
    spark: object, migration: Migration
) -> None:
    result = migration.snapshot_audit()
    assert (result.phase, result.phase_source, result.state) == ("dual-write", "derived", "DualWriteMetadata")
    assert result.exit_code == 0, [d for d in result.differences if d["verdict"] == "mismatch"][:5]
    z = result.zookeeper
    assert z["source"] == "zk-snapshot" and z["replayed_txns"] > 0 and z["consistent"]
    assert z["chroot"] == CHROOT and Path(z["snapshot"]).parent == migration.data_dir / "version-2"
    # /migration covers the whole log, so the first read (the log's end) was the right image
    assert z["control"]["migration"]["kraft_metadata_offset"] == result.log_scan["last_record_offset"]
    assert result.kraft_reads == 1
    assert _counts(result)["partition"].equal == _counts(result)["partition"].kraft


def test_cli_dual_write_live_with_report(
    spark: object, migration: Migration, capsys: pytest.CaptureFixture[str]
) -> None:
    """`zk2kraft audit` in process (the session is shared): JSON on stdout, the HTML report on disk."""
    report = migration.work / "audit.html"
    argv = [
        "audit",
        "--zookeeper",
        migration.connect,
        "--log-dir",
        str(migration.log_dir),
        "--report",
        str(report),
    ]
    assert cli_run([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["phase"] == "dual-write" and result["phase_source"] == "derived"
    assert result["zookeeper"]["consistent"] and result["zookeeper"]["source"] == "zookeeper"
    html = report.read_text(encoding="utf-8")
    assert "<svg" in html and "consistent: ZooKeeper and the log agree" in html
    assert html.index("Each bar is") < html.index("<svg")  # the bars' legend, with the bars
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")  # no external assets
    assert f"{result['zookeeper']['zxid']:#x}" in html and str(result["kraft"]["end_offset"]) in html
    for secret in migration.generated.secrets.strings(migration.generated.image):
        assert secret not in html
    # `zk export` from the command line: the same rows, audited from the file
    export = migration.work / "now.parquet"
    assert cli_run(["zk", "export", "--zookeeper", migration.connect, "--out", str(export), "--json"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["consistent"] and exported["rows"] > exported["partitions"] > BIG_PARTITIONS
    assert cli_run(["audit", "--zk-export", str(export), "--log-dir", str(migration.log_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["zookeeper"]["source"] == "zk-export"
    # without --json: the summary table and the verdict, nothing of Spark
    assert cli_run(argv) == 0
    out, err = capsys.readouterr()
    assert "partitions" in out and "consistent: ZooKeeper and the log agree" in out and "info" in out
    assert err == ""


# --- drift ----------------------------------------------------------------------------------------------


def _zk_image(client: KazooClient) -> ClusterImage:
    return image_from_tree(read_tree(client)).image


def _topics_with_configs(image: ClusterImage) -> list[str]:
    pending = set(image.pending_deletions)
    return [
        n
        for n in sorted(image.topics)
        if ("TOPIC", n) in image.configs and n not in pending and n != BIG_TOPIC
    ]


def test_zookeeper_drift_of_every_kind_is_named(spark: object, migration: Migration) -> None:
    zk = migration.client
    image = _zk_image(zk)
    topics = _topics_with_configs(image)
    deleted, altered, with_config = topics[0], topics[1], topics[2]
    zk.delete(P.topic_path(deleted), recursive=True)
    zk.delete(P.config_entity_path(P.CONFIG_TYPE_TOPICS, deleted))
    t = image.topics[altered].model_copy(deep=True)
    t.topic_id = "QWx0ZXJlZFRvcGljSWQwMQ"
    zk.set(P.topic_path(altered), codec.encode_topic(t))
    p = image.topics[BIG_TOPIC].partitions[7].model_copy()
    p.leader, p.isr = p.replicas[-1], [p.replicas[-1]]
    path, data = L.partition_state_znode(BIG_TOPIC, p, 1)  # type: ignore[misc]
    zk.set(path, data)
    image.configs[("TOPIC", with_config)].configs["retention.ms"] = "1"
    zk.set(*L.config_znode(image, "TOPIC", with_config))  # type: ignore[arg-type]
    image.configs[("BROKER", "")].configs["max.connections"] = "7"
    zk.set(*L.config_znode(image, "BROKER", ""))  # type: ignore[arg-type]
    quota = next(q for q in image.client_quotas if set(q.entity) == {"client-id"})
    quota.values[next(iter(quota.values))] = 12345.0
    for path, data in L.client_config_znodes(image, P.quota_entity_path(quota.entity)).items():
        zk.set(path, data)
    cred = image.scram_credentials[(UNICODE_USER, "SCRAM-SHA-512")]
    cred.iterations = 4096
    for path, data in L.client_config_znodes(
        image, P.config_entity_path(P.CONFIG_TYPE_USERS, P.sanitize(UNICODE_USER))
    ).items():
        zk.set(path, data)
    acl = next(a for a in image.acls if a.resource_name == UNICODE_GROUP)
    image.acls.remove(acl)
    path, data = L.acl_znode(image, "LITERAL", "GROUP", UNICODE_GROUP)
    zk.delete(path) if data is None else zk.set(path, data)
    token = next(iter(image.delegation_tokens.values()))
    token.expiry_timestamp += 1000
    zk.set(*L.token_znode(image, token.token_id))  # type: ignore[arg-type]
    assert image.producer_id_block is not None
    image.producer_id_block.block_start += 1000
    image.producer_id_block.block_end += 1000
    zk.set(*L.producer_id_block_znode(image))  # type: ignore[arg-type]

    result = migration.audit(zookeeper=migration.connect, phase="dual-write")
    assert result.exit_code == 1
    named = _named(result)
    assert named == {
        ("topic", "missing_in_zookeeper"),
        ("partition", "missing_in_zookeeper"),
        ("topic_config", "missing_in_zookeeper"),
        ("topic", "mismatched"),
        ("partition", "mismatched"),
        ("topic_config", "mismatched"),
        ("broker_config", "mismatched"),
        ("client_quota", "mismatched"),
        ("scram_credential", "mismatched"),
        ("acl", "missing_in_zookeeper"),
        ("delegation_token", "mismatched"),
        ("producer_id_block", "mismatched"),
    }, named
    diffs = {(d["kind"], d["key"]): d for d in result.differences if d["verdict"] == "mismatch"}
    fields = {
        k: {f["name"]: (f["zookeeper"], f["kraft"]) for f in d["fields"] if not f["tolerated"]}
        for k, d in diffs.items()
    }
    assert set(fields[("partition", f"{BIG_TOPIC}-7")]) == {"isr", "leader"}
    assert fields[("topic_config", with_config)]["retention.ms"][0] == '"1"'
    assert fields[("broker_config", "<default>")]["max.connections"] == ('"7"', '"10000"')
    assert set(fields[("scram_credential", f"SCRAM-SHA-512:{UNICODE_USER}")]) == {"credential", "iterations"}
    assert set(fields[("producer_id_block", "latest")]) == {"next_producer_id"}
    assert ("topic", altered) in diffs and ("topic", deleted) in diffs
    assert _counts(result)["partition"].mismatch == 1 + len(image.topics[deleted].partitions)
    for secret in migration.generated.secrets.strings(migration.generated.image):
        assert secret not in result.model_dump_json()
    # the terminal says which side is which and what the reconcile below will do about each difference
    from rich.console import Console

    from cli.audit_cmd import render

    console = Console(record=True, width=400)
    render(result, console)
    text = console.export_text()
    assert "what differs (ZooKeeper → log)" in text and "reconcile would" in text
    assert "create it in ZooKeeper" in text and "rewrite ZooKeeper with the log's value" in text
    assert "reconciles ZooKeeper to it" in text
    # the syncer's full reconcile repairs ZooKeeper from the log: clean again
    commands.migrate(migration.connect, str(migration.log_dir), yes=True, brokers_from_zk=True)
    migration.notes["drift_topics"] = (deleted, altered, with_config)


def _append(log_dir: Path, records: list[object]) -> int:
    with MetadataLog.open(log_dir, writable=True) as log:
        _, last = log.append(records, max(log.latest_epoch, 1))  # type: ignore[arg-type]
    return last


def _set_migration_offset(zk: KazooClient, offset: int) -> None:
    m = read_migration(zk)
    assert m is not None
    m.kraft_metadata_offset = offset
    zk.set(P.MIGRATION, codec.encode_migration(m))


def test_log_drift_of_every_kind_is_named_and_records_after_migration_are_not(
    spark: object, migration: Migration
) -> None:
    """Records ZooKeeper claims to cover (/migration moved past them) but never got: a lost sync."""
    zk = migration.client
    with MetadataLog.open(migration.log_dir) as log:
        image = log.load_image().result.image
    topics = _topics_with_configs(image)
    removed, changed, configured = topics[0], topics[1], topics[2]
    quota = next(q for q in image.client_quotas if set(q.entity) == {"user"})
    cred = next(c for c in image.scram_credentials.values() if c.user != UNICODE_USER)
    acl = next(a for a in image.acls if a.resource_type == "TOPIC")
    token = next(iter(image.delegation_tokens.values()))
    assert image.producer_id_block is not None
    new_id = uuid.uuid4()
    drift = [
        record("RemoveTopicRecord", 0, TopicId=kafka_to_uuid(image.topics[removed].topic_id)),  # type: ignore[arg-type]
        record(
            "PartitionChangeRecord",
            0,
            PartitionId=0,
            TopicId=kafka_to_uuid(image.topics[changed].topic_id),  # type: ignore[arg-type]
            Isr=image.topics[changed].partitions[0].replicas[:1],
        ),
        record("ConfigRecord", 0, ResourceType=2, ResourceName=configured, Name="segment.ms", Value="60000"),
        record("ConfigRecord", 0, ResourceType=4, ResourceName="1", Name="num.io.threads", Value=None),
        record(
            "ClientQuotaRecord",
            0,
            Entity=[{"EntityType": "user", "EntityName": quota.entity["user"]}],
            Key="producer_byte_rate",
            Value=1.0,
            Remove=False,
        ),
        record(
            "UserScramCredentialRecord",
            0,
            Name=cred.user,
            Mechanism=1 if cred.mechanism == "SCRAM-SHA-256" else 2,
            Salt=b"\x09" * 16,
            StoredKey=cred.stored_key,
            ServerKey=cred.server_key,
            Iterations=cred.iterations,
        ),
        record("RemoveAccessControlEntryRecord", 0, Id=kafka_to_uuid(acl.acl_id)),  # type: ignore[arg-type]
        record(
            "DelegationTokenRecord",
            0,
            Owner=token.owner,
            Requester=token.requester,
            Renewers=token.renewers,
            IssueTimestamp=token.issue_timestamp,
            MaxTimestamp=token.max_timestamp,
            ExpirationTimestamp=token.expiry_timestamp + 5,
            TokenId=token.token_id,
        ),
        record(
            "ProducerIdsRecord",
            0,
            BrokerId=2,
            BrokerEpoch=-1,
            NextProducerId=image.producer_id_block.block_end + 5001,
        ),
        record("TopicRecord", 0, Name="kraft-only-topic", TopicId=new_id),
        record(
            "PartitionRecord",
            0,
            PartitionId=0,
            TopicId=new_id,
            Replicas=[1, 2],
            Isr=[1, 2],
            RemovingReplicas=[],
            AddingReplicas=[],
            Leader=1,
            LeaderRecoveryState=0,
            LeaderEpoch=0,
            PartitionEpoch=0,
        ),
    ]
    last = _append(migration.log_dir, drift)
    _set_migration_offset(zk, last)
    # and one more record that /migration does not cover yet: write-behind lag, not drift
    _append(
        migration.log_dir,
        [record("ConfigRecord", 0, ResourceType=2, ResourceName=BIG_TOPIC, Name="x.y", Value="1")],
    )

    result = migration.snapshot_audit()
    assert result.exit_code == 1 and result.phase == "dual-write"
    assert result.kraft_reads == 2 and result.kraft["cut_offset"] == last
    assert _named(result) == {
        ("topic", "missing_in_kraft"),
        ("partition", "missing_in_kraft"),
        ("topic_config", "missing_in_kraft"),
        ("partition", "mismatched"),
        ("topic_config", "mismatched"),
        ("broker_config", "mismatched"),
        ("client_quota", "mismatched"),
        ("scram_credential", "mismatched"),
        ("acl", "missing_in_kraft"),
        ("delegation_token", "mismatched"),
        ("producer_id_block", "mismatched"),
        ("topic", "missing_in_zookeeper"),
        ("partition", "missing_in_zookeeper"),
    }
    keys = {(d["kind"], d["key"]) for d in result.differences if d["verdict"] == "mismatch"}
    assert ("topic_config", BIG_TOPIC) not in keys  # after /migration: not compared
    assert {("topic", removed), ("topic", "kraft-only-topic"), ("partition", f"{changed}-0")} <= keys
    assert ("topic_config", configured) in keys and ("broker_config", "1") in keys


def test_finalized_summarises_expected_differences(spark: object, migration: Migration) -> None:
    commands.migrate(
        migration.connect, str(migration.log_dir), yes=True, brokers_from_zk=True
    )  # sync the lag
    assert migration.sessions is not None
    migration.sessions.close()  # brokers leave ZooKeeper: finalize requires it
    migration.sessions = None
    commands.finalize(migration.connect, str(migration.log_dir), yes=True, rehearsal=True)
    clean = migration.audit(zookeeper=migration.connect)
    assert (clean.phase, clean.state, clean.exit_code) == ("finalized", "MigrationFinalized", 0)
    assert clean.expected == 0, [d for d in clean.differences if d["verdict"] == "expected"][:3]
    with MetadataLog.open(migration.log_dir) as log:
        image = log.load_image().result.image
    name = _topics_with_configs(image)[0]
    _append(
        migration.log_dir,
        [record("RemoveTopicRecord", 0, TopicId=kafka_to_uuid(image.topics[name].topic_id))],  # type: ignore[arg-type]
    )
    after = migration.snapshot_audit()
    assert (after.phase, after.exit_code) == ("finalized", 0)
    assert after.expected >= 1 + len(image.topics[name].partitions) and after.mismatches == 0
    assert after.verdict.startswith("finalized:")
    with pytest.raises(BadInputError, match="dual-write does not fit the migration state MigrationFinalized"):
        migration.audit(zookeeper=migration.connect, phase="dual-write")


# --- bad input inside a Spark task -------------------------------------------------------------------


def test_snapshot_checksum_mismatch_is_one_line(spark: object, migration: Migration, tmp_path: Path) -> None:
    data = tmp_path / "zk"
    shutil.copytree(migration.data_dir, data)
    newest = list_snapshots(data)[0]
    for other in list_snapshots(data)[1:]:
        other.unlink()
    raw = bytearray(newest.read_bytes())
    raw[-10] ^= 0x01  # inside the last seal's checksum
    newest.write_bytes(bytes(raw))
    with pytest.raises(BadInputError) as info:
        migration.audit(zk_snapshot=str(data), zk_chroot=CHROOT, phase="finalized")
    message = str(info.value)
    assert "\n" not in message and newest.name in message and "checksum" in message.lower()
    assert "Traceback" not in message and "py4j" not in message.lower()


# --- the command line: one line and exit 2 for bad input, no Spark noise; spark-submit -----------------

ZK2KRAFT = [sys.executable, "-c", "from cli.main import entry; entry()"]
ROOT = Path(__file__).resolve().parent.parent


def _run(args: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}
    return subprocess.run(
        args, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout, stdin=subprocess.DEVNULL
    )


def _one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zk2kraft: error: "), proc.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    for noise in ("Traceback", "py4j", "at org.apache", "WARN", "Exception"):
        assert noise not in proc.stderr, proc.stderr[-2000:]
    assert proc.stdout == ""


@pytest.mark.slow  # a fresh process starts its own Spark
def test_cli_bad_input_inside_spark_is_one_line(migration: Migration, tmp_path: Path) -> None:
    data = tmp_path / "zk"
    shutil.copytree(migration.data_dir, data)
    newest = list_snapshots(data)[0]
    raw = bytearray(newest.read_bytes())
    del raw[len(raw) // 2 :]  # truncated, as a copy taken mid-write would be; it still ends in no seal
    raw += b"\x00\x00\x00\x01/"  # ...so make it pass ZooKeeper's quick completeness check
    newest.write_bytes(bytes(raw))
    proc = _run(
        [
            *ZK2KRAFT,
            "audit",
            "--zk-snapshot",
            str(data),
            "--zk-chroot",
            CHROOT,
            "--log-dir",
            str(migration.log_dir),
            "--master",
            "local[1]",
        ]
    )
    _one_line_error(proc, newest.name, "byte")


def test_cli_bad_input_before_spark_is_one_line(migration: Migration, tmp_path: Path) -> None:
    log = tmp_path / "kraft"
    shutil.copytree(migration.log_dir, log)
    # After finalize the log starts at the handover snapshot (issue 32) and its segment holds one small
    # batch; damage in the last batch reads as a torn tail (Kafka truncates it), so one more batch
    # follows and the damage lands inside the first one's CRC-covered bytes: damage mid-log.
    _append(log, [record("NoOpRecord", 0)])
    segment = sorted((log / "__cluster_metadata-0").glob("*.log"))[0]
    raw = bytearray(segment.read_bytes())
    first_batch = 12 + int.from_bytes(raw[8:12], "big")
    assert first_batch < len(raw), f"{segment.name} holds one batch only"
    raw[min(100, first_batch - 8)] ^= 0x20
    segment.write_bytes(bytes(raw))
    base = [*ZK2KRAFT, "audit", "--zk-export", str(migration.before), "--log-dir"]
    _one_line_error(_run([*base, str(log)]), segment.name, "byte")
    empty = tmp_path / "zkdata"
    (empty / "version-2").mkdir(parents=True)
    _one_line_error(
        _run([*ZK2KRAFT, "audit", "--zk-snapshot", str(empty), "--log-dir", str(migration.log_dir)]),
        "no snapshot",
    )
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"PAR1" + b"\x00" * 64)
    _one_line_error(
        _run([*ZK2KRAFT, "audit", "--zk-export", str(junk), "--log-dir", str(migration.log_dir)]),
        "junk.parquet",
    )
    wrong = _run([*base, str(migration.log_dir), "--phase", "dual-write"])
    _one_line_error(wrong, "MigrationFinalized")
    verbose = _run([*ZK2KRAFT, "-v", "audit", "--zk-export", str(junk), "--log-dir", str(migration.log_dir)])
    assert verbose.returncode == 2 and "Traceback" in verbose.stderr


@pytest.mark.slow  # spark-submit starts its own JVM
def test_spark_submit_runs_the_job_unchanged(migration: Migration, tmp_path: Path) -> None:
    spark_submit = Path(sys.executable).parent / "spark-submit"
    env_python = dict(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.run(
        [
            str(spark_submit),
            "--master",
            "local[1]",
            "--conf",
            "spark.ui.enabled=false",
            str(ROOT / "spark_audit" / "audit.py"),
            # The finalized phase: after finalize the copy lies inside the handover snapshot, which is
            # the log start (issue 32), so the copy phase can no longer be rebuilt from this log.
            "--zookeeper",
            migration.connect,
            "--log-dir",
            str(migration.log_dir),
            "--phase",
            "finalized",
            "--json",
        ],
        capture_output=True,
        text=True,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}, **env_python},
        cwd=tmp_path,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["phase"] == "finalized" and result["mismatches"] == 0 and result["master"] == "local[1]"


@pytest.mark.slow  # a fresh process starts its own Spark
def test_cli_verbose_audit_runs(migration: Migration) -> None:
    """`zk2kraft -v audit` (Spark's output on the terminal) crashed with KeyError 'stdout' (exit 70)."""
    proc = _run(
        [
            *ZK2KRAFT,
            "-v",
            "audit",
            "--zookeeper",
            migration.connect,
            "--log-dir",
            str(migration.log_dir),
            "--json",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["mismatches"] == 0
    assert "KeyError" not in proc.stderr and "internal error" not in proc.stderr


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[spark_cluster.Cluster]:
    """A master and two workers for the session (only this module uses one), stopped by pid."""
    cluster = spark_cluster.start(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.slow  # a fresh process starts its own Spark driver against the cluster
def test_cli_audits_on_a_standalone_cluster(
    spark: object, migration: Migration, standalone_cluster: spark_cluster.Cluster
) -> None:
    """`zk2kraft audit --spark-master spark://…`: a master and two 2 GiB workers started from pyspark's
    own launcher; the log's fold is spread over both executors and the verdict is the local one's."""
    proc = subprocess.run(
        [
            *ZK2KRAFT,
            "audit",
            "--spark-master",
            standalone_cluster.url,
            "--zk-snapshot",
            str(migration.data_dir),
            "--zk-chroot",
            CHROOT,
            "--log-dir",
            str(migration.log_dir),
            "--json",
        ],
        capture_output=True,
        text=True,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")},
            **standalone_cluster.env(),
        },
        cwd=ROOT,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.strip() == "", proc.stderr[-2000:]  # Spark's and pandas' noise stays off the terminal
    result = json.loads(proc.stdout)
    assert result["master"] == standalone_cluster.url and result["mismatches"] == 0
    kraft = result["kraft"]
    assert kraft["fold"] == "map-reduce" and kraft["map_tasks"] >= 2 and kraft["reducers"] >= 2
    local = migration.snapshot_audit()
    assert [c.model_dump() for c in local.counts] == result["counts"]
    assert kraft["partitions"] == local.kraft["partitions"] > 0
