"""SCRAM credentials derived as Kafka's ScramFormatter derives them: only salted keys leave here.

The password is read by the CLI, turned into salt, StoredKey and ServerKey in this module and
dropped; `ScramSpec` never shows its keys in a repr.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from pydantic import BaseModel, Field

from migrator.errors import BadInputError

__all__ = [
    "SCRAM_HASH",
    "SCRAM_MAX_ITERATIONS",
    "SCRAM_MIN_ITERATIONS",
    "ScramSpec",
    "check_scram",
    "scram_credential",
]

# ScramMechanism: minimum iterations 4096 for both; KRaft refuses more than 16384.
SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 16384
SCRAM_HASH = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class ScramSpec(BaseModel):
    """A derived SCRAM credential: never the password."""

    user: str
    mechanism: str
    iterations: int
    salt: str = ""  # base64; empty for delete-scram
    stored_key: str = ""
    server_key: str = ""
    #: base64 SaltedPassword, what AlterUserScramCredentials carries (the controller derives the keys);
    #: never serialized, never shown
    salted_password: str = Field(default="", exclude=True, repr=False)

    def __repr__(self) -> str:  # never show the keys
        return f"ScramSpec(user={self.user!r}, mechanism={self.mechanism}, iterations={self.iterations})"

    __str__ = __repr__


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def scram_credential(user: str, mechanism: str, password: str, iterations: int) -> ScramSpec:
    """ScramFormatter.generateCredential: salt = the ASCII of a random 130-bit number in base 36,
    salted password = PBKDF2(password, salt, iterations), keys as RFC 5802 defines them."""
    if mechanism not in SCRAM_HASH:
        raise BadInputError(f"unknown SCRAM mechanism {mechanism!r} (SCRAM-SHA-256 or SCRAM-SHA-512)")
    check_scram(user, mechanism, iterations)
    if not password:
        raise BadInputError("the SCRAM password must not be empty")
    algo = SCRAM_HASH[mechanism]
    salt = _base36(secrets.randbits(130)).encode("ascii")
    salted = hashlib.pbkdf2_hmac(algo, password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", algo).digest()
    stored_key = hashlib.new(algo, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", algo).digest()
    b64 = base64.b64encode
    return ScramSpec(
        user=user,
        mechanism=mechanism,
        iterations=iterations,
        salt=b64(salt).decode(),
        stored_key=b64(stored_key).decode(),
        server_key=b64(server_key).decode(),
        salted_password=b64(salted).decode(),
    )


def check_scram(user: str, mechanism: str, iterations: int) -> None:
    if not user:
        raise BadInputError("the SCRAM user name must not be empty")
    if mechanism not in SCRAM_HASH:
        raise BadInputError(f"unknown SCRAM mechanism {mechanism!r} (SCRAM-SHA-256 or SCRAM-SHA-512)")
    if iterations < SCRAM_MIN_ITERATIONS:
        raise BadInputError(
            f"too few iterations for {mechanism}: {iterations} (minimum {SCRAM_MIN_ITERATIONS})"
        )
    if iterations > SCRAM_MAX_ITERATIONS:
        raise BadInputError(
            f"too many iterations for {mechanism}: {iterations} (maximum {SCRAM_MAX_ITERATIONS})"
        )
