"""`zk2kraft --config controller.properties migrate --follow`, no --listen: the controller's own
properties file is enough, as for `controller`. Every listener in `listeners` is served with its
protocol from `listener.security.protocol.map` (here a PLAINTEXT and a SASL_SSL one), the SASL_SSL one
checking SCRAM against the credentials migrated from ZooKeeper and authorizing with the migrated ACLs;
SIGTERM ends the follow with exit 0."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient
from migrate_helpers import ROOT, ZK2KRAFT, cluster, run_cli
from test_listener_secure_migration import grant_cluster_action, scram_user
from tls_certs import make_certs

from cli import migrate_cmd
from cli.main import _register, main
from migrator.commands import Target
from migrator.controller.client.client import ControllerClient
from migrator.controller.follower import read_follower
from migrator.controller.protocol import messages as M
from migrator.controller.security.client_security import ClientSecurity
from zk_fixtures.server import free_port

BROKER_PW = "follow-broker-pw-30d1"
EVE_PW = "follow-eve-pw-8c42"
CLUSTER_AUTHORIZATION_FAILED = 31
SASL_HANDSHAKE = 17


def _scram(ca: Path, user: str, password: str) -> ClientSecurity:
    return ClientSecurity(
        "SASL_SSL", ssl_cafile=str(ca), sasl_mechanism="SCRAM-SHA-512", username=user, password=password
    )


def _heartbeat() -> M.BrokerHeartbeatRequest:
    return M.BrokerHeartbeatRequest(broker_id=1, broker_epoch=5, current_metadata_offset=0)


@pytest.mark.parametrize(
    ("where", "follow", "served"),
    [
        ("group", True, True),
        ("subcommand", True, True),
        ("group", False, False),  # a one-shot migrate copies without waiting for brokers on a listener
    ],
)
def test_which_runs_take_listen_from_the_properties_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, follow: bool, served: bool
) -> None:
    listeners = "PLAIN://127.0.0.1:19092,SECURE://127.0.0.1:19093"
    props = tmp_path / "controller.properties"
    props.write_text(
        f"zookeeper.connect=127.0.0.1:2181\nmetadata.log.dir={tmp_path}\nlisteners={listeners}\n"
    )
    seen: list[Target] = []
    monkeypatch.setattr(migrate_cmd, "run_migrate", lambda target, **_: seen.append(target))
    _register()
    args = ["migrate", "--yes", *(["--follow"] if follow else [])]
    args = ["--config", str(props), *args] if where == "group" else [*args, "--config", str(props)]
    result = CliRunner().invoke(main, args, env={"ZK2KRAFT_LISTEN": None})
    assert result.exit_code == 0, result.output
    assert [t.listen for t in seen] == [listeners if served else None]


@pytest.mark.zk
@pytest.mark.slow
def test_migrate_follow_serves_every_listener_of_its_properties_file(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    certs = make_certs(tmp_path / "certs")
    plain, secure = free_port(), free_port()
    log_dir = tmp_path / "meta"
    props = tmp_path / "controller.properties"
    props.write_text(
        f"zookeeper.connect={zk_connect}\n"
        f"metadata.log.dir={log_dir}\n"
        f"listeners=PLAIN://127.0.0.1:{plain},SECURE://127.0.0.1:{secure}\n"
        "listener.security.protocol.map=PLAIN:PLAINTEXT,SECURE:SASL_SSL\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={certs.server_encrypted}\n"
        f"ssl.key.password={certs.key_password}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={certs.ca}\n"
        "sasl.enabled.mechanisms=SCRAM-SHA-512\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
    )
    with cluster(zk, zk_connect):
        scram_user(zk, "broker", BROKER_PW)  # only in ZooKeeper: the copy migrates it
        scram_user(zk, "eve", EVE_PW)
        grant_cluster_action(zk, "User:broker")  # eve gets none
        proc = subprocess.Popen(
            [*ZK2KRAFT, "--config", str(props), "migrate", "--follow", "--yes", "--brokers-from-zk"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        try:
            deadline, state, status = time.monotonic() + 120, None, ""
            while time.monotonic() < deadline:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                r = run_cli(["status", "-z", zk_connect, "-l", str(log_dir), "--json"])
                status = r.stdout + r.stderr
                if r.returncode == 0 and (state := json.loads(r.stdout)["state"]) == "DualWriteMetadata":
                    break
                time.sleep(0.5)
            assert state == "DualWriteMetadata", status[-2000:]
            follower = read_follower(log_dir)
            assert follower is not None and follower.pid == proc.pid
            assert set(follower.listeners) == {
                ("PLAIN", "PLAINTEXT", "127.0.0.1", plain),
                ("SECURE", "SASL_SSL", "127.0.0.1", secure),
            }

            with ControllerClient("127.0.0.1", plain) as anonymous:  # ApiVersions in the clear
                keys = {a.api_key for a in anonymous.api_versions().api_keys}
                assert {M.API_VERSIONS, M.BROKER_HEARTBEAT} <= keys and SASL_HANDSHAKE not in keys
                # ANONYMOUS has no ACL: the authorizer is on for this listener too
                assert anonymous.heartbeat(_heartbeat()).error_code == CLUSTER_AUTHORIZATION_FAILED
            with ControllerClient(
                "127.0.0.1", secure, security=_scram(certs.ca, "broker", BROKER_PW)
            ) as broker:
                assert SASL_HANDSHAKE in {a.api_key for a in broker.api_versions().api_keys}
                assert broker.heartbeat(_heartbeat()).error_code != CLUSTER_AUTHORIZATION_FAILED
            with ControllerClient("127.0.0.1", secure, security=_scram(certs.ca, "eve", EVE_PW)) as eve:
                assert eve.heartbeat(_heartbeat()).error_code == CLUSTER_AUTHORIZATION_FAILED

            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
