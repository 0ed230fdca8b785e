"""The SCRAM server, driven by kafka-python's own SCRAM client (an independent implementation)."""

from __future__ import annotations

import base64

import pytest
from kafka.net.sasl.scram import ScramClient

from migrator.controller.security.sasl_errors import SaslAuthenticationFailed
from migrator.controller.security.scram_server import ScramServer, scram_credential
from migrator.model import ScramCredential

MECHANISMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]


def store(mechanism: str, iterations: int = 4096) -> dict[tuple[str, str], ScramCredential]:
    cred = scram_credential("alice", mechanism, "alice-secret", b"0123456789abcdef", iterations)
    return {("alice", mechanism): cred}


def exchange(mechanism: str, user: str, password: str, creds: dict) -> tuple[ScramServer, ScramClient]:
    server = ScramServer(mechanism, lambda u, m: creds.get((u, m)))
    client = ScramClient(user, password, mechanism)
    client.process_server_first_message(server.evaluate(client.first_message()))
    final = server.evaluate(client.final_message())
    client.process_server_final_message(final)  # raises unless the server proved it knows ServerKey
    return server, client


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_client_authenticates(mechanism: str) -> None:
    server, _ = exchange(mechanism, "alice", "alice-secret", store(mechanism))
    assert server.complete
    assert server.authorization_id == "alice"


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_is_refused_with_kafkas_generic_message(mechanism: str) -> None:
    with pytest.raises(SaslAuthenticationFailed) as e:
        exchange(mechanism, "alice", "wrong", store(mechanism))
    assert str(e.value) == "Invalid client credentials"
    assert e.value.client_message == (
        f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
    )
    assert "wrong" not in e.value.client_message


def test_unknown_user_and_other_mechanism_are_refused_at_the_first_message() -> None:
    creds = store("SCRAM-SHA-256")
    for user, mechanism in [("bob", "SCRAM-SHA-256"), ("alice", "SCRAM-SHA-512")]:
        server = ScramServer(mechanism, lambda u, m: creds.get((u, m)), reauth=True)
        with pytest.raises(SaslAuthenticationFailed, match="Invalid user credentials") as e:
            server.evaluate(ScramClient(user, "alice-secret", mechanism).first_message())
        assert "re-authentication" in e.value.client_message
        assert not server.complete


def test_nonce_mismatch_is_refused() -> None:
    creds = store("SCRAM-SHA-256")
    server = ScramServer("SCRAM-SHA-256", lambda u, m: creds.get((u, m)))
    client = ScramClient("alice", "alice-secret", "SCRAM-SHA-256")
    client.process_server_first_message(server.evaluate(client.first_message()))
    final = client.final_message()
    tampered = final.replace(b",r=", b",r=x", 1)
    with pytest.raises(SaslAuthenticationFailed, match="Invalid client nonce"):
        server.evaluate(tampered)
    with pytest.raises(SaslAuthenticationFailed, match="Unexpected challenge"):
        server.evaluate(final)  # a failed exchange stays failed


def test_tampered_proof_and_channel_binding_are_refused() -> None:
    creds = store("SCRAM-SHA-256")
    for bad in ("proof", "channel"):
        server = ScramServer("SCRAM-SHA-256", lambda u, m: creds.get((u, m)))
        client = ScramClient("alice", "alice-secret", "SCRAM-SHA-256")
        client.process_server_first_message(server.evaluate(client.first_message()))
        final = client.final_message()
        if bad == "proof":
            head, proof = final.split(b",p=")
            flipped = bytes([base64.b64decode(proof)[0] ^ 1]) + base64.b64decode(proof)[1:]
            final = head + b",p=" + base64.b64encode(flipped)
        else:
            final = final.replace(b"c=biws", b"c=" + base64.b64encode(b"y,,"))
        with pytest.raises(SaslAuthenticationFailed):
            server.evaluate(final)


def test_delegation_token_extension_is_refused() -> None:
    creds = store("SCRAM-SHA-256")
    server = ScramServer("SCRAM-SHA-256", lambda u, m: creds.get((u, m)))
    with pytest.raises(SaslAuthenticationFailed, match="Token Authentication failed"):
        server.evaluate(b"n,,n=alice,r=abc,tokenauth=true")


def test_other_extensions_are_ignored_as_kafka_ignores_them() -> None:
    creds = store("SCRAM-SHA-256")
    server = ScramServer("SCRAM-SHA-256", lambda u, m: creds.get((u, m)))
    assert server.evaluate(b"n,,n=alice,r=abc,foo=bar").startswith(b"r=abc")


def test_authzid_other_than_the_user_is_refused_with_kafkas_message() -> None:
    creds = store("SCRAM-SHA-256")
    server = ScramServer("SCRAM-SHA-256", lambda u, m: creds.get((u, m)))
    with pytest.raises(SaslAuthenticationFailed) as e:
        server.evaluate(b"n,a=admin,n=alice,r=abc")
    assert e.value.client_message == (
        "Authentication failed: Client requested an authorization id that is different from username"
    )


def test_too_few_iterations_and_malformed_messages_are_refused() -> None:
    creds = store("SCRAM-SHA-256", iterations=1000)
    for message, reason in [
        (b"n,,n=alice,r=abc", "less than the minimum 4096"),
        (b"p=tls-unique,,n=alice,r=abc", "client first message format"),
        (b"n,,n=al,ice,r=abc", "client first message format"),
        (b"\xff\xfe", "not UTF-8"),
    ]:
        server = ScramServer("SCRAM-SHA-256", lambda u, m: creds.get((u, m)))
        with pytest.raises(SaslAuthenticationFailed, match=reason):
            server.evaluate(message)


def test_escaped_user_names() -> None:
    cred = scram_credential("a,b=c", "SCRAM-SHA-256", "pw", b"salt", 4096)
    server, _ = exchange("SCRAM-SHA-256", "a=2Cb=3Dc", "pw", {("a,b=c", "SCRAM-SHA-256"): cred})
    assert server.authorization_id == "a,b=c"


def test_the_rfc_7677_example_exchange() -> None:
    # RFC 7677 section 3: user "user", password "pencil"; the server's nonce fixed to the RFC's.
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = scram_credential("user", "SCRAM-SHA-256", "pencil", salt, 4096)
    assert base64.b64encode(cred.stored_key) == b"WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY="
    server = ScramServer(
        "SCRAM-SHA-256",
        lambda u, m: cred if u == "user" else None,
        server_nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    )
    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    assert (
        server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
        == f"r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
    )
    final = f"c=biws,r={nonce},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=".encode()
    assert server.evaluate(final) == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
