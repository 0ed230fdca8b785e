"""Simulated ZooKeeper-mode brokers against the real controller over TCP, on a real ZooKeeper.

The seeds' races over the protocol: KIP-903's six steps (a stale AlterPartition naming a rebooted
broker's old epoch is refused with INELIGIBLE_REPLICA; the same change with current epochs is accepted),
a SIGKILLed broker process fenced after the session timeout and gone from every ISR, a lost log
directory moving leadership away (KIP-589), and a broker cut off from the controller fencing itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import ROOT, cluster, simulated_brokers

from migrator import commands
from migrator.controller.protocol import kafka_errors as E
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import MetadataRecord
from migrator.zk import paths as P
from zk_fixtures.broker_sim import BrokerSimulator
from zk_fixtures.simulated_broker import PartitionView

pytestmark = [pytest.mark.zk, pytest.mark.slow]

SESSION_MS = 3000


def zk_state(zk: KazooClient, view: PartitionView) -> dict:
    return json.loads(zk.get(P.partition_state_path(view.topic, view.partition))[0])


@contextmanager
def migrated(
    zk: KazooClient, zk_connect: str, tmp_path: Path, process_brokers: tuple[int, ...] = ()
) -> Iterator[tuple[commands.RunningController, BrokerSimulator, list[int], subprocess.Popen | None]]:
    """A generated cluster, a controller listening on TCP, its brokers simulated and migrated.

    Brokers in ``process_brokers`` run in a separate simulator process (so a test can SIGKILL them).
    """
    with cluster(zk, zk_connect) as generated:
        ids = sorted(generated.image.brokers)
        running = commands.start_controller(
            zk_connect,
            str(tmp_path / "meta"),
            listen="127.0.0.1:0",
            yes=True,
            broker_wait_timeout=60,
            session_timeout_ms=SESSION_MS,
        )
        proc: subprocess.Popen | None = None
        sim = simulated_brokers(
            running.address,
            zk_connect,
            generated,
            [b for b in ids if b not in process_brokers],
            own_timeout_s=2.0,
        )
        try:
            if process_brokers:
                proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "zk_fixtures.broker_sim_cli",
                        "--controller",
                        running.connect,
                        "--zookeeper",
                        zk_connect,
                        "--brokers",
                        ",".join(map(str, process_brokers)),
                        "--interval",
                        "0.3",
                    ],
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                )
                assert proc.stdout is not None
                assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
            sim.start()
            service = running.service
            assert service is not None
            assert running.wait_until(lambda r: not service.soft_start, 90), running.error
            yield running, sim, ids, proc
        finally:
            sim.stop()
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(10)
            running.stop()


def settle(running: commands.RunningController) -> None:
    assert running.service is not None and running.service.flush(20)


def test_kip_903_stale_alter_partition_after_an_empty_disk_reboot(zk, zk_connect, tmp_path):
    with migrated(zk, zk_connect, tmp_path) as (running, sim, _, _):
        with sim.rounds_held():  # rounds driven by hand (the race needs exact timing); heartbeats go on
            # The view comes from ZooKeeper, written behind the log: wait until it covers every record (a
            # change right after activation, not yet in ZooKeeper, made step 1 stale: FENCED_LEADER_EPOCH).
            settle(running)
            view = next(
                v for v in sim.refresh().values() if len(v.replicas) >= 2 and v.leader == v.replicas[0]
            )
            a, b = sim.brokers[view.leader], sim.brokers[view.replicas[1]]
            for sim_broker in sim.brokers.values():
                sim_broker.heartbeat()
            # 1. A leads with ISR {A}.
            resp = a.send_alter_partition(a.isr_request(view, [a.broker_id]))
            assert resp is not None and resp.topics[0].partitions[0].error_code == E.NONE
            part = resp.topics[0].partitions[0]
            view.isr, view.leader_epoch, view.partition_epoch = (
                part.isr,
                part.leader_epoch,
                part.partition_epoch,
            )
            assert view.isr == [a.broker_id]
            # 2. B catches up: its fetch carries its epoch.
            a.produce(view.key, 10)
            old_epoch = b.epoch
            assert b.fetch_from(a, view.key) and a.caught_up(view.key, b.broker_id)
            a.produce(view.key, 1)
            assert not a.caught_up(view.key, b.broker_id)  # behind again until its next fetch
            assert b.fetch_from(a, view.key) and a.caught_up(view.key, b.broker_id)
            # 3. A's AlterPartition adding B is delayed (built now, sent later).
            stale = a.isr_request(view, [a.broker_id, b.broker_id])
            assert [m.broker_epoch for m in stale.topics[0].partitions[0].new_isr_with_epochs] == [
                a.epoch,
                old_epoch,
            ]
            # 4. B fails hard and comes back with an empty disk: a new incarnation, a new broker epoch.
            assert b.reboot(empty_disk=True) == E.NONE
            assert b.epoch > old_epoch and b.log_end == {}
            assert b.heartbeat() is not None
            # 5. The stale request arrives: B is not in sync with anything; the controller refuses it.
            resp = a.send_alter_partition(stale)
            assert resp is not None
            assert resp.topics[0].partitions[0].error_code == E.INELIGIBLE_REPLICA
            settle(running)
            assert zk_state(zk, view)["isr"] == [a.broker_id]
            # 6. B catches up again under its new epoch: the same change is accepted.
            assert a.heartbeat() is not None and b.heartbeat() is not None  # the rounds are driven by hand
            assert b.fetch_from(a, view.key) and a.caught_up(view.key, b.broker_id)
            resp = a.send_alter_partition(a.isr_request(view, [a.broker_id, b.broker_id]))
            assert resp is not None and resp.topics[0].partitions[0].error_code == E.NONE
            settle(running)
            assert zk_state(zk, view)["isr"] == [a.broker_id, b.broker_id]


def test_isrs_grow_back_through_rounds(zk, zk_connect, tmp_path):
    with migrated(zk, zk_connect, tmp_path) as (running, sim, _, _):
        view = next(v for v in sim.refresh().values() if len(v.isr) >= 2)
        leader = sim.brokers[view.leader]
        resp = leader.send_alter_partition(leader.isr_request(view, [leader.broker_id]))
        assert resp is not None and resp.topics[0].partitions[0].error_code == E.NONE
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            settle(running)
            if sorted(zk_state(zk, view)["isr"]) == sorted(view.replicas):
                break
            time.sleep(0.3)
        assert sorted(zk_state(zk, view)["isr"]) == sorted(view.replicas)
        assert sim.isr_changes >= 1


def test_a_sigkilled_broker_is_fenced_and_leaves_every_isr(zk, zk_connect, tmp_path):
    victim = 1
    with migrated(zk, zk_connect, tmp_path, process_brokers=(victim,)) as (running, sim, _, proc):
        assert proc is not None
        service = running.service
        assert service is not None
        assert running.wait_until(lambda r: not service.image.brokers[victim].fenced, 20)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert running.wait_until(lambda r: service.image.brokers[victim].fenced, SESSION_MS / 1000 + 15)
        settle(running)
        for view in sim.refresh().values():
            state = zk_state(zk, view)
            if victim in state["isr"]:
                assert state["isr"] == [victim], (view.key, state)  # KIP-903: the last ISR member stays
            else:
                assert state["leader"] != victim


def test_a_lost_log_directory_moves_leadership_away(zk, zk_connect, tmp_path):
    with migrated(zk, zk_connect, tmp_path) as (running, sim, _, _):
        views = list(sim.refresh().values())
        broker = next(sim.brokers[v.leader] for v in views if len(v.isr) >= 2 and v.leader in sim.brokers)
        led = [v for v in views if v.leader == broker.broker_id and len(v.isr) >= 2]
        index = broker.dir_of(led[0].key)
        on_dir = [v for v in led if broker.dir_of(v.key) == index]
        resp = broker.lose_log_dir(index, views)
        assert resp is not None and resp.error_code == E.NONE
        assert all(p.error_code == E.NONE for t in resp.topics for p in t.partitions)
        settle(running)
        for view in on_dir:
            state = zk_state(zk, view)
            assert state["leader"] != broker.broker_id
            assert broker.broker_id not in state["isr"]
        again = broker.lose_log_dir(index, views)  # brokers retry: handling is idempotent
        assert again is not None and again.error_code == E.NONE


def test_a_broker_cut_off_from_the_controller_fences_itself(zk, zk_connect, tmp_path):
    with migrated(zk, zk_connect, tmp_path) as (running, sim, _, _):
        broker = next(iter(sim.brokers.values()))
        assert broker.serving
        real = broker.controller
        broker.controller = ("127.0.0.1", 1)  # nothing listens there
        broker.close()
        deadline = time.monotonic() + broker.own_timeout_s + 5
        while broker.serving and time.monotonic() < deadline:
            broker.heartbeat()
            time.sleep(0.2)
        assert not broker.serving and broker.self_fenced
        view = next(v for v in sim.refresh().values() if broker.broker_id in v.replicas)
        other = next(
            (sim.brokers[r] for r in view.replicas if r != broker.broker_id and r in sim.brokers), None
        )
        if other is not None:
            assert not broker.fetch_from(other, view.key)  # a self-fenced broker serves nothing
        broker.controller = real
        assert broker.heartbeat() is not None
        assert broker.serving


def test_simulate_brokers_cli_bad_inputs_get_one_line(zk, zk_connect):
    from migrate_helpers import run_cli

    with cluster(zk, zk_connect):
        bad = run_cli(["fixtures", "simulate-brokers", "--controller", "nowhere", "--zookeeper", zk_connect])
        assert bad.returncode == 2, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1 and "HOST:PORT" in bad.stderr
        gone = run_cli(
            [
                *("fixtures", "simulate-brokers", "--controller", "127.0.0.1:1", "--zookeeper", zk_connect),
                *("--controller-wait", "1"),
            ]
        )
        assert gone.returncode == 3, gone.stderr
        assert len(gone.stderr.strip().splitlines()) == 1 and "cannot reach the controller" in gone.stderr
        assert "Traceback" not in gone.stderr + bad.stderr


def test_kip_497_two_in_flight_alter_partitions_on_one_epoch_over_tcp(zk, zk_connect, tmp_path):
    """Two AlterPartitions built on the same partition epoch, sent at once on two connections:
    exactly one wins, the other gets INVALID_UPDATE_VERSION, and ZooKeeper shows the winner."""
    import threading

    from migrator.controller.client.client import ControllerClient

    with migrated(zk, zk_connect, tmp_path) as (running, sim, _, _):
        with sim.rounds_held():  # no round expands the ISR meanwhile; heartbeats go on (3 s sessions)
            view = next(v for v in sim.refresh().values() if len(v.isr) >= 3)
            leader = sim.brokers[view.leader]
            others = [r for r in view.isr if r != leader.broker_id]
            for b in sim.brokers.values():
                b.heartbeat()
            # the leader alone in the ISR (a shrink bumps the leader epoch during a migration, as Kafka's does)
            resp = leader.send_alter_partition(leader.isr_request(view, [leader.broker_id]))
            assert resp is not None
            part = resp.topics[0].partitions[0]
            assert part.error_code == E.NONE
            view.isr, view.leader_epoch, view.partition_epoch = (
                part.isr,
                part.leader_epoch,
                part.partition_epoch,
            )
            for r in others:  # both followers caught up: either expansion is legitimate on its own
                assert sim.brokers[r].fetch_from(leader, view.key)
            first = leader.isr_request(view, [leader.broker_id, others[0]])
            second = leader.isr_request(view, [leader.broker_id, others[1]])
            answers: list[int] = []
            barrier = threading.Barrier(2)

            def send(req):
                with ControllerClient(*running.address, client_id=f"broker-{leader.broker_id}") as c:
                    barrier.wait()
                    answers.append(c.alter_partition(req, version=3).topics[0].partitions[0].error_code)

            threads = [threading.Thread(target=send, args=(r,)) for r in (first, second)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert sorted(answers) == [E.NONE, E.INVALID_UPDATE_VERSION]
            settle(running)
            isr = zk_state(zk, view)["isr"]
            assert len(isr) == 2 and leader.broker_id in isr and isr[1] in others


def test_a_reboot_registers_its_incarnation_once_beside_the_heartbeat_round(zk, zk_connect, tmp_path):
    """The demo's failure (`broker 1: no controlled shutdown ([])`): a reboot registered the new
    incarnation while the heartbeat round, seeing no epoch yet, registered it too; the broker kept the
    first reply's epoch, the controller the second, and every heartbeat after was STALE_BROKER_EPOCH
    until the broker was fenced for good. Kafka's BrokerLifecycleManager runs registration and heartbeats
    on one queue. Here the heartbeat round runs without pause beside each reboot."""
    log_dir = tmp_path / "meta"
    incarnations: list[uuid.UUID] = []
    with migrated(zk, zk_connect, tmp_path) as (running, sim, ids, _):
        service = running.service
        assert service is not None
        victim = sim.brokers[ids[-1]]
        stop = threading.Event()

        def round_after_round() -> None:
            while not stop.is_set():
                sim.heartbeats()

        rounds = threading.Thread(target=round_after_round, daemon=True)
        rounds.start()
        try:
            for _ in range(5):
                assert victim.reboot(empty_disk=True) == E.NONE
                incarnations.append(victim.incarnation_id)
                time.sleep(0.3)  # rounds go on with the new epoch
                resp = victim.heartbeat()
                assert resp is not None and resp.error_code == E.NONE, (resp, victim.epoch)
                with service.lock:
                    assert service.image.brokers[victim.broker_id].broker_epoch == victim.epoch
        finally:
            stop.set()
            rounds.join(10)
    with MetadataLog.open(str(log_dir)) as log:
        registered = [
            r.fields["IncarnationId"]
            for _, _, r in log.read(0)
            if isinstance(r, MetadataRecord)
            and r.name == "RegisterBrokerRecord"
            and r.fields["BrokerId"] == victim.broker_id
        ]
    for inc in incarnations:
        assert registered.count(inc) == 1, (inc, registered)
