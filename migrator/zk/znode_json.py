"""The JSON of Kafka's znodes: Jackson's compact output as Kafka writes it, strict reading (no NaN,
no duplicate tricks: what Kafka's parser would refuse is refused), and the field checks every znode
decoder uses; `ZnodeError` names the path and the reason."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, NoReturn

from migrator.errors import BadInputError

__all__ = [
    "ZnodeError",
    "check_int",
    "get_field",
    "get_int",
    "get_str",
    "get_version",
    "int_list",
    "json_bytes",
    "json_object",
    "json_string",
    "json_type",
    "load_json",
    "long_string",
    "scan_json",
]


I32_MIN, I32_MAX = -(2**31), 2**31 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


class ZnodeError(BadInputError):
    """A znode Kafka could not read, or zk2kraft will not guess at: names the path and the reason."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


_ESCAPES = {i: f"\\u{i:04X}" for i in range(0x20)}
_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r", 0x22: '\\"', 0x5C: "\\\\"})


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _surrogates(m: re.Match[str]) -> str:
    c = ord(m.group()) - 0x10000
    return f"\\u{0xD800 + (c >> 10):04X}\\u{0xDC00 + (c & 0x3FF):04X}"


def json_string(s: str) -> str:
    """Jackson's UTF8JsonGenerator: a character beyond U+FFFF is written as an escaped surrogate pair
    (COMBINE_UNICODE_SURROGATES_IN_UTF8 is off by default, and Kafka leaves it off)."""
    s = s.translate(_ESCAPES)
    if not s.isascii():
        s = _ASTRAL.sub(_surrogates, s)
    return '"' + s + '"'


def _dump(value: Any) -> str:
    """Jackson's compact JSON: no spaces, raw UTF-8, upper-case \\u00XX for other control chars."""
    t = type(value)
    if t is str:
        return json_string(value)
    if t is bool:
        return "true" if value else "false"
    if t is int:
        return str(value)
    if value is None:
        return "null"
    if t is dict:
        return "{" + ",".join(json_string(k) + ":" + _dump(v) for k, v in value.items()) + "}"
    if t is list or t is tuple:
        return "[" + ",".join(_dump(v) for v in value) + "]"
    raise TypeError(f"cannot write {t.__name__} as znode JSON")


def json_bytes(value: Any) -> bytes:
    return _dump(value).encode("utf-8", "replace")


class _NonFinite(ValueError):
    pass


def _reject_constant(name: str) -> NoReturn:
    raise _NonFinite(name)


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
scan_json = _DECODER.scan_once


def load_json(path: str, data: bytes | None, what: str) -> Any:
    if data is None:
        raise ZnodeError(path, f"{what}: the znode has no data")
    if not data:
        raise ZnodeError(path, f"{what}: the znode is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ZnodeError(path, f"malformed {what} JSON: not UTF-8 at byte {e.start}") from None
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as e:
        at = len(text[: e.pos].encode("utf-8"))
        raise ZnodeError(path, f"malformed {what} JSON at byte {at}: {e.msg}") from None
    except _NonFinite as e:
        raise ZnodeError(path, f"malformed {what} JSON: {e} is not a JSON number") from None
    except RecursionError:
        raise ZnodeError(path, f"malformed {what} JSON: nested too deeply") from None
    except ValueError:  # an integer too long for Python's int conversion limit
        raise ZnodeError(path, f"malformed {what} JSON: a number is too long") from None


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number" if isinstance(value, int) else "a fractional number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def json_object(path: str, value: Any, what: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise ZnodeError(path, f"{what}: expected a JSON object, got {json_type(value)}")
    return value


REQUIRED: Any = object()


def get_field(path: str, obj: dict[str, Any], key: str, what: str, default: Any) -> Any:
    if key in obj:
        return obj[key]
    if default is REQUIRED:
        raise ZnodeError(path, f"{what}: missing field {key!r}")
    return default


def get_int(
    path: str,
    obj: dict[str, Any],
    key: str,
    what: str,
    default: Any = REQUIRED,
    lo: int = I32_MIN,
    hi: int = I32_MAX,
) -> Any:
    if key not in obj:
        return get_field(path, obj, key, what, default)
    return check_int(path, obj[key], f"{what}: field {key!r}", lo, hi)


def check_int(path: str, value: Any, where: str, lo: int = I32_MIN, hi: int = I32_MAX) -> int:
    if type(value) is not int:
        raise ZnodeError(path, f"{where} must be an integer, got {json_type(value)}")
    if not lo <= value <= hi:
        raise ZnodeError(path, f"{where} is out of range ({value})")
    return value


def get_str(path: str, obj: dict[str, Any], key: str, what: str, default: Any = REQUIRED) -> Any:
    if key not in obj:
        return get_field(path, obj, key, what, default)
    value = obj[key]
    if type(value) is not str:
        raise ZnodeError(path, f"{what}: field {key!r} must be a string, got {json_type(value)}")
    return value


def int_list(path: str, value: Any, where: str) -> list[int]:
    if type(value) is not list:
        raise ZnodeError(path, f"{where} must be an array of integers, got {json_type(value)}")
    for v in value:
        if type(v) is not int or not I32_MIN <= v <= I32_MAX:
            raise ZnodeError(path, f"{where} must be an array of 32-bit integers")
    return value


def get_version(path: str, obj: dict[str, Any], what: str, supported: Sequence[int]) -> int:
    if "version" not in obj:
        raise ZnodeError(path, f"{what}: missing field 'version'")
    version = obj["version"]
    if type(version) is not int:
        raise ZnodeError(path, f"{what}: field 'version' must be an integer, got {json_type(version)}")
    if version not in supported:
        known = ", ".join(map(str, supported))
        raise ZnodeError(path, f"unknown {what} version {version} (zk2kraft reads version {known})")
    return version


def long_string(path: str, value: Any, where: str) -> int:
    """A Long that Kafka writes as a JSON string (timestamps, producer id bounds)."""
    if type(value) is not str or not re.fullmatch(r"[+-]?[0-9]+", value):
        raise ZnodeError(path, f"{where} must be a string of decimal digits")
    n = int(value)
    if not I64_MIN <= n <= I64_MAX:
        raise ZnodeError(path, f"{where} is out of range")
    return n
