"""Companion mode's bad input: a directory or a ZooKeeper that is not Kafka's migration of this cluster.

Each command pointed at them says so in one line and exits 2 (bad input, DESIGN.md's exit codes),
before writing anything. The directories are real Kafka 3.9 controllers' (formatted by `kafka-storage`,
started once, stopped): one of another cluster id, one of this cluster's id created in KRaft mode
(ZkMigrationState NONE, no migration in it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from migrate_helpers import own_server, run_cli

from migrator.zk import paths as P
from zk_fixtures.generator import ClusterSpec, load_cluster
from zk_fixtures.kafka import KafkaNode, free_ports
from zk_fixtures.kafka_migration import format_storage

pytestmark = [pytest.mark.zk, pytest.mark.slow, pytest.mark.spark]

OTHER_CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def _kraft_controller_dir(directory: Path, cluster_id: str) -> Path:
    """A de-novo KRaft controller's metadata.log.dir (no migration flag), started once and stopped."""
    (port,) = free_ports(1)
    node = KafkaNode(
        directory,
        {
            "process.roles": "controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{port}",
            "listeners": f"CONTROLLER://127.0.0.1:{port}",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(directory / "data"),
        },
    )
    format_storage(node, cluster_id)
    node.start(wait_port="CONTROLLER")
    try:
        node.wait_for_log(r"Kafka Server started", timeout=120)
        time.sleep(1)
    finally:
        node.stop()
    return directory / "data"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    base = tmp_path_factory.mktemp("companion-bad")
    with own_server(base / "zk") as (zk, connect):
        generated = load_cluster(
            zk, ClusterSpec(topics=2, partitions=1, legacy_topics=0, pending_deletions=0)
        )
        zk.ensure_path("/not-kafka")
        (base / "empty").mkdir()
        epoch_before = zk.get(P.CONTROLLER_EPOCH)
        yield {
            "zk": connect,
            "not_kafka_zk": connect + "/not-kafka",
            "foreign": str(_kraft_controller_dir(base / "foreign", OTHER_CLUSTER)),
            "kraft_mode": str(_kraft_controller_dir(base / "kraft", generated.image.cluster_id or "")),
            "empty": str(base / "empty"),
        }
        assert (
            zk.exists(P.MIGRATION) is None and zk.get(P.CONTROLLER_EPOCH) == epoch_before
        )  # nothing written


def _one_line(args: list[str], *expect: str) -> None:
    done = run_cli(args, timeout=400)
    err = done.stderr.strip()
    assert done.returncode == 2, f"{args}: exit {done.returncode}: {done.stdout[-500:]} {err}"
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for text in expect:
        assert text in err, err


COMMANDS = {
    "status": ["status"],
    "rollback": ["rollback", "--kafka-controller", "--yes"],
    "audit": ["audit"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_log_of_another_cluster_id(inputs: dict[str, str], command: str) -> None:
    _one_line([*COMMANDS[command], "-z", inputs["zk"], "-l", inputs["foreign"]], OTHER_CLUSTER)


@pytest.mark.parametrize("command", ["status", "rollback"])
def test_a_kafka_log_created_in_kraft_mode_is_no_migration(inputs: dict[str, str], command: str) -> None:
    _one_line([*COMMANDS[command], "-z", inputs["zk"], "-l", inputs["kraft_mode"]], "no ZooKeeper migration")


def test_audit_of_a_kafka_log_created_in_kraft_mode(inputs: dict[str, str]) -> None:
    _one_line(["audit", "-z", inputs["zk"], "-l", inputs["kraft_mode"]], "nothing to audit")


@pytest.mark.parametrize("command", ["status", "rollback"])
def test_a_zookeeper_without_kafka(inputs: dict[str, str], command: str) -> None:
    _one_line(
        [*COMMANDS[command], "-z", inputs["not_kafka_zk"], "-l", inputs["kraft_mode"]], "no Kafka cluster"
    )


@pytest.mark.parametrize("command", ["rollback", "audit"])
def test_a_directory_that_is_no_metadata_log(inputs: dict[str, str], command: str) -> None:
    _one_line(
        [*COMMANDS[command], "-z", inputs["zk"], "-l", inputs["empty"]], "not a KRaft metadata log directory"
    )


def test_log_verify_of_a_directory_that_is_no_metadata_log(inputs: dict[str, str]) -> None:
    _one_line(["log", "verify", "-l", inputs["empty"]], "not a KRaft metadata log directory")
