"""One row shape for every kind of metadata, built from a `ClusterImage` on either side.

ZooKeeper's view and the log's image both go through `migrator.model`, so turning a ClusterImage into
rows is the only normalisation there is, and a ZooKeeper row and a KRaft row of the same entity
compare one to one. A row is:

| column | meaning |
| --- | --- |
| `kind` | entity kind (`KINDS`), or `_input` for the one row naming the input (`input_batch`) |
| `key` | the entity's identity as a string, unique within its kind |
| `fields` | the strictly compared fields, name → JSON text, sorted by name |
| `info` | tolerated fields (name → JSON text, sorted): differences Kafka itself accepts, reported as information |
| `note` | why the row may rightly be missing on the other side (`NOTES`), else null |

Maps keep their order, so two rows' `fields` are equal exactly when their entries (`map_entries`) are:
the diff compares those and needs no separate canonical value. Rows are built column-wise into Arrow record batches (plain lists, then one array per column): a
million partitions are a million rows, and per-row objects would cost more than the replay itself.
Secrets never enter a row: SCRAM credentials become a salted SHA-256 (`credential_hash`) and values
of password-like config keys the same (`config_value`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from migrator.model import Acl, Broker, ClusterImage, ScramCredential

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
    "image_batches",
    "image_rows",
    "input_batch",
    "is_sensitive_config",
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

SCHEMA = pa.schema(
    [
        pa.field("kind", pa.string()),
        pa.field("key", pa.string()),
        pa.field("fields", pa.map_(pa.string(), pa.string())),
        pa.field("info", pa.map_(pa.string(), pa.string())),
        pa.field("note", pa.string()),
    ]
)
SPARK_SCHEMA = "kind string, key string, fields map<string,string>, info map<string,string>, note string"
BATCH_ROWS = 65_536

_SENSITIVE = re.compile(r"password|secret|jaas|credential|(^|\.)key$|\.keystore\.key$", re.IGNORECASE)


def is_sensitive_config(key: str) -> bool:
    """Config keys whose values are secrets (Kafka's PASSWORD-type configs and JAAS configs)."""
    return _SENSITIVE.search(key) is not None


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


def config_value(key: str, value: str | None) -> str:
    """A config value as JSON text; a secret's value as its salted hash, so it compares but never shows."""
    if value is not None and is_sensitive_config(key):
        return json.dumps("redacted sha256:" + _digest(key.encode(), value.encode())[:32])
    return json.dumps(value, ensure_ascii=False)


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _ints(values: list[int]) -> str:
    return "[" + ",".join(map(str, values)) + "]"


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


def _endpoints(broker: Broker) -> str:
    return _j(sorted(f"{e.listener}://{e.host}:{e.port} {e.security_protocol}" for e in broker.endpoints))


class _Columns:
    """Column lists of rows being built; `batch()` turns them into one record batch."""

    def __init__(self) -> None:
        self.kind: list[str] = []
        self.key: list[str] = []
        self.f_off: list[int] = [0]
        self.f_keys: list[str] = []
        self.f_vals: list[str] = []
        self.i_off: list[int] = [0]
        self.i_keys: list[str] = []
        self.i_vals: list[str] = []
        self.note: list[str | None] = []

    def __len__(self) -> int:
        return len(self.key)

    def add(
        self,
        kind: str,
        key: str,
        fields: Sequence[tuple[str, str]],
        info: Sequence[tuple[str, str]] = (),
        note: str | None = None,
    ) -> None:
        """One row; `fields` and `info` sorted by name (the map's order is its canonical form)."""
        self.kind.append(kind)
        self.key.append(key)
        for k, v in fields:
            self.f_keys.append(k)
            self.f_vals.append(v)
        self.f_off.append(len(self.f_keys))
        for k, v in info:
            self.i_keys.append(k)
            self.i_vals.append(v)
        self.i_off.append(len(self.i_keys))
        self.note.append(note)

    def batch(self) -> pa.RecordBatch:
        string = pa.string()
        fields = pa.MapArray.from_arrays(
            pa.array(self.f_off, pa.int32()), pa.array(self.f_keys, string), pa.array(self.f_vals, string)
        )
        info = pa.MapArray.from_arrays(
            pa.array(self.i_off, pa.int32()), pa.array(self.i_keys, string), pa.array(self.i_vals, string)
        )
        out = pa.RecordBatch.from_arrays(
            [
                pa.array(self.kind, string),
                pa.array(self.key, string),
                fields,
                info,
                pa.array(self.note, string),
            ],
            schema=SCHEMA,
        )
        self.__init__()  # type: ignore[misc]
        return out


_PARTITION_FIELDS = (
    "adding_replicas",
    "isr",
    "leader",
    "leader_epoch",
    "leader_recovery_state",
    "removing_replicas",
    "replicas",
)


_LAYOUT: list[tuple[pa.Array, pa.Array]] = []


def _partition_map_layout(n: int) -> tuple[pa.Array, pa.Array]:
    """Offsets and keys of `n` partition rows' maps: slices of arrays built once per process."""
    width = len(_PARTITION_FIELDS)
    if not _LAYOUT or len(_LAYOUT[0][0]) < n + 1:
        rows = max(n, BATCH_ROWS)
        _LAYOUT[:] = [
            (
                pa.array(range(0, rows * width + 1, width), pa.int32()),
                pa.array(list(_PARTITION_FIELDS) * rows, pa.string()),
            )
        ]
    offsets, names = _LAYOUT[0]
    return offsets.slice(0, n + 1), names.slice(0, n * width)


class _Partitions:
    """Partition rows, the bulk of every cluster: fixed field names, so the map's keys are built
    vectorised and each row costs only its values."""

    def __init__(self) -> None:
        self.key: list[str] = []
        self.vals: list[str] = []
        self.i_off: list[int] = [0]
        self.i_keys: list[str] = []
        self.i_vals: list[str] = []
        self.note: list[str | None] = []

    def __len__(self) -> int:
        return len(self.key)

    def batch(self) -> pa.RecordBatch:
        n = len(self.key)
        offsets, names = _partition_map_layout(n)
        string = pa.string()
        fields = pa.MapArray.from_arrays(offsets, names, pa.array(self.vals, string))
        info = pa.MapArray.from_arrays(
            pa.array(self.i_off, pa.int32()), pa.array(self.i_keys, string), pa.array(self.i_vals, string)
        )
        out = pa.RecordBatch.from_arrays(
            [
                pa.array(["partition"] * n, string),
                pa.array(self.key, string),
                fields,
                info,
                pa.array(self.note, string),
            ],
            schema=SCHEMA,
        )
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

    # topics and partitions: the hot loop, written out
    topics = _Columns()
    parts = _Partitions()
    p_key = parts.key.append
    p_vals = parts.vals.extend
    p_note = parts.note.append
    sliced = slices != 1
    for name, topic in image.topics.items():
        note = "pending-deletion" if name in pending else None
        if mine():
            topics.add("topic", name, [("topic_id", _j(topic.topic_id))], (), note)
        prefix = name + "-"
        for pid, p in topic.partitions.items():
            if sliced and next(counter) % slices != slice_index:
                continue
            p_key(prefix + str(pid))
            p_vals(
                (
                    str(p.adding_replicas).replace(" ", ""),
                    str(p.isr).replace(" ", ""),
                    str(p.leader),
                    str(p.leader_epoch),
                    str(p.leader_recovery_state),
                    str(p.removing_replicas).replace(" ", ""),
                    str(p.replicas).replace(" ", ""),
                )
            )
            if p.controller_epoch is not None:
                parts.i_keys.append("controller_epoch")
                parts.i_vals.append(str(p.controller_epoch))
            parts.i_keys.append("partition_epoch")
            parts.i_vals.append(str(p.partition_epoch))
            parts.i_off.append(len(parts.i_keys))
            p_note(note)
            if len(parts.key) >= batch_rows:
                yield parts.batch()
                p_key, p_vals, p_note = parts.key.append, parts.vals.extend, parts.note.append
    if len(parts):
        yield parts.batch()
    cols = topics
    add = cols.add
    for (rtype, name), entity in image.configs.items():
        if not mine():
            continue
        fields = sorted((k, config_value(k, v)) for k, v in entity.configs.items())
        if rtype == "TOPIC":
            note = None
            if zk and name in pending:
                note = "pending-deletion"
            elif zk and name not in image.topics:
                note = "orphan-config"
            add("topic_config", name, fields, (), note)
        elif rtype == "BROKER":
            add("broker_config", name if name else "<default>", fields)
        else:
            add("other_config", f"{rtype}:{name}", fields, (), "kraft-only")
    quotas: dict[str, dict[str, float]] = {}
    for quota in image.client_quotas:
        quotas.setdefault(_quota_key(quota.entity), {}).update(quota.values)
    for key, values in quotas.items():
        if mine():
            add("client_quota", key, sorted((k, _j(float(v))) for k, v in values.items()))
    for (user, mechanism), cred in image.scram_credentials.items():
        if mine():
            add(
                "scram_credential",
                f"{mechanism}:{user}",
                [("credential", _j(credential_hash(cred))), ("iterations", str(cred.iterations))],
            )
    acls: dict[str, int] = {}
    for acl in image.acls:
        k = acl_key(acl)
        acls[k] = acls.get(k, 0) + 1
    for key, count in acls.items():
        if mine():
            add("acl", key, [("count", str(count))])
    block = image.producer_id_block
    if block is not None and mine():
        # KRaft keeps only the next id; the block's start is the ZooKeeper znode's (KRaft infers it)
        add(
            "producer_id_block",
            "latest",
            [("broker", str(block.broker)), ("next_producer_id", str(block.block_end + 1))],
            [("block_start", str(block.block_start))],
        )
    for token_id, token in image.delegation_tokens.items():
        if mine():
            add(
                "delegation_token",
                token_id,
                [
                    ("expiry_timestamp", str(token.expiry_timestamp)),
                    ("issue_timestamp", str(token.issue_timestamp)),
                    ("max_timestamp", str(token.max_timestamp)),
                    ("owner", _j(token.owner)),
                    ("renewers", _j(sorted(token.renewers))),
                    ("requester", _j(token.requester)),
                ],
            )
    for broker_id, broker in image.brokers.items():
        if mine():
            add(
                "broker",
                str(broker_id),
                [("endpoints", _endpoints(broker)), ("rack", _j(broker.rack))],
                (),
                "registration",
            )
        if len(cols) >= batch_rows:
            yield cols.batch()
    if len(cols):
        yield cols.batch()


def image_rows(image: ClusterImage, side: str) -> list[dict[str, Any]]:
    """Every row as a dict (tests, small images): `image_batches` in one list."""
    out: list[dict[str, Any]] = []
    for batch in image_batches(image, side=side):
        for row in batch.to_pylist():
            row["fields"] = dict(row["fields"])
            row["info"] = dict(row["info"])
            out.append(row)
    return out


def input_batch(side: str, identity: dict[str, Any]) -> pa.RecordBatch:
    """The one `_input` row of a source: what was read (files, offsets, zxid) as JSON, by name.

    The audit collects it to name its inputs in the report and to learn ZooKeeper's control znodes
    (for the phase and the `/migration` offset) without reading the input a second time.
    """
    cols = _Columns()
    items = sorted((k, _j(v)) for k, v in identity.items())
    cols.add(INPUT_KIND, side, items)
    return cols.batch()


def read_input_row(fields: Iterable[tuple[str, str]] | dict[str, str]) -> dict[str, Any]:
    """The identity dict back from an `_input` row's `fields`."""
    pairs = fields.items() if isinstance(fields, dict) else fields
    return {k: json.loads(v) for k, v in pairs}
