"""The metrics during the broker wait (soft start) of a real `migrate --listen --metrics-listen` process,
and the documented alerts (docs/metrics.md, "Alerts worth having") evaluated on its endpoint
(issue 17 item 3): ZkMigrationState follows the log (PRE_MIGRATION while waiting), and
MigratingZkBrokerCount follows the brokers registering over the protocol."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import ROOT, ZK2KRAFT, cluster
from test_metrics import K, wait_for

from zk_fixtures.server import free_port
from zk_fixtures.simulated_broker import SimBroker


def broker_wait_alert(m: dict[str, float], zk_brokers: int) -> bool:
    """docs: `MigratingZkBrokerCount` lower than your ZooKeeper-mode broker count while the controller
    waits for brokers (soft start: ZkMigrationState 2)."""
    return m[K + "ZkMigrationState"] == 2 and m[K + "MigratingZkBrokerCount"] < zk_brokers


def lag_alert(m: dict[str, float]) -> bool:
    """docs: `ZkWriteBehindLag > 0` (for a minute)."""
    return m[K + "ZkWriteBehindLag"] > 0


@pytest.mark.zk
def test_broker_wait_metrics_follow_the_log_and_the_registrations(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    listen, metrics = free_port(), free_port()
    with cluster(zk, zk_connect) as generated:
        ids = sorted(generated.image.brokers)
        proc = subprocess.Popen(
            [*ZK2KRAFT, "migrate", "--yes", "--follow", "-z", zk_connect, "-l", str(log_dir)]
            + ["--listen", f"127.0.0.1:{listen}", "--metrics-listen", f"127.0.0.1:{metrics}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
        )
        brokers: list[SimBroker] = []
        try:
            m = wait_for(metrics, proc, lambda m: m[K + "ZkMigrationState"] == 2)
            assert m[K + "MigratingZkBrokerCount"] == 0 and broker_wait_alert(m, len(ids))
            assert not lag_alert(m)
            cluster_id = generated.image.cluster_id
            assert cluster_id is not None
            for n, broker_id in enumerate(ids[:-1], start=1):
                sim = SimBroker(broker_id, ("127.0.0.1", listen), cluster_id)
                brokers.append(sim)
                assert sim.register() == 0
                m = wait_for(metrics, proc, lambda m, n=n: m[K + "MigratingZkBrokerCount"] == n)
                assert m[K + "ZkMigrationState"] == 2 and broker_wait_alert(m, len(ids))
            last = SimBroker(ids[-1], ("127.0.0.1", listen), cluster_id)
            brokers.append(last)
            assert last.register() == 0
            # Every broker registered: the copy runs, the state moves to MIGRATION (the expected change),
            # the broker alert clears and the lag alert stays quiet once the first sync is done.
            m = wait_for(metrics, proc, lambda m: m[K + "ZkMigrationState"] == 1)
            assert m[K + "MigratingZkBrokerCount"] == len(ids) and not broker_wait_alert(m, len(ids))
            m = wait_for(metrics, proc, lambda m: not lag_alert(m))
        finally:
            for sim in brokers:
                sim.close()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=30)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()
