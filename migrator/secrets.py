"""Invariant 6 in one place: which configs are secrets, and how a secret is hidden.

`log dump`, `check`/`status` messages, the audit's rows and the controller's DescribeConfigs all ask
`is_secret_config`, so they never disagree on a name. The rule is Kafka 3.9's PASSWORD-type configs
(`SslConfigs`, `SaslConfigs`, `ZkConfigs`, `PasswordEncoderConfigs`, `DelegationTokenManagerConfigs`),
with their `listener.name.<l>.` and `listener.name.<l>.<mechanism>.` forms as Kafka's
DynamicBrokerConfig resolves them, plus name patterns that cover plugins' and future password
configs (`*password*`, `*secret*`, `*jaas*`, `*credential*`, `*.key`): a value shown by mistake
cannot be taken back, one hidden by mistake costs a look at the source.
"""

from __future__ import annotations

import re

__all__ = [
    "MASK",
    "PASSWORD_CONFIGS",
    "SCRAM_MECHANISMS",
    "is_secret_config",
    "masked_config_value",
    "redact_text",
]

#: what a secret value is shown as
MASK = "******"

#: Kafka 3.9's ConfigDef.Type.PASSWORD configs, by name
PASSWORD_CONFIGS = frozenset(
    {
        # SslConfigs.addClientSslSupport (brokers and clients)
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        # SaslConfigs
        "sasl.jaas.config",
        # ZkConfigs (the broker's TLS to ZooKeeper)
        "zookeeper.ssl.keystore.password",
        "zookeeper.ssl.truststore.password",
        # PasswordEncoderConfigs (encodes the password configs stored in ZooKeeper)
        "password.encoder.secret",
        "password.encoder.old.secret",
        # DelegationTokenManagerConfigs (master.key is the deprecated alias of secret.key)
        "delegation.token.secret.key",
        "delegation.token.master.key",
    }
)

#: ScramMechanism names: in ZooKeeper's /config/users/<u> they are config keys holding a credential
SCRAM_MECHANISMS = frozenset({"scram-sha-256", "scram-sha-512"})

_LISTENER_PREFIX = re.compile(r"^listener\.name\.[^.]+\.")
_SASL_MECHANISM_PREFIX = re.compile(r"^[^.]+\.(?=sasl\.)")
_SECRET_WORDS = ("password", "secret", "jaas", "credential")


def is_secret_config(name: str) -> bool:
    """True when a config of this name holds a secret; the one rule every output follows."""
    n = name.strip().lower()
    if n in SCRAM_MECHANISMS or any(word in n for word in _SECRET_WORDS):
        return True
    if n == "key" or n.endswith(".key"):
        return True
    # listener.name.<l>.ssl.keystore.certificate.chain, listener.name.<l>.<mech>.sasl.jaas.config
    base = _LISTENER_PREFIX.sub("", n, count=1)
    return base in PASSWORD_CONFIGS or _SASL_MECHANISM_PREFIX.sub("", base, count=1) in PASSWORD_CONFIGS


def masked_config_value(name: str, value: str | None) -> str | None:
    """A config value as it may be shown: `MASK` for a secret, the value otherwise (None stays None)."""
    if value is not None and is_secret_config(name):
        return MASK
    return value


# SCRAM credential strings as ZooKeeper stores them (`salt=…,stored_key=…,server_key=…`) and token HMACs
_CREDENTIAL_FIELDS = re.compile(r"(salt|stored_key|server_key|hmac)=[^,\s\"'}]*", re.IGNORECASE)
# `key=value` / `"key": "value"` pairs in free text; the value is hidden when the key names a secret
_PAIR = re.compile(
    r"((?:\"|')?([\w.-]+)(?:\"|')?\s*[:=]\s*)(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^,\s}]+)",
)


def _pair(m: re.Match[str]) -> str:
    key = m.group(2)
    if is_secret_config(key) or "hmac" in key.lower():
        return f"{m.group(1)}<redacted>"
    # a value may itself be `password=…`: look inside what was not hidden
    return m.group(1) + _PAIR.sub(_pair, m.group(3))


def redact_text(text: str) -> str:
    """Free text (a finding's message, an error) with every credential and secret config value hidden."""
    text = _CREDENTIAL_FIELDS.sub(lambda m: f"{m.group(1)}=<redacted>", text)
    return _PAIR.sub(_pair, text)
