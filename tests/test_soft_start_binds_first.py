"""`migrate --listen` binds before its pre-flight read of ZooKeeper, as Kafka's controller does.

Brokers register and heartbeat while the read runs (it takes 30 s at 20,000 partitions under load,
bench/kafka_side_by_side.py); the copy still waits for every broker (WAIT_FOR_BROKERS) afterwards.
The pre-flight read is held open here until a broker registered, so the order is checked, not timed.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from migrate_helpers import SPEC, simulated_brokers
from test_zk_broker_rpcs import SESSION_MS

from migrator import commands
from migrator.controller.follower import read_follower
from migrator.metrics import MigrationMetrics
from migrator.zk.migration_client import MigrationClient
from zk_fixtures.brokers import BrokerSessions
from zk_fixtures.generator import load_cluster

pytestmark = [pytest.mark.zk]

#: how long the held read waits for the registration (on a controller that binds after the read,
#: it never comes: the read goes on after this, and the test fails on the order)
HOLD_S = 15.0


def test_a_broker_registers_while_the_preflight_read_runs(zk, zk_connect, tmp_path, monkeypatch):
    generated = load_cluster(zk, SPEC)
    sessions = BrokerSessions(zk_connect, generated.image, generated.control).start()
    reading, registered, read_done = threading.Event(), threading.Event(), threading.Event()
    original = MigrationClient.read_view

    def held_read(self: MigrationClient) -> Any:
        first = not reading.is_set()
        reading.set()
        if first:
            registered.wait(HOLD_S)
        try:
            return original(self)
        finally:
            read_done.set()

    monkeypatch.setattr(MigrationClient, "read_view", held_read)
    log_dir = str(tmp_path / "meta")
    running = None
    sim = None
    try:
        running = commands.start_controller(
            zk_connect,
            log_dir,
            listen="127.0.0.1:0",
            yes=True,
            broker_wait_timeout=60,
            session_timeout_ms=SESSION_MS,
            metrics=MigrationMetrics(),
            timeout=HOLD_S + 60,
        )
        first = min(generated.image.brokers)
        sim = simulated_brokers(running.address, zk_connect, generated, own_timeout_s=2.0)
        code = sim.brokers[first].register()
        during = reading.is_set() and not read_done.is_set()
        registered.set()
        assert code == 0, code
        assert during, "the broker could register only after the pre-flight read had ended"
        assert sim.brokers[first].heartbeat() is not None

        # The copy still waits for every broker, after the pre-flight.
        sim.start()
        assert running.wait_until(
            lambda r: (
                r.service is not None
                and not r.service.soft_start
                and bool((f := read_follower(log_dir)) and f.listeners)
            ),
            120,
        ), running.error
        result, running = running.stop(), None
        assert result is not None
        actions = result.actions
        waited = [
            i
            for i, a in enumerate(actions)
            if a.startswith(f"all {len(generated.image.brokers)} ZooKeeper brokers registered")
        ]
        soft = [i for i, a in enumerate(actions) if a.startswith("soft start: serving")]
        checked = [i for i, a in enumerate(actions) if a.startswith("pre-flight passed")]
        copied = [i for i, a in enumerate(actions) if a.startswith("copied ")]
        assert soft and checked and waited and copied, actions
        assert soft[0] < checked[0] < waited[0] < copied[0], actions
    finally:
        registered.set()
        if sim is not None:
            sim.stop()
        if running is not None:
            running.stop()
        sessions.close()
