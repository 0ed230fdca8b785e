"""Shared by the migration tests: run the CLI as a real process, build clusters, compare both sides.

`assert_consistent` is the reliability tests' verdict: ZooKeeper (bulk-read and decoded by the
layout) and the log (replayed) hold the same metadata record for record, and /migration covers the
log's end, so nothing was lost and nothing applied twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from migrator.controller import core
from migrator.controller.follower import follower_pid
from migrator.controller.service import ControllerService
from migrator.kraft.image import ReplayResult
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import uuid_to_kafka
from migrator.model import ClusterImage
from migrator.zk.connection import close, connect
from migrator.zk.layout import LayoutResult, image_from_tree
from migrator.zk.reader import read_tree
from zk_fixtures.brokers import BrokerSessions
from zk_fixtures.generator import ClusterSpec, GeneratedCluster, load_cluster
from zk_fixtures.server import ZkServer

ROOT = Path(__file__).resolve().parent.parent
ZK2KRAFT = [sys.executable, "-c", "from cli.main import entry; entry()"]

# Eligible (no blockers) and small, with every kind of metadata and a pending deletion.
SPEC = ClusterSpec(
    topics=8,
    partitions=3,
    legacy_topics=0,
    reassignments=0,
    offline_partitions=0,
    acls=8,
    pending_deletions=1,
    tokens=1,
)


def run_cli(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`zk2kraft ARGS` in a fresh process (no terminal: quiet, no prompts)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}
    full_env.update(env or {})
    return subprocess.run(
        [*ZK2KRAFT, *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=ROOT,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def wait_for_follower(proc: subprocess.Popen[Any], log_dir: str | Path, timeout: float = 60.0) -> None:
    """Until `proc` is the log's announced follower; fails at once if it exits (with its stderr)."""
    deadline = time.monotonic() + timeout
    while follower_pid(log_dir) != proc.pid:
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"follower exited {proc.returncode}: {err}")
        assert time.monotonic() < deadline, "the follower did not start"
        time.sleep(0.05)


@contextmanager
def cluster(zk: KazooClient, zk_connect: str, spec: ClusterSpec = SPEC) -> Iterator[GeneratedCluster]:
    """A generated ZK-mode cluster whose brokers are registered (live sessions) while in use."""
    generated = load_cluster(zk, spec)
    sessions = BrokerSessions(zk_connect, generated.image, generated.control).start()
    try:
        yield generated
    finally:
        sessions.close()


@contextmanager
def own_server(data_dir: Path) -> Iterator[tuple[KazooClient, str]]:
    """A ZooKeeper server of the test's own (client, connect string): big clusters are dropped with
    the server instead of being deleted znode by znode from the shared one."""
    server = ZkServer(data_dir).start()
    client = connect(server.connect_string)
    try:
        yield client, server.connect_string
    finally:
        close(client)
        server.kill()


def zk_layout(client: KazooClient) -> LayoutResult:
    return image_from_tree(read_tree(client), strict=True)


def log_replay(log_dir: str | Path) -> tuple[ReplayResult, int]:
    with MetadataLog.open(log_dir) as log:
        return log.load_image().result, log.end_offset


def normalise(image: ClusterImage) -> dict[str, Any]:
    """What both sides must agree on; brokers, /feature and reassignments live only in ZooKeeper."""
    pending = set(image.pending_deletions)
    topics = {}
    for name, t in image.topics.items():
        if name in pending:
            continue
        topics[name] = (
            t.topic_id,
            {
                pid: (
                    tuple(p.replicas),
                    tuple(p.isr),
                    p.leader,
                    p.leader_epoch,
                    p.partition_epoch,
                    p.leader_recovery_state,
                    tuple(p.adding_replicas),
                    tuple(p.removing_replicas),
                )
                for pid, p in t.partitions.items()
            },
        )
    configs = {
        key: dict(entity.configs)
        for key, entity in image.configs.items()
        if entity.configs and not (key[0] == "TOPIC" and key[1] not in topics)
    }
    quotas = {frozenset(q.entity.items()): dict(q.values) for q in image.client_quotas if q.values}
    scram = {
        key: (bytes(c.salt), bytes(c.stored_key), bytes(c.server_key), c.iterations)
        for key, c in image.scram_credentials.items()
    }
    block = image.producer_id_block
    return {
        "topics": topics,
        "configs": configs,
        "quotas": quotas,
        "scram": scram,
        "acls": sorted(a.key() for a in image.acls),
        "producer_ids": None if block is None else block.block_end,
        "tokens": {k: v.model_dump() for k, v in image.delegation_tokens.items()},
    }


def assert_consistent(client: KazooClient, log_dir: str | Path) -> tuple[ClusterImage, ClusterImage]:
    """ZooKeeper equals the log's image and /migration covers the log's end: nothing lost or doubled."""
    zk = zk_layout(client)
    replay, end = log_replay(log_dir)
    assert replay.open_transaction is None, f"open transaction left in the log: {replay.open_transaction}"
    assert replay.migration_state == 1, f"log state {replay.migration_state_name}, expected MIGRATION"
    m = zk.control.migration
    assert m is not None, "/migration missing"
    assert m.kraft_metadata_offset == end - 1, f"/migration at {m.kraft_metadata_offset}, log ends at {end}"
    assert not zk.image.pending_deletions, f"pending deletions left: {zk.image.pending_deletions}"
    left, right = normalise(zk.image), normalise(replay.image)
    for key in left:
        if left[key] != right[key]:
            if isinstance(left[key], dict):
                only_zk = sorted(map(str, set(left[key]) - set(right[key])))[:5]
                only_log = sorted(map(str, set(right[key]) - set(left[key])))[:5]
                differ = sorted(
                    str(k) for k in set(left[key]) & set(right[key]) if left[key][k] != right[key][k]
                )[:5]
                raise AssertionError(
                    f"{key} differ: only in ZooKeeper {only_zk}, only in the log {only_log}, different {differ}"
                )
            raise AssertionError(f"{key} differ: ZooKeeper {left[key]!r} vs log {right[key]!r}")
    return zk.image, replay.image


def assert_audit_clean(zk_connect: str, log_dir: str | Path) -> None:
    """The Spark audit an operator runs after each phase (`zk2kraft audit`): live ZooKeeper against
    the log, entity by entity, no mismatch (the run's one SparkSession, tests/spark_session.py)."""
    import spark_session

    from spark_audit.audit import AuditOptions, run_audit

    spark_session.get()
    result = run_audit(
        AuditOptions(log_dir=str(log_dir), zookeeper=zk_connect, master=spark_session.MASTER, limit=20)
    )
    bad = [d for d in result.differences if d["verdict"] == "mismatch"][:5]
    assert result.exit_code == 0 and result.mismatches == 0, bad


def simulated_brokers(
    address: tuple[str, int],
    zk_connect: str,
    generated: GeneratedCluster,
    ids: list[int] | None = None,
    **kw: Any,
) -> Any:
    """A BrokerSimulator for the generated cluster's brokers (``ids``: some of them), each registering
    with the endpoints and rack of its ZooKeeper registration, as a ZK-mode broker does; ``kw`` as
    BrokerSimulator takes them (``interval_s`` 0.3 unless given)."""
    from zk_fixtures.broker_sim import BrokerSimulator
    from zk_fixtures.simulated_broker import listeners_of

    listeners, racks = listeners_of(generated.image)
    kw.setdefault("interval_s", 0.3)
    return BrokerSimulator(
        address,
        zk_connect,
        generated.image.cluster_id or "",
        sorted(generated.image.brokers) if ids is None else ids,
        racks=racks,
        listeners=kw.pop("listeners", listeners),
        **kw,
    )


def register_migrating_broker(service: ControllerService, broker_id: int) -> tuple[int, core.HeartbeatReply]:
    """A ZooKeeper broker registering with the controller as Kafka's brokers do in migration, then its
    first heartbeat at the log's end (caught up): the broker epoch and that heartbeat's reply."""
    reply = service.register(
        core.Registration(
            broker_id, service.core.config.cluster_id, uuid_to_kafka(uuid.uuid4()),
            (core.Listener("PLAINTEXT", f"b{broker_id}", 9092),), {"metadata.version": (1, 21)},
            is_migrating_zk_broker=True,
        )
    )  # fmt: skip
    assert reply.error == 0, reply
    hb = service.heartbeat(core.Heartbeat(broker_id, reply.broker_epoch, service.log.end_offset))
    assert hb.error == 0, hb
    return reply.broker_epoch, hb
