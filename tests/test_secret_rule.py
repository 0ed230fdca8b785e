"""Invariant 6 has one rule: `log dump`, the audit's rows, `check`'s messages and the controller's
DescribeConfigs hide exactly the configs `migrator.secrets.is_secret_config` names, no more, no less."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource

from cli.main import run
from migrator.controller.apis import admin_alter_api
from migrator.kraft.log import MetadataLog
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
# one distinct value per name, so each output's answer for each name can be read off one run
VALUES = {name: f"{VALUE}-{i:02d}" for i, name in enumerate(NAMES)}
CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


@pytest.mark.parametrize("name", NAMES)
def test_the_rule(name: str) -> None:
    assert is_secret_config(name) is (name in SECRET)
    assert masked_config_value(name, VALUE) == (MASK if name in SECRET else VALUE)
    assert masked_config_value(name, None) is None


def _image() -> ClusterImage:
    entity = ConfigEntity(resource_type="BROKER", name="1", configs=dict(VALUES))
    return ClusterImage(configs={("BROKER", "1"): entity})


def _log_dump_hides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> set[str]:
    """`zk2kraft log dump --json` over a log holding one ConfigRecord per name."""
    recs = [
        record("ConfigRecord", 0, ResourceType=4, ResourceName="1", Name=name, Value=value)
        for name, value in VALUES.items()
    ]
    root = tmp_path / "meta"
    with MetadataLog.open(root, writable=True, cluster_id=CLUSTER, node_id=3000) as mlog:
        mlog.append(recs, epoch=1, timestamp_ms=1_700_000_000_000)
    capsys.readouterr()
    assert run(["log", "dump", "--json", "--log-dir", str(root)]) == 0
    shown = {
        row["fields"]["Name"]: row["fields"]["Value"]
        for row in map(json.loads, capsys.readouterr().out.splitlines())
        if row["type"] == "ConfigRecord"
    }
    assert set(shown) == set(NAMES) and all(shown[n] in (MASK, VALUES[n]) for n in NAMES)
    return {n for n in NAMES if shown[n] == MASK}


def _audit_hides() -> set[str]:
    [row] = [r for r in R.image_rows(_image(), "zookeeper") if r["kind"] == "broker_config"]
    fields = json.loads(row["fields"]) if isinstance(row["fields"], str) else row["fields"]
    assert set(fields) == set(NAMES)
    return {n for n in NAMES if VALUES[n] not in str(fields[n])}


def _check_hides() -> set[str]:
    info = next(iter(checks.registry().values()))
    hidden = set()
    for name, value in VALUES.items():
        plain = checks.finding(info, f"broker 1 has {name}={value} set").message
        as_json = checks.finding(info, f'config {{"{name}":"{value}"}}').message
        assert (value in plain) == (value in as_json)
        if value not in plain:
            hidden.add(name)
    return hidden


def _describe_configs_hides() -> set[str]:
    request = DescribeConfigsRequest(
        resources=(DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=None),),
        include_synonyms=True,
    )
    # DescribeConfigs reads only the service's image (a real one here)
    response = admin_alter_api._describe_configs(types.SimpleNamespace(image=_image()), 4, request)
    [result] = response.results
    entries = {e.name: e for e in result.configs}
    assert set(entries) == set(NAMES)
    for name, e in entries.items():
        assert [s.value for s in e.synonyms] == [e.value]
        assert e.is_sensitive is (e.value is None) and e.value in (None, VALUES[name])
    return {n for n, e in entries.items() if e.is_sensitive}


def test_every_output_hides_the_same_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rule = {n for n in NAMES if is_secret_config(n)}
    assert rule == set(SECRET)
    outputs = {
        "log dump": _log_dump_hides(tmp_path, capsys),
        "audit rows": _audit_hides(),
        "check": _check_hides(),
        "DescribeConfigs": _describe_configs_hides(),
    }
    for output, hidden in outputs.items():
        assert hidden == rule, f"{output} disagrees with migrator.secrets: {sorted(hidden ^ rule)}"


def test_free_text_keeps_what_is_not_secret() -> None:
    text = (
        'salt=c2FsdA==,stored_key=AAAA SCRAM-SHA-256: x "hmac":"abc" retention.ms=1000 a=ssl.key.password=pw'
    )
    out = redact_text(text)
    for gone in ("c2FsdA==", "AAAA", "abc", "=pw", " x"):
        assert gone not in out
    assert "retention.ms=1000" in out
