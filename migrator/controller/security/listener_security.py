"""What one listener does before a request reaches the controller: TLS, SASL, and authorization.

A ``ListenerSecurity`` is built once per listener (see ``listener_config``); the server asks it for a
``ConnectionSecurity`` per accepted socket. That object wraps the socket in TLS when the protocol says
so (the principal of an SSL listener is the client certificate's mapped DN), runs the SASL exchange
of a SASL listener through ``SaslSession``, and is the one place where every other request is
authorized: the API's entry in ``api_acls.REQUIRED`` is checked before any handler runs, so an API a
later engineer adds to the dispatch is guarded without a line of its own. Per-resource checks (topics,
configs, Metadata's filtering) need the request's content: ``authorizer_requests.guard`` narrows the
request around the admin handlers, asking ``authorize_resources`` with the caller from
``current_caller()``.

Refusals are counted by reason in ``ListenerSecurity.refused`` (the metrics read it) and logged
without any secret: a SASL failure logs the server-side reason, which never holds a password or proof.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import ipaddress
import logging
import socket
import ssl
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from migrator.controller.protocol import sasl_wire
from migrator.controller.protocol.messages import ENVELOPE
from migrator.controller.security.api_acls import (
    CLUSTER_AUTHORIZATION_FAILED,
    CLUSTER_NAME,
    authorize_cluster,
)
from migrator.controller.security.authorizer import StandardAuthorizer
from migrator.controller.security.principal import (
    ANONYMOUS,
    SslPrincipalMapper,
    java_host_address,
    ssl_principal,
)
from migrator.controller.security.sasl_session import Accept, SaslSession, ServerFactory

__all__ = [
    "Caller",
    "ConnectionSecurity",
    "ImageAuthorizer",
    "ListenerSecurity",
    "authorize_resources",
    "current_caller",
    "forwarded",
    "may_on_cluster",
]

log = logging.getLogger("zk2kraft.controller.security")

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class Caller:
    """Who sent the request being handled: ``principal`` as ``Type:name``, ``host`` as Java prints it."""

    principal: str
    host: str
    listener: str
    authorizer: StandardAuthorizer | None
    refused: Counter[str] | None = None  # the listener's refusal counts (metrics), for per-item refusals
    envelopes: Counter[str] | None = None  # the listener's Envelope outcomes (metrics)
    #: the listener's endpoint as this connection reached it, which Metadata and DescribeCluster name
    endpoint: tuple[str, int] | None = None

    @contextlib.contextmanager
    def bound(self) -> Iterator[Caller]:
        """This caller as ``current_caller()`` for the requests handled inside (an Envelope's inner one)."""
        token = _CALLER.set(self)
        try:
            yield self
        finally:
            _CALLER.reset(token)


_CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("zk2kraft_caller", default=None)


def forwarded(envelope: Caller | None, principal: str, host: str) -> Caller:
    """The client an Envelope speaks for: its principal and address, on the envelope's listener and
    under the same ACLs (Kafka's forwarded RequestContext keeps the listener, swaps who and where)."""
    if envelope is None:  # outside a listener (in-process): nothing authorizes
        return Caller(principal, host, "", None)
    return dataclasses.replace(envelope, principal=principal, host=host)


def current_caller() -> Caller | None:
    """The caller of the request this thread is handling (None outside a listener)."""
    return _CALLER.get()


def authorize_resources(
    caller: Caller | None, operation: str, resource_type: str, names: Iterable[str]
) -> set[str]:
    """The ``names`` of ``resource_type`` on which the caller may do ``operation`` (Kafka's
    ``AuthHelper.filterByAuthorized``); every name when the listener authorizes nothing."""
    wanted = set(names)
    if caller is None or caller.authorizer is None:
        return wanted
    auth, principal, host = caller.authorizer, caller.principal, caller.host
    return {n for n in wanted if auth.allowed(principal, host, resource_type, n, operation)}


def may_on_cluster(caller: Caller | None, operation: str) -> bool:
    """Whether the caller may do ``operation`` on the CLUSTER resource (``kafka-cluster``)."""
    return bool(authorize_resources(caller, operation, "CLUSTER", (CLUSTER_NAME,)))


class ImageAuthorizer:
    """A StandardAuthorizer over the ACLs of the controller's current image, rebuilt when they change,
    so an ACL appended during the migration counts from the next request.

    A change is seen in O(1) per request: the image builder appends a created ACL (the list grows)
    and replaces the list when one is removed. The one change this misses is a record re-using an
    existing ACL's id in place (Kafka's controller never emits one: each created ACL gets a new id);
    the rebuild after the next add or removal picks it up.
    """

    def __init__(self, image_of: Callable[[], Any], props: Mapping[str, str]) -> None:
        self._image_of = image_of
        self._props = dict(props)
        self._lock = threading.Lock()
        self._key: tuple[int, int, int] | None = None
        self._auth = StandardAuthorizer.from_config(self._props)  # bad super.users fails at start

    def current(self) -> StandardAuthorizer:
        acls = self._image_of().acls
        key = (id(acls), len(acls), id(acls[-1]) if acls else 0)
        if key != self._key:
            with self._lock:
                if key != self._key:
                    self._auth = StandardAuthorizer.from_config(self._props, acls)
                    self._key = key
        return self._auth


@dataclass(eq=False)  # identity: the metrics hold every live listener in a weak set
class ListenerSecurity:
    """One listener's protocol and settings. ``mechanisms``: SASL mechanism -> server factory."""

    name: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanisms: Mapping[str, ServerFactory] = field(default_factory=dict)
    max_reauth_ms: int = 0
    principal_mapper: SslPrincipalMapper = field(default_factory=SslPrincipalMapper)
    authorizer: ImageAuthorizer | None = None
    handshake_timeout_s: float = 10.0
    refused: Counter[str] = field(default_factory=Counter)
    authenticated: Counter[str] = field(default_factory=Counter)
    envelopes: Counter[str] = field(default_factory=Counter)  # by outcome (controller.apis.envelope)
    # `advertised.listeners`' (host, port) for this listener name (KIP-853): what Metadata,
    # DescribeCluster and DescribeQuorum name instead of the socket's address (a wildcard bind, NAT)
    advertised: tuple[str, int] | None = None

    def __post_init__(self) -> None:
        from migrator.controller.security.listener_metrics import track

        track(self)

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def extra_versions(self) -> dict[int, tuple[int, int]]:
        """APIs this listener serves beyond the handler's: the SASL exchanges on a SASL listener."""
        return dict(sasl_wire.SASL_VERSIONS) if self.sasl else {}

    def refuse(self, reason: str, detail: str) -> None:
        self.refused[reason] += 1
        log.info("listener %s: refused a connection (%s): %s", self.name, reason, detail)

    def connection(self, conn: socket.socket, ip: str) -> tuple[socket.socket, ConnectionSecurity] | None:
        """The socket to use (TLS-wrapped when the protocol says so) and its state; None when refused."""
        principal = ANONYMOUS
        if self.ssl_context is not None:
            try:
                conn.settimeout(self.handshake_timeout_s)
                tls = self.ssl_context.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
            except OSError as e:
                self.refuse("tls_handshake", f"from {ip}: {e}")
                return None
            try:
                tls.do_handshake()
            except OSError as e:  # ssl.SSLError included
                self.refuse("tls_handshake", f"from {ip}: {_tls_failure(e)}")
                _close_after_alert(tls)
                return None
            conn = tls
            if not self.sasl:
                cert = conn.getpeercert(binary_form=True) if isinstance(conn, ssl.SSLSocket) else None
                try:
                    principal = ssl_principal(cert, self.principal_mapper)
                except Exception as e:  # no rule matches the DN: Kafka refuses the connection
                    self.refuse("tls_principal", f"from {ip}: {e}")
                    return None
        sec = ConnectionSecurity(
            self, principal, java_host_address(ip) if ip else "", self.advertised or _local(conn)
        )
        return conn, sec


def _tls_failure(e: OSError) -> str:
    """What went wrong, as a line: an expired client certificate reads "certificate has expired"."""
    verify = getattr(e, "verify_message", None)
    reason = getattr(e, "reason", None)
    if verify:
        return f"{reason}: {verify}"
    return str(reason or e)


def _close_after_alert(tls: ssl.SSLSocket, linger_s: float = 1.0) -> None:
    """Close a connection whose handshake failed so that the client reads the TLS alert, as Kafka
    flushes it before closing. A TLS 1.3 client sends its first request before it learns that its
    certificate was refused; closing with that request unread sends a TCP reset that can overtake the
    alert, and the client could only say "connection reset". So: FIN after the alert, then read and
    drop what the client still sends (bounded in time and bytes) until it closes too."""
    try:
        tls.shutdown(socket.SHUT_WR)  # drops the TLS layer: reads below are the raw socket's
        tls.settimeout(linger_s)
        left = 1 << 16
        while left > 0 and (data := tls.recv(min(left, 4096))):
            left -= len(data)
    except OSError:
        pass
    finally:
        tls.close()


class ConnectionSecurity:
    """One connection's principal and SASL state; decides per request before any handler sees it."""

    def __init__(
        self, listener: ListenerSecurity, principal: str, host: str, endpoint: tuple[str, int] | None = None
    ) -> None:
        self.listener = listener
        self.host = host
        self.endpoint = endpoint
        self._principal = principal
        self._authorizer: StandardAuthorizer | None = None
        self.session = (
            SaslSession(listener.mechanisms, max_reauth_ms=listener.max_reauth_ms) if listener.sasl else None
        )

    @property
    def principal(self) -> str:
        if self.session is not None:
            return self.session.principal or ANONYMOUS
        return self._principal

    def accept(self, api_key: int) -> Accept:
        """SERVE (authorize and handle), SASL (answer with ``sasl_answer``) or CLOSE."""
        if self.session is None:
            if api_key in sasl_wire.SASL_VERSIONS:
                # Kafka answers a SaslHandshake on a non-SASL listener ILLEGAL_SASL_STATE through the
                # API layer; the listener does not advertise it, so it is an unknown API here: close.
                self.listener.refuse("sasl_on_non_sasl_listener", f"from {self.host}")
                return Accept.CLOSE
            return Accept.SERVE
        accept = self.session.accept(api_key)
        if accept is Accept.CLOSE:
            self.listener.refuse(
                "illegal_sasl_state",
                f"from {self.host}: apiKey {api_key} before SASL authentication completed, or session expired",
            )
        return accept

    def api_versions_answered(self) -> None:
        if self.session is not None:
            self.session.api_versions_answered()

    def sasl_answer(
        self, api_key: int, version: int, correlation_id: int, frame: bytes, pos: int
    ) -> tuple[bytes | None, bool]:
        """(response frame or None, close after it) for a SaslHandshake or SaslAuthenticate."""
        session = self.session
        assert session is not None
        lo, hi = sasl_wire.SASL_VERSIONS.get(api_key, (0, -1))
        if not lo <= version <= hi:
            self.listener.refuse("sasl_version", f"from {self.host}: apiKey {api_key} v{version}")
            return None, True
        try:
            if api_key == sasl_wire.SASL_HANDSHAKE:
                mechanism = sasl_wire.read_mechanism(frame, pos)
                hs = session.handshake(mechanism)
                if hs.close:
                    self.listener.refuse("unsupported_sasl_mechanism", f"from {self.host}: {mechanism!r}")
                return sasl_wire.handshake_response(correlation_id, hs.error_code, hs.mechanisms), hs.close
            auth_bytes = sasl_wire.read_auth_bytes(frame, pos)
        except sasl_wire.SaslWireError as e:
            self.listener.refuse("malformed_sasl", f"from {self.host}: {e}")
            return None, True
        was_reauth = session.reauthenticating
        reply = session.authenticate(auth_bytes)
        if reply.close:
            reason = "reauthentication_failed" if was_reauth else "sasl_authentication_failed"
            self.listener.refuse(reason, f"from {self.host}: {reply.log_reason or reply.error_message}")
        elif reply.complete:
            self.listener.authenticated["reauthenticated" if was_reauth else "authenticated"] += 1
        if not reply.respond:
            return None, True
        answer = sasl_wire.authenticate_response(
            correlation_id,
            version,
            reply.error_code,
            reply.error_message,
            reply.auth_bytes,
            reply.session_lifetime_ms,
        )
        return answer, reply.close

    def authorize(self, api_key: int) -> int:
        """0, or the error the whole request is answered with (nothing done) — the dispatch's one seam.

        The authorizer it used is kept for ``bind``, so a handler's per-topic checks see the same ACLs."""
        auth = self.listener.authorizer
        self._authorizer = auth.current() if auth is not None else None
        if self._authorizer is None:
            return 0
        # Per-resource APIs (topics, configs, Metadata) pass here: authorizer_requests.guard checks each
        # item around the handler, and refuses whole any such API it does not know.
        code = authorize_cluster(self._authorizer, self.principal, self.host, api_key)
        if code == CLUSTER_AUTHORIZATION_FAILED:
            self.listener.refused["cluster_authorization_failed"] += 1
            if api_key == ENVELOPE:
                self.listener.envelopes["cluster_authorization_failed"] += 1
            log.info(
                "listener %s: %s from %s may not call apiKey %d",
                self.listener.name,
                self.principal,
                self.host,
                api_key,
            )
        return code

    def bind(self) -> contextvars.Token[Caller | None]:
        """The caller of the request about to be handled, for ``current_caller()`` (after ``authorize``)."""
        caller = Caller(
            self.principal,
            self.host,
            self.listener.name,
            self._authorizer,
            self.listener.refused,
            self.listener.envelopes,
            self.endpoint,
        )
        return _CALLER.set(caller)

    @staticmethod
    def unbind(token: contextvars.Token[Caller | None]) -> None:
        _CALLER.reset(token)


def _local(conn: socket.socket) -> tuple[str, int] | None:
    """The address this connection reached: the listener's own, or on a wildcard bind the one the
    client used (Kafka's advertised endpoint may not be 0.0.0.0 either)."""
    try:
        host, port = conn.getsockname()[:2]
        mapped = getattr(ipaddress.ip_address(str(host).split("%")[0]), "ipv4_mapped", None)
    except (OSError, ValueError):
        return None
    return str(mapped or host), int(port)  # an IPv4 client of a dual-stack listener: its IPv4 address
