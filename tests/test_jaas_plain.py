"""Kafka's JAAS configuration and SASL/PLAIN verification; kafka-python's PLAIN client as the peer."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.net.sasl.plain import SaslMechanismPlain

from migrator.controller.security.jaas import parse_jaas_config, parse_jaas_file, server_login_modules
from migrator.controller.security.plain_server import PLAIN_LOGIN_MODULE, PlainServer, plain_users
from migrator.controller.security.sasl_errors import SaslAuthenticationFailed
from migrator.errors import BadInputError

CONFIG = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)

FILE = """
// the controller's JAAS file
KafkaServer {
   org.apache.kafka.common.security.plain.PlainLoginModule required
   username="admin"
   password='admin-secret'   /* single quotes are quotes too */
   user_admin="admin-secret"
   user_bob="b\\"ob\\tpw";
};

sasl_ssl.KafkaServer {
   org.apache.kafka.common.security.scram.ScramLoginModule required;
   org.apache.kafka.common.security.plain.PlainLoginModule sufficient user_carol=carol-pw;
};
Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=zk password=zk; };
"""


def test_property_value_as_kafkas_jaas_config() -> None:
    [entry] = parse_jaas_config(CONFIG)
    assert entry.module == PLAIN_LOGIN_MODULE
    assert entry.flag == "REQUIRED"
    assert entry.options["user_alice"] == "alice-secret"
    assert "secret" not in repr(entry)


def test_several_entries_comments_and_flags() -> None:
    entries = parse_jaas_config("a.B optional x=1; // trailing\n c.D Requisite y='2' z=\"3\";")
    assert [(e.module, e.flag, dict(e.options)) for e in entries] == [
        ("a.B", "OPTIONAL", {"x": "1"}),
        ("c.D", "REQUISITE", {"y": "2", "z": "3"}),
    ]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "login module not specified"),
        ("a.B", "control flag not specified"),
        ("a.B always;", "invalid login module control flag"),
        ("a.B required user_x=;", "value not specified for key 'user_x'"),
        ("a.B required user_x", "value not specified for key 'user_x'"),
        ('a.B required user_x="pw"', "not terminated by semi-colon"),
    ],
)
def test_bad_jaas_config_is_one_line_without_secrets(text: str, error: str) -> None:
    with pytest.raises(BadInputError, match=error) as e:
        parse_jaas_config(text)
    assert "pw" not in str(e.value)


def test_jaas_file_sections_and_listener_lookup(tmp_path: Path) -> None:
    sections = parse_jaas_file(FILE)
    assert set(sections) == {"KafkaServer", "sasl_ssl.KafkaServer", "Client"}
    assert sections["KafkaServer"][0].options["user_bob"] == 'b"ob\tpw'
    assert sections["KafkaServer"][0].options["password"] == "admin-secret"
    path = tmp_path / "kafka_server_jaas.conf"
    path.write_text(FILE)
    # the listener's own section first, then KafkaServer; a listener property wins over both
    assert plain_users(server_login_modules({}, "SASL_SSL", "PLAIN", path)) == {"carol": b"carol-pw"}
    assert set(plain_users(server_login_modules({}, "CONTROLLER", "PLAIN", path))) == {"admin", "bob"}
    props = {"listener.name.sasl_ssl.plain.sasl.jaas.config": CONFIG}
    assert set(plain_users(server_login_modules(props, "SASL_SSL", "PLAIN", path))) == {"admin", "alice"}
    with pytest.raises(BadInputError, match="needs listener.name.x.plain.sasl.jaas.config"):
        server_login_modules({}, "X", "PLAIN")
    with pytest.raises(BadInputError, match="no PlainLoginModule|has no"):
        plain_users(parse_jaas_config("org.apache.kafka.common.security.scram.ScramLoginModule required;"))


def test_bad_jaas_file() -> None:
    with pytest.raises(BadInputError, match="not closed"):
        parse_jaas_file("KafkaServer { a.B required;")
    with pytest.raises(BadInputError, match="expected '{'"):
        parse_jaas_file("KafkaServer a.B required;")


def _server() -> PlainServer:
    return PlainServer(plain_users(parse_jaas_config(CONFIG)))


def test_kafka_python_plain_client_is_accepted() -> None:
    client = SaslMechanismPlain(sasl_plain_username="alice", sasl_plain_password="alice-secret")
    server = _server()
    client.receive(server.evaluate(client.auth_bytes()))
    assert client.is_authenticated()
    assert server.complete and server.authorization_id == "alice"


@pytest.mark.parametrize(
    ("message", "client_sees"),
    [
        (b"alice\0alice\0wrong", "Authentication failed: Invalid username or password"),
        (b"\0mallory\0alice-secret", "Authentication failed: Invalid username or password"),
        (b"\0\0alice-secret", "Authentication failed: username not specified"),
        (b"\0alice\0", "Authentication failed: password not specified"),
        (b"admin\0alice\0alice-secret", "different from username"),
        (b"alice\0alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (b"a\0b\0c\0d\0e", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    ],
)
def test_refusals_as_kafka_words_them(message: bytes, client_sees: str) -> None:
    server = _server()
    with pytest.raises(SaslAuthenticationFailed) as e:
        server.evaluate(message)
    assert client_sees in e.value.client_message
    assert "secret" not in str(e.value) and "secret" not in e.value.client_message
    assert not server.complete
