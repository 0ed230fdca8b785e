"""The controller listener over TLS and SASL, with the migrated ACLs enforced: real sockets, real
certificates made by openssl for the run, kafka-python's own SSL/SASL_SSL+SCRAM client, and the
ControllerService over a metadata log whose image holds what the copy migrates (SCRAM credentials
from /config/users, ACLs from /kafka-acl)."""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.errors import KafkaError
from kafka.net.compat import KafkaNetClient
from kafka.protocol.metadata import ApiVersionsRequest
from prometheus_client import generate_latest
from tls_certs import Certs, ExpiredCerts, make_certs, make_expired

from migrator.controller.client.client import ControllerClient, ControllerUnreachable
from migrator.controller.core import ControllerConfig
from migrator.controller.network.listener_config import RunningListeners, listener_specs, start_listeners
from migrator.controller.protocol import messages as M
from migrator.controller.protocol import wire
from migrator.controller.security.client_security import (
    ClientSecurity,
    SaslRefused,
    _request,
    sasl_authenticate,
)
from migrator.controller.security.listener_security import Caller, current_caller
from migrator.controller.security.scram_server import scram_credential
from migrator.controller.service import ControllerService
from migrator.errors import BadInputError
from migrator.kraft.image import ImageBuilder, records_from_image, replay
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import record
from migrator.metrics import MigrationMetrics
from migrator.model import Acl, ClusterImage

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
BROKER_PW = "broker-pw-51c2"
ALICE_PW = "alice-pw-9d0e"


def _acl(principal: str, op: str = "CLUSTER_ACTION") -> Acl:
    return Acl(
        resource_type="CLUSTER",
        resource_name="kafka-cluster",
        pattern_type="LITERAL",
        principal=principal,
        host="*",
        operation=op,
        permission_type="ALLOW",
    )


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def expired(certs: Certs) -> ExpiredCerts:
    return make_expired(certs)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[ControllerService]:
    image = ClusterImage()
    for user, pw in (("broker", BROKER_PW), ("alice", ALICE_PW)):
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            image.scram_credentials[(user, mech)] = scram_credential(user, mech, pw, uuid.uuid4().bytes, 4096)
    image.acls = [_acl("User:broker"), _acl("User:CN=broker-1,OU=kafka,O=example")]
    builder = ImageBuilder(replay(enumerate(records_from_image(image))))
    log = MetadataLog.open(str(tmp_path / "log"), writable=True, cluster_id=CLUSTER_ID, node_id=3000)
    config = ControllerConfig(cluster_id=CLUSTER_ID, node_id=3000, metadata_version=21)
    svc = ControllerService(log, builder, config, 1, write_behind=False)
    try:
        yield svc
    finally:
        svc.stop()
        log.close()


def _props(certs: Certs, **extra: str) -> dict[str, str]:
    props = {
        "listeners": "PLAIN://127.0.0.1:0,TLS://127.0.0.1:0,SECURE://127.0.0.1:0",
        "listener.security.protocol.map": "PLAIN:PLAINTEXT,TLS:SSL,SECURE:SASL_SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server_encrypted),
        "ssl.key.password": certs.key_password,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "listener.name.tls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }
    props.update(extra)
    return props


@pytest.fixture
def listeners(service: ControllerService, certs: Certs) -> Iterator[RunningListeners]:
    running = start_listeners(service, _props(certs)["listeners"], _props(certs))
    try:
        yield running
    finally:
        running.stop()


def _scram(certs: Certs, user: str, pw: str, mech: str = "SCRAM-SHA-512") -> ClientSecurity:
    return ClientSecurity(
        "SASL_SSL", ssl_cafile=str(certs.ca), sasl_mechanism=mech, username=user, password=pw
    )


def _heartbeat() -> M.BrokerHeartbeatRequest:
    return M.BrokerHeartbeatRequest(broker_id=1, broker_epoch=5, current_metadata_offset=0)


def _security_of(running: RunningListeners, name: str):  # type: ignore[no-untyped-def]
    return next(s.security for s in running.servers if s.security.name == name)


def test_kafka_python_connects_over_sasl_ssl_with_migrated_scram(
    listeners: RunningListeners, certs: Certs
) -> None:
    host, port = listeners.addresses["SECURE"]
    client = KafkaNetClient(
        bootstrap_servers=f"{host}:{port}",
        security_protocol="SASL_SSL",
        ssl_cafile=str(certs.ca),
        ssl_check_hostname=False,
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="broker",
        sasl_plain_password=BROKER_PW,
    )
    try:
        assert client.await_ready("bootstrap-0", timeout_ms=20000)
        resp = client.send_and_receive("bootstrap-0", ApiVersionsRequest(), timeout_ms=20000)
        keys = {k.api_key for k in resp.api_keys}
        assert {17, 36, M.BROKER_HEARTBEAT, M.ALTER_PARTITION} <= keys
    finally:
        client.close()
    assert _security_of(listeners, "SECURE").authenticated["authenticated"] >= 1


def test_kafka_python_wrong_password_is_refused_and_counted(
    listeners: RunningListeners, certs: Certs
) -> None:
    host, port = listeners.addresses["SECURE"]
    client = KafkaNetClient(
        bootstrap_servers=f"{host}:{port}",
        security_protocol="SASL_SSL",
        ssl_cafile=str(certs.ca),
        ssl_check_hostname=False,
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="broker",
        sasl_plain_password="not-the-password",
        reconnect_backoff_ms=10000,
    )
    try:
        with pytest.raises(KafkaError):
            client.await_ready("bootstrap-0", timeout_ms=5000)
    finally:
        client.close()
    assert _security_of(listeners, "SECURE").refused["sasl_authentication_failed"] >= 1


def test_kafka_python_over_ssl_with_a_client_certificate(listeners: RunningListeners, certs: Certs) -> None:
    host, port = listeners.addresses["TLS"]
    client = KafkaNetClient(
        bootstrap_servers=f"{host}:{port}",
        security_protocol="SSL",
        ssl_cafile=str(certs.ca),
        ssl_certfile=str(certs.client_cert),
        ssl_keyfile=str(certs.client_key),
        ssl_check_hostname=False,
    )
    try:
        assert client.await_ready("bootstrap-0", timeout_ms=20000)
        resp = client.send_and_receive("bootstrap-0", ApiVersionsRequest(), timeout_ms=20000)
        assert 17 not in {k.api_key for k in resp.api_keys}  # no SASL on an SSL listener
    finally:
        client.close()


def test_acls_decide_cluster_action_with_nothing_changed_when_refused(
    listeners: RunningListeners, service: ControllerService, certs: Certs
) -> None:
    host, port = listeners.addresses["SECURE"]
    before = service.next_offset()
    with ControllerClient(host, port, security=_scram(certs, "alice", ALICE_PW)) as alice:
        assert alice.heartbeat(_heartbeat()).error_code == 31  # CLUSTER_AUTHORIZATION_FAILED
        reg = M.BrokerRegistrationRequest(
            broker_id=7, cluster_id=CLUSTER_ID, incarnation_id=uuid.uuid4(), is_migrating_zk_broker=True
        )
        assert alice.register_broker(reg).error_code == 31
        assert service.next_offset() == before and 7 not in service.image.brokers
        # an ACL appended during the migration counts from the next request
        acl = record(
            "AccessControlEntryRecord",
            Id=uuid.uuid4(),
            ResourceType=4,  # CLUSTER
            ResourceName="kafka-cluster",
            PatternType=3,  # LITERAL
            Principal="User:alice",
            Host="*",
            Operation=9,  # CLUSTER_ACTION
            PermissionType=3,  # ALLOW
        )
        with service.lock:
            service.builder.replay(before, acl)
        assert alice.heartbeat(_heartbeat()).error_code != 31
    with ControllerClient(host, port, security=_scram(certs, "broker", BROKER_PW, "SCRAM-SHA-256")) as broker:
        assert broker.heartbeat(_heartbeat()).error_code != 31
    # TLS principal from the certificate's DN, authorized by its own ACL; the plaintext listener's
    # ANONYMOUS has none
    tls = ClientSecurity(
        "SSL",
        ssl_cafile=str(certs.ca),
        ssl_certfile=str(certs.client_cert),
        ssl_keyfile=str(certs.client_key),
    )
    with ControllerClient(*listeners.addresses["TLS"], security=tls) as by_cert:
        assert by_cert.heartbeat(_heartbeat()).error_code != 31
    with ControllerClient(*listeners.addresses["PLAIN"]) as anonymous:
        assert anonymous.heartbeat(_heartbeat()).error_code == 31
    assert _security_of(listeners, "PLAIN").refused["cluster_authorization_failed"] == 1


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        while sock.recv(4096):
            pass
    except (ConnectionResetError, ssl.SSLError):
        pass
    return True


def test_bad_input_is_refused_counted_and_the_listener_goes_on(
    listeners: RunningListeners, certs: Certs
) -> None:
    secure = _security_of(listeners, "SECURE")
    host, port = listeners.addresses["SECURE"]
    # a plaintext Kafka request to the TLS port: the handshake fails, the connection closes
    with socket.create_connection((host, port)) as s:
        s.sendall(wire.encode_request(M.API_VERSIONS, 0, 1, "plain", M.ApiVersionsRequest()))
        assert _closed(s)
    # an untrusted client certificate on the listener that requires one; none at all, too
    for cert, key in ((certs.rogue_cert, certs.rogue_key), (None, None)):
        rogue = ClientSecurity(
            "SSL",
            ssl_cafile=str(certs.ca),
            ssl_certfile=str(cert) if cert else None,
            ssl_keyfile=str(key) if key else None,
        )
        with pytest.raises(ControllerUnreachable):
            ControllerClient(*listeners.addresses["TLS"], security=rogue).heartbeat(_heartbeat())
    # an unknown mechanism: UNSUPPORTED_SASL_MECHANISM naming the enabled ones, then closed
    with pytest.raises(SaslRefused, match="SCRAM-SHA-512, SCRAM-SHA-256"):
        ControllerClient(host, port, security=_scram(certs, "broker", BROKER_PW, "PLAIN"))
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    ctx.check_hostname = False
    # SASL bytes before a handshake, and a controller request before authenticating: closed unanswered
    for frame in (
        _request(36, 1, 1, "x", b"\0\0\0\x05n,,n="),
        wire.encode_request(M.BROKER_HEARTBEAT, 1, 1, "x", _heartbeat()),
    ):
        with ctx.wrap_socket(socket.create_connection((host, port)), server_hostname=host) as s:
            s.sendall(frame)
            s.settimeout(10)
            assert s.recv(4) == b""
    tls = _security_of(listeners, "TLS")
    assert secure.refused["tls_handshake"] >= 1 and tls.refused["tls_handshake"] >= 2
    assert secure.refused["unsupported_sasl_mechanism"] == 1
    assert secure.refused["illegal_sasl_state"] == 2
    with ControllerClient(host, port, security=_scram(certs, "broker", BROKER_PW)) as ok:
        assert ok.heartbeat(_heartbeat()).error_code != 31  # the controller is unharmed
    scraped = generate_latest(MigrationMetrics().registry).decode()
    failed = 'kafka_server_socket_server_metrics_failed_authentication_total{listener="SECURE"} '
    assert float(scraped.split(failed)[1].split()[0]) >= 4  # TLS, mechanism, two SASL-state refusals
    assert 'zk2kraft_listener_refused_total{listener="TLS",reason="tls_handshake"}' in scraped


def _counted(counter: Counter[str], reason: str, n: int) -> bool:
    """The server counts a refusal on its connection's thread, after the alert the client reads."""
    deadline = time.monotonic() + 10
    while counter[reason] < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return counter[reason] == n


def _refused(scraped: str, listener: str, reason: str) -> float:
    line = f'zk2kraft_listener_refused_total{{listener="{listener}",reason="{reason}"}} '
    return float(scraped.split(line)[1].split()[0]) if line in scraped else 0.0


def test_expired_client_certificate_is_refused_and_the_listener_goes_on(
    listeners: RunningListeners, certs: Certs, expired: ExpiredCerts, caplog: pytest.LogCaptureFixture
) -> None:
    """The same DN as the accepted client and signed by the same CA, only out of date: Kafka's
    SSL listener with ssl.client.auth=required fails the handshake (an SSL handshake failure, counted
    as a failed authentication) and closes; the client reads the "certificate expired" alert."""
    tls = _security_of(listeners, "TLS")
    metrics = MigrationMetrics().registry
    before = _refused(generate_latest(metrics).decode(), "TLS", "tls_handshake")
    caplog.set_level(logging.INFO)
    out_of_date = ClientSecurity(
        "SSL",
        ssl_cafile=str(certs.ca),
        ssl_certfile=str(expired.client_cert),
        ssl_keyfile=str(expired.client_key),
    )
    with pytest.raises(ControllerUnreachable) as refused:
        ControllerClient(*listeners.addresses["TLS"], security=out_of_date).heartbeat(_heartbeat())
    line = str(refused.value)
    assert "\n" not in line and line.endswith(
        "TLS handshake failed: the controller refused it with the alert 'certificate expired'"
    ), line
    host, port = listeners.addresses["TLS"]
    client = KafkaNetClient(
        bootstrap_servers=f"{host}:{port}",
        security_protocol="SSL",
        ssl_cafile=str(certs.ca),
        ssl_certfile=str(expired.client_cert),
        ssl_keyfile=str(expired.client_key),
        ssl_check_hostname=False,
        reconnect_backoff_ms=10000,
    )
    try:
        with pytest.raises(KafkaError):
            client.await_ready("bootstrap-0", timeout_ms=5000)
    finally:
        client.close()
    assert any(
        "alert certificate expired" in r.getMessage() for r in caplog.records if r.name.startswith("kafka")
    )
    assert _counted(tls.refused, "tls_handshake", 2) and set(tls.refused) == {"tls_handshake"}
    said = [r.getMessage() for r in caplog.records if r.name == "zk2kraft.controller.security"]
    assert sum("(tls_handshake)" in m and "certificate has expired" in m for m in said) == 2, said
    assert _refused(generate_latest(metrics).decode(), "TLS", "tls_handshake") == before + 2
    good = ClientSecurity(
        "SSL",
        ssl_cafile=str(certs.ca),
        ssl_certfile=str(certs.client_cert),
        ssl_keyfile=str(certs.client_key),
    )
    with ControllerClient(*listeners.addresses["TLS"], security=good) as ok:
        assert ok.heartbeat(_heartbeat()).error_code != 31  # answered and authorized: unharmed


def test_an_expired_server_certificate_fails_the_clients_handshake_with_one_clear_line(
    service: ControllerService, certs: Certs, expired: ExpiredCerts, caplog: pytest.LogCaptureFixture
) -> None:
    props = _props(certs, **{"ssl.keystore.location": str(expired.server)})
    del props["ssl.key.password"]
    running = start_listeners(service, "SECURE://127.0.0.1:0", props)
    try:
        host, port = running.address
        with pytest.raises(ControllerUnreachable) as refused:
            ControllerClient(host, port, security=_scram(certs, "broker", BROKER_PW))
        assert str(refused.value) == (
            f"cannot reach the controller at {host}:{port}: "
            "TLS handshake failed: the controller's certificate is not accepted: certificate has expired"
        )
        caplog.set_level(logging.INFO)
        client = KafkaNetClient(
            bootstrap_servers=f"{host}:{port}",
            security_protocol="SASL_SSL",
            ssl_cafile=str(certs.ca),
            ssl_check_hostname=False,
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username="broker",
            sasl_plain_password=BROKER_PW,
            reconnect_backoff_ms=10000,
        )
        try:
            with pytest.raises(KafkaError):
                client.await_ready("bootstrap-0", timeout_ms=5000)
        finally:
            client.close()
        assert any(
            "certificate has expired" in r.getMessage() for r in caplog.records if r.name.startswith("kafka")
        )
        sec = running.servers[0].security
        assert _counted(sec.refused, "tls_handshake", 2) and sec.authenticated["authenticated"] == 0
    finally:
        running.stop()


def test_reauthentication_keeps_the_principal(service: ControllerService, certs: Certs) -> None:
    props = _props(certs, **{"connections.max.reauth.ms": "60000"})
    running = start_listeners(service, "SECURE://127.0.0.1:0", props)
    try:
        host, port = running.address
        client = ControllerClient(host, port, security=_scram(certs, "broker", BROKER_PW))
        time.sleep(1.1)  # KIP-368: at most one re-authentication a second (a protocol rule, not a wait)
        ids = iter(range(100, 200))
        sasl_authenticate(client._round_trip, lambda: next(ids), "b", _scram(certs, "broker", BROKER_PW))
        assert client.heartbeat(_heartbeat()).error_code != 31
        time.sleep(1.1)
        with pytest.raises((SaslRefused, ControllerUnreachable)):
            sasl_authenticate(client._round_trip, lambda: next(ids), "b", _scram(certs, "alice", ALICE_PW))
        sec = running.servers[0].security
        assert sec.authenticated["reauthenticated"] == 1 and sec.refused["reauthentication_failed"] == 1
        client.close()
    finally:
        running.stop()


def test_listener_settings_are_checked_without_printing_secrets(
    service: ControllerService, certs: Certs
) -> None:
    with pytest.raises(BadInputError) as e:
        listener_specs(_props(certs, **{"ssl.key.password": "wrong-" + certs.key_password}), service)
    assert certs.key_password not in str(e.value) and "ssl.keystore.location" in str(e.value)
    with pytest.raises(BadInputError, match="PEM"):
        listener_specs(_props(certs, **{"ssl.keystore.type": "JKS"}), service)
    with pytest.raises(BadInputError, match="GSSAPI"):
        listener_specs(_props(certs, **{"sasl.enabled.mechanisms": "GSSAPI"}), service)
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="jaas-secret-44";'
    specs = listener_specs(
        _props(
            certs,
            **{"sasl.enabled.mechanisms": "PLAIN", "listener.name.secure.plain.sasl.jaas.config": jaas},
        ),
        service,
    )
    assert "jaas-secret-44" not in repr(specs) and certs.key_password not in repr(specs)


class _CallerRecorder:
    """A handler as another engineer's would be: it reads who is calling, to check per topic."""

    def __init__(self, service: ControllerService) -> None:
        self.service = service
        self.callers: list[Caller | None] = []

    @property
    def image(self) -> ClusterImage:
        return self.service.image

    def handle(self, api_key: int, api_version: int, request: object, client_id: str | None) -> object:
        self.callers.append(current_caller())
        return M.BrokerHeartbeatResponse(0)


def test_handlers_see_the_authenticated_caller(service: ControllerService, certs: Certs) -> None:
    recorder = _CallerRecorder(service)
    running = start_listeners(recorder, "SECURE://127.0.0.1:0", _props(certs))
    try:
        with ControllerClient(*running.address, security=_scram(certs, "broker", BROKER_PW)) as client:
            assert client.heartbeat(_heartbeat()).error_code == 0
    finally:
        running.stop()
    (caller,) = recorder.callers
    assert caller is not None and (caller.principal, caller.host, caller.listener) == (
        "User:broker",
        "127.0.0.1",
        "SECURE",
    )
    assert caller.authorizer is not None and caller.authorizer.allowed(
        "User:broker", "127.0.0.1", "CLUSTER", "kafka-cluster", "CLUSTER_ACTION"
    )
    assert current_caller() is None  # bound only while the handler runs


def test_sasl_plaintext_with_plain_users_from_a_jaas_file(
    service: ControllerService, certs: Certs, tmp_path: Path
) -> None:
    jaas = tmp_path / "kafka_server_jaas.conf"
    jaas.write_text(
        "KafkaServer {\n  org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  user_admin="admin-jaas-pw" user_carol="carol-jaas-pw";\n};\n'
    )
    props = _props(
        certs,
        **{
            "listener.security.protocol.map": "SP:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "java.security.auth.login.config": str(jaas),
        },
    )
    running = start_listeners(service, "SP://127.0.0.1:0", props)

    def plain(user: str, pw: str) -> ClientSecurity:
        return ClientSecurity("SASL_PLAINTEXT", sasl_mechanism="PLAIN", username=user, password=pw)

    try:
        with ControllerClient(*running.address, security=plain("admin", "admin-jaas-pw")) as admin:
            assert admin.heartbeat(_heartbeat()).error_code != 31  # super.users=User:admin
        with ControllerClient(*running.address, security=plain("carol", "carol-jaas-pw")) as carol:
            assert carol.heartbeat(_heartbeat()).error_code == 31  # no ACL
        with pytest.raises(SaslRefused, match="Invalid username or password"):
            ControllerClient(*running.address, security=plain("carol", "guess"))
    finally:
        running.stop()


def _allow_topics(service: ControllerService, principal: str, prefix: str, operation: int) -> None:
    """A PREFIXED topic ACL appended as the migration would append it (counts from the next request)."""
    acl = record(
        "AccessControlEntryRecord",
        Id=uuid.uuid4(),
        ResourceType=2,  # TOPIC
        ResourceName=prefix,
        PatternType=4,  # PREFIXED
        Principal=principal,
        Host="*",
        Operation=operation,
        PermissionType=3,  # ALLOW
    )
    with service.lock:
        service.builder.replay(service.next_offset(), acl)


def test_admin_requests_are_narrowed_per_topic_and_config_before_the_handler(
    listeners: RunningListeners, service: ControllerService, certs: Certs
) -> None:
    """What alice may touch reaches the handler (which, before the copy, answers NOT_CONTROLLER 41);
    the rest is answered 29 per topic or 31 per broker config; a resource named twice is the handler's."""
    import datetime

    from kio.schema.create_partitions.v3 import request as cp
    from kio.schema.describe_configs.v4 import request as dc
    from kio.schema.incremental_alter_configs.v1 import request as iac

    _allow_topics(service, "User:alice", "mine.", 7)  # ALTER
    _allow_topics(service, "User:alice", "mine.", 11)  # ALTER_CONFIGS (implies DESCRIBE_CONFIGS)
    host, port = listeners.addresses["SECURE"]
    with ControllerClient(host, port, security=_scram(certs, "alice", ALICE_PW)) as alice:
        described = alice.call(
            32,
            4,
            dc.DescribeConfigsRequest(
                resources=tuple(
                    dc.DescribeConfigsResource(
                        resource_type=kind, resource_name=name, configuration_keys=None
                    )
                    for kind, name in ((2, "mine.a"), (2, "theirs"), (4, "1"), (2, "mine.a"))
                )
            ),
        )
        assert sorted((r.resource_name, int(r.error_code)) for r in described.results) == [
            ("1", 31),
            ("mine.a", 41),
            ("mine.a", 41),
            ("theirs", 29),
        ]

        def alter(name: str, kind: int = 2) -> iac.AlterConfigsResource:
            op = iac.AlterableConfig(name="retention.ms", config_operation=0, value="1")
            return iac.AlterConfigsResource(resource_type=kind, resource_name=name, configs=(op,))

        ask = (alter("mine.a"), alter("theirs"), alter("twice"), alter("twice"), alter("", 4))
        altered = alice.call(44, 1, iac.IncrementalAlterConfigsRequest(resources=ask, validate_only=False))
        assert sorted((r.resource_name, int(r.error_code)) for r in altered.responses) == [
            ("", 31),
            ("mine.a", 41),
            ("theirs", 29),
            ("twice", 41),  # not authorized: the handler answers a duplicate (INVALID_REQUEST once serving)
            ("twice", 41),
        ]
        parts = alice.call(
            37,
            3,
            cp.CreatePartitionsRequest(
                topics=tuple(
                    cp.CreatePartitionsTopic(name=n, count=3, assignments=None) for n in ("mine.b", "theirs")
                ),
                timeout=datetime.timedelta(seconds=5),
                validate_only=False,
            ),
        )
        assert sorted((r.name, int(r.error_code)) for r in parts.results) == [("mine.b", 41), ("theirs", 29)]
    refused = _security_of(listeners, "SECURE").refused
    assert (refused["topic_authorization_failed"], refused["cluster_authorization_failed"]) == (3, 2)


def test_ssl_client_auth_requested_serves_clients_with_and_without_a_certificate(
    service: ControllerService, certs: Certs
) -> None:
    """`ssl.client.auth=requested`: a client without a certificate is served as ANONYMOUS, one with a
    certificate as the principal its DN maps to (`ssl.principal.mapping.rules`), as Kafka's SSL
    listener does; a certificate nobody trusts is still refused."""
    recorder = _CallerRecorder(service)
    props = _props(
        certs,
        **{
            "listener.name.tls.ssl.client.auth": "requested",
            "ssl.principal.mapping.rules": "RULE:^.*CN=([^,]+).*$/$1/L,DEFAULT",
            "authorizer.class.name": "",
        },
    )
    running = start_listeners(recorder, "TLS://127.0.0.1:0", props)
    try:
        host, port = running.address
        without = ClientSecurity("SSL", ssl_cafile=str(certs.ca))
        with ControllerClient(host, port, security=without) as client:
            assert client.heartbeat(_heartbeat()).error_code == 0
        with_cert = ClientSecurity(
            "SSL",
            ssl_cafile=str(certs.ca),
            ssl_certfile=str(certs.client_cert),
            ssl_keyfile=str(certs.client_key),
        )
        with ControllerClient(host, port, security=with_cert) as client:
            assert client.heartbeat(_heartbeat()).error_code == 0
        rogue = ClientSecurity(
            "SSL",
            ssl_cafile=str(certs.ca),
            ssl_certfile=str(certs.rogue_cert),
            ssl_keyfile=str(certs.rogue_key),
        )
        with pytest.raises(ControllerUnreachable):
            with ControllerClient(host, port, security=rogue) as client:
                client.heartbeat(_heartbeat())
    finally:
        running.stop()
    assert [c.principal for c in recorder.callers if c is not None] == ["User:ANONYMOUS", "User:broker-1"]


def test_sasl_authenticate_v0_is_answered_without_a_session_lifetime(
    service: ControllerService, certs: Certs, tmp_path: Path
) -> None:
    """SaslAuthenticate v0 (Kafka 1.0's framing, still sent by old clients): the same exchange, its
    answer without v1's SessionLifetimeMs; a wrong password gets 58 in v0's shape too."""
    jaas = tmp_path / "kafka_server_jaas.conf"
    jaas.write_text(
        "KafkaServer {\n  org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  user_admin="admin-jaas-pw";\n};\n'
    )
    props = _props(
        certs,
        **{
            "listener.security.protocol.map": "SP:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "java.security.auth.login.config": str(jaas),
        },
    )
    running = start_listeners(service, "SP://127.0.0.1:0", props)

    def login(password: str) -> tuple[socket.socket, bytes]:
        sock = socket.create_connection(running.address, timeout=10)
        sock.sendall(_request(17, 1, 1, "old", struct.pack(">h", 5) + b"PLAIN"))
        assert struct.unpack_from(">h", _frame_body(sock), 4)[0] == 0
        token = b"\x00admin\x00" + password.encode()
        sock.sendall(_request(36, 0, 2, "old", struct.pack(">i", len(token)) + token))
        return sock, _frame_body(sock)

    try:
        sock, body = login("admin-jaas-pw")
        with sock:
            # correlation id, error 0, null message (-1), empty auth bytes: and nothing after them
            assert body == struct.pack(">ihhi", 2, 0, -1, 0)
        sock, body = login("guess")
        with sock:
            (cid, error, n) = struct.unpack_from(">ihh", body, 0)
            assert (cid, error) == (2, 58)
            assert body[8 : 8 + n] == b"Authentication failed: Invalid username or password"
            assert len(body) == 8 + n + 4  # then empty auth bytes, no SessionLifetimeMs
    finally:
        running.stop()


def _frame_body(sock: socket.socket) -> bytes:
    from migrator.controller.client.client import _recv

    (size,) = struct.unpack(">i", _recv(sock, 4))
    return _recv(sock, size)
