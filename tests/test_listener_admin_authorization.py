"""Admin clients authenticate to the controller listener the way Kafka's do and are authorized per
topic and per config with the cluster's ACLs, as Kafka's ControllerApis decides: confluent-kafka
(librdkafka) and kafka-python over SASL_SSL with SCRAM users migrated from /config/users, and over SSL
with a client certificate whose DN is mapped by ``ssl.principal.mapping.rules``. A refused topic or
config gets TOPIC_AUTHORIZATION_FAILED / CLUSTER_AUTHORIZATION_FAILED and nothing of it changes, in
the log or in ZooKeeper; topics a user may not describe are left out of Metadata."""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAuthorizationFailedError
from kazoo.client import KazooClient
from kio.schema.allocate_producer_ids.v0 import request as ap0
from kio.schema.alter_partition_reassignments.v0 import request as apr0
from kio.schema.delete_topics.v6 import request as dt6
from kio.schema.metadata.v12 import request as md12
from kio.schema.update_features.v1 import request as uf1
from migrate_helpers import cluster
from prometheus_client import generate_latest
from test_admin_protocol import _register_all
from test_listener_secure_migration import scram_user
from tls_certs import make_certs

from migrator import commands
from migrator.commands import RunningController
from migrator.controller.client.client import ControllerClient
from migrator.controller.network.listener_config import set_default_properties
from migrator.controller.security.client_security import ClientSecurity
from migrator.kraft.records import kafka_to_uuid
from migrator.metrics import MigrationMetrics
from migrator.zk import paths as P

confluent_kafka = pytest.importorskip("confluent_kafka")
A = pytest.importorskip("confluent_kafka.admin")

pytestmark = pytest.mark.zk

PASSWORDS = {"admin": "admin-pw-4e1a", "dora": "dora-pw-77c3", "eve": "eve-pw-a09b"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC_AUTH, CLUSTER_AUTH = 29, 31
NO_ID = uuid.UUID(int=0)


@contextmanager
def secured_controller(
    zk: KazooClient, zk_connect: str, tmp_path: Path, listener: str, props: dict[str, str]
) -> Iterator[RunningController]:
    """A controller following a generated cluster in DualWriteMetadata, its one listener secured by
    ``props``, past the copy (so the migrated credentials and ACLs are in its image)."""
    set_default_properties({"authorizer.class.name": AUTHORIZER, "super.users": "User:admin", **props})
    running = commands.start_controller(
        zk_connect,
        str(tmp_path / "meta"),
        listen=f"{listener}://127.0.0.1:0",
        yes=True,
        broker_wait_timeout=60,
        session_timeout_ms=60_000,
    )
    try:
        service = running.service
        assert service is not None
        _register_all(service, sorted(int(b) for b in zk.get_children(P.BROKER_IDS)))
        assert running.wait_until(lambda r: service.admin is not None, 60), running.error
        yield running
    finally:
        running.stop()
        set_default_properties({})


def _code(future: Any) -> int:
    """The Kafka error code a confluent-kafka future failed with (0 when it succeeded)."""
    try:
        future.result(timeout=30)
    except confluent_kafka.KafkaException as e:
        return int(e.args[0].code())
    return 0


def _topics(zk: KazooClient) -> set[str]:
    return set(zk.get_children(P.TOPICS))


def _binding(principal: str, prefix: str, op: Any) -> Any:
    return A.AclBinding(
        A.ResourceType.TOPIC,
        prefix,
        A.ResourcePatternType.PREFIXED,
        principal,
        "*",
        op,
        A.AclPermissionType.ALLOW,
    )


def test_sasl_ssl_scram_admin_clients_are_authorized_per_topic(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    certs = make_certs(tmp_path / "certs")
    props = {
        "listener.security.protocol.map": "SECURE:SASL_SSL",
        "ssl.keystore.location": str(certs.server),
        "ssl.truststore.location": str(certs.ca),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    with cluster(zk, zk_connect):
        for user, pw in PASSWORDS.items():
            scram_user(zk, user, pw)  # in ZooKeeper only: the copy brings them to the controller
        with secured_controller(zk, zk_connect, tmp_path, "SECURE", props) as running:
            service = running.service
            assert service is not None
            host, port = running.address

            def confluent(user: str) -> Any:
                return A.AdminClient(
                    {
                        "bootstrap.servers": f"{host}:{port}",
                        "security.protocol": "SASL_SSL",
                        "ssl.ca.location": str(certs.ca),
                        "sasl.mechanism": "SCRAM-SHA-512",
                        "sasl.username": user,
                        "sasl.password": PASSWORDS[user],
                        "socket.timeout.ms": 30_000,
                    }
                )

            # the super user grants dora CREATE and ALTER (which implies DESCRIBE) on topics sec16.*
            admin = confluent("admin")
            made = admin.create_acls(
                [
                    _binding("User:dora", "sec16.", A.AclOperation.CREATE),
                    _binding("User:dora", "sec16.", A.AclOperation.ALTER),
                ]
            )
            assert [_code(f) for f in made.values()] == [0, 0]

            dora = confluent("dora")
            existing = _topics(zk)
            fs = dora.create_topics([A.NewTopic("sec16.eu", 2, 1), A.NewTopic("payments", 1, 1)])
            assert {t: _code(f) for t, f in fs.items()} == {"sec16.eu": 0, "payments": TOPIC_AUTH}
            assert _topics(zk) == existing | {"sec16.eu"}
            assert "payments" not in service.image.topics

            # Metadata leaves out what dora may not describe (every generated topic) rather than failing
            assert set(dora.list_topics(timeout=30).topics) == {"sec16.eu"}
            assert set(admin.list_topics(timeout=30).topics) == existing | {"sec16.eu"}

            # ALTER on the topic lets dora add partitions; deleting it needs DELETE
            assert [_code(f) for f in dora.create_partitions([A.NewPartitions("sec16.eu", 3)]).values()] == [
                0
            ]
            assert len(json.loads(zk.get(P.topic_path("sec16.eu"))[0])["partitions"]) == 3
            [deleted] = dora.delete_topics(["sec16.eu"]).values()
            assert _code(deleted) == TOPIC_AUTH and "sec16.eu" in _topics(zk)

            # configs: ALTER_CONFIGS on the topic (29) or on the cluster for a broker's (31)
            # librdkafka sends a broker's configs to that broker: the one Metadata lists is the controller
            broker = str(service.core.config.node_id)
            config_znodes = ("/config/topics/sec16.eu", f"/config/brokers/{broker}")

            def configs_now() -> Any:
                znodes = [zk.get(p)[0] if zk.exists(p) else None for p in config_znodes]
                return (
                    znodes,
                    service.image.configs.get(("TOPIC", "sec16.eu")),
                    service.image.configs.get(("BROKER", broker)),
                )

            configs_before = configs_now()
            alter = dora.incremental_alter_configs(
                [
                    A.ConfigResource(
                        A.ResourceType.TOPIC,
                        "sec16.eu",
                        incremental_configs=[
                            A.ConfigEntry(
                                "retention.ms", "1000", incremental_operation=A.AlterConfigOpType.SET
                            )
                        ],
                    ),
                    A.ConfigResource(
                        A.ResourceType.BROKER,
                        broker,
                        incremental_configs=[
                            A.ConfigEntry(
                                "log.cleaner.threads", "2", incremental_operation=A.AlterConfigOpType.SET
                            )
                        ],
                    ),
                ]
            )
            assert sorted(_code(f) for f in alter.values()) == [TOPIC_AUTH, CLUSTER_AUTH]
            assert configs_now() == configs_before
            [described] = dora.describe_configs([A.ConfigResource(A.ResourceType.BROKER, broker)]).values()
            assert _code(described) == CLUSTER_AUTH

            # ACLs need ALTER on the cluster: dora cannot grant herself more
            acls_before = list(service.image.acls)
            [refused] = dora.create_acls([_binding("User:dora", "pay", A.AclOperation.ALL)]).values()
            assert _code(refused) == CLUSTER_AUTH
            assert service.image.acls == acls_before
            assert not zk.exists("/kafka-acl-extended/prefixed/Topic/pay")

            # the wire answers Kafka gives, which the clients above fold into exceptions
            other = min(existing)
            other_id = kafka_to_uuid(service.image.topics[other].topic_id)
            dora_sec = ClientSecurity(
                "SASL_SSL",
                ssl_cafile=str(certs.ca),
                sasl_mechanism="SCRAM-SHA-512",
                username="dora",
                password=PASSWORDS["dora"],
            )
            with ControllerClient(host, port, security=dora_sec, timeout_s=30) as c:
                named = md12.MetadataRequest(
                    topics=tuple(
                        md12.MetadataRequestTopic(topic_id=NO_ID, name=n)
                        for n in ("sec16.eu", "sec16.absent", other, "absent-and-hidden")
                    ),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
                answer = {t.name: int(t.error_code) for t in c.call(3, 12, named).topics}
                # an undescribable topic is 29 whether or not it exists: its existence is not disclosed
                assert answer == {"sec16.eu": 0, "sec16.absent": 3, other: 29, "absent-and-hidden": 29}
                by_id = md12.MetadataRequest(
                    topics=(md12.MetadataRequestTopic(topic_id=other_id, name=None),),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
                [hidden] = c.call(3, 12, by_id).topics
                assert (hidden.name, hidden.topic_id, int(hidden.error_code)) == (None, other_id, 29)
                delete = dt6.DeleteTopicsRequest(
                    topics=(
                        dt6.DeleteTopicState(name=None, topic_id=other_id),
                        dt6.DeleteTopicState(name="sec16.absent", topic_id=NO_ID),
                    ),
                    timeout=datetime.timedelta(seconds=30),
                )
                results = c.call(20, 6, delete).responses
                assert {(r.name, r.topic_id or NO_ID, int(r.error_code)) for r in results} == {
                    (None, other_id, 29),  # by id, not describable: not even its name is told
                    ("sec16.absent", NO_ID, 3),  # describable: the caller may learn it is absent
                }
                # cluster-wide APIs: ALTER for reassignments and features, CLUSTER_ACTION for producer
                # ids; refused whole with Kafka's error responses, nothing appended
                end = service.log.end_offset
                move = apr0.AlterPartitionReassignmentsRequest(
                    topics=(
                        apr0.ReassignableTopic(
                            name=other,
                            partitions=(apr0.ReassignablePartition(partition_index=0, replicas=None),),
                        ),
                    )
                )
                moved = c.call(45, 0, move)
                assert int(moved.error_code) == 31
                assert [int(p.error_code) for t in moved.responses for p in t.partitions] == [31]
                feature = uf1.FeatureUpdateKey(feature="metadata.version", max_version_level=1)
                features = c.call(57, 1, uf1.UpdateFeaturesRequest(feature_updates=(feature,)))
                assert (int(features.error_code), features.results) == (31, ())
                ids = c.call(67, 0, ap0.AllocateProducerIdsRequest(broker_id=1, broker_epoch=1))
                assert (int(ids.error_code), ids.producer_id_len) == (31, 0)
                assert service.log.end_offset == end
            assert other in _topics(zk) and other in service.image.topics

            # kafka-python over SASL_SSL as eve, who has no ACL at all
            eve = KafkaAdminClient(
                bootstrap_servers=f"{host}:{port}",
                security_protocol="SASL_SSL",
                ssl_cafile=str(certs.ca),
                sasl_mechanism="SCRAM-SHA-512",
                sasl_plain_username="eve",
                sasl_plain_password=PASSWORDS["eve"],
                request_timeout_ms=30_000,
            )
            try:
                assert eve.list_topics() == []
                with pytest.raises(TopicAuthorizationFailedError):
                    eve.create_topics([NewTopic("sec16.eve", 1, 1)])
                with pytest.raises(TopicAuthorizationFailedError):
                    eve.delete_topics(["sec16.eu"])
            finally:
                eve.close()
            assert _topics(zk) == existing | {"sec16.eu"}
            # each refused topic or config is counted by reason in the listener's metrics
            assert _refused("SECURE", "topic_authorization_failed") >= 5
            assert _refused("SECURE", "cluster_authorization_failed") >= 3
            del admin, dora


def _refused(listener: str, reason: str) -> float:
    scraped = generate_latest(MigrationMetrics().registry).decode()
    key = f'zk2kraft_listener_refused_total{{listener="{listener}",reason="{reason}"}} '
    return sum(float(line[len(key) :]) for line in scraped.splitlines() if line.startswith(key))


def test_ssl_client_certificate_principal_is_authorized_with_acls_migrated_from_zookeeper(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    certs = make_certs(tmp_path / "certs")
    props = {
        "listener.security.protocol.map": "TLS:SSL",
        "ssl.keystore.location": str(certs.server),
        "ssl.truststore.location": str(certs.ca),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),OU=kafka,O=example$/$1/,DEFAULT",
    }
    assert certs.client_dn == "CN=broker-1,OU=kafka,O=example"
    with cluster(zk, zk_connect):
        # CREATE on topics ssl-team.* for the mapped principal, as ZooKeeper-mode Kafka stores a PREFIXED ACL
        acl = {"principal": "User:broker-1", "permissionType": "Allow", "operation": "Create", "host": "*"}
        zk.create(
            "/kafka-acl-extended/prefixed/Topic/ssl-team.",
            json.dumps({"version": 1, "acls": [acl]}).encode(),
            makepath=True,
        )
        with secured_controller(zk, zk_connect, tmp_path, "TLS", props) as running:
            service = running.service
            assert service is not None
            host, port = running.address
            existing = _topics(zk)
            kp = KafkaAdminClient(
                bootstrap_servers=f"{host}:{port}",
                security_protocol="SSL",
                ssl_cafile=str(certs.ca),
                ssl_certfile=str(certs.client_cert),
                ssl_keyfile=str(certs.client_key),
                request_timeout_ms=30_000,
            )
            try:
                kp.create_topics([NewTopic("ssl-team.one", 1, 1)])
                assert "ssl-team.one" in _topics(zk)
                with pytest.raises(TopicAuthorizationFailedError):
                    kp.create_topics([NewTopic("elsewhere", 1, 1)])
            finally:
                kp.close()

            lib = A.AdminClient(
                {
                    "bootstrap.servers": f"{host}:{port}",
                    "security.protocol": "SSL",
                    "ssl.ca.location": str(certs.ca),
                    "ssl.certificate.location": str(certs.client_cert),
                    "ssl.key.location": str(certs.client_key),
                    "socket.timeout.ms": 30_000,
                }
            )
            fs = lib.create_topics([A.NewTopic("ssl-team.two", 1, 1), A.NewTopic("elsewhere", 1, 1)])
            assert {t: _code(f) for t, f in fs.items()} == {"ssl-team.two": 0, "elsewhere": TOPIC_AUTH}
            [deleted] = lib.delete_topics(["ssl-team.one"]).values()
            assert _code(deleted) == TOPIC_AUTH  # CREATE is not DELETE
            acls_before = list(service.image.acls)
            [refused] = lib.create_acls([_binding("User:broker-1", "ssl-", A.AclOperation.ALL)]).values()
            assert _code(refused) == CLUSTER_AUTH
            assert service.image.acls == acls_before
            assert _topics(zk) == existing | {"ssl-team.one", "ssl-team.two"}
            del lib
