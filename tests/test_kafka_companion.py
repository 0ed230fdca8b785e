"""Companion mode against the real thing: Kafka 3.9's own KRaft controller migrates, zk2kraft looks on.

One module-scoped run, in the runbook's order: `zk2kraft check` before Kafka's controller starts;
`status` while it waits for the brokers (PRE_MIGRATION) and while it dual-writes (MIGRATION), read-only
(Kafka's `.lock` never taken, nothing written to its directory or to ZooKeeper); `audit` and `log
verify` of Kafka's own directory after each phase; `rollback --kafka-controller` refused while Kafka's
controller runs, then done after it stops, and a real ZooKeeper-mode Kafka broker elected controller of
the released ZooKeeper. Brokers: zk2kraft's simulated brokers, registering with Kafka's controller as
migrating ZooKeeper brokers over Kafka's protocol.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from migrate_helpers import own_server, run_cli, simulated_brokers

from migrator.zk import codec
from migrator.zk import paths as P
from zk_fixtures.brokers import BrokerSessions
from zk_fixtures.generator import ClusterSpec, load_cluster
from zk_fixtures.kafka import KafkaNode, free_ports, kafka_tool
from zk_fixtures.kafka_migration import (
    COMPLETED,
    DUAL_WRITE,
    WAIT_FOR_BROKERS,
    controller_address,
    finalize_properties,
    metadata_log_dir,
    migration_controller,
)

pytestmark = [pytest.mark.zk, pytest.mark.slow, pytest.mark.spark]

SPEC = ClusterSpec(
    brokers=3,
    topics=6,
    partitions=3,
    legacy_topics=0,
    reassignments=0,
    offline_partitions=0,
    pending_deletions=0,
    acls=8,
    tokens=1,
)


def _dir_fingerprint(path: Path) -> dict[str, str]:
    """Every file of Kafka's directory zk2kraft could touch by mistake: name → size and content hash
    (excluding the segment and index files Kafka itself keeps appending to)."""
    out = {}
    for f in sorted(path.rglob("*")):
        if f.is_file() and f.suffix not in (".log", ".index", ".timeindex") and "checkpoint" not in f.name:
            out[str(f.relative_to(path))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


class Kafka:
    """The run's shared pieces: ZooKeeper, the generated cluster, Kafka's controller, the brokers."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self._server = own_server(base / "zk")
        self.zk, self.connect = self._server.__enter__()
        self.generated = load_cluster(self.zk, SPEC)
        self.sessions = BrokerSessions(self.connect, self.generated.image, self.generated.control).start()
        self.cluster_id = self.generated.image.cluster_id or ""
        self.node: KafkaNode | None = None
        self.sim = None

    def cli(self, *args: str, timeout: float = 300) -> tuple[int, str, str]:
        done = run_cli([*args], timeout=timeout)
        return done.returncode, done.stdout, done.stderr

    def close(self) -> None:
        if self.sim is not None:
            self.sim.stop()
        if self.node is not None:
            self.node.stop()
        self.sessions.close()
        self._server.__exit__(None, None, None)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kafka]:
    k = Kafka(tmp_path_factory.mktemp("companion"))
    try:
        yield k
    finally:
        k.close()


def test_1_check_before_kafka_starts(kafka: Kafka) -> None:
    code, out, err = kafka.cli("check", "-z", kafka.connect, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert not [f for f in report["findings"] if f["severity"] == "blocker"]


def test_2_status_while_kafka_waits_for_the_brokers(kafka: Kafka) -> None:
    kafka.node = migration_controller(kafka.base / "kafka", kafka.connect, kafka.cluster_id)
    kafka.node.start(wait_port="CONTROLLER")
    kafka.node.wait_for_log(WAIT_FOR_BROKERS, timeout=120)
    log_dir = metadata_log_dir(kafka.node)
    before = _dir_fingerprint(log_dir)
    code, out, err = kafka.cli("status", "-z", kafka.connect, "-l", str(log_dir), "--json")
    assert code == 0, err
    s = json.loads(out)
    assert s["kafka_state"] == "PRE_MIGRATION" and s["state"] == "MigratingZkData", s
    k = s["kafka_controller"]
    assert k["node_id"] == 3000 and k["pid"] == kafka.node.proc.pid
    assert k["waiting_for"] == sorted(kafka.generated.image.brokers)
    assert "waits for every ZooKeeper broker" in s["reason"]
    assert "zk2kraft migrate" not in s["next_action"] + " ".join(s["anomalies"])
    assert _dir_fingerprint(log_dir) == before  # nothing written, no zk2kraft.lock
    assert not (log_dir / "zk2kraft.lock").exists()


@pytest.mark.timeout(1800)  # the copy and a Spark audit of Kafka's log, on a loaded CI machine
def test_3_status_audit_and_verify_during_dual_write(kafka: Kafka) -> None:
    assert kafka.node is not None
    kafka.sim = simulated_brokers(
        controller_address(kafka.node), kafka.connect, kafka.generated, inter_broker=True
    ).start()
    kafka.node.wait_for_log(COMPLETED, timeout=180)
    kafka.node.wait_for_log(DUAL_WRITE, timeout=120)
    log_dir = metadata_log_dir(kafka.node)
    zxid_before = kafka.zk.get(P.CLUSTER_ID)[1].mzxid
    before = _dir_fingerprint(log_dir)
    code, out, err = kafka.cli("status", "-z", kafka.connect, "-l", str(log_dir), "--json")
    assert code == 0, err
    s = json.loads(out)
    assert s["kafka_state"] == "MIGRATION" and s["state"] == "DualWriteMetadata", s
    assert s["controller_id"] == 3000 and s["controller_is_kraft"]
    assert s["kafka_controller"]["holds_zookeeper"]
    assert s["kafka_controller"]["migrating_zk_brokers"] == sorted(kafka.generated.image.brokers)
    assert "rollback --kafka-controller" in s["next_action"]
    code, out, err = kafka.cli("status", "-z", kafka.connect, "-l", str(log_dir))
    assert code == 0 and "Kafka's controller" in out and "holds /controller" in out, out + err

    code, out, err = kafka.cli("log", "verify", "-l", str(log_dir))
    assert code == 0 and "clean" in out, out + err

    code, out, err = kafka.cli("audit", "-z", kafka.connect, "-l", str(log_dir), "--json", timeout=600)
    assert code == 0, out[-2000:] + err
    report = json.loads(out)
    assert report["phase"] == "dual-write" and report["mismatches"] == 0, report["verdict"]

    assert _dir_fingerprint(log_dir) == before
    assert not (log_dir / "zk2kraft.lock").exists()
    assert kafka.zk.get(P.CLUSTER_ID)[1].mzxid == zxid_before
    assert kafka.node.running


@pytest.mark.timeout(1800)  # a second Spark audit
def test_4_kafka_changes_reach_zookeeper_and_the_audit_still_agrees(kafka: Kafka) -> None:
    """An ISR shrink a simulated leader sends Kafka's controller (AlterPartition v3) is dual-written to
    the partition's state znode, and the audit of Kafka's log against ZooKeeper still agrees."""
    assert kafka.node is not None and kafka.sim is not None
    topic = sorted(kafka.generated.image.topics)[0]
    state_path = P.partition_state_path(topic, 0)
    # The simulated leader's view can trail Kafka's controller (a broker unfenced, a leader moved by
    # the election that follows): the partition's own error says so, and the shrink is sent again
    # from a fresh view. No simulator round runs meanwhile (the next would expand the ISR again),
    # and Kafka's controller may write the state znode for its own reasons first, so the test
    # waits for the ISR it accepted, not for any new version.
    deadline = time.monotonic() + 60
    with kafka.sim.rounds_held():
        while True:
            view = kafka.sim.refresh()[(topic, 0)]
            leader = kafka.sim.brokers[view.leader]
            shrunk = [b for b in view.isr if b == view.leader] or view.isr[:1]
            resp = leader.send_alter_partition(leader.isr_request(view, shrunk))
            assert resp is not None and resp.error_code == 0
            part = resp.topics[0].partitions[0]
            if part.error_code == 0:
                break
            assert time.monotonic() < deadline, f"Kafka's controller refused the shrink: {part}"
            time.sleep(0.5)
        assert part.isr == shrunk, part
        while json.loads(kafka.zk.get(state_path)[0])["isr"] != shrunk:
            assert time.monotonic() < deadline + 30, "Kafka's dual-write never reached the state znode"
            time.sleep(0.2)
    log_dir = metadata_log_dir(kafka.node)
    code, out, err = kafka.cli("audit", "-z", kafka.connect, "-l", str(log_dir), "--json", timeout=600)
    assert code == 0, out[-2000:] + err
    assert json.loads(out)["mismatches"] == 0


def test_5_rollback_is_refused_while_kafkas_controller_runs(kafka: Kafka) -> None:
    assert kafka.node is not None
    log_dir = metadata_log_dir(kafka.node)
    controller_before = kafka.zk.get(P.CONTROLLER)
    code, out, err = kafka.cli(
        "rollback", "--kafka-controller", "-z", kafka.connect, "-l", str(log_dir), "--yes"
    )
    assert code == 4, out + err
    assert f"pid {kafka.node.proc.pid}" in err and len(err.strip().splitlines()) == 1
    assert kafka.zk.get(P.CONTROLLER) == controller_before


def test_6_rollback_after_the_controller_stops_hands_zookeeper_to_a_zk_mode_controller(
    kafka: Kafka, tmp_path: Path
) -> None:
    assert kafka.node is not None and kafka.sim is not None
    log_dir = metadata_log_dir(kafka.node)
    port = kafka.node.listener_port("CONTROLLER")
    kafka.node.stop()
    before = _dir_fingerprint(log_dir)
    # the stopped controller's quorum address no longer answers; a made-up live one must refuse
    code, out, err = kafka.cli(
        "rollback", "--kafka-controller", "-z", kafka.connect, "-l", str(log_dir), "--yes",
        "--quorum", f"3000@127.0.0.1:{port}",
    )  # fmt: skip
    assert code == 0, out + err
    for step in ("checked: no Kafka controller holds", "/migration was: offset", "deleted /controller", "next, on each broker"):  # fmt: skip
        assert step in out, out
    assert kafka.zk.exists(P.MIGRATION) is None
    assert (
        kafka.zk.exists(P.CONTROLLER) is None
        or not json.loads(kafka.zk.get(P.CONTROLLER)[0]).get("kraftControllerEpoch", -1) > 0
    )
    assert _dir_fingerprint(log_dir) == before  # Kafka's directory is left as it was
    epoch_after = codec.decode_controller_epoch(P.CONTROLLER_EPOCH, kafka.zk.get(P.CONTROLLER_EPOCH)[0])

    # A real ZooKeeper-mode broker (no migration settings) is elected controller of the released ZooKeeper.
    kafka.sim.stop()
    kafka.sim = None
    (bport,) = free_ports(1)
    broker = KafkaNode(
        tmp_path / "zkbroker",
        {
            "broker.id": 100,
            "zookeeper.connect": kafka.connect,
            "listeners": f"PLAINTEXT://127.0.0.1:{bport}",
            "offsets.topic.replication.factor": 1,
            "delegation.token.secret.key": "zk2kraft-fixture-token-secret",
        },
    )
    try:
        broker.start(wait_port="PLAINTEXT")
        deadline = time.monotonic() + 60
        while True:
            node = kafka.zk.exists(P.CONTROLLER)
            if node is not None:
                c = json.loads(kafka.zk.get(P.CONTROLLER)[0])
                if c.get("brokerid") == 100:
                    break
            assert time.monotonic() < deadline, f"no ZooKeeper-mode controller elected: {broker.last_lines()}"
            time.sleep(0.2)
        assert (
            codec.decode_controller_epoch(P.CONTROLLER_EPOCH, kafka.zk.get(P.CONTROLLER_EPOCH)[0])
            > epoch_after
        )
        topics = kafka_tool(
            "kafka-topics", "--bootstrap-server", f"127.0.0.1:{bport}", "--list"
        ).stdout.split()
        assert set(kafka.generated.image.topics) <= set(topics)
    finally:
        broker.stop()


def test_7_finalized_by_kafka_is_refused(kafka: Kafka, tmp_path: Path) -> None:
    """After Kafka's finalization (controllers restarted without the migration flag: POST_MIGRATION)
    the rollback refuses: a copy of the stopped controller's directory, finalized by a real restart."""
    assert kafka.node is not None
    import shutil

    fin = KafkaNode(tmp_path / "fin", dict(finalize_properties(kafka.node)))
    (fport,) = free_ports(1)
    fin.props["listeners"] = f"CONTROLLER://127.0.0.1:{fport}"
    fin.props["controller.quorum.voters"] = f"3000@127.0.0.1:{fport}"
    fin.props["log.dirs"] = str(tmp_path / "fin" / "data")
    shutil.copytree(metadata_log_dir(kafka.node), tmp_path / "fin" / "data")
    fin.start(wait_port="CONTROLLER")
    try:
        fin.wait_for_log(r"POST_MIGRATION", timeout=120)
    finally:
        fin.stop()
    code, out, err = kafka.cli(
        "rollback", "--kafka-controller", "-z", kafka.connect, "-l", str(tmp_path / "fin" / "data"), "--yes"
    )
    assert code == 1 and "finalized" in err and len(err.strip().splitlines()) == 1, out + err
