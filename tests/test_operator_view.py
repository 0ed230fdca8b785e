"""The operator's view (issue 31): every line true, every refusal names the next command, nothing
normal printed as a failure. Each test runs the real `zk2kraft` as a process, with no terminal
(pipes and files), against a real ZooKeeper server.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import ROOT, SPEC, ZK2KRAFT, cluster, log_replay, own_server, run_cli, wait_for_follower

from migrator import commands
from migrator.errors import UnreachableError
from migrator.zk import paths as P
from migrator.zk.codec import decode_migration
from zk_fixtures.brokers import BrokerSessions
from zk_fixtures.generator import ClusterSpec, load_cluster
from zk_fixtures.server import free_port

pytestmark = pytest.mark.zk

MIGRATE = ["migrate", "--yes", "--brokers-from-zk"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}
    env.update(extra)
    return env


@contextmanager
def controller(zk_connect: str, log_dir: Path, err: Path) -> Iterator[subprocess.Popen[str]]:
    """`zk2kraft controller --listen` and `fixtures simulate-brokers` against it, as the README's
    rehearsal runs them, the controller's stderr into a file (as under systemd or nohup) with a
    heartbeat every second; both stopped with SIGTERM."""
    port = free_port()
    common = {
        "cwd": ROOT,
        "stdin": subprocess.DEVNULL,
        "text": True,
        "env": _env(ZK2KRAFT_PROGRESS_INTERVAL="1"),
    }
    procs: list[subprocess.Popen[str]] = []
    with err.open("w") as sink:
        procs.append(
            subprocess.Popen(
                [
                    *ZK2KRAFT,
                    "controller",
                    "--listen",
                    f"127.0.0.1:{port}",
                    "--yes",
                    "-z",
                    zk_connect,
                    "-l",
                    str(log_dir),
                ],
                stdout=subprocess.DEVNULL,
                stderr=sink,
                **common,
            )  # fmt: skip
        )
    procs.append(
        subprocess.Popen(
            [
                *ZK2KRAFT,
                "fixtures",
                "simulate-brokers",
                "--controller",
                f"127.0.0.1:{port}",
                "-z",
                zk_connect,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            **common,
        )  # fmt: skip
    )
    try:
        wait_for_follower(procs[0], log_dir, timeout=120)
        yield procs[0]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)


def _wait_for(path: Path, pattern: str, count: int = 1, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = path.read_text()
        if len(re.findall(pattern, text)) >= count:
            return text
        assert time.monotonic() < deadline, f"{pattern!r} x{count} never came: {text[-2000:]}"
        time.sleep(0.2)


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_a_live_controller_seen_through_every_command(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """Items 1-4 and 8 against one live controller: a wrong --log-dir, the heartbeat, the rehearsal's
    example hosts said once, every finalize guard at once, delete-topic naming the topic, piped status."""
    real, typo = tmp_path / "kraft", tmp_path / "kraft2"
    err = tmp_path / "controller.err"
    with cluster(zk, zk_connect), controller(zk_connect, real, err) as proc:
        m = decode_migration(P.MIGRATION, zk.get(P.MIGRATION)[0])
        # the offset moves on as brokers register and heartbeat: the claim's controller and epoch do not
        proof = rf"copy committed at offset \d+ by controller {m.kraft_controller_id}, epoch {m.kraft_controller_epoch}"
        z = ["-z", zk_connect]

        # 1. a wrong --log-dir: what ZooKeeper alone proves, not that controller's log, exit 1, never
        # "stop" the live controller
        r = run_cli(["status", "--json", *z, "-l", str(typo)])
        assert r.returncode == 1, r.stdout + r.stderr
        s = json.loads(r.stdout)
        assert s["state"] == "DualWriteMetadata" and s["kafka_state"] == "MIGRATION", s
        assert re.search(proof, s["reason"]) and "is not that controller's log" in s["reason"], s["reason"]
        assert str(real) in s["next_action"] and "stop" not in json.dumps(s).lower(), s
        text = run_cli(["status", *z, "-l", str(typo)])
        assert text.returncode == 1 and "DualWriteMetadata (3), Kafka MIGRATION (1)" in text.stdout
        r = run_cli(["check", "--json", *z, "-l", str(typo)])
        c = json.loads(r.stdout)
        assert r.returncode == 1 and c["migration"]["state"] == "DualWriteMetadata", r.stdout
        assert [f["code"] for f in c["findings"]] == ["LOG_NOT_BOUND"], c[
            "findings"
        ]  # no eligibility blockers
        assert "stop" not in json.dumps(c).lower() and str(real) in c["migration"]["next_action"]
        r = run_cli(["check", "--json", *z])  # no --log-dir at all: the state ZooKeeper proves
        c = json.loads(r.stdout)
        assert c["migration"]["state"] == "DualWriteMetadata" and re.search(
            proof, c["migration"]["problems"][0]
        )

        # 2. a refused admin change is said once; the heartbeat says what the controller does now
        where = [*z, "-l", str(real)]
        r = run_cli(["admin", "create-topic", "orders", "-p", "1", "-r", "99", *where])
        assert r.returncode == 2, r.stderr
        # 8. delete-topic of an unknown topic names it
        r = run_cli(["admin", "delete-topic", "ordres", *where])
        assert r.returncode == 2 and "topic 'ordres' does not exist" in _one_line(r.stderr)
        n = SPEC.brokers
        beat = rf"serving {n} brokers \({n} in ZooKeeper mode\), write-behind lag 0, log end offset \d+, "
        before = len(re.findall(beat, err.read_text()))
        log = _wait_for(err, beat, before + 3)  # written while it runs: flushed per line into a file
        assert log.count("admin change refused: create-topic orders") == 1, log
        assert "still " not in log, log

        # 3. the generated brokers' example hosts: said once, no resolver error
        assert log.count("rehearsal brokers at example hosts: not contacted") == 1, log
        assert "Name or service not known" not in log and "same incarnation retried" not in log, log
        r = run_cli(["status", *where])
        assert r.returncode == 0, r.stderr
        assert re.search(
            rf"^ZK brokers {', '.join(map(str, range(1, n + 1)))} +rehearsal brokers at example hosts: not contacted",
            r.stdout,
            re.M,
        )
        assert "Name or service not known" not in r.stdout
        # 8. piped status lines are not padded to the widest row
        assert not [line for line in r.stdout.splitlines() if line.endswith(" ")], r.stdout

        # 4. finalize lists every unmet guard at once, each with what meets it; status's next does too
        r = run_cli(["finalize", *where])
        line = _one_line(r.stderr)
        assert r.returncode == 1 and "finalize refused, 4 unmet: (1) " in line, line
        for meets in ("[guard no-zk-mode-brokers]", "`zk2kraft fixtures brokers`", "[guard confirmed]",
                      f"`kill -TERM {proc.pid}`", "--rehearsal"):  # fmt: skip
            assert meets in line, (meets, line)
        s = json.loads(run_cli(["status", "--json", *where]).stdout)
        assert (
            s["next_action"].startswith("to finalize: (1) ") and f"kill -TERM {proc.pid}" in s["next_action"]
        )
        help_text = run_cli(["finalize", "--help"]).stdout
        assert "fixtures brokers" in help_text and "simulator" not in help_text


def test_pending_deletion_and_a_finalized_migration_say_what_happens_next(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """8: check says a pending deletion is completed; after finalize no write-behind lag, and
    `controller` names the handover to Kafka's own controller."""
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    with cluster(zk, zk_connect):
        r = run_cli(["check", "--json", "-z", zk_connect])
        pending = [f for f in json.loads(r.stdout)["findings"] if f["code"] == "PENDING_TOPIC_DELETIONS"]
        assert pending and "the migration completes the deletion" in pending[0]["message"], pending
        assert "will not be migrated" not in r.stdout
        commands.migrate(zk_connect, str(log_dir), yes=True, brokers_from_zk=True)
    r = run_cli(["finalize", "--yes", "--rehearsal", *where])
    assert r.returncode == 0, r.stderr
    s = json.loads(run_cli(["status", "--json", *where]).stdout)
    assert s["state"] == "MigrationFinalized" and s["write_behind_lag"] == 0, s
    assert s["log_end_offset"] - 1 > s["migration_znode"]["kraft_metadata_offset"]  # records after it
    assert "Kafka's own KRaft controller" in s["next_action"] and "docs/runbook.md" in s["next_action"]
    r = run_cli(["controller", "--listen", f"127.0.0.1:{free_port()}", "--yes", *where])
    line = _one_line(r.stderr)
    assert r.returncode == 1 and "start Kafka's own KRaft controller on" in line and "docs/runbook.md" in line


def test_without_a_terminal_migrate_names_a_phase_that_lasts(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """6: a one-shot migrate into a file names a phase that lasts (FIRST_LINE seconds, or the
    progress interval when shorter: here 0.01 s), timestamped, before any "still" of it. Which phases
    last 10 ms depends on the machine (the copy of this small cluster can be quicker than the ticker
    is scheduled), so the test holds every phase printed to the rule; test_progress_lines holds the
    ticker to it phase by phase."""
    with cluster(zk, zk_connect):
        r = run_cli(
            [*MIGRATE, "-z", zk_connect, "-l", str(tmp_path / "meta")],
            env={"ZK2KRAFT_PROGRESS_INTERVAL": "0.01"},
        )
    assert r.returncode == 0, r.stderr
    stamp = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} zk2kraft: "
    said = [m.group(1) for m in re.finditer(stamp + r"(.*)$", r.stderr, re.M)]
    assert said and not said[0].startswith("still "), r.stderr
    for i, line in enumerate(said):
        if line.startswith("still "):
            m = re.match(r"still (.*?) \(\d+s\)", line)
            assert m, line
            named = [s for s in said[:i] if s == m.group(1) or s.startswith(m.group(1) + ": ")]
            assert named, r.stderr  # named (with the copy's count, if copying) before any "still"
    assert "checking eligibility" in said, r.stderr  # the pre-flight read of ZooKeeper outlasts 10 ms


def test_scripts_a_closed_pipe_and_a_loaded_zookeeper(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """7: `| head` is not a finding (exit 0, nothing on stderr); `fixtures load` on existing data says
    it with the command's own option."""
    log_dir = tmp_path / "meta"
    # a log whose dump is larger than a pipe's buffer, so the writer meets the closed pipe
    spec = ClusterSpec(topics=100, partitions=6, legacy_topics=0, reassignments=0, offline_partitions=0)
    with cluster(zk, zk_connect, spec):
        commands.migrate(zk_connect, str(log_dir), yes=True, brokers_from_zk=True)
    cli = shlex.join(ZK2KRAFT)
    for args in (
        f"log dump -l {log_dir}",
        f"log dump -l {log_dir} --json",
        f"status --json -z {zk_connect} -l {log_dir}",
    ):
        r = subprocess.run(
            ["bash", "-o", "pipefail", "-c", f"{cli} {args} | head -c 20 >/dev/null"],
            capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=120,
        )  # fmt: skip
        assert (r.returncode, r.stderr) == (0, ""), (args, r.returncode, r.stderr)
    r = run_cli(["fixtures", "load", "-z", zk_connect, "--topics", "1", "--partitions", "1"])
    line = _one_line(r.stderr)
    assert r.returncode == 2 and "--exist-ok" in line and "exist_ok" not in line, line


def test_a_silent_port_is_not_called_a_tls_port(tmp_path: Path) -> None:
    """8: a port that accepts and never answers (a firewall, a proxy, the wrong service) is not "a
    TLS port": the hint says it did not answer as ZooKeeper (a TLS ZooKeeper is told apart in
    test_security)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])  # accepted, never answered
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        port = server.getsockname()[1]
        r = run_cli(["status", "-z", f"127.0.0.1:{port}", "-l", str(tmp_path / "meta"), "--zk-timeout", "2"])
    finally:
        stop.set()
        thread.join(5)
        for s in [*held, server]:
            s.close()
    line = _one_line(r.stderr)
    assert r.returncode == 3 and "did not answer as ZooKeeper" in line and "TLS port" not in line, line


@pytest.mark.slow
def test_ctrl_c_during_the_copy_says_the_logs_true_offsets(tmp_path: Path) -> None:
    """5: SIGINT while a copy batch is still queued (10,500 partitions make two batches, Kafka cuts at
    10,000 records; the signal comes once the first is durable): the offsets said are where the log
    ends, and `status` and `check` give the same next step."""
    spec = ClusterSpec(topics=21, partitions=500, legacy_topics=0, reassignments=0, offline_partitions=0)
    with own_server(tmp_path / "zk") as (client, connect):
        for attempt in range(3):  # a loaded machine can drop the loading session: resume, as documented
            try:
                generated = load_cluster(client, spec, exist_ok=attempt > 0)
                break
            except UnreachableError:
                if attempt == 2:
                    raise
                client.restart()
        sessions = BrokerSessions(connect, generated.image, generated.control).start()
        log_dir = tmp_path / "meta"
        where = ["-z", connect, "-l", str(log_dir)]
        r = run_cli([*MIGRATE, *where], env={"ZK2KRAFT_SIGNAL_AT": "SIGINT,copy.batch:1"}, timeout=600)
        assert r.returncode == 130, r.stderr
        said = re.search(r"([\d,]+) records appended at offsets (\d+)-(\d+)", r.stderr)
        assert said, r.stderr
        _, end = log_replay(log_dir)
        assert int(said.group(3)) == end - 1, (said.group(0), end)
        status = json.loads(run_cli(["status", "--json", *where]).stdout)
        check = json.loads(run_cli(["check", "--json", *where]).stdout)
        assert status["next_action"] == check["migration"]["next_action"], (status, check["migration"])
        assert "interrupted copy is aborted and redone" in status["next_action"]
        assert "--listen" not in status["next_action"]
        sessions.close()
