"""What TLS, SASL/SCRAM and the ACL check cost on the controller listener, against PLAINTEXT without
authorization measured side by side in the same run.

One ControllerService over a fresh metadata log whose image holds a SCRAM-SHA-512 credential for the
broker, its CLUSTER_ACTION ACL and ``--acls`` topic ACLs (the authorizer rebuilds nothing per
request; each request still passes the seam). Two listeners on it: PLAINTEXT (no authorizer) and
SASL_SSL with StandardAuthorizer. A registered broker sends BrokerHeartbeats (a CLUSTER_ACTION API)
for ``--seconds`` on each, in alternating rounds, then AlterPartition v3 (``--batch`` partitions per
request, each ISR shrunk and expanded in turn, so every partition changes and a PartitionChangeRecord
is appended per partition — the whole path: listener, authorization, decision, log); the best round
of each is kept. Also: new SASL_SSL connections per second (TCP, TLS handshake, ApiVersions,
SCRAM-SHA-512 at 4096 iterations). bench/controller.py measures AlterPartition end to end with
ZooKeeper and dual-write; this one isolates the listener's share in one process.

    .venv/bin/python bench/listener.py [--seconds 2] [--rounds 3] [--acls 5000] [--batch 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from tls_certs import make_certs  # noqa: E402

from migrator.controller.client.client import ControllerClient  # noqa: E402
from migrator.controller.core import ControllerConfig  # noqa: E402
from migrator.controller.network.listener_config import start_listeners  # noqa: E402
from migrator.controller.protocol import messages as M  # noqa: E402
from migrator.controller.security.client_security import ClientSecurity  # noqa: E402
from migrator.controller.security.scram_server import scram_credential  # noqa: E402
from migrator.controller.service import ControllerService  # noqa: E402
from migrator.kraft.image import ImageBuilder  # noqa: E402
from migrator.kraft.log import MetadataLog  # noqa: E402
from migrator.kraft.records import uuid_to_kafka  # noqa: E402
from migrator.model import Acl, ClusterImage, Partition, Topic  # noqa: E402

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
PASSWORD = "bench-broker-pw"
TOPIC_ID = uuid.uuid4()
PARTITIONS = 200


def image(acls: int) -> ClusterImage:
    img = ClusterImage()
    img.topics["bench"] = Topic(
        name="bench",
        topic_id=uuid_to_kafka(TOPIC_ID),
        partitions={
            p: Partition(partition=p, replicas=[1, 2], isr=[1, 2], leader=1) for p in range(PARTITIONS)
        },
    )
    img.scram_credentials[("broker", "SCRAM-SHA-512")] = scram_credential(
        "broker", "SCRAM-SHA-512", PASSWORD, uuid.uuid4().bytes, 4096
    )
    img.acls = [
        Acl(
            resource_type="CLUSTER",
            resource_name="kafka-cluster",
            pattern_type="LITERAL",
            principal="User:broker",
            host="*",
            operation="CLUSTER_ACTION",
            permission_type="ALLOW",
            acl_id="broker",
        )
    ] + [
        Acl(
            resource_type="TOPIC",
            resource_name=f"topic{i}",
            pattern_type="LITERAL",
            principal=f"User:app{i}",
            host="*",
            operation="READ",
            permission_type="ALLOW",
            acl_id=str(i),
        )
        for i in range(acls)
    ]
    return img


def heartbeats(client: ControllerClient, epoch: int, seconds: float) -> float:
    req = M.BrokerHeartbeatRequest(1, epoch, 0)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        assert client.heartbeat(req).error_code == 0
        n += 1
    return n / (time.perf_counter() - t0)


class Leader:
    """Broker 1's view of the partitions it leads: (leader epoch, partition epoch, ISR) per partition,
    updated from each answer so the next request is one the controller accepts."""

    def __init__(self, epochs: dict[int, int]) -> None:
        self.epochs = epochs
        self.state = {p: (0, 0, [1, 2]) for p in range(PARTITIONS)}
        self.next = 0

    def alter(self, client: ControllerClient, batch: int, seconds: float) -> float:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            parts = []
            for _ in range(batch):
                p = self.next
                self.next = (self.next + 1) % PARTITIONS
                leader_epoch, partition_epoch, isr = self.state[p]
                new_isr = [1] if len(isr) == 2 else [1, 2]
                members = [M.BrokerState(b, self.epochs[b]) for b in new_isr]
                parts.append(M.AlterPartitionPartition(p, leader_epoch, members, partition_epoch))
            topic = M.AlterPartitionTopic(None, TOPIC_ID, parts)
            resp = client.alter_partition(M.AlterPartitionRequest(1, self.epochs[1], [topic]), 3)
            assert resp.error_code == 0, resp.error_code
            for r in resp.topics[0].partitions:
                assert r.error_code == 0, r.error_code
                self.state[r.partition_index] = (r.leader_epoch, r.partition_epoch, list(r.isr))
            n += len(parts)
        return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--acls", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=10, help="partitions per AlterPartition request")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="zk2kraft-bench-listener-"))
    certs = make_certs(tmp / "certs")
    log = MetadataLog.open(str(tmp / "log"), writable=True, cluster_id=CLUSTER_ID, node_id=3000)
    config = ControllerConfig(cluster_id=CLUSTER_ID, node_id=3000, metadata_version=21)
    service = ControllerService(log, ImageBuilder(image(args.acls)), config, 1, write_behind=False)
    service.core.active = True  # past the copy, dual-write off: no ZooKeeper in this measurement
    plain = start_listeners(
        service, "PLAIN://127.0.0.1:0", {"listener.security.protocol.map": "PLAIN:PLAINTEXT"}
    )
    secure = start_listeners(
        service,
        "SECURE://127.0.0.1:0",
        {
            "listener.security.protocol.map": "SECURE:SASL_SSL",
            "ssl.keystore.location": str(certs.server),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        },
    )
    sec = ClientSecurity(
        "SASL_SSL",
        ssl_cafile=str(certs.ca),
        sasl_mechanism="SCRAM-SHA-512",
        username="broker",
        password=PASSWORD,
    )
    try:
        p = ControllerClient(*plain.address)
        s = ControllerClient(*secure.address, security=sec)
        epochs = {}
        for b in (1, 2):
            reg = M.BrokerRegistrationRequest(
                b,
                CLUSTER_ID,
                uuid.uuid4(),
                [M.Listener("PLAINTEXT", f"b{b}", 9092)],
                [M.Feature("metadata.version", 1, 21)],
                is_migrating_zk_broker=True,
            )
            epochs[b] = s.register_broker(reg).broker_epoch
            hb = s.heartbeat(M.BrokerHeartbeatRequest(b, epochs[b], 1 << 40))  # caught up: unfenced
            assert hb.error_code == 0 and not hb.is_fenced, (hb.error_code, hb.is_fenced)
        epoch = epochs[1]
        best_p = best_s = 0.0
        for _ in range(args.rounds):
            best_p = max(best_p, heartbeats(p, epoch, args.seconds))
            best_s = max(best_s, heartbeats(s, epoch, args.seconds))
        leader = Leader(epochs)
        alter_p = alter_s = 0.0
        for _ in range(args.rounds):
            alter_p = max(alter_p, leader.alter(p, args.batch, args.seconds))
            alter_s = max(alter_s, leader.alter(s, args.batch, args.seconds))
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < args.seconds:
            ControllerClient(*secure.address, security=sec).close()
            n += 1
        conns = n / (time.perf_counter() - t0)
    finally:
        plain.stop()
        secure.stop()
        service.stop()
        log.close()
    print(f"BrokerHeartbeat, 1 connection, {args.acls + 1} ACLs in the image")
    print(f"  PLAINTEXT, no authorizer        {best_p:10.0f} req/s")
    print(f"  SASL_SSL + SCRAM + ACL check    {best_s:10.0f} req/s   ratio {best_s / best_p:.2f}")
    print(f"AlterPartition v3, {args.batch} partitions per request, every ISR changed (partitions/s)")
    print(f"  PLAINTEXT, no authorizer        {alter_p:10.0f} /s")
    print(f"  SASL_SSL + SCRAM + ACL check    {alter_s:10.0f} /s   ratio {alter_s / alter_p:.2f}")
    print(f"new SASL_SSL/SCRAM-SHA-512 connections {conns:8.1f} /s")


if __name__ == "__main__":
    main()
