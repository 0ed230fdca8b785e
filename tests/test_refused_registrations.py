"""Bad input from a broker's registration is refused with Kafka's error and named in `zk2kraft status`.

The real-broker migration test (tests/test_real_kafka_migration.py) starts real Kafka 3.9 brokers with
another cluster's id and with inter.broker.protocol.version=3.5 (no metadata transactions); here the
same registrations are sent as Kafka's BrokerLifecycleManager sends them, and `status` must name each
refused broker with its error until that id registers properly.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import SPEC, cluster, run_cli

from migrator import commands
from migrator.controller.client.client import ControllerClient
from migrator.controller.protocol import kafka_errors as E
from migrator.controller.protocol import messages as M
from migrator.controller.refused_brokers import read_refused
from migrator.migration.steps.soft_start import BrokersNotReadyError

pytestmark = pytest.mark.zk

#: Kafka 3.9's MetadataVersion.IBP_3_5_IV2: what a ZK broker with inter.broker.protocol.version=3.5
#: registers as its metadata.version range (KafkaServer remaps it to [IBP level, IBP level]).
IBP_3_5 = 11


def test_refused_registrations_are_named_in_status(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    with cluster(zk, zk_connect, SPEC.model_copy(update={"pending_deletions": 0, "topics": 4})) as generated:
        cluster_id = generated.image.cluster_id or ""
        running = commands.start_controller(
            zk_connect, str(log_dir), yes=True, broker_wait_timeout=600, session_timeout_ms=60_000
        )
        try:
            listener = [M.Listener("PLAINTEXT", "127.0.0.1", 9092)]
            with ControllerClient(*running.address, timeout_s=30) as c:
                wrong = c.call(M.BROKER_REGISTRATION, 1, M.BrokerRegistrationRequest(
                    4001, "AAAAAAAAAAAAAAAAAAAAAQ", uuid.uuid4(), listener,
                    [M.Feature("metadata.version", 21, 21)], is_migrating_zk_broker=True))  # fmt: skip
                old_ibp = c.call(M.BROKER_REGISTRATION, 1, M.BrokerRegistrationRequest(
                    4002, cluster_id, uuid.uuid4(), listener,
                    [M.Feature("metadata.version", IBP_3_5, IBP_3_5)], is_migrating_zk_broker=True))  # fmt: skip
            assert wrong.error_code == E.INCONSISTENT_CLUSTER_ID
            assert old_ibp.error_code == E.UNSUPPORTED_VERSION
            status = json.loads(run_cli(["status", "--json", *where]).stdout)
            named = [a for a in status["anomalies"] if "registration refused" in a]
            assert any("broker 4001" in a and "INCONSISTENT_CLUSTER_ID" in a and "AAAAAAAAAAAAAAAAAAAAAQ" in a
                       for a in named), status["anomalies"]  # fmt: skip
            assert any("broker 4002" in a and "UNSUPPORTED_VERSION" in a and "between 11 and 11" in a
                       for a in named), status["anomalies"]  # fmt: skip
            with ControllerClient(*running.address, timeout_s=30) as c:  # the same id, fixed: no longer named
                fixed = c.call(M.BROKER_REGISTRATION, 1, M.BrokerRegistrationRequest(
                    4002, cluster_id, uuid.uuid4(), listener,
                    [M.Feature("metadata.version", 1, 21)], is_migrating_zk_broker=True))  # fmt: skip
            assert fixed.error_code == E.NONE
            assert [r["broker_id"] for r in read_refused(log_dir, os.getpid())] == [4001]
        finally:
            with contextlib.suppress(BrokersNotReadyError):  # stopped in soft start, as meant
                running.stop()
    status = json.loads(run_cli(["status", "--json", *where]).stdout)  # the controller is gone: nothing
    assert not [a for a in status["anomalies"] if "registration refused" in a]
