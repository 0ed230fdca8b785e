"""`migrate`'s question on a real terminal (a pty): y/N answers as click's, bad answers asked again,
Ctrl-D is a no. Ctrl-C at the question is in test_stop_signals."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import ROOT, ZK2KRAFT, cluster

QUESTION_END = b"from now on. [y/N]: "


def _answer(zk_connect: str, log_dir: Path, answers: list[bytes]) -> tuple[int, str]:
    """Run `migrate` on a pty, send each answer after each question; exit code and everything shown."""
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}
    proc = subprocess.Popen(
        [*ZK2KRAFT, "migrate", "--brokers-from-zk", "-z", zk_connect, "-l", str(log_dir)],
        stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, close_fds=True,
        env={**env, "TERM": "dumb", "COLUMNS": "400"},
    )  # fmt: skip
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 120
        for n, answer in enumerate(answers, start=1):
            while seen.count(QUESTION_END) < n:
                assert proc.poll() is None and time.monotonic() < deadline, seen.decode(errors="replace")
                if select.select([master], [], [], 0.2)[0]:
                    seen += os.read(master, 65536)
            os.write(master, answer)
        while True:
            assert time.monotonic() < deadline, seen.decode(errors="replace")
            if not select.select([master], [], [], 0.2)[0]:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal closed: the process has ended
                break
            if not chunk:
                break
            seen += chunk
        code = proc.wait(timeout=30)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, seen.decode(errors="replace")


@pytest.mark.zk
def test_a_bad_answer_is_asked_again_and_no_writes_nothing(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    with cluster(zk, zk_connect):
        code, text = _answer(zk_connect, tmp_path / "meta", [b"maybe\n", b"n\n"])
    assert code != 0 and "Error: invalid input" in text and "Traceback" not in text, text
    assert text.count("[y/N]: ") == 2, text
    assert not (tmp_path / "meta").exists()
    assert zk.exists("/migration") is None


@pytest.mark.zk
def test_end_of_input_at_the_question_is_a_no(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    with cluster(zk, zk_connect):
        code, text = _answer(zk_connect, tmp_path / "meta", [b"\x04"])  # Ctrl-D on an empty line
    assert code != 0 and "Traceback" not in text, text
    assert not (tmp_path / "meta").exists()


@pytest.mark.zk
def test_yes_at_the_question_migrates(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    with cluster(zk, zk_connect):
        code, text = _answer(zk_connect, tmp_path / "meta", [b"YES\n"])
        assert code == 0 and "Traceback" not in text, text
        assert zk.exists("/migration") is not None
