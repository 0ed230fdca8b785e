"""Invariant 6: secrets are never printed, logged or reported.

Every command runs as the operator runs it (its own process, text and --json, -v for debug logs)
against a cluster with SCRAM users, delegation tokens and a password-type broker config; all of
stdout, stderr, the audit reports, the ZooKeeper export and every non-data file zk2kraft leaves in the
log directory are searched for every spelling (raw, base64, urlsafe base64, hex) of every secret.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from kazoo.client import KazooClient
from migrate_helpers import cluster, run_cli

from zk_fixtures.generator import ClusterSpec

pytestmark = [pytest.mark.zk, pytest.mark.spark, pytest.mark.slow]

SPEC = ClusterSpec(
    topics=4,
    partitions=2,
    legacy_topics=0,
    reassignments=0,
    offline_partitions=0,
    acls=4,
    pending_deletions=0,
    scram_users=4,
    tokens=3,
)
ALICE_PASSWORD = "alice-Very-Secret-pw-7781"
KEYSTORE_PASSWORD = "keystore-Secret-pw-5512"


def _spellings(blob: bytes) -> set[str]:
    return {base64.b64encode(blob).decode(), base64.urlsafe_b64encode(blob).decode(), blob.hex(), repr(blob)}


def _scram_blobs(zk: KazooClient, user: str) -> set[str]:
    """Salt, stored and server key of a user as ZooKeeper holds them, in every spelling."""
    data, _ = zk.get(f"/config/users/{user}")
    out: set[str] = set()
    for value in json.loads(data)["config"].values():
        for part in value.split(","):
            key, _, b64 = part.partition("=")
            if key in ("salt", "stored_key", "server_key"):
                out |= _spellings(base64.b64decode(b64))
    return out


def _parquet_text(path: Path) -> str:
    table = pq.read_table(path)
    return json.dumps(table.to_pylist(), default=lambda v: v.hex() if isinstance(v, bytes) else str(v))


def test_no_command_prints_logs_or_reports_a_secret(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    outputs: list[tuple[str, str]] = []

    def run(*args: str, ok: tuple[int, ...] = (0,), env: dict[str, str] | None = None) -> str:
        r = run_cli(list(args), env=env, timeout=300)
        outputs.append((" ".join(args), r.stdout + "\n" + r.stderr))
        assert r.returncode in ok, f"{args}: exit {r.returncode}\n{r.stderr[-2000:]}"
        return r.stdout

    pw = tmp_path / "alice.pw"
    pw.write_text(ALICE_PASSWORD + "\n")
    with cluster(zk, zk_connect, SPEC) as generated:
        secrets = set(generated.secrets.strings(generated.image)) | {ALICE_PASSWORD, KEYSTORE_PASSWORD}
        assert generated.image.scram_credentials and generated.image.delegation_tokens
        for flag in ([], ["--json"]):
            run("check", "-z", zk_connect, *flag)
            run("plan", *where, *flag)
        run("-v", "migrate", "--yes", "--brokers-from-zk", *where)
        run("migrate", "--yes", "--brokers-from-zk", "--json", *where)  # already there: nothing to do
        run("admin", "upsert-scram", "alice", "--password-file", str(pw), *where)
        run("admin", "upsert-scram", "bob", "--mechanism", "SCRAM-SHA-512", "--json", *where,
            env={"ZK2KRAFT_SCRAM_PASSWORD": ALICE_PASSWORD})  # fmt: skip
        broker = str(min(generated.image.brokers))
        run("admin", "alter-broker-config", "--broker", broker, "--set",
            f"listener.name.sasl_ssl.ssl.keystore.password={KEYSTORE_PASSWORD}", *where)  # fmt: skip
        run("admin", "alter-broker-config", "--broker", broker, "--set",
            f"ssl.key.password={KEYSTORE_PASSWORD}", "--json", *where)  # fmt: skip
        secrets |= _scram_blobs(zk, "alice") | _scram_blobs(zk, "bob")
        for flag in ([], ["--json"]):
            run("status", *where, *flag)
            run("status", *where, "--watch", "0.2", "--count", "1", *flag)
            run("log", "dump", "-l", str(log_dir), *flag)
            run("log", "image", "-l", str(log_dir), *flag)
            run("log", "verify", "-l", str(log_dir), *flag)
        run("log", "snapshot", "-l", str(log_dir), "--json")
        export = tmp_path / "zk.parquet"
        run("zk", "export", *where[:2], "--out", str(export), "--json")
        report = tmp_path / "audit.html"
        run("audit", "-l", str(log_dir), "-z", zk_connect, "--report", str(report), "--master", "local[1]")
        # A tampered credential: the mismatch report must name it without showing either side's keys.
        user = sorted(u for u, _ in generated.image.scram_credentials)[0]
        path = f"/config/users/{user}"
        data, _ = zk.get(path)
        entity = json.loads(data)
        mech = sorted(entity["config"])[0]
        salt = bytes(range(20))
        entity["config"][mech] = (
            f"salt={base64.b64encode(salt).decode()},stored_key={base64.b64encode(b'k' * 32).decode()},"
            f"server_key={base64.b64encode(b's' * 32).decode()},iterations=4096"
        )
        zk.set(path, json.dumps(entity).encode())
        secrets |= _spellings(salt) | _spellings(b"k" * 32) | _spellings(b"s" * 32)
        mismatch = tmp_path / "mismatch.html"
        out = run("audit", "-l", str(log_dir), "-z", zk_connect, "--report", str(mismatch), "--json",
                  "--master", "local[1]", ok=(1,))  # fmt: skip
        assert user in out  # the mismatch is reported, by entity
        run("finalize", "--yes", "--rehearsal", *where, ok=(0, 1))
        run("rollback", "--yes", *where, ok=(0, 1))
        run("status", *where, "--json")
        # After finalize, check reports the migration's health (exit 1 without its log to read).
        run("-v", "check", "-z", zk_connect, ok=(0, 1))
        run("-v", "check", "-z", zk_connect, "-l", str(log_dir), ok=(0, 1))

    files: list[tuple[str, str]] = [(str(report), report.read_text()), (str(mismatch), mismatch.read_text())]
    files.append((str(export), _parquet_text(export)))
    for f in sorted(log_dir.rglob("*")):
        if f.is_file() and not f.name.endswith((".log", ".index", ".timeindex", ".checkpoint")):
            files.append((str(f), f.read_text(errors="replace")))  # manifest, inbox, lock, archives
    leaks = [
        (where_, secret)
        for where_, text in outputs + files
        for secret in secrets
        if len(secret) >= 8 and secret in text
    ]
    assert not leaks, "secrets leaked:\n" + "\n".join(f"  {w[:120]}: {s}" for w, s in leaks[:20])
    # The test can fail: the secrets are there to find where zk2kraft keeps them (ZooKeeper, the log).
    assert any(s in zk.get(f"/config/users/{user}")[0].decode() for s in secrets)


def test_lock_file_status_and_refusals_never_hold_the_command_line(zk_connect: str, tmp_path: Path) -> None:
    """A writer started with secrets on its command line: the lock file (0600), `status` (text and
    JSON) and a second writer's refusal show pid, host, since and the command's name only."""
    import json
    import os
    import stat
    import subprocess
    import sys

    from migrator.errors import FencedError
    from migrator.kraft.lock import LOCK_FILE, WriterLock

    log_dir = tmp_path / "log"
    log_dir.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from migrator.kraft.lock import WriterLock; "
            "WriterLock(Path(sys.argv[1])).acquire(); print('held', flush=True); time.sleep(60)",
            str(log_dir),
            "--zk-auth",
            "digest:rtuser:SECRETPW",
            "--zk-tls-key-password",
            "KEYSECRET",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        lock = log_dir / LOCK_FILE
        assert stat.S_IMODE(os.stat(lock).st_mode) == 0o600
        seen = [lock.read_text()]
        with pytest.raises(FencedError) as refused:
            WriterLock(log_dir).acquire()
        seen.append(str(refused.value))
        assert f"pid {holder.pid}" in str(refused.value)
        zk2kraft = [sys.executable, "-c", "from cli.main import entry; entry()"]
        for extra in ([], ["--json"]):
            out = subprocess.run(
                [*zk2kraft, "status", "--zookeeper", zk_connect, "--log-dir", str(log_dir), *extra],
                capture_output=True,
                text=True,
            )
            seen += [out.stdout, out.stderr]
        if seen[-2].strip().startswith("{"):
            json.loads(seen[-2])
        for text in seen:
            assert "SECRETPW" not in text and "KEYSECRET" not in text and "rtuser" not in text, text
    finally:
        holder.kill()
        holder.wait()
