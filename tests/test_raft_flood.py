"""A flood of Raft fetchers never stalls the controller's other work (issue 15, deliverable 5).

A real controller over TCP with simulated brokers; a separate process opens hundreds of long-polling
observer connections, hammers the listener with invalid fetches, and opens more connections from one
address than `max.connections.per.ip` allows. Heartbeats and AlterPartitions (which append to the log and
so wake every long poll) are timed before and during the flood; every invalid fetch gets Kafka's error
code and every long poller sees every append.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import threading
import time

import pytest
from migrate_helpers import ROOT
from test_broker_sim import migrated

from migrator.controller import kafka_errors as E
from migrator.controller.server import DEFAULT_MAX_CONNECTIONS_PER_IP
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


def test_a_flood_of_fetchers_does_not_stall_heartbeats_or_alter_partition(zk, zk_connect, tmp_path) -> None:
    with migrated(zk, zk_connect, tmp_path) as (running, sim, _, _):
        service = running.service
        assert service is not None
        sim.pause()  # rounds driven by hand, timed
        view = next(v for v in sim.refresh().values() if len(v.replicas) >= 2 and v.leader == v.replicas[0])
        quiet = rounds(sim, view, 20)
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
                beats.join(10)
            assert ready.startswith("ready"), flood.stderr.read() if flood.stderr else ""
            loud = rounds(sim, view, 20)
            assert service.flush(20)
            end = service.log.end_offset
            flood.stdin.write(f"until {end}\n")
            flood.stdin.flush()
            report = json.loads(flood.stdout.readline())
        finally:
            if flood.poll() is None:
                flood.stdin.close()  # type: ignore[union-attr]
                flood.wait(30)
        ms = lambda xs, q: sorted(xs)[min(len(xs) - 1, int(len(xs) * q))] * 1000  # noqa: E731
        print(
            f"heartbeat+AlterPartition ms: quiet p50 {statistics.median(quiet) * 1000:.1f} "
            f"p99 {ms(quiet, 0.99):.1f} max {max(quiet) * 1000:.1f}; flood p50 "
            f"{statistics.median(loud) * 1000:.1f} p99 {ms(loud, 0.99):.1f} max {max(loud) * 1000:.1f}; "
            f"{ready.strip()}; {json.dumps(report['codes'])}"
        )
        # every long poller saw every append (the AlterPartitions' records), none failed
        assert not report["poller_errors"], report["poller_errors"]
        assert len(report["poller_offsets"]) == POLLERS and min(report["poller_offsets"]) >= end
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
        # the controller's other work kept its pace: no stall, latencies of the same order
        assert max(loud) < 2.0, sorted(loud)[-5:]
        assert statistics.median(loud) <= 4 * statistics.median(quiet) + 0.05, (quiet, loud)
