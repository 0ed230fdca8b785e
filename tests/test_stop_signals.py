"""SIGTERM and SIGINT stop `migrate` at a safe point in every phase: one line, exit 0 / 130, and the
next run finishes what was left (issues 17 item 2 and 20). Real processes, real ZooKeeper servers."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import ROOT, ZK2KRAFT, assert_consistent, cluster, log_replay, run_cli, wait_for_follower

from migrator.controller.follower import follower_pid
from migrator.zk.connection import close, connect
from zk_fixtures.server import ZkServer, free_port

QUOTA = ["admin", "set-quota", "--user", "outage", "--set", "producer_byte_rate=1024"]


def _has_quota(log_dir: Path) -> bool:
    return any(q.entity == {"user": "outage"} for q in log_replay(log_dir)[0].image.client_quotas)


def _stop_line(stderr: str, signame: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.startswith("zk2kraft: stopped")]
    assert len(lines) == 1 and lines[0].startswith(f"zk2kraft: stopped by {signame} "), stderr
    assert "Traceback" not in stderr and "error" not in lines[0]
    return lines[0]


@pytest.mark.zk
def test_sigint_during_the_copy_stops_between_batches_and_the_next_run_copies_all(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    with cluster(zk, zk_connect):
        # A real SIGINT, sent by the process to itself once the first copy batch is durable.
        r = run_cli(
            ["migrate", "--yes", "--brokers-from-zk", *where],
            env={"ZK2KRAFT_SIGNAL_AT": "SIGINT,copy.batch:1"},
        )
        assert r.returncode == 130, r.stderr
        line = _stop_line(r.stderr, "SIGINT")
        assert "during the copy" in line and "records appended" in line and "aborts it" in line, line
        assert r.stdout == ""
        replay, _ = log_replay(log_dir)
        assert replay.open_transaction is not None and replay.migration_state != 1  # nothing committed
        status = json.loads(run_cli(["status", "--json", *where]).stdout)
        assert status["state"] == "MigratingZkData" and status["open_transaction"]
        r = run_cli(["migrate", "--yes", "--brokers-from-zk", "--json", *where])
        assert r.returncode == 0, r.stderr
        result = json.loads(r.stdout)
        assert result["state_after"] == "DualWriteMetadata" and result["aborted_transaction"]
        assert_consistent(zk, log_dir)


@pytest.mark.zk
@pytest.mark.parametrize("serving", [False, True], ids=["follower", "serving-brokers"])
def test_sigterm_ends_a_follower_whose_zookeeper_is_down_and_the_next_start_catches_up(
    tmp_path: Path, serving: bool
) -> None:
    """`serving`: the controller protocol is up too (its session timer and write-behind sync
    threads), and `zk2kraft admin` sends it a change during the outage (over the protocol, so the
    command needs no ZooKeeper); its follow loop is then in ZooKeeper's retries."""
    server = ZkServer(tmp_path / "zk").start()
    client = connect(server.connect_string)
    log_dir = tmp_path / "meta"
    where = ["-z", server.connect_string, "-l", str(log_dir)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}
    follower: subprocess.Popen[str] | None = None
    listen = ["--listen", f"127.0.0.1:{free_port()}"] if serving else []
    try:
        with cluster(client, server.connect_string):
            follower = subprocess.Popen(
                [*ZK2KRAFT, "migrate", "--yes", "--brokers-from-zk", "--follow", "--json", *where, *listen],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
                cwd=ROOT,
                env=env,
            )
            wait_for_follower(follower, log_dir, timeout=90)
        close(client)
        server.stop()  # the outage: ZooKeeper is gone under a running follower
        admin: list[subprocess.CompletedProcess[str]] = []
        if serving:  # a change sent to the listener during the outage: it reaches the log, not ZooKeeper
            worker = threading.Thread(target=lambda: admin.append(run_cli([*QUOTA, *where])), daemon=True)
            worker.start()
            deadline = time.monotonic() + 60
            while not _has_quota(log_dir):
                assert worker.is_alive() and time.monotonic() < deadline, admin and admin[0].stderr
                time.sleep(0.1)
        time.sleep(0.5)  # let the loop run into the outage's retries
        sent = time.monotonic()
        follower.send_signal(signal.SIGTERM)
        out, err = follower.communicate(timeout=30)
        took = time.monotonic() - sent
        if serving:
            worker.join(timeout=60)
            # answered exit 3 whichever came first (the sync's failure or the stop): maybe applied
            assert admin and admin[0].returncode == 3, admin and admin[0].stderr
            assert "whether it was applied shows in `zk2kraft status`" in admin[0].stderr
        assert follower.returncode == 0, err
        assert took < 5, f"SIGTERM took {took:.1f}s to stop the follower"
        line = _stop_line(err, "SIGTERM")
        assert "while following as the controller" in line and "carried to it by the next" in line, line
        assert follower_pid(log_dir) is None

        server.start()  # same port and data: ZooKeeper is back
        client = connect(server.connect_string)
        if serving:
            assert client.exists("/config/users/outage") is None
        r = run_cli(["migrate", "--yes", "--brokers-from-zk", "--json", *where])
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["lag"] == 0
        if serving:  # in the log before the stop: carried by the next start
            assert client.exists("/config/users/outage") is not None
        assert_consistent(client, log_dir)
    finally:
        if follower is not None and follower.poll() is None:
            follower.kill()
            follower.communicate()
        close(client)
        server.stop()


@pytest.mark.zk
def test_ctrl_c_at_the_confirmation_prompt_stops_at_once(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """The prompt blocks reading the terminal, where no loop can check the stop request."""
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}
    with cluster(zk, zk_connect):
        proc = subprocess.Popen(
            [*ZK2KRAFT, "migrate", "--brokers-from-zk", "-z", zk_connect, "-l", str(tmp_path / "meta")],
            stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, close_fds=True,
            env={**env, "TERM": "dumb", "COLUMNS": "200"},
        )  # fmt: skip
        os.close(slave)
        seen = b""
        try:
            deadline = time.monotonic() + 60
            while b"from now on" not in seen:  # the end of the question
                assert proc.poll() is None and time.monotonic() < deadline, seen.decode(errors="replace")
                if select.select([master], [], [], 0.2)[0]:
                    seen += os.read(master, 65536)
            proc.send_signal(signal.SIGINT)
            deadline = time.monotonic() + 30  # generous: a loaded CI machine; a hang is for ever
            while proc.poll() is None and time.monotonic() < deadline:
                if select.select([master], [], [], 0.2)[0]:  # keep the terminal drained meanwhile
                    try:
                        seen += os.read(master, 65536)
                    except OSError:  # the terminal closed: the process is on its way out
                        break
            assert proc.wait(timeout=max(1.0, deadline - time.monotonic())) == 130
            while select.select([master], [], [], 0.2)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
        finally:
            os.close(master)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = seen.decode(errors="replace")
    assert "stopped by SIGINT before the copy" in text and "Traceback" not in text, text
    assert not (tmp_path / "meta").exists()  # nothing was written


@pytest.mark.zk
def test_sigterm_while_waiting_for_brokers_stops_at_once_and_copies_nothing(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """No broker ever registers with the controller: a supervisor's SIGTERM still ends it, exit 0."""
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}
    with cluster(zk, zk_connect):
        proc = subprocess.Popen(
            [*ZK2KRAFT, "migrate", "--yes", *where, "--listen", f"127.0.0.1:{free_port()}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
            env=env,
        )
        try:
            assert proc.stderr is not None
            deadline = time.monotonic() + 90
            said = ""
            while "waiting for brokers" not in said:  # its own progress note on stderr
                assert proc.poll() is None and time.monotonic() < deadline, said
                if select.select([proc.stderr], [], [], 0.5)[0]:
                    said += proc.stderr.readline()
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
            took = time.monotonic() - started
            err = said + err
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, err
        assert took < 5, took
        line = _stop_line(err, "SIGTERM")
        assert "waiting for brokers" in line, line
        replay, _ = log_replay(log_dir)
        assert replay.migration_state != 1 and replay.open_transaction is None  # no copy began
        assert zk.exists("/migration") is None  # the claim comes after the brokers: ZooKeeper untouched
