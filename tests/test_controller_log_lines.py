"""A controller whose stderr goes to a file (systemd, `2>controller.log`): every line lands as it
happens, timestamped; the state line after the copy, each admin change applied and why a broker
registered again are all there before it stops (issue 17 item 3). Real process, real ZooKeeper."""

from __future__ import annotations

import re
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import ROOT, ZK2KRAFT, cluster, run_cli

from zk_fixtures.server import free_port
from zk_fixtures.simulated_broker import SimBroker

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} zk2kraft: ")


def _wait_for_line(log: Path, proc: subprocess.Popen[bytes], needle: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while True:
        for line in log.read_text().splitlines():
            if needle in line:
                return line
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"no line with {needle!r} in:\n{log.read_text()}"
        time.sleep(0.1)


@pytest.mark.zk
def test_a_redirected_controller_log_gets_each_line_at_once(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    listen = free_port()
    stderr_file = tmp_path / "controller.log"
    with cluster(zk, zk_connect) as generated, stderr_file.open("wb") as sink:
        proc = subprocess.Popen(
            [*ZK2KRAFT, "migrate", "--yes", "--follow", "--listen", f"127.0.0.1:{listen}", *where],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
        )
        sims: list[SimBroker] = []
        try:
            _wait_for_line(stderr_file, proc, "controller listening on")
            cluster_id = generated.image.cluster_id
            assert cluster_id is not None
            sims = [SimBroker(b, ("127.0.0.1", listen), cluster_id) for b in sorted(generated.image.brokers)]
            for sim in sims:
                assert sim.register() == 0
            state = _wait_for_line(stderr_file, proc, "→ DualWriteMetadata")
            assert "copied " in state and "log end offset" in state and "/migration offset" in state
            # The broker restarts: a new incarnation registers the same id again, and the log says why.
            again = sims[0]
            again.incarnation_id = uuid.uuid4()
            assert again.register() == 0
            why = _wait_for_line(stderr_file, proc, "again: ")
            assert f"broker {again.broker_id}" in why and "restarted (a new incarnation)" in why, why
            # Registered brokers are fenced until they heartbeat; a topic is placed on unfenced ones
            # (Kafka's "All brokers are currently fenced." otherwise)
            for sim in sims:
                beat = sim.heartbeat()
                assert beat is not None and beat.error_code == 0 and not beat.is_fenced
            r = run_cli(["admin", "create-topic", "logged-topic", "-p", "1", "-r", "1", *where])
            assert r.returncode == 0, r.stderr
            applied = _wait_for_line(stderr_file, proc, "admin change applied")
            assert "logged-topic" in applied and "records at offsets" in applied
            lines = stderr_file.read_text().splitlines()
            assert lines and all(STAMP.match(line) for line in lines), lines
        finally:
            for sim in sims:
                sim.close()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
