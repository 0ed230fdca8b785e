"""A connection's SASL conversation follows Kafka's SaslServerAuthenticator; kafka-python's SCRAM and PLAIN
clients produce the tokens."""

from __future__ import annotations

from kafka.net.sasl.plain import SaslMechanismPlain
from kafka.net.sasl.scram import ScramClient

from migrator.controller.security.plain_server import PlainServer
from migrator.controller.security.sasl_session import Accept, SaslSession
from migrator.controller.security.scram_server import ScramServer, scram_credential

MECH = "SCRAM-SHA-256"
CREDS = {
    (u, MECH): scram_credential(u, MECH, f"{u}-pw", f"salt-{u}".encode(), 4096) for u in ("alice", "bob")
}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def session(max_reauth_ms: int = 0, clock: Clock | None = None) -> SaslSession:
    return SaslSession(
        {
            MECH: lambda reauth: ScramServer(MECH, lambda u, m: CREDS.get((u, m)), reauth=reauth),
            "PLAIN": lambda reauth: PlainServer({"carol": b"carol-pw"}, reauth=reauth),
        },
        max_reauth_ms=max_reauth_ms,
        clock=clock or Clock(),
    )


def scram_login(s: SaslSession, user: str, password: str) -> list:
    """Handshake and the two SaslAuthenticate rounds; the replies."""
    assert s.accept(17) is Accept.SASL
    assert s.handshake(MECH).error_code == 0
    client = ScramClient(user, password, MECH)
    replies = []
    assert s.accept(36) is Accept.SASL
    first = s.authenticate(client.first_message())
    replies.append(first)
    if first.error_code:
        return replies
    client.process_server_first_message(first.auth_bytes)
    assert s.accept(36) is Accept.SASL
    final = s.authenticate(client.final_message())
    replies.append(final)
    if not final.error_code:
        client.process_server_final_message(final.auth_bytes)
    return replies


def test_api_versions_then_scram_then_requests_are_served() -> None:
    s = session()
    assert s.accept(18) is Accept.SASL
    s.api_versions_answered()
    assert s.accept(18) is Accept.CLOSE  # ApiVersions only once, before the handshake
    s = session()
    assert s.accept(18) is Accept.SASL
    s.api_versions_answered()
    replies = scram_login(s, "alice", "alice-pw")
    assert replies[-1].complete and replies[-1].session_lifetime_ms == 0
    assert s.authenticated and s.principal == "User:alice"
    assert s.accept(56) is Accept.SERVE
    # without re-authentication a later handshake is for the API layer (ILLEGAL_SASL_STATE there)
    assert s.accept(17) is Accept.SERVE


def test_plain_through_the_session() -> None:
    s = session()
    assert s.accept(17) is Accept.SASL and s.handshake("PLAIN").error_code == 0
    client = SaslMechanismPlain(sasl_plain_username="carol", sasl_plain_password="carol-pw")
    reply = s.authenticate(client.auth_bytes())
    assert reply.complete and s.principal == "User:carol"


def test_requests_before_authentication_close_the_connection() -> None:
    for api in (56, 3, 36):  # AlterPartition, Metadata, SaslAuthenticate before any handshake
        s = session()
        assert s.accept(api) is Accept.CLOSE
        assert s.accept(17) is Accept.CLOSE  # and nothing after
    s = session()
    s.accept(17)
    s.handshake(MECH)
    assert s.accept(62) is Accept.CLOSE  # BrokerRegistration in the middle of the exchange


def test_unknown_mechanism_is_answered_with_the_enabled_ones_then_closed() -> None:
    s = session()
    s.accept(17)
    reply = s.handshake("GSSAPI")
    assert (reply.error_code, reply.mechanisms, reply.close) == (33, [MECH, "PLAIN"], True)
    assert s.accept(36) is Accept.CLOSE


def test_wrong_password_fails_with_58_and_closes() -> None:
    s = session()
    replies = scram_login(s, "alice", "nope")
    last = replies[-1]
    assert (last.error_code, last.close) == (58, True)
    assert (
        last.error_message
        == "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
    )
    assert not s.authenticated and s.accept(56) is Accept.CLOSE


def test_session_lifetime_expiry_and_reauthentication() -> None:
    clock = Clock()
    s = session(max_reauth_ms=60_000, clock=clock)
    assert scram_login(s, "alice", "alice-pw")[-1].session_lifetime_ms == 60_000
    clock.now += 30
    assert s.accept(56) is Accept.SERVE
    # re-authentication as the same principal extends the session
    replies = scram_login(s, "alice", "alice-pw")
    assert replies[-1].complete and "re-" not in (replies[-1].error_message or "")
    assert s.reauthentications == 1
    clock.now += 50  # 80 s after the first login, 50 s after the second: still valid
    assert s.accept(56) is Accept.SERVE
    clock.now += 11
    assert s.accept(56) is Accept.CLOSE  # expired: Kafka disconnects the channel


def test_reauthentication_as_another_principal_is_refused() -> None:
    clock = Clock()
    s = session(max_reauth_ms=60_000, clock=clock)
    scram_login(s, "alice", "alice-pw")
    clock.now += 5
    last = scram_login(s, "bob", "bob-pw")[-1]
    assert (last.error_code, last.close) == (58, True)
    assert last.error_message == "Cannot change principals during re-authentication from User.alice: User.bob"
    assert s.accept(56) is Accept.CLOSE


def test_reauthentication_with_another_mechanism_is_refused_without_a_reply() -> None:
    clock = Clock()
    s = session(max_reauth_ms=60_000, clock=clock)
    scram_login(s, "alice", "alice-pw")
    clock.now += 5
    assert s.accept(17) is Accept.SASL
    assert s.handshake("PLAIN").error_code == 0  # Kafka answers the handshake, then fails the exchange
    assert s.accept(36) is Accept.SASL
    reply = s.authenticate(b"\0carol\0carol-pw")
    assert (reply.error_code, reply.close, reply.respond) == (58, True, False)
    assert "not supported for re-authentication of mechanism 'SCRAM-SHA-256'" in (reply.error_message or "")


def test_reauthentication_at_most_once_a_second() -> None:
    clock = Clock()
    s = session(max_reauth_ms=60_000, clock=clock)
    scram_login(s, "alice", "alice-pw")
    clock.now += 5
    scram_login(s, "alice", "alice-pw")
    clock.now += 0.5
    assert s.accept(17) is Accept.SERVE  # too soon: the API layer answers ILLEGAL_SASL_STATE
    clock.now += 0.6
    assert s.accept(17) is Accept.SASL
