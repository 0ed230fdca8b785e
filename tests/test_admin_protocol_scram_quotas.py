"""SCRAM credentials, client quotas, configs (legacy AlterConfigs, APPEND/SUBTRACT, DescribeConfigs with
defaults) and reassignments through the controller listener in DualWriteMetadata, with a real ZooKeeper:
confluent-kafka's and kafka-python's admin calls, and kafka-python's own messages where neither library
has a call (quotas, the cluster-wide config default, the legacy AlterConfigs); after each change
ZooKeeper's `/config/...` holds what a ZK-mode broker reads, with a change notification."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import (
    NewTopic,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterConfigsRequest,
    DescribeClientQuotasRequest,
    IncrementalAlterConfigsRequest,
)
from kazoo.client import KazooClient
from migrate_helpers import SPEC, assert_consistent, cluster
from test_admin_protocol import _register_all

from migrator import commands
from migrator.controller import core
from migrator.controller.security.scram_server import scram_credential
from migrator.zk import paths as P

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

pytestmark = pytest.mark.zk


def _config(zk: KazooClient, path: str) -> dict[str, str]:
    return json.loads(zk.get(path)[0])["config"] if zk.exists(path) else {}


def _rates(zk: KazooClient, path: str) -> dict[str, float]:
    return {k: float(v) for k, v in _config(zk, path).items()}


def _send(admin: KafkaAdminClient, request: Any) -> Any:
    async def call() -> Any:
        return await admin._manager.send(request)

    return admin._manager.run(call)


def _scram(admin: Any, zk: KazooClient, service: Any) -> None:
    A = confluent_admin
    salt = b"0123456789abcdef"
    info = A.ScramCredentialInfo(A.ScramMechanism.SCRAM_SHA_256, 8192)
    up = A.UserScramCredentialUpsertion("alice", info, b"alice-secret", salt)
    for f in admin.alter_user_scram_credentials([up]).values():
        f.result(timeout=30)
    # The controller derived Kafka's keys from the salted password: the same as from the password.
    want = scram_credential("alice", "SCRAM-SHA-256", "alice-secret", salt, 8192)
    got = service.image.scram_credentials[("alice", "SCRAM-SHA-256")]
    assert (got.stored_key, got.server_key, got.salt, got.iterations) == (
        want.stored_key,
        want.server_key,
        salt,
        8192,
    )
    zk_value = _config(zk, "/config/users/alice")["SCRAM-SHA-256"]
    assert base64.b64encode(want.stored_key).decode() in zk_value and "iterations=8192" in zk_value
    described = admin.describe_user_scram_credentials(["alice"])
    [(mech, iters)] = [
        (i.mechanism, i.iterations) for i in described["alice"].result(timeout=30).scram_credential_infos
    ]
    assert (mech, iters) == (A.ScramMechanism.SCRAM_SHA_256, 8192)


def _scram_kafka_python(admin: KafkaAdminClient, zk: KazooClient, service: Any) -> None:
    sha512 = UserScramCredentialUpsertion("bob", ScramMechanism.SCRAM_SHA_512, "bob-secret", iterations=4096)
    few = UserScramCredentialUpsertion("carol", ScramMechanism.SCRAM_SHA_256, "x", iterations=4096)
    few.iterations = 100
    errors = admin.alter_user_scram_credentials(
        [
            sha512,
            few,
            UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_256),
            UserScramCredentialUpsertion("dave", ScramMechanism.SCRAM_SHA_256, "d", iterations=4096),
            UserScramCredentialUpsertion("dave", ScramMechanism.SCRAM_SHA_512, "d", iterations=4096),
        ]
    )
    assert errors == {
        "bob": None,
        "carol": "Too few iterations",
        "nobody": "Attempt to delete a user credential that does not exist",
        "dave": "A user credential cannot be altered twice in the same request",
    }
    assert ("bob", "SCRAM-SHA-512") in service.image.scram_credentials
    assert "iterations=4096" in _config(zk, "/config/users/bob")["SCRAM-SHA-512"]
    assert not zk.exists("/config/users/carol") and not zk.exists("/config/users/dave")
    described = admin.describe_user_scram_credentials(["alice", "ghost"])
    assert described["alice"]["error"] is None and described["ghost"]["error"].startswith(
        "Attempt to describe a user credential that does not exist"
    )
    deleted = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256)]
    )
    assert deleted == {"alice": None}
    assert ("alice", "SCRAM-SHA-256") not in service.image.scram_credentials
    assert "SCRAM-SHA-256" not in _config(zk, "/config/users/alice")


def _quotas(admin: KafkaAdminClient, zk: KazooClient, service: Any) -> None:
    changes_before = len(zk.get_children("/config/changes"))
    default_before = _rates(zk, "/config/clients/<default>")  # the generated cluster may hold some
    alter = AlterClientQuotasRequest(
        entries=[
            ([("user", "alice"), ("client-id", "app")], [("producer_byte_rate", 1048576.0, False)]),
            ([("client-id", None)], [("consumer_byte_rate", 2097152.0, False)]),
            ([("user", "eve")], [("no.such.quota", 1.0, False)]),
        ],
        validate_only=False,
    )
    resp = _send(admin, alter)
    codes = [e.error_code for e in resp.entries]
    assert codes == [0, 0, 42], resp  # INVALID_REQUEST for a key Kafka does not know
    assert _rates(zk, "/config/users/alice/clients/app") == {"producer_byte_rate": 1048576.0}
    default_after = {**default_before, "consumer_byte_rate": 2097152.0}
    assert _rates(zk, "/config/clients/<default>") == default_after
    assert not zk.exists("/config/users/eve")
    assert len(zk.get_children("/config/changes")) > changes_before  # brokers are told

    def describe(components: list[tuple[str, int, str | None]], strict: bool = False) -> Any:
        return _send(admin, DescribeClientQuotasRequest(components=components, strict=strict))

    found = describe([("user", 0, "alice")])
    assert found.error_code == 0
    assert [
        ({e.entity_type: e.entity_name for e in x.entity}, {v.key: v.value for v in x.values})
        for x in found.entries
    ] == [({"user": "alice", "client-id": "app"}, {"producer_byte_rate": 1048576.0})]
    assert describe([("user", 0, "alice")], strict=True).entries == []
    defaults = describe([("client-id", 1, None)], strict=True)
    assert [{v.key: v.value for v in x.values} for x in defaults.entries] == [default_after]
    mixed = describe([("ip", 2, None), ("user", 2, None)])
    assert mixed.error_code == 42 and "IP filter component" in mixed.error_message

    removed = _send(
        admin,
        AlterClientQuotasRequest(
            entries=[([("user", "alice"), ("client-id", "app")], [("producer_byte_rate", 0.0, True)])],
            validate_only=False,
        ),
    )
    assert [e.error_code for e in removed.entries] == [0]
    assert _config(zk, "/config/users/alice/clients/app") == {}
    assert describe([("user", 0, "alice")]).entries == []


def _configs(admin: KafkaAdminClient, confluent: Any, zk: KazooClient) -> None:
    A = confluent_admin
    admin.create_topics([NewTopic("conf", 1, 1, topic_configs={"retention.ms": "1000"})])
    # Legacy AlterConfigs, kafka-python's own message (its alter_configs fills in the other dynamic
    # configs first): the topic's dynamic configs become exactly the request's.
    legacy = AlterConfigsRequest(resources=[(2, "conf", [("segment.bytes", "1048576")])], validate_only=False)
    assert [r.error_code for r in _send(admin, legacy).responses] == [0]
    assert _config(zk, "/config/topics/conf") == {"segment.bytes": "1048576"}

    def incremental(*entries: Any) -> None:
        res = A.ConfigResource(A.ResourceType.TOPIC, "conf", incremental_configs=list(entries))
        for f in confluent.incremental_alter_configs([res]).values():
            f.result(timeout=30)

    op = A.AlterConfigOpType
    incremental(A.ConfigEntry("cleanup.policy", "compact", incremental_operation=op.APPEND))
    assert _config(zk, "/config/topics/conf")["cleanup.policy"] == "delete,compact"  # from the default
    incremental(A.ConfigEntry("cleanup.policy", "delete", incremental_operation=op.SUBTRACT))
    assert _config(zk, "/config/topics/conf")["cleanup.policy"] == "compact"
    with pytest.raises(Exception, match="not LIST"):
        incremental(A.ConfigEntry("retention.ms", "5", incremental_operation=op.APPEND))
    assert _config(zk, "/config/topics/conf") == {"segment.bytes": "1048576", "cleanup.policy": "compact"}

    # DescribeConfigs: every topic config, from the topic, the cluster-wide broker default or Kafka's default.
    # the cluster-wide default (empty name), which neither client's alter call names: kafka-python's message
    default = IncrementalAlterConfigsRequest(
        resources=[(4, "", [("log.roll.hours", 0, "2")])], validate_only=False
    )
    assert [r.error_code for r in _send(admin, default).responses] == [0]
    assert _config(zk, "/config/brokers/<default>")["log.roll.hours"] == "2"
    [described] = confluent.describe_configs(
        [A.ConfigResource(A.ResourceType.TOPIC, "conf")], request_timeout=30
    ).values()
    entries = described.result(timeout=30)
    source = A.ConfigSource
    assert (entries["segment.bytes"].value, entries["segment.bytes"].source) == (
        "1048576",
        source.DYNAMIC_TOPIC_CONFIG.value,
    )
    assert (entries["segment.ms"].value, entries["segment.ms"].source) == (
        "7200000",  # log.roll.hours=2 in milliseconds
        source.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )
    assert [(s.name, s.value) for s in entries["segment.ms"].synonyms.values()] == [
        ("log.roll.hours", "2"),
        ("segment.ms", "604800000"),
    ]
    assert (entries["preallocate"].value, entries["preallocate"].source) == (
        "false",
        source.DEFAULT_CONFIG.value,
    )


def _reassignments(admin: KafkaAdminClient, service: Any) -> None:
    moving = {
        (name, p): part
        for name, t in service.image.topics.items()
        for p, part in t.partitions.items()
        if part.adding_replicas or part.removing_replicas
    }
    assert len(moving) == 1
    [((name, p), part)] = moving.items()
    listed = admin.list_partition_reassignments()
    assert {(tp.topic, tp.partition): v for tp, v in listed.items()} == {
        (name, p): {
            "replicas": part.replicas,
            "adding_replicas": part.adding_replicas,
            "removing_replicas": part.removing_replicas,
        }
    }
    other = next(n for n in service.image.topics if n != name)
    assert admin.list_partition_reassignments({other: [0], "no-such-topic": [0]}) == {}


def _elections(admin: KafkaAdminClient, confluent: Any, zk: KazooClient, service: Any) -> None:
    """Preferred election after the preferred leader was fenced, unfenced and re-added to the ISR."""
    image = service.image
    name, p = next(
        (n, part)
        for n, t in sorted(image.topics.items())
        for part in t.partitions.values()
        if len(part.replicas) >= 2 and part.leader == part.replicas[0] and set(part.replicas) <= set(part.isr)
    )
    a = p.replicas[0]
    epoch_of = {b.id: b.broker_epoch for b in image.brokers.values()}
    fenced = service.heartbeat(core.Heartbeat(a, epoch_of[a], service.log.end_offset, want_fence=True))
    assert fenced.error == 0 and service.image.topics[name].partitions[p.partition].leader != a
    # Each step reaches ZooKeeper before the next: changes of one partition coalesced into one write
    # leave its znode version (ZooKeeper's partition epoch) behind the log's (noted in the report).
    assert service.flush(30)

    def codes(election: int) -> list[int]:
        resp = admin.elect_leaders(election, {name: [p.partition]}, raise_errors=False)
        return [r.error_code for t in resp.replica_election_results for r in t.partition_result]

    assert codes(0) == [80]  # PREFERRED_LEADER_NOT_AVAILABLE: fenced, out of the ISR
    assert service.heartbeat(core.Heartbeat(a, epoch_of[a], service.log.end_offset)).error == 0
    now = service.image.topics[name].partitions[p.partition]
    members = tuple(core.IsrMember(r, epoch_of[r]) for r in [*now.isr, a])
    alter = core.AlterPartition(
        now.leader,
        epoch_of[now.leader],
        (
            core.TopicAlter(
                None,
                service.image.topics[name].topic_id,
                (core.PartitionAlter(p.partition, now.leader_epoch, members, now.partition_epoch),),
            ),
        ),
    )
    assert service.alter_partition(alter).error == 0
    assert service.flush(30)
    assert codes(0) == [0]
    assert service.image.topics[name].partitions[p.partition].leader == a
    assert service.flush(30)  # ZooKeeper is written behind the reply
    assert json.loads(zk.get(P.partition_state_path(name, p.partition))[0])["leader"] == a
    assert codes(0) == [84]  # ELECTION_NOT_NEEDED
    tp = confluent_kafka.TopicPartition(name, p.partition)
    unclean = confluent.elect_leaders(confluent_kafka.ElectionType.UNCLEAN, [tp]).result(timeout=30)
    assert "ELECTION_NOT_NEEDED" in str(unclean[tp]) or "not needed" in str(unclean[tp]).lower()


def test_scram_quotas_configs_reassignments_and_elections_through_dual_write(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    # One reassignment in flight (adding/removing replicas on its topic znode) for ListPartitionReassignments.
    with cluster(zk, zk_connect, SPEC.model_copy(update={"reassignments": 1, "pending_deletions": 0})):
        ids = sorted(int(b) for b in zk.get_children(P.BROKER_IDS))
        running = commands.start_controller(
            zk_connect, str(log_dir), yes=True, broker_wait_timeout=60, session_timeout_ms=60_000
        )
        try:
            service = running.service
            assert service is not None
            _register_all(service, ids)
            assert running.wait_until(lambda r: service.admin is not None, 60), running.error
            host, port = running.address
            confluent = confluent_admin.AdminClient(
                {"bootstrap.servers": f"{host}:{port}", "socket.timeout.ms": 30_000}
            )
            _scram(confluent, zk, service)
            admin = KafkaAdminClient(bootstrap_servers=f"{host}:{port}", request_timeout_ms=30_000)
            try:
                _scram_kafka_python(admin, zk, service)
                _quotas(admin, zk, service)
                _configs(admin, confluent, zk)
                _reassignments(admin, service)
                _elections(admin, confluent, zk, service)
            finally:
                admin.close()
        finally:
            result = running.stop()
        assert result is not None and result.state_after == "DualWriteMetadata"
        assert_consistent(zk, log_dir)
