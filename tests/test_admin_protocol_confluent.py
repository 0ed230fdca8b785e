"""confluent-kafka's AdminClient (librdkafka) against the controller listener in DualWriteMetadata,
with a real ZooKeeper: the same scenario as kafka-python's, each step checked in ZooKeeper; and kcat -L
listing the cluster from the controller."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import assert_audit_clean, assert_consistent, cluster
from test_admin_protocol import _register_all

from migrator import commands
from migrator.zk import paths as P

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

pytestmark = pytest.mark.zk


def _done(futures: dict, timeout: float = 30) -> None:
    for f in futures.values():
        f.result(timeout=timeout)


def test_confluent_admin_client_through_dual_write(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    A = admin_mod
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        ids = sorted(int(b) for b in zk.get_children(P.BROKER_IDS))
        running = commands.start_controller(
            zk_connect, str(log_dir), yes=True, broker_wait_timeout=60, session_timeout_ms=60_000
        )
        try:
            service = running.service
            assert service is not None
            _register_all(service, ids, zk)
            assert running.wait_until(lambda r: service.admin is not None, 60), running.error
            host, port = running.address
            admin = A.AdminClient({"bootstrap.servers": f"{host}:{port}", "socket.timeout.ms": 30_000})
            md = admin.list_topics(timeout=30)
            assert set(md.topics) == set(service.image.topics)
            assert md.controller_id == service.core.config.node_id

            _done(admin.create_topics([A.NewTopic("payments", 3, 2, config={"retention.ms": "60000"})]))
            znode = json.loads(zk.get(P.topic_path("payments"))[0])
            assert znode["topic_id"] == service.image.topics["payments"].topic_id
            assert json.loads(zk.get("/config/topics/payments")[0])["config"] == {"retention.ms": "60000"}

            res = A.ConfigResource(
                A.ResourceType.TOPIC,
                "payments",
                incremental_configs=[
                    A.ConfigEntry("retention.ms", "120000", incremental_operation=A.AlterConfigOpType.SET)
                ],
            )
            _done(admin.incremental_alter_configs([res]))
            assert json.loads(zk.get("/config/topics/payments")[0])["config"] == {"retention.ms": "120000"}
            [described] = admin.describe_configs(
                [A.ConfigResource(A.ResourceType.TOPIC, "payments")]
            ).values()
            entry = described.result(timeout=30)["retention.ms"]
            assert (entry.value, entry.source) == ("120000", A.ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

            binding = A.AclBinding(
                A.ResourceType.TOPIC,
                "payments",
                A.ResourcePatternType.PREFIXED,
                "User:bob",
                "*",
                A.AclOperation.WRITE,
                A.AclPermissionType.ALLOW,
            )
            _done(admin.create_acls([binding]))
            stored = json.loads(zk.get("/kafka-acl-extended/prefixed/Topic/payments")[0])["acls"]
            assert stored == [
                {"principal": "User:bob", "permissionType": "Allow", "operation": "Write", "host": "*"}
            ]
            match = A.AclBindingFilter(
                A.ResourceType.ANY,
                "payments",
                A.ResourcePatternType.MATCH,
                "User:bob",
                None,
                A.AclOperation.ANY,
                A.AclPermissionType.ANY,
            )
            [deleted] = admin.delete_acls([match]).values()
            assert [b.principal for b in deleted.result(timeout=30)] == ["User:bob"]
            assert not [
                a for a in service.image.acls if (a.principal, a.resource_name) == ("User:bob", "payments")
            ]
            assert (
                not zk.exists("/kafka-acl-extended/prefixed/Topic/payments")
                or not json.loads(zk.get("/kafka-acl-extended/prefixed/Topic/payments")[0])["acls"]
            )

            _done(admin.create_partitions([A.NewPartitions("payments", 5)]))
            assert len(json.loads(zk.get(P.topic_path("payments"))[0])["partitions"]) == 5

            _done(admin.delete_topics(["payments"]))
            assert "payments" not in zk.get_children(P.TOPICS)
            with pytest.raises(confluent_kafka.KafkaException, match="TOPIC_ALREADY_EXISTS|already exists"):
                existing = next(iter(service.image.topics))
                _done(admin.create_topics([A.NewTopic(existing, 1, 1)]))
        finally:
            result = running.stop()
        assert result is not None and result.state_after == "DualWriteMetadata"
        assert_consistent(zk, log_dir)
        assert_audit_clean(zk_connect, log_dir)  # what `zk2kraft audit` says after the admin steps


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (make system-deps)")
def test_kcat_lists_the_cluster_from_the_controller(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    with cluster(zk, zk_connect):
        ids = sorted(int(b) for b in zk.get_children(P.BROKER_IDS))
        running = commands.start_controller(
            zk_connect, str(tmp_path / "meta"), yes=True, broker_wait_timeout=60, session_timeout_ms=60_000
        )
        try:
            service = running.service
            assert service is not None
            _register_all(service, ids)
            assert running.wait_until(lambda r: service.admin is not None, 60), running.error
            host, port = running.address
            out = subprocess.run(
                ["kcat", "-L", "-J", "-b", f"{host}:{port}", "-m", "30"],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            ).stdout
            listing = json.loads(out)
            assert listing["controllerid"] == service.core.config.node_id
            assert [b["id"] for b in listing["brokers"]] == [service.core.config.node_id]
            assert {t["topic"] for t in listing["topics"]} == set(service.image.topics)
            some = next(t for t in listing["topics"])
            assert len(some["partitions"]) == len(service.image.topics[some["topic"]].partitions)
        finally:
            running.stop()
