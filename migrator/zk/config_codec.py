"""/config/<type>/<name>: entity configs and client quota values, as Kafka reads and writes them."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal

from migrator.zk.jvm_order import config_key_order
from migrator.zk.znode_json import (
    REQUIRED,
    ZnodeError,
    get_field,
    get_version,
    json_bytes,
    json_object,
    json_type,
    load_json,
)

__all__ = [
    "decode_config",
    "decode_quota_value",
    "encode_config",
    "encode_quota_value",
]


def decode_config(path: str, data: bytes | None) -> dict[str, str]:
    """ConfigEntityZNode.decode: keys in JSON order. No data at all is an empty config, as in Kafka."""
    if not data:
        return {}
    what = "config"
    obj = json_object(path, load_json(path, data, what), what)
    get_version(path, obj, what, (1,))
    config = json_object(path, get_field(path, obj, "config", what, REQUIRED), f"{what}: field 'config'")
    for key, value in config.items():
        if type(value) is not str:
            raise ZnodeError(path, f"{what}: value of {key!r} must be a string, got {json_type(value)}")
    return config


def encode_config(configs: Mapping[str, str]) -> bytes:
    """ConfigEntityZNode.encode: keys in `config_key_order`."""
    config = {k: configs[k] for k in config_key_order(list(configs))}
    return json_bytes({"version": 1, "config": config})


_JAVA_DOUBLE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?")


def decode_quota_value(path: str, key: str, value: str) -> float:
    """Double.valueOf of a quota config value (Kafka stores quotas as strings)."""
    text = value.strip()
    if not _JAVA_DOUBLE.fullmatch(text):
        raise ZnodeError(path, f"client quota {key!r} is not a number")
    number = float(text.rstrip("fFdD"))
    if not math.isfinite(number):
        raise ZnodeError(path, f"client quota {key!r} is out of range")
    return number


def encode_quota_value(value: float) -> str:
    """A quota as a config string: integral values without ".0" (what `kafka-configs` users write and
    what Kafka writes for its long-typed quotas), others as Java's Double.toString."""
    if not math.isfinite(value):
        raise ValueError(f"quota value {value} is not finite")
    if value == int(value) and abs(value) < 2**63:
        return str(int(value))
    if 1e-3 <= abs(value) < 1e7:
        return repr(value)
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    exp10 = len(digits) + int(exponent) - 1
    return ("-" if sign else "") + text[0] + "." + (text[1:] or "0") + "E" + str(exp10)
