"""The controller's listeners from a Kafka properties file, configured the way Kafka configures them.

``listeners=CONTROLLER://0.0.0.0:9093,SECURE://:9094`` names them, ``listener.security.protocol.map``
gives each its protocol (Kafka's default maps PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL to
themselves), and every setting is read first as ``listener.name.<name>.<key>`` then as ``<key>``:

- TLS: ``ssl.keystore.location`` (PEM: private key and certificate chain in one file; ``ssl.key.password``
  if the key is encrypted), ``ssl.truststore.location`` (PEM CA certificates), ``ssl.client.auth``
  (``none`` | ``requested`` | ``required``), ``ssl.principal.mapping.rules``. Python's ssl module reads
  PEM only: JKS and PKCS12 stores are refused with a line saying how to convert them.
- SASL: ``sasl.enabled.mechanisms`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); PLAIN's users from
  ``listener.name.<name>.plain.sasl.jaas.config`` or the JAAS file named by
  ``java.security.auth.login.config`` (a KafkaServer section); SCRAM credentials from the metadata image
  (migrated from ZooKeeper's ``/config/users``); ``connections.max.reauth.ms`` (KIP-368).
- Authorization: on when ``authorizer.class.name`` is set (as in Kafka), with ``super.users`` and
  ``allow.everyone.if.no.acl.found``, against the ACLs in the metadata image.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from migrator.controller.security.jaas import server_login_modules
from migrator.controller.security.listener_security import PROTOCOLS, ImageAuthorizer, ListenerSecurity
from migrator.controller.security.plain_server import PlainServer, plain_users
from migrator.controller.security.principal import SslPrincipalMapper
from migrator.controller.security.sasl_session import ServerFactory
from migrator.controller.security.scram_server import HASHES, ScramServer
from migrator.errors import BadInputError

__all__ = [
    "ListenerSpec",
    "default_properties",
    "is_listeners_value",
    "listener_specs",
    "protocol_map",
    "set_default_properties",
    "setting",
]

_DEFAULT_MAP = {p: p for p in PROTOCOLS}
SUPPORTED_MECHANISMS = ("PLAIN", *HASHES)
JAAS_FILE_KEY = "java.security.auth.login.config"


@dataclass(frozen=True)
class ListenerSpec:
    name: str
    host: str
    port: int
    security: ListenerSecurity


def is_listeners_value(listen: str) -> bool:
    """A Kafka ``listeners`` value (``NAME://host:port,...``) rather than a bare ``HOST:PORT``."""
    return "://" in listen


def protocol_map(props: Mapping[str, str]) -> dict[str, str]:
    """``listener.security.protocol.map`` (listener name → protocol), Kafka's default when unset."""
    value = props.get("listener.security.protocol.map", "").strip()
    if not value:
        return dict(_DEFAULT_MAP)
    out: dict[str, str] = {}
    for item in value.split(","):
        name, sep, proto = item.strip().partition(":")
        if not sep or proto.strip().upper() not in PROTOCOLS:
            raise BadInputError(
                f"listener.security.protocol.map: {item.strip()!r} is not NAME:PROTOCOL with a protocol of "
                + ", ".join(PROTOCOLS)
            )
        out[name.strip().upper()] = proto.strip().upper()
    return out


def _parse_listeners(value: str) -> list[tuple[str, str, int]]:
    out = []
    for item in value.split(","):
        item = item.strip()
        name, sep, rest = item.partition("://")
        host, colon, port = rest.rpartition(":")
        if not sep or not colon or not port.isdigit() or int(port) > 65535 or not name:
            raise BadInputError(
                f"listeners: {item!r} is not NAME://HOST:PORT (e.g. CONTROLLER://0.0.0.0:9093)"
            )
        out.append((name.upper(), host.strip("[]") or "0.0.0.0", int(port)))
    names = [n for n, _, _ in out]
    if len(set(names)) != len(names):
        raise BadInputError(f"listeners: a listener name appears twice in {value!r}")
    return out


def setting(props: Mapping[str, str], listener: str, key: str, default: str | None = None) -> str | None:
    """``listener.name.<listener>.<key>``, else ``<key>`` (Kafka's valuesWithPrefixOverride)."""
    return props.get(f"listener.name.{listener.lower()}.{key}", props.get(key, default))


def _pem_only(props: Mapping[str, str], listener: str, kind: str, location: str) -> None:
    store_type = (setting(props, listener, f"ssl.{kind}.type") or "").upper()
    if (
        store_type
        and store_type != "PEM"
        or not store_type
        and location.lower().endswith((".jks", ".p12", ".pfx"))
    ):
        raise BadInputError(
            f"listener {listener}: ssl.{kind}.location {location} is a {store_type or 'JKS or PKCS12'} store; "
            f"zk2kraft (Python's ssl) reads PEM: convert it (keytool/openssl) and set ssl.{kind}.type=PEM"
        )


def ssl_context(props: Mapping[str, str], listener: str) -> ssl.SSLContext:
    keystore = setting(props, listener, "ssl.keystore.location")
    if not keystore:
        raise BadInputError(f"listener {listener}: TLS needs ssl.keystore.location (PEM key and certificate)")
    _pem_only(props, listener, "keystore", keystore)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(keystore, password=setting(props, listener, "ssl.key.password") or None)
    except (OSError, ssl.SSLError) as e:
        # the message never carries the password, only what the file is and why it did not load
        raise BadInputError(
            f"listener {listener}: cannot load ssl.keystore.location {keystore}: {_why(e)}"
        ) from None
    truststore = setting(props, listener, "ssl.truststore.location")
    if truststore:
        _pem_only(props, listener, "truststore", truststore)
        try:
            ctx.load_verify_locations(cafile=truststore)
        except (OSError, ssl.SSLError) as e:
            raise BadInputError(
                f"listener {listener}: cannot load ssl.truststore.location {truststore}: {_why(e)}"
            ) from None
    client_auth = (setting(props, listener, "ssl.client.auth", "none") or "none").strip().lower()
    modes = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
    if client_auth not in modes:
        raise BadInputError(
            f"listener {listener}: ssl.client.auth={client_auth!r}: none, requested or required"
        )
    if client_auth != "none" and not truststore:
        raise BadInputError(
            f"listener {listener}: ssl.client.auth={client_auth} needs ssl.truststore.location"
        )
    ctx.verify_mode = modes[client_auth]
    return ctx


def _why(e: Exception) -> str:
    return str(getattr(e, "strerror", None) or getattr(e, "reason", None) or type(e).__name__)


def _mechanisms(
    props: Mapping[str, str], listener: str, image_of: Callable[[], Any]
) -> dict[str, ServerFactory]:
    value = setting(props, listener, "sasl.enabled.mechanisms")
    if not value:
        raise BadInputError(
            f"listener {listener}: set sasl.enabled.mechanisms (zk2kraft serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"
        )
    out: dict[str, ServerFactory] = {}
    for raw in value.split(","):
        mech = raw.strip().upper()
        if mech not in SUPPORTED_MECHANISMS:
            raise BadInputError(
                f"listener {listener}: SASL mechanism {mech} is not served (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"
            )
        if mech == "PLAIN":
            users = plain_users(server_login_modules(props, listener, mech, props.get(JAAS_FILE_KEY)))
            out[mech] = lambda reauth, users=users: PlainServer(users, reauth=reauth)
        else:

            def scram(reauth: bool, mech: str = mech) -> ScramServer:
                return ScramServer(mech, lambda u, m: image_of().scram_credentials.get((u, m)), reauth=reauth)

            out[mech] = scram
    return out


def _int(props: Mapping[str, str], listener: str, key: str, default: int) -> int:
    value = setting(props, listener, key, str(default)) or str(default)
    try:
        return int(value)
    except ValueError:
        raise BadInputError(f"listener {listener}: {key}={value!r} is not a number") from None


def connection_limits(props: Mapping[str, str], listener: str = "") -> dict[str, Any]:
    """Kafka's connection settings for one listener (`listener.name.<l>.` first): the server's kwargs.
    `socket.request.max.bytes` is server-wide in Kafka (no listener prefix), so it is read so here."""
    from migrator.controller.network.server import DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_IP
    from migrator.controller.protocol.wire_versions import MAX_FRAME_BYTES

    limits = {
        "max_request_bytes": _int(props, "", "socket.request.max.bytes", MAX_FRAME_BYTES),
        "max_connections": _int(props, listener, "max.connections", DEFAULT_MAX_CONNECTIONS),
        "max_connections_per_ip": _int(
            props, listener, "max.connections.per.ip", DEFAULT_MAX_CONNECTIONS_PER_IP
        ),
        "idle_timeout_s": _int(props, listener, "connections.max.idle.ms", 600_000) / 1000,
    }
    for key, value in limits.items():
        if value <= 0:
            raise BadInputError(f"listener {listener or '-'}: {key} must be positive, got {value}")
    return limits


def listener_specs(
    props: Mapping[str, str], handler: Any, listeners: str | None = None
) -> list[ListenerSpec]:
    """Every listener of ``listeners`` (or the properties' own) with its security, checked at start."""
    value = listeners or props.get("listeners", "")
    if not value.strip():
        raise BadInputError("listeners is not set: e.g. listeners=CONTROLLER://0.0.0.0:9093")
    protocol_of = protocol_map(props)

    def image_of() -> Any:
        return handler.image

    authorizer = None
    if props.get("authorizer.class.name", "").strip():
        authorizer = ImageAuthorizer(image_of, props)
    specs = []
    advertised = advertised_listeners(props)
    for name, host, port in _parse_listeners(value):
        protocol = protocol_of.get(name)
        if protocol is None:
            raise BadInputError(f"listener {name} has no protocol in listener.security.protocol.map")
        security = ListenerSecurity(
            name=name,
            protocol=protocol,
            ssl_context=ssl_context(props, name) if protocol in ("SSL", "SASL_SSL") else None,
            mechanisms=_mechanisms(props, name, image_of) if protocol.startswith("SASL_") else {},
            max_reauth_ms=_int(props, name, "connections.max.reauth.ms", 0),
            principal_mapper=SslPrincipalMapper(setting(props, name, "ssl.principal.mapping.rules")),
            authorizer=authorizer,
        )
        security.advertised = advertised.get(name)
        specs.append(ListenerSpec(name, host, port, security))
    return specs


def advertised_listeners(props: Mapping[str, str]) -> dict[str, tuple[str, int]]:
    """`advertised.listeners` by listener name: the (host, port) a client is told to use (Kafka 3.9
    controllers take it for their listeners, KIP-853). A name without an entry, or with an empty host,
    is named by the address the client reached."""
    value = props.get("advertised.listeners", "").strip()
    if not value:
        return {}
    out: dict[str, tuple[str, int]] = {}
    for item in value.split(","):
        name, _sep, rest = item.strip().partition("://")
        host = rest.rpartition(":")[0].strip("[]")
        if host in ("0.0.0.0", "::"):
            raise BadInputError(
                f"advertised.listeners: {item.strip()!r} advertises the non-routable meta-address {host}; "
                "name the host clients and brokers reach this controller by"
            )
    for name, host, port in _parse_listeners(value):
        if host != "0.0.0.0" and port:  # _parse_listeners fills an empty host with 0.0.0.0
            out[name] = (host, port)
    return out


_DEFAULT_PROPS: dict[str, str] = {}


def set_default_properties(props: Mapping[str, str]) -> None:
    """The properties of ``--config``, for listeners started later in this process."""
    _DEFAULT_PROPS.clear()
    _DEFAULT_PROPS.update(props)


def default_properties() -> dict[str, str]:
    return dict(_DEFAULT_PROPS)


class RunningListeners:
    """Every listener of a ``listeners`` value, serving; ``address`` is the first one's."""

    def __init__(self, servers: list[Any]) -> None:
        self.servers = servers
        self.address: tuple[str, int] = servers[0].address
        # what the first listener is named by: `advertised.listeners`' entry, else its address
        self.advertised: tuple[str, int] = servers[0].security.advertised or self.address
        self.addresses: dict[str, tuple[str, int]] = {s.security.name: s.address for s in servers}

    def stop(self) -> None:
        for server in self.servers:
            server.close()


def start_listeners(handler: Any, listeners: str, props: Mapping[str, str] | None = None) -> RunningListeners:
    """Bind and serve every listener; all or none (one that cannot bind closes those already up)."""
    from migrator.controller.network.server import ControllerServer

    props_used = default_properties() if props is None else props
    specs = listener_specs(props_used, handler, listeners)
    servers: list[Any] = []
    try:
        for spec in specs:
            try:
                servers.append(
                    ControllerServer(
                        handler,
                        spec.host,
                        spec.port,
                        security=spec.security,
                        **connection_limits(props_used, spec.name),
                    ).start()
                )
            except OSError as e:
                raise BadInputError(
                    f"cannot listen on {spec.name}://{spec.host}:{spec.port}: {e.strerror or e}"
                ) from None
    except BaseException:
        for s in servers:
            s.close()
        raise
    return RunningListeners(servers)
