"""What `fixtures` and `demo` do to ZooKeeper and the controller listener, behind the API.

Generated clusters come from `zk_fixtures`; loading them, reading ZooKeeper back, the controller
listener's security and a test login to it need `migrator` internals the CLI does not import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from migrator.controller.client.client import ControllerClient
from migrator.controller.network.listener_config import set_default_properties
from migrator.controller.protocol import kafka_errors
from migrator.controller.protocol import messages as M
from migrator.controller.security.client_security import ClientSecurity, from_client_properties
from migrator.properties import read_properties
from migrator.target import Target
from migrator.zk.connection import close, ensure_chroot
from migrator.zk.layout import LayoutResult
from migrator.zk.reader import read_cluster
from zk_fixtures.generator import ClusterSpec, GeneratedCluster, load_cluster

__all__ = [
    "ClientSecurity",
    "client_security_from_file",
    "controller_heartbeat",
    "controller_login",
    "fixtures_load",
    "kafka_error_name",
    "read_zookeeper",
    "serve_listeners_with",
    "znode_exists",
]


def fixtures_load(
    target: Target,
    spec: ClusterSpec,
    *,
    exist_ok: bool = False,
    progress: Callable[[int], None] | None = None,
    on_total: Callable[[int], None] | None = None,
) -> GeneratedCluster:
    """Write a generated cluster's persistent znodes; the connect string's chroot is created first."""
    ensure_chroot(target.zookeeper, auth=target.zk_auth, timeout=target.zk_timeout, security=target.security)
    client = target.connect()
    try:
        return load_cluster(client, spec, exist_ok=exist_ok, progress=progress, on_total=on_total)
    finally:
        close(client)


def read_zookeeper(target: Target, strict: bool = True) -> LayoutResult:
    """Kafka's metadata as ZooKeeper holds it now (one bulk read)."""
    client = target.connect()
    try:
        return read_cluster(client, strict=strict)
    finally:
        close(client)


def znode_exists(target: Target, path: str) -> bool:
    client = target.connect()
    try:
        return client.exists(path) is not None
    finally:
        close(client)


def client_security_from_file(path: str) -> ClientSecurity:
    """Kafka client properties (`--command-config`) as the security of a controller-listener client."""
    return from_client_properties(read_properties(path))


def serve_listeners_with(props: Mapping[str, str]) -> None:
    """The TLS/SASL/ACL settings of the listeners this process serves (as a controller.properties)."""
    set_default_properties(dict(props))


def controller_heartbeat(address: tuple[str, int], security: ClientSecurity, broker_id: int) -> int:
    """Log in to a controller listener and send one BrokerHeartbeat; its error code (refused logins
    raise the ZkKraftError the client raises)."""
    host, port = address
    with ControllerClient(host, port, security=security) as client:
        return int(client.heartbeat(M.BrokerHeartbeatRequest(broker_id, 1, 0)).error_code)


def controller_login(address: tuple[str, int], security: ClientSecurity) -> None:
    """Connect and authenticate only; raises the client's ZkKraftError when refused."""
    host, port = address
    ControllerClient(host, port, security=security).close()


def kafka_error_name(code: int) -> str:
    return kafka_errors.name_of(code)
