"""Where `zk2kraft admin` finds the controller's listener, and how it logs in to it.

The address: `--bootstrap-controller HOST:PORT`; else the controller's own properties (`--config`):
`advertised.listeners`, then `listeners`, the first of `controller.listener.names` if set, else the
first listener; else what the running follower announced in its log directory. The security:
a Kafka client properties file (`--command-config`, as `kafka-*.sh` take it); else the listener's
settings in the controller's properties as Kafka's own controller client reads them
(`listener.security.protocol.map`, `ssl.truststore.location`, `ssl.keystore.location`,
`sasl.mechanism.controller.protocol` or the first of `sasl.enabled.mechanisms`, and the username and
password of `listener.name.<l>.<mechanism>.sasl.jaas.config`); else PLAINTEXT.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from migrator.controller.security.client_security import ClientSecurity, from_client_properties
from migrator.errors import BadInputError

__all__ = ["Endpoint", "connect_host", "parse_bootstrap", "resolve_endpoint"]

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

#: (listener name, security protocol, host, port), as the follower announces its listeners
Announced = tuple[str, str, str, int]


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    security: ClientSecurity
    origin: str  # where the address came from, for messages

    def describe(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def connect_host(host: str) -> str:
    """A wildcard bind address is reached on loopback, as Kafka's clients cannot dial 0.0.0.0."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host


def parse_bootstrap(value: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:9093`); only the first of a comma-separated list is used."""
    first = value.split(",")[0].strip()
    host, sep, port = first.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise BadInputError(f"--bootstrap-controller {value!r}: expected HOST:PORT, e.g. 127.0.0.1:9093")
    return host.strip("[]"), int(port)


def _listeners(value: str, what: str) -> list[tuple[str, str, int]]:
    out = []
    for item in value.split(","):
        name, sep, rest = item.strip().partition("://")
        host, colon, port = rest.rpartition(":")
        if not sep or not colon or not port.isdigit() or not name:
            raise BadInputError(f"--config: {what}: {item.strip()!r} is not NAME://HOST:PORT")
        out.append((name.strip().upper(), host.strip("[]"), int(port)))
    return out


def _protocol_of(props: Mapping[str, str], listener: str) -> str:
    value = props.get("listener.security.protocol.map", "").strip()
    if not value:
        if listener in _PROTOCOLS:
            return listener
        raise BadInputError(
            f"--config: listener {listener} has no protocol in listener.security.protocol.map"
        )
    for item in value.split(","):
        name, _, proto = item.strip().partition(":")
        if name.strip().upper() == listener:
            return proto.strip().upper()
    raise BadInputError(f"--config: listener {listener} has no protocol in listener.security.protocol.map")


def _setting(props: Mapping[str, str], listener: str, key: str) -> str | None:
    return props.get(f"listener.name.{listener.lower()}.{key}", props.get(key))


def _from_properties(props: Mapping[str, str]) -> tuple[str, str, int] | None:
    """(listener, host, port) of the controller's listener in its properties, or None without one."""
    served = props.get("listeners", "").strip()
    if not served:
        return None
    listeners = _listeners(served, "listeners")
    advertised = (
        {
            n: (h, p)
            for n, h, p in _listeners(props.get("advertised.listeners", "").strip(), "advertised.listeners")
        }
        if props.get("advertised.listeners", "").strip()
        else {}
    )
    names = [n.strip().upper() for n in props.get("controller.listener.names", "").split(",") if n.strip()]
    chosen = next((x for x in listeners if x[0] in names), listeners[0])
    name = chosen[0]
    host, port = advertised.get(name, (chosen[1], chosen[2]))
    return name, connect_host(host), port


def listener_security(props: Mapping[str, str], listener: str, protocol: str) -> ClientSecurity:
    """How Kafka's own controller client logs in to `listener`, from the controller's properties."""
    client: dict[str, str] = {"security.protocol": protocol}
    for key in (
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
    ):
        value = _setting(props, listener, key)
        if value is not None:
            client[key] = value
    if protocol.startswith("SASL_"):
        enabled = [
            m.strip().upper()
            for m in (_setting(props, listener, "sasl.enabled.mechanisms") or "GSSAPI").split(",")
            if m.strip()
        ]
        mechanism = (props.get("sasl.mechanism.controller.protocol") or enabled[0]).strip().upper()
        jaas_key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        jaas = props.get(jaas_key) or props.get("sasl.jaas.config")
        if not jaas or "username" not in jaas or "password" not in jaas:
            raise BadInputError(
                f"--config: listener {listener} is {protocol}: zk2kraft admin logs in with the username "
                f"and password of {jaas_key} (as Kafka's controller client does), which has none; "
                "or give --command-config FILE with Kafka client properties"
            )
        client["sasl.mechanism"] = mechanism
        client["sasl.jaas.config"] = jaas
    return from_client_properties(client, "--config")


def resolve_endpoint(
    bootstrap: str | None,
    command_security: ClientSecurity | None,
    props: Mapping[str, str],
    announced: Sequence[Announced] = (),
) -> Endpoint | None:
    """The controller's listener and the security to reach it with; None when nothing names one."""
    listener: str | None = None
    protocol: str | None = None
    if bootstrap:
        host, port = parse_bootstrap(bootstrap)
        origin = "--bootstrap-controller"
        by_port = [(n, p) for n, p, _, ap in announced if ap == port]
        if by_port:
            listener, protocol = by_port[0]
        elif props.get("listeners", "").strip():
            same = [n for n, _, p in _listeners(props["listeners"], "listeners") if p == port]
            listener = same[0] if same else None
    else:
        found = _from_properties(props)
        if found is not None:
            listener, host, port = found
            origin = "the listeners of --config"
        elif announced:
            listener, protocol, host, port = announced[0]
            host = connect_host(host)
            origin = "the running controller's announcement in its log directory"
        else:
            return None
    if command_security is not None:
        return Endpoint(host, port, command_security, origin)
    if listener is not None and props.get("listeners", "").strip():
        protocol = _protocol_of(props, listener)
        return Endpoint(host, port, listener_security(props, listener, protocol), origin)
    if protocol not in (None, "PLAINTEXT"):
        raise BadInputError(
            f"the controller's listener {listener} at {host}:{port} is {protocol}: give --config with the "
            "controller's properties or --command-config FILE with Kafka client properties"
        )
    return Endpoint(host, port, ClientSecurity(), origin)
