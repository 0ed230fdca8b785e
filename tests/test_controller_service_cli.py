"""`zk2kraft controller --listen` as a real process, talked to over TCP with the wire codec: brokers
register in soft start, the copy follows, an AlterPartition reaches ZooKeeper, SIGTERM stops it."""

from __future__ import annotations

import json
import signal
import socket
import struct
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from migrate_helpers import ROOT, ZK2KRAFT, assert_consistent, cluster

from migrator.controller.protocol import kafka_errors as E
from migrator.controller.protocol import messages as M
from migrator.controller.protocol import wire
from migrator.zk import paths as P
from zk_fixtures.server import free_port

pytestmark = pytest.mark.zk


class Conn:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.correlation = 0

    def call(self, api_key: int, version: int, req: Any) -> Any:
        self.correlation += 1
        self.sock.sendall(wire.encode_request(api_key, version, self.correlation, "test", req))
        size = struct.unpack(">i", self._exactly(4))[0]
        cid, resp = wire.decode_response(api_key, version, self._exactly(size))
        assert cid == self.correlation
        return resp

    def _exactly(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "the controller closed the connection"
            buf += chunk
        return buf


def _connect(port: int, proc: subprocess.Popen[str], timeout: float = 30) -> Conn:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return Conn(port)
        except OSError:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the controller never listened"
            time.sleep(0.1)


def test_controller_process_over_tcp(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    log_dir = tmp_path / "meta"
    port = free_port()
    with cluster(zk, zk_connect) as generated:
        cluster_id = generated.image.cluster_id
        proc = subprocess.Popen(
            [
                *ZK2KRAFT,
                "controller",
                "-z",
                zk_connect,
                "-l",
                str(log_dir),
                "--listen",
                f"127.0.0.1:{port}",
                "--yes",
                "--session-timeout-ms",
                "60000",
                "--json",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            conn = _connect(port, proc)
            ids = sorted({int(b) for b in zk.get_children(P.BROKER_IDS)})
            epochs = {}
            for b in ids:
                reg = M.BrokerRegistrationRequest(
                    b,
                    cluster_id or "",
                    uuid.uuid4(),
                    [M.Listener("PLAINTEXT", f"b{b}", 9092)],
                    [M.Feature("metadata.version", 1, 21)],
                    is_migrating_zk_broker=True,
                )
                reply = conn.call(M.BROKER_REGISTRATION, 1, reg)
                assert reply.error_code == E.NONE
                epochs[b] = reply.broker_epoch
            # Soft start until the copy is committed, then the copy: wait for the claim's /migration.
            deadline = time.monotonic() + 60
            while True:
                data = zk.exists(P.MIGRATION) and json.loads(zk.get(P.MIGRATION)[0])
                if data and data["kraft_metadata_offset"] > 0:
                    break
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
            for b in ids:
                hb = conn.call(M.BROKER_HEARTBEAT, 1, M.BrokerHeartbeatRequest(b, epochs[b], 1 << 40))
                assert hb.error_code == E.NONE and not hb.is_fenced
            name, pid, state = next(
                (t, int(p), json.loads(zk.get(P.partition_state_path(t, int(p)))[0]))
                for t in sorted(zk.get_children(P.TOPICS))
                for p in sorted(zk.get_children(P.partitions_path(t)))
                if len(json.loads(zk.get(P.partition_state_path(t, int(p)))[0])["isr"]) > 1
            )
            leader = state["leader"]
            version = zk.get(P.partition_state_path(name, pid))[1].version
            req = M.AlterPartitionRequest(
                leader,
                epochs[leader],
                [
                    M.AlterPartitionTopic(
                        name,
                        None,
                        [
                            M.AlterPartitionPartition(
                                pid, state["leader_epoch"], [M.BrokerState(leader)], version
                            )
                        ],
                    )
                ],
            )
            out = conn.call(M.ALTER_PARTITION, 1, req)
            assert out.topics[0].partitions[0].error_code == E.NONE, out
            deadline = time.monotonic() + 10
            while json.loads(zk.get(P.partition_state_path(name, pid))[0])["isr"] != [leader]:
                assert time.monotonic() < deadline, "the change never reached ZooKeeper"
                time.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGTERM)
            out_text, err_text = proc.communicate(timeout=60)
        assert proc.returncode == 0, err_text
        result = json.loads(out_text)
        assert result["state_after"] == "DualWriteMetadata" and result["followed_seconds"] is not None
        assert any(f"127.0.0.1:{port}" in a for a in result["actions"])
        assert_consistent(zk, log_dir)
