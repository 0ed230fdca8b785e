"""Companion mode with a real ZooKeeper-mode Kafka 3.9 broker, the docs' runbook end to end and back.

A real broker creates the cluster (and a topic) in ZooKeeper mode; Kafka's KRaft controller is
formatted with that cluster id and started with the migration flag; the broker is restarted with the
migration settings, registers as a migrating ZooKeeper broker and Kafka's controller migrates.
`zk2kraft status` reads the migration (the broker among the migrating ones); then the rollback the
docs give: the controller stopped, `zk2kraft rollback --kafka-controller`, the broker restarted
without the migration settings is elected ZooKeeper-mode controller and still serves the topic.
The simulated brokers of tests/test_kafka_companion.py are checked against this real one.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from migrate_helpers import own_server, run_cli

from migrator.zk import paths as P
from zk_fixtures.kafka import KafkaNode, free_ports, kafka_tool
from zk_fixtures.kafka_migration import COMPLETED, DUAL_WRITE, metadata_log_dir, migration_controller

pytestmark = [pytest.mark.zk, pytest.mark.slow]


@pytest.mark.timeout(1800)
def test_real_broker_migrated_by_kafka_then_rolled_back_by_zk2kraft(tmp_path: Path) -> None:
    with own_server(tmp_path / "zk") as (zk, connect):
        bport, cport = free_ports(2)
        zk_mode = {
            "broker.id": 1,
            "zookeeper.connect": connect,
            "listeners": f"PLAINTEXT://127.0.0.1:{bport}",
            "offsets.topic.replication.factor": 1,
            "inter.broker.protocol.version": "3.9",
        }
        broker = KafkaNode(tmp_path / "broker", dict(zk_mode))
        controller = None
        try:
            broker.start(wait_port="PLAINTEXT")
            bootstrap = f"127.0.0.1:{bport}"
            kafka_tool("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", "real",
                       "--partitions", "2", "--replication-factor", "1")  # fmt: skip
            broker.stop()
            cluster_id = json.loads(zk.get(P.CLUSTER_ID)[0])["id"]

            controller = migration_controller(tmp_path / "kafka", connect, cluster_id, port=cport)
            controller.start(wait_port="CONTROLLER")
            broker.props = {
                **zk_mode,
                "zookeeper.metadata.migration.enable": True,
                "controller.quorum.voters": f"3000@127.0.0.1:{cport}",
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            }
            broker.start(wait_port="PLAINTEXT")
            controller.wait_for_log(COMPLETED, timeout=300)
            controller.wait_for_log(DUAL_WRITE, timeout=120)
            log_dir = metadata_log_dir(controller)

            done = run_cli(["status", "-z", connect, "-l", str(log_dir), "--json"])
            assert done.returncode == 0, done.stderr
            s = json.loads(done.stdout)
            assert (s["state"], s["kafka_state"]) == ("DualWriteMetadata", "MIGRATION"), s
            assert s["kafka_controller"]["migrating_zk_brokers"] == [1]
            assert s["kafka_controller"]["holds_zookeeper"]

            controller.stop()
            done = run_cli(["rollback", "--kafka-controller", "-z", connect, "-l", str(log_dir), "--yes"])
            assert done.returncode == 0, done.stdout + done.stderr
            assert zk.exists(P.MIGRATION) is None

            broker.stop()
            broker.props = dict(zk_mode)  # the docs: the migration settings removed, broker restarted
            broker.start(wait_port="PLAINTEXT")
            deadline = time.monotonic() + 120
            while True:
                node = zk.exists(P.CONTROLLER)
                if node is not None and json.loads(zk.get(P.CONTROLLER)[0]).get("brokerid") == 1:
                    break
                assert time.monotonic() < deadline, f"broker 1 never became controller: {broker.last_lines()}"
                time.sleep(0.2)
            described = kafka_tool(
                "kafka-topics", "--bootstrap-server", bootstrap, "--describe", "--topic", "real"
            )
            assert "PartitionCount: 2" in described.stdout
            assert "Leader: 1" in described.stdout
        finally:
            broker.stop()
            if controller is not None:
                controller.stop()
