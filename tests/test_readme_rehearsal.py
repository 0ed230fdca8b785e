"""The README's rehearsal block runs as written, without Docker, and stops every process it started."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from zk_fixtures.server import free_port

REPO = Path(__file__).resolve().parent.parent


def rehearsal_block() -> str:
    text = (REPO / "README.md").read_text()
    found = re.search(r"<!-- rehearsal:begin -->\n```sh\n(.*?)```\n<!-- rehearsal:end -->", text, re.S)
    assert found, "README.md lost its rehearsal block markers"
    return found.group(1)


def test_block_cleans_up_after_itself():
    """Every process the block puts in the background is killed and waited for."""
    block = rehearsal_block()
    started = set(re.findall(r"& (\w+)=\$!", block))
    assert started == {"BROKERS", "CONTROLLER", "SIM"}
    for name in started:
        assert re.search(rf"kill [^\n]*\${name}\b", block), f"${name} is never stopped"
    assert "zk start" in block and "zk stop" in block and "docker" not in block


@pytest.mark.zk
@pytest.mark.slow
@pytest.mark.timeout(1800)  # two rehearsals, each with a Spark audit
def test_readme_rehearsal_runs_as_written(tmp_path):
    """Only paths, the port and the cluster's size are changed; every line must exit 0 (bash -e), and
    the block runs twice in a row as an operator would rerun it (issue 31). Nothing it prints reads as
    a failure: the generated brokers' example hosts are said once, retried registrations are -v's."""
    port = free_port()
    block = (
        rehearsal_block()
        .replace("/tmp/zk2kraft-zk", str(tmp_path / "zk"))
        .replace("/tmp/kraft", str(tmp_path / "kraft"))
        .replace("/tmp/brokers.out", str(tmp_path / "brokers.out"))
        .replace("127.0.0.1:9093", f"127.0.0.1:{port}")
        .replace("--topics 1000 --partitions 12", "--topics 40 --partitions 3")
    )
    script = f"{block}\necho '--- again ---'\n{block}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}
    out = tmp_path / "out.txt"
    # Into a file, not a pipe: a process the block failed to stop would hold a pipe open for ever.
    with out.open("w") as sink:
        proc = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=REPO,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout=1700)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            # The block's background processes share its session: any still alive is a leak.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
                left_running = proc.poll() is not None
            except ProcessLookupError:
                left_running = False
            subprocess.run(
                [str(REPO / ".venv/bin/zk2kraft"), "zk", "stop", "--data-dir", str(tmp_path / "zk")],
                capture_output=True,
            )
    text = out.read_text()
    assert code == 0, text[-4000:]
    assert not left_running, "the README block left a process running"
    first, again = text.split("--- again ---\n")
    for run in (first, again):
        assert "DualWriteMetadata" in run
        assert "released ZooKeeper" in run
        assert "The old log is kept in " + str(tmp_path / "kraft.rolled-back-") in run  # said where
        assert run.count("rehearsal brokers at example hosts: not contacted") >= 2  # controller, status
        assert "ZK brokers 1, 2, 3, 4, 5, 6  rehearsal brokers at example hosts: not contacted" in run
    assert "Name or service not known" not in text  # the example hosts, said once instead
    assert "same incarnation retried" not in text  # routine: -v
    assert "already exists" not in text
    assert not [line for line in text.splitlines() if line.endswith(" ")], "a padded line"
    # nothing the block started is left running
    leftover = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
    assert not leftover, leftover
