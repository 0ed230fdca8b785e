"""`zk2kraft check` against a real ZooKeeper: every finding code triggered and not, the CLI end to end.

Most clusters are hand-written znodes in Kafka's own JSON (reference §5), because one znode changed
from a healthy cluster is the clearest fixture for one finding; the generator provides the larger ones.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from kazoo.client import KazooClient
from kazoo.security import OPEN_ACL_UNSAFE, make_digest_acl

from cli.main import _register, main
from cli.main import run as run_cli
from migrator import commands, results
from migrator.errors import BadInputError
from migrator.migration import checks
from migrator.migration.checks import DEFAULT_JUTE_MAXBUFFER, Severity
from migrator.model import ClusterImage, Partition, Topic, ZkControlState
from migrator.zk.connection import close, connect
from migrator.zk.tree import ZkTree, ZNode

REPO = Path(__file__).resolve().parent.parent
ZK2KRAFT = REPO / ".venv" / "bin" / "zk2kraft"
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def _j(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def broker_json(bid: int, version: int = 5, mv_max: int | None = 21) -> bytes:
    reg: dict[str, object] = {
        "version": version,
        "host": f"h{bid}",
        "port": 9092,
        "jmx_port": -1,
        "timestamp": "1700000000000",
        "endpoints": [f"PLAINTEXT://h{bid}:9092"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "rack": None,
    }
    if version >= 5:
        reg["features"] = (
            {} if mv_max is None else {"metadata.version": {"min_version": 1, "max_version": mv_max}}
        )
    return _j(reg)


def topic_json(
    assignment: dict[int, list[int]], topic_id: str | None = "AAAAAAAAAAAAAAAAAAAAAA", **extra: object
) -> bytes:
    obj: dict[str, object] = {
        "version": 3 if topic_id else 2,
        "partitions": {str(p): r for p, r in assignment.items()},
        "adding_replicas": {},
        "removing_replicas": {},
    }
    if topic_id:
        obj["topic_id"] = topic_id
    obj.update(extra)
    return _j(obj)


def state_json(leader: int, isr: list[int], controller_epoch: int = 3, leader_epoch: int = 0) -> bytes:
    return _j(
        {
            "controller_epoch": controller_epoch,
            "leader": leader,
            "version": 1,
            "leader_epoch": leader_epoch,
            "isr": isr,
        }
    )


TOPIC_IDS = {"orders": "Zq2m0cV2R8m5-mT3y0Bq8g", "clicks": "b0Sa7mKfQ4yQ2HU_yn7s1A"}


def healthy(zk: KazooClient, brokers: tuple[int, ...] = (1, 2, 3), controller_epoch: int = 7) -> None:
    """A small clean ZK-mode cluster: brokers registered (ephemeral), two topics, a ZK controller."""
    zk.create("/cluster/id", _j({"version": "1", "id": CLUSTER_ID}), makepath=True)
    zk.create("/controller_epoch", str(controller_epoch).encode())
    zk.create(
        "/controller",
        _j({"version": 2, "brokerid": brokers[0], "timestamp": "1700000000000", "kraftControllerEpoch": -1}),
        ephemeral=True,
    )
    for b in brokers:
        zk.create(f"/brokers/ids/{b}", broker_json(b), ephemeral=True, makepath=True)
    for name, tid in TOPIC_IDS.items():
        assignment = {
            p: [brokers[(p + i) % len(brokers)] for i in range(min(3, len(brokers)))] for p in range(3)
        }
        zk.create(f"/brokers/topics/{name}", topic_json(assignment, tid), makepath=True)
        for p, replicas in assignment.items():
            zk.create(
                f"/brokers/topics/{name}/partitions/{p}/state",
                state_json(replicas[0], replicas),
                makepath=True,
            )
        zk.create(f"/config/topics/{name}", _j({"version": 1, "config": {}}), makepath=True)
    zk.ensure_path("/admin/delete_topics")
    zk.create("/feature", _j({"version": 2, "status": 1, "features": {}}))


def run(zk_connect: str, **kw: object) -> results.CheckResult:
    return commands.check(zk_connect, **kw)  # type: ignore[arg-type]


def codes(result: results.CheckResult) -> set[str]:
    return {f.code for f in result.findings}


def only(result: results.CheckResult, code: str) -> checks.Finding:
    found = [f for f in result.findings if f.code == code]
    assert len(found) == 1, [f.code for f in result.findings]
    return found[0]


# --- the baseline: a clean cluster triggers nothing --------------------------------------------------


@pytest.mark.zk
def test_healthy_cluster_is_eligible(zk, zk_connect):
    healthy(zk)
    result = run(zk_connect)
    assert codes(result) == {"BROKER_CONFIG_NOT_CHECKED"}, result.findings
    assert result.exit_code == 0
    s = result.summary
    assert s.eligible and s.reachable and s.cluster_id == CLUSTER_ID
    assert (s.brokers, s.topics, s.partitions) == (3, 2, 6)
    assert s.zxid and s.zxid > 0
    assert s.verdict == "eligible for migration"


# --- one finding per changed fact ----------------------------------------------------------------


@pytest.mark.zk
def test_no_brokers(zk, zk_connect):
    healthy(zk, brokers=(1,))
    zk.delete("/brokers/ids/1")
    result = run(zk_connect)
    assert "NO_BROKERS" in codes(result)
    assert result.exit_code == 1
    assert "UNREGISTERED_REPLICA_BROKER" in codes(result)


@pytest.mark.zk
def test_unregistered_replica_broker_names_ids_and_partitions(zk, zk_connect):
    healthy(zk, brokers=(1, 2, 3, 4))
    zk.delete("/brokers/ids/4")
    zk.delete("/brokers/ids/2")
    f = only(run(zk_connect), "UNREGISTERED_REPLICA_BROKER")
    assert f.severity == Severity.BLOCKER
    assert f.ids == [2, 4]
    assert "broker 2 (" in f.message and "broker 4 (" in f.message
    assert "orders-" in f.message and "WAIT_FOR_BROKERS" in f.message
    assert any(p.startswith("/brokers/topics/") for p in f.paths)
    assert f.count == sum(
        1
        for t in ("orders", "clicks")
        for p in range(3)
        for b in [(p + i) % 4 for i in range(3)]
        if b in (1, 3)
    )


@pytest.mark.zk
def test_offline_partitions_counted_with_examples(zk, zk_connect):
    healthy(zk)
    zk.set("/brokers/topics/orders/partitions/0/state", state_json(-1, [2]))
    zk.set("/brokers/topics/clicks/partitions/2/state", state_json(3, []))
    result = run(zk_connect)
    f = only(result, "OFFLINE_PARTITIONS")
    assert f.count == 2 and f.severity == Severity.WARNING
    assert "orders-0" in f.message and "clicks-2" in f.message
    assert result.exit_code == 0  # a warning alone keeps the cluster eligible


@pytest.mark.zk
def test_partition_state_missing(zk, zk_connect):
    healthy(zk)
    zk.delete("/brokers/topics/orders/partitions/1", recursive=True)
    f = only(run(zk_connect), "PARTITION_STATE_MISSING")
    assert f.paths == ["/brokers/topics/orders/partitions/1/state"]


@pytest.mark.zk
def test_topic_without_id_is_a_blocker(zk, zk_connect):
    healthy(zk)
    zk.set("/brokers/topics/clicks", topic_json({0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}, topic_id=None))
    result = run(zk_connect)
    f = only(result, "TOPIC_WITHOUT_ID")
    assert f.paths == ["/brokers/topics/clicks"] and "clicks" in f.message
    assert result.exit_code == 1


@pytest.mark.zk
def test_pending_deletion_is_a_warning_and_excuses_a_missing_id(zk, zk_connect):
    healthy(zk)
    zk.set("/brokers/topics/clicks", topic_json({0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}, topic_id=None))
    zk.create("/admin/delete_topics/clicks")
    result = run(zk_connect)
    f = only(result, "PENDING_TOPIC_DELETIONS")
    assert f.paths == ["/admin/delete_topics/clicks"] and f.severity == Severity.WARNING
    # Kafka skips pending deletions before it reads topic ids, so no TOPIC_WITHOUT_ID for it
    assert "TOPIC_WITHOUT_ID" not in codes(result)
    assert result.exit_code == 0


@pytest.mark.zk
def test_reassignment_in_progress_both_forms(zk, zk_connect):
    healthy(zk, brokers=(1, 2, 3, 4))
    zk.create(
        "/admin/reassign_partitions",
        _j({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [2, 3, 4]}]}),
    )
    f = only(run(zk_connect), "REASSIGNMENT_IN_PROGRESS")
    assert "/admin/reassign_partitions" in f.paths and "orders-0" in f.message
    zk.delete("/admin/reassign_partitions")
    assert "REASSIGNMENT_IN_PROGRESS" not in codes(run(zk_connect))
    zk.set(
        "/brokers/topics/clicks",
        topic_json(
            {0: [4, 2, 3, 1], 1: [2, 3, 4], 2: [3, 4, 1]},
            TOPIC_IDS["clicks"],
            adding_replicas={"0": [4]},
            removing_replicas={"0": [1]},
        ),
    )
    f = only(run(zk_connect), "REASSIGNMENT_IN_PROGRESS")
    assert "clicks-0" in f.message and "/brokers/topics/clicks" in f.paths


@pytest.mark.zk
def test_leftover_migration_znode(zk, zk_connect):
    healthy(zk)
    mig = {
        "version": 0,
        "kraft_controller_id": 3000,
        "kraft_controller_epoch": 12,
        "kraft_metadata_offset": 52341,
        "kraft_metadata_epoch": 12,
    }
    zk.create("/migration", _j(mig))
    result = run(zk_connect)
    f = only(result, "LEFTOVER_MIGRATION_ZNODE")
    assert "52341" in f.message and f.paths == ["/migration"]
    assert result.exit_code == 1
    assert "MIGRATION_ZNODE_IN_PROGRESS" not in codes(result)  # /controller is a ZK broker's


@pytest.mark.zk
def test_empty_migration_znode_is_only_a_warning(zk, zk_connect):
    healthy(zk)
    empty = dict.fromkeys(
        ("kraft_controller_id", "kraft_controller_epoch", "kraft_metadata_offset", "kraft_metadata_epoch"), -1
    )
    zk.create("/migration", _j({"version": 0, **empty}))
    result = run(zk_connect)
    assert "MIGRATION_ZNODE_EMPTY" in codes(result) and "LEFTOVER_MIGRATION_ZNODE" not in codes(result)
    assert result.exit_code == 0


def _kraft_controller(zk: KazooClient, epoch: int, ephemeral: bool = False) -> None:
    zk.delete("/controller")
    zk.create(
        "/controller",
        _j({"version": 2, "brokerid": 3000, "timestamp": "1700000000000", "kraftControllerEpoch": epoch}),
        ephemeral=ephemeral,
    )


@pytest.mark.zk
def test_controller_held_by_kraft_and_migration_in_progress(zk, zk_connect):
    healthy(zk, controller_epoch=40)
    _kraft_controller(zk, epoch=12)
    zk.create(
        "/migration",
        _j(
            {
                "version": 0,
                "kraft_controller_id": 3000,
                "kraft_controller_epoch": 12,
                "kraft_metadata_offset": 9,
                "kraft_metadata_epoch": 12,
            }
        ),
    )
    result = run(zk_connect, preflight=True)
    f = only(result, "CONTROLLER_HELD_BY_KRAFT")
    assert f.ids == [3000] and "12" in f.message and "persistent" in f.message
    assert "MIGRATION_ZNODE_IN_PROGRESS" in codes(result)
    assert "ZK_EPOCH_NOT_ABOVE_KRAFT_EPOCH" not in codes(result)  # 40 > 12


@pytest.mark.zk
def test_persistent_controller_without_kraft_epoch_is_kraft_held(zk, zk_connect):
    healthy(zk)
    zk.delete("/controller")
    zk.create("/controller", _j({"version": 1, "brokerid": 1, "timestamp": "1700000000000"}))
    assert "CONTROLLER_HELD_BY_KRAFT" in codes(run(zk_connect, preflight=True))


@pytest.mark.zk
def test_zk_epoch_not_above_kraft_epoch(zk, zk_connect):
    healthy(zk, controller_epoch=5)
    _kraft_controller(zk, epoch=9)
    result = run(zk_connect, preflight=True)
    f = only(result, "ZK_EPOCH_NOT_ABOVE_KRAFT_EPOCH")
    assert "/controller_epoch is 5" in f.message and "9" in f.message
    assert "set /controller_epoch 10" in f.hint


@pytest.mark.zk
def test_partition_states_written_with_a_higher_epoch(zk, zk_connect):
    """After a rollback: states carry the KRaft epoch, /controller is a ZK broker's again."""
    healthy(zk, controller_epoch=5)
    zk.set("/brokers/topics/orders/partitions/2/state", state_json(3, [3, 1, 2], controller_epoch=17))
    f = only(run(zk_connect), "ZK_EPOCH_NOT_ABOVE_KRAFT_EPOCH")
    assert "orders-2" in f.message and "17" in f.message
    assert "/brokers/topics/orders/partitions/2/state" in f.paths
    assert "set /controller_epoch 18" in f.hint


@pytest.mark.zk
def test_controller_epoch_missing(zk, zk_connect):
    healthy(zk)
    zk.delete("/controller_epoch")
    f = only(run(zk_connect), "CONTROLLER_EPOCH_MISSING")
    assert f.paths == ["/controller_epoch"]


@pytest.mark.zk
def test_cluster_id_missing(zk, zk_connect):
    healthy(zk)
    zk.delete("/cluster/id")
    assert "CLUSTER_ID_MISSING" in codes(run(zk_connect))


@pytest.mark.zk
def test_broker_registration_too_old(zk, zk_connect):
    healthy(zk, brokers=(1, 2, 3))
    zk.set("/brokers/ids/1", broker_json(1, version=4))
    zk.set("/brokers/ids/3", broker_json(3, mv_max=7))
    f = only(run(zk_connect), "BROKER_REGISTRATION_TOO_OLD")
    assert f.ids == [1, 3]
    assert "JSON v4" in f.message and "up to 7" in f.message


@pytest.mark.zk
def test_a_kafka_3_9_zookeeper_broker_registration_passes(zk, zk_connect):
    """Kafka 3.9's KafkaServer registers `BrokerFeatures.createEmpty()`: `"features":{}`, no
    metadata.version (found by the real-broker migration test, whose controller refused every broker)."""
    healthy(zk, brokers=(1, 2))
    kafka_39 = {
        "features": {}, "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": ["PLAINTEXT://127.0.0.1:9092"], "jmx_port": -1, "port": 9092,
        "host": "127.0.0.1", "version": 5, "timestamp": "1795868323415",
    }  # fmt: skip
    zk.set("/brokers/ids/2", json.dumps(kafka_39).encode())
    result = run(zk_connect)
    assert "BROKER_REGISTRATION_TOO_OLD" not in codes(result) and result.exit_code == 0


@pytest.mark.zk
def test_mixed_software_versions_are_info(zk, zk_connect):
    healthy(zk, brokers=(1, 2, 3))
    zk.set("/brokers/ids/3", broker_json(3, mv_max=8))  # a 3.4 broker among 3.9 ones
    result = run(zk_connect)
    f = only(result, "METADATA_VERSION_MISMATCH")
    assert f.severity == Severity.INFO and "<= 8" in f.message
    assert "BROKER_REGISTRATION_TOO_OLD" not in codes(result) and result.exit_code == 0


# --- sizes: jute.maxbuffer -----------------------------------------------------------------------


@pytest.mark.zk
def test_znode_sizes_against_jute_maxbuffer(zk, zk_connect):
    healthy(zk)
    limit = 64 * 1024
    base = "/isr_change_notification/isr_change_"
    zk.create(base + "0000000001", b"x" * (limit - 80), makepath=True)  # data + 88 reply bytes > limit
    zk.create(base + "0000000002", b"y" * int(limit * 0.8))
    zk.create(base + "0000000003", b"z" * int(limit * 0.7))
    result = run(zk_connect, jute_maxbuffer=limit)
    over = only(result, "ZNODE_OVER_MAXBUFFER")
    near = only(result, "ZNODE_NEAR_MAXBUFFER")
    assert over.paths == [base + "0000000001"] and near.paths == [base + "0000000002"]
    assert result.exit_code == 1
    # with Kafka's default limit none of these matter
    assert not codes(run(zk_connect)) & {"ZNODE_OVER_MAXBUFFER", "ZNODE_NEAR_MAXBUFFER"}


@pytest.mark.zk
def test_child_list_sizes_against_jute_maxbuffer(zk, zk_connect):
    healthy(zk)
    limit = 16 * 1024
    name = "config_change_{:010d}_" + "p" * 50
    zk.ensure_path("/config/changes")
    for i in range(250):  # 250 * (4 + 75) bytes of names: about 19 KB
        zk.create("/config/changes/" + name.format(i))
    reply = 16 + 4 + 68 + 250 * (4 + len(name.format(0)))  # getChildren2 reply: header, count, names, Stat
    assert limit < reply
    result = run(zk_connect, jute_maxbuffer=limit)
    f = only(result, "CHILD_LIST_TOO_LARGE")
    assert f.paths == ["/config/changes"] and "250 children" in f.message
    result = run(zk_connect, jute_maxbuffer=int(reply / 0.8))
    assert only(result, "CHILD_LIST_NEAR_MAXBUFFER").paths == ["/config/changes"]
    assert not codes(run(zk_connect)) & {"CHILD_LIST_TOO_LARGE", "CHILD_LIST_NEAR_MAXBUFFER"}


def test_size_thresholds_without_a_server():
    """The exact edges: a Java client accepts a reply of exactly jute.maxbuffer bytes, not one more."""
    limit = DEFAULT_JUTE_MAXBUFFER
    tree = ZkTree()
    edge = limit - checks.GET_DATA_OVERHEAD
    tree.add(ZNode("/a", None, data_length=edge))
    tree.add(ZNode("/b", None, data_length=edge + 1))
    tree.add(ZNode("/c", None, data_length=int(limit * 0.75)))
    tree.children_reply_bytes = {"/l1": limit, "/l2": limit + 1}
    found = {(f.code, f.paths[0]) for f in checks.check_sizes(tree)}
    assert found == {
        ("ZNODE_NEAR_MAXBUFFER", "/a"),
        ("ZNODE_OVER_MAXBUFFER", "/b"),
        ("CHILD_LIST_NEAR_MAXBUFFER", "/l1"),
        ("CHILD_LIST_TOO_LARGE", "/l2"),
    }


# --- malformed and unknown znodes ---------------------------------------------------------------


@pytest.mark.zk
def test_malformed_znodes_each_named_never_a_traceback(zk, zk_connect):
    healthy(zk)
    bad = {
        "/brokers/ids/2": b'{"version":5,"host":',
        "/brokers/topics/orders": b"not json at all",
        "/brokers/topics/clicks/partitions/1/state": b'{"leader":"one"}',
        "/controller_epoch": b"seven",
    }
    for path, data in bad.items():
        zk.set(path, data)
    zk.create(
        "/config/users/alice",
        b'{"version":1,"config":{"SCRAM-SHA-256":"salt=c2VjcmV0c2FsdA==,stored_key=U1RPUkVES0VZ,server_key=U0VSVkVSS0VZ,iterations=8192"',
        makepath=True,
    )
    result = run(zk_connect)
    flagged = {
        p for f in result.findings if f.code in ("MALFORMED_ZNODE", "UNKNOWN_ZNODE_VERSION") for p in f.paths
    }
    assert set(bad) - {"/controller_epoch"} <= flagged, result.findings
    assert "/config/users/alice" in flagged
    assert result.exit_code == 1
    dumped = result.model_dump_json()
    for secret in ("c2VjcmV0c2FsdA", "U1RPUkVES0VZ", "U0VSVkVSS0VZ"):
        assert secret not in dumped


@pytest.mark.zk
def test_unknown_future_version(zk, zk_connect):
    healthy(zk)
    zk.set(
        "/brokers/topics/orders",
        _j({"version": 99, "partitions": {"0": [1, 2, 3]}, "topic_id": TOPIC_IDS["orders"]}),
    )
    result = run(zk_connect)
    assert "/brokers/topics/orders" in {
        p for f in result.findings if f.code == "UNKNOWN_ZNODE_VERSION" for p in f.paths
    }, result.findings


_VALID = {
    "/brokers/ids/1": broker_json(1),
    "/brokers/topics/orders": topic_json({0: [1]}, TOPIC_IDS["orders"]),
    "/brokers/topics/orders/partitions/0/state": state_json(1, [1]),
    "/controller": _j({"version": 2, "brokerid": 1, "timestamp": "1", "kraftControllerEpoch": -1}),
    "/controller_epoch": b"3",
    "/migration": _j(
        {
            "version": 0,
            "kraft_controller_id": 1,
            "kraft_controller_epoch": 1,
            "kraft_metadata_offset": 1,
            "kraft_metadata_epoch": 1,
        }
    ),
    "/cluster/id": _j({"version": "1", "id": CLUSTER_ID}),
    "/admin/reassign_partitions": _j(
        {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [1]}]}
    ),
    "/config/users/alice": _j(
        {
            "version": 1,
            "config": {
                "SCRAM-SHA-256": "salt=c2FsdHk=,stored_key=c3Rvcg==,server_key=c2Vydg==,iterations=4096"
            },
        }
    ),
    "/latest_producer_id_block": _j({"version": 1, "broker": 1, "block_start": "0", "block_end": "999"}),
    "/kafka-acl/Topic/orders": _j(
        {
            "version": 1,
            "acls": [{"principal": "User:a", "permissionType": "Allow", "operation": "Read", "host": "*"}],
        }
    ),
    "/feature": _j({"version": 2, "status": 1, "features": {}}),
}


def _mutate(rng: random.Random, data: bytes) -> bytes | None:
    kind = rng.randrange(6)
    if kind == 0:
        return rng.randbytes(rng.randrange(40))
    if kind == 1:
        return data[: rng.randrange(len(data))]
    if kind == 2 and data[:1] == b"{":
        obj = json.loads(data)
        obj[rng.choice(list(obj))] = rng.choice(
            [None, -1, "x", [], {}, 1e308, True, 2**40, [None], {"a": None}]
        )
        return _j(obj)
    if kind == 3:
        return None
    b = bytearray(data)
    b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


def test_damaged_znodes_never_raise():
    """Random damage to a few known znodes: findings, never an exception, never a secret."""
    from migrator.zk.layout import image_from_tree

    rng = random.Random(20261122)
    children: dict[str, set[str]] = {}
    for path in _VALID:
        parts = path.split("/")
        for i in range(1, len(parts)):
            children.setdefault("/".join(parts[:i]) or "/", set()).add(parts[i])
    for _ in range(400):
        damaged = rng.sample(sorted(_VALID), rng.randrange(1, 4))
        tree = ZkTree()
        for path, data in _VALID.items():
            value = _mutate(rng, data) if path in damaged else data
            tree.add(ZNode(path, value, data_length=len(value or b"")))
        for parent, names in children.items():
            if parent not in tree.nodes:
                tree.add(ZNode(parent, None))
            tree.children[parent] = sorted(names)
        layout = image_from_tree(tree, strict=False)
        found = checks.check_zk_view(layout.image, layout.control, tree, layout.problems)
        text = " ".join(f.message for f in found)
        assert "c3Rvcg" not in text and "c2Vydg" not in text


# --- connection: unreachable, chroot, auth -------------------------------------------------------


def _dead_port() -> int:
    from zk_fixtures.server import free_port

    return free_port()


def test_unreachable_is_a_finding_with_exit_3():
    result = commands.check(f"127.0.0.1:{_dead_port()}", zk_timeout=1.0)
    assert result.exit_code == 3
    assert [f.code for f in result.findings if f.severity == Severity.BLOCKER] == ["ZK_UNREACHABLE"]
    assert not result.summary.reachable and not result.summary.eligible


@pytest.mark.zk
def test_chroot_is_honoured(zk_server):
    root = connect(zk_server)
    try:
        root.create("/kafka-chroot-check/inner", makepath=True)
        scoped = connect(zk_server + "/kafka-chroot-check/inner")
        try:
            healthy(scoped)  # its session holds the ephemeral broker registrations
            result = commands.check(zk_server + "/kafka-chroot-check/inner")
            assert result.exit_code == 0 and result.summary.brokers == 3, result.findings
            # the parent of the chroot has no Kafka in it
            bare = commands.check(zk_server + "/kafka-chroot-check")
            assert "NO_BROKERS" in codes(bare)
        finally:
            close(scoped)
    finally:
        root.delete("/kafka-chroot-check", recursive=True)
        close(root)


@pytest.mark.zk
def test_missing_chroot_is_bad_input(zk_server):
    with pytest.raises(BadInputError, match="chroot"):
        commands.check(zk_server + "/no-such-chroot-for-check")


@pytest.mark.zk
def test_digest_auth_and_permission_error_naming_the_path(zk_connect):
    acl = [make_digest_acl("kafka", "s3cret-pw", all=True)]
    protected = ("/brokers/topics/orders", "/brokers/topics/orders/partitions")
    writer = connect(zk_connect, auth=["digest:kafka:s3cret-pw"])
    try:
        healthy(writer)  # the session stays open: it holds the broker registrations
        for path in protected:
            writer.set_acls(path, acl)
        ok = commands.check(zk_connect, zk_auth=["digest:kafka:s3cret-pw"])
        assert ok.exit_code == 0, ok.findings
        for auth in ([], ["digest:kafka:wrong"]):
            denied = commands.check(zk_connect, zk_auth=auth)
            assert denied.exit_code == 3
            f = only(denied, "ZK_AUTH_FAILED")
            assert f.paths and f.paths[0].endswith("/brokers/topics/orders"), f
            assert "/brokers/topics/orders" in f.message
            assert "s3cret-pw" not in denied.model_dump_json()
    finally:
        for path in protected:  # let the fixture's unauthenticated cleanup delete them
            writer.set_acls(path, OPEN_ACL_UNSAFE)
        close(writer)


@pytest.mark.zk
def test_refused_credential_is_an_auth_finding(zk_connect):
    """ZooKeeper refuses a scheme it has no provider for and closes the session."""
    for _ in range(3):  # once was racy: the refusal must never look like a lost connection
        result = commands.check(zk_connect, zk_auth=["nosuchscheme:whatever"], zk_timeout=3.0)
        assert result.exit_code == 3
        f = only(result, "ZK_AUTH_FAILED")
        assert "nosuchscheme" in f.message and "whatever" not in f.message


# --- broker configs together with ZooKeeper -----------------------------------------------------

GOOD_PROPERTIES = """\
broker.id={bid}
zookeeper.connect=zk:2181/kafka
zookeeper.metadata.migration.enable=true
inter.broker.protocol.version=3.9
controller.quorum.bootstrap.servers=ctrl0:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
ssl.keystore.password=keystore-s3cret
"""


def _write_configs(d: Path, ids: list[int], **override: str) -> Path:
    d.mkdir(exist_ok=True)
    for bid in ids:
        text = GOOD_PROPERTIES.format(bid=bid)
        for k, v in override.items():
            text += f"{k.replace('__', '.')}={v}\n"
        (d / f"broker-{bid}.properties").write_text(text)
    return d


@pytest.mark.zk
def test_broker_configs_cover_registered_brokers(zk, zk_connect, tmp_path):
    from cli.check_cmd import load_broker_configs

    healthy(zk)
    d = _write_configs(tmp_path / "cfg", [1, 2, 3])
    result = run(zk_connect, broker_configs=load_broker_configs(str(d)))
    assert codes(result) == set() and result.exit_code == 0
    (d / "broker-3.properties").unlink()
    result = run(zk_connect, broker_configs=load_broker_configs(str(d)))
    assert only(result, "BROKER_CONFIG_MISSING").ids == [3]


@pytest.fixture(scope="module")
def cli():
    _register()
    return CliRunner()


# --- generator-loaded clusters ------------------------------------------------------------------

CLEAN_SPEC = {"pending_deletions": 0, "reassignments": 0, "offline_partitions": 0, "legacy_topics": 0}


@pytest.mark.zk
def test_generated_clean_cluster_is_eligible(zk, zk_connect):
    from zk_fixtures.brokers import BrokerSessions
    from zk_fixtures.generator import ClusterSpec, load_cluster

    gen = load_cluster(zk, ClusterSpec(seed=3, **CLEAN_SPEC))
    with BrokerSessions(zk_connect, gen.image, gen.control):
        result = run(zk_connect)
    assert codes(result) == {"BROKER_CONFIG_NOT_CHECKED"}, result.findings
    assert result.summary.partitions == gen.image.partition_count()
    assert result.summary.cluster_id == gen.image.cluster_id


@pytest.mark.zk
def test_generated_cluster_flags_exactly_what_the_spec_put_in(cli, zk, zk_connect):
    from zk_fixtures.brokers import BrokerSessions
    from zk_fixtures.generator import ClusterSpec, load_cluster

    gen = load_cluster(zk, ClusterSpec(seed=5))  # defaults: every awkward feature once or twice
    image = gen.image
    pending = set(image.pending_deletions)
    legacy = sorted(n for n, t in image.topics.items() if t.topic_id is None and n not in pending)
    offline = sum(
        1 for t in image.topics.values() for p in t.partitions.values() if p.leader < 0 or not p.isr
    )
    with BrokerSessions(zk_connect, image, gen.control):
        result = run(zk_connect)
        res = cli.invoke(main, ["check", "-z", zk_connect], terminal_width=200)
    assert res.exit_code == (1 if legacy else 0), res.output
    cli_text = res.output
    expected = {
        "PENDING_TOPIC_DELETIONS",
        "REASSIGNMENT_IN_PROGRESS",
        "OFFLINE_PARTITIONS",
        "BROKER_CONFIG_NOT_CHECKED",
    }
    if legacy:
        expected.add("TOPIC_WITHOUT_ID")
        assert only(result, "TOPIC_WITHOUT_ID").count == len(legacy)
    assert codes(result) == expected, result.findings
    assert only(result, "OFFLINE_PARTITIONS").count == offline
    assert only(result, "PENDING_TOPIC_DELETIONS").count == len(pending)
    # invariant 6: none of the generated SCRAM keys, salts, passwords or token HMACs leaks
    dumped = result.model_dump_json()
    for secret in gen.secrets.strings(image):
        assert secret not in dumped and secret not in cli_text


# --- the CLI --------------------------------------------------------------------------------------


@pytest.mark.zk
def test_cli_json_and_table(cli, zk, zk_connect):
    healthy(zk)
    zk.set("/brokers/topics/orders/partitions/0/state", state_json(-1, []))
    res = cli.invoke(main, ["check", "--zookeeper", zk_connect, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["exit_code"] == 0 and doc["summary"]["eligible"] is True
    assert doc["summary"]["zxid"] > 0
    assert {f["code"] for f in doc["findings"]} == {"OFFLINE_PARTITIONS", "BROKER_CONFIG_NOT_CHECKED"}
    f = next(f for f in doc["findings"] if f["code"] == "OFFLINE_PARTITIONS")
    assert set(f) == {"code", "severity", "message", "hint", "paths", "ids", "count"}
    res = cli.invoke(main, ["check", "--zookeeper", zk_connect], terminal_width=160)
    assert res.exit_code == 0
    assert "OFFLINE_PARTITIONS" in res.output and "eligible for migration (1 warning to review)" in res.output


@pytest.mark.zk
def test_cli_env_var_and_blocker_exit(cli, zk, zk_connect):
    healthy(zk)
    zk.delete("/brokers/ids/3")
    res = cli.invoke(main, ["check", "--json"], env={"ZK2KRAFT_ZOOKEEPER": zk_connect})
    assert res.exit_code == 1
    assert json.loads(res.output)["summary"]["verdict"].startswith("NOT eligible")


@pytest.mark.zk
def test_cli_takes_zookeeper_connect_from_a_kafka_properties_file(cli, zk, zk_connect, tmp_path):
    healthy(zk)
    props = tmp_path / "controller.properties"
    props.write_text(f"process.roles=controller\nzookeeper.connect={zk_connect}\n")
    res = cli.invoke(main, ["--config", str(props), "check", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["summary"]["zookeeper"] == zk_connect


def test_cli_unreachable_json_still_reports(cli):
    res = cli.invoke(
        main, ["check", "--zookeeper", f"127.0.0.1:{_dead_port()}", "--zk-timeout", "1", "--json"]
    )
    assert res.exit_code == 3
    doc = json.loads(res.output)
    assert doc["findings"][0]["code"] == "ZK_UNREACHABLE"


def _subprocess(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}
    full_env.update(env or {})
    return subprocess.run(
        [str(ZK2KRAFT), "check", *args], capture_output=True, text=True, env=full_env, timeout=120
    )


@pytest.mark.zk
def test_subprocess_exit_codes(zk, zk_connect, tmp_path):
    healthy(zk)
    ok = _subprocess("--zookeeper", zk_connect)
    assert ok.returncode == 0, ok.stderr
    assert "eligible for migration" in ok.stdout
    zk.delete("/brokers/ids/2")
    blocked = _subprocess("--zookeeper", zk_connect, "--json")
    assert blocked.returncode == 1
    assert "UNREGISTERED_REPLICA_BROKER" in blocked.stdout
    bad = _subprocess("--zookeeper", "no-port-here")
    assert bad.returncode == 2 and bad.stderr.startswith("zk2kraft: error:")
    missing_dir = _subprocess("--zookeeper", zk_connect, "--broker-config", str(tmp_path / "nope"))
    assert missing_dir.returncode == 2 and "--broker-config" in missing_dir.stderr
    down = _subprocess("--zookeeper", f"127.0.0.1:{_dead_port()}", "--zk-timeout", "1")
    assert down.returncode == 3
    assert "ZK_UNREACHABLE" in down.stdout
    for proc in (ok, blocked, bad, missing_dir, down):
        assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout


@pytest.mark.zk
def test_cli_broker_config_with_secrets_never_printed(cli, zk, zk_connect, tmp_path):
    healthy(zk)
    d = _write_configs(tmp_path / "cfg", [1, 2, 3], inter__broker__protocol__version="3.3")
    res = cli.invoke(main, ["check", "-z", zk_connect, "--broker-config", str(d), "--json"])
    assert res.exit_code == 1
    assert "BROKER_CONFIG_IBP_TOO_OLD" in res.output
    assert "keystore-s3cret" not in res.output
    empty = tmp_path / "empty"
    empty.mkdir()
    res = cli.invoke(main, ["check", "-z", zk_connect, "--broker-config", str(empty)])
    assert isinstance(res.exception, BadInputError) and "no *.properties" in str(res.exception)
    # through the entry point the same error is one line and exit 2
    assert run_cli(["check", "-z", zk_connect, "--broker-config", str(empty)]) == 2
    assert run_cli(["check", "-z", zk_connect, "--broker-config", str(tmp_path / "missing")]) == 2
    assert run_cli(["check", "-z", "localhost"]) == 2


def test_table_caps_rows_per_code():
    import io

    from rich.console import Console

    from cli.check_cmd import render

    problems = [
        checks.Finding(code="MALFORMED_ZNODE", severity=Severity.BLOCKER, message=f"/x/{i}: bad", hint="h")
        for i in range(25)
    ]
    summary = results.CheckSummary(
        eligible=False,
        verdict="NOT eligible",
        blockers=25,
        warnings=0,
        infos=0,
        zookeeper="h:1",
        reachable=True,
        zxid=1,
    )
    buf = io.StringIO()
    render(results.CheckResult(findings=problems, summary=summary, exit_code=1), Console(file=buf, width=200))
    text = buf.getvalue()
    assert "/x/19: bad" in text and "/x/20: bad" not in text
    assert "and 5 more MALFORMED_ZNODE findings" in text


# --- the registry and its documentation --------------------------------------------------------


def test_docs_match_the_registry():
    doc = (REPO / "docs" / "checks.md").read_text()
    assert doc == checks.docs_markdown(), (
        "docs/checks.md is stale: run `.venv/bin/python -m migrator.migration.checks > docs/checks.md`"
    )
    for code in checks.registry():
        assert f"`{code}`" in doc


def test_every_code_has_a_test_here():
    text = "".join(
        (REPO / "tests" / name).read_text()
        for name in (
            "test_check.py",
            "test_broker_config.py",
            "test_oversized_change.py",
            "test_log_binding.py",
        )
    )
    missing = [code for code in checks.registry() if code not in text]
    assert not missing, f"codes without a test: {missing}"


# --- performance: single passes over a large image ------------------------------------------------


@pytest.mark.slow
def big_view(topics: int = 2000, partitions: int = 100) -> tuple[ClusterImage, ZkTree]:
    """``topics`` x ``partitions`` (sharing one partition dict: the checks only read), 30 brokers, one
    offline partition per topic, broker 31 named but not registered, a topic id missing every 500
    topics; also used by bench/check.py."""
    from migrator.model import Broker

    image = ClusterImage(cluster_id=CLUSTER_ID)
    for b in range(1, 31):
        image.brokers[b] = Broker(id=b, features={"metadata.version": {"min_version": 1, "max_version": 21}})
    parts = {
        p: Partition.model_construct(
            partition=p,
            replicas=[1 + (p + i) % 31 for i in range(3)],
            isr=[1 + p % 31],
            leader=-1 if p == 7 else 1 + p % 31,
            leader_epoch=0,
            partition_epoch=0,
            leader_recovery_state=0,
            adding_replicas=[],
            removing_replicas=[],
            controller_epoch=3,
            has_state=True,
        )
        for p in range(partitions)
    }
    for t in range(topics):
        image.topics[f"t{t}"] = Topic.model_construct(
            name=f"t{t}", topic_id=None if t % 500 == 0 else "x", partitions=parts, json_version=3
        )
    tree = ZkTree()
    for t in range(topics):
        for p in range(partitions):
            tree.add(ZNode(f"/brokers/topics/t{t}/partitions/{p}/state", b"", data_length=80))
    return image, tree


@pytest.mark.timeout(300)  # a hang guard only: how long it takes is bench/check.py's measure
def test_checks_on_200k_partitions_find_what_they_should():
    """2,000 topics x 100 partitions, each finding counted and capped as on a small cluster."""
    image, tree = big_view()
    found = checks.check_zk_view(image, ZkControlState(controller_epoch=5), tree)
    by_code = {f.code: f for f in found}
    assert by_code["OFFLINE_PARTITIONS"].count == 2000
    assert by_code["UNREGISTERED_REPLICA_BROKER"].ids == [31]
    assert by_code["TOPIC_WITHOUT_ID"].count == 4
    assert len(by_code["OFFLINE_PARTITIONS"].paths) <= checks.MAX_LISTED


@pytest.mark.zk
def test_without_a_terminal_no_table_cell_is_cut(zk, zk_connect):
    """Redirected output keeps whole fixes and identifiers (rich cut them at 80 columns before)."""
    healthy(zk, controller_epoch=5)
    _kraft_controller(zk, epoch=9)
    proc = subprocess.run(
        [str(ZK2KRAFT), "check", "--preflight", "--zookeeper", zk_connect],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert "…" not in proc.stdout
    assert "(zookeeper-shell: set /controller_epoch 10)" in proc.stdout
    assert "ZK_EPOCH_NOT_ABOVE_KRAFT_EPOCH" in proc.stdout


def test_without_a_terminal_rules_keep_a_readable_width(capsys):
    from cli import render

    render.console().rule("section")
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert "section" in line and len(line) <= 100
