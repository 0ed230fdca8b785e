"""The audit without Spark: normalised rows, the inputs' loaders and light scan, the driver's checks."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from migrator.errors import BadInputError, UnreachableError
from migrator.kraft.batch import CorruptLogError
from migrator.kraft.image import records_from_image, replay
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import kafka_to_uuid, record
from migrator.kraft.snapshot import write_snapshot
from migrator.model import ClusterImage, ConfigEntity, Partition, ScramCredential, Topic
from migrator.zk.export import read_identity, write_parquet
from migrator.zk.snapshot_file import NoSnapshotError
from migrator.zk.tree import ZkTree, ZNode
from spark_audit import rows as R
from spark_audit.audit import AuditOptions, run_audit
from spark_audit.inputs import load_kraft, scan_log, subtree
from zk_fixtures.generator import ClusterSpec, generate

SPEC = ClusterSpec(topics=6, partitions=4, legacy_topics=0, reassignments=0, offline_partitions=0, tokens=2)


def _by_key(image: ClusterImage, side: str) -> dict[tuple[str, str], dict]:
    return {(r["kind"], r["key"]): r for r in R.image_rows(image, side)}


def _migrated(image: ClusterImage) -> ClusterImage:
    """What the log's replay of a copy of `image` holds."""
    recs = list(records_from_image(image))
    return replay((i, r) for i, r in enumerate(recs)).image


def test_every_kind_has_rows_with_unique_keys() -> None:
    generated = generate(SPEC)
    rows = R.image_rows(generated.image, "zookeeper")
    kinds = {r["kind"] for r in rows}
    assert kinds == set(R.KINDS) - {"other_config"}
    keys = [(r["kind"], r["key"]) for r in rows]
    assert len(keys) == len(set(keys))
    assert sum(r["kind"] == "partition" for r in rows) == generated.image.partition_count()


def test_zookeeper_rows_equal_the_rows_of_its_migrated_image() -> None:
    """Both sides go through the model: a copy's replay gives the same fields, kind by kind."""
    image = generate(SPEC).image
    zk, kraft = _by_key(image, "zookeeper"), _by_key(_migrated(image), "kraft")
    pending = set(image.pending_deletions)
    for (kind, key), row in zk.items():
        if kind == "broker":
            continue  # registrations are not migrated
        if row["note"] == "pending-deletion":
            assert (kind, key) not in kraft
            assert key.rsplit("-", 1)[0] in pending or key in pending
            continue
        assert (kind, key) in kraft, (kind, key)
        assert kraft[(kind, key)]["fields"] == row["fields"], (kind, key)
        # tolerated fields the log has are equal too (controller_epoch exists in ZooKeeper only)
        for name, value in kraft[(kind, key)]["info"].items():
            assert row["info"].get(name) == value, (kind, key, name)
    assert {k for k in kraft if k[0] != "broker"} <= set(zk)


def test_partition_fields_and_tolerated_fields() -> None:
    p = Partition(
        partition=3,
        replicas=[1, 2, 3],
        isr=[2, 1],
        leader=2,
        leader_epoch=7,
        partition_epoch=4,
        controller_epoch=9,
    )
    image = ClusterImage(
        topics={"t.x": Topic(name="t.x", topic_id="AAAAAAAAAAAAAAAAAAAAAQ", partitions={3: p})}
    )
    row = _by_key(image, "zookeeper")[("partition", "t.x-3")]
    assert row["fields"] == {
        "adding_replicas": [],
        "isr": [2, 1],
        "leader": 2,
        "leader_epoch": 7,
        "leader_recovery_state": 0,
        "removing_replicas": [],
        "replicas": [1, 2, 3],
    }
    assert row["info"] == {"partition_epoch": 4} and row["extra"] == {"controller_epoch": 9}
    # the text is canonical JSON (sorted keys, no spaces): Spark compares rows by it
    batch = next(R.image_batches(image, side="zookeeper"))
    text = batch.column("fields")[1].as_py()
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    kraft = next(R.image_batches(_migrated(image), side="kraft"))
    assert kraft.column("fields")[1].as_py() == text and kraft.column("extra")[1].as_py() is None


def test_secrets_never_enter_a_row() -> None:
    generated = generate(SPEC)
    image = generated.image
    image.configs[("BROKER", "1")] = ConfigEntity(
        resource_type="BROKER",
        name="1",
        configs={
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": "s3cr3t-jaas",
            "ssl.key.password": "hunter2",
        },
    )
    text = json.dumps(R.image_rows(image, "zookeeper"))
    for secret in [*generated.secrets.strings(image), "s3cr3t-jaas", "hunter2"]:
        assert secret not in text
    row = _by_key(image, "zookeeper")[("broker_config", "1")]
    assert row["fields"]["ssl.key.password"].startswith("redacted sha256:")
    # a changed secret still shows as a difference
    other = ClusterImage(
        configs={
            ("BROKER", "1"): ConfigEntity(
                resource_type="BROKER", name="1", configs={"ssl.key.password": "hunter3"}
            )
        }
    )
    assert (
        _by_key(other, "zookeeper")[("broker_config", "1")]["fields"]["ssl.key.password"]
        != row["fields"]["ssl.key.password"]
    )


def test_scram_rows_are_a_salted_hash_that_tracks_every_part() -> None:
    base = ScramCredential(
        user="ü",
        mechanism="SCRAM-SHA-256",
        salt=b"s" * 16,
        stored_key=b"k" * 32,
        server_key=b"v" * 32,
        iterations=4096,
    )
    h = R.credential_hash(base)
    assert h.startswith("sha256:") and len(h) == 7 + 64
    for change in (
        {"salt": b"t" * 16},
        {"stored_key": b"x" * 32},
        {"server_key": b"y" * 32},
        {"iterations": 8192},
    ):
        assert R.credential_hash(base.model_copy(update=change)) != h
    image = ClusterImage(scram_credentials={("ü", "SCRAM-SHA-256"): base})
    assert ("scram_credential", "SCRAM-SHA-256:ü") in _by_key(image, "kraft")


def test_field_differences_name_each_field() -> None:
    assert R.field_differences('{"a":1,"b":[1,2],"c":"x"}', '{"a":1,"b":[2,1],"d":null}') == [
        ("b", "[1,2]", "[2,1]"),
        ("c", '"x"', None),
        ("d", None, "null"),
    ]
    assert R.field_differences('{"a":1}', '{"a":1.0}') == [("a", "1", "1.0")]
    assert R.field_differences(None, '{"a":1}') == [("a", None, "1")]


def test_slices_partition_the_rows_exactly() -> None:
    image = generate(SPEC).image
    full = {(r["kind"], r["key"]) for r in R.image_rows(image, "zookeeper")}
    seen: list[tuple[str, str]] = []
    for i in range(3):
        for batch in R.image_batches(image, side="zookeeper", slice_index=i, slices=3, batch_rows=7):
            seen += list(zip(batch.column("kind").to_pylist(), batch.column("key").to_pylist(), strict=True))
    assert len(seen) == len(set(seen)) and set(seen) == full


def test_notes_mark_what_may_be_missing_on_the_other_side() -> None:
    image = generate(SPEC).image
    image.configs[("TOPIC", "gone")] = ConfigEntity(resource_type="TOPIC", name="gone", configs={"a": "1"})
    image.configs[("CLIENT_METRICS", "m")] = ConfigEntity(
        resource_type="CLIENT_METRICS", name="m", configs={"a": "1"}
    )
    zk = _by_key(image, "zookeeper")
    assert zk[("topic_config", "gone")]["note"] == "orphan-config"
    assert zk[("topic", image.pending_deletions[0])]["note"] == "pending-deletion"
    assert all(r["note"] == "registration" for k, r in zk.items() if k[0] == "broker")
    assert _by_key(image, "kraft")[("other_config", "CLIENT_METRICS:m")]["note"] == "kraft-only"
    assert _by_key(image, "kraft")[("topic", image.pending_deletions[0])]["note"] is None


# --- the log: cut, transactions, light scan ----------------------------------------------------------


def _log(tmp_path: Path, image: ClusterImage) -> tuple[Path, int]:
    """A migrated log: bootstrap, the copy transaction; returns (dir, the copy's End offset)."""
    log_dir = tmp_path / "meta"
    with MetadataLog.open(log_dir, writable=True, cluster_id=image.cluster_id, node_id=3000) as log:
        log.append([record("ZkMigrationStateRecord", 0, ZkMigrationState=2)], 1)
        log.append([record("BeginTransactionRecord", 0, Name="ZK Migration")], 1)
        log.append(list(records_from_image(image)), 1, max_batch_records=5)
        _, end = log.append(
            [record("ZkMigrationStateRecord", 0, ZkMigrationState=1), record("EndTransactionRecord", 0)], 1
        )
    return log_dir, end


def test_scan_finds_the_copy_and_transactions(tmp_path: Path) -> None:
    image = generate(SPEC).image
    log_dir, copy_end = _log(tmp_path, image)
    scan = scan_log(log_dir)
    assert scan.copy_end_offset == copy_end and scan.migration_state == "MIGRATION"
    assert scan.cluster_id == image.cluster_id and scan.open_transaction is None
    topic = next(t for n, t in image.topics.items() if n not in image.pending_deletions)
    with MetadataLog.open(log_dir, writable=True) as log:
        log.append(
            [
                record("BeginTransactionRecord", 0, Name="x"),
                record("RemoveTopicRecord", 0, TopicId=kafka_to_uuid(topic.topic_id)),
            ],
            2,
        )
        log.append([record("AbortTransactionRecord", 0, Reason="test")], 2)
        log.append(
            [
                record("BeginTransactionRecord", 0, Name="open"),
                record("ZkMigrationStateRecord", 0, ZkMigrationState=3),
            ],
            2,
        )
    scan = scan_log(log_dir)
    assert scan.migration_state == "MIGRATION"  # the POST_MIGRATION is in an open transaction
    assert scan.open_transaction is not None and scan.open_transaction["name"] == "open"
    result, identity = load_kraft(log_dir)
    assert topic.name in result.image.topics  # the aborted removal never applied
    assert identity["open_transaction"]["name"] == "open"
    # the image at the copy's end, and a cut inside the copy transaction (nothing of it applies)
    at_copy, _ = load_kraft(log_dir, copy_end)
    assert at_copy.image.partition_count() == result.image.partition_count()
    inside, ident = load_kraft(log_dir, copy_end - 3)
    assert not inside.image.topics and ident["open_transaction"]["name"] == "ZK Migration"
    with pytest.raises(BadInputError, match="past the log's end"):
        load_kraft(log_dir, 10_000)


def test_kraft_snapshot_file_and_snapshot_before_the_cut(tmp_path: Path) -> None:
    image = generate(SPEC).image
    log_dir, copy_end = _log(tmp_path, image)
    with MetadataLog.open(log_dir, writable=True) as log:
        snap_path = write_snapshot(log, load_kraft(log_dir)[0])
    result, identity = load_kraft(snap_path)
    assert identity["source"] == "kraft-snapshot"
    assert result.image.partition_count() == load_kraft(log_dir)[0].image.partition_count()
    scan = scan_log(snap_path)
    assert scan.snapshot_file and scan.copy_in_snapshot and scan.migration_state == "MIGRATION"


def test_scan_names_a_corrupt_or_truncated_segment(tmp_path: Path) -> None:
    log_dir, _ = _log(tmp_path, generate(SPEC).image)
    segment = next((log_dir / "__cluster_metadata-0").glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[200] ^= 0x40
    segment.write_bytes(bytes(data))
    with pytest.raises(CorruptLogError, match=r"\.log.*(CRC|byte)"):
        scan_log(log_dir)
    segment.write_bytes(bytes(data[:150]))  # a torn tail is not damage: the log ends earlier
    assert scan_log(log_dir).end_offset < 10
    with pytest.raises(UnreachableError, match="no such"):
        scan_log(tmp_path / "nothing")


def test_subtree_reroots_a_chroot() -> None:
    tree = ZkTree()
    for path in ("/", "/k", "/k/brokers", "/k/brokers/ids", "/other"):
        tree.add(ZNode(path, b""))
    tree.children.update({"/": ["k", "other"], "/k": ["brokers"], "/k/brokers": ["ids"]})
    sub = subtree(tree, "/k")
    assert set(sub.nodes) == {"/", "/brokers", "/brokers/ids"}
    assert sub.child_names("/") == ["brokers"] and sub.nodes["/brokers"].path == "/k/brokers"
    with pytest.raises(BadInputError, match="chroot /nope"):
        subtree(tree, "/nope")


# --- exports and the driver's checks (no Spark is started for bad input) ------------------------------


def test_export_identity_round_trip_and_unreadable_files(tmp_path: Path) -> None:
    out = tmp_path / "zk.parquet"
    image = generate(SPEC).image
    batches = [R.input_batch("zookeeper", {"zxid": 5}), *R.image_batches(image, side="zookeeper")]
    rows = write_parquet(out, R.SCHEMA, batches, {"zxid": 5, "control": {}})
    assert read_identity(out, R.SCHEMA)["zxid"] == 5 and rows == pq.read_metadata(out).num_rows
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(BadInputError, match="not a readable Parquet file"):
        read_identity(tmp_path / "junk.parquet")
    pq.write_table(pa.table({"a": [1]}), tmp_path / "foreign.parquet")
    with pytest.raises(BadInputError, match="not a zk2kraft export"):
        read_identity(tmp_path / "foreign.parquet")
    with pytest.raises(BadInputError, match="is a directory"):
        write_parquet(tmp_path, R.SCHEMA, [], {})


def test_bad_input_is_refused_before_spark(tmp_path: Path) -> None:
    image = generate(SPEC).image
    log_dir, _ = _log(tmp_path, image)
    empty = tmp_path / "zkdata"
    (empty / "version-2").mkdir(parents=True)
    with pytest.raises(NoSnapshotError, match="no snapshot"):
        run_audit(AuditOptions(log_dir=str(log_dir), zk_snapshot=str(empty)))
    with pytest.raises(BadInputError, match="exactly one ZooKeeper input"):
        run_audit(AuditOptions(log_dir=str(log_dir)))
    export = tmp_path / "zk.parquet"
    write_parquet(
        export, R.SCHEMA, [R.input_batch("zookeeper", {})], {"cluster_id": "someone-else", "control": None}
    )
    with pytest.raises(BadInputError, match="not one migration"):
        run_audit(AuditOptions(log_dir=str(log_dir), zk_export=str(export)))
    write_parquet(
        export, R.SCHEMA, [R.input_batch("zookeeper", {})], {"cluster_id": image.cluster_id, "control": None}
    )
    # the log holds a committed copy but no finalize: finalized does not fit; dual-write needs /migration
    with pytest.raises(BadInputError, match="finalized does not fit the migration state DualWriteMetadata"):
        run_audit(AuditOptions(log_dir=str(log_dir), zk_export=str(export), phase="finalized"))
    with pytest.raises(BadInputError, match="no /migration offset"):
        run_audit(AuditOptions(log_dir=str(log_dir), zk_export=str(export)))
    fresh = tmp_path / "fresh"
    with MetadataLog.open(fresh, writable=True, cluster_id=image.cluster_id, node_id=1) as log:
        log.append([record("ZkMigrationStateRecord", 0, ZkMigrationState=2)], 1)
    with pytest.raises(BadInputError, match="nothing to audit: the migration state is MigrationIneligible"):
        run_audit(AuditOptions(log_dir=str(fresh), zk_export=str(export)))
    with pytest.raises(BadInputError, match="no committed copy"):
        run_audit(AuditOptions(log_dir=str(fresh), zk_export=str(export), phase="copy"))


def test_report_is_escaped_self_contained_and_names_the_inputs(tmp_path: Path) -> None:
    from spark_audit.report import write_report

    result = {
        "phase": "dual-write",
        "phase_source": "derived",
        "state": "DualWriteMetadata",
        "exit_code": 1,
        "verdict": "1 mismatches (partition 1)",
        "counts": [
            {"kind": "partition", "zookeeper": 2, "kraft": 2, "equal": 1, "tolerated": 0, "mismatched": 1,
             "missing_in_kraft": 0, "missing_in_zookeeper": 0, "info": 0, "mismatch": 1, "expected": 0}
        ],
        "differences": [
            {"kind": "partition", "key": "<script>-0", "status": "mismatched", "verdict": "mismatch", "reason": None,
             "fields": [{"name": "isr", "zookeeper": "[1]", "kraft": "[1,2]", "tolerated": False}],
             "zookeeper": {"isr": [1]}, "kraft": {"isr": [1, 2]}}
        ],
        "zookeeper": {"zxid": 255, "snapshot": "/d/version-2/snapshot.ff",
                      "control": {"migration": {"kraft_metadata_offset": 42}, "controller": {"broker_id": 3000, "kraft_controller_epoch": 5}}},
        "kraft": {"log_dir": "/k", "end_offset": 43, "cut_offset": 42},
        "warnings": ["a <b> warning"],
        "master": "local[2]",
        "seconds": 1.0,
    }  # fmt: skip
    out = tmp_path / "r.html"
    write_report(result, out)
    html = out.read_text(encoding="utf-8")
    assert "<script>" not in html and "&lt;script&gt;-0" in html and "a &lt;b&gt; warning" in html
    assert (
        "0xff (255)" in html and "/migration offset" in html and ">42<" in html and "3000 (epoch 5)" in html
    )
    assert "<svg" in html and "isr: [1] → [1,2]" in html
    assert "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") and "<link" not in html


def _count(kind: str, entities: int, mismatched: int = 0, info: int = 0) -> dict[str, int | str]:
    return {
        "kind": kind, "zookeeper": entities, "kraft": entities, "equal": entities - mismatched - info,
        "tolerated": info, "mismatched": mismatched, "missing_in_kraft": 0, "missing_in_zookeeper": 0,
        "info": info, "mismatch": mismatched, "expected": 0,
    }  # fmt: skip


def _result(counts: list[dict[str, int | str]]) -> dict[str, object]:
    return {
        "phase": "copy", "phase_source": "derived", "state": "DualWriteMetadata", "exit_code": 0,
        "verdict": "clean", "counts": counts, "differences": [],
        "zookeeper": {"consistent": True, "zxid": 1}, "kraft": {"segments": ["a.log", "b.log"]},
        "master": "local[1]", "seconds": 1.0,
    }  # fmt: skip


def test_report_of_a_clean_run_has_no_empty_bars_and_no_reprs() -> None:
    from spark_audit.report import render_report

    html = render_report(_result([_count(k, 10) for k in ("topic", "partition", "config", "acl")]))
    assert "No differences in any kind." in html and "0 / 0" not in html and "<rect" not in html
    assert "Each bar is" not in html  # no legend without bars (issue 31)
    assert ">yes<" in html and "True" not in html  # one consistent view: yes
    assert "a.log, b.log" in html and '["a.log"' not in html
    # one name per column: no "mismatched" beside "mismatches"
    assert "<th>mismatched</th>" not in html and "<th>mismatches</th>" not in html


def test_report_bars_are_scaled_to_each_kinds_entities() -> None:
    import re

    from spark_audit.report import render_report

    html = render_report(
        _result([_count("topic", 10_000, mismatched=1), _count("partition", 4, mismatched=4)])
    )
    widths = [
        int(w) for w in re.findall(r'<rect x="150" y="\d+" width="(\d+)" height="14" fill="#c0392b"', html)
    ]
    assert widths == [1, 420]  # one topic of 10,000 is a sliver; all four partitions fill the bar
    assert "1 differing, 0 informational of 10,000" in html
