"""One row shape for every kind of metadata, built from a `ClusterImage` on either side.

ZooKeeper's view and the log's image both go through `migrator.model`, so turning a ClusterImage into
rows is the only normalisation there is, and a ZooKeeper row and a KRaft row of the same entity
compare one to one. A row is five strings:

| column | meaning |
| --- | --- |
| `kind` | entity kind (`KINDS`), or `_input` for the one row naming the input (`input_batch`) |
| `key` | the entity's identity, unique within its kind |
| `fields` | the strictly compared fields as canonical JSON (keys sorted, no spaces): equal text, equal entity |
| `info` | tolerated fields both sides carry, canonical JSON: differences Kafka itself accepts (informational) |
| `extra` | fields only one side has by nature (ZooKeeper's `controller_epoch`), JSON, shown and never compared |
| `note` | why the row may rightly be missing on the other side (`NOTES`), else null |

Canonical text makes equality one string comparison in Spark, and strings are the cheapest thing to
move through Arrow and a shuffle; which fields differ is worked out (`field_differences`) only for
the few rows the driver shows. Rows are built column-wise into Arrow record batches (plain lists,
then one array per column): a million partitions are a million rows, and per-row objects would cost
more than the replay. Secrets never enter a row: SCRAM credentials become a salted SHA-256
(`credential_hash`), values of password-like config keys the same (`config_value`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from migrator.model import Acl, Broker, ClusterImage, ScramCredential
from migrator.secrets import is_secret_config

__all__ = [
    "AUDIT_SALT",
    "INPUT_KIND",
    "KINDS",
    "KIND_TITLES",
    "NOTES",
    "SCHEMA",
    "SPARK_SCHEMA",
    "config_value",
    "credential_hash",
    "field_differences",
    "image_batches",
    "image_rows",
    "input_batch",
    "is_sensitive_config",
    "read_input_row",
]

# The order kinds are listed in reports: what a migration moves, then broker registrations.
KINDS = (
    "topic",
    "partition",
    "topic_config",
    "broker_config",
    "other_config",
    "client_quota",
    "scram_credential",
    "acl",
    "producer_id_block",
    "delegation_token",
    "broker",
)
KIND_TITLES = {
    "topic": "topics",
    "partition": "partitions",
    "topic_config": "topic configs",
    "broker_config": "broker configs",
    "other_config": "other configs",
    "client_quota": "client quotas",
    "scram_credential": "SCRAM credentials",
    "acl": "ACLs",
    "producer_id_block": "producer id block",
    "delegation_token": "delegation tokens",
    "broker": "brokers",
}
INPUT_KIND = "_input"
# note → why a row may be absent on the other side without being a mismatch
NOTES = {
    "pending-deletion": "the topic is queued in /admin/delete_topics: Kafka's migration skips it",
    "orphan-config": "configs of a topic ZooKeeper does not hold: Kafka's migration skips them",
    "registration": "broker registrations are not migrated: each side has its own",
    "kraft-only": "a config resource type with no ZooKeeper form (Kafka does not write it to ZooKeeper)",
}
# A fixed, public salt: hashes are comparable across runs and sides, never reversible to the secret.
AUDIT_SALT = b"zk2kraft-audit-v1\x00"

COLUMNS = ("kind", "key", "fields", "info", "extra", "note")
SCHEMA = pa.schema([pa.field(name, pa.string()) for name in COLUMNS])
SPARK_SCHEMA = ", ".join(f"{name} string" for name in COLUMNS)
BATCH_ROWS = 65_536

# one rule for every output (migrator.secrets); the old name stays for the audit's callers
is_sensitive_config = is_secret_config


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256(AUDIT_SALT)
    for part in parts:
        h.update(len(part).to_bytes(4, "big"))
        h.update(part)
    return h.hexdigest()


def credential_hash(cred: ScramCredential) -> str:
    """Salted SHA-256 over mechanism, iterations, salt and both keys: equal iff the credentials are."""
    return "sha256:" + _digest(
        cred.mechanism.encode(),
        str(cred.iterations).encode(),
        bytes(cred.salt),
        bytes(cred.stored_key),
        bytes(cred.server_key),
    )


def config_value(key: str, value: str | None) -> str | None:
    """A config value as compared; a secret's value as its salted hash, so it compares but never shows."""
    if value is not None and is_sensitive_config(key):
        return "redacted sha256:" + _digest(key.encode(), value.encode())[:32]
    return value


def _j(value: Any) -> str:
    """Canonical JSON: what makes equal entities equal text on both sides."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def field_differences(a: str | None, b: str | None) -> list[tuple[str, str | None, str | None]]:
    """(name, JSON on side a, JSON on side b) of each field whose value differs, by name."""
    left = json.loads(a) if a else {}
    right = json.loads(b) if b else {}
    out = []
    for name in sorted(set(left) | set(right)):
        x, y = left.get(name, _MISSING), right.get(name, _MISSING)
        if x != y or type(x) is not type(y):
            out.append((name, None if x is _MISSING else _j(x), None if y is _MISSING else _j(y)))
    return out


_MISSING = object()


def _quota_key(entity: dict[str, str | None]) -> str:
    """`user="alice",client-id=<default>` in Kafka's entity order; names JSON-quoted so any is unambiguous."""
    order = {"user": 0, "client-id": 1, "ip": 2}
    parts = []
    for k in sorted(entity, key=lambda k: (order.get(k, 9), k)):
        v = entity[k]
        parts.append(f"{k}=<default>" if v is None else f"{k}={_j(v)}")
    return ",".join(parts)


def acl_key(acl: Acl) -> str:
    return _j(list(acl.key()))


def _endpoints(broker: Broker) -> list[str]:
    return sorted(f"{e.listener}://{e.host}:{e.port} {e.security_protocol}" for e in broker.endpoints)


class _Columns:
    """Column lists of rows being built; `batch()` turns them into one record batch."""

    def __init__(self) -> None:
        self.cols: tuple[list[str | None], ...] = tuple([] for _ in COLUMNS)

    def __len__(self) -> int:
        return len(self.cols[0])

    def add(
        self,
        kind: str,
        key: str,
        fields: dict[str, Any],
        info: dict[str, Any] | None = None,
        note: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        kinds, keys, f, i, e, notes = self.cols
        kinds.append(kind)
        keys.append(key)
        f.append(_j(fields))
        i.append(_j(info) if info else "{}")
        e.append(_j(extra) if extra else None)
        notes.append(note)

    def batch(self) -> pa.RecordBatch:
        string = pa.string()
        out = pa.RecordBatch.from_arrays([pa.array(c, string) for c in self.cols], schema=SCHEMA)
        self.__init__()  # type: ignore[misc]
        return out


def image_batches(
    image: ClusterImage,
    *,
    side: str,
    slice_index: int = 0,
    slices: int = 1,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """The image's rows as Arrow record batches, only those of slice `slice_index` of `slices`.

    Entities are dealt to slices round robin in the image's own order, which a replay of the same
    input always reproduces, so the slices of one input partition it exactly. `side` is `zookeeper`
    or `kraft`: it decides which notes apply (pending deletions and orphan configs are ZooKeeper's).
    """
    if side not in ("zookeeper", "kraft"):
        raise ValueError(f"side must be 'zookeeper' or 'kraft', not {side!r}")
    if not 0 <= slice_index < slices:
        raise ValueError(f"slice {slice_index} out of range 0..{slices - 1}")
    zk = side == "zookeeper"
    pending = set(image.pending_deletions) if zk else set()
    counter = iter(range(1 << 62))

    def mine() -> bool:
        return slices == 1 or next(counter) % slices == slice_index

    cols = _Columns()
    add = cols.add
    # Topics and partitions: the hot loop. A partition's JSON is one f-string (the field names are
    # sorted by hand; `str` of an int list is JSON once its spaces go), appended straight to the columns.
    kinds, keys, fcol, icol, ecol, notes = cols.cols
    sliced = slices != 1
    texts: dict[tuple[int, ...], str] = {}  # replica lists repeat: their JSON is built once

    def ints(values: list[int]) -> str:
        if not values:
            return "[]"
        t = tuple(values)
        text = texts.get(t)
        if text is None:
            if len(texts) > 200_000:
                texts.clear()
            text = texts[t] = str(values).replace(" ", "")
        return text

    for name, topic in image.topics.items():
        note = "pending-deletion" if name in pending else None
        if mine():
            add("topic", name, {"topic_id": topic.topic_id}, None, note)
        prefix = name + "-"
        for pid, p in topic.partitions.items():
            if sliced and next(counter) % slices != slice_index:
                continue
            kinds.append("partition")
            keys.append(prefix + str(pid))
            fcol.append(
                f'{{"adding_replicas":{ints(p.adding_replicas)},"isr":{ints(p.isr)},"leader":{p.leader},'
                f'"leader_epoch":{p.leader_epoch},"leader_recovery_state":{p.leader_recovery_state},'
                f'"removing_replicas":{ints(p.removing_replicas)},"replicas":{ints(p.replicas)}}}'
            )
            icol.append(f'{{"partition_epoch":{p.partition_epoch}}}')
            ecol.append(
                None if p.controller_epoch is None else f'{{"controller_epoch":{p.controller_epoch}}}'
            )
            notes.append(note)
            if len(keys) >= batch_rows:
                yield cols.batch()
                kinds, keys, fcol, icol, ecol, notes = cols.cols
    for (rtype, name), entity in image.configs.items():
        if not mine():
            continue
        fields = {k: config_value(k, v) for k, v in entity.configs.items()}
        if rtype == "TOPIC":
            note = None
            if zk and name in pending:
                note = "pending-deletion"
            elif zk and name not in image.topics:
                note = "orphan-config"
            add("topic_config", name, fields, None, note)
        elif rtype == "BROKER":
            add("broker_config", name if name else "<default>", fields)
        else:
            add("other_config", f"{rtype}:{name}", fields, None, "kraft-only")
    quotas: dict[str, dict[str, float]] = {}
    for quota in image.client_quotas:
        quotas.setdefault(_quota_key(quota.entity), {}).update(quota.values)
    for key, values in quotas.items():
        if mine():
            add("client_quota", key, {k: float(v) for k, v in values.items()})
    for (user, mechanism), cred in image.scram_credentials.items():
        if mine():
            add(
                "scram_credential",
                f"{mechanism}:{user}",
                {"credential": credential_hash(cred), "iterations": cred.iterations},
            )
    acls: dict[str, int] = {}
    for acl in image.acls:
        k = acl_key(acl)
        acls[k] = acls.get(k, 0) + 1
    for key, count in acls.items():
        if mine():
            add("acl", key, {"count": count})
    block = image.producer_id_block
    if block is not None and mine():
        # KRaft keeps only the next id; the block's start is the ZooKeeper znode's (KRaft infers it)
        add(
            "producer_id_block",
            "latest",
            {"broker": block.broker, "next_producer_id": block.block_end + 1},
            {"block_start": block.block_start},
        )
    for token_id, token in image.delegation_tokens.items():
        if mine():
            add(
                "delegation_token",
                token_id,
                {
                    "expiry_timestamp": token.expiry_timestamp,
                    "issue_timestamp": token.issue_timestamp,
                    "max_timestamp": token.max_timestamp,
                    "owner": token.owner,
                    "renewers": sorted(token.renewers),
                    "requester": token.requester,
                },
            )
    for broker_id, broker in image.brokers.items():
        if mine():
            add(
                "broker",
                str(broker_id),
                {"endpoints": _endpoints(broker), "rack": broker.rack},
                None,
                "registration",
            )
    if len(cols):
        yield cols.batch()


def image_rows(image: ClusterImage, side: str) -> list[dict[str, Any]]:
    """Every row as a dict with its JSON decoded (tests, small images): `image_batches` in one list."""
    out: list[dict[str, Any]] = []
    for batch in image_batches(image, side=side):
        for row in batch.to_pylist():
            for name in ("fields", "info", "extra"):
                row[name] = json.loads(row[name]) if row[name] else {}
            out.append(row)
    return out


def input_batch(side: str, identity: dict[str, Any]) -> pa.RecordBatch:
    """The one `_input` row of a source: what was read (files, offsets, zxid), as JSON in `fields`.

    The audit collects it to name its inputs in the report and to learn ZooKeeper's control znodes
    (for the phase and the `/migration` offset) without reading the input a second time.
    """
    cols = _Columns()
    cols.add(INPUT_KIND, side, identity)
    return cols.batch()


def read_input_row(fields: str) -> dict[str, Any]:
    """The identity dict back from an `_input` row's `fields`."""
    value = json.loads(fields)
    return value if isinstance(value, dict) else {}
