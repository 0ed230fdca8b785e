"""Three real Kafka 3.9 brokers through KIP-866's phases, zk2kraft's controller, a producer and a consumer.

Shared by the real-broker tests (tests/test_real_kafka_*.py), `zk2kraft demo` (cli/demo_real.py) and
bench/real_kafka.py. Every broker is a `zk_fixtures.kafka.KafkaNode` in its own directory; its
properties are rebuilt for each phase of the runbook (ZooKeeper mode, ZooKeeper mode with the
migration flag, KRaft broker), and Kafka's own KRaft controller takes zk2kraft's node id and port at
the handover. `Traffic` is an idempotent acks=all producer and a consumer group whose verdict says
whether every acknowledged message was read once, in order per partition.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from migrator.zk.connection import close, connect
from zk_fixtures.kafka import KafkaNode, free_ports

#: the project's root: `zk2kraft controller` runs from it (the package importable without an install)
ROOT = Path(__file__).resolve().parent.parent
#: librdkafka's own log lines (connections refused while a broker restarts, ...) go to this logger, not
#: stderr: the demo writes it to a file, pytest captures it
CLIENT_LOG = logging.getLogger("zk_fixtures.kafka_clients")

#: `zk2kraft` as a fresh process of this interpreter
ZK2KRAFT = [sys.executable, "-c", "from cli.main import entry; entry()"]

CONTROLLER_ID = 3000


@dataclass
class RealCluster:
    """Three brokers (ids 1-3) and the controller port, on `zk_connect`, under `root`."""

    root: Path
    zk_connect: str
    ids: tuple[int, ...] = (1, 2, 3)
    heap: str = "320m"
    nodes: dict[int, KafkaNode] = field(default_factory=dict)
    ports: dict[int, int] = field(default_factory=dict)
    controller_port: int = 0
    controller: subprocess.Popen[str] | None = None
    kafka_controller: KafkaNode | None = None
    metadata_dir: Path | None = None  # zk2kraft's --log-dir (default: root/metadata)

    def __post_init__(self) -> None:
        ports = free_ports(len(self.ids) + 1)
        self.controller_port = ports[-1]
        for bid, port in zip(self.ids, ports, strict=False):
            self.ports[bid] = port
            self.nodes[bid] = KafkaNode(self.root / f"broker-{bid}", {}, heap=self.heap)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    @property
    def log_dir(self) -> Path:
        return self.metadata_dir or self.root / "metadata"

    @property
    def voters(self) -> str:
        return f"{CONTROLLER_ID}@127.0.0.1:{self.controller_port}"

    def _common(self, bid: int) -> dict[str, object]:
        return {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.ports[bid]}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.ports[bid]}",
            "log.dirs": str(self.nodes[bid].directory / "data"),
            "offsets.topic.replication.factor": 3,
            "offsets.topic.num.partitions": 3,
            "transaction.state.log.replication.factor": 3,
            "transaction.state.log.min.isr": 2,
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": False,
            "num.network.threads": 2,
            "num.io.threads": 2,
            "num.replica.fetchers": 1,
            "background.threads": 2,
            "log.cleaner.enable": False,
            "replica.lag.time.max.ms": 10000,
            "controlled.shutdown.retry.backoff.ms": 500,
            "unclean.leader.election.enable": False,
        }

    def zk_props(self, bid: int, migrating: bool) -> dict[str, object]:
        """A ZooKeeper-mode broker; with `migrating`, KIP-866's phase-1 settings toward zk2kraft."""
        props: dict[str, object] = {
            "broker.id": bid,
            "zookeeper.connect": self.zk_connect,
            "inter.broker.protocol.version": "3.9",
            "zookeeper.session.timeout.ms": 10000,
            **self._common(bid),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": True,
            "super.users": "User:ANONYMOUS",
        }
        if migrating:
            props |= {
                "zookeeper.metadata.migration.enable": True,
                "controller.quorum.voters": self.voters,
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            }
        return props

    def kraft_props(self, bid: int) -> dict[str, object]:
        """Phase 3: the same node id as a KRaft broker, no ZooKeeper, no IBP, the KRaft authorizer."""
        return {
            "process.roles": "broker",
            "node.id": bid,
            "controller.quorum.voters": self.voters,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            **self._common(bid),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": True,
            "super.users": "User:ANONYMOUS",
        }

    def start_broker(self, bid: int, props: dict[str, object]) -> KafkaNode:
        node = self.nodes[bid]
        node.props = props
        if "zookeeper.connect" in props:
            self.wait_unregistered(
                bid, float(str(props.get("zookeeper.session.timeout.ms", 18000))) / 1000 + 30
            )
        node.start(wait_port="PLAINTEXT", timeout=120)
        return node

    def wait_unregistered(self, bid: int, timeout: float) -> None:
        """Until a killed broker's `/brokers/ids/<id>` is gone with its ZooKeeper session.

        A ZooKeeper-mode broker started while its dead incarnation's ephemeral znode is still there exits
        at once: Kafka's `KafkaZkClient.checkedEphemeralCreate` finds a node of another session
        (NodeExists). Leaders move off a killed broker when the controller fences it, which can be
        before its ZooKeeper session expires (seen in CI: broker 2 restarted and exited)."""
        client = connect(self.zk_connect, timeout=30.0)
        try:
            deadline = time.monotonic() + timeout
            while client.exists(f"/brokers/ids/{bid}") is not None:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"/brokers/ids/{bid} still there after {timeout:.0f}s")
                time.sleep(0.2)
        finally:
            close(client)

    # zk2kraft's controller ------------------------------------------------------------------

    def start_zk2kraft(self, *extra: str) -> subprocess.Popen[str]:
        log = open(self.root / "zk2kraft.log", "a")  # noqa: SIM115 - the child owns it
        self.controller = subprocess.Popen(
            [
                *ZK2KRAFT,
                "controller",
                "-z",
                self.zk_connect,
                "-l",
                str(self.log_dir),
                "--listen",
                f"127.0.0.1:{self.controller_port}",
                "--node-id",
                str(CONTROLLER_ID),
                "--yes",
                *extra,
            ],  # fmt: skip
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        log.close()
        return self.controller

    def stop_zk2kraft(self, timeout: float = 30.0) -> int:
        proc, self.controller = self.controller, None
        if proc is None:
            return 0
        proc.terminate()
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()

    def zk2kraft_output(self) -> str:
        path = self.root / "zk2kraft.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start_kafka_controller(self) -> KafkaNode:
        """The handover: Kafka 3.9's own KRaft controller on the directory `finalize` left, with
        zk2kraft's node id and port (docs/runbook.md, "Handing the directory to Kafka's own controller")."""
        node = KafkaNode(
            self.root / "kafka-controller",
            {
                "process.roles": "controller",
                "node.id": CONTROLLER_ID,
                "controller.quorum.voters": self.voters,
                "listeners": f"CONTROLLER://127.0.0.1:{self.controller_port}",
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
                "metadata.log.dir": str(self.log_dir),
                "log.dirs": str(self.log_dir),
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:ANONYMOUS",
            },
            heap=self.heap,
        )
        self.kafka_controller = node
        node.start(wait_port="CONTROLLER", timeout=120)
        return node

    def close(self) -> None:
        keep = os.environ.get("ZK2KRAFT_KEEP_KAFKA_LOGS")  # a directory to keep the logs in after the run
        if keep:
            dest = Path(keep) / self.root.name
            dest.mkdir(parents=True, exist_ok=True)
            for path in [*self.root.glob("*/server.log"), self.root / "zk2kraft.log"]:
                if path.exists():
                    shutil.copy(path, dest / f"{path.parent.name}-{path.name}")
        self.stop_zk2kraft()
        for node in self.nodes.values():
            node.kill()
        if self.kafka_controller is not None:
            self.kafka_controller.kill()


@dataclass
class Traffic:
    """A confluent-kafka idempotent acks=all producer writing numbered messages, and a consumer group.

    `acked` holds (partition, offset, n) for each delivery report without error, `acked_at` beside it
    (monotonic time of the report, librdkafka's produce-to-ack latency in seconds); `consumed` each
    message the consumer got, (partition, offset, n). Both run in their own threads until `stop()`.
    """

    bootstrap: str
    topic: str
    rate: float = 40.0
    acked: list[tuple[int, int, int]] = field(default_factory=list)
    acked_at: list[tuple[float, float]] = field(default_factory=list)
    sent: int = 0  # how many messages the producer has handed to librdkafka (the next one's number)
    failed: list[tuple[int, str]] = field(default_factory=list)
    consumed: list[tuple[int, int, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Traffic:
        for target in (self._produce, self._consume):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def _produce(self) -> None:
        import confluent_kafka

        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 300000,
                "retry.backoff.ms": 100,
                "error_cb": lambda e: self.errors.append(f"producer: {e}"),
                "logger": CLIENT_LOG,
            }
        )

        def report(err: Any, msg: Any) -> None:
            n = int(msg.value())
            with self._lock:
                if err is None:
                    self.acked.append((msg.partition(), msg.offset(), n))
                    self.acked_at.append((time.monotonic(), msg.latency() or 0.0))
                else:
                    self.failed.append((n, str(err)))

        n = 0
        while not self._stop.is_set():
            producer.produce(self.topic, value=str(n).encode(), key=str(n).encode(), on_delivery=report)
            n += 1
            self.sent = n
            producer.poll(0)
            time.sleep(1.0 / self.rate)
        producer.flush(120)

    def _consume(self) -> None:
        import confluent_kafka

        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "real-kafka-readers",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 500,
                "isolation.level": "read_committed",
                "error_cb": lambda e: self.errors.append(f"consumer: {e}"),
                "logger": CLIENT_LOG,
            }
        )
        consumer.subscribe([self.topic])
        idle_after_stop = 0
        while idle_after_stop < 6:
            msg = consumer.poll(0.5)
            if msg is None:
                if self._stop.is_set() and self.caught_up():
                    idle_after_stop += 1
                continue
            if msg.error() is not None:
                continue
            with self._lock:
                self.consumed.append((msg.partition(), msg.offset(), int(msg.value())))
        consumer.close()

    def _unread(self) -> list[tuple[int, int | None, int]]:
        """Acknowledged messages the consumer has not read (the caller holds the lock).

        An acknowledgement may come without an offset: librdkafka reports a retried batch that the
        broker answers DUPLICATE_SEQUENCE_NUMBER (it was written before, the first answer was lost)
        as delivered, offset unknown; such a message counts as read when its number was read on its
        partition.
        """
        offsets = {(p, o) for p, o, _ in self.consumed}
        numbers = {(p, n) for p, _o, n in self.consumed}
        return [
            (p, o, n)
            for p, o, n in self.acked
            if ((p, o) not in offsets if o is not None and o >= 0 else (p, n) not in numbers)
        ]

    def caught_up(self) -> bool:
        with self._lock:
            return not self._unread()

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def wait_acked(self, more: int, timeout: float = 90.0) -> None:
        """Until `more` further messages are acknowledged: the data path works now."""
        goal = self.count() + more
        deadline = time.monotonic() + timeout
        while self.count() < goal:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"producer stalled: {self.count()} acked, wanted {goal}; last errors {self.errors[-5:]}"
                )
            time.sleep(0.2)

    def first_ack_after(
        self, since: float, partitions: set[int], from_n: int, timeout: float = 120.0
    ) -> float:
        """The monotonic time of the first acknowledgement after `since` on one of `partitions` of a
        message numbered `from_n` or later (`sent` read at `since`: one produced after it, as reports
        of earlier acks may still be queued), waiting up to `timeout` seconds: a failover's end as
        the producer sees it."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            with self._lock:
                fresh = list(zip(self.acked[seen:], self.acked_at[seen:], strict=True))
                seen = len(self.acked)
            for (p, _o, n), (at, _latency) in fresh:
                if at > since and p in partitions and n >= from_n:
                    return at
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no acknowledgement on partitions {sorted(partitions)} in {timeout:.0f}s"
                )
            time.sleep(0.01)

    def tally(self) -> tuple[int, int, int]:
        """(acknowledged, of those read by the consumer, lost): lost = acknowledged and never read."""
        with self._lock:
            acked, lost = len(self.acked), len(self._unread())
        return acked, acked - lost, lost

    def stop(self, timeout: float = 180.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout)

    def verdict(self) -> str | None:
        """None when every acked message was read exactly once at its offset, in order per partition.

        A consumer group may deliver an offset twice after a rebalance (at-least-once); the log's
        content is what must hold each message once, so repeated deliveries of one offset count once
        and must carry the same message.
        """
        if self.failed:
            return f"{len(self.failed)} deliveries failed, first {self.failed[:3]}"
        at: dict[tuple[int, int], int] = {}
        for p, o, n in self.consumed:
            if at.setdefault((p, o), n) != n:
                return f"offset {p}:{o} delivered two messages"
        per_partition: dict[int, list[int]] = defaultdict(list)
        for (p, _o), n in sorted(at.items()):
            per_partition[p].append(n)
        for p, values in per_partition.items():
            if values != sorted(values):
                return f"partition {p} out of order"
        where: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for (p, o), n in sorted(at.items()):
            where[n].append((p, o))
        twice = {n: places for n, places in where.items() if len(places) > 1}
        if twice:
            acked_at = {(p, o): t for (p, o, _n), (t, _lat) in zip(self.acked, self.acked_at, strict=True)}
            examples = [
                (n, [(p, o, acked_at.get((p, o))) for p, o in places])
                for n, places in sorted(twice.items())[:3]
            ]
            return (
                f"{len(twice)} messages are in the log twice: (n, [(partition, offset, acked at)]) {examples}"
            )
        with self._lock:
            missing = self._unread()
        if missing:
            return f"{len(missing)} acked messages never read, (partition, offset, n) e.g. {missing[:5]}"
        wrong = [(p, o, n) for p, o, n in self.acked if o is not None and o >= 0 and at[(p, o)] != n]
        if wrong:
            return f"acked messages at other offsets: {wrong[:3]}"
        return None


def isr_full(bootstrap: str, topic: str, timeout: float = 120.0) -> None:
    """Until every partition of `topic` has its whole replica set in the ISR (as Metadata tells a
    client): the runbook's "under-replicated partitions back to 0" before the next restart."""
    import confluent_kafka.admin

    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap, "logger": CLIENT_LOG})
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(topic, timeout=5)
            parts = md.topics[topic].partitions
            short = {
                p: (m.replicas, m.isrs, m.leader)
                for p, m in parts.items()
                if set(m.isrs) != set(m.replicas) or m.leader < 0
            }
            if parts and not short:
                return
            last = str(short)
        except Exception as err:  # noqa: BLE001 - a broker restarting: ask again
            last = str(err)
        time.sleep(0.5)
    raise AssertionError(f"{topic}: partitions still under-replicated after {timeout:.0f}s: {last}")


def wait_listening(port: int, proc: subprocess.Popen[str] | None, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"zk2kraft exited {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"nothing listens on :{port} after {timeout:.0f}s")


def leaders(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    """partition → (leader, isr) as the brokers' Metadata tells a client."""
    import confluent_kafka.admin

    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap, "logger": CLIENT_LOG})
    md = admin.list_topics(topic, timeout=10)
    return {p: (m.leader, sorted(m.isrs)) for p, m in md.topics[topic].partitions.items()}


def wait_leaders(
    bootstrap: str, topic: str, ok: Any, what: str, timeout: float = 90.0
) -> dict[int, tuple[int, list[int]]]:
    """Until `ok(leaders(...))`; the last answer in the failure."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = leaders(bootstrap, topic)
            if ok(last):
                return last
        except Exception as err:  # noqa: BLE001 - a broker restarting: ask again
            last = err
        time.sleep(0.5)
    raise AssertionError(f"{topic}: {what} not reached in {timeout:.0f}s: {last}")
