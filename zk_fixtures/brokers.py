"""Live ZK-mode brokers, as far as ZooKeeper can tell: ephemeral registrations held by real sessions.

Each broker gets its own kazoo session, as each Kafka broker has: its `/brokers/ids/<id>` has its own
czxid (Kafka's ZK broker epoch) and owner, one broker can go away (`stop_broker`, `expire_broker`)
while the others stay, and the ZK controller's ephemeral `/controller` belongs to the controller
broker's session. Killing the holder process ends every session, so every registration vanishes once
ZooKeeper expires them (a short session timeout keeps that quick). A session that expires while the
process lives is re-registered, as a Kafka broker does.

`python -m zk_fixtures.brokers --zookeeper HOST:PORT[/chroot] --spec '<ClusterSpec JSON>'` holds the
registrations of the generated cluster until SIGTERM/SIGINT and prints ``ready`` once they exist.
Auth comes from ZK2KRAFT_ZK_AUTH, so no credential shows in `ps`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from migrator.errors import BadInputError, UnreachableError, ZkKraftError
from migrator.model import ClusterImage, ZkControlState
from migrator.zk import paths
from migrator.zk.codec import decode_controller, encode_controller
from migrator.zk.connection import ZkSecurity, close, connect
from migrator.zk.layout import broker_znodes
from zk_fixtures.generator import ClusterSpec, generate

__all__ = ["DEFAULT_SESSION_TIMEOUT", "BrokerSessions", "hold_until_signal", "main", "run_brokers_process"]

log = logging.getLogger(__name__)

DEFAULT_SESSION_TIMEOUT = 4.0
READY = "ready"
#: How long a (re)started fixture waits for a dead holder's registrations to expire: ZooKeeper's
#: default maxSessionTimeout (20 ticks of 2 s).
STALE_REGISTRATION_WAIT_S = 40.0


def _is_kraft_controller(data: bytes) -> bool:
    try:
        return decode_controller(paths.CONTROLLER, data).kraft_controller_epoch >= 0
    except BadInputError:
        return False


class BrokerSessions:
    """One ZooKeeper session per broker, each holding its ephemeral registration.

    Use as a context manager; leaving it closes the sessions, which removes the registrations at once.
    """

    def __init__(
        self,
        connect_string: str,
        image: ClusterImage,
        control: ZkControlState | None = None,
        auth: Sequence[str] = (),
        session_timeout: float = DEFAULT_SESSION_TIMEOUT,
        security: ZkSecurity | None = None,
    ) -> None:
        self.connect_string = connect_string
        self.auth = tuple(auth)
        self.security = security  # TLS/SASL/ACL of the brokers' sessions
        self.session_timeout = session_timeout
        self.registrations = broker_znodes(image)
        self.controller: tuple[int, str, bytes] | None = None
        if control is not None and control.controller is not None and control.controller.ephemeral:
            broker_id = control.controller.broker_id
            if paths.broker_path(broker_id) not in self.registrations:
                raise BadInputError(f"controller broker {broker_id} is not among the cluster's brokers")
            self.controller = (broker_id, paths.CONTROLLER, encode_controller(control.controller))
        self.sessions: dict[int, KazooClient] = {}
        self.reregistered: dict[int, int] = {}
        self._lost: set[int] = set()
        self._lock = threading.Lock()
        self._closing = False

    def _znodes_of(self, broker_id: int) -> dict[str, bytes]:
        out = {paths.broker_path(broker_id): self.registrations[paths.broker_path(broker_id)]}
        if self.controller is not None and self.controller[0] == broker_id:
            out[self.controller[1]] = self.controller[2]
        return out

    def start(self) -> BrokerSessions:
        try:
            for path in self.registrations:
                broker_id = int(path.rsplit("/", 1)[1])
                # A Kafka broker reconnects for as long as it lives; kazoo's default gives up after a
                # few tries, and a fixture that outlived a ZooKeeper restart would never register again.
                client = connect(
                    self.connect_string,
                    auth=self.auth,
                    timeout=self.session_timeout,
                    security=self.security,
                    connection_tries=-1,
                )
                self.sessions[broker_id] = client
                for znode, data in self._znodes_of(broker_id).items():
                    self._create_when_free(client, broker_id, znode, data)
                client.add_listener(self._listener(broker_id))
        except BaseException:
            self.close()
            raise
        return self

    def _create_when_free(self, client: KazooClient, broker_id: int, path: str, data: bytes) -> None:
        """Create an ephemeral, waiting out one a dead session still holds (a fixture killed moments ago).

        ZooKeeper keeps a killed holder's ephemerals until its session expires; a restarted fixture
        waits for that instead of failing with "already exists". `/controller` held by a KRaft
        controller (or still held after the wait) is left to it: a ZK broker loses that election.
        """
        deadline = time.monotonic() + STALE_REGISTRATION_WAIT_S
        while True:
            try:
                client.create(path, data, ephemeral=True)
                return
            except NodeExistsError:
                pass
            except NoNodeError:
                parent = path.rsplit("/", 1)[0] or "/"
                raise BadInputError(f"{path}: its parent {parent} does not exist") from None
            try:
                held, stat = client.get(path)
            except NoNodeError:
                continue  # expired between the create and the read: try again
            if stat.ephemeralOwner == client.client_id[0]:
                return
            if path == paths.CONTROLLER and _is_kraft_controller(held):
                log.info("broker %d: /controller is held by a KRaft controller", broker_id)
                return
            if time.monotonic() > deadline:
                if path == paths.CONTROLLER:
                    log.info("broker %d: /controller is held by another session", broker_id)
                    return
                raise BadInputError(
                    f"{path} is held by another live ZooKeeper session (0x{stat.ephemeralOwner:x}) after "
                    f"{STALE_REGISTRATION_WAIT_S:g}s: is another process registering broker {broker_id}?"
                )
            gone = threading.Event()
            if client.exists(path, watch=lambda _event, gone=gone: gone.set()) is not None:
                gone.wait(min(1.0, max(0.0, deadline - time.monotonic())))

    def _listener(self, broker_id: int):  # noqa: ANN202 - kazoo's listener protocol
        def on_state(state: str) -> None:
            if self._closing:
                return
            if state == KazooState.LOST:
                with self._lock:
                    self._lost.add(broker_id)
            elif state == KazooState.CONNECTED:
                with self._lock:
                    lost = broker_id in self._lost
                    self._lost.discard(broker_id)
                if lost:
                    # Listeners run on kazoo's event thread and must not block: register from another.
                    threading.Thread(target=self._reregister, args=(broker_id,), daemon=True).start()

        return on_state

    def _reregister(self, broker_id: int) -> None:
        """A new session after expiry: register again, as KafkaZkClient does on re-connection."""
        client = self.sessions.get(broker_id)
        if client is None or self._closing:
            return
        for path, data in self._znodes_of(broker_id).items():
            try:
                client.create(path, data, ephemeral=True)
            except NodeExistsError:
                # /controller taken by someone else meanwhile (e.g. a KRaft controller): a ZK broker
                # would lose the election, so leave it.
                log.info("broker %d: %s is held by another session", broker_id, path)
            except KazooException as e:
                log.warning("broker %d: cannot re-register %s: %s", broker_id, path, e)
                return
        with self._lock:
            self.reregistered[broker_id] = self.reregistered.get(broker_id, 0) + 1

    def session_id(self, broker_id: int) -> int:
        return int(self.sessions[broker_id].client_id[0])

    def stop_broker(self, broker_id: int) -> None:
        """A clean broker shutdown: its session closes and ZooKeeper drops its ephemerals at once."""
        client = self.sessions.pop(broker_id)
        close(client)

    def expire_broker(self, broker_id: int) -> None:
        """Make ZooKeeper expire the broker's session, as a long GC pause would; it then re-registers."""
        client = self.sessions[broker_id]
        session_id, password = client.client_id
        hosts = self.connect_string.partition("/")[0]
        twin = KazooClient(hosts=hosts, client_id=(session_id, password), timeout=self.session_timeout)
        twin.start(timeout=self.session_timeout)
        twin.stop()  # closing the shared session from here is ZooKeeper's session expiry for `client`
        twin.close()

    def close(self) -> None:
        self._closing = True
        for broker_id in list(self.sessions):
            with contextlib.suppress(KazooException):
                close(self.sessions.pop(broker_id))

    def __enter__(self) -> BrokerSessions:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def hold_until_signal(sessions: BrokerSessions, on_ready: str | None = READY) -> None:
    """Keep the sessions until SIGTERM or SIGINT; print `on_ready` once they are registered."""
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        with sessions:
            if on_ready:
                print(on_ready, flush=True)
            while not stop.wait(0.5):
                pass
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def run_brokers_process(
    connect_string: str,
    spec: ClusterSpec,
    auth: Sequence[str] = (),
    session_timeout: float = DEFAULT_SESSION_TIMEOUT,
    ready_timeout: float = 60.0,
) -> subprocess.Popen[str]:
    """Start `python -m zk_fixtures.brokers` holding `spec`'s registrations; returns once it says ready.

    The caller owns the process: terminate it for a clean shutdown, SIGKILL it to simulate a crash.
    """
    env = dict(os.environ)
    if auth:
        env["ZK2KRAFT_ZK_AUTH"] = " ".join(auth)
    else:
        env.pop("ZK2KRAFT_ZK_AUTH", None)
    cmd = [
        sys.executable,
        "-m",
        "zk_fixtures.brokers",
        "--zookeeper",
        connect_string,
        "--spec",
        spec.model_dump_json(),
        "--session-timeout",
        str(session_timeout),
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            line = proc.stdout.readline()
            if line.strip() == READY:
                return proc
            if line == "":  # EOF: the process died
                break
        elif proc.poll() is not None:
            break
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    _, err = proc.communicate(timeout=10)
    last = (err or "").strip().splitlines()[-1:] or ["no output"]
    raise UnreachableError(f"broker simulator did not become ready: {last[0]}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zk_fixtures.brokers", description=__doc__.split("\n")[0])
    parser.add_argument("--zookeeper", required=True, help="HOST:PORT[/chroot]")
    parser.add_argument("--spec", default="{}", help="ClusterSpec as JSON (defaults for missing fields)")
    parser.add_argument("--session-timeout", type=float, default=DEFAULT_SESSION_TIMEOUT)
    args = parser.parse_args(argv)
    auth = os.environ.get("ZK2KRAFT_ZK_AUTH", "").split()
    try:
        try:
            spec = ClusterSpec.model_validate_json(args.spec)
        except ValueError as e:
            raise BadInputError(f"bad --spec: {e}") from None
        generated = generate(spec)
        sessions = BrokerSessions(
            args.zookeeper,
            generated.image,
            generated.control,
            auth=auth,
            session_timeout=args.session_timeout,
        )
        hold_until_signal(sessions)
    except ZkKraftError as e:
        print(f"zk_fixtures.brokers: error: {e}", file=sys.stderr, flush=True)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
