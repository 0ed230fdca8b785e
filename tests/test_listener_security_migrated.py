"""The listener's security building blocks work on migrated metadata: a SCRAM credential in ZooKeeper's
``/config/users`` form and ACLs as the copy writes them reach the controller's image through the
metadata records, and there authenticate kafka-python's SCRAM client and authorize requests; an ACL
record appended later counts from the next check."""

from __future__ import annotations

import sys
import threading
import time
import uuid

import pytest
from kafka.net.sasl.scram import ScramClient

from migrator.controller.security.api_acls import (
    CLUSTER_AUTHORIZATION_FAILED,
    authorize_cluster,
    authorized_topics,
)
from migrator.controller.security.authorizer import StandardAuthorizer
from migrator.controller.security.sasl_errors import SaslAuthenticationFailed
from migrator.controller.security.scram_server import ScramServer, scram_credential
from migrator.kraft.image import records_from_image, replay
from migrator.kraft.records import record
from migrator.model import Acl, ClusterImage
from migrator.zk.credential_codec import decode_scram, encode_scram

HOST = "192.0.2.10"


def migrated_image() -> ClusterImage:
    # /config/users/alice as ZooKeeper-mode Kafka writes it, decoded by the codec the copy uses
    zk_value = encode_scram(scram_credential("alice", "SCRAM-SHA-512", "alice-pw", b"NaCl-from-zk", 8192))
    cred = decode_scram("/config/users/alice", "alice", "SCRAM-SHA-512", zk_value)
    image = ClusterImage()
    image.scram_credentials[("alice", "SCRAM-SHA-512")] = cred
    image.acls = [
        Acl(
            resource_type="TOPIC",
            resource_name="orders",
            pattern_type="PREFIXED",
            principal="User:alice",
            host="*",
            operation="CREATE",
            permission_type="ALLOW",
        ),
        Acl(
            resource_type="CLUSTER",
            resource_name="kafka-cluster",
            pattern_type="LITERAL",
            principal="User:broker",
            host="*",
            operation="CLUSTER_ACTION",
            permission_type="ALLOW",
        ),
    ]
    return image


def controller_image() -> ClusterImage:
    """The image the controller holds after replaying what the copy wrote."""
    records = list(records_from_image(migrated_image()))
    return replay(enumerate(records)).image


def login(image: ClusterImage, password: str) -> str:
    server = ScramServer("SCRAM-SHA-512", lambda u, m: image.scram_credentials.get((u, m)))
    client = ScramClient("alice", password, "SCRAM-SHA-512")
    client.process_server_first_message(server.evaluate(client.first_message()))
    client.process_server_final_message(server.evaluate(client.final_message()))
    assert server.authorization_id is not None
    return "User:" + server.authorization_id


def test_migrated_scram_user_authenticates_and_is_authorized_by_migrated_acls() -> None:
    image = controller_image()
    principal = login(image, "alice-pw")
    with pytest.raises(SaslAuthenticationFailed):
        login(image, "not-alice-pw")

    auth = StandardAuthorizer.from_image(image, {"super.users": "User:admin"})
    assert len(auth) == 2 and all(a.acl_id for a in auth.acls())  # ids as the copy assigned them
    assert authorized_topics(auth, principal, HOST, 19, ["orders.eu", "payments"]) == (
        {"orders.eu"},
        {"payments"},
    )
    assert authorize_cluster(auth, principal, HOST, 62) == CLUSTER_AUTHORIZATION_FAILED  # BrokerRegistration
    assert authorize_cluster(auth, "User:broker", HOST, 62) == 0


def test_acl_records_appended_during_the_migration_count_at_once() -> None:
    image = controller_image()
    auth = StandardAuthorizer.from_image(image, {})
    deny = record(
        "AccessControlEntryRecord",
        Id=uuid.uuid4(),
        ResourceType=2,
        ResourceName="orders.secret",
        PatternType=3,
        Principal="User:alice",
        Host="*",
        Operation=5,  # CREATE
        PermissionType=2,  # DENY
    )
    assert auth.apply_record(deny.api_key, deny.fields)
    assert authorized_topics(auth, "User:alice", HOST, 19, ["orders.secret", "orders.eu"]) == (
        {"orders.eu"},
        {"orders.secret"},
    )
    remove = record("RemoveAccessControlEntryRecord", Id=deny.fields["Id"])
    assert auth.apply_record(remove.api_key, remove.fields)
    assert authorized_topics(auth, "User:alice", HOST, 19, ["orders.secret"]) == ({"orders.secret"}, set())


def test_checks_during_concurrent_acl_changes_see_whole_changes() -> None:
    auth = StandardAuthorizer.from_image(controller_image(), {})
    stop = threading.Event()
    errors: list[BaseException] = []

    def churn() -> None:
        i = 0
        while not stop.is_set():
            acl = Acl(
                resource_type="TOPIC",
                resource_name=f"o{i % 50}",
                pattern_type="PREFIXED",
                principal="User:bob",
                host="*",
                operation="READ",
                permission_type="ALLOW",
                acl_id=f"churn{i % 50}",
            )
            auth.add(acl)
            if i % 3 == 0:
                auth.remove(f"churn{(i * 7) % 50}")
            i += 1

    writer = threading.Thread(target=churn)
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # interleave the two threads as finely as CPython allows
    writer.start()
    try:
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            # alice's own ACL is never touched by the writer: her answer must never flicker
            assert auth.allowed("User:alice", HOST, "TOPIC", "orders.o1x", "CREATE")
            auth.allowed("User:bob", HOST, "TOPIC", "o17-topic", "READ")  # buckets being replaced
    except BaseException as e:  # noqa: BLE001 - reported below with the writer stopped
        errors.append(e)
    finally:
        stop.set()
        writer.join(timeout=30)
        sys.setswitchinterval(old_interval)
    assert not errors
    assert len(auth) > 2  # the writer did run
