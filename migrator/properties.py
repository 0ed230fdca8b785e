"""Kafka's configuration files are Java properties; zk2kraft reads them for --config and --broker-config."""

from __future__ import annotations

from migrator.errors import BadInputError


def read_properties(path: str) -> dict[str, str]:
    """Java properties: `key=value` or `key: value`, `#`/`!` comments, backslash continuations."""
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        raise BadInputError(f"cannot read {path}: {e.strerror}") from None
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        key, value = (line[:sep], line[sep + 1 :]) if sep >= 0 else (line, "")
        props[key.strip()] = value.strip()
    return props
