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
from migrate_helpers import assert_audit_clean, log_replay, run_cli
from real_kafka import (
    CONTROLLER_ID,
    RealCluster,
    Traffic,
    errors_with_cause,
    isr_full,
    leaders,
    wait_leaders,
    wait_listening,
)

from migrator.zk.connection import close, connect
from zk_fixtures.kafka import KafkaNode, free_ports, kafka_tool

pytestmark = [pytest.mark.zk, pytest.mark.slow, pytest.mark.timeout(900)]

TOPIC = "orders"

#: ERROR lines Kafka logs that a test step causes on purpose, each with why (matched per line).
EXPECTED_ERRORS: dict[str, str] = {
    r"Error processing append operation on partition orders-\d+ \(kafka.server.ReplicaManager\) "
    r"org.apache.kafka.common.errors.OutOfOrderSequenceException": "after a leadership move two in-flight batches "
    "of the idempotent producer can reach the new leader out of order; Kafka refuses the later one at ERROR, "
    "librdkafka retries it in order (phase 5 proves no message lost or doubled)",
    r"\[RequestSendThread controllerId=\d+\] Controller \d+ fails to send a request to broker .* "
    r"java.lang.InterruptedException": "Kafka's own ZooKeeper-mode controller (one of the brokers before the "
    "migration) interrupts its request threads when it resigns at its restart in phase 1",
    r"\[AssignmentsManager id=\d+\] handleResponse: \d+ assignments failed; global error: Response-level error: "
    r"STALE_BROKER_EPOCH\. Retrying\.": "a broker restarted as a KRaft broker in phase 3 sends its first "
    "AssignReplicasToDirs with the broker epoch of its metadata image (Kafka 3.9's AssignmentsManager reads "
    "MetadataImage.cluster().brokerEpoch), which until the broker replays its own new registration is its "
    "ZooKeeper-mode incarnation's; the controller refuses a stale epoch as Kafka's ClusterControlManager."
    "checkBrokerEpoch does and the broker retries (phase 3 checks the retry succeeds)",
}


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
            for line in errors_with_cause(node.log_path):
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
        # Kafka's leader logs "ISR updated to" when the AlterPartition answer comes; when zk2kraft's
        # LeaderAndIsr for the committed change (leader b, the victim in the ISR: only b's AlterPartition
        # puts it there) arrives first, the leader logs it as a skipped become-leader and drops the
        # answer as stale instead (seen once in CI: the ISR was full, the first line never came).
        c.nodes[b].wait_for_log(
            rf"ISR updated to [\d,]*{victim}|Skipped the become-leader state change for .*"
            rf"leader={b}, .*isr=\[[\d, ]*\b{victim}\b",
            since=since[b],
            timeout=10,
        )
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


def test_phase2_admin_changes_forwarded_by_brokers_land_in_the_log_and_zookeeper(run: Run) -> None:
    run.need("phase1")
    import kafka
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    c = run.cluster
    one = f"127.0.0.1:{c.ports[c.ids[0]]}"
    admin = kafka.KafkaAdminClient(bootstrap_servers=one, request_timeout_ms=30000)
    try:  # kafka-python against a ZK-mode broker: the broker forwards these to zk2kraft in an Envelope
        admin.create_topics(
            [NewTopic("made-in-dual-write", 2, 3, topic_configs={"cleanup.policy": "compact"})]
        )
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={"min.insync.replicas": "2",
                                                                                       "segment.ms": "3600000"})])  # fmt: skip
    finally:
        admin.close()
    kafka_tool("kafka-configs", "--bootstrap-server", one, "--alter", "--entity-type", "topics",
               "--entity-name", TOPIC, "--add-config", "max.message.bytes=2000000")  # fmt: skip
    kafka_tool("kafka-acls", "--bootstrap-server", one, "--add", "--allow-principal", "User:bob",
               "--operation", "Write", "--topic", "made-in-dual-write")  # fmt: skip
    isr_full(c.bootstrap, "made-in-dual-write")
    block_before = log_replay(c.log_dir)[0].image.producer_id_block
    import confluent_kafka

    # a new idempotent producer now: its broker asks zk2kraft for producer ids (AllocateProducerIds)
    fresh = confluent_kafka.Producer({"bootstrap.servers": one, "enable.idempotence": True, "acks": "all"})
    for i in range(5):
        fresh.produce("made-in-dual-write", key=b"k", value=f"fresh-{i}".encode())  # compacted: keyed
    assert fresh.flush(60) == 0
    replay, _end = log_replay(c.log_dir)
    image = replay.image
    block = image.producer_id_block
    assert block is not None and block.block_end > (block_before.block_end if block_before else -1), (
        block_before,
        block,
    )
    assert "made-in-dual-write" in image.topics
    assert image.configs[("TOPIC", TOPIC)].configs["max.message.bytes"] == "2000000"
    assert image.configs[("TOPIC", TOPIC)].configs["segment.ms"] == "3600000"
    assert any(a.principal == "User:bob" and a.resource_name == "made-in-dual-write" for a in image.acls)
    zk = connect(c.zk_connect)
    try:
        assert json.loads(zk.get("/config/topics/orders")[0])["config"]["max.message.bytes"] == "2000000"
        assert zk.exists("/brokers/topics/made-in-dual-write/partitions/1/state")
        acl = json.loads(zk.get("/kafka-acl/Topic/made-in-dual-write")[0])
        assert any(a["principal"] == "User:bob" and a["operation"] == "Write" for a in acl["acls"]), acl
    finally:
        close(zk)
    for bid in c.ids:  # the broker that forwarded them answered its clients from zk2kraft's answers
        assert "Envelope" not in "".join(c.nodes[bid].error_lines())
    assert_audit_clean(c.zk_connect, c.log_dir)
    assert run.unexplained_errors() == []
    run.passed.add("phase2-admin")


def test_phase2_bad_brokers_are_refused_with_kafkas_error_and_named_in_status(run: Run) -> None:
    """A real broker of another cluster (its own chroot, so another /cluster/id) and one with
    inter.broker.protocol.version=3.5 (metadata.version 3.5-IV2 = 11: no metadata transactions) point at
    zk2kraft: each is refused with Kafka's error, keeps retrying, and `status` names it."""
    run.need("phase1")
    c = run.cluster
    zk = connect(c.zk_connect.split("/", 1)[0])
    other_chroot = "/" + c.zk_connect.split("/", 1)[1] + "-other"
    zk.create(other_chroot)
    close(zk)
    p4, p5 = free_ports(2)
    strangers = {}
    for bid, port, overrides in (
        (4, p4, {"zookeeper.connect": c.zk_connect.split("/", 1)[0] + other_chroot}),
        (5, p5, {"inter.broker.protocol.version": "3.5"}),
    ):
        props = c.zk_props(1, migrating=True) | overrides
        props |= {"broker.id": bid, "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                  "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                  "log.dirs": str(c.root / f"stranger-{bid}" / "data"),
                  "offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
                  "transaction.state.log.min.isr": 1}  # fmt: skip
        strangers[bid] = KafkaNode(c.root / f"stranger-{bid}", props, heap=c.heap).start()
    try:
        # Another cluster's broker never reaches BrokerRegistration: its raft client learns the controller
        # from Fetch, which Kafka's raft (and zk2kraft) answers INCONSISTENT_CLUSTER_ID; Kafka logs that at ERROR
        strangers[4].wait_for_log(r"RaftManager id=4\] Unexpected error INCONSISTENT_CLUSTER_ID in FETCH response",
                                  timeout=180)  # fmt: skip
        strangers[5].wait_for_log(r"Unable to register broker 5 because the controller returned error "
                                  r"UNSUPPORTED_VERSION", timeout=180)  # fmt: skip
        anomalies = run.status()["anomalies"]
        assert any(
            "broker 4's registration refused" in a and "INCONSISTENT_CLUSTER_ID" in a for a in anomalies
        ), anomalies
        assert any("broker 5's registration refused" in a and "UNSUPPORTED_VERSION" in a
                   and "between 11 and 11" in a for a in anomalies), anomalies  # fmt: skip
        assert c.controller is not None and c.controller.poll() is None  # refused, never a crash
        run.traffic.wait_acked(20)  # nor a stall
    finally:
        for node in strangers.values():
            node.kill()
        zk = connect(c.zk_connect.split("/", 1)[0])
        zk.delete(other_chroot, recursive=True)
        close(zk)
    run.passed.add("phase2-refusals")


def assert_assignments_settled(node: object, timeout: float = 60.0) -> None:
    """The broker's AssignmentsManager did not end on a refusal: every STALE_BROKER_EPOCH it logged was
    followed by another send, and the last send was not refused (Kafka logs refusals, not successes)."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        text = node.log_path.read_text(errors="replace")  # type: ignore[attr-defined]
        lines = [
            ln
            for ln in text.splitlines()
            if "[AssignmentsManager id=" in ln and ("sending" in ln or "failed" in ln)
        ]
        last = lines[-1] if lines else ""
        if "failed" not in last:
            return
        time.sleep(0.5)
    raise AssertionError(f"AssignReplicasToDirs still refused after {timeout:.0f}s: {last}")


def test_phase3_brokers_restarted_as_kraft_brokers_fetch_from_zk2kraft(run: Run) -> None:
    run.need("phase2-failover")
    c, traffic = run.cluster, run.traffic
    assert traffic is not None
    for bid in c.ids:
        since = c.nodes[bid].log_size()
        c.nodes[bid].stop(timeout=60)
        c.start_broker(bid, c.kraft_props(bid))
        c.nodes[bid].wait_for_log(rf"BrokerLifecycleManager id={bid}\] The broker has been unfenced", since=since,
                                  timeout=120)  # fmt: skip
        isr_full(c.bootstrap, TOPIC)
        traffic.wait_acked(20)
    for (
        bid
    ) in c.ids:  # a refused first AssignReplicasToDirs (see EXPECTED_ERRORS) was retried until it passed
        assert_assignments_settled(c.nodes[bid])
    zk = connect(c.zk_connect)
    try:
        assert zk.get_children("/brokers/ids") == []
    finally:
        close(zk)
    assert run.status()["state"] == "DualWriteMetadata"
    assert_audit_clean(c.zk_connect, c.log_dir)
    assert run.unexplained_errors() == []
    run.passed.add("phase3")


def test_phase4_finalize_and_handover_to_kafkas_own_controller(run: Run) -> None:
    run.need("phase3")
    c, traffic = run.cluster, run.traffic
    assert traffic is not None
    zk = connect(c.zk_connect)
    try:  # what ZooKeeper holds at the end of dual-write: Kafka's tools must show the same afterwards
        held = {}
        for topic in (TOPIC, "made-in-dual-write"):
            assignment = json.loads(zk.get(f"/brokers/topics/{topic}")[0])["partitions"]
            for p in zk.get_children(f"/brokers/topics/{topic}/partitions"):
                state = json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])
                held[(topic, int(p))] = state | {"replicas": assignment[p]}
    finally:
        close(zk)
    assert c.stop_zk2kraft() == 0, c.zk2kraft_output()[-2000:]
    done = run_cli(["finalize", "--yes", *run.where])
    assert done.returncode == 0 and "MigrationFinalized" in done.stdout, done.stdout + done.stderr
    node = c.start_kafka_controller()
    node.wait_for_log(r"Completed transition to Leader", timeout=120)
    status = kafka_tool(
        "kafka-metadata-quorum", "--bootstrap-server", c.bootstrap, "describe", "--status"
    ).stdout
    assert re.search(rf"LeaderId:\s+{CONTROLLER_ID}\b", status), status
    replication = kafka_tool("kafka-metadata-quorum", "--bootstrap-server", c.bootstrap, "describe",
                             "--replication").stdout  # fmt: skip
    rows = [ln.split() for ln in replication.splitlines()[1:] if ln.strip()]
    assert {int(r[0]) for r in rows if r[-1] == "Observer"} == set(c.ids), replication
    traffic.wait_acked(40)  # the data path went on through the gap and under Kafka's controller
    described = kafka_tool("kafka-topics", "--bootstrap-server", c.bootstrap, "--describe").stdout
    for (topic, p), state in held.items():
        m = re.search(rf"Topic: {re.escape(topic)}\s+Partition: {p}\s+Leader: (\d+)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]+)",
                      described)  # fmt: skip
        assert m, (topic, p, described)
        assert [int(x) for x in m.group(2).split(",")] == state["replicas"], (topic, p, m.group(0), state)
        assert int(m.group(1)) == state["leader"], (topic, p, m.group(0), state)
        assert set(map(int, m.group(3).split(","))) == set(state["isr"]), (topic, p, m.group(0), state)
    run.passed.add("phase4")


def test_phase5_every_acknowledged_message_read_once_in_order(run: Run) -> None:
    run.need("phase4")
    traffic = run.traffic
    assert traffic is not None
    traffic.stop()
    assert traffic.count() > 500
    assert traffic.verdict() is None, traffic.verdict()
    assert run.unexplained_errors() == []
