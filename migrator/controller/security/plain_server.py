"""The server side of SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer with its default callback
handler: the password must equal the ``user_<name>`` option of the PlainLoginModule entry in the
listener's JAAS configuration. Comparison is constant-time; no password reaches a message or log.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from migrator.controller.security.jaas import LoginModule
from migrator.controller.security.sasl_errors import SaslAuthenticationFailed
from migrator.errors import BadInputError

__all__ = ["PLAIN_LOGIN_MODULE", "PlainServer", "plain_users"]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
MECHANISM = "PLAIN"


def plain_users(modules: Sequence[LoginModule]) -> dict[str, bytes]:
    """User → password (UTF-8) from the ``user_<name>`` options of the PlainLoginModule entry."""
    for m in modules:
        if m.module == PLAIN_LOGIN_MODULE:
            return {k[5:]: v.encode("utf-8") for k, v in m.options.items() if k.startswith("user_")}
    raise BadInputError(f"SASL/PLAIN: the JAAS configuration has no {PLAIN_LOGIN_MODULE} entry")


class PlainServer:
    """One PLAIN exchange: a single client message, answered with an empty one or refused."""

    def __init__(self, users: dict[str, bytes], *, reauth: bool = False) -> None:
        self._users = users
        self._reauth = reauth
        self.complete = False
        self.authorization_id: str | None = None

    def _fail(self, reason: str, *, safe: bool = True) -> SaslAuthenticationFailed:
        return SaslAuthenticationFailed(reason, MECHANISM, safe_for_client=safe, reauth=self._reauth)

    def evaluate(self, response: bytes) -> bytes:
        if self.complete:
            raise self._fail("Unexpected challenge: the PLAIN exchange is complete", safe=False)
        text = response.decode("utf-8", errors="replace")
        tokens = text.split("\0", 3)
        if len(tokens) != 3:
            raise self._fail(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, username, password = tokens
        if not username:
            raise self._fail("Authentication failed: username not specified")
        if not password:
            raise self._fail("Authentication failed: password not specified")
        expected = self._users.get(username)
        # compare_digest even for an unknown user, so the answer takes as long either way
        ok = hmac.compare_digest(password.encode("utf-8"), expected if expected is not None else b"\0" * 16)
        if expected is None or not ok:
            raise self._fail("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise self._fail(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.authorization_id = username
        self.complete = True
        return b""
