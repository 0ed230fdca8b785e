"""The migration commands as an operator runs them: real processes, exit codes, one-line errors, JSON."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import ROOT, ZK2KRAFT, cluster, log_replay, run_cli, wait_for_follower

from cli.main import run
from migrator.controller.follower import follower_pid
from zk_fixtures.server import free_port

COMMANDS = ["migrate", "plan", "status", "finalize", "rollback", "admin"]
ADMIN = [
    "create-topic",
    "delete-topic",
    "add-partitions",
    "alter-topic-config",
    "alter-broker-config",
    "add-acl",
    "remove-acl",
    "set-quota",
    "remove-quota",
    "upsert-scram",
    "delete-scram",
    "apply",
]


def _one_line_error(r: subprocess.CompletedProcess[str]) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zk2kraft: error: "), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def test_every_command_has_help_with_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    for args in [[c] for c in COMMANDS] + [["admin", a] for a in ADMIN]:
        assert run([*args, "--help"]) == 0
        out = capsys.readouterr().out
        assert "Example:" in out and "zk2kraft " in out.split("Example:")[1], args
    assert run(["migrate", "--help"]) == 0
    assert "--brokers-from-zk" in capsys.readouterr().out


def test_bad_usage_and_unreachable_zookeeper(tmp_path: Path) -> None:
    r = run_cli(["migrate", "--bogus"])
    assert r.returncode == 2
    r = run_cli(["status", "-z", "nonsense", "-l", str(tmp_path)])
    assert r.returncode == 2 and "HOST:PORT" in _one_line_error(r)
    r = run_cli(["status", "-z", f"127.0.0.1:{free_port()}", "--zk-timeout", "1", "-l", str(tmp_path)])
    assert r.returncode == 3 and "cannot reach ZooKeeper" in _one_line_error(r)


@pytest.mark.zk
def test_migrate_from_the_command_line(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = str(tmp_path / "meta")
    where = ["-z", zk_connect, "-l", log_dir]
    with cluster(zk, zk_connect):
        r = run_cli(["migrate", "--yes", *where])
        assert r.returncode == 2 and "--brokers-from-zk" in _one_line_error(r)
        r = run_cli(["migrate", "--brokers-from-zk", *where])  # no terminal to ask, no --yes
        assert r.returncode == 1 and "not confirmed" in _one_line_error(r)
        plan = run_cli(["plan", "--json", *where])
        assert plan.returncode == 0 and json.loads(plan.stdout)["plan"]["records"] > 0
        r = run_cli(["migrate", "--yes", "--brokers-from-zk", "--json", *where])
        assert r.returncode == 0, r.stderr
        result = json.loads(r.stdout)
        assert result["state_after"] == "DualWriteMetadata" and result["manifest"]["records"] > 0
        text = run_cli(["status", *where])
        assert text.returncode == 0 and "DualWriteMetadata (3), Kafka MIGRATION (1)" in text.stdout
        status = json.loads(run_cli(["status", "--json", *where]).stdout)
        assert status["write_behind_lag"] == 0 and status["controller_is_kraft"]
        # A Kafka properties file gives the defaults, as a controller.properties would.
        props = tmp_path / "controller.properties"
        props.write_text(f"zookeeper.connect={zk_connect}\nmetadata.log.dir={log_dir}\n")
        r = run_cli(["--config", str(props), "status", "--json"])
        assert r.returncode == 0 and json.loads(r.stdout)["state"] == "DualWriteMetadata"
        r = run_cli(["finalize", *where])
        assert r.returncode == 1 and "[guard" in _one_line_error(r)


@pytest.mark.zk
def test_follower_serves_admin_and_refuses_a_second_writer(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    with cluster(zk, zk_connect) as generated:
        port = free_port()
        follower = subprocess.Popen(
            [*ZK2KRAFT, "migrate", "--yes", "--brokers-from-zk", "--follow", "--json", *where]
            + ["--listen", f"127.0.0.1:{port}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
        )
        try:
            wait_for_follower(follower, log_dir)
            r = run_cli(["migrate", "--yes", "--brokers-from-zk", *where])
            line = _one_line_error(r)
            assert (
                r.returncode == 4
                and f"locked by another writer: pid {follower.pid}" in line
                and "(zk2kraft migrate)" in line  # the command's name, never its arguments
                and "--follow" not in line
            )
            r = run_cli(["rollback", "--yes", *where])
            assert r.returncode == 4 and f"pid {follower.pid}" in _one_line_error(r)
            # The running controller gets the change over Kafka's protocol: its listener is found in
            # the log directory's announcement, or named.
            r = run_cli(["admin", "create-topic", "via-follower", "-p", "3", "--json", *where])
            assert r.returncode == 0, r.stderr
            created = json.loads(r.stdout)
            assert created["path"] == "protocol" and f"127.0.0.1:{port}" in created["via"], created
            assert "CreateTopics" in created["via"] and created["topic_id"]
            assert sorted(zk.get_children("/brokers/topics/via-follower/partitions")) == ["0", "1", "2"]
            r = run_cli(
                [
                    "admin",
                    "create-topic",
                    "via-follower",
                    "--bootstrap-controller",
                    f"127.0.0.1:{port}",
                    *where,
                ]
            )
            line = _one_line_error(r)
            assert r.returncode == 2 and "TOPIC_ALREADY_EXISTS" in line and "already exists" in line
            secret_file = tmp_path / "pw"
            secret_file.write_text("correct horse battery staple\n")
            r = run_cli(
                ["admin", "upsert-scram", "carol", "--password-file", str(secret_file), "--json", *where]
            )
            assert r.returncode == 0, r.stderr
            status = run_cli(["status", "--json", *where])
            s = json.loads(status.stdout)
            assert s["follower_pid"] == follower.pid and s["write_behind_lag"] == 0
            follower.send_signal(signal.SIGTERM)
            out, err = follower.communicate(timeout=30)
        finally:
            if follower.poll() is None:
                follower.kill()
                follower.communicate()
        assert follower.returncode == 0, err
        result = json.loads(out)
        assert result["changes_applied"] == 2 and result["followed_seconds"] > 0
        assert follower_pid(log_dir) is None
        # The secret and its keys show nowhere: not in replies, status, or the log's dump.
        dump = run_cli(["log", "dump", "-l", str(log_dir), "--json"])
        shown = r.stdout + r.stderr + status.stdout + out + err + dump.stdout
        assert "correct horse" not in shown
        replay, _ = log_replay(log_dir)
        carol = replay.image.scram_credentials[("carol", "SCRAM-SHA-256")]
        secrets = generated.secrets.strings(generated.image)
        for blob in (carol.salt, carol.stored_key, carol.server_key):
            secrets += [base64.b64encode(blob).decode(), blob.hex()]
        assert not [c for c in secrets if c in shown]
