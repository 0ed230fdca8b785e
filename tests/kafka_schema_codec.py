"""kafka-python's JSON-schema codec as the independent encoder for messages zk2kraft declares itself
(the versions Kafka 4.0, and so kio, dropped): Kafka 3.9's field lists written out as JSON resources,
kafka-python message classes built from them, and the same value as a kafka-python object and as a
kio entity, so a test can compare the two encodings byte for byte."""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import json
import sys
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode


def F(name: str, type_: str, versions: str, **kw: Any) -> dict[str, Any]:  # noqa: N802 - reads like the JSON
    return {"name": name, "type": type_, "versions": versions, **kw}


def kafka_python_classes(root: Path, package: str, schemas: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """kafka-python message classes for ``schemas`` (it reads them as JSON resources of ``package``).

    Building a response class registers it as kafka-python's decoder for its apiKey, process-wide; the
    registry is put back, or later kafka-python clients in the run would decode those apiKeys with these
    (garbage-collected) classes."""
    from kafka.protocol.api_header import ResponseClassRegistry
    from kafka.protocol.api_message import ApiMessage

    registry = dict(ResponseClassRegistry._response_class_registry)
    pkg = root / package
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, schema in schemas.items():
        (pkg / f"{name}.json").write_text(json.dumps({"name": name, **schema}))
    sys.path.insert(0, str(root))
    try:
        resources = importlib.import_module(package)
        return {name: type(name, (ApiMessage,), {}, load_json=resources) for name in schemas}
    finally:
        sys.path.remove(str(root))
        ResponseClassRegistry._response_class_registry.clear()
        ResponseClassRegistry._response_class_registry.update(registry)


def kp_value(cls: Any, container: Any, value: dict[str, Any]) -> Any:
    """A kafka-python data object for `value`: nested lists become the schema's nested struct classes."""
    kwargs: dict[str, Any] = {}
    for fname, f in cls.fields.items():
        if fname not in value:
            continue
        v = value[fname]
        if isinstance(v, list) and v and isinstance(v[0], dict):
            sub = f._json["type"][2:]
            sub_cls = getattr(cls, sub, None) or getattr(container, sub)
            v = [kp_value(sub_cls, container, item) for item in v]
        kwargs[fname] = v
    return cls(**kwargs)


def kio_value(cls: Any, value: dict[str, Any], names: Mapping[str, str] | None = None) -> Any:
    """The kio entity for `value`, taking only the fields this version declares (``names``: JSON field
    names that kio spells otherwise)."""
    by_kio = {(names or {}).get(k, k): v for k, v in value.items()}
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        v = by_kio[f.name]
        if f.metadata.get("kafka_type") == "timedelta_i32":
            v = datetime.timedelta(milliseconds=v)
        elif f.metadata.get("kafka_type") == "error_code":
            v = ErrorCode(v)
        elif isinstance(v, list):
            inner = typing.get_args(f.type)[0]
            if dataclasses.is_dataclass(inner):
                v = tuple(kio_value(inner, item, names) for item in v)
            else:
                v = tuple(v)
        kwargs[f.name] = v
    return cls(**kwargs)
