"""A ZooKeeper outage in the middle of a write-behind sync holds up no broker request (issue 13).

The sync thread reads the log under the commit lock and writes ZooKeeper after releasing it, so while
ZooKeeper does not answer (here: its process stopped with SIGSTOP, so the connection looks alive and
the multi already sent just waits) heartbeats and AlterPartition are still answered; the lag builds up
and drains once ZooKeeper answers again.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from migrate_helpers import cluster, register_migrating_broker

from migrator import commands
from migrator.controller import core
from migrator.controller.network.listener_runtime import IN_PROCESS
from migrator.controller.protocol import kafka_errors as E
from migrator.controller.service import ControllerService
from migrator.zk import paths as P
from migrator.zk.connection import close, connect
from zk_fixtures.server import ZkServer

pytestmark = pytest.mark.zk

OUTAGE_S = 8.0
ANSWER_WITHIN_S = 4.0  # a request stalled behind the outage would take OUTAGE_S


def _register(service: ControllerService, broker_id: int) -> int:
    epoch, hb = register_migrating_broker(service, broker_id)
    assert not hb.is_fenced, hb
    return epoch


def _flip_isr(service: ControllerService, epochs: dict[int, int], name: str, index: int) -> list[int]:
    """Shrink the ISR to the leader, or grow it back to every replica; returns the ISR answered."""
    p = service.image.topics[name].partitions[index]
    tid = service.image.topics[name].topic_id
    isr = [p.leader] if len(p.isr) > 1 else list(p.replicas)
    req = core.AlterPartition(
        p.leader,
        epochs[p.leader],
        (
            core.TopicAlter(
                None,
                tid,
                (
                    core.PartitionAlter(
                        index,
                        p.leader_epoch,
                        tuple(core.IsrMember(b, epochs[b]) for b in isr),
                        p.partition_epoch,
                    ),
                ),
            ),
        ),
    )
    reply = service.alter_partition(req)
    res = reply.topics[0].partitions[0]
    assert reply.error == E.NONE and res.error == E.NONE, reply
    return list(res.isr)


def test_requests_are_answered_while_zookeeper_hangs_mid_sync(tmp_path: Path) -> None:
    server = ZkServer(tmp_path / "zk").start()
    client = connect(server.connect_string)
    paused = False
    try:
        with cluster(client, server.connect_string) as generated:
            running = commands.start_controller(
                server.connect_string, str(tmp_path / "meta"), listen=IN_PROCESS, yes=True,
                broker_wait_timeout=60, session_timeout_ms=600_000,
            )  # fmt: skip
            try:
                service = running.service
                assert service is not None
                epochs = {b: _register(service, b) for b in sorted(generated.image.brokers)}
                assert running.wait_until(lambda r: service.admin is not None, 60), running.error
                assert service.syncs_behind and service.flush(60)
                name = sorted(n for n, t in service.image.topics.items() if t.partitions)[0]
                index = min(service.image.topics[name].partitions)
                assert server.proc is not None
                slowest, isr, rounds = [0.0], [], []
                stop = threading.Event()

                def load() -> None:  # brokers' requests through the outage
                    while not stop.is_set():
                        t0 = time.monotonic()
                        isr[:] = _flip_isr(service, epochs, name, index)  # appends: the sync thread takes it
                        for b, e in epochs.items():
                            hb = service.heartbeat(core.Heartbeat(b, e, service.log.end_offset))
                            assert hb.error == E.NONE and not hb.is_fenced
                        slowest[0] = max(slowest[0], time.monotonic() - t0)
                        rounds.append(service.log.end_offset)
                        stop.wait(0.05)

                os.kill(server.proc.pid, signal.SIGSTOP)
                paused = True
                worker = threading.Thread(target=load, daemon=True)
                worker.start()
                time.sleep(OUTAGE_S)  # ZooKeeper answers nothing meanwhile (its connections look alive)
                lag = service.syncer.lag() if service.syncer is not None else 0
                stop.set()
                os.kill(server.proc.pid, signal.SIGCONT)  # whatever the requests did: ZooKeeper is back
                paused = False
                worker.join(120)
                assert not worker.is_alive()
                assert slowest[0] < ANSWER_WITHIN_S, f"a request waited {slowest[0]:.1f}s behind ZooKeeper"
                assert len(rounds) > 10 and lag > 0
                assert service.flush(120), "the write-behind lag did not drain"
                state = json.loads(client.get(P.partition_state_path(name, index))[0])
                assert state["isr"] == isr
            finally:
                if paused and server.proc is not None:
                    os.kill(server.proc.pid, signal.SIGCONT)
                running.stop()
    finally:
        if paused and server.proc is not None:
            os.kill(server.proc.pid, signal.SIGCONT)
        close(client)
        server.stop()
