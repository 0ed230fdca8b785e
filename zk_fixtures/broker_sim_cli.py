"""The broker simulator as a process: `python -m zk_fixtures.broker_sim_cli --controller HOST:PORT
--zookeeper CONNECT --brokers 1,2,3` (prints ``ready`` once every broker is registered; SIGKILL it to
crash them all), and `run_simulator`, which `zk2kraft fixtures simulate-brokers` runs.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType

from migrator.controller.protocol.kafka_errors import name_of
from migrator.controller.security.client_security import ClientSecurity, from_client_properties
from migrator.errors import BadInputError, UnreachableError, ZkKraftError
from migrator.properties import read_properties
from migrator.zk.connection import ZkSecurity, close, connect
from migrator.zk.reader import read_cluster
from zk_fixtures.broker_sim import BrokerSimulator
from zk_fixtures.kraft_broker import as_kraft_brokers, report_kraft_brokers
from zk_fixtures.simulated_broker import listeners_of

__all__ = ["main", "run_simulator"]

READY = "ready"


def run_simulator(
    controller: str,
    zookeeper: str,
    broker_ids: Sequence[int] = (),
    *,
    interval: float = 0.5,
    own_timeout: float = 6.0,
    auth: Sequence[str] = (),
    zk_timeout: float = 10.0,
    controller_wait: float = 120.0,
    security: ClientSecurity | None = None,
    zk_security: ZkSecurity | None = None,
    kraft_ids: Sequence[int] = (),
) -> None:
    """Register ``broker_ids`` (default: every broker ZooKeeper knows) with the controller at
    ``controller`` (HOST:PORT) and drive them until SIGTERM/SIGINT; prints ``ready`` once registered.
    ``kraft_ids`` run as KRaft brokers (zk_fixtures.kraft_broker: no migration flag, they follow the
    metadata log over Raft), the others as ZooKeeper-mode brokers.

    Each registers the endpoints and rack of its ZooKeeper registration. Raises BadInputError (exit
    2) for a bad address, no brokers, or a refused registration; UnreachableError (3) when the
    controller or ZooKeeper cannot be reached.
    """
    host, sep, port = controller.rpartition(":")
    if not sep or not port.isdigit():
        raise BadInputError(f"--controller {controller!r}: expected HOST:PORT")
    address = (host.strip("[]"), int(port))
    client = connect(zookeeper, auth=auth, timeout=zk_timeout, security=zk_security)
    try:
        image = read_cluster(client, strict=False).image
    finally:
        close(client)
    ids = list(broker_ids) or sorted(image.brokers)
    if not ids:
        raise BadInputError("no brokers to simulate: ZooKeeper has none registered and --brokers is empty")
    listeners, racks = listeners_of(image)
    sim = BrokerSimulator(
        address,
        zookeeper,
        image.cluster_id or "",
        ids,
        racks=racks,
        listeners=listeners,
        interval_s=interval,
        own_timeout_s=own_timeout,
        zk_auth=auth,
        security=security,
        zk_security=zk_security,
    )
    if kraft_ids:
        as_kraft_brokers(sim, kraft_ids)
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        # Kafka's brokers retry their registration until a controller answers: a simulator started
        # beside a controller that is still starting (or restarting) waits for it the same way.
        deadline = time.monotonic() + controller_wait
        codes = sim.register_all()
        while all(c == -1 for c in codes.values()):
            if time.monotonic() > deadline or done.wait(0.5):
                raise UnreachableError(
                    f"cannot reach the controller at {controller} (tried for {controller_wait:g}s)"
                )
            codes = sim.register_all()
        bad = {b: name_of(c) for b, c in codes.items() if c != 0}
        if bad:
            raise BadInputError(f"the controller refused registrations: {bad}")
        sim.start()
        print(READY, flush=True)
        if kraft_ids:
            report_kraft_brokers(sim, kraft_ids, done)
        done.wait()
    finally:
        sim.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m zk_fixtures.broker_sim_cli",
        description="Simulated ZooKeeper-mode brokers on the controller's protocol.",
    )
    parser.add_argument("--controller", required=True, help="HOST:PORT of the controller listener")
    parser.add_argument("--zookeeper", required=True, help="ZooKeeper connect string with the chroot")
    parser.add_argument(
        "--brokers", default="", help="comma-separated broker ids (default: all in ZooKeeper)"
    )
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--own-timeout", type=float, default=6.0)
    parser.add_argument("--controller-wait", type=float, default=120.0)
    parser.add_argument(
        "--command-config", help="Kafka client properties for the controller listener (TLS, SASL)"
    )
    args = parser.parse_args(argv)
    try:
        security = (
            from_client_properties(read_properties(args.command_config)) if args.command_config else None
        )
        run_simulator(
            args.controller,
            args.zookeeper,
            [int(b) for b in args.brokers.split(",") if b.strip()],
            interval=args.interval,
            own_timeout=args.own_timeout,
            controller_wait=args.controller_wait,
            security=security,
        )
    except ZkKraftError as e:
        print(f"broker simulator: {e}", file=sys.stderr, flush=True)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
