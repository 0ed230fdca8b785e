"""The small text files of a KRaft metadata log directory, in Kafka's own formats.

`meta.properties` (v0 from ZooKeeper-mode brokers, v1 from KRaft nodes), `leader-epoch-checkpoint`,
`partition.metadata` and `quorum-state`. Each writer goes through a `.tmp` file, fsync and an atomic
rename, as Kafka does, so a crash leaves either the old or the new file, never half of one.
"""

from __future__ import annotations

import base64
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from migrator.errors import BadInputError, UnreachableError
from migrator.properties import parse_properties

META_PROPERTIES = "meta.properties"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
QUORUM_STATE = "quorum-state"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
# Uuid.METADATA_TOPIC_ID == Uuid.ONE_UUID, the fixed topic id of __cluster_metadata.
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file durable: the directory entry lives in the directory."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write `path` via `path.tmp`, fsync, rename and fsync the directory (Kafka's AtomicMoveWithFallback)."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except PermissionError as e:
        raise UnreachableError(f"cannot write {path}: {e.strerror}") from None


#: What `atomic_write` leaves when a crash comes between the write and the rename.
TMP_SUFFIX = ".tmp"


def remove_stale_temporaries(directory: Path, older_than: float = 0.0) -> list[Path]:
    """Delete `*.tmp` files a crashed writer left in `directory` (only the lock holder calls this).

    `older_than` (seconds) spares temporaries another process may be writing right now.
    """
    removed: list[Path] = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return removed
    cutoff = time.time() - older_than
    for name in names:
        if not name.endswith(TMP_SUFFIX):
            continue
        path = directory / name
        try:
            if older_than and path.stat().st_mtime > cutoff:
                continue
            path.unlink()
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BadInputError(f"{path}: not a text file") from None
    except PermissionError as e:
        raise UnreachableError(f"cannot read {path}: {e.strerror}") from None


def random_kafka_uuid() -> str:
    """A random Uuid as Kafka's `Uuid.randomUuid()` makes it: never one starting with '-' (CLI-unsafe)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not text.startswith("-"):
            return text


# ---------------------------------------------------------------------------------------------------
# meta.properties


@dataclass(frozen=True)
class MetaProperties:
    """`meta.properties`: v1 is written by KRaft nodes, v0 by ZooKeeper-mode brokers (`broker.id`)."""

    version: int
    node_id: int
    cluster_id: str | None
    directory_id: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


def _int_prop(props: dict[str, str], key: str, path: Path) -> int:
    try:
        return int(props[key])
    except ValueError:
        raise BadInputError(f"{path}: {key}={props[key]!r} is not an integer") from None


def read_meta_properties(path: Path) -> MetaProperties:
    """Read v0 (`broker.id`) or v1 (`node.id`, `cluster.id` required) `meta.properties`."""
    if not path.exists():
        raise BadInputError(f"{path}: missing (not a Kafka log directory, or not formatted)")
    props = parse_properties(_read_text(path))
    if "version" not in props:
        raise BadInputError(f"{path}: no version= line")
    version = _int_prop(props, "version", path)
    if version == 0:
        id_key = "broker.id" if "broker.id" in props else "node.id"
    elif version == 1:
        id_key = "node.id"
        if not props.get("cluster.id"):
            raise BadInputError(f"{path}: version 1 requires cluster.id")
    else:
        raise BadInputError(f"{path}: unsupported meta.properties version {version} (known: 0, 1)")
    if id_key not in props:
        raise BadInputError(f"{path}: version {version} requires {id_key}")
    known = {"version", "broker.id", "node.id", "cluster.id", "directory.id"}
    return MetaProperties(
        version=version,
        node_id=_int_prop(props, id_key, path),
        cluster_id=props.get("cluster.id") or None,
        directory_id=props.get("directory.id") or None,
        extra={k: v for k, v in props.items() if k not in known},
    )


def write_meta_properties(path: Path, meta: MetaProperties) -> None:
    """Write v1 the way Kafka's `PropertiesUtils.writePropertiesFile` does (a dated comment header)."""
    if meta.version != 1 or meta.cluster_id is None:
        raise ValueError("zk2kraft writes meta.properties version 1 with a cluster.id")
    lines = ["#", "#" + time.strftime("%a %b %d %H:%M:%S %Z %Y")]
    values = {
        "cluster.id": meta.cluster_id,
        "directory.id": meta.directory_id or random_kafka_uuid(),
        "node.id": str(meta.node_id),
        "version": "1",
        **meta.extra,
    }
    lines += [f"{k}={v}" for k, v in sorted(values.items())]
    atomic_write(path, ("\n".join(lines) + "\n").encode("utf-8"))


# ---------------------------------------------------------------------------------------------------
# leader-epoch-checkpoint


def read_leader_epochs(path: Path) -> list[tuple[int, int]]:
    """`leader-epoch-checkpoint`: version line 0, entry count, then `epoch startOffset` lines."""
    lines = _read_text(path).splitlines()
    if len(lines) < 2:
        raise BadInputError(f"{path}: too short for a checkpoint (need version and count lines)")
    if lines[0].strip() != "0":
        raise BadInputError(f"{path}: unsupported checkpoint version {lines[0].strip()!r} (known: 0)")
    try:
        count = int(lines[1])
    except ValueError:
        raise BadInputError(f"{path}: line 2: entry count {lines[1]!r} is not an integer") from None
    body = [line for line in lines[2:] if line.strip()]
    if len(body) != count:
        raise BadInputError(f"{path}: header says {count} entries, file has {len(body)}")
    entries: list[tuple[int, int]] = []
    for n, line in enumerate(body, start=3):
        parts = line.split()
        try:
            epoch, start = int(parts[0]), int(parts[1])
            if len(parts) != 2:
                raise ValueError
        except (ValueError, IndexError):
            raise BadInputError(f"{path}: line {n}: expected 'epoch startOffset', got {line!r}") from None
        if entries and (epoch <= entries[-1][0] or start < entries[-1][1]):
            raise BadInputError(f"{path}: line {n}: epochs and offsets must increase, got {line!r}")
        entries.append((epoch, start))
    return entries


def write_leader_epochs(path: Path, entries: list[tuple[int, int]]) -> None:
    text = f"0\n{len(entries)}\n" + "".join(f"{e} {o}\n" for e, o in entries)
    atomic_write(path, text.encode("ascii"))


def read_log_start_offsets(path: Path) -> dict[tuple[str, int], int]:
    """`log-start-offset-checkpoint` (Kafka's OffsetCheckpointFile, in the log dir): version line 0, entry
    count, then `topic partition offset` lines. A missing file is no entry."""
    if not path.exists():
        return {}
    lines = _read_text(path).splitlines()
    if len(lines) < 2 or lines[0].strip() != "0":
        raise BadInputError(f"{path}: not a version 0 offset checkpoint")
    body = [line for line in lines[2:] if line.strip()]
    try:
        count = int(lines[1])
        out = {(t, int(p)): int(o) for t, p, o in (line.split() for line in body)}
    except ValueError:
        raise BadInputError(f"{path}: expected 'topic partition offset' lines") from None
    if len(body) != count:
        raise BadInputError(f"{path}: header says {count} entries, file has {len(body)}")
    return out


def write_log_start_offset(path: Path, topic: str, partition: int, offset: int) -> None:
    """Set one partition's entry of `log-start-offset-checkpoint`, keeping every other partition's."""
    entries = read_log_start_offsets(path)
    entries[(topic, partition)] = offset
    text = f"0\n{len(entries)}\n" + "".join(f"{t} {p} {o}\n" for (t, p), o in sorted(entries.items()))
    atomic_write(path, text.encode("ascii"))


# ---------------------------------------------------------------------------------------------------
# partition.metadata


def read_partition_metadata(path: Path) -> str:
    """Return the topic id of `partition.metadata` ("version: 0\\ntopic_id: <id>")."""
    fields: dict[str, str] = {}
    for line in _read_text(path).splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            fields[k.strip()] = v.strip()
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise BadInputError(f"{path}: expected 'version: 0' and a topic_id line")
    return fields["topic_id"]


def write_partition_metadata(path: Path, topic_id: str = METADATA_TOPIC_ID) -> None:
    atomic_write(path, f"version: 0\ntopic_id: {topic_id}".encode("ascii"))


# ---------------------------------------------------------------------------------------------------
# quorum-state


#: Kafka's Uuid.ZERO_UUID as text: a version 1 `votedDirectoryId` of "no directory".
ZERO_UUID_TEXT = "AAAAAAAAAAAAAAAAAAAAAA"

#: The fields Kafka's generated QuorumStateDataJsonConverter requires, per data_version: a file without
#: one of them stops Kafka's controller at start ("unable to locate field ..., which is mandatory").
_QUORUM_FIELDS = {
    0: ("clusterId", "leaderId", "leaderEpoch", "votedId", "appliedOffset", "currentVoters"),
    1: ("leaderId", "leaderEpoch", "votedId", "votedDirectoryId"),
}


@dataclass(frozen=True)
class QuorumState:
    """Raft election state as Kafka 3.9's FileQuorumStateStore keeps it (QuorumStateData).

    data_version 0 goes with kraft.version 0 (static `controller.quorum.voters`): it names the voters;
    version 1 (kraft.version 1) names the voted candidate's directory instead. `voted_directory_id` is
    Kafka's Uuid text, None for none (Uuid.ZERO_UUID in a version 1 file).
    """

    leader_id: int
    leader_epoch: int
    voted_id: int = -1
    voters: tuple[int, ...] = ()
    data_version: int = 0
    voted_directory_id: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)


def _json_int(data: dict[str, Any], key: str, path: Path) -> int:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadInputError(f"{path}: quorum-state field {key} is {value!r}, not an integer")
    return value


def read_quorum_state(path: Path) -> QuorumState:
    """The first line of `quorum-state`, read as Kafka's FileQuorumStateStore reads it: data_version 0 or
    1 and every field that version requires, or one BadInputError line naming what Kafka would refuse."""
    line = _read_text(path).split("\n", 1)[0]
    try:
        data = json.loads(line)
    except json.JSONDecodeError as e:
        raise BadInputError(f"{path}: not JSON ({e.msg} at char {e.pos})") from None
    if not isinstance(data, dict) or "leaderEpoch" not in data:
        raise BadInputError(f"{path}: not a quorum-state document (no leaderEpoch)")
    if "data_version" not in data:
        raise BadInputError(f"{path}: no data_version field (Kafka refuses the file)")
    version = _json_int(data, "data_version", path)
    if version not in _QUORUM_FIELDS:
        raise BadInputError(f"{path}: data_version {version} (Kafka 3.9 reads 0 and 1)")
    missing = [k for k in _QUORUM_FIELDS[version] if k not in data]
    if missing:
        raise BadInputError(
            f"{path}: data_version {version} requires {', '.join(missing)} (Kafka refuses the file)"
        )
    voted_dir: str | None = None
    voters: tuple[int, ...] = ()
    if version == 0:
        raw_voters = data["currentVoters"]
        if not isinstance(raw_voters, list):
            raise BadInputError(
                f"{path}: currentVoters is {raw_voters!r}, not a list (Kafka refuses the file)"
            )
        try:
            voters = tuple(_json_int(v, "voterId", path) for v in raw_voters)
        except (TypeError, KeyError):
            raise BadInputError(f'{path}: currentVoters entries must be {{"voterId": N}}') from None
    else:
        text = data["votedDirectoryId"]
        if not isinstance(text, str) or len(text) != 22:
            raise BadInputError(f"{path}: votedDirectoryId {text!r} is not a Kafka Uuid")
        voted_dir = None if text == ZERO_UUID_TEXT else text
    return QuorumState(
        leader_id=_json_int(data, "leaderId", path),
        leader_epoch=_json_int(data, "leaderEpoch", path),
        voted_id=_json_int(data, "votedId", path),
        voters=voters,
        data_version=version,
        voted_directory_id=voted_dir,
        raw=data,
    )


def quorum_state_bytes(state: QuorumState) -> bytes:
    """The one line Kafka's FileQuorumStateStore writes: QuorumStateDataJsonConverter's fields in schema
    order, then data_version; version 0's clusterId and appliedOffset are their defaults ("" and 0) and
    its voters come out in ascending order, as Kafka's set of voter ids does."""
    data: dict[str, Any]
    if state.data_version == 0:
        data = {
            "clusterId": "",
            "leaderId": state.leader_id,
            "leaderEpoch": state.leader_epoch,
            "votedId": state.voted_id,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": v} for v in sorted(set(state.voters))],
        }
    elif state.data_version == 1:
        data = {
            "leaderId": state.leader_id,
            "leaderEpoch": state.leader_epoch,
            "votedId": state.voted_id,
            "votedDirectoryId": state.voted_directory_id or ZERO_UUID_TEXT,
        }
    else:
        raise ValueError(f"quorum-state data_version {state.data_version}: Kafka 3.9 writes 0 and 1")
    data["data_version"] = state.data_version
    return json.dumps(data, separators=(",", ":")).encode("utf-8")


def write_quorum_state(path: Path, state: QuorumState) -> None:
    """Kafka's FileQuorumStateStore: JSON to `quorum-state.tmp`, fsync, then an atomic move."""
    atomic_write(path, quorum_state_bytes(state))
