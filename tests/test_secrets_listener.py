"""Invariant 6 for the secured listener, with the controller run the way an operator runs it:
`zk2kraft -v --config controller.properties controller` serves both listeners of the file (SASL_SSL
and SSL, no --listen); the simulated brokers authenticate with SASL/PLAIN as the super user from the
JAAS setting and register in soft start; once migrated, kafka-python logs in with a SCRAM credential
that came from ZooKeeper, and someone tries a wrong password. The keystore password, the JAAS
passwords, the SCRAM passwords and the migrated SCRAM salts and keys (in every spelling) appear in no
output, in no `status --json` and in no Prometheus scrape of the controller's --metrics-listen."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from kafka.errors import KafkaError
from kafka.net.compat import KafkaNetClient
from kazoo.client import KazooClient
from migrate_helpers import ROOT, ZK2KRAFT, cluster, run_cli
from test_listener_secure_migration import grant_cluster_action, scram_user
from test_secrets import _scram_blobs
from tls_certs import make_certs

pytestmark = [pytest.mark.zk, pytest.mark.slow]

JAAS_ADMIN_PW = "jaas-Admin-pw-6641"
SCRAM_PW = "scram-Client-pw-2290"
WRONG_PW = "wrong-Guess-pw-7113"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], out: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}
    return subprocess.Popen(
        [*ZK2KRAFT, *args], cwd=ROOT, env=env, stdout=out.open("w"), stderr=subprocess.STDOUT, text=True
    )


def _kafka_python(port: int, ca: Path, password: str) -> bool:
    client = KafkaNetClient(
        bootstrap_servers=f"127.0.0.1:{port}",
        security_protocol="SASL_SSL",
        ssl_cafile=str(ca),
        ssl_check_hostname=False,
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="app",
        sasl_plain_password=password,
        reconnect_backoff_ms=10000,
    )
    try:
        return bool(client.await_ready("bootstrap-0", timeout_ms=15000))
    except KafkaError:
        return False
    finally:
        client.close()


def test_secured_controller_from_its_properties_prints_no_secret(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    certs = make_certs(tmp_path / "certs")
    secure, tls, metrics = _free_port(), _free_port(), _free_port()
    log_dir = tmp_path / "meta"
    props = tmp_path / "controller.properties"
    props.write_text(
        f"zookeeper.connect={zk_connect}\n"
        f"metadata.log.dir={log_dir}\n"
        f"listeners=SECURE://127.0.0.1:{secure},TLS://127.0.0.1:{tls}\n"
        "listener.security.protocol.map=SECURE:SASL_SSL,TLS:SSL\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={certs.server_encrypted}\n"
        f"ssl.key.password={certs.key_password}\n"
        f"ssl.truststore.location={certs.ca}\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256\n"
        "listener.name.secure.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
        f'required username="admin" password="{JAAS_ADMIN_PW}" user_admin="{JAAS_ADMIN_PW}";\n'
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:admin\n"
    )
    sim_props = tmp_path / "broker.properties"
    sim_props.write_text(
        "security.protocol=SASL_SSL\n"
        f"ssl.truststore.location={certs.ca}\n"
        "ssl.endpoint.identification.algorithm=\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{JAAS_ADMIN_PW}";\n'
    )
    ctl_out, sim_out = tmp_path / "controller.out", tmp_path / "sim.out"
    with cluster(zk, zk_connect):
        scram_blobs = scram_user(zk, "app", SCRAM_PW, "SCRAM-SHA-256")
        grant_cluster_action(zk, "User:app")
        scram_blobs |= _scram_blobs(zk, "app")  # raw, base64, urlsafe base64, hex, repr
        ctl = _start(
            ["-v", "--config", str(props), "controller", "--yes", "--metrics-listen", f"127.0.0.1:{metrics}"],
            ctl_out,
        )
        sim = None
        try:
            deadline = time.monotonic() + 90
            while f"127.0.0.1:{secure}" not in ctl_out.read_text() and time.monotonic() < deadline:
                assert ctl.poll() is None, ctl_out.read_text()[-2000:]
                time.sleep(0.2)
            sim = _start(
                ["-v", "fixtures", "simulate-brokers", "-z", zk_connect, "--controller", f"127.0.0.1:{secure}",
                 "--command-config", str(sim_props)],
                sim_out,
            )  # fmt: skip
            state, status = None, ""
            while time.monotonic() < deadline:
                r = run_cli(["status", "-z", zk_connect, "-l", str(log_dir), "--json"])
                status = r.stdout + r.stderr
                if r.returncode == 0 and json.loads(r.stdout)["state"] == "DualWriteMetadata":
                    state = "DualWriteMetadata"
                    break
                time.sleep(0.5)
            assert state == "DualWriteMetadata", (
                status[-500:],
                ctl_out.read_text()[-2000:],
                sim_out.read_text()[-2000:],
            )
            assert _kafka_python(secure, certs.ca, SCRAM_PW)  # the migrated credential
            assert not _kafka_python(secure, certs.ca, WRONG_PW)
            with socket.create_connection(("127.0.0.1", tls)) as s:  # the SSL listener serves too
                s.sendall(b"\0\0\0\x0a" + uuid.uuid4().bytes[:10])
                s.settimeout(10)
                try:
                    data = s.recv(100)
                except ConnectionResetError:
                    data = b""
                assert data == b"" or data[0] == 0x15  # closed (or a TLS alert): no Kafka answer
            # after logins, a wrong password and a refused handshake: what Prometheus would scrape
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=30) as page:
                scraped = page.read().decode()
            ok = 'kafka_server_socket_server_metrics_successful_authentication_total{listener="SECURE"} '
            failed = 'kafka_server_socket_server_metrics_failed_authentication_total{listener="SECURE"} '
            assert float(scraped.split(ok)[1].split()[0]) >= 1, scraped[-3000:]
            assert float(scraped.split(failed)[1].split()[0]) >= 1
            assert 'zk2kraft_listener_refused_total{listener="TLS",reason="tls_handshake"}' in scraped
            assert "\nkafka_controller_KafkaController_ZkMigrationState 1.0\n" in scraped  # MIGRATION
        finally:
            for proc in (ctl, sim):
                if proc is not None and proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(30)
    texts = {
        "controller": ctl_out.read_text(),
        "simulator": sim_out.read_text(),
        "status --json": status,
        "metrics": scraped,
    }
    assert "refused a connection (sasl_authentication_failed)" in texts["controller"]  # debug output is there
    assert "refused a connection (tls_handshake)" in texts["controller"]
    secrets = {certs.key_password, JAAS_ADMIN_PW, SCRAM_PW, WRONG_PW} | scram_blobs
    leaks = [(w, s) for w, t in texts.items() for s in secrets if s in t]
    assert not leaks, "secrets leaked:\n" + "\n".join(f"  {w}: {s}" for w, s in leaks[:20])
