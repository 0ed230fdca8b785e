"""The real-Kafka fixture itself: a Kafka 3.9 ZooKeeper-mode broker from the fetched jars serves a real client.

Kafka is fetched from Maven Central on first use (zk_fixtures.kafka_dist); a fetch that fails fails the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from zk_fixtures.kafka import KafkaNode, free_ports, kafka_tool
from zk_fixtures.kafka_dist import KAFKA_VERSION, KafkaFetchError, kafka_libs

pytestmark = [pytest.mark.zk, pytest.mark.slow]


def test_kafka_jars_resolve_from_the_cache_outside_the_work_tree():
    libs = kafka_libs()
    names = {p.name for p in libs.glob("*.jar")}
    assert f"kafka_2.13-{KAFKA_VERSION}.jar" in names
    assert f"kafka-tools-{KAFKA_VERSION}.jar" in names
    assert f"kafka-shell-{KAFKA_VERSION}.jar" in names
    repo = Path(__file__).resolve().parents[1]
    assert repo not in libs.resolve().parents  # never inside the work tree: no jar can be committed


def test_an_unknown_version_fails_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("ZK2KRAFT_CACHE", str(tmp_path))
    with pytest.raises(KafkaFetchError) as err:
        kafka_libs("3.9.99")
    assert "cannot fetch kafka 3.9.99" in str(err.value)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "kafka-3.9.99" / ".complete").exists()


def test_a_zookeeper_mode_broker_serves_kafka_topics_and_a_client(tmp_path, zk_connect):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    (port,) = free_ports(1)
    broker = KafkaNode(
        tmp_path / "b1",
        {
            "broker.id": 1,
            "zookeeper.connect": zk_connect,
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
            "group.initial.rebalance.delay.ms": 0,
        },
    )
    try:
        broker.start(wait_port="PLAINTEXT")
        bootstrap = f"127.0.0.1:{port}"
        kafka_tool("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", "smoke",
                   "--partitions", "2", "--replication-factor", "1")  # fmt: skip
        described = kafka_tool(
            "kafka-topics", "--bootstrap-server", bootstrap, "--describe", "--topic", "smoke"
        )
        assert "PartitionCount: 2" in described.stdout
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        for i in range(10):
            producer.produce("smoke", value=str(i).encode(), partition=i % 2)
        assert producer.flush(30) == 0
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe(["smoke"])
        got: list[int] = []
        for _ in range(60):
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append(int(msg.value()))
            if len(got) == 10:
                break
        consumer.close()
        assert sorted(got) == list(range(10))
        assert broker.error_lines() == []
    finally:
        broker.stop()
    assert not broker.running
