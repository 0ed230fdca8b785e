"""The driver through the API (migrator.commands) against a real ZooKeeper: every state and guard."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import SPEC, assert_consistent, cluster, log_replay, zk_layout

from migrator import commands, results
from migrator.controller.managers.change import AdminChange
from migrator.errors import BadInputError, FencedError, FindingsError
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import record
from migrator.migration import driver
from migrator.migration.copy import MANIFEST_FILE
from migrator.model import MigrationZnode
from migrator.zk import codec
from migrator.zk.leadership import read_claim
from migrator.zk.reader import read_tree
from zk_fixtures.generator import ClusterSpec, load_cluster

pytestmark = pytest.mark.zk


def _migrate(zk_connect: str, log_dir: Path, **kw: object) -> results.MigrateResult:
    args: dict[str, object] = {"yes": True, "brokers_from_zk": True}
    args.update(kw)
    return commands.migrate(zk_connect, str(log_dir), **args)  # type: ignore[arg-type]


def _tree_state(zk: KazooClient) -> dict[str, tuple[bytes | None, int]]:
    tree = read_tree(zk, roots=["/"])
    return {p: (n.data, n.mzxid) for p, n in tree.nodes.items() if not p.startswith("/brokers/ids")}


def test_migrate_from_ineligible_to_dual_write(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect) as generated:
        result = _migrate(zk_connect, log_dir)
        assert (result.state_before, result.state_after) == ("MigrationIneligible", "DualWriteMetadata")
        assert result.kafka_code_after == "MIGRATION"
        assert result.claim is not None and result.claim.kraft_controller_id == driver.DEFAULT_NODE_ID
        # The claim's epoch is above ZooKeeper's before it, and /controller_epoch was bumped.
        assert result.claim.kraft_epoch > SPEC.controller_epoch
        claim = read_claim(zk)
        assert claim is not None and claim.kraft_epoch == result.claim.kraft_epoch
        m = result.manifest
        assert m is not None
        pending = set(generated.image.pending_deletions)
        assert m.topics == len(generated.image.topics) - len(pending)
        assert m.skipped_pending_deletions == sorted(pending)
        stored = json.loads((log_dir / MANIFEST_FILE).read_text())
        assert stored["records"] == m.records and stored["last_offset"] == m.last_offset
        # The first sync removed the pending deletion from ZooKeeper, and said so.
        assert any("pending deletion" in str(r) for r in result.repairs)
        assert result.lag == 0
        zk_image, log_image = assert_consistent(zk, log_dir)
        assert len(zk_image.topics) == m.topics
        # Running it again re-claims in a new epoch, reconciles (nothing to repair) and stays put.
        again = _migrate(zk_connect, log_dir)
        assert again.state_before == again.state_after == "DualWriteMetadata"
        assert again.claim is not None and again.claim.kraft_epoch > result.claim.kraft_epoch
        assert again.repairs == [] and again.manifest is None
        assert_consistent(zk, log_dir)


def test_migrate_refusals(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        with pytest.raises(BadInputError, match="--brokers-from-zk"):
            commands.migrate(zk_connect, str(log_dir), yes=True)
        with pytest.raises(driver.RefusedError, match=r"not confirmed .*\[guard confirmed\]"):
            commands.migrate(zk_connect, str(log_dir), brokers_from_zk=True)
        asked: list[str] = []
        with pytest.raises(driver.RefusedError, match="guard confirmed"):
            commands.migrate(
                zk_connect, str(log_dir), brokers_from_zk=True, confirm=lambda q: asked.append(q) is not None
            )
        assert asked and "Migrate cluster" in asked[0] and "ZooKeeper-mode controllers stop" in asked[0]
        assert not log_dir.exists()  # nothing written by a refused run
        assert zk.exists("/migration") is None and read_claim(zk) is None
        result = commands.migrate(zk_connect, str(log_dir), brokers_from_zk=True, confirm=lambda q: True)
        assert result.state_after == "DualWriteMetadata"


def test_blockers_refuse_the_start(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    spec = ClusterSpec(topics=4, partitions=2, legacy_topics=1, reassignments=0, offline_partitions=0)
    with cluster(zk, zk_connect, spec):
        with pytest.raises(driver.RefusedError, match="TOPIC_WITHOUT_ID") as info:
            _migrate(zk_connect, tmp_path / "meta")
        assert "[guard no-blockers]" in str(info.value)
    assert not (tmp_path / "meta").exists()


def test_no_brokers_is_a_blocker(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    load_cluster(zk, SPEC)  # no live registrations
    with pytest.raises(driver.RefusedError, match="NO_BROKERS"):
        _migrate(zk_connect, tmp_path / "meta")


def test_stale_migration_znode_without_log_is_removed_and_copy_is_fresh(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """Strimzi #11262: a /migration left by an earlier attempt never makes a new one skip the copy."""
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect) as generated:
        stale = MigrationZnode(
            kraft_controller_id=3000,
            kraft_controller_epoch=3,
            kraft_metadata_offset=52341,
            kraft_metadata_epoch=3,
        )
        zk.create("/migration", codec.encode_migration(stale))
        status = commands.status(zk_connect, str(log_dir))
        assert status.state == "MigrationIneligible"
        assert any("left from an earlier attempt" in a for a in status.anomalies)
        result = _migrate(zk_connect, log_dir)
        assert result.removed_stale_migration is not None
        assert result.removed_stale_migration["kraft_metadata_offset"] == 52341
        assert result.manifest is not None  # copied afresh
        zk_image, _ = assert_consistent(zk, log_dir)
        assert set(zk_image.topics) == set(generated.image.topics) - set(generated.image.pending_deletions)


def test_log_of_another_cluster_is_archived_not_used(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    with MetadataLog.open(log_dir, writable=True, cluster_id="AAAAAAAAAAAAAAAAAAAAAA", node_id=1) as log:
        log.append([record("NoOpRecord")], 1)
    with cluster(zk, zk_connect):
        status = commands.status(zk_connect, str(log_dir))
        assert status.state == "MigrationIneligible" and not status.log_exists
        assert any("belongs to cluster AAAAAAAAAAAAAAAAAAAAAA" in a for a in status.anomalies)
        result = _migrate(zk_connect, log_dir)
        assert result.archived_foreign_log is not None
        kept = Path(result.archived_foreign_log)
        assert kept.name.startswith("meta.foreign-") and (kept / "meta.properties").exists()
        assert_consistent(zk, log_dir)


def test_kraft_born_log_is_refused(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect) as generated:
        with MetadataLog.open(
            log_dir, writable=True, cluster_id=generated.image.cluster_id, node_id=3000
        ) as log:
            log.append([record("ZkMigrationStateRecord", 0, ZkMigrationState=0)], 1)
        assert commands.status(zk_connect, str(log_dir)).state == "None"
        with pytest.raises(driver.RefusedError, match="created in KRaft mode"):
            _migrate(zk_connect, log_dir)


def test_plan_writes_nothing(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect) as generated:
        before = _tree_state(zk)
        result = commands.plan(zk_connect, str(log_dir))
        assert _tree_state(zk) == before
        assert not log_dir.exists()
        p = result.plan
        assert p is not None and p.fresh_log
        assert p.by_type["TopicRecord"].records == len(generated.image.topics) - 1  # one pending deletion
        assert p.by_type["FeatureLevelRecord"].records == 1
        assert p.estimated_seconds > 0 and p.batches >= 4
        # The plan's bytes are exactly what the copy then writes (bootstrap, markers, LeaderChange).
        migrated = _migrate(zk_connect, log_dir)
        assert migrated.manifest is not None
        size = sum(f.stat().st_size for f in (log_dir / "__cluster_metadata-0").glob("*.log"))
        assert p.bytes == size
        # Past the copy there is nothing to plan.
        after = commands.plan(zk_connect, str(log_dir))
        assert after.plan is None and "DualWriteMetadata" in after.message


def test_status_reports_every_fact(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect) as generated:
        before = commands.status(zk_connect, str(log_dir))
        assert before.state == "MigrationIneligible" and before.state_code == 1
        assert before.controller_id == generated.control.controller.broker_id  # type: ignore[union-attr]
        assert not before.controller_is_kraft and before.zk_controller_epoch == SPEC.controller_epoch
        assert before.zk_registered_brokers == sorted(generated.image.brokers)
        assert "zk2kraft migrate" in before.next_action
        result = _migrate(zk_connect, log_dir)
        s = commands.status(zk_connect, str(log_dir))
        assert (s.state, s.kafka_state, s.kafka_code) == ("DualWriteMetadata", "MIGRATION", 1)
        assert s.controller_id == 3000 and s.controller_is_kraft
        assert result.claim is not None and s.kraft_epoch == result.claim.kraft_epoch
        assert s.zk_controller_epoch == result.claim.zk_controller_epoch
        assert (
            s.migration_znode is not None
            and s.migration_znode["kraft_metadata_offset"] == s.log_end_offset - 1
        )
        assert s.write_behind_lag == 0 and s.writer is None
        assert s.last_transition is not None and s.last_transition.kafka_state == "MIGRATION"
        assert result.manifest is not None and s.last_transition.offset == result.manifest.last_offset - 1
        assert s.last_transition.timestamp_ms and s.last_transition.time
        assert s.manifest is not None and s.manifest.records == result.manifest.records
        assert s.next_action.startswith("to finalize: (1) ") and "roll them to KRaft" in s.next_action


def test_finalize_guards_and_no_write_after(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect) as generated:
        _migrate(zk_connect, log_dir)
        with pytest.raises(FindingsError, match="brokers still registered in ZooKeeper mode: 1, 2, 3, 4"):
            commands.finalize(zk_connect, str(log_dir), yes=True, rehearsal=True)
    # Brokers gone (rolled to KRaft). Records in the log that ZooKeeper does not have yet: lag > 0.
    with MetadataLog.open(log_dir, writable=True) as log:
        tid = next(iter(generated.image.topics.values())).topic_id
        assert tid is not None
        log.append(
            [
                record(
                    "ConfigRecord", 0, ResourceType=4, ResourceName="", Name="log.cleaner.threads", Value="3"
                )
            ],
            log.latest_epoch,
        )
    with pytest.raises(
        FindingsError, match=r"1 committed records are not yet in ZooKeeper .*no-write-behind-lag"
    ):
        commands.finalize(zk_connect, str(log_dir), yes=True, rehearsal=True)
    _migrate(zk_connect, log_dir)  # syncs it
    with pytest.raises(FindingsError, match="guard confirmed"):
        commands.finalize(zk_connect, str(log_dir))
    done = commands.finalize(zk_connect, str(log_dir), yes=True, rehearsal=True)
    assert (done.state_before, done.state_after) == ("DualWriteMetadata", "MigrationFinalized")
    replay, _ = log_replay(log_dir)
    assert replay.migration_state == 3 and replay.migration_state_offset == done.offset
    # Nothing writes ZooKeeper any more.
    before = _tree_state(zk)
    again = _migrate(zk_connect, log_dir)
    assert again.state_after == "MigrationFinalized" and "nothing to do" in again.actions[0]
    with pytest.raises(
        FindingsError, match="only in DualWriteMetadata; the migration is in MigrationFinalized"
    ):
        commands.admin(zk_connect, str(log_dir), AdminChange(kind="create-topic", topic="late"))
    with pytest.raises(
        FindingsError, match="cannot rollback in state MigrationFinalized: the migration is finalized"
    ):
        commands.rollback(zk_connect, str(log_dir), yes=True)
    with pytest.raises(FindingsError, match="nothing to follow"):
        _migrate(zk_connect, log_dir, follow=True)
    assert _tree_state(zk) == before
    status = commands.status(zk_connect, str(log_dir))
    assert (
        status.state == "MigrationFinalized"
        and status.state_code == 4
        and status.kafka_state == "POST_MIGRATION"
    )


def test_syncer_refuses_after_post_migration(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    """A syncer made before finalize writes nothing once POST_MIGRATION is in the log."""
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        _migrate(zk_connect, log_dir)
    client = zk
    with MetadataLog.open(log_dir, writable=True) as log:
        facts = driver.gather(client, str(log_dir), log)
        claim, migration = driver._claim(client, log, facts, 3000, driver._covered(facts, log))
        syncer = driver._syncer(client, log, claim, migration, facts)
        log.append([record("ZkMigrationStateRecord", 0, ZkMigrationState=3)], claim.kraft_epoch)
        log.append(
            [record("ConfigRecord", 0, ResourceType=4, ResourceName="", Name="num.io.threads", Value="9")],
            claim.kraft_epoch,
        )
        before = _tree_state(zk)
        with pytest.raises(FindingsError, match="POST_MIGRATION at offset"):
            syncer.sync()
        assert _tree_state(zk) == before
        with pytest.raises(FindingsError, match="finalized"):
            driver._syncer(client, log, claim, migration, driver.gather(client, str(log_dir), log))


def test_admin_changes_direct(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect) as generated:
        with pytest.raises(
            FindingsError, match="only in DualWriteMetadata; the migration is in MigrationIneligible"
        ):
            commands.admin(zk_connect, str(log_dir), AdminChange(kind="create-topic", topic="early"))
        _migrate(zk_connect, log_dir)
        a = commands.admin(
            zk_connect,
            str(log_dir),
            AdminChange(
                kind="create-topic",
                topic="orders",
                partitions=6,
                replication_factor=3,
                configs={"retention.ms": "1000"},
            ),
        )
        assert (
            a.path == "direct"
            and "no controller is running" in a.via
            and a.records == 1 + 1 + 6
            and a.topic_id
        )
        zk_image, _ = assert_consistent(zk, log_dir)
        orders = zk_image.topics["orders"]
        assert orders.topic_id == a.topic_id and len(orders.partitions) == 6
        for p in orders.partitions.values():
            assert len(set(p.replicas)) == 3 and set(p.replicas) <= set(generated.image.brokers)
            assert p.leader == p.replicas[0] and p.isr == p.replicas
        assert zk_image.configs[("TOPIC", "orders")].configs == {"retention.ms": "1000"}
        changes = [
            AdminChange(kind="add-partitions", topic="orders", partitions=8),
            AdminChange(
                kind="alter-topic-config",
                topic="orders",
                configs={"cleanup.policy": "compact"},
                delete_configs=["retention.ms"],
            ),
            AdminChange(kind="alter-broker-config", broker="2", configs={"log.cleaner.threads": "2"}),
            AdminChange(kind="alter-broker-config", broker="", configs={"num.io.threads": "16"}),
            AdminChange(
                kind="set-quota",
                quota_entity={"user": "zed", "client-id": None},
                quota_values={"producer_byte_rate": 4096.0},
            ),
            AdminChange(kind="delete-topic", topic=sorted(zk_image.topics)[0]),
        ]
        for change in changes:
            commands.admin(zk_connect, str(log_dir), change)
        zk_image, log_image = assert_consistent(zk, log_dir)
        assert len(zk_image.topics["orders"].partitions) == 8
        assert zk_image.configs[("TOPIC", "orders")].configs == {"cleanup.policy": "compact"}
        assert zk_image.configs[("BROKER", "")].configs["num.io.threads"] == "16"
        assert any(q.entity == {"user": "zed", "client-id": None} for q in zk_image.client_quotas)
        # A refused change appends nothing.
        end = log_replay(log_dir)[1]
        with pytest.raises(BadInputError, match="can only be increased"):
            commands.admin(
                zk_connect, str(log_dir), AdminChange(kind="add-partitions", topic="orders", partitions=4)
            )
        dotted = next(n for n in zk_image.topics if "." in n)
        with pytest.raises(BadInputError, match="collides with existing topic"):
            commands.admin(
                zk_connect, str(log_dir), AdminChange(kind="create-topic", topic=dotted.replace(".", "_"))
            )
        with pytest.raises(BadInputError, match="only 4 broker\\(s\\) are registered"):
            commands.admin(
                zk_connect, str(log_dir), AdminChange(kind="create-topic", topic="wide", replication_factor=5)
            )
        assert log_replay(log_dir)[1] == end


def test_a_request_one_batch_cannot_hold_goes_in_as_one_transaction(
    zk: KazooClient, zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of 5 records: a 6-partition topic (7 records) is appended inside Begin/EndTransaction,
    still whole; a 3-partition one fits one batch and needs none."""
    from migrator.migration.steps import follow

    monkeypatch.setattr(follow, "DEFAULT_MAX_BATCH_RECORDS", 5)
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        _migrate(zk_connect, log_dir)
        for name, parts in (("wide", 6), ("narrow", 3)):
            commands.admin(
                zk_connect,
                str(log_dir),
                AdminChange(kind="create-topic", topic=name, partitions=parts, replication_factor=1),
            )
        with MetadataLog.open(log_dir) as log:
            names = [rec.name for _o, _e, rec in log.read()]
        assert names[-13:] == [
            "BeginTransactionRecord",
            "TopicRecord",
            *["PartitionRecord"] * 6,
            "EndTransactionRecord",
            "TopicRecord",  # the narrow one fits one batch: no transaction
            *["PartitionRecord"] * 3,
        ]
        zk_image, _ = assert_consistent(zk, log_dir)
        assert len(zk_image.topics["wide"].partitions) == 6


def test_rollback_from_dual_write_and_migrate_again(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        first = _migrate(zk_connect, log_dir)
        commands.admin(
            zk_connect, str(log_dir), AdminChange(kind="create-topic", topic="made-in-kraft", partitions=2)
        )
        with pytest.raises(FindingsError, match="guard confirmed"):
            commands.rollback(zk_connect, str(log_dir))
        r = commands.rollback(zk_connect, str(log_dir), yes=True)
        assert (r.state_before, r.state_after) == ("DualWriteMetadata", "MigrationIneligible")
        assert r.archived_log is not None and Path(r.archived_log).is_dir() and not log_dir.exists()
        assert r.removed == ["/controller", "/migration"]
        assert zk.exists("/controller") is None and zk.exists("/migration") is None
        epoch = int(zk.get("/controller_epoch")[0])
        assert epoch == r.zk_controller_epoch > r.kraft_epoch >= first.claim.kraft_epoch  # type: ignore[union-attr]
        # ZooKeeper holds what the (archived) log holds, as a ZK-mode cluster reads it.
        zk_image = zk_layout(zk).image
        archived, _ = log_replay(r.archived_log)
        assert "made-in-kraft" in zk_image.topics
        assert set(zk_image.topics) == set(archived.image.topics)
        # Partition states written during dual-write carry a KRaft epoch: all below /controller_epoch.
        assert (
            max(p.controller_epoch or 0 for t in zk_image.topics.values() for p in t.partitions.values())
            < epoch
        )
        assert commands.status(zk_connect, str(log_dir)).state == "MigrationIneligible"
        # Migrating again copies afresh (the topic created during dual-write included).
        again = _migrate(zk_connect, log_dir)
        assert again.manifest is not None and again.state_before == "MigrationIneligible"
        assert again.claim is not None and again.claim.kraft_epoch > epoch
        zk_image, _ = assert_consistent(zk, log_dir)
        assert "made-in-kraft" in zk_image.topics


def test_rollback_needs_a_migration(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    with cluster(zk, zk_connect):
        with pytest.raises(FindingsError, match="cannot rollback in state MigrationIneligible"):
            commands.rollback(zk_connect, str(tmp_path / "meta"), yes=True)


def test_second_writer_is_refused_naming_the_holder(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        _migrate(zk_connect, log_dir)
        with MetadataLog.open(log_dir, writable=True):
            with pytest.raises(FencedError, match=rf"locked by another writer: pid {os.getpid()} "):
                _migrate(zk_connect, log_dir)
            status = commands.status(zk_connect, str(log_dir))
            assert status.writer is not None and f"pid {os.getpid()}" in status.writer


# --- admin validation and placement, as Kafka does them (no ZooKeeper needed) ---------------------


def test_topic_names_are_validated_as_kafka_does() -> None:
    from migrator.controller.managers.rules import validate_topic_name

    for good in ("orders", "a.b_c-D9", "x" * 249):
        validate_topic_name(good)
    for bad, why in [
        ("", "can't be empty"),
        (".", 'cannot be "." or ".."'),
        ("..", 'cannot be "." or ".."'),
        ("x" * 250, "longer than 249"),
        ("a b", "character other than"),
        ("ä", "character other than"),
    ]:
        with pytest.raises(BadInputError, match=why):
            validate_topic_name(bad)


def test_scram_credential_is_kafkas_and_never_shows_secrets() -> None:
    import base64
    import hashlib
    import hmac

    from migrator.controller.managers.scram import scram_credential

    spec = scram_credential("alice", "SCRAM-SHA-512", "s3cr3t-pass", 4096)
    salt = base64.b64decode(spec.salt)
    assert salt.isalnum() and salt == salt.lower()  # ScramFormatter: base 36 digits of 130 random bits
    salted = hashlib.pbkdf2_hmac("sha512", b"s3cr3t-pass", salt, 4096)
    assert (
        base64.b64decode(spec.stored_key)
        == hashlib.sha512(hmac.new(salted, b"Client Key", "sha512").digest()).digest()
    )
    assert base64.b64decode(spec.server_key) == hmac.new(salted, b"Server Key", "sha512").digest()
    shown = repr(spec) + str(spec) + AdminChange(kind="upsert-scram", scram=spec).describe()
    for secret in (spec.salt, spec.stored_key, spec.server_key, "s3cr3t-pass"):
        assert secret not in shown
    with pytest.raises(BadInputError, match="too few iterations"):
        scram_credential("alice", "SCRAM-SHA-256", "pw", 1000)
    with pytest.raises(BadInputError, match="too many iterations"):
        scram_credential("alice", "SCRAM-SHA-256", "pw", 20000)


def test_changes_are_validated_against_the_image() -> None:
    from migrator.controller.managers.change import AclSpec, plan_change
    from zk_fixtures.generator import generate

    image = generate(ClusterSpec(topics=3, partitions=2, legacy_topics=0, pending_deletions=0)).image
    brokers = {b: None for b in image.brokers}
    topic = next(iter(image.topics))
    refusals = [
        (
            AdminChange(kind="create-topic", topic="t", configs={"retention.mss": "1"}),
            "unknown topic config name",
        ),
        (AdminChange(kind="create-topic", topic="t", configs={"retention.ms": "soon"}), "not a valid long"),
        (
            AdminChange(kind="create-topic", topic="t", configs={"cleanup.policy": "keep"}),
            "not one of delete, compact",
        ),
        (AdminChange(kind="delete-topic", topic="nope"), "does not exist"),
        (
            AdminChange(kind="alter-broker-config", broker="1", configs={"log.dirs": "/x"}),
            "cannot be updated dynamically",
        ),
        (
            AdminChange(kind="alter-broker-config", broker="99", configs={"a.b": "1"}),
            "broker 99 is not registered",
        ),
        (
            AdminChange(kind="set-quota", quota_entity={"ip": "1.2.3.4", "user": "u"}, quota_values={"x": 1}),
            "a quota entity is",
        ),
        (
            AdminChange(
                kind="set-quota", quota_entity={"ip": "nope"}, quota_values={"connection_creation_rate": 1}
            ),
            "not a valid IP",
        ),
        (
            AdminChange(
                kind="set-quota", quota_entity={"user": "u"}, quota_values={"connection_creation_rate": 1}
            ),
            "does not apply",
        ),
        (
            AdminChange(
                kind="set-quota", quota_entity={"user": "u"}, quota_values={"producer_byte_rate": 1.5}
            ),
            "whole number",
        ),
        (
            AdminChange(
                kind="add-acl",
                acl=AclSpec(resource_type="GROUP", resource_name="g", principal="User:a", operation="WRITE"),
            ),
            "GROUP only supports operations",
        ),
        (
            AdminChange(
                kind="add-acl",
                acl=AclSpec(resource_type="TOPIC", resource_name="t", principal="alice", operation="READ"),
            ),
            "TYPE:NAME",
        ),
        (
            AdminChange(
                kind="add-acl",
                acl=AclSpec(
                    resource_type="CLUSTER", resource_name="c", principal="User:a", operation="ALTER"
                ),
            ),
            "kafka-cluster",
        ),
    ]
    for change, why in refusals:
        with pytest.raises(BadInputError, match=why):
            plan_change(change, image, brokers)
    acl = AclSpec(resource_type="TOPIC", resource_name=topic, principal="User:new", operation="READ")
    planned = plan_change(AdminChange(kind="add-acl", acl=acl), image, brokers)
    assert [r.name for r in planned.records] == ["AccessControlEntryRecord"]
    assert plan_change(AdminChange(kind="remove-acl", acl=acl), image, brokers).noop
    existing = image.acls[0]
    same = AclSpec(
        **{k: getattr(existing, k) for k in AclSpec.model_fields if k != "permission_type"},
        permission_type=existing.permission_type,
    )
    assert plan_change(AdminChange(kind="add-acl", acl=same), image, brokers).noop
