"""Issue 27's probe of the dual-write path, as an operator's cluster exercises it: the real controller
(`migrate --follow --listen`) over TCP, a real ZooKeeper server of the test's own (paused with SIGSTOP:
its connections look alive and requests just wait), Kafka's admin protocol from kafka-python and kio.

1. A topic deleted and re-created while ZooKeeper is paused reaches ZooKeeper in one sync with fresh
   znodes: every state znode's version equals the PartitionEpoch, after the sync, after a controller
   restart and after a rollback, where ZooKeeper's controller's conditional write at the epoch a
   ZK-mode broker holds succeeds (DESIGN.md invariant 9).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient
from migrate_helpers import (
    ROOT,
    ZK2KRAFT,
    cluster,
    log_replay,
    register_migrating_broker,
    run_cli,
    wait_for_follower,
)
from test_admin_protocol_versions import _describe_quorum

from migrator import commands
from migrator.commands.controller import RunningController
from migrator.controller import core
from migrator.controller.client.client import ControllerClient
from migrator.controller.follower import read_follower
from migrator.controller.network.listener_config import set_default_properties
from migrator.controller.protocol import kafka_errors as E
from migrator.controller.service import ControllerService
from migrator.errors import BadInputError
from migrator.kraft.records import kafka_to_uuid, record
from migrator.zk import paths as P
from migrator.zk.connection import close, connect
from zk_fixtures.server import ZkServer

pytestmark = pytest.mark.zk

PAUSE_S = 9.0


@contextmanager
def _server(tmp_path: Path) -> Iterator[tuple[ZkServer, KazooClient]]:
    """A ZooKeeper of the test's own: pausing the session's shared one would stall other tests."""
    server = ZkServer(tmp_path / "zk").start()
    # the test's own session outlives the pauses (PAUSE_S plus the work inside them), which the
    # controller's must not: on a loaded machine a 10 s session expired with it
    client = connect(server.connect_string, timeout=30.0)
    try:
        yield server, client
    finally:
        if server.proc is not None:
            try:
                os.kill(server.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        close(client)
        server.stop()


@contextmanager
def _paused(server: ZkServer) -> Iterator[None]:
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


def _start(connect_string: str, log_dir: Path, **kwargs: Any) -> RunningController:
    running = commands.start_controller(
        connect_string, str(log_dir), yes=True, broker_wait_timeout=60, session_timeout_ms=600_000, **kwargs
    )
    return running


def _active(running: RunningController, brokers: list[int]) -> tuple[ControllerService, dict[int, int]]:
    service = running.service
    assert service is not None
    epochs = {b: register_migrating_broker(service, b)[0] for b in brokers}
    assert running.wait_until(lambda r: service.admin is not None, 60), running.error
    assert service.flush(60)
    return service, epochs


def _admin(address: tuple[str, int]) -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=f"{address[0]}:{address[1]}", client_id="probe", request_timeout_ms=60_000
    )


def _in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as e:  # handed to the test
            out.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def _until(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _versions_and_epochs(zk: KazooClient, service_image: Any, name: str) -> dict[int, tuple[int, int]]:
    return {
        pid: (zk.exists(P.partition_state_path(name, pid)).version, p.partition_epoch)
        for pid, p in service_image.topics[name].partitions.items()
    }


def _follower(connect_string: str, log_dir: Path) -> subprocess.Popen[str]:
    """`zk2kraft migrate --follow --listen`: the real controller as its own process."""
    proc = subprocess.Popen(
        [*ZK2KRAFT, "migrate", "--yes", "--brokers-from-zk", "--follow", "--listen", "127.0.0.1:0",
         "-z", connect_string, "-l", str(log_dir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, cwd=ROOT,
    )  # fmt: skip
    wait_for_follower(proc, log_dir, 120)
    return proc


def _listener(log_dir: Path) -> tuple[str, int]:
    announced = read_follower(log_dir)
    assert announced is not None and announced.listeners
    _name, _protocol, host, port = announced.listeners[0]
    return host, port


def _state_version(zk: KazooClient, name: str, pid: int) -> int:
    return zk.exists(P.partition_state_path(name, pid)).version


def test_a_topic_recreated_while_zookeeper_pauses_gets_fresh_znodes_through_restart_and_rollback(
    tmp_path: Path,
) -> None:
    """Delete and re-create reach the log while ZooKeeper is paused (the controller's connection to it
    lost); the controller is killed (-9) before it writes them, so the next controller's reconcile carries both at once. On today's main it
    updated the old znodes by path: PartitionEpoch 0 in the log, the state znode at the old version."""
    log_dir = tmp_path / "meta"
    with _server(tmp_path) as (server, zk), cluster(zk, server.connect_string) as generated:
        name = sorted(t for t in generated.image.topics if t not in generated.image.pending_deletions)[0]
        old = generated.image.topics[name]
        count, rf = len(old.partitions), len(old.partitions[0].replicas)
        for pid in old.partitions:  # ZooKeeper's controller changed the ISR a few times before
            path = P.partition_state_path(name, pid)
            for _ in range(4):
                zk.set(path, zk.get(path)[0])
        assert _state_version(zk, name, 0) >= 4
        proc = _follower(server.connect_string, log_dir)
        try:
            address = _listener(log_dir)
            admin, other, watch = (_admin(address) for _ in range(3))  # one request each at a time
            try:
                with _paused(server):  # both land in the log; neither reaches ZooKeeper
                    # first the controller's session drops (a read times out after 2/3 of the session
                    # timeout): a write begun on a live connection would still land after the pause
                    time.sleep(PAUSE_S)
                    deleting, _ = _in_thread(lambda: admin.delete_topics([name]))
                    _until(lambda: name not in watch.list_topics())
                    creating, _ = _in_thread(lambda: other.create_topics([NewTopic(name, count, rf)]))
                    _until(lambda: name in watch.list_topics())
                    proc.send_signal(signal.SIGKILL)
                    proc.wait(30)
            finally:
                for a in (admin, other, watch):
                    a.close()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        assert json.loads(zk.get(P.topic_path(name))[0])["topic_id"] == old.topic_id  # not synced yet

        # the restarted controller's reconcile carries the delete and the create together
        proc = _follower(server.connect_string, log_dir)
        try:
            address = _listener(log_dir)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
        replay, _end = log_replay(log_dir)
        topic = replay.image.topics[name]
        assert topic.topic_id != old.topic_id
        assert json.loads(zk.get(P.topic_path(name))[0])["topic_id"] == topic.topic_id
        found = {
            pid: (_state_version(zk, name, pid), p.partition_epoch) for pid, p in topic.partitions.items()
        }
        assert all(v == e == 0 for v, e in found.values()), found

        r = run_cli(["rollback", "--yes", "-z", server.connect_string, "-l", str(log_dir)])
        assert r.returncode == 0, r.stdout + r.stderr
        # ZooKeeper's controller again: a ZK-mode broker's AlterPartition carries the PartitionEpoch it
        # holds from the KRaft controller's LeaderAndIsr, and the controller writes the state znode on
        # condition of that version (KafkaZkClient.updateLeaderAndIsr): the ISR can shrink and grow.
        for pid, p in topic.partitions.items():
            path = P.partition_state_path(name, pid)
            data, stat = zk.get(path)
            assert stat.version == p.partition_epoch, (pid, stat.version, p.partition_epoch)
            state = json.loads(data)
            state["isr"] = [state["leader"]]
            zk.set(path, json.dumps(state).encode(), version=p.partition_epoch)
            state["isr"] = p.replicas
            zk.set(path, json.dumps(state).encode(), version=p.partition_epoch + 1)


HOLD_S = 3.0  # how long ZooKeeper stays paused under each admin request
HEARTBEAT_WITHIN_S = 1.0


def _broker_config(address: tuple[str, int], broker: str, value: str, incremental: bool) -> Any:
    """(Incremental)AlterConfigs on a BROKER resource sent to the controller itself, as a broker
    forwards it and `kafka-configs --bootstrap-controller` sends it (kafka-python would route a broker
    resource to that broker)."""
    from kio.schema.alter_configs.v2 import request as ac
    from kio.schema.incremental_alter_configs.v1 import request as iac

    with ControllerClient(*address, timeout_s=120) as c:
        if incremental:
            config = iac.AlterableConfig(name="log.retention.ms", config_operation=0, value=value)
            resource = iac.AlterConfigsResource(resource_type=4, resource_name=broker, configs=(config,))
            resp = c.call(
                44, 1, iac.IncrementalAlterConfigsRequest(resources=(resource,), validate_only=False)
            )
        else:
            plain = ac.AlterableConfig(name="log.retention.ms", value=value)
            res = ac.AlterConfigsResource(resource_type=4, resource_name=broker, configs=(plain,))
            resp = c.call(33, 2, ac.AlterConfigsRequest(resources=(res,), validate_only=False))
    codes = [int(r.error_code) for r in resp.responses]
    assert codes == [0], (broker, resp)
    return codes


Call = Callable[[KafkaAdminClient, tuple[str, int]], Any]


def _admin_calls(name: str, broker: int, replicas: list[int]) -> list[tuple[str, Call]]:
    """Every admin API that changes metadata, as an operator would send it."""
    moved = [*replicas[1:], replicas[0]]
    return [
        ("IncrementalAlterConfigs BROKER", lambda a, at: _broker_config(at, str(broker), "7200000", True)),
        ("IncrementalAlterConfigs default BROKER", lambda a, at: _broker_config(at, "", "3600000", True)),
        ("AlterConfigs BROKER", lambda a, at: _broker_config(at, str(broker), "5400000", False)),
        ("IncrementalAlterConfigs TOPIC", lambda a, at: a.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": "60000"})],
            incremental=True)),
        ("CreateTopics", lambda a, at: a.create_topics([NewTopic("probe-new", 2, 2)])),
        ("CreatePartitions", lambda a, at: a.create_partitions({"probe-new": NewPartitions(4)})),
        ("CreateAcls", lambda a, at: a.create_acls([ACL("User:probe", "*", ACLOperation.READ,
            ACLPermissionType.ALLOW, ResourcePattern(ResourceType.TOPIC, name))])),
        ("DeleteAcls", lambda a, at: a.delete_acls([ACLFilter("User:probe", "*", ACLOperation.ANY,
            ACLPermissionType.ANY, ResourcePatternFilter(ResourceType.TOPIC, name, ACLResourcePatternType.ANY))])),
        ("AlterUserScramCredentials", lambda a, at: a.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("probe", ScramMechanism.SCRAM_SHA_256, b"secret", iterations=4096)])),
        ("AlterPartitionReassignments", lambda a, at: a.alter_partition_reassignments(
            {TopicPartition(name, 0): moved})),
        ("ElectLeaders", lambda a, at: a.elect_leaders(0, {name: [0]}, raise_errors=False)),
        ("DeleteTopics", lambda a, at: a.delete_topics(["probe-new"])),
    ]  # fmt: skip


def _heartbeats(
    service: ControllerService, epochs: dict[int, int], done: threading.Event, worst: list[float]
) -> None:
    """The brokers' side: a heartbeat round every 50 ms until `done`; the slowest answer into `worst`."""
    while not done.is_set():
        for b, e in epochs.items():
            t0 = time.monotonic()
            hb = service.heartbeat(core.Heartbeat(b, e, service.log.end_offset))
            worst[0] = max(worst[0], time.monotonic() - t0)
            assert hb.error == E.NONE and not hb.is_fenced, hb
        done.wait(0.05)


def test_heartbeats_are_answered_while_zookeeper_pauses_under_every_admin_api(tmp_path: Path) -> None:
    """Issue 27 item 2, DESIGN.md invariant 8: no ZooKeeper I/O under the commit or service lock. Each
    admin API in turn is sent while ZooKeeper is paused; the brokers' heartbeats meanwhile are answered
    within a second. On today's main a broker-config change read ZooKeeper under the service's lock
    (every heartbeat waited the whole pause)."""
    log_dir = tmp_path / "meta"
    with _server(tmp_path) as (server, zk), cluster(zk, server.connect_string) as generated:
        running = _start(server.connect_string, log_dir)
        try:
            service, epochs = _active(running, sorted(generated.image.brokers))
            name = sorted(t for t in service.image.topics if t not in generated.image.pending_deletions)[0]
            replicas = list(service.image.topics[name].partitions[0].replicas)
            slowest: dict[str, float] = {}
            for what, call in _admin_calls(name, sorted(epochs)[0], replicas):
                admin = _admin(running.address)
                try:
                    assert service.flush(60), what
                    done = threading.Event()
                    worst = [0.0]
                    with _paused(server):
                        sending, out = _in_thread(lambda call=call, admin=admin: call(admin, running.address))
                        beating, beat_out = _in_thread(
                            lambda done=done, worst=worst: _heartbeats(service, epochs, done, worst)
                        )
                        time.sleep(HOLD_S)
                    # ZooKeeper is back whatever the heartbeats did; they stop once answered
                    done.set()
                    beating.join(180)
                    sending.join(180)
                    assert not beating.is_alive() and beat_out == [None], (what, beat_out)
                    assert not sending.is_alive(), f"{what} never answered after ZooKeeper came back"
                    assert out and not isinstance(out[0], BaseException), (what, out)
                finally:
                    admin.close()
                slowest[what] = round(worst[0], 3)
            late = {w: s for w, s in slowest.items() if s >= HEARTBEAT_WITHIN_S}
            assert not late, f"heartbeats waited behind ZooKeeper: {late} (all: {slowest})"
            assert service.flush(60)
        finally:
            running.stop()


def _set_json(zk: KazooClient, path: str, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(zk.get(path)[0])
    change(data)
    zk.set(path, json.dumps(data).encode())


def test_a_preferred_election_completes_a_move_carried_over_from_zookeeper(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """Issue 27 item 3: ElectLeaders goes through the PartitionChangeBuilder port as Kafka 3.9's
    `ReplicationControlManager.electLeader` does. A move begun in ZooKeeper mode (adding/removing
    replicas on the topic znode) whose targets are all in the ISR completes with the election: the
    replicas shrink to the target, adding/removing are cleared, ZooKeeper gets the topic znode without
    them. On today's main the election wrote a bare leader change and left the move open."""
    with cluster(zk, zk_connect) as generated:
        name = sorted(t for t in generated.image.topics if t not in generated.image.pending_deletions)[0]
        current = list(generated.image.topics[name].partitions[0].replicas)
        spare = next(b for b in sorted(generated.image.brokers) if b not in current)
        target = [*current[1:], spare]  # current[0] leaves, `spare` joins
        replicas = [*target, current[0]]

        def moving(topic: dict[str, Any]) -> None:
            topic["partitions"]["0"] = replicas
            topic["adding_replicas"] = {"0": [spare]}
            topic["removing_replicas"] = {"0": [current[0]]}

        def caught_up(state: dict[str, Any]) -> None:
            state["leader"], state["isr"] = current[0], sorted(replicas)

        _set_json(zk, P.topic_path(name), moving)
        _set_json(zk, P.partition_state_path(name, 0), caught_up)
        running = _start(zk_connect, tmp_path / "meta")
        try:
            service, epochs = _active(running, sorted(generated.image.brokers))
            p = service.image.topics[name].partitions[0]
            assert (p.replicas, p.adding_replicas, p.removing_replicas) == (replicas, [spare], [current[0]])
            admin = _admin(running.address)
            try:
                answer = admin.elect_leaders(0, {name: [0]}, raise_errors=False)
                codes = [
                    (r.partition_id, r.error_code)
                    for t in answer.replica_election_results
                    for r in t.partition_result
                ]
                assert codes == [(0, E.NONE)], answer
                assert service.flush(60)
                p = service.image.topics[name].partitions[0]
                assert (p.leader, p.replicas, sorted(p.isr)) == (target[0], target, sorted(target))
                assert (p.adding_replicas, p.removing_replicas) == ([], [])
                znode = json.loads(zk.get(P.topic_path(name))[0])
                assert znode["partitions"]["0"] == target
                assert "0" not in (znode.get("adding_replicas") or {}) and "0" not in (
                    znode.get("removing_replicas") or {}
                )
                state = json.loads(zk.get(P.partition_state_path(name, 0))[0])
                assert (state["leader"], sorted(state["isr"])) == (target[0], sorted(target))

                # a fenced preferred replica under a leader that may still lead: no change, and Kafka's
                # answer PREFERRED_LEADER_NOT_AVAILABLE
                other = sorted(
                    t
                    for t in service.image.topics
                    if t != name and t not in generated.image.pending_deletions
                )[0]
                q = service.image.topics[other].partitions[0]
                preferred = q.replicas[0]
                if q.leader == preferred:  # make another replica lead first
                    leader = next(r for r in q.replicas[1:] if r in q.isr)
                    tid = service.image.topics[other].topic_id

                    assert tid is not None
                    service._decide(  # noqa: SLF001 - an ordinary leader change, as a reassignment makes
                        "test", lambda: core.Decision([record("PartitionChangeRecord", 0, PartitionId=0,
                            TopicId=kafka_to_uuid(tid), Leader=leader)], None), None)  # fmt: skip
                hb = service.heartbeat(
                    core.Heartbeat(preferred, epochs[preferred], service.log.end_offset, want_fence=True)
                )
                assert hb.error == E.NONE and hb.is_fenced, hb
                end = service.log.end_offset
                answer = admin.elect_leaders(0, {other: [0]}, raise_errors=False)
                codes = [
                    (r.partition_id, r.error_code)
                    for t in answer.replica_election_results
                    for r in t.partition_result
                ]
                assert codes == [(0, 80)], answer  # PREFERRED_LEADER_NOT_AVAILABLE
                assert service.log.end_offset == end  # nothing appended
            finally:
                admin.close()
        finally:
            running.stop()


def test_advertised_listeners_name_the_controller_behind_a_wildcard_bind(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """Issue 27 item 4: the controller binds 0.0.0.0 and advertises another name, per listener name
    (`advertised.listeners`, KIP-853). Metadata, DescribeCluster, DescribeQuorum and the announcement
    `zk2kraft admin` reads name the advertised endpoint; on today's main they named the socket's
    local address (127.0.0.1 here; behind NAT or in a container an address clients cannot reach)."""
    from kio.schema.describe_cluster.v1 import request as dc
    from kio.schema.describe_quorum.v2 import request as dq
    from kio.schema.metadata.v12 import request as md
    from kio.schema.types import TopicName

    set_default_properties(
        {
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT",
            "advertised.listeners": "CONTROLLER://ctl-1.kafka.example:19093",  # INTERNAL: not advertised
        }
    )
    log_dir = tmp_path / "meta"
    try:
        with cluster(zk, zk_connect) as generated:
            running = _start(zk_connect, log_dir, listen="CONTROLLER://0.0.0.0:0,INTERNAL://127.0.0.1:0")
            try:
                service, _epochs = _active(running, sorted(generated.image.brokers))
                port = running.address[1]  # where CONTROLLER is bound (0.0.0.0)
                _until(lambda: read_follower(log_dir) is not None)  # announced once admin is served
                announced = read_follower(log_dir)
                assert announced is not None
                internal = next((h, p) for n, _proto, h, p in announced.listeners if n == "INTERNAL")
                node = service.core.config.node_id
                with ControllerClient("127.0.0.1", port, timeout_s=30) as c:
                    meta = c.call(3, 12, md.MetadataRequest(
                        topics=(md.MetadataRequestTopic(topic_id=None, name=TopicName("none")),),
                        allow_auto_topic_creation=False, include_topic_authorized_operations=False))  # fmt: skip
                    assert [(b.node_id, b.host, b.port) for b in meta.brokers] == [
                        (node, "ctl-1.kafka.example", 19093)
                    ]
                    cl = c.call(
                        60,
                        1,
                        dc.DescribeClusterRequest(
                            include_cluster_authorized_operations=False, endpoint_type=2
                        ),
                    )
                    assert [(b.host, b.port) for b in cl.brokers] == [("ctl-1.kafka.example", 19093)], cl
                ask = dq.DescribeQuorumRequest(topics=(dq.TopicData(topic_name=TopicName("__cluster_metadata"),
                    partitions=(dq.PartitionData(partition_index=0),)),))  # fmt: skip
                quorum = _describe_quorum(("127.0.0.1", port), 2, ask)
                listeners = [(x.name, x.host, x.port) for n in quorum.nodes for x in n.listeners]
                assert listeners == [("CONTROLLER", "ctl-1.kafka.example", 19093)], quorum
                # a listener without an advertised entry is named by the address the client reached
                with ControllerClient(*internal, timeout_s=30) as c:
                    cl = c.call(
                        60,
                        1,
                        dc.DescribeClusterRequest(
                            include_cluster_authorized_operations=False, endpoint_type=2
                        ),
                    )
                    assert [(b.host, b.port) for b in cl.brokers] == [internal], cl
                assert ("CONTROLLER", "PLAINTEXT", "ctl-1.kafka.example", 19093) in announced.listeners
                assert ("INTERNAL", "PLAINTEXT", *internal) in announced.listeners
            finally:
                running.stop()
    finally:
        set_default_properties({})


def test_advertising_the_wildcard_address_is_one_clear_line() -> None:
    from migrator.controller.network.listener_config import advertised_listeners

    with pytest.raises(BadInputError, match="non-routable meta-address 0.0.0.0"):
        advertised_listeners({"advertised.listeners": "CONTROLLER://0.0.0.0:9093"})
    assert advertised_listeners({"advertised.listeners": "A://a.example:1,B://:2"}) == {"A": ("a.example", 1)}
