"""A consistent copy of Kafka's ZooKeeper tree, and the Parquet file that carries it to an audit.

`read_consistent` is the bulk reader asked harder: the tree at one zxid (`tree.consistent`), retried
while writes keep landing. `write_parquet` stores record batches (the audit's normalised rows,
built by the caller) in one Parquet file, atomically, with the read's identity (zxid, consistency,
connect string, control znodes) as JSON in the file's key-value metadata, where `read_identity`
finds it again without reading the rows. Spark reads the file with its own Parquet source.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from kazoo.client import KazooClient

from migrator.errors import BadInputError, UnreachableError
from migrator.zk.reader import read_tree
from migrator.zk.tree import ZkTree

__all__ = ["IDENTITY_KEY", "read_consistent", "read_identity", "write_parquet"]

log = logging.getLogger(__name__)

IDENTITY_KEY = b"zk2kraft.identity"
EXPORT_RETRIES = 6


def read_consistent(
    client: KazooClient, retries: int = EXPORT_RETRIES, progress: Callable[[int], None] | None = None
) -> ZkTree:
    """Kafka's roots at one zxid when ZooKeeper allows it; the last pass (not consistent) otherwise.

    A tree that never settles is returned with `consistent=False`: the caller records and reports it.
    """
    tree = read_tree(client, retries=retries, progress=progress)
    if not tree.consistent:
        log.warning(
            "ZooKeeper kept changing during the read: the export mixes zxids up to %#x", tree.read_zxid
        )
    return tree


def write_parquet(
    path: str | os.PathLike[str],
    schema: pa.Schema,
    batches: Iterable[pa.RecordBatch],
    identity: dict[str, Any],
) -> int:
    """Write `batches` to one Parquet file at `path` (via a temporary name and rename); returns rows."""
    out = Path(path)
    if out.is_dir():
        raise BadInputError(f"{out} is a directory: give the export a file name, e.g. {out / 'zk.parquet'}")
    if not out.parent.is_dir():
        raise BadInputError(f"{out.parent}: no such directory")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    meta = dict(schema.metadata or {})
    meta[IDENTITY_KEY] = json.dumps(identity, sort_keys=True).encode()
    rows = 0
    try:
        with pq.ParquetWriter(tmp, schema.with_metadata(meta), compression="zstd") as writer:
            for batch in batches:
                writer.write_batch(batch)
                rows += batch.num_rows
        os.replace(tmp, out)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UnreachableError(f"cannot write {out}: {e.strerror or e}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return rows


def read_identity(path: str | os.PathLike[str], schema: pa.Schema | None = None) -> dict[str, Any]:
    """The identity stored by `write_parquet`; a missing, unreadable or foreign file is BadInputError.

    With `schema`, the file's columns must match it by name and type.
    """
    p = Path(path)
    if not p.exists():
        raise BadInputError(f"{p}: no such export file")
    if p.is_dir():
        raise BadInputError(f"{p} is a directory, not a zk2kraft export (a .parquet file)")
    try:
        meta = pq.read_metadata(p)
        file_schema = pq.read_schema(p)
    except (OSError, pa.ArrowException) as e:
        raise BadInputError(f"{p}: not a readable Parquet file ({' '.join(str(e).split())[:200]})") from None
    raw = (meta.metadata or {}).get(IDENTITY_KEY)
    if raw is None:
        raise BadInputError(
            f"{p}: a Parquet file, but not a zk2kraft export (no {IDENTITY_KEY.decode()} metadata)"
        )
    if schema is not None:
        want = [(f.name, f.type) for f in schema]
        got = [(f.name, f.type) for f in file_schema]
        if want != got:
            raise BadInputError(
                f"{p}: export columns {[n for n, _ in got]} do not match this zk2kraft's rows"
            )
    try:
        identity = json.loads(raw)
    except ValueError:
        raise BadInputError(f"{p}: its {IDENTITY_KEY.decode()} metadata is not JSON") from None
    if not isinstance(identity, dict):
        raise BadInputError(f"{p}: its {IDENTITY_KEY.decode()} metadata is not a JSON object")
    identity["rows"] = meta.num_rows
    return identity
