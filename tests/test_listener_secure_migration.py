"""A migration whose controller listener is SASL_SSL with the ACLs on: the brokers' SCRAM credential and
their CLUSTER_ACTION ACL exist only in ZooKeeper (/config/users, /kafka-acl) before the copy; the broker
simulator (a separate process, as `fixtures simulate-brokers --command-config` runs it) authenticates
with that credential over TLS and registers; a client whose user has no ACL is refused."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import ROOT, cluster
from tls_certs import make_certs

from migrator import commands
from migrator.controller.client.client import ControllerClient
from migrator.controller.network.listener_config import set_default_properties
from migrator.controller.protocol import messages as M
from migrator.controller.security.client_security import ClientSecurity
from migrator.controller.security.scram_server import scram_credential
from migrator.zk.credential_codec import encode_scram

pytestmark = [pytest.mark.zk]

BROKER_PW = "sim-broker-pw-2b7d"
EVE_PW = "eve-pw-0c1f"


def scram_user(zk: KazooClient, name: str, password: str, mechanism: str = "SCRAM-SHA-512") -> set[str]:
    """A SCRAM user as ZooKeeper-mode Kafka stores it; the base64 salt and keys, to search output for."""
    cred = scram_credential(name, mechanism, password, uuid.uuid4().bytes, 4096)
    value = {"version": 1, "config": {mechanism: encode_scram(cred)}}
    zk.ensure_path("/config/users")
    zk.create(f"/config/users/{name}", json.dumps(value).encode())
    return {base64.b64encode(v).decode() for v in (cred.salt, cred.stored_key, cred.server_key)}


def grant_cluster_action(zk: KazooClient, principal: str) -> None:
    """CLUSTER_ACTION on the cluster in /kafka-acl, next to the generated cluster's own ACLs there."""
    mine = {"principal": principal, "permissionType": "Allow", "operation": "ClusterAction", "host": "*"}
    path = "/kafka-acl/Cluster/kafka-cluster"
    if zk.exists(path):
        data = json.loads(zk.get(path)[0])
        data["acls"].append(mine)
        zk.set(path, json.dumps(data).encode())
    else:
        zk.ensure_path("/kafka-acl/Cluster")
        zk.create(path, json.dumps({"version": 1, "acls": [mine]}).encode())


def test_simulated_brokers_register_over_sasl_ssl_with_migrated_scram_and_acls(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    certs = make_certs(tmp_path / "certs")
    with cluster(zk, zk_connect) as generated:
        scram_user(zk, "sim-broker", BROKER_PW)
        scram_user(zk, "eve", EVE_PW)
        grant_cluster_action(zk, "User:sim-broker")
        set_default_properties(
            {
                "listener.security.protocol.map": "CONTROLLER:SASL_SSL",
                "ssl.keystore.location": str(certs.server),
                "ssl.truststore.location": str(certs.ca),
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            }
        )
        running = commands.start_controller(
            zk_connect,
            str(tmp_path / "meta"),
            listen="CONTROLLER://127.0.0.1:0",
            yes=True,
            # the copy first: before it the image holds no credentials or ACLs (as in Kafka, whose
            # controller's log is empty before the migration), so SCRAM brokers register after it
            brokers_from_zk=True,
            session_timeout_ms=3000,
        )
        client_props = tmp_path / "broker-client.properties"
        client_props.write_text(
            "security.protocol=SASL_SSL\n"
            f"ssl.truststore.location={certs.ca}\n"
            "ssl.truststore.type=PEM\n"
            "ssl.endpoint.identification.algorithm=\n"
            "sasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="sim-broker" password="{BROKER_PW}";\n'
        )
        host, port = running.address
        proc = subprocess.Popen(
            [sys.executable, "-m", "zk_fixtures.broker_sim_cli", "--controller", f"{host}:{port}",
             "--zookeeper", zk_connect, "--interval", "0.3", "--command-config", str(client_props)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert proc.stdout is not None
            # `ready` only once every broker's registration was answered NONE over SASL_SSL
            line = proc.stdout.readline().strip()
            assert line == "ready", proc.stderr.read() if proc.stderr else line
            eve = ClientSecurity(
                "SASL_SSL",
                ssl_cafile=str(certs.ca),
                sasl_mechanism="SCRAM-SHA-512",
                username="eve",
                password=EVE_PW,
            )
            with ControllerClient(host, port, security=eve) as client:
                hb = client.heartbeat(M.BrokerHeartbeatRequest(min(generated.image.brokers), 1, 0))
                assert hb.error_code == 31
        finally:
            proc.terminate()
            out, err = proc.communicate(timeout=30)
            running.stop()
            set_default_properties({})
        assert BROKER_PW not in out + err
