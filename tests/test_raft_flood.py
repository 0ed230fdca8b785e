"""A flood of Raft fetchers never stalls the controller's other work (issue 15, deliverable 5).

A real controller over TCP with simulated brokers; a separate process opens hundreds of long-polling
observer connections, hammers the listener with invalid fetches, and opens more connections from one
address than `max.connections.per.ip` allows. Heartbeats and AlterPartitions (which append to the log and
so wake every long poll) are all answered during the flood; every invalid fetch gets Kafka's error
code and every long poller sees every append. Their latencies are measured by bench/raft_flood.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import pytest
from migrate_helpers import ROOT
from test_broker_sim import migrated

from migrator.controller.network.server import DEFAULT_MAX_CONNECTIONS_PER_IP
from migrator.controller.protocol import kafka_errors as E
from migrator.migration.driver import DEFAULT_NODE_ID

pytestmark = [pytest.mark.zk, pytest.mark.slow]

POLLERS, INVALID, EXTRA = 200, 12, DEFAULT_MAX_CONNECTIONS_PER_IP + 40


def rounds(sim, view, n: int) -> list[float]:
    """n rounds of every broker's heartbeat and one AlterPartition (shrink, then grow back): latencies."""
    a, b = sim.brokers[view.leader], sim.brokers[view.replicas[1]]
    lat = []
    for i in range(n):
        for broker in sim.brokers.values():
            t = time.monotonic()
            resp = broker.heartbeat()
            lat.append(time.monotonic() - t)
            assert resp is not None and resp.error_code == E.NONE
        assert b.fetch_from(a, view.key)
        target = [a.broker_id] if i % 2 == 0 else [a.broker_id, b.broker_id]
        t = time.monotonic()
        resp = a.send_alter_partition(a.isr_request(view, target))
        lat.append(time.monotonic() - t)
        assert resp is not None
        part = resp.topics[0].partitions[0]
        assert part.error_code == E.NONE, part
        view.isr, view.leader_epoch, view.partition_epoch = part.isr, part.leader_epoch, part.partition_epoch
    return lat


@dataclass
class FloodRun:
    """What one run saw: heartbeat and AlterPartition latencies (s) before and during the flood, the
    flood process's readiness line and its report, and the log end every poller had to reach."""

    quiet: list[float]
    loud: list[float]
    ready: str
    report: dict
    end: int


def run_flood(zk, zk_connect, tmp_path, rounds_each: int = 20) -> FloodRun:
    """A migrated cluster; timed rounds; the flood process connects; timed rounds again (also used by
    bench/raft_flood.py, which reports the latencies)."""
    with migrated(zk, zk_connect, tmp_path) as (running, sim, _, _):
        service = running.service
        assert service is not None
        sim.pause()  # rounds driven by hand, timed
        view = next(v for v in sim.refresh().values() if len(v.replicas) >= 2 and v.leader == v.replicas[0])
        quiet = rounds(sim, view, rounds_each)
        flood = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "zk_fixtures.raft_flood",
                "--leader",
                running.connect,
                "--leader-id",
                str(DEFAULT_NODE_ID),
                "--pollers",
                str(POLLERS),
                "--invalid",
                str(INVALID),
                "--extra",
                str(EXTRA),
            ],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert flood.stdout is not None and flood.stdin is not None
            keep_alive = threading.Event()
            beats = threading.Thread(
                target=lambda: [sim.heartbeats() for _ in iter(lambda: keep_alive.wait(0.3), True)]
            )
            beats.start()  # sessions stay alive while the flood connects its hundreds of sockets
            try:
                ready = flood.stdout.readline()
            finally:
                keep_alive.set()
                beats.join(60)
            assert not beats.is_alive()
            assert ready.startswith("ready"), flood.stderr.read() if flood.stderr else ""
            loud = rounds(sim, view, rounds_each)
            assert service.flush(20)
            end = service.log.end_offset
            flood.stdin.write(f"until {end}\n")
            flood.stdin.flush()
            report = json.loads(flood.stdout.readline())
        finally:
            if flood.poll() is None:
                flood.stdin.close()  # type: ignore[union-attr]
                flood.wait(30)
    return FloodRun(quiet, loud, ready.strip(), report, end)


def test_a_flood_of_fetchers_does_not_stall_heartbeats_or_alter_partition(zk, zk_connect, tmp_path) -> None:
    """During the flood every heartbeat and AlterPartition is answered without error (`rounds`), every
    poller sees every append, and each invalid fetch gets Kafka's code. How long they take beside the
    flood is bench/raft_flood.py's measure, not a verdict here."""
    run = run_flood(zk, zk_connect, tmp_path)
    report = run.report
    assert len(run.loud) == len(run.quiet) > 0
    # every long poller saw every append (the AlterPartitions' records), none failed
    assert not report["poller_errors"], report["poller_errors"]
    assert len(report["poller_offsets"]) == POLLERS and min(report["poller_offsets"]) >= run.end
    # Kafka's answers to invalid fetches (KafkaRaftClient.handleFetchRequest / validateLeaderOnlyRequest)
    codes = report["codes"]
    assert set(codes["other_topic"]) == {f"{E.INVALID_REQUEST}/0"}
    assert set(codes["negative_offset"]) == {f"{E.INVALID_REQUEST}/{E.INVALID_REQUEST}"}
    assert set(codes["future_epoch"]) == {"0/75"}  # UNKNOWN_LEADER_EPOCH
    assert set(codes["past_epoch"]) == {f"0/{E.FENCED_LEADER_EPOCH}"}
    assert set(codes["leader_id"]) == {f"0/{E.UNKNOWN_SERVER_ERROR}"}
    assert set(codes["garbage"]) == {"closed"}
    assert all(sum(c.values()) >= 5 for c in codes.values()), codes
    # max.connections.per.ip held for the flood's address, and only for it
    assert report["extra_refused"] == EXTRA - DEFAULT_MAX_CONNECTIONS_PER_IP
