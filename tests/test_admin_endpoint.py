"""Where `zk2kraft admin` finds the controller's listener and how it logs in, from the controller's
properties as Kafka's controller client reads them (no sockets: the resolution alone)."""

from __future__ import annotations

import pytest

from migrator.controller.client.admin_endpoint import parse_bootstrap, resolve_endpoint
from migrator.controller.security.client_security import ClientSecurity
from migrator.errors import BadInputError

JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="s3cret-pw";'
)


def test_the_controller_listener_of_the_properties_with_its_security() -> None:
    props = {
        "listeners": "INTERNAL://0.0.0.0:9094,CONTROLLER://0.0.0.0:9093",
        "advertised.listeners": "CONTROLLER://ctl1.example:19093",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,CONTROLLER:SASL_SSL",
        "ssl.truststore.location": "/etc/kafka/ca.pem",
        "listener.name.controller.ssl.endpoint.identification.algorithm": "",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
        "listener.name.controller.scram-sha-512.sasl.jaas.config": JAAS,
    }
    e = resolve_endpoint(None, None, props)
    assert e is not None and (e.host, e.port) == ("ctl1.example", 19093)
    s = e.security
    assert (s.security_protocol, s.sasl_mechanism, s.username, s.password) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "admin",
        "s3cret-pw",
    )
    assert s.ssl_cafile == "/etc/kafka/ca.pem" and not s.ssl_check_hostname
    assert "s3cret" not in repr(e)
    # the first listener without controller.listener.names; a wildcard host is dialled on loopback
    plain = resolve_endpoint(None, None, {"listeners": "PLAINTEXT://0.0.0.0:9093"})
    assert plain is not None and (plain.host, plain.port) == ("127.0.0.1", 9093)
    assert plain.security.security_protocol == "PLAINTEXT"
    # --bootstrap-controller picks the listener by port; --command-config's security wins
    other = resolve_endpoint("10.0.0.7:9094", None, props)
    assert other is not None and other.security.security_protocol == "PLAINTEXT"
    given = ClientSecurity("SSL", ssl_cafile="/x.pem")
    assert resolve_endpoint("ctl:9093", given, props).security is given  # type: ignore[union-attr]


def test_announced_listeners_and_nothing_at_all() -> None:
    announced = [("SECURE", "SASL_SSL", "0.0.0.0", 9095)]
    assert resolve_endpoint(None, None, {}) is None
    with pytest.raises(BadInputError, match="SASL_SSL: give --config"):
        resolve_endpoint(None, None, {}, announced)
    e = resolve_endpoint(None, ClientSecurity(), {}, announced)
    assert e is not None and (e.host, e.port) == ("127.0.0.1", 9095)
    assert "announcement" in e.origin


def test_bad_settings_are_one_line() -> None:
    with pytest.raises(BadInputError, match="HOST:PORT"):
        parse_bootstrap("ctl1")
    assert parse_bootstrap("[::1]:9093,other:1") == ("::1", 9093)
    props = {
        "listeners": "CONTROLLER://:9093",
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": (
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="pw";'
        ),
    }
    with pytest.raises(BadInputError) as e:
        resolve_endpoint(None, None, props)
    assert "listener.name.controller.plain.sasl.jaas.config" in str(e.value) and "pw" not in str(e.value)
