"""How a failed SASL exchange is told to the client, as Kafka's SaslServerAuthenticator tells it.

Kafka keeps two kinds of failure apart: a ``SaslAuthenticationException`` whose message is safe to
send (e.g. "Client requested an authorization id that is different from username"), and any other
``SaslException``, whose message may reveal whether a user exists, so the client gets only a generic
line naming the mechanism. ``SaslAuthenticationFailed.client_message`` is what goes into the
SaslAuthenticate response (error SASL_AUTHENTICATION_FAILED, 58); ``str()`` is for the server's log
and never holds a password, proof or key.
"""

from __future__ import annotations

SASL_AUTHENTICATION_FAILED = 58


class SaslAuthenticationFailed(Exception):
    def __init__(
        self, reason: str, mechanism: str, *, safe_for_client: bool = False, reauth: bool = False
    ) -> None:
        super().__init__(reason)
        self.mechanism = mechanism
        if safe_for_client:
            self.client_message = reason
        else:
            what = "re-authentication" if reauth else "authentication"
            self.client_message = f"Authentication failed during {what} due to invalid credentials with SASL mechanism {mechanism}"
