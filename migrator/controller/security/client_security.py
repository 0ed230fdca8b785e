"""The client side of the listener's security, as a Kafka broker runs it against its controller: TLS
(Python's ssl, PEM files), then SaslHandshake v1 and SaslAuthenticate v1 with PLAIN or SCRAM-SHA-256/512
(RFC 5802/7677, the server signature checked, so a controller that does not hold the credential is
not believed). Used by ``ControllerClient`` (and so by the broker simulator and benchmarks), and by the
controller's channels to ZooKeeper-mode brokers (``zk_broker_channel``, ``peer`` naming the broker).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import ssl
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from migrator.controller.security.jaas import parse_jaas_config
from migrator.controller.security.scram_server import HASHES
from migrator.errors import BadInputError, ZkKraftError

__all__ = ["ClientSecurity", "SaslRefused", "from_client_properties", "sasl_authenticate"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class SaslRefused(ZkKraftError):
    """The controller refused this client's SASL authentication (wrong password, unknown mechanism)."""

    exit_code = 2


@dataclass(frozen=True)
class ClientSecurity:
    """``security_protocol`` as Kafka names it; the password stays out of reprs."""

    security_protocol: str = "PLAINTEXT"
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_check_hostname: bool = False
    ssl_key_password: str | None = field(default=None, repr=False)
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.security_protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise BadInputError(f"security protocol {self.security_protocol!r} is not one of Kafka's")
        if self.sasl and (not self.sasl_mechanism or self.username is None or self.password is None):
            raise BadInputError(
                f"{self.security_protocol} needs a SASL mechanism, a user name and a password"
            )

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ssl_cafile)
        ctx.check_hostname = self.ssl_check_hostname
        if self.ssl_certfile:
            ctx.load_cert_chain(self.ssl_certfile, self.ssl_keyfile, password=self.ssl_key_password)
        return ctx


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return _I16.pack(len(b)) + b


def _request(api_key: int, version: int, correlation_id: int, client_id: str, body: bytes) -> bytes:
    payload = struct.pack(">hhi", api_key, version, correlation_id) + _string(client_id) + body
    return _I32.pack(len(payload)) + payload


#: sends one whole request frame and returns the response frame's body (after the size)
RoundTrip = Callable[[bytes], bytes]


def _handshake(rt: RoundTrip, cid: int, client_id: str, mechanism: str, peer: str) -> None:
    body = rt(_request(17, 1, cid, client_id, _string(mechanism)))
    (error,) = _I16.unpack_from(body, 4)
    if error:
        (n,) = _I32.unpack_from(body, 6)
        pos, enabled = 10, []
        for _ in range(n):
            (ln,) = _I16.unpack_from(body, pos)
            enabled.append(body[pos + 2 : pos + 2 + ln].decode())
            pos += 2 + ln
        raise SaslRefused(
            f"{peer} does not offer SASL mechanism {mechanism} (it offers {', '.join(enabled)})"
        )


def _authenticate(rt: RoundTrip, cid: int, client_id: str, token: bytes, peer: str) -> bytes:
    body = rt(_request(36, 1, cid, client_id, _I32.pack(len(token)) + token))
    (error,) = _I16.unpack_from(body, 4)
    (ln,) = _I16.unpack_from(body, 6)
    pos = 8 + max(ln, 0)
    message = body[8:pos].decode("utf-8", "replace") if ln >= 0 else ""
    if error:
        raise SaslRefused(f"SASL authentication refused by {peer} (error {error}): {message}")
    (n,) = _I32.unpack_from(body, pos)
    return body[pos + 4 : pos + 4 + n]


def _saslname(user: str) -> str:
    return user.replace("=", "=3D").replace(",", "=2C")


def sasl_authenticate(
    rt: RoundTrip,
    ids: Callable[[], int],
    client_id: str,
    sec: ClientSecurity,
    peer: str = "the controller",
) -> None:
    """Run the SASL exchange on a connection that has just answered ApiVersions; `peer` names the
    server in refusals (the controller, or a broker for the controller's inter-broker channel)."""
    mech = sec.sasl_mechanism or ""
    user, password = sec.username or "", sec.password or ""
    _handshake(rt, ids(), client_id, mech, peer)
    if mech == "PLAIN":
        _authenticate(rt, ids(), client_id, f"\0{user}\0{password}".encode(), peer)
        return
    if mech not in HASHES:
        raise BadInputError(
            f"SASL mechanism {mech}: zk2kraft's client speaks PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"
        )
    name = HASHES[mech]
    nonce = secrets.token_urlsafe(24)
    first_bare = f"n={_saslname(user)},r={nonce}"
    server_first = _authenticate(rt, ids(), client_id, ("n,," + first_bare).encode(), peer).decode()
    fields = dict(item.split("=", 1) for item in server_first.split(",") if "=" in item)
    if not fields.get("r", "").startswith(nonce):
        raise SaslRefused(f"SCRAM: {peer}'s nonce does not extend ours")
    salted = hashlib.pbkdf2_hmac(name, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", name).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.new(name, client_key).digest(), auth_message, name).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    server_final = _authenticate(rt, ids(), client_id, f"{without_proof},p={proof}".encode(), peer).decode()
    expected = hmac.new(hmac.new(salted, b"Server Key", name).digest(), auth_message, name).digest()
    if not hmac.compare_digest(server_final, "v=" + base64.b64encode(expected).decode()):
        raise SaslRefused(f"SCRAM: {peer}'s signature is wrong (it does not hold this credential)")


_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def from_client_properties(props: Mapping[str, str], what: str = "--command-config") -> ClientSecurity:
    """A Kafka client's properties (what ``kafka-*.sh --command-config`` reads): ``security.protocol``,
    ``ssl.truststore.location``/``ssl.keystore.location`` (PEM), ``ssl.endpoint.identification.algorithm``,
    ``sasl.mechanism`` and ``sasl.jaas.config`` with the login module's username and password."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    for kind in ("truststore", "keystore"):
        store_type = props.get(f"ssl.{kind}.type", "PEM").strip().upper()
        if props.get(f"ssl.{kind}.location") and store_type != "PEM":
            raise BadInputError(f"{what}: ssl.{kind}.type={store_type}: zk2kraft reads PEM stores only")
    mechanism = (
        props.get("sasl.mechanism", "GSSAPI").strip().upper() if protocol.startswith("SASL_") else None
    )
    username = password = None
    if mechanism is not None:
        if mechanism not in _LOGIN_MODULES:
            raise BadInputError(f"{what}: sasl.mechanism={mechanism}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
        modules = parse_jaas_config(props.get("sasl.jaas.config", ""), f"{what}: sasl.jaas.config")
        module = next((m for m in modules if m.module == _LOGIN_MODULES[mechanism]), None)
        if module is None:
            raise BadInputError(f"{what}: sasl.jaas.config has no {_LOGIN_MODULES[mechanism]} entry")
        username, password = module.options.get("username"), module.options.get("password")
    return ClientSecurity(
        protocol,
        ssl_cafile=props.get("ssl.truststore.location") or None,
        ssl_certfile=props.get("ssl.keystore.location") or None,
        ssl_key_password=props.get("ssl.key.password") or None,
        ssl_check_hostname=props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
        == "https",
        sasl_mechanism=mechanism,
        username=username,
        password=password,
    )
