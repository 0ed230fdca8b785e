"""The dual-write syncer against a real ZooKeeper holding a generated, copied Kafka cluster."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from migrator.errors import BadInputError, FencedError
from migrator.kraft.image import records_from_image
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import MetadataRecord, kafka_to_uuid, record
from migrator.migration.zk_diff import Repair, notification_for, same
from migrator.migration.zk_sync import ZkSyncer
from migrator.model import ClusterImage, MigrationZnode
from migrator.zk import acl_codec, admin_codec, codec, config_codec, credential_codec, layout
from migrator.zk import paths as P
from migrator.zk.fenced_writer import FencedZkWriter, ZkOp
from migrator.zk.leadership import Claim, claim_controller, read_migration, write_migration_unconditionally
from migrator.zk.reader import read_tree
from zk_fixtures.generator import ClusterSpec, GeneratedCluster, generate, load_cluster

pytestmark = pytest.mark.zk

SPEC = ClusterSpec(topics=8, partitions=3, legacy_topics=0, pending_deletions=1, acls=12, tokens=2)


@dataclass
class Migrated:
    zk: KazooClient
    generated: GeneratedCluster
    log: MetadataLog
    claim: Claim
    writer: FencedZkWriter
    syncer: ZkSyncer
    copy_end: int

    def append(self, *records: MetadataRecord) -> tuple[int, int]:
        return self.log.append(list(records), epoch=self.claim.kraft_epoch)

    def topic_id(self, name: str) -> uuid.UUID:
        assert self.syncer.image is not None
        tid = self.syncer.image.topics[name].topic_id
        assert tid is not None
        return kafka_to_uuid(tid)


def _copy(
    zk: KazooClient, log_dir: Path, controller_id: int = 3000
) -> tuple[MetadataLog, Claim, FencedZkWriter, int]:
    """The copy as the driver does it: ZooKeeper's image as one transaction, then /migration."""
    result = layout.image_from_tree(read_tree(zk))
    claim = claim_controller(zk, controller_id)
    log = MetadataLog.open(log_dir, writable=True, cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=controller_id)
    records = [
        record("BeginTransactionRecord", Name="ZK Migration"),
        *records_from_image(result.image),
        record("ZkMigrationStateRecord", ZkMigrationState=1),
        record("EndTransactionRecord"),
    ]
    _, last = log.append(records, epoch=claim.kraft_epoch)
    m = write_migration_unconditionally(
        zk,
        MigrationZnode(
            kraft_controller_id=controller_id,
            kraft_controller_epoch=claim.kraft_epoch,
            kraft_metadata_offset=last,
            kraft_metadata_epoch=claim.kraft_epoch,
        ),
        claim,
    )
    return log, claim, FencedZkWriter(zk, claim, m), last


@pytest.fixture
def migrated(zk: KazooClient, tmp_path: Path) -> Any:
    generated = load_cluster(zk, SPEC)
    log, claim, writer, last = _copy(zk, tmp_path / "meta")
    try:
        yield Migrated(zk, generated, log, claim, writer, ZkSyncer(zk, log, writer), last)
    finally:
        log.close()


def _normal(image: ClusterImage) -> dict[str, Any]:
    """What ZooKeeper and the log must agree on: not brokers, ZooKeeper-only or KRaft-only fields."""
    return {
        "topics": {
            name: (
                t.topic_id,
                {
                    pid: (
                        p.replicas,
                        p.isr,
                        p.leader,
                        p.leader_epoch,
                        p.leader_recovery_state,
                        p.adding_replicas,
                        p.removing_replicas,
                    )
                    for pid, p in t.partitions.items()
                },
            )
            for name, t in image.topics.items()
        },
        "configs": {k: v.configs for k, v in image.configs.items() if k[0] in ("TOPIC", "BROKER")},
        "quotas": sorted(
            (repr(sorted(q.entity.items(), key=str)), sorted(q.values.items())) for q in image.client_quotas
        ),
        "scram": {k: v.model_dump() for k, v in image.scram_credentials.items()},
        "acls": sorted(a.key() for a in image.acls),
        "pid": image.producer_id_block,
        "tokens": {k: v.model_dump(exclude={"json_version"}) for k, v in image.delegation_tokens.items()},
    }


def _zk_image(zk: KazooClient) -> ClusterImage:
    return layout.image_from_tree(read_tree(zk)).image


def _log_image(log: MetadataLog) -> ClusterImage:
    return log.load_image().result.image


def _changes(zk: KazooClient) -> list[str]:
    return [
        admin_codec.decode_config_change(c, zk.get(f"{P.CONFIG_CHANGES}/{c}")[0])
        for c in sorted(zk.get_children(P.CONFIG_CHANGES))
    ]


def _kinds(repairs: list[Repair]) -> set[tuple[str, str]]:
    return {(r.kind, r.entity) for r in repairs}


# ------------------------------------------------------------------------------------------------


def test_per_entity_layout_functions_match_znodes_from_image() -> None:
    g = generate(ClusterSpec())
    image = g.image
    full = layout.znodes_from_image(image, g.control)
    epoch = layout.partition_state_epoch(g.control)
    got: dict[str, bytes] = {}
    for name in image.topics:
        got.update(layout.topic_znodes(image, name, epoch))
        for p in image.topics[name].partitions.values():
            state = layout.partition_state_znode(name, p, epoch)
            if state is not None:
                assert full[state[0]] == state[1]
    for rtype, name in image.configs:
        found = layout.config_znode(image, rtype, name)
        if found is not None and found[1] is not None:
            got[found[0]] = found[1]
    roots = {"/".join(P.quota_entity_path(q.entity).split("/")[:4]) for q in image.client_quotas}
    roots |= {
        P.config_entity_path(P.CONFIG_TYPE_USERS, P.sanitize(c.user))
        for c in image.scram_credentials.values()
    }
    for root in roots:
        got.update(layout.client_config_znodes(image, root))
    for a in image.acls:
        path, data = layout.acl_znode(image, a.pattern_type, a.resource_type, a.resource_name)
        assert data is not None
        got[path] = data
    for token_id in image.delegation_tokens:
        path, data = layout.token_znode(image, token_id)
        assert data is not None
        got[path] = data
    path, data = layout.producer_id_block_znode(image)
    assert data is not None
    got[path] = data
    for path, data in got.items():
        assert full[path] == data, path
    from migrator.migration.zk_diff import owned

    assert sorted(p for p in full if owned(p) and p not in got and p.count("/") > 2) == [
        p for p in sorted(full) if p.startswith(P.DELETE_TOPICS + "/")
    ]


def test_first_reconcile_clears_pending_deletions_and_keeps_states(migrated: Migrated) -> None:
    zk = migrated.zk
    pending = zk.get_children(P.DELETE_TOPICS)
    assert len(pending) == 1
    state_versions = {
        P.partition_state_path(t, p): zk.exists(P.partition_state_path(t, p)).version
        for t in zk.get_children(P.TOPICS)
        if t not in pending
        for p in range(SPEC.partitions)
    }
    repairs = migrated.syncer.reconcile()
    assert _kinds(repairs) == {
        ("delete", f"topic {pending[0]}"),
        ("delete", f"pending deletion of topic {pending[0]}"),
    }
    assert zk.get_children(P.DELETE_TOPICS) == []
    assert zk.exists(P.topic_path(pending[0])) is None
    assert zk.exists(P.config_entity_path("topics", pending[0])) is None
    # ZooKeeper's controller wrote controller_epoch 5 into the states; KRaft would write 6. Only
    # leader, epoch, ISR and recovery state count, so no state was rewritten.
    assert {p: zk.exists(p).version for p in state_versions} == state_versions
    m = read_migration(zk)
    assert m is not None and m.kraft_metadata_offset == migrated.log.end_offset - 1
    assert migrated.syncer.lag() == 0
    assert _normal(_zk_image(zk)) == _normal(_log_image(migrated.log))
    assert migrated.syncer.last_reconcile_ms is not None and migrated.syncer.last_reconcile_ms > 0
    # A second reconcile finds nothing to repair and writes nothing.
    version = m.zk_version
    assert migrated.syncer.reconcile() == []
    assert read_migration(zk).zk_version == version  # type: ignore[union-attr]


def test_a_takeover_reconcile_brings_state_versions_up_to_the_partition_epoch(migrated: Migrated) -> None:
    """A syncer that did not write the last changes (a takeover, an older zk2kraft) still leaves each
    state znode's version equal to the log's PartitionEpoch, which a ZooKeeper controller reads back."""
    zk = migrated.zk
    migrated.syncer.reconcile()
    image = migrated.syncer.image
    assert image is not None
    name = sorted(image.topics)[0]
    state = P.partition_state_path(name, 0)
    version = zk.exists(state).version
    part = image.topics[name].partitions[0]
    assert part.partition_epoch == version  # the copy took the version as the epoch
    replicas = [*part.replicas, 99]
    tid = migrated.topic_id(name)
    migrated.append(
        record("PartitionChangeRecord", PartitionId=0, TopicId=tid, Replicas=replicas, AddingReplicas=[99]),
        record(
            "PartitionChangeRecord", PartitionId=0, TopicId=tid, Replicas=part.replicas, AddingReplicas=[]
        ),
    )
    before = zk.get(state)[0]
    repairs = ZkSyncer(zk, migrated.log, migrated.writer).reconcile()
    assert [(r.kind, r.entity, r.znodes) for r in repairs] == [("update", f"partition {name}-0", 1)]
    assert zk.get(state)[0] == before  # the same bytes, written twice
    assert zk.exists(state).version == version + 2
    # nothing left behind: a second takeover repairs nothing
    assert ZkSyncer(zk, migrated.log, migrated.writer).reconcile() == []


def test_state_versions_are_counted_when_the_first_sync_takes_the_tree(migrated: Migrated) -> None:
    """migrate's first sync hands its one read over (`take=True`) and the tree is emptied early: the
    versions must have been taken from it first, or coalesced changes leave them behind again."""
    zk = migrated.zk
    migrated.syncer.reconcile(None, read_tree(zk), take=True)
    image = migrated.syncer.image
    assert image is not None
    name = sorted(image.topics)[0]
    part = image.topics[name].partitions[0]
    epoch = part.partition_epoch
    state = P.partition_state_path(name, 0)
    other = next(b for b in part.isr if b != part.leader)
    tid = migrated.topic_id(name)
    migrated.append(
        record("PartitionChangeRecord", PartitionId=0, TopicId=tid, Leader=other),
        record("PartitionChangeRecord", PartitionId=0, TopicId=tid, Isr=[other]),
    )
    migrated.syncer.sync()
    synced = migrated.syncer.image
    assert synced is not None
    assert zk.exists(state).version == synced.topics[name].partitions[0].partition_epoch == epoch + 2


def test_reconcile_repairs_every_kind_of_drift(migrated: Migrated) -> None:
    zk = migrated.zk
    syncer = migrated.syncer
    syncer.reconcile()
    image = syncer.image
    assert image is not None
    topics = sorted(image.topics)
    gone, changed = topics[0], topics[1]
    # deleted topic
    zk.delete(P.topic_path(gone), recursive=True)
    # changed partition state
    state_path = P.partition_state_path(changed, 0)
    st = codec.decode_partition_state(state_path, zk.get(state_path)[0])
    zk.set(state_path, codec.encode_partition_state(-1, st.leader_epoch + 7, [], st.controller_epoch))
    # extra topic in ZooKeeper
    extra = image.topics[changed].model_copy(
        update={"name": "extra-topic", "topic_id": "AAAAAAAAAAAAAAAAAAAAAg"}
    )
    extra_znodes = layout.topic_znodes(ClusterImage(topics={"extra-topic": extra}), "extra-topic", 3)
    for path, data in extra_znodes.items():
        zk.create(path, data)
    # changed topic config
    config_topic = next(name for (rt, name) in image.configs if rt == "TOPIC" and name != gone)
    cpath = P.config_entity_path("topics", config_topic)
    zk.set(cpath, config_codec.encode_config({"retention.ms": "1"}))
    # removed ACL
    acl = image.acls[0]
    apath = P.acl_resource_path(acl.pattern_type, acl.resource_type, acl.resource_name)
    zk.delete(apath)
    # changed quota
    quota = next(q for q in image.client_quotas if set(q.entity) == {"client-id"} and q.entity["client-id"])
    qpath = P.quota_entity_path(quota.entity)
    zk.set(qpath, config_codec.encode_config({"producer_byte_rate": "1.0"}))
    # stale SCRAM
    cred = next(iter(image.scram_credentials.values()))
    upath = P.config_entity_path("users", P.sanitize(cred.user))
    config = config_codec.decode_config(upath, zk.get(upath)[0])
    stale = cred.model_copy(update={"iterations": cred.iterations + 1})
    config[cred.mechanism] = credential_codec.encode_scram(stale)
    zk.set(upath, config_codec.encode_config(config))
    # stale token
    token = next(iter(image.delegation_tokens.values()))
    tpath = P.token_path(token.token_id)
    zk.set(tpath, credential_codec.encode_delegation_token(token.model_copy(update={"expiry_timestamp": 1})))
    extra_token = token.model_copy(update={"token_id": "stale-token"})
    zk.create(P.token_path("stale-token"), credential_codec.encode_delegation_token(extra_token))
    # producer id block
    assert image.producer_id_block is not None
    block = image.producer_id_block.model_copy(update={"block_start": 0, "block_end": 999})
    zk.set(P.LATEST_PRODUCER_ID_BLOCK, codec.encode_producer_id_block(block))
    changes_before = _changes(zk)

    fresh = ZkSyncer(zk, migrated.log, migrated.writer)
    repairs = fresh.reconcile()
    kinds = _kinds(repairs)
    assert ("create", f"topic {gone}") in kinds
    assert ("update", f"partition {changed}-0") in kinds
    assert ("delete", "topic extra-topic") in kinds
    assert ("update", f"configs of topic {config_topic}") in kinds
    assert ("create", f"ACLs of {acl.resource_type} {acl.resource_name!r} ({acl.pattern_type})") in kinds
    assert ("update", f"client quotas of client-id={quota.entity['client-id']}") in kinds
    assert ("update", f"quotas and SCRAM credentials of user {cred.user}") in kinds
    assert ("update", f"delegation token {token.token_id}") in kinds
    assert ("delete", "delegation token stale-token") in kinds
    assert ("update", "producer id block") in kinds
    assert len(repairs) == 10, repairs
    whole = next(r for r in repairs if r.entity == f"topic {gone}")
    assert whole.znodes == 2 + 2 * SPEC.partitions  # topic, partitions, each partition and state
    # No secret in any repair line (invariant 6).
    text = "\n".join(map(str, repairs))
    assert cred.salt.hex() not in text and credential_codec.encode_scram(cred) not in text
    # The config, quota, user changes are announced to ZK-mode brokers.
    announced = _changes(zk)[len(changes_before) :]
    assert f"topics/{config_topic}" in announced
    assert f"clients/{P.sanitize(quota.entity['client-id'] or '')}" in announced
    assert f"users/{P.sanitize(cred.user)}" in announced
    assert _normal(_zk_image(zk)) == _normal(_log_image(migrated.log))
    assert fresh.reconcile() == []


def test_sync_writes_every_record_type_in_kafkas_layout(migrated: Migrated) -> None:
    zk = migrated.zk
    syncer = migrated.syncer
    syncer.reconcile()
    image = syncer.image
    assert image is not None
    names = sorted(image.topics)
    t0, t1, t_del = names[0], names[1], names[2]
    new_id = uuid.uuid4()
    scram_user = "new-user@example.com"
    acl_id = uuid.uuid4()
    removed_acl = image.acls[0]
    token = next(iter(image.delegation_tokens.values()))
    changes_before = len(zk.get_children(P.CONFIG_CHANGES))
    literal_changes_before = len(zk.get_children(P.LITERAL_ACL_CHANGES))
    state0 = P.partition_state_path(t0, 0)
    version0 = zk.exists(state0).version
    state1 = P.partition_state_path(t1, 1)
    version1 = zk.exists(state1).version
    epoch0 = image.topics[t0].partitions[0].leader_epoch
    migrated.append(
        record("TopicRecord", Name="fresh", TopicId=new_id),
        record("ConfigRecord", ResourceType=2, ResourceName="fresh", Name="cleanup.policy", Value="compact"),
        *[
            record(
                "PartitionRecord",
                PartitionId=p,
                TopicId=new_id,
                Replicas=[1, 2],
                Isr=[1, 2],
                Leader=1,
                LeaderEpoch=0,
                PartitionEpoch=0,
            )
            for p in range(2)
        ],
        record("PartitionChangeRecord", PartitionId=0, TopicId=migrated.topic_id(t0), Leader=2, Isr=[2, 3]),
        record("PartitionChangeRecord", PartitionId=0, TopicId=migrated.topic_id(t0), Isr=[2]),
        record(
            "PartitionChangeRecord",
            PartitionId=1,
            TopicId=migrated.topic_id(t1),
            Replicas=[1, 2, 3, 4],
            AddingReplicas=[4],
        ),
        record("ConfigRecord", ResourceType=4, ResourceName="", Name="log.retention.ms", Value="1234"),
        record("ConfigRecord", ResourceType=2, ResourceName="fresh", Name="cleanup.policy", Value=None),
        record("ConfigRecord", ResourceType=2, ResourceName="fresh", Name="retention.ms", Value="99"),
        record(
            "ClientQuotaRecord",
            Entity=[
                {"EntityType": "user", "EntityName": scram_user},
                {"EntityType": "client-id", "EntityName": "app 1"},
            ],
            Key="producer_byte_rate",
            Value=2048.0,
            Remove=False,
        ),
        record(
            "UserScramCredentialRecord",
            Name=scram_user,
            Mechanism=1,
            Salt=b"s" * 16,
            StoredKey=b"k" * 32,
            ServerKey=b"v" * 32,
            Iterations=4096,
        ),
        record(
            "AccessControlEntryRecord",
            Id=acl_id,
            ResourceType=2,
            ResourceName="fresh",
            PatternType=3,
            Principal="User:alice",
            Host="*",
            Operation=3,
            PermissionType=3,
        ),
        record("RemoveAccessControlEntryRecord", Id=kafka_to_uuid(removed_acl.acl_id or "")),
        record(
            "DelegationTokenRecord",
            Owner="User:bob",
            Requester="User:bob",
            Renewers=["User:carol"],
            IssueTimestamp=1,
            MaxTimestamp=3,
            ExpirationTimestamp=2,
            TokenId="tok-new",
        ),
        record("RemoveDelegationTokenRecord", TokenId=token.token_id),
        record("ProducerIdsRecord", BrokerId=1, BrokerEpoch=-1, NextProducerId=77_000),
        record("RemoveTopicRecord", TopicId=migrated.topic_id(t_del)),
        record("NoOpRecord"),
    )
    report = syncer.sync()
    assert report.to_offset == migrated.log.end_offset - 1 == read_migration(zk).kraft_metadata_offset  # type: ignore[union-attr]
    assert report.lag == 0 and syncer.lag() == 0
    assert report.records == 19
    # new topic in Kafka's layout, with its config and no cleanup.policy
    assert codec.decode_topic(P.topic_path("fresh"), zk.get(P.topic_path("fresh"))[0]).partitions == {
        0: [1, 2],
        1: [1, 2],
    }
    assert zk.exists(P.partition_state_path("fresh", 1)) is not None
    assert config_codec.decode_config("", zk.get(P.config_entity_path("topics", "fresh"))[0]) == {
        "retention.ms": "99"
    }
    # a PartitionChangeRecord updates the state znode: leader, leader epoch (+1 per leader change), isr
    st = codec.decode_partition_state(state0, zk.get(state0)[0])
    assert (st.leader, st.isr) == (2, [2])
    assert st.leader_epoch == epoch0 + 1  # one leader change
    assert st.controller_epoch == migrated.claim.kraft_epoch  # the KRaft controller's epoch, as Kafka writes
    # Two changes coalesced into one write still move the version by two: Kafka's ZooKeeper
    # controller reads the version as the partition epoch (after a rollback it must equal the
    # epoch the brokers got from this controller).
    synced = syncer.image
    assert synced is not None
    assert zk.exists(state0).version == version0 + 2 == synced.topics[t0].partitions[0].partition_epoch
    # a reassignment step leaves the state's bytes alone but moves the epoch: the version follows
    assert zk.exists(state1).version == version1 + 1 == synced.topics[t1].partitions[1].partition_epoch
    # a reassignment updates the topic znode
    assignment = codec.decode_topic(P.topic_path(t1), zk.get(P.topic_path(t1))[0])
    assert assignment.partitions[1] == [1, 2, 3, 4] and assignment.adding_replicas == {1: [4]}
    # broker default config, quota + SCRAM of a new user with a client
    assert (
        config_codec.decode_config("", zk.get("/config/brokers/<default>")[0])["log.retention.ms"] == "1234"
    )
    upath = P.config_entity_path("users", P.sanitize(scram_user))
    assert "SCRAM-SHA-256" in config_codec.decode_config(upath, zk.get(upath)[0])
    qpath = P.user_client_config_path(P.sanitize(scram_user), P.sanitize("app 1"))
    quota = config_codec.decode_config(qpath, zk.get(qpath)[0])
    assert list(quota) == ["producer_byte_rate"]
    assert config_codec.decode_quota_value(qpath, "producer_byte_rate", quota["producer_byte_rate"]) == 2048.0
    # ACLs: added, removed; each change announced with a change node
    fresh_acls = acl_codec.decode_acls("", zk.get("/kafka-acl/Topic/fresh")[0], "TOPIC", "fresh", "LITERAL")
    assert [(a.principal, a.operation) for a in fresh_acls] == [("User:alice", "READ")]
    removed_path = P.acl_resource_path(
        removed_acl.pattern_type, removed_acl.resource_type, removed_acl.resource_name
    )
    remaining = [
        a
        for a in image.acls
        if (a.pattern_type, a.resource_type, a.resource_name)
        == (removed_acl.pattern_type, removed_acl.resource_type, removed_acl.resource_name)
    ]
    if remaining:
        assert len(
            acl_codec.decode_acls(
                "",
                zk.get(removed_path)[0],
                removed_acl.resource_type,
                removed_acl.resource_name,
                removed_acl.pattern_type,
            )
        ) == len(remaining)
    else:
        assert zk.exists(removed_path) is None
    assert len(zk.get_children(P.LITERAL_ACL_CHANGES)) > literal_changes_before
    # tokens, producer ids, topic deletion
    assert zk.exists(P.token_path("tok-new")) is not None and zk.exists(P.token_path(token.token_id)) is None
    assert sorted(zk.get_children(P.TOKEN_CHANGES)) != []
    block = codec.decode_producer_id_block("", zk.get(P.LATEST_PRODUCER_ID_BLOCK)[0])
    assert block.block_end == 76_999
    assert zk.exists(P.topic_path(t_del)) is None and zk.exists(P.config_entity_path("topics", t_del)) is None
    # config changes announced: topic config (coalesced: one per entity), broker default, user, user+client
    announced = _changes(zk)[changes_before:]
    assert sorted(announced) == sorted(
        [
            "topics/fresh",
            "brokers/<default>",
            f"users/{P.sanitize(scram_user)}",
            f"users/{P.sanitize(scram_user)}/clients/{P.sanitize('app 1')}",
        ]
    )
    assert _normal(_zk_image(zk)) == _normal(_log_image(migrated.log))
    assert syncer.last_delta_ms is not None and list(syncer.delta_write_ms)


def test_config_with_null_value_removes_the_key_and_notifies(migrated: Migrated) -> None:
    zk = migrated.zk
    migrated.syncer.reconcile()
    image = migrated.syncer.image
    assert image is not None
    (rtype, name), entity = next((k, v) for k, v in image.configs.items() if k[0] == "TOPIC")
    key = next(iter(entity.configs))
    before = len(zk.get_children(P.CONFIG_CHANGES))
    migrated.append(record("ConfigRecord", ResourceType=2, ResourceName=name, Name=key, Value=None))
    migrated.syncer.sync()
    path = P.config_entity_path("topics", name)
    assert key not in config_codec.decode_config(path, zk.get(path)[0])
    assert _changes(zk)[before:] == [f"topics/{name}"]


def test_transactions_open_aborted_and_committed(migrated: Migrated) -> None:
    zk = migrated.zk
    syncer = migrated.syncer
    syncer.reconcile()
    covered = read_migration(zk).kraft_metadata_offset  # type: ignore[union-attr]
    tid = uuid.uuid4()
    migrated.append(
        record("BeginTransactionRecord", Name="abort me"),
        record("TopicRecord", Name="aborted", TopicId=tid),
        record("AbortTransactionRecord", Reason="test"),
    )
    begin, _ = migrated.append(
        record("BeginTransactionRecord", Name="admin"), record("TopicRecord", Name="later", TopicId=tid)
    )
    report = syncer.sync()
    assert report.open_transaction == begin
    assert report.to_offset == begin - 1 == read_migration(zk).kraft_metadata_offset  # type: ignore[union-attr]
    assert report.to_offset > covered
    assert zk.exists(P.topic_path("aborted")) is None and zk.exists(P.topic_path("later")) is None
    assert syncer.lag() == 2
    migrated.append(
        record(
            "PartitionRecord",
            PartitionId=0,
            TopicId=tid,
            Replicas=[1],
            Isr=[1],
            Leader=1,
            LeaderEpoch=0,
            PartitionEpoch=0,
        ),
        record("EndTransactionRecord"),
    )
    report = syncer.sync()
    assert report.open_transaction is None and report.lag == 0
    assert zk.exists(P.partition_state_path("later", 0)) is not None
    assert _normal(_zk_image(zk)) == _normal(_log_image(migrated.log))


def test_sync_before_any_reconcile_reconciles_first(migrated: Migrated) -> None:
    report = migrated.syncer.sync()
    assert {r.kind for r in report.repairs} == {"delete"}
    assert report.lag == 0 and migrated.syncer.ready


def test_retention_never_passes_what_the_syncer_has_yet_to_read(migrated: Migrated) -> None:
    syncer, log = migrated.syncer, migrated.log
    assert log.retain_from is not None and log.retain_from() == log.end_offset  # not loaded: snapshot
    syncer.sync()
    topic = syncer.image.topics[sorted(syncer.image.topics)[0]]  # type: ignore[union-attr]
    migrated.append(
        record("PartitionChangeRecord", PartitionId=0, TopicId=kafka_to_uuid(topic.topic_id or ""))
    )
    assert syncer.lag() == 1
    assert log.retain_from() == log.end_offset - 1  # the unsynced record is held
    syncer.sync()
    assert log.retain_from() == log.end_offset


def test_lag_is_bounded_and_waiters_are_released(migrated: Migrated) -> None:
    syncer = ZkSyncer(migrated.zk, migrated.log, migrated.writer, max_lag_records=50, chunk_keys=7)
    syncer.reconcile()
    assert syncer.image is not None
    topic = syncer.image.topics[sorted(syncer.image.topics)[0]]
    tid = kafka_to_uuid(topic.topic_id or "")
    migrated.append(
        *[
            record("PartitionChangeRecord", PartitionId=i % 3, TopicId=tid, Leader=i % 3 + 1)
            for i in range(120)
        ]
    )
    assert syncer.lag() == 120 and syncer.over_lag_bound()
    assert syncer.wait_for_lag_below(timeout=30) == 0  # nobody else syncs: the caller's thread does
    # With a syncing thread, a waiter blocks until that thread's multis bring the lag down.
    migrated.append(
        *[
            record("PartitionChangeRecord", PartitionId=i % 3, TopicId=tid, Leader=i % 3 + 1)
            for i in range(300)
        ]
    )
    seen: list[int] = []
    with syncer._lock:
        worker = threading.Thread(target=lambda: seen.append(syncer.wait_for_lag_below(10, timeout=30)))
        worker.start()
        worker.join(0.3)
        assert worker.is_alive()  # the lock is held: it cannot sync itself, it waits
        syncer.sync()
    worker.join(10)
    assert seen == [0]
    with pytest.raises(Exception, match="not below 0"):
        syncer.wait_for_lag_below(0, timeout=0.2)


def test_fenced_sync_writes_nothing(migrated: Migrated, zk_connect: str) -> None:
    zk = migrated.zk
    syncer = migrated.syncer
    syncer.reconcile()
    name = sorted(syncer.image.topics)[0]  # type: ignore[union-attr]
    path = P.partition_state_path(name, 0)
    before = zk.get(path)
    claim_controller(zk, 3001)  # a newer controller
    migrated.append(
        record("PartitionChangeRecord", PartitionId=0, TopicId=migrated.topic_id(name), Leader=-1, Isr=[])
    )
    migration_before = zk.get(P.MIGRATION)
    with pytest.raises(FencedError, match="fenced by a newer controller"):
        syncer.sync()
    assert zk.get(path) == before
    assert zk.get(P.MIGRATION) == migration_before
    assert not syncer.ready  # the next start reconciles from scratch


def test_log_behind_migration_is_refused(migrated: Migrated, tmp_path: Path) -> None:
    other = MetadataLog.open(
        tmp_path / "other", writable=True, cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=3000
    )
    try:
        other.append([record("NoOpRecord")], epoch=migrated.claim.kraft_epoch)
        with pytest.raises(BadInputError, match="not the log ZooKeeper was migrated from"):
            ZkSyncer(migrated.zk, other, migrated.writer).reconcile()
    finally:
        other.close()


def test_semantic_comparison_and_notifications() -> None:
    state = "/brokers/topics/t/partitions/0/state"
    assert same(
        state, codec.encode_partition_state(1, 2, [1, 2], 5), codec.encode_partition_state(1, 2, [1, 2], 9)
    )
    assert not same(
        state, codec.encode_partition_state(1, 2, [1, 2], 5), codec.encode_partition_state(1, 3, [1, 2], 5)
    )
    cfg = "/config/users/alice"
    assert same(
        cfg,
        config_codec.encode_config({"producer_byte_rate": "1024"}),
        config_codec.encode_config({"producer_byte_rate": "1024.0"}),
    )
    assert same(cfg, b'{"version":1,"config":{}}', b"")
    assert not same(cfg, b"not json", config_codec.encode_config({}))
    assert same("/brokers/topics/t/partitions", None, b"")
    note = notification_for("/config/users/a%40b/clients/c")
    assert (
        note is not None
        and note.sequential
        and admin_codec.decode_config_change("", note.data) == "users/a%40b/clients/c"
    )
    assert notification_for("/config/users/a/clients") is None
    acl_note = notification_for("/kafka-acl-extended/prefixed/Group/app-")
    assert acl_note is not None and acl_note.path == "/kafka-acl-extended-changes/acl_changes_"
    assert acl_codec.decode_acl_change(acl_note.path, acl_note.data) == acl_codec.ResourcePattern(
        "GROUP", "app-", "PREFIXED"
    )


def test_zookeeper_restart_during_sync_loses_nothing_and_doubles_nothing(tmp_path: Path) -> None:
    """Invariant 4 through the syncer: the server restarts mid-sync; every change lands exactly once."""
    import time

    from migrator.zk.connection import close, connect
    from zk_fixtures.server import ZkServer

    server = ZkServer(tmp_path / "zk").start()
    client = connect(server.connect_string)
    log = None
    try:
        load_cluster(
            client,
            ClusterSpec(topics=4, partitions=5, legacy_topics=0, pending_deletions=0, acls=2, tokens=0),
        )
        log, claim, writer, _ = _copy(client, tmp_path / "meta")
        syncer = ZkSyncer(client, log, writer, chunk_keys=5, chunk_records=40)
        syncer.reconcile()
        assert syncer.image is not None
        topics = sorted(syncer.image.topics)
        tids = {n: kafka_to_uuid(syncer.image.topics[n].topic_id or "") for n in topics}
        notes_before = len(client.get_children(P.CONFIG_CHANGES))
        records = []
        for i in range(2000):
            name = topics[i % len(topics)]
            records.append(
                record(
                    "PartitionChangeRecord",
                    PartitionId=i % 5,
                    TopicId=tids[name],
                    Leader=1 + i % 3,
                    Isr=[1 + i % 3],
                )
            )
            if i % 20 == 0:
                records.append(
                    record(
                        "ConfigRecord",
                        ResourceType=2,
                        ResourceName=topics[(i // 20) % len(topics)],
                        Name="retention.ms",
                        Value=str(i),
                    )
                )
        log.append(records, epoch=claim.kraft_epoch)
        original = writer._send

        sent: list[int] = []

        def slow_send(multi, expected):  # type: ignore[no-untyped-def]
            sent.append(1)
            if len(sent) == 3:
                restarter.start()  # restart while multis are on their way, not before or after
            time.sleep(0.01)  # keep the sync going while the server restarts
            return original(multi, expected)

        writer._send = slow_send  # type: ignore[method-assign]
        # Many small multis, so the restart lands in the middle of the sync however fast it runs.
        writer.max_multi_bytes = 20_000
        generated: list[ZkOp] = []
        original_notes = syncer._notes

        def counting_notes(changes, announce):  # type: ignore[no-untyped-def]
            notes = original_notes(changes, announce)
            generated.extend(n for n in notes if n.sequential)
            return notes

        syncer._notes = counting_notes  # type: ignore[method-assign]
        restarter = threading.Thread(target=server.restart)
        report = syncer.sync()
        restarter.join()
        assert len(sent) > 3 and report.lag == 0 and writer.stats.retries > 0
        assert _normal(_zk_image(client)) == _normal(_log_image(log))
        # Each notification the syncer generated is in ZooKeeper exactly once: a re-sent multi that
        # had landed would double it, a multi skipped after the restart would lose it.
        announced = _changes(client)[notes_before:]
        assert len(generated) > 20
        assert sorted(announced) == sorted(admin_codec.decode_config_change("", n.data) for n in generated)
        assert set(announced) == {f"topics/{n}" for n in topics}
    finally:
        if log is not None:
            log.close()
        close(client)
        server.stop()


def test_sync_removals_of_scram_quotas_and_prefixed_acls(migrated: Migrated) -> None:
    zk = migrated.zk
    syncer = migrated.syncer
    syncer.reconcile()
    image = syncer.image
    assert image is not None
    cred = next(iter(image.scram_credentials.values()))
    upath = P.config_entity_path("users", P.sanitize(cred.user))
    quota = next(q for q in image.client_quotas if set(q.entity) == {"ip"})
    qpath = P.quota_entity_path(quota.entity)
    extended_before = len(zk.get_children(P.EXTENDED_ACL_CHANGES))
    changes_before = len(zk.get_children(P.CONFIG_CHANGES))
    migrated.append(
        record(
            "RemoveUserScramCredentialRecord",
            Name=cred.user,
            Mechanism=1 if cred.mechanism == "SCRAM-SHA-256" else 2,
        ),
        *[
            record(
                "ClientQuotaRecord",
                Entity=[{"EntityType": "ip", "EntityName": quota.entity["ip"]}],
                Key=k,
                Value=0.0,
                Remove=True,
            )
            for k in quota.values
        ],
        record(
            "AccessControlEntryRecord",
            Id=uuid.uuid4(),
            ResourceType=3,
            ResourceName="dw-prefix-",
            PatternType=4,
            Principal="User:svc",
            Host="*",
            Operation=3,
            PermissionType=3,
        ),
    )
    syncer.sync()
    left = config_codec.decode_config(upath, zk.get(upath)[0]) if zk.exists(upath) else {}
    assert cred.mechanism not in left
    assert zk.exists(qpath) is None  # no quota left: the entity's znode goes, as the layout has it
    acls = acl_codec.decode_acls(
        "", zk.get("/kafka-acl-extended/prefixed/Group/dw-prefix-")[0], "GROUP", "dw-prefix-", "PREFIXED"
    )
    assert [a.principal for a in acls] == ["User:svc"]
    changes = sorted(zk.get_children(P.EXTENDED_ACL_CHANGES))[extended_before:]
    assert [
        acl_codec.decode_acl_change(
            P.EXTENDED_ACL_CHANGES + "/" + c, zk.get(f"{P.EXTENDED_ACL_CHANGES}/{c}")[0]
        )
        for c in changes
    ] == [acl_codec.ResourcePattern("GROUP", "dw-prefix-", "PREFIXED")]
    announced = _changes(zk)[changes_before:]
    assert sorted(announced) == sorted([f"users/{P.sanitize(cred.user)}", qpath[len("/config/") :]])
    assert _normal(_zk_image(zk)) == _normal(_log_image(migrated.log))


def _recreate(migrated: Migrated, name: str) -> uuid.UUID:
    """Delete topic `name` and create it again under a new id (what one sync carries when ZooKeeper
    was away while both happened)."""
    image = migrated.syncer.image
    assert image is not None
    old = image.topics[name]
    new_id = uuid.uuid4()
    migrated.append(
        record("RemoveTopicRecord", TopicId=migrated.topic_id(name)),
        record("TopicRecord", Name=name, TopicId=new_id),
        *[
            record(
                "PartitionRecord", PartitionId=pid, TopicId=new_id, Replicas=p.replicas, Isr=p.replicas,
                Leader=p.replicas[0], LeaderEpoch=0, PartitionEpoch=0,
            )
            for pid, p in sorted(old.partitions.items())
        ],
    )  # fmt: skip
    return new_id


def _bump_states(migrated: Migrated, name: str, times: int) -> None:
    """`times` ISR changes on each partition of `name`, each synced alone (state version +1 each)."""
    image = migrated.syncer.image
    assert image is not None
    tid = migrated.topic_id(name)
    for i in range(times):
        for pid, p in sorted(image.topics[name].partitions.items()):
            isr = p.replicas if i % 2 else [p.leader]
            migrated.append(record("PartitionChangeRecord", PartitionId=pid, TopicId=tid, Isr=isr))
        migrated.syncer.sync()


def _versions_match_epochs(zk: KazooClient, image: ClusterImage, name: str) -> dict[int, tuple[int, int]]:
    """partition -> (state znode version, PartitionEpoch) of topic `name`."""
    return {
        pid: (zk.exists(P.partition_state_path(name, pid)).version, p.partition_epoch)
        for pid, p in image.topics[name].partitions.items()
    }


def test_a_topic_deleted_and_recreated_in_one_sync_gets_fresh_znodes(migrated: Migrated) -> None:
    """Issue 27 item 1, DESIGN.md invariant 9: ZooKeeper's znodes follow the topic id. Updated in place
    by path, the re-created topic's state versions stayed ahead of its epochs (0 in the log, 4 in
    ZooKeeper), and a ZooKeeper controller after a rollback refuses AlterPartition on it."""
    zk, syncer = migrated.zk, migrated.syncer
    syncer.reconcile()
    image = syncer.image
    assert image is not None
    name = sorted(image.topics)[0]
    _bump_states(migrated, name, 4)
    assert all(v == e >= 4 for v, e in _versions_match_epochs(zk, syncer.image, name).values())  # type: ignore[arg-type]
    new_id = _recreate(migrated, name)
    report = syncer.sync()
    assert report.records > 0 and syncer.lag() == 0
    image = syncer.image
    assert image is not None
    assert (
        codec.decode_topic(P.topic_path(name), zk.get(P.topic_path(name))[0]).topic_id
        == image.topics[name].topic_id
    )
    assert zk.exists(P.topic_path(name)).version == 0
    assert _versions_match_epochs(zk, image, name) == {pid: (0, 0) for pid in image.topics[name].partitions}
    # one more ISR change: epoch 1, version 1 (it was epoch 1, version 5)
    p0 = image.topics[name].partitions[0]
    migrated.append(record("PartitionChangeRecord", PartitionId=0, TopicId=new_id, Isr=[p0.leader]))
    syncer.sync()
    assert _versions_match_epochs(zk, syncer.image, name)[0] == (1, 1)  # type: ignore[arg-type]
    # a restart's reconcile finds nothing left to repair
    assert ZkSyncer(zk, migrated.log, migrated.writer).reconcile() == []


def test_a_restarted_controller_recreates_a_topic_whose_id_changed(migrated: Migrated) -> None:
    """The delete and re-create reach ZooKeeper only through the next controller's reconcile (the
    first one stopped before it synced them): the reconcile diffs by topic id too."""
    zk, syncer = migrated.zk, migrated.syncer
    syncer.reconcile()
    image = syncer.image
    assert image is not None
    name = sorted(image.topics)[1]
    _bump_states(migrated, name, 3)
    _recreate(migrated, name)
    restarted = ZkSyncer(zk, migrated.log, migrated.writer)
    repairs = restarted.reconcile()
    assert ("create", f"topic {name}") in _kinds(repairs) and ("delete", f"topic {name}") in _kinds(repairs)
    image = restarted.image
    assert image is not None
    assert _versions_match_epochs(zk, image, name) == {pid: (0, 0) for pid in image.topics[name].partitions}
    assert ZkSyncer(zk, migrated.log, migrated.writer).reconcile() == []


def test_a_reconcile_brings_a_state_version_ahead_of_its_epoch_back(migrated: Migrated) -> None:
    """What an older sync left (a state znode version above the PartitionEpoch, same topic id) cannot be
    lowered by a write: the reconcile re-creates that znode with the same bytes and raises it to the
    epoch, so a ZooKeeper controller's conditional write at the epoch succeeds again."""
    zk, syncer = migrated.zk, migrated.syncer
    syncer.reconcile()
    image = syncer.image
    assert image is not None
    name = sorted(image.topics)[2]
    state = P.partition_state_path(name, 0)
    data, stat = zk.get(state)
    epoch = image.topics[name].partitions[0].partition_epoch
    assert stat.version == epoch
    for _ in range(3):
        zk.set(state, data)  # ahead by 3, bytes unchanged
    repairs = ZkSyncer(zk, migrated.log, migrated.writer).reconcile()
    assert [(r.kind, r.entity) for r in repairs] == [("update", f"partition {name}-0")]
    data_after, stat = zk.get(state)
    assert data_after == data and stat.version == epoch
    zk.set(state, data, version=epoch)  # what ZooKeeper's controller does with a broker's AlterPartition
