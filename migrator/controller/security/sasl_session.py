"""One connection's SASL conversation, as Kafka 3.9's SaslServerAuthenticator, KafkaChannel and
SocketServer run it, without I/O: the listener feeds it the apiKey of each request and the bodies of
SaslHandshake (17) and SaslAuthenticate (36), and sends what it answers.

Before authentication only ApiVersions (once, first) and SaslHandshake are accepted; anything else,
including SaslAuthenticate before a handshake, closes the connection (IllegalSaslState). An
unsupported mechanism is answered UNSUPPORTED_SASL_MECHANISM with the enabled list, then closed; a
failed exchange is answered SASL_AUTHENTICATION_FAILED, then closed. With
``connections.max.reauth.ms`` > 0 the final SaslAuthenticate carries the session lifetime; a request
after it expires closes the connection, and a SaslHandshake after authentication re-authenticates
(KIP-368) — with the same mechanism and ending in the same principal, at most once a second — or,
without re-authentication, goes to the API layer, which answers ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from migrator.controller.security.sasl_errors import SASL_AUTHENTICATION_FAILED, SaslAuthenticationFailed

__all__ = ["Accept", "AuthenticateReply", "HandshakeReply", "SaslServer", "SaslSession"]

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
MIN_REAUTH_INTERVAL_S = 1.0


class SaslServer(Protocol):
    """What ScramServer and PlainServer offer."""

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str | None: ...

    def evaluate(self, response: bytes) -> bytes: ...


#: mechanism → a new server for one exchange; the flag says whether it is a re-authentication
ServerFactory = Callable[[bool], SaslServer]


class _State(enum.Enum):
    INITIAL = "INITIAL"  # ApiVersions or SaslHandshake
    HANDSHAKE = "HANDSHAKE"  # after ApiVersions: SaslHandshake only
    AUTHENTICATE = "AUTHENTICATE"
    REAUTH_BAD_MECHANISM = "REAUTH_BAD_MECHANISM"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


class Accept(enum.Enum):
    """What the listener does with a request that arrived."""

    SERVE = "serve"  # an ordinary request of an authenticated connection: authorize and handle it
    SASL = "sasl"  # ApiVersions / SaslHandshake / SaslAuthenticate: answer through this session
    CLOSE = "close"  # refused as Kafka refuses it: close the connection (and count it)


@dataclass(frozen=True)
class HandshakeReply:
    error_code: int
    mechanisms: list[str]
    close: bool = False


@dataclass(frozen=True)
class AuthenticateReply:
    error_code: int
    error_message: str | None = None
    auth_bytes: bytes = b""
    session_lifetime_ms: int = 0
    close: bool = False
    complete: bool = False
    respond: bool = True  # False: close without a response, as Kafka does for a re-auth mechanism change
    log_reason: str | None = field(default=None, repr=False)  # for the server's log only


class SaslSession:
    def __init__(
        self,
        mechanisms: Mapping[str, ServerFactory],
        *,
        max_reauth_ms: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not mechanisms:
            raise ValueError("No SASL mechanisms are enabled")
        self._factories = dict(mechanisms)
        self._max_reauth_ms = max_reauth_ms
        self._clock = clock
        self._state = _State.INITIAL
        self._server: SaslServer | None = None
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._previous: tuple[str, str] | None = None  # (mechanism, principal) while re-authenticating
        self._bad_mechanism_message = ""
        self._pending_mechanism: str | None = None
        self._expires_at: float | None = None
        self._last_reauth_start: float | None = None
        self.reauthentications = 0

    @property
    def authenticated(self) -> bool:
        return self.principal is not None and self._state is _State.COMPLETE

    @property
    def reauthenticating(self) -> bool:
        return self._previous is not None

    def accept(self, api_key: int) -> Accept:
        """Where a request goes, decided from its apiKey before it is parsed (Kafka decides on the header)."""
        state = self._state
        if state is _State.FAILED:
            return Accept.CLOSE
        if state is _State.COMPLETE:
            now = self._clock()
            if api_key == SASL_HANDSHAKE and self._begin_reauth(now):
                return Accept.SASL
            if self._expires_at is not None and now >= self._expires_at:
                self._state = _State.FAILED
                return Accept.CLOSE  # Kafka: "Disconnecting expired channel"
            return Accept.SERVE
        if state is _State.INITIAL and api_key in (API_VERSIONS, SASL_HANDSHAKE):
            return Accept.SASL
        if state is _State.HANDSHAKE and api_key == SASL_HANDSHAKE:
            return Accept.SASL
        if state in (_State.AUTHENTICATE, _State.REAUTH_BAD_MECHANISM) and api_key == SASL_AUTHENTICATE:
            return Accept.SASL
        self._state = _State.FAILED  # IllegalSaslState: unexpected request during SASL
        return Accept.CLOSE

    def _begin_reauth(self, now: float) -> bool:
        if self._expires_at is None:
            return False  # no re-authentication: the handshake goes to the API layer (ILLEGAL_SASL_STATE)
        if self._last_reauth_start is not None and now - self._last_reauth_start < MIN_REAUTH_INTERVAL_S:
            return False
        self._last_reauth_start = now
        assert self.mechanism is not None and self.principal is not None
        self._previous = (self.mechanism, self.principal)
        self._state = _State.HANDSHAKE
        return True

    def api_versions_answered(self) -> None:
        """The listener answered ApiVersions in the INITIAL state: only a handshake may follow."""
        if self._state is _State.INITIAL:
            self._state = _State.HANDSHAKE

    def handshake(self, mechanism: str) -> HandshakeReply:
        enabled = list(self._factories)
        if mechanism not in self._factories:
            self._state = _State.FAILED
            return HandshakeReply(UNSUPPORTED_SASL_MECHANISM, enabled, close=True)
        if self._previous is not None and mechanism != self._previous[0]:
            self._bad_mechanism_message = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for re-authentication "
                f"of mechanism '{self._previous[0]}'"
            )
            self._state = _State.REAUTH_BAD_MECHANISM
            return HandshakeReply(0, enabled)
        self._server = self._factories[mechanism](self._previous is not None)
        self._pending_mechanism = mechanism
        self._state = _State.AUTHENTICATE
        return HandshakeReply(0, enabled)

    def authenticate(self, auth_bytes: bytes) -> AuthenticateReply:
        if self._state is _State.REAUTH_BAD_MECHANISM:
            reply = self._failed(self._bad_mechanism_message, self._bad_mechanism_message)
            return AuthenticateReply(reply.error_code, reply.error_message, close=True, respond=False)
        server = self._server
        if self._state is not _State.AUTHENTICATE or server is None:
            self._state = _State.FAILED
            return AuthenticateReply(ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate", close=True)
        try:
            out = server.evaluate(auth_bytes)
        except SaslAuthenticationFailed as e:
            return self._failed(e.client_message, str(e))
        if not server.complete:
            return AuthenticateReply(0, auth_bytes=out)
        principal = f"User:{server.authorization_id}"
        if self._previous is not None and principal != self._previous[1]:
            old, new = self._previous[1].split(":", 1), principal.split(":", 1)
            message = (
                f"Cannot change principals during re-authentication from {old[0]}.{old[1]}: {new[0]}.{new[1]}"
            )
            return self._failed(message, message)
        if self._previous is not None:
            self.reauthentications += 1
        self.mechanism = self._pending_mechanism
        self.principal = principal
        self._previous = None
        self._server = None
        self._state = _State.COMPLETE
        lifetime = max(self._max_reauth_ms, 0)
        self._expires_at = self._clock() + lifetime / 1000 if lifetime else None
        return AuthenticateReply(0, auth_bytes=out, session_lifetime_ms=lifetime, complete=True)

    def _failed(self, client_message: str, log_reason: str) -> AuthenticateReply:
        self._state = _State.FAILED
        self._server = None
        return AuthenticateReply(
            SASL_AUTHENTICATION_FAILED, client_message, close=True, log_reason=log_reason
        )
