"""Prometheus metrics of the running controller, under Kafka's own migration metric names.

Kafka exposes them as JMX MBeans `kafka.controller:type=KafkaController,name=<Name>`; the Prometheus
JMX exporter's usual rule turns those into `kafka_controller_KafkaController_<Name>`-style names, so
the names here keep Kafka's `<Name>` verbatim and a dashboard or alert written for a real KRaft
controller in migration reads zk2kraft's too (see docs/metrics.md).

The driver only calls the small `on_*` methods; everything Prometheus-specific stays here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from migrator.controller.security.listener_metrics import ListenerCollector
from migrator.errors import BadInputError, UnreachableError

PREFIX = "kafka_controller_KafkaController_"
# Kafka's ZkMigrationState values (the ZkMigrationStateRecord codes, 4 for a ZooKeeper controller);
# -1 until the controller has loaded the log, as Kafka's gauge before the first image.
NOT_LOADED = -1
_MS_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000)

Progress = Callable[[int, int], None]


def parse_listen(listen: str) -> tuple[str, int]:
    host, colon, port = listen.strip().rpartition(":")
    if not colon or not port.isdigit() or not 0 <= int(port) < 65536:
        raise BadInputError(f"bad --metrics-listen {listen!r}: expected HOST:PORT, e.g. 127.0.0.1:9404")
    return host.strip("[]") or "0.0.0.0", int(port)


class MigrationMetrics:
    """The controller's gauges and histograms, on a registry of their own (one per controller)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.state = Gauge(
            PREFIX + "ZkMigrationState",
            "Kafka's ZkMigrationState: 0 NONE, 1 MIGRATION, 2 PRE_MIGRATION, 3 POST_MIGRATION; -1 before the log is loaded",
            registry=r,
        )
        self.migrating_brokers = Gauge(
            PREFIX + "MigratingZkBrokerCount",
            "Brokers registered with the controller as migrating ZooKeeper brokers (isMigratingZkBroker)",
            registry=r,
        )
        self.lag = Gauge(
            PREFIX + "ZkWriteBehindLag",
            "Records in the metadata log not yet written to ZooKeeper (last committed offset - /migration offset)",
            registry=r,
        )
        self.snapshot_ms = Histogram(
            PREFIX + "ZkWriteSnapshotTimeMs",
            "Milliseconds to reconcile a full metadata image into ZooKeeper",
            buckets=_MS_BUCKETS,
            registry=r,
        )
        self.delta_ms = Histogram(
            PREFIX + "ZkWriteDeltaTimeMs",
            "Milliseconds to write a metadata delta to ZooKeeper (only deltas that wrote something)",
            buckets=_MS_BUCKETS,
            registry=r,
        )
        self.copy_done = Gauge(
            "zk2kraft_copy_records_copied",
            "Records of the ZooKeeper copy appended to the log so far",
            registry=r,
        )
        self.copy_total = Gauge(
            "zk2kraft_copy_records_total", "Records the ZooKeeper copy appends in all", registry=r
        )
        self.synced_records = Counter(
            "zk2kraft_dual_write_records", "Log records written behind to ZooKeeper", registry=r
        )
        r.register(ListenerCollector())  # the controller listeners' authentication counters
        self.state.set(NOT_LOADED)
        # Read at each scrape: during the broker wait the count comes from the serving controller's
        # image (registrations land there, not in a loop of the driver); later from the follow loop.
        self._brokers_value = 0
        self._brokers_source: Callable[[], int] | None = None
        self.migrating_brokers.set_function(self._read_brokers)
        self._lag_tracked = False
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.address: tuple[str, int] | None = None

    # -- what the driver reports -------------------------------------------------------------------

    def on_state(self, kafka_code: int | None) -> None:
        """The log's last ZkMigrationStateRecord code (None: no record yet, Kafka's NONE)."""
        self.state.set(0 if kafka_code is None else kafka_code)

    def on_copy(self, done: int, total: int) -> None:
        self.copy_done.set(done)
        self.copy_total.set(total)

    def tee_progress(self, progress: Progress | None) -> Progress:
        """A copy-progress callback that feeds these gauges and then `progress` (the terminal bar)."""

        def both(done: int, total: int) -> None:
            self.on_copy(done, total)
            if progress is not None:
                progress(done, total)

        return both

    def on_reconcile(self, seconds: float) -> None:
        self.snapshot_ms.observe(seconds * 1000.0)

    def on_sync(self, seconds: float, records: int, ops: int, lag: int) -> None:
        if ops > 0:
            self.delta_ms.observe(seconds * 1000.0)
        if records > 0:
            self.synced_records.inc(records)
        self.lag.set(max(lag, 0))

    def track_lag(self, lag: Callable[[], int]) -> None:
        """Read the lag at each scrape (lock-free in the syncer): a sync blocked on a ZooKeeper
        outage cannot update a gauge, and the lag that outage builds up is the alert."""
        self._lag_tracked = True
        self.lag.set_function(lambda: max(lag(), 0))

    def on_follow(self, lag: int, migrating_brokers: int) -> None:
        """Once per loop of the running controller."""
        if not self._lag_tracked:
            self.lag.set(max(lag, 0))
        self._brokers_source = None
        self._brokers_value = migrating_brokers

    def watch_brokers(self, source: Callable[[], int]) -> None:
        """Count migrating brokers with `source` at each scrape (until the follow loop reports)."""
        self._brokers_source = source

    def _read_brokers(self) -> float:
        source = self._brokers_source
        if source is not None:
            try:
                self._brokers_value = source()
            except Exception:  # noqa: BLE001 - a scrape never fails on a closing controller; keep the last
                pass
        return float(self._brokers_value)

    def track_zk_brokers(self, rows: Callable[[], list[dict[str, Any]]]) -> None:
        """The channel to each ZooKeeper-mode broker, read at each scrape: Kafka's
        ControllerChannelManager QueueSize (per broker-id) and TotalQueueSize, and zk2kraft's
        connected / errors / acknowledged-offset gauges."""
        self.registry.register(_ZkBrokerCollector(rows))

    # -- the HTTP endpoint -------------------------------------------------------------------------

    def serve(self, listen: str) -> tuple[str, int]:
        """Serve /metrics on HOST:PORT (port 0: any free one); returns the bound address."""
        host, port = parse_listen(listen)
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as e:
            raise UnreachableError(f"cannot serve metrics on {listen}: {e.strerror or e}") from None
        self.address = (host, int(self._server.server_port))
        return self.address

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._thread is not None:
                self._thread.join(5)
            self._server = None


class _ZkBrokerCollector:
    """Per-broker channel gauges, built at scrape time from the propagator's status rows."""

    def __init__(self, rows: Callable[[], list[dict[str, Any]]]) -> None:
        self._rows = rows

    def describe(self) -> list[Any]:
        return []  # the families are built at scrape time (no duplicate checks against them)

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        rows = self._rows()
        label = ["broker_id"]
        queue = GaugeMetricFamily(
            "kafka_controller_ControllerChannelManager_QueueSize",
            "Requests queued for the broker",
            labels=label,
        )
        total = GaugeMetricFamily(
            "kafka_controller_ControllerChannelManager_TotalQueueSize", "Requests queued for all brokers"
        )
        connected = GaugeMetricFamily(
            "zk2kraft_zk_broker_channel_connected",
            "1 if the controller is connected to the broker",
            labels=label,
        )
        errors = GaugeMetricFamily(
            "zk2kraft_zk_broker_channel_errors",
            "Failed sends, refused requests and partition errors since the channel started",
            labels=label,
        )
        unreachable = GaugeMetricFamily(
            "zk2kraft_zk_broker_channel_unreachable",
            "1 if the broker registers no usable inter-broker endpoint (no channel; status says why)",
            labels=label,
        )
        acked = GaugeMetricFamily(
            "zk2kraft_zk_broker_channel_acked_offset",
            "Metadata log offset of the last state the broker acknowledged (-1: none yet)",
            labels=label,
        )
        for r in rows:
            b = [str(r.get("broker_id"))]
            queue.add_metric(b, float(r.get("queued", 0)))
            connected.add_metric(b, 1.0 if r.get("connected") else 0.0)
            errors.add_metric(b, float(r.get("errors", 0)) + float(r.get("partition_errors", 0)))
            unreachable.add_metric(b, 1.0 if r.get("unreachable") else 0.0)
            acked.add_metric(b, float(r.get("acked_offset", -1)))
        total.add_metric([], float(sum(r.get("queued", 0) for r in rows)))
        yield from (queue, total, connected, errors, unreachable, acked)
