"""Broker server.properties checks: each code has a file that triggers it and one that does not."""

from __future__ import annotations

import pytest

from migrator.migration.broker_config import BrokerConfigFile, check_broker_configs, parse_ibp

GOOD = {
    "broker.id": "1",
    "zookeeper.connect": "zk:2181/kafka",
    "zookeeper.metadata.migration.enable": "true",
    "inter.broker.protocol.version": "3.9",
    "controller.quorum.bootstrap.servers": "ctrl0:9093,ctrl1:9093,ctrl2:9093",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "listeners": "PLAINTEXT://:9092",
    "log.dirs": "/var/lib/kafka/data",
    "ssl.keystore.password": "hunter2-keystore",
    "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="pw-s3cret";',
}


def _file(name: str = "b1.properties", **changes: str | None) -> BrokerConfigFile:
    props = dict(GOOD)
    for k, v in changes.items():
        key = k.replace("__", ".")
        if v is None:
            props.pop(key, None)
        else:
            props[key] = v
    return BrokerConfigFile(f"/cfg/{name}", props)


def _codes(files: list[BrokerConfigFile], registered: list[int] | None = None) -> list[str]:
    return [f.code for f in check_broker_configs(files, registered)]


def test_good_config_has_no_findings():
    assert _codes([_file()], registered=[1]) == []


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"zookeeper__metadata__migration__enable": None}, "BROKER_CONFIG_MIGRATION_DISABLED"),
        ({"zookeeper__metadata__migration__enable": "false"}, "BROKER_CONFIG_MIGRATION_DISABLED"),
        ({"inter__broker__protocol__version": None}, "BROKER_CONFIG_IBP_UNSET"),
        ({"inter__broker__protocol__version": "three"}, "BROKER_CONFIG_IBP_INVALID"),
        ({"inter__broker__protocol__version": "3.3-IV3"}, "BROKER_CONFIG_IBP_TOO_OLD"),
        ({"inter__broker__protocol__version": "2.8"}, "BROKER_CONFIG_IBP_TOO_OLD"),
        ({"controller__quorum__bootstrap__servers": None}, "BROKER_CONFIG_NO_QUORUM"),
        (
            {
                "controller__quorum__bootstrap__servers": None,
                "controller__quorum__voters": "3000@c0:9093,c1:9093",
            },
            "BROKER_CONFIG_QUORUM_INVALID",
        ),
        ({"controller__listener__names": None}, "BROKER_CONFIG_NO_CONTROLLER_LISTENER"),
        ({"controller__listener__names": " "}, "BROKER_CONFIG_NO_CONTROLLER_LISTENER"),
        (
            {"listener__security__protocol__map": "PLAINTEXT:PLAINTEXT"},
            "BROKER_CONFIG_CONTROLLER_LISTENER_UNMAPPED",
        ),
        ({"listener__security__protocol__map": None}, "BROKER_CONFIG_CONTROLLER_LISTENER_UNMAPPED"),
        ({"listener__security__protocol__map": "garbage"}, "BROKER_CONFIG_CONTROLLER_LISTENER_UNMAPPED"),
        ({"broker__id": None}, "BROKER_CONFIG_BROKER_ID_MISSING"),
        ({"broker__id": "-1"}, "BROKER_CONFIG_BROKER_ID_INVALID"),
        ({"broker__id": "one"}, "BROKER_CONFIG_BROKER_ID_INVALID"),
        ({"broker__id": "1001"}, "BROKER_CONFIG_BROKER_ID_INVALID"),
        (
            {"log__dirs": "/d1,/d2", "inter__broker__protocol__version": "3.7-IV1"},
            "BROKER_CONFIG_JBOD_NEEDS_IBP_37",
        ),
        (
            {"log__dirs": "/d1,/d2", "inter__broker__protocol__version": "3.6"},
            "BROKER_CONFIG_JBOD_NEEDS_IBP_37",
        ),
        ({"process__roles": "controller"}, "BROKER_CONFIG_KRAFT_MODE_FILE"),
    ],
)
def test_each_per_file_code_triggers(changes, code):
    codes = _codes([_file(**changes)], registered=[1])
    assert code in codes, codes


@pytest.mark.parametrize(
    "changes",
    [
        {"zookeeper__metadata__migration__enable": " TRUE "},
        {"inter__broker__protocol__version": "3.4"},
        {"inter__broker__protocol__version": "3.4-IV0"},
        {
            "controller__quorum__bootstrap__servers": None,
            "controller__quorum__voters": "3000@c0:9093,3001@[::1]:9093",
        },
        # without an explicit map Kafka maps every security protocol to itself
        {"controller__listener__names": "SSL", "listener__security__protocol__map": None},
        {"listener__security__protocol__map": "plaintext:PLAINTEXT,controller:SSL"},
        {"broker__id": "1000"},
        {"broker__id": "1500", "reserved__broker__max__id": "2000"},
        {"log__dirs": "/d1,/d2", "inter__broker__protocol__version": "3.7-IV2"},
        {"log__dirs": "/d1,/d2", "inter__broker__protocol__version": "3.7"},
        {"log__dirs": None, "log__dir": "/only"},
    ],
)
def test_valid_variants_do_not_trigger(changes):
    registered = [int(changes.get("broker__id", "1"))]
    assert _codes([_file(**changes)], registered=registered) == []


def test_cross_file_codes():
    a = _file("a.properties")
    b = _file("b.properties", broker__id="2", inter__broker__protocol__version="3.8")
    dup = _file("c.properties", broker__id="2")
    codes = _codes([a, b, dup], registered=[1, 2])
    assert "BROKER_CONFIG_DUPLICATE_BROKER_ID" in codes
    assert "BROKER_CONFIG_IBP_MISMATCH" in codes
    # same values everywhere: no cross-file findings
    assert _codes([a, _file("b.properties", broker__id="2")], registered=[1, 2]) == []


def test_quorum_mismatch_and_node_id_collision():
    a = _file(
        "a.properties", controller__quorum__bootstrap__servers=None, controller__quorum__voters="3000@c0:9093"
    )
    b = _file(
        "b.properties",
        broker__id="2",
        controller__quorum__bootstrap__servers=None,
        controller__quorum__voters="2@c0:9093",
    )
    findings = check_broker_configs([a, b], [1, 2])
    codes = [f.code for f in findings]
    assert "BROKER_CONFIG_QUORUM_MISMATCH" in codes
    collision = next(f for f in findings if f.code == "BROKER_CONFIG_NODE_ID_COLLISION")
    assert collision.ids == [2]
    # the same voters string on both, ids disjoint from brokers: clean
    b2 = _file(
        "b.properties",
        broker__id="2",
        controller__quorum__bootstrap__servers=None,
        controller__quorum__voters="3000@c0:9093",
    )
    assert _codes([a, b2], [1, 2]) == []


def test_coverage_against_registered_brokers():
    findings = check_broker_configs([_file()], registered=[1, 2, 3])
    missing = next(f for f in findings if f.code == "BROKER_CONFIG_MISSING")
    assert missing.ids == [2, 3]
    assert "2, 3" in missing.message
    findings = check_broker_configs([_file(), _file("b.properties", broker__id="7")], registered=[1])
    extra = next(f for f in findings if f.code == "BROKER_CONFIG_NOT_REGISTERED")
    assert extra.ids == [7]
    assert _codes([_file()], registered=None) == []


def test_messages_name_the_file_and_never_quote_secrets():
    bad = _file(
        "broker-9.properties",
        broker__id="9",
        zookeeper__metadata__migration__enable="no",
        inter__broker__protocol__version="3.1",
        controller__listener__names=None,
    )
    findings = check_broker_configs([bad], registered=[1])
    text = " ".join(f.message + f.hint for f in findings)
    assert "broker-9.properties (broker 9)" in text
    assert "hunter2" not in text and "pw-s3cret" not in text


def test_parse_ibp():
    assert parse_ibp("3.7-IV2") == (3, 7, 0, 2)
    assert parse_ibp("3.7")[:3] == (3, 7, 0)
    assert parse_ibp("3.7") > parse_ibp("3.7-IV4")
    assert parse_ibp("0.10.2-IV0") == (0, 10, 2, 0)
    assert parse_ibp("0.10.2") < parse_ibp("3.4-IV0")
    assert parse_ibp("3.4.1") == parse_ibp("3.4")
    assert parse_ibp("3.x") is None
    assert parse_ibp("") is None
