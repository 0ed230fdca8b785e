"""`zk2kraft admin` as an operator runs it (real processes, real ZooKeeper): over Kafka's protocol to
a running controller, secured with SASL_SSL/SCRAM and reached with the controller's own properties
file; directly when no controller runs; refused (exit 3) when the log is held but its listener is out
of reach."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import ROOT, ZK2KRAFT, cluster, run_cli, wait_for_follower
from test_listener_secure_migration import scram_user
from tls_certs import make_certs

from migrator import commands
from migrator.controller.network.listener_config import set_default_properties
from migrator.zk import paths as P
from zk_fixtures.server import free_port

pytestmark = pytest.mark.zk

ADMIN_PW = "admin-pw-61be"
DORA_PW = "dora-pw-0d93"


def _one_line(r: subprocess.CompletedProcess[str]) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def test_direct_without_a_controller_and_refused_while_the_log_is_held(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    with cluster(zk, zk_connect):
        commands.migrate(zk_connect, str(log_dir), yes=True, brokers_from_zk=True)
        # Nothing runs: this command takes the log, appends and syncs, and says so.
        r = run_cli(["admin", "create-topic", "direct-1", "-p", "2", "--json", *where])
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["path"] == "direct" and "no controller is running" in out["via"] and out["records"] == 3
        closed = f"127.0.0.1:{free_port()}"
        r = run_cli(["admin", "delete-topic", "direct-1", "--bootstrap-controller", closed, *where])
        assert r.returncode == 0, r.stderr
        assert f"nothing listens at {closed}" in r.stdout and "direct" in r.stdout
        assert not zk.exists(f"{P.TOPICS}/direct-1")

        # A controller holds the log but serves no listener: refused, never raced.
        follower = subprocess.Popen(
            [*ZK2KRAFT, "migrate", "--yes", "--brokers-from-zk", "--follow", *where],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
        )
        try:
            wait_for_follower(follower, log_dir)
            r = run_cli(["admin", "create-topic", "held-1", *where])
            line = _one_line(r)
            assert r.returncode == 3 and f"pid {follower.pid}" in line and "no listener" in line, line
            r = run_cli(["admin", "create-topic", "held-2", "--bootstrap-controller", closed, *where])
            line = _one_line(r)
            assert r.returncode == 3 and f"{closed}" in line and "cannot be reached" in line, line
            assert "nothing was applied" in line
            follower.send_signal(signal.SIGTERM)
            _, err = follower.communicate(timeout=30)
            assert follower.returncode == 0, err
        finally:
            if follower.poll() is None:
                follower.kill()
                follower.communicate()
        topics = set(zk.get_children(P.TOPICS))
        assert not {"held-1", "held-2"} & topics


def test_secured_listener_reached_with_the_controller_properties(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """SASL_SSL with SCRAM-SHA-512 and ACLs: `zk2kraft --config controller.properties admin ...` logs
    in as Kafka's controller client would (the listener's JAAS username/password) and each change is
    the Kafka request; a user without rights gets the per-item error, a wrong password exit 2."""
    certs = make_certs(tmp_path / "certs")
    log_dir = tmp_path / "meta"
    server_props = {
        "listener.security.protocol.map": "SECURE:SASL_SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }
    with cluster(zk, zk_connect):
        scram_user(zk, "admin", ADMIN_PW)  # migrated by the copy: the listener checks them
        scram_user(zk, "dora", DORA_PW)
        set_default_properties(server_props)
        running = commands.start_controller(
            zk_connect, str(log_dir), listen="SECURE://127.0.0.1:0", yes=True, brokers_from_zk=True
        )
        try:
            service = running.service
            assert service is not None
            assert running.wait_until(lambda r: service.admin is not None, 60), running.error
            host, port = running.address
            jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{}" password="{}";'
            properties = {
                **server_props,
                "zookeeper.connect": zk_connect,
                "metadata.log.dir": str(log_dir),
                "listeners": f"SECURE://{host}:{port}",
                "listener.name.secure.scram-sha-512.sasl.jaas.config": jaas.format("admin", ADMIN_PW),
            }
            config = tmp_path / "controller.properties"
            config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))

            r = run_cli(["--config", str(config), "admin", "create-topic", "secure-1", "-p", "2", "--json"])
            assert r.returncode == 0, r.stderr
            out = json.loads(r.stdout)
            assert out["path"] == "protocol" and f"{host}:{port}" in out["via"], out
            assert sorted(zk.get_children(f"{P.TOPICS}/secure-1/partitions")) == ["0", "1"]

            changes = tmp_path / "changes.jsonl"
            lines = [
                {"kind": "add-partitions", "topic": "secure-1", "partitions": 3},
                {"kind": "alter-topic-config", "topic": "secure-1", "configs": {"retention.ms": "3600000"}},
                {"kind": "alter-broker-config", "broker": "", "configs": {"log.cleaner.threads": "2"}},
                {"kind": "set-quota", "quota_entity": {"user": "dora"}, "quota_values": {"producer_byte_rate": 1024}},
                {
                    "kind": "add-acl",
                    "acl": {"resource_type": "TOPIC", "resource_name": "secure-", "pattern_type": "PREFIXED",
                            "principal": "User:dora", "operation": "READ"},
                },
            ]  # fmt: skip
            changes.write_text("".join(json.dumps(x) + "\n" for x in lines))
            r = run_cli(["--config", str(config), "admin", "apply", str(changes), "--json"])
            assert r.returncode == 0, r.stderr
            results = [json.loads(x) for x in r.stdout.splitlines()]
            assert [x["path"] for x in results] == ["protocol"] * len(lines)
            assert "IncrementalAlterConfigs" in results[1]["via"] and "CreateAcls" in results[4]["via"]
            assert sorted(zk.get_children(f"{P.TOPICS}/secure-1/partitions")) == ["0", "1", "2"]
            topic_config = json.loads(zk.get("/config/topics/secure-1")[0])["config"]
            assert topic_config["retention.ms"] == "3600000"
            assert json.loads(zk.get("/config/brokers/<default>")[0])["config"]["log.cleaner.threads"] == "2"
            assert json.loads(zk.get("/config/users/dora")[0])["config"]["producer_byte_rate"] == "1024"
            acl = (
                json.loads(zk.get("/kafka-acl/Topic/secure-")[0])["acls"]
                if zk.exists("/kafka-acl/Topic/secure-")
                else json.loads(zk.get("/kafka-acl-extended/prefixed/Topic/secure-")[0])["acls"]
            )
            assert {
                "principal": "User:dora",
                "permissionType": "Allow",
                "operation": "Read",
                "host": "*",
            } in acl

            # dora may read secure-* only: the delete is refused per topic, in one line, exit 2.
            dora = tmp_path / "dora.properties"
            dora.write_text(
                "security.protocol=SASL_SSL\n"
                f"ssl.truststore.location={certs.ca}\n"
                "sasl.mechanism=SCRAM-SHA-512\n"
                f"sasl.jaas.config={jaas.format('dora', DORA_PW)}\n"
            )
            as_dora = ["--config", str(config), "admin", "delete-topic", "secure-1", "--command-config"]
            r = run_cli([*as_dora, str(dora)])
            line = _one_line(r)
            assert r.returncode == 2 and "delete-topic secure-1: TOPIC_AUTHORIZATION_FAILED" in line, line
            dora.write_text(dora.read_text().replace(DORA_PW, "wrong"))
            r = run_cli([*as_dora, str(dora)])
            line = _one_line(r)
            assert r.returncode == 2 and "SASL authentication refused" in line and "wrong" not in line, line
            assert zk.exists(f"{P.TOPICS}/secure-1")
        finally:
            running.stop()
            set_default_properties({})


def test_admin_waits_for_a_controller_that_holds_the_log_but_has_not_announced_yet(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """`migrate --follow` takes the log lock at the claim and announces its listeners only after its
    first sync: an admin command in between waits for the announcement (or for the lock to go)
    instead of refusing with exit 3."""
    import threading
    import time

    from migrator.controller.follower import announce, retire
    from migrator.kraft.lock import WriterLock
    from migrator.migration.steps.admin import await_announcement

    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    with cluster(zk, zk_connect):
        commands.migrate(zk_connect, str(log_dir), yes=True, brokers_from_zk=True)
        lock = WriterLock(log_dir).acquire()  # held, nothing announced (this process is the holder)
        try:
            assert not await_announcement(str(log_dir), timeout_s=0.3)
            threading.Timer(0.5, announce, args=(str(log_dir), [])).start()
            t0 = time.monotonic()
            assert await_announcement(str(log_dir), timeout_s=10)
            assert 0.4 < time.monotonic() - t0 < 5
        finally:
            retire(str(log_dir))
        threading.Timer(2.0, lock.release).start()  # the holder goes away before it announces
        t0 = time.monotonic()
        r = run_cli(["admin", "create-topic", "late-1", "--json", *where])
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["path"] == "direct" and time.monotonic() - t0 >= 1.5
        assert zk.exists(f"{P.TOPICS}/late-1")
