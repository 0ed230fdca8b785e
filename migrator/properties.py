"""Java properties, the format of Kafka's configuration files and of `meta.properties`: one parser.

zk2kraft reads them for --config and --broker-config, and `kraft.dirfiles` for a log directory's
`meta.properties`; both go through `parse_properties`, so a file means the same to every reader.
"""

from __future__ import annotations

from migrator.errors import BadInputError

__all__ = ["parse_properties", "read_properties"]


def parse_properties(text: str) -> dict[str, str]:
    """Java `Properties.load` for the subset Kafka's files use: `#`/`!` comments, `key=value` and
    `key: value`, backslash continuations, escaped backslashes."""
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
        props[key.strip().replace("\\:", ":").replace("\\=", "=")] = value.strip().replace("\\\\", "\\")
    return props


def read_properties(path: str) -> dict[str, str]:
    """A properties file given on the command line; unreadable is bad input (exit 2)."""
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        raise BadInputError(f"cannot read {path}: {e.strerror}") from None
    return parse_properties(text)
