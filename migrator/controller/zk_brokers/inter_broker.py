"""How the controller reaches ZooKeeper-mode brokers: the inter-broker listener, read as Kafka 3.9 reads it.

A KRaft controller in migration mode sends LeaderAndIsr, UpdateMetadata and StopReplica over the
brokers' inter-broker listener, configured in its own properties exactly as a broker's is
(``KafkaConfig.interBrokerListenerName`` / ``interBrokerSecurityProtocol``):

- ``inter.broker.listener.name`` names the listener; its protocol is the controller's
  ``listener.security.protocol.map`` entry (Kafka's default map: PLAINTEXT, SSL, SASL_PLAINTEXT,
  SASL_SSL to themselves). Else ``security.inter.broker.protocol`` (default PLAINTEXT) is the
  protocol and the listener is named after it. Setting both is refused, as Kafka refuses it.
- TLS: ``ssl.truststore.location``, ``ssl.keystore.location`` (client certificate, PEM),
  ``ssl.key.password``, ``ssl.endpoint.identification.algorithm`` (``https`` by default: the broker's
  certificate must name the host it registered), each read as ``listener.name.<name>.<key>`` first.
- SASL: ``sasl.mechanism.inter.broker.protocol`` (Kafka's default GSSAPI is not spoken: PLAIN,
  SCRAM-SHA-256, SCRAM-SHA-512), and the login module's ``username``/``password`` from
  ``listener.name.<name>.<mechanism>.sasl.jaas.config`` or the JAAS file's ``<name>.KafkaServer`` /
  ``KafkaServer`` section (a server's JAAS context, as Kafka's ControllerChannelManager uses).

Each broker's endpoint is the one of that listener name in its registration (``broker.node(listener)``);
a broker without one, or registering it with another protocol, gets no channel and is reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from migrator.controller.network.listener_config import (
    JAAS_FILE_KEY,
    SUPPORTED_MECHANISMS,
    protocol_map,
    setting,
)
from migrator.controller.security.client_security import ClientSecurity
from migrator.controller.security.jaas import server_login_modules
from migrator.controller.security.listener_security import PROTOCOLS
from migrator.errors import BadInputError
from migrator.model import Broker

__all__ = ["InterBroker", "inter_broker_config", "inter_broker_endpoint"]

LISTENER_NAME = "inter.broker.listener.name"
SECURITY_PROTOCOL = "security.inter.broker.protocol"
SASL_MECHANISM = "sasl.mechanism.inter.broker.protocol"
SOCKET_TIMEOUT = "controller.socket.timeout.ms"  # Kafka's ControllerChannelManager request timeout

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@dataclass(frozen=True)
class InterBroker:
    """The listener name whose endpoints the controller connects to, and how (TLS, SASL)."""

    listener_name: str = "PLAINTEXT"
    security: ClientSecurity = field(default_factory=ClientSecurity)
    #: how long a broker may take to answer (or to accept a connection) before the channel drops
    #: the connection and retries: a broker that never answers holds up only its own channel
    request_timeout_s: float = 30.0

    @property
    def protocol(self) -> str:
        return self.security.security_protocol


def _name_and_protocol(props: Mapping[str, str]) -> tuple[str, str]:
    """Kafka's getInterBrokerListenerNameAndSecurityProtocol."""
    name = props.get(LISTENER_NAME, "").strip()
    if name:
        if props.get(SECURITY_PROTOCOL, "").strip():
            raise BadInputError(f"Only one of {LISTENER_NAME} and {SECURITY_PROTOCOL} should be set.")
        name = name.upper()  # ListenerName.normalised
        protocol = protocol_map(props).get(name)
        if protocol is None:
            raise BadInputError(
                f"Listener with name {name} defined in {LISTENER_NAME} not found in "
                "listener.security.protocol.map."
            )
        return name, protocol
    protocol = (props.get(SECURITY_PROTOCOL, "").strip() or "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise BadInputError(f"{SECURITY_PROTOCOL}={protocol}: one of {', '.join(PROTOCOLS)}")
    return protocol, protocol  # ListenerName.forSecurityProtocol


def _store(props: Mapping[str, str], name: str, kind: str) -> str | None:
    location = setting(props, name, f"ssl.{kind}.location") or None
    store_type = (setting(props, name, f"ssl.{kind}.type") or "PEM").strip().upper()
    if location and store_type != "PEM":
        raise BadInputError(
            f"inter-broker listener {name}: ssl.{kind}.type={store_type}: zk2kraft reads PEM stores only"
        )
    return location


def _credentials(props: Mapping[str, str], name: str, mechanism: str) -> tuple[str, str]:
    modules = server_login_modules(props, name, mechanism, props.get(JAAS_FILE_KEY))
    module = next((m for m in modules if m.module == _LOGIN_MODULES[mechanism]), None)
    if module is None:
        raise BadInputError(
            f"inter-broker listener {name}: the JAAS configuration has no {_LOGIN_MODULES[mechanism]} entry"
        )
    user, password = module.options.get("username"), module.options.get("password")
    if user is None or password is None:
        raise BadInputError(
            f"inter-broker listener {name}: {mechanism}'s login module needs username and password options"
        )
    return user, password


def inter_broker_config(props: Mapping[str, str]) -> InterBroker:
    """The controller's inter-broker listener and its client security, from its properties."""
    name, protocol = _name_and_protocol(props)
    tls = protocol in ("SSL", "SASL_SSL")
    mechanism = user = password = None
    if protocol.startswith("SASL_"):
        mechanism = (props.get(SASL_MECHANISM, "").strip() or "GSSAPI").upper()
        if mechanism not in SUPPORTED_MECHANISMS:
            raise BadInputError(
                f"{SASL_MECHANISM}={mechanism}: zk2kraft speaks {', '.join(SUPPORTED_MECHANISMS)}"
            )
        user, password = _credentials(props, name, mechanism)
    algorithm = (setting(props, name, "ssl.endpoint.identification.algorithm", "https") or "").strip()
    security = ClientSecurity(
        protocol,
        ssl_cafile=_store(props, name, "truststore") if tls else None,
        ssl_certfile=_store(props, name, "keystore") if tls else None,
        ssl_key_password=(setting(props, name, "ssl.key.password") or None) if tls else None,
        ssl_check_hostname=tls and algorithm.lower() == "https",
        sasl_mechanism=mechanism,
        username=user,
        password=password,
    )
    return InterBroker(name, security, _timeout_s(props))


def _timeout_s(props: Mapping[str, str]) -> float:
    raw = props.get(SOCKET_TIMEOUT, "30000").strip()
    try:
        ms = int(raw)
    except ValueError:
        ms = -1
    if ms <= 0:
        raise BadInputError(f"{SOCKET_TIMEOUT}={raw!r}: expected a positive number of milliseconds")
    return ms / 1000


def inter_broker_endpoint(broker: Broker, inter: InterBroker) -> tuple[str, int] | str:
    """`broker`'s endpoint of the inter-broker listener (Kafka's ``broker.node(listenerName)``), or why
    there is none: no endpoint of that name, or one registered with another security protocol."""
    for e in broker.endpoints:
        if e.listener.upper() == inter.listener_name:
            if e.security_protocol != inter.protocol:
                return (
                    f"its {e.listener} listener is {e.security_protocol}, the controller's "
                    f"inter-broker protocol is {inter.protocol}"
                )
            return e.host, e.port
    return f"no {inter.listener_name} endpoint among {[e.listener for e in broker.endpoints]}"
