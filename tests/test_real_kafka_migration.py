"""The whole migration with three real Kafka 3.9 brokers (issue 25): one cluster shared by the phases.

Kafka 3.9.2's jars come from Maven Central on first use (zk_fixtures.kafka_dist). The brokers start in
ZooKeeper mode on the test ZooKeeper, with a replicated topic and every kind of metadata the copy
carries; an idempotent `acks=all` producer and a consumer group run from the first phase to the last.
The tests below are the runbook's phases in order and share that cluster; each one needs the ones
before it (a failed phase fails the later ones with its name, rather than running them on a cluster
in an unknown state).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator

import pytest
from migrate_helpers import assert_audit_clean, run_cli
from real_kafka import CONTROLLER_ID, RealCluster, Traffic, isr_full, leaders, wait_leaders, wait_listening

from migrator.zk.connection import close, connect
from zk_fixtures.kafka import kafka_tool

pytestmark = [pytest.mark.zk, pytest.mark.slow]

TOPIC = "orders"

#: ERROR lines Kafka logs that a test step causes on purpose, each with why (matched per line).
EXPECTED_ERRORS: dict[str, str] = {}


class Run:
    """The shared cluster, its traffic and which phases have passed."""

    def __init__(self, cluster: RealCluster, traffic: Traffic | None = None) -> None:
        self.cluster = cluster
        self.traffic = traffic
        self.passed: set[str] = set()
        self.expected_errors: dict[str, str] = dict(EXPECTED_ERRORS)

    @property
    def where(self) -> list[str]:
        return ["-z", self.cluster.zk_connect, "-l", str(self.cluster.log_dir)]

    def need(self, *phases: str) -> None:
        missing = [p for p in phases if p not in self.passed]
        if missing:
            pytest.fail(f"needs the earlier phase(s) {', '.join(missing)}, which did not pass")

    def status(self) -> dict:
        done = run_cli(["status", "--json", *self.where])
        return json.loads(done.stdout)

    def unexplained_errors(self) -> list[str]:
        out = []
        for bid, node in self.cluster.nodes.items():
            for line in node.error_lines():
                if not any(re.search(rx, line) for rx in self.expected_errors):
                    out.append(f"broker {bid}: {line}")
        if self.cluster.kafka_controller is not None:
            out += [f"controller: {ln}" for ln in self.cluster.kafka_controller.error_lines()
                    if not any(re.search(rx, ln) for rx in self.expected_errors)]  # fmt: skip
        return out


@pytest.fixture(scope="module")
def run(zk_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    pytest.importorskip("confluent_kafka")
    chroot = f"/zk2kraft-real-{uuid.uuid4().hex[:10]}"
    root_client = connect(zk_server)
    root_client.create(chroot)
    cluster = RealCluster(tmp_path_factory.mktemp("real-kafka"), zk_server + chroot)
    state = Run(cluster)
    try:
        yield state
    finally:
        if state.traffic is not None:
            state.traffic.stop(timeout=30)
        cluster.close()
        root_client.delete(chroot, recursive=True)
        close(root_client)


def test_phase0_zookeeper_mode_cluster_with_every_kind_of_metadata(run: Run) -> None:
    c = run.cluster
    for bid in c.ids:
        c.nodes[bid].props = c.zk_props(bid, migrating=False)
        c.nodes[bid].start()
    for bid in c.ids:
        c.nodes[bid].wait_listening("PLAINTEXT", 120)
    boot = c.bootstrap
    kafka_tool("kafka-topics", "--bootstrap-server", boot, "--create", "--topic", TOPIC, "--partitions", "3",
               "--replication-factor", "3", "--config", "min.insync.replicas=2",
               "--config", "retention.ms=604800000")  # fmt: skip
    kafka_tool("kafka-configs", "--bootstrap-server", boot, "--alter", "--entity-type", "users",
               "--entity-name", "alice", "--add-config",
               "SCRAM-SHA-256=[iterations=8192,password=alice-secret]")  # fmt: skip
    kafka_tool("kafka-configs", "--bootstrap-server", boot, "--alter", "--entity-type", "clients",
               "--entity-name", "reporting", "--add-config", "consumer_byte_rate=2097152")  # fmt: skip
    kafka_tool("kafka-configs", "--bootstrap-server", boot, "--alter", "--entity-type", "brokers",
               "--entity-default", "--add-config", "log.retention.ms=259200000")  # fmt: skip
    kafka_tool("kafka-acls", "--bootstrap-server", boot, "--add", "--allow-principal", "User:alice",
               "--operation", "Read", "--operation", "Describe", "--topic", TOPIC)  # fmt: skip
    run.traffic = Traffic(boot, TOPIC).start()
    run.traffic.wait_acked(50)
    isr_full(boot, "__consumer_offsets")
    assert run.unexplained_errors() == []
    run.passed.add("phase0")


def test_phase1_brokers_register_with_zk2kraft_and_the_copy_enters_dual_write(run: Run) -> None:
    run.need("phase0")
    c, traffic = run.cluster, run.traffic
    assert traffic is not None
    c.start_zk2kraft()
    wait_listening(c.controller_port, c.controller)  # soft start first, then the rolling restart
    for bid in c.ids:
        since = c.nodes[bid].log_size()
        c.nodes[bid].stop()
        c.start_broker(bid, c.zk_props(bid, migrating=True))
        node = c.nodes[bid]
        # Kafka's BrokerLifecycleManager registers the ZK broker as migrating, its RaftManager follows
        node.wait_for_log(rf"BrokerLifecycleManager id={bid} isZkBroker=true\] Successfully registered broker",
                          since=since)  # fmt: skip
        node.wait_for_log(rf"RaftManager id={bid}\] Completed transition to FollowerState.*leader={CONTROLLER_ID}",
                          since=since)  # fmt: skip
        isr_full(c.bootstrap, TOPIC)
        traffic.wait_acked(20)
    deadline_status = None
    for _ in range(60):
        deadline_status = run.status()
        if deadline_status.get("state") == "DualWriteMetadata":
            break
        assert c.controller is not None and c.controller.poll() is None, c.zk2kraft_output()[-2000:]
        time.sleep(1)
    assert deadline_status and deadline_status["state"] == "DualWriteMetadata", deadline_status
    for bid in c.ids:  # the copy is committed: zk2kraft is their controller now
        c.nodes[bid].wait_for_log(rf"LeaderAndIsr request correlationId \d+ from controller {CONTROLLER_ID}")
    quorum = kafka_tool("kafka-metadata-quorum", "--bootstrap-controller", f"127.0.0.1:{c.controller_port}",
                        "describe", "--replication").stdout  # fmt: skip
    rows = [ln.split() for ln in quorum.splitlines()[1:] if ln.strip()]
    observers = {int(r[0]) for r in rows if r[-1] == "Observer"}
    assert [int(r[0]) for r in rows if r[-1] == "Leader"] == [CONTROLLER_ID], quorum
    assert observers == set(c.ids), quorum
    traffic.wait_acked(40)
    assert_audit_clean(c.zk_connect, c.log_dir)
    assert run.unexplained_errors() == []
    run.passed.add("phase1")


def test_phase2_dual_write_failover_controlled_shutdown_and_admin_changes(run: Run) -> None:
    run.need("phase1")
    c, traffic = run.cluster, run.traffic
    assert traffic is not None
    # kill -9 the leader of partition 0: zk2kraft elects new leaders, the survivors act on its LeaderAndIsr
    before = leaders(c.bootstrap, TOPIC)
    victim = before[0][0]
    led = {p for p, (leader, _isr) in before.items() if leader == victim}
    c.nodes[victim].kill()
    survivors = ",".join(f"127.0.0.1:{c.ports[b]}" for b in c.ids if b != victim)
    after = wait_leaders(survivors, TOPIC, lambda ls: all(ls[p][0] not in (victim, -1) for p in led),
                         f"new leaders for {sorted(led)} after kill -9 of broker {victim}")  # fmt: skip
    for p in led:
        new = after[p][0]
        c.nodes[new].wait_for_log(rf"Broker id={new}\].*LeaderAndIsr request correlationId \d+ from controller "
                                  rf"{CONTROLLER_ID}")  # fmt: skip
    traffic.wait_acked(40)
    # the broker comes back (still migrating) and rejoins the ISR through AlterPartition
    since = {b: c.nodes[b].log_size() for b in c.ids}
    c.start_broker(victim, c.zk_props(victim, migrating=True))
    isr_full(c.bootstrap, TOPIC)
    for b in {after[p][0] for p in after}:  # each leader widened its ISR through AlterPartition to zk2kraft
        c.nodes[b].wait_for_log(rf"ISR updated to [\d,]*{victim}", since=since[b], timeout=10)
    traffic.wait_acked(40)
    # SIGTERM: Kafka's controlled shutdown through BrokerLifecycleManager moves leadership first
    now = leaders(c.bootstrap, TOPIC)
    leader = now[1][0]
    gone = {p for p, (lead, _i) in now.items() if lead == leader}
    since = c.nodes[leader].log_size()
    acked = traffic.count()
    c.nodes[leader].stop(timeout=60)
    log = c.nodes[leader].log_path.read_text(errors="replace")[since:]
    assert "Controlled shutdown will be handled through broker lifecycle manager" in log
    assert "The controller has asked us to exit controlled shutdown." in log, log[-3000:]
    others = ",".join(f"127.0.0.1:{c.ports[b]}" for b in c.ids if b != leader)
    wait_leaders(
        others, TOPIC, lambda ls: all(ls[p][0] not in (leader, -1) for p in gone), "leaders moved", 30
    )
    traffic.wait_acked(40)
    assert not traffic.failed, traffic.failed[:3]
    c.start_broker(leader, c.zk_props(leader, migrating=True))
    isr_full(c.bootstrap, TOPIC)
    assert traffic.count() > acked
    run.passed.add("phase2-failover")
