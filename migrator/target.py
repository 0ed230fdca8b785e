"""The cluster a command acts on, and how to reach it: built once, handed to every `commands.*` call.

ZooKeeper's connect string, credentials, TLS/SASL and the ACL flag, the timeouts, the metadata log
directory, this controller's node id, listeners and metrics address used to travel separately: four
signatures deep, through a process-wide `configure()` and through click's `ctx.meta`. A `Target` holds
them all, so every ZooKeeper session a command opens (`connect`) gets the same security and every log it
opens is the same directory (`open_log`).

It is built from the command's options (environment variables and `--config` already resolved by the
CLI into those options) with `Target.from_options`; `option_defaults` turns a Kafka properties file into
those option defaults.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient

from migrator.errors import BadInputError
from migrator.kraft.log import MetadataLog
from migrator.zk.connection import TlsOptions, ZkSecurity, connect, sasl_from_jaas

#: this controller's node id when neither --node-id nor node.id says otherwise
DEFAULT_NODE_ID = 3000


@dataclass(frozen=True)
class Target:
    """Where and how: the same for every command of one invocation."""

    zookeeper: str = ""
    log_dir: str = ""
    zk_auth: tuple[str, ...] = ()
    zk_timeout: float = 10.0
    security: ZkSecurity = field(default_factory=ZkSecurity)
    node_id: int = DEFAULT_NODE_ID
    listen: str | None = None  # the controller protocol listener (HOST:PORT or Kafka `listeners`)
    metrics_listen: str | None = None  # Prometheus endpoint HOST:PORT

    @classmethod
    def from_options(
        cls,
        *,
        zookeeper: str | None = None,
        log_dir: str | None = None,
        zk_auth: tuple[str, ...] | list[str] = (),
        zk_timeout: float = 10.0,
        node_id: int | None = None,
        listen: str | None = None,
        metrics_listen: str | None = None,
        zk_tls: bool = False,
        zk_tls_ca: str | None = None,
        zk_tls_cert: str | None = None,
        zk_tls_key: str | None = None,
        zk_tls_key_password: str | None = None,
        zk_tls_verify_hostname: bool = False,
        zk_jaas_config: str | None = None,
        zk_set_acl: bool = False,
    ) -> Target:
        """From the command's options: --zk-tls-*, --zk-jaas-config and --zk-set-acl become the
        security every session of this target uses (Kafka's zookeeper.ssl.*, JAAS Client section and
        zookeeper.set.acl)."""
        tls = None
        if zk_tls or zk_tls_ca or zk_tls_cert or zk_tls_key:
            tls = TlsOptions(
                ca=zk_tls_ca,
                certfile=zk_tls_cert,
                keyfile=zk_tls_key or zk_tls_cert,  # a PEM keystore holds both
                keyfile_password=zk_tls_key_password,
                check_hostname=bool(zk_tls_verify_hostname),
            )
            tls.validate()
        sasl = sasl_from_jaas(zk_jaas_config) if zk_jaas_config else None
        return cls(
            zookeeper=zookeeper or "",
            log_dir=log_dir or "",
            zk_auth=tuple(zk_auth or ()),
            zk_timeout=zk_timeout,
            security=ZkSecurity(tls=tls, sasl=sasl, set_acl=bool(zk_set_acl)),
            node_id=DEFAULT_NODE_ID if node_id is None else node_id,
            listen=listen,
            metrics_listen=metrics_listen,
        )

    def replace(self, **changes: Any) -> Target:
        return dataclasses.replace(self, **changes)

    def connect(self, *, connection_tries: int = 3, require_chroot: bool = True) -> KazooClient:
        """A started kazoo session with this target's credentials, TLS, SASL and ACL flag."""
        return connect(
            self.zookeeper,
            auth=self.zk_auth,
            timeout=self.zk_timeout,
            security=self.security,
            connection_tries=connection_tries,
            require_chroot=require_chroot,
        )

    def open_log(
        self, writable: bool = False, *, cluster_id: str | None = None, node_id: int | None = None
    ) -> MetadataLog:
        """The metadata log in `log_dir` (read-only unless `writable`; writable takes the writer lock,
        and a new directory is formatted for `cluster_id` and `node_id`)."""
        if not self.log_dir:
            raise BadInputError("no metadata log directory given (--log-dir)")
        return MetadataLog.open(self.log_dir, writable=writable, cluster_id=cluster_id, node_id=node_id)


# --- a Kafka properties file as option defaults ------------------------------------------------------

#: Kafka property names that map onto zk2kraft options, so a controller.properties drops in.
PROPERTY_OPTIONS = {
    "zookeeper.connect": "zookeeper",
    "metadata.log.dir": "log_dir",
    "log.dirs": "log_dir",
    "zookeeper.connection.timeout.ms": "zk_timeout",
    "node.id": "node_id",
    # ZooKeeper security, as Kafka's broker/controller config names it (PEM stores only).
    "zookeeper.ssl.client.enable": "zk_tls",
    "zookeeper.ssl.truststore.location": "zk_tls_ca",
    "zookeeper.ssl.keystore.location": "zk_tls_cert",
    "zookeeper.ssl.keystore.password": "zk_tls_key_password",
    "zookeeper.ssl.endpoint.identification.algorithm": "zk_tls_verify_hostname",
    "zookeeper.set.acl": "zk_set_acl",
}


def _zk_security_property(prop: str, value: str, props: Mapping[str, str]) -> Any:
    if prop in ("zookeeper.ssl.client.enable", "zookeeper.set.acl"):
        return value.strip().lower() == "true"
    if prop == "zookeeper.ssl.endpoint.identification.algorithm":
        return value.strip().upper() == "HTTPS"
    if prop.endswith(".location"):
        kind = prop.split(".")[2]  # keystore | truststore
        store_type = props.get(f"zookeeper.ssl.{kind}.type", "").upper() or (
            "PEM" if value.lower().endswith((".pem", ".crt", ".key")) else "JKS or PKCS12"
        )
        if store_type != "PEM":
            raise BadInputError(
                f"--config: zookeeper.ssl.{kind}.location {value} is a {store_type} store; zk2kraft (Python's "
                f"ssl) reads PEM: convert it and set zookeeper.ssl.{kind}.type=PEM"
            )
    return value


def option_defaults(props: Mapping[str, str]) -> dict[str, Any]:
    """Option defaults from the keys in PROPERTY_OPTIONS; every other key is Kafka's alone and ignored."""
    values: dict[str, Any] = {}
    for prop, option in PROPERTY_OPTIONS.items():
        if prop in props and option not in values:
            value: Any = props[prop]
            if prop == "log.dirs":
                value = value.split(",")[0]
            try:
                if prop == "zookeeper.connection.timeout.ms":
                    value = float(value) / 1000.0
                if prop == "node.id":
                    value = int(value)
            except ValueError:
                raise BadInputError(f"--config: {prop}={value!r} is not a number") from None
            if prop.startswith(("zookeeper.ssl.", "zookeeper.set.acl")):
                value = _zk_security_property(prop, value, props)
            values[option] = value
    return values
