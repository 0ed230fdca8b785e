"""Envelope (apiKey 58) over TCP against the real listener and the real ZooKeeper, built from kio's own
types as a forwarding broker builds it: the inner request runs as the forwarded client (its principal
and address checked against the migrated ACLs, host restrictions included), the envelope's own
connection needs CLUSTER_ACTION, and a malformed envelope gets Kafka's error with the listener unharmed."""

from __future__ import annotations

import datetime
import ipaddress
import json
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kio.schema.create_acls.v3 import request as ca3
from kio.schema.create_topics.v7 import request as ct7
from kio.schema.envelope.v0.request import EnvelopeRequest
from kio.schema.metadata.v12 import request as md12
from migrate_helpers import cluster
from prometheus_client import generate_latest
from test_admin_protocol import _register_all
from test_listener_admin_authorization import secured_controller
from test_listener_secure_migration import grant_cluster_action, scram_user
from test_listener_tls_sasl import service  # noqa: F401  (the fixture: a ControllerService without ZooKeeper)

from migrator import commands
from migrator.controller.apis.envelope import principal_bytes
from migrator.controller.client.client import ControllerClient
from migrator.controller.network.listener_config import start_listeners
from migrator.controller.protocol import wire
from migrator.controller.security.client_security import ClientSecurity
from migrator.metrics import MigrationMetrics
from migrator.zk import paths as P

pytestmark = pytest.mark.zk

PASSWORDS = {"broker": "broker-pw-5d1e", "client": "client-pw-0b7a"}
TOPIC_AUTH, CLUSTER_AUTH, UNSUPPORTED_VERSION, NOT_CONTROLLER, INVALID_REQUEST = 29, 31, 35, 41, 42
PRINCIPAL_DESERIALIZATION_FAILURE = 97
LISTENER = "FWD"


def _acl(zk: KazooClient, path: str, principal: str, operation: str, host: str = "*") -> None:
    """An ACL as ZooKeeper-mode Kafka stores it, next to those already at ``path``."""
    mine = {"principal": principal, "permissionType": "Allow", "operation": operation, "host": host}
    if zk.exists(path):
        data = json.loads(zk.get(path)[0])
        data["acls"].append(mine)
        zk.set(path, json.dumps(data).encode())
    else:
        zk.create(path, json.dumps({"version": 1, "acls": [mine]}).encode(), makepath=True)


def _create(name: str, partitions: int = 1, validate_only: bool = False) -> ct7.CreateTopicsRequest:
    topic = ct7.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=(), configs=()
    )
    return ct7.CreateTopicsRequest(
        topics=(topic,), timeout=datetime.timedelta(seconds=30), validate_only=validate_only
    )


def _inner(api_key: int, version: int, request: Any, correlation_id: int = 7) -> bytes:
    """A whole request (header and body, no size), as the client sent it to the forwarding broker."""
    return wire.encode_request(api_key, version, correlation_id, "client-app", request)[4:]


def _envelope(
    data: bytes, principal: bytes | None = None, address: bytes = bytes([10, 0, 0, 1])
) -> EnvelopeRequest:
    return EnvelopeRequest(
        request_data=data,
        request_principal=principal_bytes("User:alice") if principal is None else principal,
        client_host_address=address,
    )


def _forward(c: ControllerClient, envelope: EnvelopeRequest) -> tuple[int, Any]:
    """(the envelope's error code, the inner response decoded or None)."""
    answer = c.call(58, 0, envelope)
    if answer.response_data is None:
        return int(answer.error_code), None
    head = envelope.request_data[:4]
    api_key, version = int.from_bytes(head[:2], "big"), int.from_bytes(head[2:], "big")
    correlation, inner = wire.decode_response(api_key, version, answer.response_data)
    assert correlation == 7  # the inner response carries the forwarded request's own correlation id
    return int(answer.error_code), inner


def _envelopes(result: str) -> float:
    scraped = generate_latest(MigrationMetrics().registry).decode()
    key = f'zk2kraft_listener_envelopes_total{{listener="{LISTENER}",result="{result}"}} '
    return sum(float(line[len(key) :]) for line in scraped.splitlines() if line.startswith(key))


def test_envelope_runs_the_inner_request_as_the_forwarded_client(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    props = {
        "listener.security.protocol.map": f"{LISTENER}:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    with cluster(zk, zk_connect):
        for user, pw in PASSWORDS.items():
            scram_user(zk, user, pw)
        # the broker may forward (CLUSTER_ACTION) and could create any topic itself (CREATE on the cluster)
        grant_cluster_action(zk, "User:broker")
        _acl(zk, "/kafka-acl/Cluster/kafka-cluster", "User:broker", "Create")
        # alice may create fwd.* from anywhere; hugo only from 10.20.30.40
        _acl(zk, "/kafka-acl-extended/prefixed/Topic/fwd.", "User:alice", "Create")
        _acl(zk, "/kafka-acl-extended/prefixed/Topic/hugo.", "User:hugo", "Create", host="10.20.30.40")
        with secured_controller(zk, zk_connect, tmp_path, LISTENER, props) as running:
            service = running.service
            assert service is not None
            host, port = running.address

            def connect(user: str) -> ControllerClient:
                sec = ClientSecurity(
                    "SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512", username=user, password=PASSWORDS[user]
                )
                return ControllerClient(host, port, security=sec, timeout_s=30)

            with connect("broker") as broker:
                # forwarded CreateTopics: run as alice, durable in the log and in ZooKeeper
                code, inner = _forward(broker, _envelope(_inner(19, 7, _create("fwd.one", 2))))
                assert code == 0
                [made] = inner.topics
                assert (made.name, int(made.error_code), made.num_partitions) == ("fwd.one", 0, 2)
                assert len(json.loads(zk.get(P.topic_path("fwd.one"))[0])["partitions"]) == 2
                assert "fwd.one" in service.image.topics

                # mallory has no ACL: 29 inside the response, though the broker itself could create it
                code, inner = _forward(
                    broker,
                    _envelope(_inner(19, 7, _create("fwd.mallory")), principal_bytes("User:mallory")),
                )
                assert code == 0 and [int(t.error_code) for t in inner.topics] == [TOPIC_AUTH]
                assert not zk.exists(P.topic_path("fwd.mallory"))
                [direct] = broker.call(19, 7, _create("fwd.mallory", validate_only=True)).topics
                assert int(direct.error_code) == 0
                # a cluster-level inner API is checked for the forwarded principal too
                acl = ca3.AclCreation(
                    resource_type=2,
                    resource_name="fwd.",
                    resource_pattern_type=4,
                    principal="User:alice",
                    host="*",
                    operation=2,
                    permission_type=3,
                )
                code, inner = _forward(
                    broker, _envelope(_inner(30, 3, ca3.CreateAclsRequest(creations=(acl,))))
                )
                assert code == 0 and [int(r.error_code) for r in inner.results] == [CLUSTER_AUTH]

                # host-restricted ACL: matched against the forwarded client's address, IPv4 or IPv4-mapped
                v4 = ipaddress.ip_address("10.20.30.40")
                mapped = ipaddress.IPv6Address(f"::ffff:{v4}")
                for name, address, want in (
                    ("hugo.a", v4.packed, 0),
                    ("hugo.b", ipaddress.ip_address("10.20.30.41").packed, TOPIC_AUTH),
                    ("hugo.c", mapped.packed, 0),
                ):
                    code, inner = _forward(
                        broker,
                        _envelope(_inner(19, 7, _create(name)), principal_bytes("User:hugo"), address),
                    )
                    assert (code, [int(t.error_code) for t in inner.topics]) == (0, [want]), name
                    assert bool(zk.exists(P.topic_path(name))) == (want == 0)

                # malformed envelopes: Kafka's errors, nothing run, the same connection goes on
                topics_before = set(zk.get_children(P.TOPICS))
                good = _inner(19, 7, _create("fwd.never"))
                for envelope, want in (
                    (_envelope(good, b"\x00\x00\xff\xff"), PRINCIPAL_DESERIALIZATION_FAILURE),
                    (_envelope(good, b"\x00\x01" + principal_bytes("User:alice")[2:]), 97),
                    (_envelope(good, b""), PRINCIPAL_DESERIALIZATION_FAILURE),
                    (_envelope(good, address=b"\x0a\x00\x00"), INVALID_REQUEST),
                    (_envelope(good[: len(good) - 9]), UNSUPPORTED_VERSION),  # truncated RequestData
                    (_envelope(good[:5]), UNSUPPORTED_VERSION),  # not even a header
                    (_envelope(good[:2] + b"\x00\x01" + good[4:]), UNSUPPORTED_VERSION),  # v1: not served
                    (
                        _envelope(
                            _inner(
                                3,
                                12,
                                md12.MetadataRequest(
                                    topics=None,
                                    allow_auto_topic_creation=False,
                                    include_topic_authorized_operations=False,
                                ),
                            )
                        ),
                        INVALID_REQUEST,  # Metadata is not forwardable
                    ),
                    (
                        _envelope(_inner(58, 0, _envelope(good))),
                        INVALID_REQUEST,
                    ),  # an envelope in an envelope
                ):
                    assert _forward(broker, envelope) == (want, None)
                assert set(zk.get_children(P.TOPICS)) == topics_before
                code, inner = _forward(broker, _envelope(_inner(19, 7, _create("fwd.after"))))
                assert (code, int(inner.topics[0].error_code)) == (0, 0)

            # the envelope's own connection needs CLUSTER_ACTION: refused whole, nothing inside run
            with connect("client") as client:
                assert _forward(client, _envelope(_inner(19, 7, _create("fwd.two")))) == (CLUSTER_AUTH, None)
            assert not zk.exists(P.topic_path("fwd.two")) and "fwd.two" not in service.image.topics

            assert _envelopes("forwarded") >= 7
            assert _envelopes("principal_deserialization_failure") >= 3
            assert _envelopes("cluster_authorization_failed") >= 1


def test_envelope_before_the_copy_answers_not_controller(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """Soft start (KIP-866): the inner admin request answers NOT_CONTROLLER, so the envelope does (Kafka's
    RequestChannel turns an inner NOT_CONTROLLER into the envelope's own, for the broker to look again)."""
    with cluster(zk, zk_connect):
        running = commands.start_controller(
            zk_connect, str(tmp_path / "meta"), listen="127.0.0.1:0", yes=True, broker_wait_timeout=60
        )
        try:
            service = running.service
            assert service is not None and service.soft_start
            with ControllerClient(*running.address, timeout_s=30) as broker:
                envelope = _envelope(_inner(19, 7, _create("fwd.early")))
                assert _forward(broker, envelope) == (NOT_CONTROLLER, None)
            assert not zk.exists(P.topic_path("fwd.early"))
            # past the copy the same envelope is run
            _register_all(service, sorted(int(b) for b in zk.get_children(P.BROKER_IDS)))
            assert running.wait_until(lambda r: service.admin is not None, 60), running.error
            with ControllerClient(*running.address, timeout_s=30) as broker:
                code, inner = _forward(broker, envelope)
            assert (code, int(inner.topics[0].error_code)) == (0, 0)
            assert zk.exists(P.topic_path("fwd.early"))
        finally:
            running.stop()


def test_metadata_names_the_listener_the_request_arrived_on(service: Any) -> None:  # noqa: F811
    """Each listener's clients bootstrap to that listener (Kafka names the node's endpoint for the
    request's listener name), and a wildcard bind is named by the address the client reached."""
    listeners = start_listeners(
        service,
        "A://0.0.0.0:0,B://127.0.0.1:0",
        {"listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT"},
    )
    try:
        port_a, port_b = listeners.addresses["A"][1], listeners.addresses["B"][1]
        ask = md12.MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        for address in (("127.0.0.2", port_a), ("127.0.0.1", port_b)):
            with ControllerClient(*address, timeout_s=30) as c:
                answer = c.call(3, 12, ask)
            assert [(b.host, b.port) for b in answer.brokers] == [address]
            assert answer.controller_id == service.core.config.node_id
    finally:
        listeners.stop()
