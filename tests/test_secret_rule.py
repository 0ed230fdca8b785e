"""Invariant 6 has one rule: `log dump`, the audit's rows, `check`'s messages and the controller's
DescribeConfigs hide exactly the configs `migrator.secrets.is_secret_config` names, no more, no less."""

from __future__ import annotations

import types

import pytest
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource

from cli.log_cmds import redacted_fields
from migrator.controller import admin_alter_api
from migrator.kraft.records import record
from migrator.migration import checks
from migrator.model import ClusterImage, ConfigEntity
from migrator.secrets import MASK, is_secret_config, masked_config_value, redact_text
from spark_audit import rows as R

# Kafka 3.9's PASSWORD-type configs, their listener-prefixed forms, and configs that are not secrets
SECRET = [
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.truststore.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.certificates",
    "sasl.jaas.config",
    "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config",
    "listener.name.ssl.ssl.keystore.certificate.chain",
    "listener.name.internal.ssl.key.password",
    "zookeeper.ssl.keystore.password",
    "zookeeper.ssl.truststore.password",
    "password.encoder.secret",
    "password.encoder.old.secret",
    "delegation.token.secret.key",
    "delegation.token.master.key",
    "my.plugin.password",
    "SSL.KEY.PASSWORD",
]
SHOWN = [
    "retention.ms",
    "cleanup.policy",
    "sasl.enabled.mechanisms",
    "sasl.mechanism.inter.broker.protocol",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.truststore.location",
    "ssl.keymanager.algorithm",
    "ssl.client.auth",
    "listener.name.ssl.ssl.keystore.location",
    "delegation.token.max.lifetime.ms",
    "zookeeper.ssl.keystore.location",
    "log.retention.hours",
]
NAMES = SECRET + SHOWN
VALUE = "v4lue-7731"


@pytest.mark.parametrize("name", NAMES)
def test_the_rule(name: str) -> None:
    assert is_secret_config(name) is (name in SECRET)
    assert masked_config_value(name, VALUE) == (MASK if name in SECRET else VALUE)
    assert masked_config_value(name, None) is None


def _log_dump_hides(name: str) -> bool:
    rec = record("ConfigRecord", 0, ResourceType=4, ResourceName="1", Name=name, Value=VALUE)
    value = redacted_fields(rec)["Value"]
    assert value in (MASK, VALUE)
    return value == MASK


def _audit_hides(name: str) -> bool:
    image = ClusterImage(
        configs={("BROKER", "1"): ConfigEntity(resource_type="BROKER", name="1", configs={name: VALUE})}
    )
    [row] = [r for r in R.image_rows(image, "zookeeper") if r["kind"] == "broker_config"]
    return VALUE not in str(row)


def _check_hides(name: str) -> bool:
    info = next(iter(checks.registry().values()))
    texts = [
        checks.finding(info, f"broker 1 has {name}={VALUE} set").message,
        checks.finding(info, f'config {{"{name}":"{VALUE}"}}').message,
    ]
    hidden = [VALUE not in t for t in texts]
    assert hidden[0] == hidden[1]
    return hidden[0]


def _describe_configs_hides(name: str) -> bool:
    image = ClusterImage(
        configs={("BROKER", "1"): ConfigEntity(resource_type="BROKER", name="1", configs={name: VALUE})}
    )
    request = DescribeConfigsRequest(
        resources=(DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=None),),
        include_synonyms=True,
    )
    # DescribeConfigs reads only the service's image (a real one here)
    response = admin_alter_api._describe_configs(types.SimpleNamespace(image=image), 4, request)
    [result] = response.results
    [entry] = result.configs
    assert entry.name == name and [s.value for s in entry.synonyms] == [entry.value]
    assert entry.is_sensitive is (entry.value is None)
    return bool(entry.is_sensitive)


def test_every_output_hides_the_same_names() -> None:
    outputs = {
        "log dump": _log_dump_hides,
        "audit rows": _audit_hides,
        "check": _check_hides,
        "DescribeConfigs": _describe_configs_hides,
    }
    for output, hides in outputs.items():
        wrong = [n for n in NAMES if hides(n) is not is_secret_config(n)]
        assert not wrong, f"{output} disagrees with migrator.secrets on {wrong}"


def test_free_text_keeps_what_is_not_secret() -> None:
    text = (
        'salt=c2FsdA==,stored_key=AAAA SCRAM-SHA-256: x "hmac":"abc" retention.ms=1000 a=ssl.key.password=pw'
    )
    out = redact_text(text)
    for gone in ("c2FsdA==", "AAAA", "abc", "=pw", " x"):
        assert gone not in out
    assert "retention.ms=1000" in out
