"""The server side of SASL/SCRAM-SHA-256 and -512 (RFC 5802, RFC 7677), as Kafka's ScramSaslServer.

The server never sees a password: it verifies the client's proof against the credential Kafka stores
for the user (salt, iterations, StoredKey, ServerKey) — the ``UserScramCredentialRecord`` migrated
from ZooKeeper's ``/config/users/<user>``. Message grammar, the 4096-iteration minimum and the
failure messages are Kafka's (``ScramMessages``, ``ScramSaslServer``). Kafka's delegation-token
extension (``tokenauth=true``) is refused: this controller keeps no token HMACs to verify against.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable

from migrator.controller.security.sasl_errors import SaslAuthenticationFailed
from migrator.model import ScramCredential

__all__ = ["HASHES", "MIN_ITERATIONS", "ScramServer", "scram_credential"]

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Kafka's ScramMechanism.minIterations for both mechanisms
MIN_ITERATIONS = 4096
TOKEN_AUTH = "tokenauth"

# Kafka's ScramMessages grammar (Java character classes spelled out).
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"  # \x01-\x7F without ','
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"  # \x21-\x7E without ','
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_B64 = r"(?:[A-Za-z0-9/+]{4})*(?:[A-Za-z0-9/+]{3}=|[A-Za-z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)(?P<bare>(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<ext>{_EXTENSIONS}))"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_B64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_B64})"
)


def _username(saslname: str) -> str:
    return saslname.replace("=2C", ",").replace("=3D", "=")


def scram_credential(
    user: str, mechanism: str, password: str, salt: bytes, iterations: int
) -> ScramCredential:
    """The credential Kafka stores for a password (``ScramFormatter.generateCredential``); for tests and tools."""
    name = HASHES[mechanism]
    salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", name).digest()
    return ScramCredential(
        user=user,
        mechanism=mechanism,
        salt=salt,
        iterations=iterations,
        stored_key=hashlib.new(name, client_key).digest(),
        server_key=hmac.new(salted, b"Server Key", name).digest(),
    )


class _State(enum.Enum):
    CLIENT_FIRST = 1
    CLIENT_FINAL = 2
    COMPLETE = 3
    FAILED = 4


#: user name and mechanism → the stored credential, or None for an unknown user
CredentialLookup = Callable[[str, str], ScramCredential | None]


class ScramServer:
    """One SCRAM exchange: ``evaluate(client_first) -> server_first``, ``evaluate(client_final) -> server_final``.

    Any failure raises ``SaslAuthenticationFailed`` and leaves the exchange FAILED; the credential is
    dropped as soon as the exchange ends either way.
    """

    def __init__(
        self,
        mechanism: str,
        lookup: CredentialLookup,
        *,
        reauth: bool = False,
        server_nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24),
    ) -> None:
        if mechanism not in HASHES:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._lookup = lookup
        self._reauth = reauth
        self._server_nonce = server_nonce
        self._state = _State.CLIENT_FIRST
        self._credential: ScramCredential | None = None
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""
        self.authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    def _fail(self, reason: str, *, safe_for_client: bool = False) -> SaslAuthenticationFailed:
        self._state = _State.FAILED
        self._credential = None
        return SaslAuthenticationFailed(
            reason, self.mechanism, safe_for_client=safe_for_client, reauth=self._reauth
        )

    def evaluate(self, response: bytes) -> bytes:
        if self._state is _State.CLIENT_FIRST:
            return self._client_first(response)
        if self._state is _State.CLIENT_FINAL:
            return self._client_final(response)
        raise self._fail(f"Unexpected challenge in Sasl server state {self._state.name}")

    def _client_first(self, response: bytes) -> bytes:
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("Invalid SCRAM client first message format: not UTF-8") from None
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            raise self._fail("Invalid SCRAM client first message format")
        extensions = dict(part.split("=", 1) for part in m["ext"][1:].split(",")) if m["ext"] else {}
        username = _username(m["saslname"])
        if extensions.get(TOKEN_AUTH, "").lower() == "true":
            raise self._fail(
                "Token Authentication failed: delegation tokens are not accepted by this controller"
            )
        credential = self._lookup(username, self.mechanism)
        if credential is None:
            raise self._fail("Authentication failed: Invalid user credentials")
        authzid = m["authzid"]
        if authzid is not None and _username(authzid) != username:
            raise self._fail(
                "Authentication failed: Client requested an authorization id that is different from username",
                safe_for_client=True,
            )
        if credential.iterations < MIN_ITERATIONS:
            raise self._fail(
                f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} for {self.mechanism}"
            )
        self._credential = credential
        self._gs2 = m["gs2"]
        self._client_first_bare = m["bare"]
        nonce = m["nonce"] + self._server_nonce()
        salt = base64.b64encode(credential.salt).decode("ascii")
        self._server_first = f"r={nonce},s={salt},i={credential.iterations}"
        self.authorization_id = username
        self._state = _State.CLIENT_FINAL
        return self._server_first.encode("ascii")

    def _client_final(self, response: bytes) -> bytes:
        credential = self._credential
        assert credential is not None
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("Invalid SCRAM client final message format: not UTF-8") from None
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None:
            raise self._fail("Invalid SCRAM client final message format")
        if m["nonce"] != self._server_first[2 : self._server_first.index(",")]:
            raise self._fail("Invalid client nonce in the final client message.")
        try:
            channel = base64.b64decode(m["channel"], validate=True)
            proof = base64.b64decode(m["proof"], validate=True)
        except binascii.Error:
            raise self._fail("Invalid SCRAM client final message format") from None
        if channel != self._gs2.encode("utf-8"):
            raise self._fail("Invalid channel binding in the final client message")
        auth_message = f"{self._client_first_bare},{self._server_first},{m['without_proof']}".encode()
        client_signature = hmac.new(credential.stored_key, auth_message, self._hash).digest()
        if len(proof) != len(client_signature):
            raise self._fail("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), credential.stored_key):
            raise self._fail("Invalid client credentials")
        server_signature = hmac.new(credential.server_key, auth_message, self._hash).digest()
        self._credential = None
        self._state = _State.COMPLETE
        return b"v=" + base64.b64encode(server_signature)
