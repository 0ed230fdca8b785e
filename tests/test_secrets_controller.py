"""Invariant 6 for the long-running processes: `zk2kraft -v controller` and `fixtures simulate-brokers`
print no secret, even with debug logs, while brokers register over the protocol and a SCRAM user is
added through the running controller."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import ROOT, ZK2KRAFT, cluster, run_cli
from test_secrets import ALICE_PASSWORD, SPEC, _scram_blobs

pytestmark = [pytest.mark.zk, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _quiet(path: Path) -> str:
    """The output without kazoo's per-request debug lines (they carry request types only)."""
    return "\n".join(line for line in path.read_text().splitlines() if "DEBUG kazoo" not in line)[-3000:]


def _start(args: list[str], out: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}
    return subprocess.Popen(
        [*ZK2KRAFT, *args], cwd=ROOT, env=env, stdout=out.open("w"), stderr=subprocess.STDOUT, text=True
    )


def test_controller_and_simulated_brokers_print_no_secret(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    port = _free_port()
    ctl_out, sim_out = tmp_path / "controller.out", tmp_path / "sim.out"
    pw = tmp_path / "alice.pw"
    pw.write_text(ALICE_PASSWORD + "\n")
    with cluster(zk, zk_connect, SPEC) as generated:
        secrets = set(generated.secrets.strings(generated.image)) | {ALICE_PASSWORD}
        ctl = _start(
            [
                "-v",
                "controller",
                "-z",
                zk_connect,
                "-l",
                str(log_dir),
                "--listen",
                f"127.0.0.1:{port}",
                "--yes",
            ],
            ctl_out,
        )
        sim = None
        try:
            deadline = time.monotonic() + 60
            while f"127.0.0.1:{port}" not in ctl_out.read_text() and time.monotonic() < deadline:
                assert ctl.poll() is None, ctl_out.read_text()[-2000:]
                time.sleep(0.2)
            sim = _start(
                ["-v", "fixtures", "simulate-brokers", "-z", zk_connect, "--controller", f"127.0.0.1:{port}"],
                sim_out,
            )
            state, why = None, ""
            while time.monotonic() < deadline:
                r = run_cli(["status", "-z", zk_connect, "-l", str(log_dir), "--json"])
                why = r.stderr[-500:]
                if r.returncode == 0:
                    state = json.loads(r.stdout)["state"]
                    if state == "DualWriteMetadata":
                        break
                time.sleep(0.5)
            assert state == "DualWriteMetadata", (state, why, _quiet(ctl_out), _quiet(sim_out))
            admin = run_cli(
                [
                    "-v",
                    "admin",
                    "upsert-scram",
                    "alice",
                    "--password-file",
                    str(pw),
                    "-z",
                    zk_connect,
                    "-l",
                    str(log_dir),
                ]
            )
            assert admin.returncode == 0, admin.stderr
            secrets |= _scram_blobs(zk, "alice")
        finally:
            for proc in (ctl, sim):
                if proc is not None and proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(30)
    texts = [("controller", ctl_out.read_text()), ("simulator", sim_out.read_text())]
    texts.append(("admin", admin.stdout + admin.stderr))
    assert "registered broker" in texts[0][1]  # the debug output is really there to search
    leaks = [(w, s) for w, t in texts for s in secrets if len(s) >= 8 and s in t]
    assert not leaks, "secrets leaked:\n" + "\n".join(f"  {w}: {s}" for w, s in leaks[:20])
