"""Dual-write fidelity: the same scripted changes sent to Kafka 3.9's migrating controller and to
zk2kraft's, each on its own fresh copy of the same ZooKeeper data, leave the same ZooKeeper and the
same log image.

Both controllers run their own migration (Kafka's: the migration flag; zk2kraft's: `migrate --follow
--listen`) with zk2kraft's simulated brokers registered as migrating ZooKeeper brokers. Once each is
in dual-write, the same sequence goes to each over Kafka's protocol (zk2kraft's admin client, the
requests an admin client sends: CreateTopics with a manual assignment, CreatePartitions, DeleteTopics,
IncrementalAlterConfigs for a topic, a broker and the default, CreateAcls/DeleteAcls literal and
prefixed, AlterClientQuotas, AlterUserScramCredentials with one precomputed credential) and the same
AlterPartition v3 ISR shrink and expansion from a simulated leader, then a reassignment started
(AlterPartitionReassignments) and completed (the leader's AlterPartition), a reorder and a preferred
election (ElectLeaders). Then every znode under Kafka's
paths of the two ZooKeepers is compared: JSON semantically, topic ids mapped by topic name (each
controller draws its own), a partition's state znode version too (its zkVersion, Kafka's partition
epoch). The two logs' images (`zk2kraft log image`) are compared the same way. Every difference left
is one `docs/dual-write.md` lists with its reason (KNOWN below); anything else fails.
"""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from migrate_helpers import ROOT, normalise, own_server, run_cli, simulated_brokers

from migrator.controller.apis.admin_api import kio_module
from migrator.controller.client.admin_client import AdminClient
from migrator.controller.client.admin_endpoint import Endpoint
from migrator.controller.client.client import ControllerClient
from migrator.controller.managers.change import AclSpec, AdminChange
from migrator.controller.managers.scram import scram_credential
from migrator.controller.protocol import messages as M
from migrator.controller.security.client_security import ClientSecurity
from migrator.kraft.log import MetadataLog
from migrator.zk.reader import read_tree
from zk_fixtures.brokers import BrokerSessions
from zk_fixtures.generator import ClusterSpec, load_cluster
from zk_fixtures.kafka import free_ports
from zk_fixtures.kafka_migration import DUAL_WRITE, controller_address, metadata_log_dir, migration_controller

pytestmark = [pytest.mark.zk, pytest.mark.slow]

SPEC = ClusterSpec(
    brokers=3, racks=0, topics=4, partitions=2, legacy_topics=0, reassignments=0, offline_partitions=0,
    pending_deletions=0, tokens=0, acls=4, shrunk_isr_fraction=0.0, recovering_fraction=0.0,
)  # fmt: skip

#: both controllers authorize (CreateAcls needs an authorizer); the simulated brokers and the test's admin
#: client connect over PLAINTEXT as User:ANONYMOUS
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}

#: The differences docs/dual-write.md lists with their reasons ("Kafka's own dual-write side by side").
#: Each is removed from both sides by `_semantic` before the comparison, so that anything else fails.
KNOWN = {
    "state controller_epoch": "a partition state znode's controller_epoch: Kafka writes its Raft epoch (1 "
    "here), below the ZooKeeper controller epoch (KAFKA-20488); zk2kraft writes one above it",
    "parent znode data": "/brokers/topics/T/partitions and .../partitions/N: Kafka creates them with null "
    "data, zk2kraft with empty data; no Kafka reader reads either",
    "emptied entity config": "an entity's last quota or config removed: Kafka keeps /config/<type>/<name> "
    "with an empty config (as ZooKeeper-mode Kafka's AdminZkClient does), zk2kraft deletes it; both read "
    "as no config",
    "quota number": "a quota value Kafka's sync rewrites as a Java double (100 -> 100.0); the same number",
    "first sync notifications": "Kafka's first sync into ZooKeeper (SYNC_KRAFT_TO_ZK) rewrites every client "
    "quota and SCRAM entity with a config change notification each; zk2kraft writes only what differs. "
    "The notifications of the scripted changes are compared, in order",
}

_PARENT = re.compile(r"/brokers/topics/[^/]+/partitions(/\d+)?")
_STATE = re.compile(r"/brokers/topics/[^/]+/partitions/\d+/state")
_QUOTA_ENTITY = re.compile(r"/config/(users|clients|ips)/.+")


#: one credential (its salt is random) sent to both controllers
SCRAM = scram_credential("fidelity-user", "SCRAM-SHA-256", "secret-pw", 4096)


def _script() -> list[AdminChange]:
    scram = SCRAM
    return [
        AdminChange(
            kind="create-topic",
            topic="fa",
            assignment={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]},
            configs={"retention.ms": "3600000"},
        ),  # fmt: skip
        AdminChange(kind="create-topic", topic="fb", assignment={0: [1, 2], 1: [2, 3]}),
        AdminChange(kind="add-partitions", topic="fa", partitions=4, assignment={3: [1, 3, 2]}),
        AdminChange(
            kind="alter-topic-config",
            topic="fa",
            configs={"cleanup.policy": "compact"},
            delete_configs=["retention.ms"],
        ),  # fmt: skip
        AdminChange(kind="alter-broker-config", broker="1", configs={"log.cleaner.threads": "3"}),
        AdminChange(kind="alter-broker-config", broker="", configs={"max.connections": "500"}),
        AdminChange(kind="alter-broker-config", broker="", delete_configs=["max.connections"]),
        AdminChange(
            kind="add-acl",
            acl=AclSpec(resource_type="TOPIC", resource_name="fa", principal="User:alice", operation="READ"),
        ),  # fmt: skip
        AdminChange(
            kind="add-acl",
            acl=AclSpec(
                resource_type="TOPIC",
                resource_name="f",
                pattern_type="PREFIXED",
                principal="User:bob",
                operation="WRITE",
            ),
        ),  # fmt: skip
        AdminChange(
            kind="remove-acl",
            acl=AclSpec(resource_type="TOPIC", resource_name="fa", principal="User:alice", operation="READ"),
        ),  # fmt: skip
        AdminChange(
            kind="set-quota", quota_entity={"user": "alice"}, quota_values={"producer_byte_rate": 1024.0}
        ),
        AdminChange(
            kind="set-quota", quota_entity={"client-id": None}, quota_values={"consumer_byte_rate": 2048.0}
        ),
        AdminChange(kind="remove-quota", quota_entity={"user": "alice"}, quota_remove=["producer_byte_rate"]),
        AdminChange(kind="upsert-scram", scram=scram),
        AdminChange(kind="create-topic", topic="fc", assignment={0: [1, 2]}),  # moved by `moves`
        AdminChange(kind="delete-topic", topic="fb"),
    ]


NEW_LEADER_ELECTED = 108  # Kafka's AlterPartition answer when the change moved leadership away (Errors.java)
PREFERRED = 0  # ElectionType


def _settled(client: Any, quiet: float = 3.0, timeout: float = 120.0) -> dict[str, Any]:
    """The Kafka paths once nothing but /migration changed for `quiet` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        tree = read_tree(client)
        view = {
            p: (n.data, n.version) for p, n in tree.nodes.items() if p not in ("/migration", "/controller")
        }
        if view == last:
            return {p: n for p, n in tree.nodes.items()}
        assert time.monotonic() < deadline, "ZooKeeper never settled"
        last = view
        time.sleep(quiet)


def _topic_ids(nodes: dict[str, Any]) -> dict[str, str]:
    out = {}
    for path, node in nodes.items():
        m = re.fullmatch(r"/brokers/topics/([^/]+)", path)
        if m and node.data:
            tid = json.loads(node.data).get("topic_id")
            if tid:
                out[tid] = m.group(1)
    return out


def _change_seq(path: str) -> int:
    return int(path.rsplit("_", 1)[1])


def _semantic(nodes: dict[str, Any], changes_from: int = 0) -> dict[str, Any]:
    """Path -> (JSON with topic ids as names, version where Kafka relies on it), the KNOWN differences
    taken out; config change notifications as one list in sequence order."""
    ids = _topic_ids(nodes)
    skip = ("/controller", "/controller_epoch", "/migration", "/brokers/ids", "/zookeeper", "/cluster/id")
    out: dict[str, Any] = {}
    changes = []
    for path in sorted(nodes):
        node = nodes[path]
        if path in skip or path.startswith(("/brokers/ids/", "/zookeeper/")):
            continue
        data: Any = node.data
        if _PARENT.fullmatch(path):  # KNOWN "parent znode data"
            data = None
        if data:
            try:
                data = json.loads(data)
            except ValueError:
                data = data.decode(errors="replace")
            text = json.dumps(data, sort_keys=True)
            for tid, name in ids.items():
                text = text.replace(tid, f"<id of {name}>")
            data = json.loads(text)
        if _STATE.fullmatch(path) and isinstance(data, dict):
            data.pop("controller_epoch", None)  # KNOWN "state controller_epoch"
        if _QUOTA_ENTITY.fullmatch(path) and isinstance(data, dict):
            config = data.get("config") or {}
            for k, v in list(config.items()):
                if not k.startswith("SCRAM-"):
                    try:
                        config[k] = float(v)  # KNOWN "quota number"
                    except ValueError:
                        pass
            if not config:
                continue  # KNOWN "emptied entity config": an empty entity reads as none
        if path.startswith("/config/changes/config_change_"):
            if _change_seq(path) >= changes_from:  # KNOWN "first sync notifications"
                changes.append(data)
            continue
        out[path] = (data, node.version if _STATE.fullmatch(path) else None)
    out["/config/changes (in order)"] = changes
    return out


class Side:
    def __init__(self, name: str, base: Path) -> None:
        self.name = name
        self._server = own_server(base / "zk")
        self.zk, self.connect = self._server.__enter__()
        self.generated = load_cluster(self.zk, SPEC)
        self.sessions = BrokerSessions(self.connect, self.generated.image, self.generated.control).start()
        self.node = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.sim = None
        self.log_dir = base / "meta"

    def start(self, base: Path) -> None:
        cid = self.generated.image.cluster_id or ""
        if self.name == "kafka":
            self.node = migration_controller(base / "kafka", self.connect, cid, **AUTHORIZER)
            self.node.start(wait_port="CONTROLLER")
            self.address = controller_address(self.node)
            self.log_dir = metadata_log_dir(self.node)
        else:
            (port,) = free_ports(1)
            self.address = ("127.0.0.1", port)
            config = base / "controller.properties"
            config.write_text(
                f"listeners=CONTROLLER://127.0.0.1:{port}\ncontroller.listener.names=CONTROLLER\n"
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT\n"
                + "".join(f"{k}={v}\n" for k, v in AUTHORIZER.items())
            )
            self.proc = subprocess.Popen(
                [sys.executable, "-c", "from cli.main import entry; entry()", "migrate", "--yes", "--follow",
                 "--config", str(config), "-z", self.connect, "-l", str(self.log_dir)],
                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(base / "zk2kraft.err", "wb"),  # noqa: SIM115
            )  # fmt: skip
        self.sim = simulated_brokers(self.address, self.connect, self.generated, inter_broker=True).start()
        # heartbeats only: the simulator's own rounds would change ISRs on each side at its own pace
        self.sim.pause()
        self._beating = threading.Event()

        def beat() -> None:
            while not self._beating.wait(0.5):
                try:
                    self.sim.heartbeats()
                except Exception:  # noqa: BLE001 - a controller not up yet: the next beat retries
                    pass

        threading.Thread(target=beat, daemon=True).start()
        if self.node is not None:
            self.node.wait_for_log(DUAL_WRITE, timeout=300)
        deadline = time.monotonic() + 300
        while not (
            self.zk.exists("/migration")
            and json.loads(self.zk.get("/migration")[0])["kraft_metadata_offset"] >= 0
        ):
            assert time.monotonic() < deadline, f"{self.name} never reached dual-write"
            assert self.proc is None or self.proc.poll() is None, (base / "zk2kraft.err").read_text()[-2000:]
            time.sleep(0.2)
        time.sleep(2)
        # the notifications the scripted changes add start here (KNOWN "first sync notifications")
        seqs = [_change_seq(c) for c in self.zk.get_children("/config/changes")]
        self.changes_from = max(seqs, default=-1) + 1

    def apply(self, changes: list[AdminChange]) -> list[str]:
        endpoint = Endpoint(self.address[0], self.address[1], ClientSecurity(), "test")
        out = []
        with AdminClient(endpoint, 60.0) as client:
            for change in changes:
                out.append(client.send(change).summary)
        return out

    def isr_round_trip(self) -> None:
        """The same AlterPartition v3 shrink then expansion, from the leader of the first topic's partition 0."""
        assert self.sim is not None
        topic = sorted(self.generated.image.topics)[0]
        for shrink in (True, False):
            view = self.sim.refresh()[(topic, 0)]
            isr = [view.leader] if shrink else list(view.replicas)
            members = [M.BrokerState(b, self.sim.brokers[b].epoch) for b in isr]
            leader = self.sim.brokers[view.leader]
            part = M.AlterPartitionPartition(0, view.leader_epoch, members, view.partition_epoch)
            req = M.AlterPartitionRequest(
                view.leader, leader.epoch, [M.AlterPartitionTopic(None, view.topic_id, [part])]
            )
            resp = leader.send_alter_partition(req)
            assert resp is not None and resp.topics[0].partitions[0].error_code == 0, resp
            deadline = time.monotonic() + 60
            path = f"/brokers/topics/{topic}/partitions/0/state"
            while json.loads(self.zk.get(path)[0])["isr"] != isr:
                assert time.monotonic() < deadline, f"{self.name}: the ISR change never reached ZooKeeper"
                time.sleep(0.1)

    def _alter_isr(self, topic: str, partition: int, isr: list[int]) -> int:
        """AlterPartition v3 from the partition's leader, as the simulated broker sends it; its error."""
        assert self.sim is not None
        view = self.sim.refresh()[(topic, partition)]
        members = [M.BrokerState(b, self.sim.brokers[b].epoch) for b in isr]
        leader = self.sim.brokers[view.leader]
        part = M.AlterPartitionPartition(partition, view.leader_epoch, members, view.partition_epoch)
        req = M.AlterPartitionRequest(
            view.leader, leader.epoch, [M.AlterPartitionTopic(None, view.topic_id, [part])]
        )
        resp = leader.send_alter_partition(req)
        assert resp is not None, f"{self.name}: no AlterPartition answer"
        return int(resp.topics[0].partitions[0].error_code)

    def _wait_zk(self, what: str, done: Any) -> None:
        deadline = time.monotonic() + 60
        while not done():
            assert time.monotonic() < deadline, f"{self.name}: {what} never reached ZooKeeper"
            time.sleep(0.1)

    def _topic(self, topic: str) -> dict[str, Any]:
        return json.loads(self.zk.get(f"/brokers/topics/{topic}")[0])

    def _reassign(self, topic: str, partition: int, replicas: list[int]) -> None:
        apr = kio_module(45, 0, "request")
        move = apr.AlterPartitionReassignmentsRequest(
            timeout=datetime.timedelta(seconds=30),
            topics=(
                apr.ReassignableTopic(
                    name=topic,
                    partitions=(
                        apr.ReassignablePartition(partition_index=partition, replicas=tuple(replicas)),
                    ),
                ),
            ),
        )
        with ControllerClient(*self.address, timeout_s=60) as c:
            got = c.call(45, 0, move)
        codes = [int(got.error_code)] + [int(p.error_code) for t in got.responses for p in t.partitions]
        assert codes == [0, 0], f"{self.name}: AlterPartitionReassignments {codes} {got}"

    def moves(self) -> None:
        """A reassignment started (fc-0 [1, 2] -> [3, 2]: 3 adding, 1 removing), then completed by the
        leader's AlterPartition bringing 3 into the ISR (1 leaves, and leads no more); a reorder that
        completes at once ([3, 2] -> [2, 3]: the leader stays 3, no longer the preferred one); and a
        preferred leader election (ElectLeaders) that makes 2 the leader."""
        self._reassign("fc", 0, [3, 2])
        self._wait_zk(
            "the started reassignment", lambda: self._topic("fc").get("adding_replicas") == {"0": [3]}
        )
        code = self._alter_isr("fc", 0, [1, 2, 3])
        assert code in (0, NEW_LEADER_ELECTED), f"{self.name}: AlterPartition error {code}"
        self._wait_zk(
            "the completed reassignment",
            lambda: (t := self._topic("fc"))["partitions"] == {"0": [3, 2]} and not t.get("adding_replicas"),
        )
        self._reassign("fc", 0, [2, 3])
        self._wait_zk("the reorder", lambda: self._topic("fc")["partitions"] == {"0": [2, 3]})
        el = kio_module(43, 2, "request")
        elect = el.ElectLeadersRequest(
            election_type=PREFERRED,
            topic_partitions=(el.TopicPartitions(topic="fc", partitions=(0,)),),
            timeout=datetime.timedelta(seconds=30),
        )
        with ControllerClient(*self.address, timeout_s=60) as c:
            got = c.call(43, 2, elect)
        codes = [int(got.error_code)] + [
            int(p.error_code) for r in got.replica_election_results for p in r.partition_result
        ]
        assert codes == [0, 0], f"{self.name}: ElectLeaders {codes} {got}"
        state = "/brokers/topics/fc/partitions/0/state"
        self._wait_zk("the preferred election", lambda: json.loads(self.zk.get(state)[0])["leader"] == 2)

    def close(self) -> None:
        if self.sim is not None:
            self._beating.set()
            self.sim.stop()
        if self.node is not None:
            self.node.stop()
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(60)
        self.sessions.close()
        self._server.__exit__(None, None, None)


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Side]]:
    base = tmp_path_factory.mktemp("fidelity")
    out: dict[str, Side] = {}
    try:
        for name in ("zk2kraft", "kafka"):
            out[name] = Side(name, base / name)
            out[name].start(base / name)
            out[name].apply(_script())
            out[name].isr_round_trip()
            out[name].moves()
        yield out
    finally:
        for side in out.values():
            side.close()


def test_every_kafka_znode_is_the_same_in_both_zookeepers(sides: dict[str, Side]) -> None:
    ours = _semantic(_settled(sides["zk2kraft"].zk), sides["zk2kraft"].changes_from)
    kafka = _semantic(_settled(sides["kafka"].zk), sides["kafka"].changes_from)
    differences = {}
    for path in sorted(set(ours) | set(kafka)):
        if ours.get(path) != kafka.get(path):
            differences[path] = (ours.get(path), kafka.get(path))
    unexplained = {p: d for p, d in differences.items() if not any(re.fullmatch(rx, p) for rx in KNOWN)}
    assert not unexplained, "\n".join(
        f"{p}: zk2kraft {d[0]!r} / Kafka {d[1]!r}" for p, d in unexplained.items()
    )


def test_both_logs_replay_to_the_same_image(sides: dict[str, Side]) -> None:
    for side in sides.values():
        done = run_cli(["log", "image", "-l", str(side.log_dir), "--json"])
        assert done.returncode == 0, done.stderr
    images = {}
    for name, side in sides.items():
        with MetadataLog.open(side.log_dir) as log:
            n = normalise(log.load_image().result.image)
        n["topics"] = {t: parts for t, (_tid, parts) in n["topics"].items()}  # ids: each controller's own
        images[name] = n
    ours, kafka = images["zk2kraft"], images["kafka"]
    differ = {}
    for key in ours:
        if ours[key] != kafka[key]:
            if isinstance(ours[key], dict):
                keys = set(ours[key]) | set(kafka[key])
                differ[key] = {
                    k: (ours[key].get(k), kafka[key].get(k))
                    for k in keys
                    if ours[key].get(k) != kafka[key].get(k)
                }
            else:
                differ[key] = (ours[key], kafka[key])
    assert not differ, differ
