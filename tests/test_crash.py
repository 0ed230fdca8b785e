"""kill -9 at every named crash point, then run again: ZooKeeper and the log agree record for record.

Each test runs the real `zk2kraft` in a subprocess with `ZK2KRAFT_CRASH_AT=<point>[:<nth>]` (it
SIGKILLs itself there), then the same command without it, and checks with `assert_consistent`: the
ZooKeeper image equals the log's replayed image, no transaction is left open, /migration covers the
log's end. Nothing lost (every committed record is in ZooKeeper), nothing applied twice (an
interrupted copy is aborted, never half-applied, and exactly one copy is committed).
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient
from migrate_helpers import (
    ROOT,
    ZK2KRAFT,
    assert_consistent,
    cluster,
    log_replay,
    normalise,
    own_server,
    run_cli,
    wait_for_follower,
    zk_layout,
)

from cli.log_cmds import log as log_cmd
from migrator import commands, results
from migrator.controller.managers.change import AdminChange
from migrator.errors import UnreachableError, ZkKraftError
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import record
from migrator.kraft.snapshot import list_snapshots
from migrator.migration.faults import POINTS, parse_crash_spec
from migrator.zk.connection import close, connect
from zk_fixtures.generator import ClusterSpec
from zk_fixtures.server import ZkServer

pytestmark = pytest.mark.zk

MIGRATE = ["migrate", "--yes", "--brokers-from-zk"]


def _cmd(zk_connect: str, log_dir: Path, *cmd: str) -> list[str]:
    return [*cmd, "-z", zk_connect, "-l", str(log_dir)]


def crash(args: list[str], point: str) -> None:
    """Run `zk2kraft args` with the crash point; it must die there by SIGKILL."""
    parse_crash_spec(point)
    r = run_cli(args, env={"ZK2KRAFT_CRASH_AT": point})
    assert r.returncode == -signal.SIGKILL, f"{point} not reached (exit {r.returncode}): {r.stderr[-800:]}"


def recover(zk_connect: str, log_dir: Path) -> results.MigrateResult:
    result = commands.migrate(zk_connect, str(log_dir), yes=True, brokers_from_zk=True)
    assert result.state_after == "DualWriteMetadata"
    return result


def transactions(log_dir: Path) -> list[tuple[str | None, str]]:
    """(name, "commit" | "abort" | "open") of every metadata transaction in the log, in order."""
    out: list[tuple[str | None, str]] = []
    name: str | None = None
    with MetadataLog.open(log_dir) as log:
        for _offset, _epoch, rec in log.read():
            if rec.api_key == 23:
                name = rec.fields.get("Name")  # type: ignore[union-attr]
                out.append((name, "open"))
            elif rec.api_key in (24, 25):
                out[-1] = (out[-1][0], "commit" if rec.api_key == 24 else "abort")
    return out


def _copies(log_dir: Path) -> list[str]:
    return [outcome for name, outcome in transactions(log_dir) if name == "ZK Migration"]


def _log_end(log_dir: Path) -> int:
    with MetadataLog.open(log_dir) as log:
        return log.end_offset


def assert_aborted_copy_gone(log_dir: Path, aborted_end: int) -> None:
    """Every record of the aborted copy (offsets below `aborted_end`) and its AbortTransactionRecord
    are below the log start, on disk too: Kafka's MetadataBatchLoader would apply them (issue 15)."""
    with MetadataLog.open(log_dir) as log:
        start = log.log_start_offset
        assert start > aborted_end, f"log start {start} is not past the aborted copy (ends at {aborted_end})"
        assert log.segments[0].base_offset == start  # Kafka derives its log start from the segments
        assert any(s.end_offset == start for s in list_snapshots(log.partition_dir))
    dump = CliRunner().invoke(log_cmd, ["dump", "-l", str(log_dir), "--json"])
    assert dump.exit_code == 0, dump.output
    entries = [json.loads(line) for line in dump.output.splitlines()]
    assert entries and all(e["offset"] is None or e["offset"] >= start for e in entries)
    names = [e["type"] for e in entries]
    assert "AbortTransactionRecord" not in names and names.count("BeginTransactionRecord") == 1


# --- the first migration: claim, copy, first sync --------------------------------------------------

FIRST_RUN = [
    "log.formatted",
    "claim.before",
    "claim.after",
    "claim.migration-written",
    "copy.read-reused",
    "copy.bootstrap-written",
    "copy.after-begin",
    "copy.batch:1",
    "copy.before-end",
    "copy.after-end",
    "copy.manifest-written",
    "dualwrite.before-multi:1",
    "dualwrite.after-multi:1",
    "sync.after-reconcile",
    "sync.after-sync",
    "sync.before-snapshot",
]
# The state the facts derive right after the crash (MigratingZkData for the others).
_STATE_AFTER = {
    "log.formatted": "MigrationIneligible",
    "claim.before": "MigrationIneligible",
    "copy.after-end": "DualWriteMetadata",
    "copy.manifest-written": "DualWriteMetadata",
    "dualwrite.before-multi": "DualWriteMetadata",
    "dualwrite.after-multi": "DualWriteMetadata",
    "sync.after-reconcile": "DualWriteMetadata",
    "sync.after-sync": "DualWriteMetadata",
    "sync.before-snapshot": "DualWriteMetadata",
}
# Points where the copy transaction is open when the process dies: the rerun aborts it.
_COPY_OPEN = {"copy.after-begin", "copy.batch:1", "copy.before-end"}


@pytest.mark.parametrize("point", FIRST_RUN)
def test_crash_in_first_migration(point: str, zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        crash(_cmd(zk_connect, log_dir, *MIGRATE), point)
        crashed_end = _log_end(log_dir) if log_dir.joinpath("meta.properties").exists() else 0
        status = commands.status(zk_connect, str(log_dir))
        expected = _STATE_AFTER.get(point.split(":")[0], "MigratingZkData")
        assert status.state == expected, f"after {point}: {status.state} ({status.reason})"
        result = recover(zk_connect, log_dir)
        assert (result.aborted_transaction is not None) == (point in _COPY_OPEN)
        copies = _copies(log_dir)
        assert copies.count("commit") == 1 and "open" not in copies
        assert copies.count("abort") == 0  # an aborted copy went below the log start before the redo
        if point in _COPY_OPEN:
            assert_aborted_copy_gone(log_dir, crashed_end)
        assert_consistent(zk, log_dir)


@pytest.fixture
def own_zk(tmp_path: Path) -> Iterator[tuple[KazooClient, str]]:
    with own_server(tmp_path / "own-zk") as server:
        yield server


@pytest.mark.slow
def test_crash_mid_copy_batches(own_zk: tuple[KazooClient, str], tmp_path: Path) -> None:
    """10,500 partitions make two copy batches (Kafka cuts at 10,000 records); die between them."""
    zk, zk_connect = own_zk
    spec = ClusterSpec(
        topics=21, partitions=500, legacy_topics=0, reassignments=0, offline_partitions=0, pending_deletions=1
    )
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect, spec):
        crash(_cmd(zk_connect, log_dir, *MIGRATE), "copy.batch:1")
        replay, _ = log_replay(log_dir)
        assert replay.open_transaction is not None and replay.open_transaction.pending_records == 10_000
        assert not replay.image.topics  # nothing of an open copy is applied
        crashed_end = _log_end(log_dir)
        # Die again while closing it: the abort is durable, the redo not begun.
        crash(_cmd(zk_connect, log_dir, *MIGRATE), "copy.abort-written")
        result = recover(zk_connect, log_dir)
        assert result.manifest is not None and result.manifest.batches == 2 + 2  # Begin, 2 data, State+End
        assert _copies(log_dir) == ["commit"]
        assert_aborted_copy_gone(log_dir, crashed_end)
        assert_consistent(zk, log_dir)


def test_crash_after_removing_a_stale_migration_znode(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    from migrator.model import MigrationZnode
    from migrator.zk import codec

    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        zk.create(
            "/migration",
            codec.encode_migration(
                MigrationZnode(
                    kraft_controller_id=1,
                    kraft_controller_epoch=2,
                    kraft_metadata_offset=999,
                    kraft_metadata_epoch=2,
                )
            ),
        )
        crash(_cmd(zk_connect, log_dir, *MIGRATE), "stale-migration.removed")
        assert zk.exists("/migration") is None
        recover(zk_connect, log_dir)
        assert_consistent(zk, log_dir)


# --- dual-write: admin changes, many multis in one sync ---------------------------------------------


def _big_change_left_unsynced(zk_connect: str, log_dir: Path, partitions: int) -> None:
    """An admin change durable in the log but not in ZooKeeper (the admin died after the append)."""
    crash(
        _cmd(zk_connect, log_dir, "admin", "create-topic", "huge", "-p", str(partitions), "-r", "2"),
        "admin.appended",
    )
    status = commands.status(zk_connect, str(log_dir))
    assert status.state == "DualWriteMetadata" and status.write_behind_lag >= partitions


def test_crash_after_admin_append(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        recover(zk_connect, log_dir)
        _big_change_left_unsynced(zk_connect, log_dir, 50)
        assert "huge" not in zk_layout(zk).image.topics
        recover(zk_connect, log_dir)
        zk_image, _ = assert_consistent(zk, log_dir)
        assert len(zk_image.topics["huge"].partitions) == 50


@pytest.mark.slow
@pytest.mark.parametrize("point", ["dualwrite.before-multi:2", "dualwrite.after-multi:1"])
def test_crash_between_multis_of_one_sync(
    point: str, own_zk: tuple[KazooClient, str], tmp_path: Path
) -> None:
    """An 8,000-partition topic takes three pipelined fenced multis to reach ZooKeeper: die between
    them (before the second is sent), or once the first landed (the others may land too)."""
    zk, zk_connect = own_zk
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        recover(zk_connect, log_dir)
        _big_change_left_unsynced(zk_connect, log_dir, 8_000)
        crash(_cmd(zk_connect, log_dir, *MIGRATE), point)
        if "before" in point:  # the first multi landed, the second was never sent
            assert commands.status(zk_connect, str(log_dir)).write_behind_lag > 0
        recover(zk_connect, log_dir)
        zk_image, _ = assert_consistent(zk, log_dir)
        assert len(zk_image.topics["huge"].partitions) == 8_000


def test_crash_while_truncating_an_oversized_change(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    """An oversized change left in the log by an older version, over two segments: kill -9 between
    the two steps of `log truncate-unsynced`; the log stays valid, and running it again finishes."""
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect) as generated:
        recover(zk_connect, log_dir)
        topic = sorted(generated.image.topics)[0]
        with MetadataLog.open(log_dir, writable=True, segment_bytes=700_000) as log:
            end = log.end_offset
            for name in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas"):
                big = record(
                    "ConfigRecord",
                    0,
                    ResourceType=2,
                    ResourceName=topic,
                    Name=name,
                    Value="*" + ",0:1" * 150_000,
                )
                log.append([big], log.latest_epoch)
            assert len(log.segments) >= 2
        crash(
            ["log", "truncate-unsynced", "--yes", "-z", zk_connect, "-l", str(log_dir)],
            "unsynced.truncating:1",
        )
        assert run_cli(["log", "verify", "-l", str(log_dir)]).returncode == 0
        with MetadataLog.open(log_dir) as log:  # half cut: the first record alone would fit ZooKeeper
            assert log.end_offset == end + 1
        recover(zk_connect, log_dir)  # its writable open finishes the cut before anything is synced
        with MetadataLog.open(log_dir) as log:
            assert log.end_offset == end
        assert_consistent(zk, log_dir)


def test_crash_after_admin_sync_before_reply(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        recover(zk_connect, log_dir)
        crash(
            _cmd(
                zk_connect, log_dir, "admin", "alter-broker-config", "--default", "--set", "num.io.threads=12"
            ),
            "admin.synced",
        )
        assert zk_layout(zk).image.configs[("BROKER", "")].configs["num.io.threads"] == "12"
        assert commands.status(zk_connect, str(log_dir)).write_behind_lag == 0
        recover(zk_connect, log_dir)
        assert_consistent(zk, log_dir)


# --- the follower -------------------------------------------------------------------------------


def _start_follower(
    zk_connect: str, log_dir: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    import os

    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}
    full_env.update(env or {})
    # it serves the admin APIs on a listener, which `zk2kraft admin` finds in its announcement
    proc = subprocess.Popen(
        [*ZK2KRAFT, *_cmd(zk_connect, log_dir, *MIGRATE, "--follow", "--listen", "127.0.0.1:0")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=full_env,
        cwd=ROOT,
    )
    wait_for_follower(proc, log_dir)
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=30)


def test_crash_in_follower_after_append(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        recover(zk_connect, log_dir)
        proc = _start_follower(zk_connect, log_dir, {"ZK2KRAFT_CRASH_AT": "follow.appended"})
        try:
            with pytest.raises(UnreachableError, match="the request was sent"):
                commands.admin(
                    zk_connect,
                    str(log_dir),
                    AdminChange(kind="create-topic", topic="lost-reply", partitions=2),
                )
            assert proc.wait(timeout=30) == -signal.SIGKILL
        finally:
            _stop(proc)
        recover(zk_connect, log_dir)
        zk_image, _ = assert_consistent(zk, log_dir)
        assert "lost-reply" in zk_image.topics  # durable in the log before the crash: carried over


def test_crash_between_the_batch_append_and_zookeeper_keeps_the_request_whole(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """A CreateTopics of three valid topics and an invalid one: SIGKILL after its one batch is durable,
    before ZooKeeper has it. The log holds the three topics in that one batch and nothing of the
    invalid one; the next start carries all three to ZooKeeper."""
    import datetime

    from kio.schema.create_topics.v7 import request as ct

    from migrator.controller.client.client import ControllerClient, ControllerUnreachable
    from migrator.controller.follower import read_follower
    from migrator.kraft.batch_decode import decode_batch_records

    log_dir = tmp_path / "meta"
    names = ["whole-a", "whole-b", "whole-c"]
    with cluster(zk, zk_connect):
        recover(zk_connect, log_dir)
        start = _log_end(log_dir)
        proc = _start_follower(zk_connect, log_dir, {"ZK2KRAFT_CRASH_AT": "follow.appended"})
        try:
            announced = read_follower(log_dir)
            assert announced is not None and announced.listeners
            _name, _proto, host, port = announced.listeners[0]
            topics = tuple(
                ct.CreatableTopic(name=n, num_partitions=p, replication_factor=1, assignments=(), configs=())
                for n, p in (("whole-a", 2), ("..", 1), ("whole-b", 3), ("whole-c", 1))
            )
            with pytest.raises(ControllerUnreachable), ControllerClient(host, port, timeout_s=30) as c:
                c.call(19, 7, ct.CreateTopicsRequest(topics=topics, timeout=datetime.timedelta(seconds=30)))
            assert proc.wait(timeout=30) == -signal.SIGKILL
        finally:
            _stop(proc)
        assert not set(names) & set(zk.get_children("/brokers/topics"))  # killed before ZooKeeper
        with MetadataLog.open(log_dir) as log:
            holding = [
                [rec for _o, rec in decode_batch_records(b)]
                for b in log.batches(start)
                if not b.is_control
                and any(getattr(r, "name", "") == "TopicRecord" for _o, r in decode_batch_records(b))
            ]
        assert len(holding) == 1  # one request, one batch
        assert [r.fields["Name"] for r in holding[0] if r.name == "TopicRecord"] == names
        assert sum(r.name == "PartitionRecord" for r in holding[0]) == 6
        recover(zk_connect, log_dir)
        zk_image, _ = assert_consistent(zk, log_dir)
        assert set(names) <= set(zk_image.topics) and ".." not in zk_image.topics


@pytest.mark.slow
def test_kill_follower_at_a_random_moment_under_admin_changes(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    rng = random.Random(20488)
    with cluster(zk, zk_connect):
        recover(zk_connect, log_dir)
        proc = _start_follower(zk_connect, log_dir)
        acknowledged: list[str] = []
        stop = threading.Event()

        def changes() -> None:
            # Once the follower is gone a change either fails (it was in flight) or is applied by
            # the admin process itself (the lock is free again): both are right; stop at `stop`.
            i = 0
            while not stop.is_set():
                name = f"t-{i:04d}"
                try:
                    commands.admin(
                        zk_connect,
                        str(log_dir),
                        AdminChange(kind="create-topic", topic=name, partitions=1 + i % 4),
                    )
                    acknowledged.append(name)
                    commands.admin(
                        zk_connect,
                        str(log_dir),
                        AdminChange(
                            kind="alter-topic-config", topic=name, configs={"retention.ms": str(1000 + i)}
                        ),
                    )
                except ZkKraftError:
                    pass
                i += 1

        worker = threading.Thread(target=changes, daemon=True)
        worker.start()
        try:
            time.sleep(rng.uniform(1.0, 3.0))
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(timeout=30) == -signal.SIGKILL
        finally:
            stop.set()
            worker.join(timeout=120)
            _stop(proc)
        assert not worker.is_alive()
        assert acknowledged, "no change went through before the kill"
        recover(zk_connect, log_dir)
        zk_image, _ = assert_consistent(zk, log_dir)
        missing = [t for t in acknowledged if t not in zk_image.topics]
        assert not missing, f"acknowledged changes lost: {missing[:5]}"


# --- a second controller and a fenced writer (issue 18.2): the claim is bound to one log ---------


def _controller_znode(zk: KazooClient) -> tuple[bytes, int]:
    data, stat = zk.get("/controller")
    return data, stat.mzxid


def test_second_controller_with_the_same_node_id_is_refused(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """A follows on log3a; B starts on log3b with the same (default) node id, an admin change goes to
    B, one is in flight on A when it dies, A restarts: B never claims, nothing of B's reaches ZooKeeper,
    A's restart repairs nothing away."""
    log3a, log3b = tmp_path / "log3a", tmp_path / "log3b"
    with cluster(zk, zk_connect):
        recover(zk_connect, log3a)
        proc = _start_follower(zk_connect, log3a, {"ZK2KRAFT_CRASH_AT": "follow.appended"})
        try:
            held = _controller_znode(zk)
            b = run_cli(_cmd(zk_connect, log3b, *MIGRATE))
            assert b.returncode == 4, b.stderr
            assert str(log3a) in b.stderr and str(log3b) in b.stderr and len(b.stderr.splitlines()) == 1
            assert not log3b.exists(), "B formatted a log"
            r = run_cli(_cmd(zk_connect, log3b, "admin", "create-topic", "fromB-1", "-p", "1"))
            assert r.returncode == 4, r.stderr
            assert _controller_znode(zk) == held, "B's refused start changed /controller"
            # A change in flight on A when A dies: appended to log3a, never acknowledged
            with pytest.raises(UnreachableError):
                commands.admin(
                    zk_connect, str(log3a), AdminChange(kind="create-topic", topic="fromA-2", partitions=1)
                )
            assert proc.wait(timeout=30) == -signal.SIGKILL
        finally:
            _stop(proc)
        result = recover(zk_connect, log3a)  # A restarts: it still holds the claim
        assert not [r for r in result.repairs if "delete" in json.dumps(r)], result.repairs
        zk_image, _ = assert_consistent(zk, log3a)
        assert "fromB-1" not in zk_image.topics and "fromB-1" not in log_replay(log3a)[0].image.topics
        assert "fromA-2" in zk_image.topics  # in A's own log, and A never lost the claim: carried


def test_takeover_never_carries_a_fenced_writers_records(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """A dies with fromA-2 appended but not in ZooKeeper; its disk is given up and B takes over with
    `migrate --recopy` (refused while A's session lives); B acknowledges fromB-1; A comes back: every
    writing command on log3a is refused, so fromB-1 stays and fromA-2 appears nowhere."""
    log3a, log3b = tmp_path / "log3a", tmp_path / "log3b"
    with cluster(zk, zk_connect):
        recover(zk_connect, log3a)
        crash(
            _cmd(zk_connect, log3a, "admin", "create-topic", "fromA-2", "-p", "1", "--zk-timeout", "4"),
            "admin.appended",
        )
        deadline = time.monotonic() + 60
        while True:  # exit 4 while A's ZooKeeper session (and so its writer znode) lives on
            b = run_cli(_cmd(zk_connect, log3b, *MIGRATE, "--recopy"))
            if b.returncode != 4 or time.monotonic() > deadline:
                break
            assert not log3b.exists()
            time.sleep(0.5)
        assert b.returncode == 0, b.stderr
        assert "taking over from log directory" in b.stdout and str(log3a) in b.stdout
        r = run_cli(_cmd(zk_connect, log3b, "admin", "create-topic", "fromB-1", "-p", "1"))
        assert r.returncode == 0, r.stderr
        for cmd in (MIGRATE, ["admin", "create-topic", "fromA-3", "-p", "1"], ["rollback", "--yes"]):
            a = run_cli(_cmd(zk_connect, log3a, *cmd))
            assert a.returncode == 2, f"{cmd}: {a.stderr}"
            assert str(log3a) in a.stderr and str(log3b) in a.stderr and len(a.stderr.splitlines()) == 1
        zk_image, _ = assert_consistent(zk, log3b)
        assert "fromB-1" in zk_image.topics and "fromA-2" not in zk_image.topics
        assert "fromA-2" not in log_replay(log3b)[0].image.topics
        assert "fromA-2" in log_replay(log3a)[0].image.topics  # left where it was, never carried


@pytest.mark.slow
def test_zookeeper_restart_during_dual_write(tmp_path: Path) -> None:
    """The follower rides out a ZooKeeper restart; the syncer resumes and the lag returns to 0."""
    server = ZkServer(tmp_path / "zk").start()
    try:
        root = connect(server.connect_string)
        root.ensure_path("/kafka")
        close(root)
        zk_connect = server.connect_string + "/kafka"
        client = connect(zk_connect)
        log_dir = tmp_path / "meta"
        try:
            with cluster(client, zk_connect):
                recover(zk_connect, log_dir)
                proc = _start_follower(zk_connect, log_dir)
                try:
                    for i in range(5):
                        commands.admin(
                            zk_connect, str(log_dir), AdminChange(kind="create-topic", topic=f"before-{i}")
                        )
                    # Kill ZooKeeper while the follower writes a big change (several multis), start it again.
                    before = log_replay(log_dir)[1]
                    replies: list[results.AdminResult] = []
                    big = threading.Thread(
                        target=lambda: replies.append(
                            commands.admin(
                                zk_connect,
                                str(log_dir),
                                AdminChange(
                                    kind="create-topic", topic="during", partitions=8000, replication_factor=2
                                ),
                                timeout=120,
                            )
                        )
                    )
                    big.start()
                    deadline = time.monotonic() + 60
                    while log_replay(log_dir)[1] == before:
                        assert time.monotonic() < deadline, "the follower did not append the change"
                        time.sleep(0.02)
                    server.kill()
                    time.sleep(1.0)
                    server.start()
                    big.join(timeout=150)
                    assert replies and replies[0].path == "protocol", "the change was not answered"
                    assert len(log_replay(log_dir)[0].image.topics["during"].partitions) == 8000
                    # The simulated brokers' sessions may not survive the restart: change what needs none.
                    for i in range(5):
                        commands.admin(
                            zk_connect,
                            str(log_dir),
                            AdminChange(
                                kind="alter-topic-config",
                                topic=f"before-{i}",
                                configs={"retention.ms": f"{i + 1}000"},
                            ),
                            timeout=90,
                        )
                    deadline = time.monotonic() + 60
                    while commands.status(zk_connect, str(log_dir)).write_behind_lag:
                        assert time.monotonic() < deadline, "the lag did not return to 0"
                        time.sleep(0.2)
                    assert proc.poll() is None, "the follower died on the ZooKeeper restart"
                    proc.send_signal(signal.SIGTERM)
                    out, err = proc.communicate(timeout=30)
                    assert proc.returncode == 0, err[-800:]
                finally:
                    _stop(proc)
        finally:
            close(client)
        after = connect(zk_connect)  # the test's own session did not outlive the restart
        try:
            zk_image, _ = assert_consistent(after, log_dir)
        finally:
            close(after)
        for i in range(5):
            assert zk_image.configs[("TOPIC", f"before-{i}")].configs == {"retention.ms": f"{i + 1}000"}
        assert len(zk_image.topics["during"].partitions) == 8000
    finally:
        server.stop()


# --- finalize and rollback ---------------------------------------------------------------------------


@pytest.mark.parametrize("point", ["rollback.drained", "rollback.archived", "rollback.released"])
def test_crash_in_rollback(point: str, zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        first = recover(zk_connect, log_dir)
        _big_change_left_unsynced(zk_connect, log_dir, 20)  # rollback has to drain this first
        crash(_cmd(zk_connect, log_dir, "rollback", "--yes"), point)
        if point != "rollback.released":
            r = commands.rollback(zk_connect, str(log_dir), yes=True)
            assert r.state_after == "MigrationIneligible"
        status = commands.status(zk_connect, str(log_dir))
        assert status.state == "MigrationIneligible" and not status.log_exists
        assert zk.exists("/controller") is None and zk.exists("/migration") is None
        assert first.claim is not None and status.zk_controller_epoch > first.claim.kraft_epoch
        zk_image = zk_layout(zk).image
        assert "huge" in zk_image.topics  # drained before the log went away
        archived = sorted(tmp_path.glob("meta.rolled-back-*"))
        assert len(archived) == 1
        replay, _ = log_replay(archived[0])
        assert set(replay.image.topics) == set(zk_image.topics)


def test_rollback_from_migrating_zk_data_then_migrate_afresh(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """A copy interrupted mid-way, rolled back: ZooKeeper is as a ZK-mode cluster left it, released."""
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect) as generated:
        before = zk_layout(zk).image
        crash(_cmd(zk_connect, log_dir, *MIGRATE), "copy.after-begin")
        status = commands.status(zk_connect, str(log_dir))
        assert status.state == "MigratingZkData" and status.kraft_epoch is not None
        r = commands.rollback(zk_connect, str(log_dir), yes=True)
        assert (r.state_before, r.state_after) == ("MigratingZkData", "MigrationIneligible")
        assert r.drained_records == 0 and r.archived_log and not log_dir.exists()
        assert zk.exists("/controller") is None and zk.exists("/migration") is None
        assert (
            int(zk.get("/controller_epoch")[0]) == r.zk_controller_epoch > r.kraft_epoch >= status.kraft_epoch
        )
        after = zk_layout(zk).image
        assert normalise(after) == normalise(before)  # the metadata untouched, pending deletion included
        assert after.pending_deletions == before.pending_deletions == generated.image.pending_deletions
        again = recover(zk_connect, log_dir)
        assert again.manifest is not None and again.aborted_transaction is None  # a new log, a fresh copy
        assert _copies(log_dir) == ["commit"]
        assert_consistent(zk, log_dir)


def test_crash_before_finalize_record(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        recover(zk_connect, log_dir)
    crash(_cmd(zk_connect, log_dir, "finalize", "--yes", "--rehearsal"), "finalize.before-record")
    assert commands.status(zk_connect, str(log_dir)).state == "DualWriteMetadata"
    assert (
        commands.finalize(zk_connect, str(log_dir), yes=True, rehearsal=True).state_after
        == "MigrationFinalized"
    )


def test_crash_after_finalize_record_then_finalize_completes_the_handover(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """SIGKILL between POST_MIGRATION and the handover: finalized, but Kafka would have to repair the
    directory; `finalize` again only prepares the handover, and `log verify --kafka` is then clean."""
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        recover(zk_connect, log_dir)
    crash(_cmd(zk_connect, log_dir, "finalize", "--yes", "--rehearsal"), "finalize.after-record")
    assert commands.status(zk_connect, str(log_dir)).state == "MigrationFinalized"
    r = run_cli(["log", "verify", "--kafka", "--json", "-l", str(log_dir)])
    assert json.loads(r.stdout)["findings"], r.stdout + r.stderr  # Kafka would have to rebuild files
    with MetadataLog.open(log_dir) as log:
        end = log.end_offset
    r = run_cli(_cmd(zk_connect, log_dir, "finalize", "--yes", "--rehearsal"))
    assert r.returncode == 0 and "handover the last run did not finish is complete" in r.stdout, (
        r.stdout + r.stderr
    )
    r = run_cli(["log", "verify", "--kafka", "--json", "-l", str(log_dir)])
    assert r.returncode == 0 and json.loads(r.stdout)["findings"] == [], r.stdout + r.stderr
    with MetadataLog.open(log_dir) as log:
        assert log.end_offset == end  # nothing appended: POST_MIGRATION is still the last record
    r = run_cli(_cmd(zk_connect, log_dir, "finalize", "--yes", "--rehearsal"))
    assert r.returncode == 1 and "not a transition" in r.stderr, r.stdout + r.stderr  # nothing left to do


def test_every_declared_point_is_exercised() -> None:
    """Each crash point in faults.POINTS is hit by a test in this module (20 or more)."""
    source = Path(__file__).read_text()
    used = {p for p in POINTS if f'"{p}' in source}
    assert set(POINTS) == used, f"crash points without a test: {sorted(set(POINTS) - used)}"
    assert len(POINTS) >= 20


def test_every_crash_point_is_documented() -> None:
    doc = (ROOT / "docs" / "migration.md").read_text()
    missing = [p for p in POINTS if f"| `{p}` |" not in doc]
    assert not missing, f"crash points missing from docs/migration.md: {missing}"
