"""SaslHandshake (17) and SaslAuthenticate (36) bodies as Kafka lays them out, for the listener.

Only the non-flexible versions are served: SaslHandshake v1 (v0 means raw, unframed SASL tokens after
the handshake, which Kafka keeps for pre-1.0 clients only) and SaslAuthenticate v0-v1 (v1 adds the
session lifetime of KIP-368). Every client since Kafka 1.0, kafka-python and librdkafka included,
picks these from ApiVersions. Their request header is v1 and their response header v0, the same
bytes the listener already reads and writes for other non-flexible requests.
"""

from __future__ import annotations

import struct

__all__ = [
    "SASL_AUTHENTICATE",
    "SASL_HANDSHAKE",
    "SASL_VERSIONS",
    "SaslWireError",
    "authenticate_response",
    "handshake_response",
    "read_auth_bytes",
    "read_mechanism",
]

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
#: apiKey -> (min, max) version served on a SASL listener
SASL_VERSIONS: dict[int, tuple[int, int]] = {SASL_HANDSHAKE: (1, 1), SASL_AUTHENTICATE: (0, 1)}

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class SaslWireError(Exception):
    """A SASL request body that is not what its version says."""


def read_mechanism(frame: bytes, pos: int) -> str:
    """SaslHandshakeRequest: mechanism (STRING)."""
    if len(frame) < pos + 2:
        raise SaslWireError("SaslHandshake: truncated mechanism")
    (n,) = _I16.unpack_from(frame, pos)
    if n < 0 or pos + 2 + n != len(frame):
        raise SaslWireError("SaslHandshake: malformed mechanism")
    try:
        return frame[pos + 2 : pos + 2 + n].decode("utf-8")
    except UnicodeDecodeError:
        raise SaslWireError("SaslHandshake: mechanism is not UTF-8") from None


def read_auth_bytes(frame: bytes, pos: int) -> bytes:
    """SaslAuthenticateRequest v0/v1: auth_bytes (BYTES)."""
    if len(frame) < pos + 4:
        raise SaslWireError("SaslAuthenticate: truncated auth bytes")
    (n,) = _I32.unpack_from(frame, pos)
    if n < 0 or pos + 4 + n != len(frame):
        raise SaslWireError("SaslAuthenticate: malformed auth bytes")
    return bytes(frame[pos + 4 : pos + 4 + n])


def _string(s: str | None) -> bytes:
    if s is None:
        return _I16.pack(-1)
    b = s.encode("utf-8")
    return _I16.pack(len(b)) + b


def _frame(correlation_id: int, body: bytes) -> bytes:
    payload = _I32.pack(correlation_id) + body  # response header v0
    return _I32.pack(len(payload)) + payload


def handshake_response(correlation_id: int, error_code: int, mechanisms: list[str]) -> bytes:
    body = _I16.pack(error_code) + _I32.pack(len(mechanisms)) + b"".join(_string(m) for m in mechanisms)
    return _frame(correlation_id, body)


def authenticate_response(
    correlation_id: int,
    version: int,
    error_code: int,
    error_message: str | None,
    auth_bytes: bytes,
    session_lifetime_ms: int,
) -> bytes:
    body = _I16.pack(error_code) + _string(error_message) + _I32.pack(len(auth_bytes)) + auth_bytes
    if version >= 1:
        body += _I64.pack(session_lifetime_ms)
    return _frame(correlation_id, body)
