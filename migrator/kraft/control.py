"""KRaft control records: their types and the bodies Kafka's Raft layer writes in control batches.

A control record's key is ``int16 version 0 | int16 type``; its value is a flexible message body with no
metadata frame, whose first field is the message's own int16 ``Version``. The body schemas live in
`schema.CONTROL_SCHEMAS` and go through the same generated codec as metadata records.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from migrator.kraft.records import CorruptRecordError, decode_control_body, encode_body
from migrator.kraft.schema import CONTROL_SCHEMAS

__all__ = [
    "ControlMessage",
    "ControlType",
    "KRaftVersion",
    "LeaderChange",
    "SnapshotFooter",
    "SnapshotHeader",
    "UnknownControl",
    "Voter",
    "Voters",
    "decode_control_record",
    "encode_control_record",
]


class ControlType(IntEnum):
    """Kafka's ControlRecordType codes."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


#: The LeaderChangeMessage version Kafka 3.9 writes (ControlRecordUtils.LEADER_CHANGE_CURRENT_VERSION).
LEADER_CHANGE_VERSION = 0


@dataclass(frozen=True, slots=True)
class SnapshotHeader:
    """First record of every snapshot: the append time of the last record the snapshot contains."""

    last_contained_log_timestamp: int
    version: int = 0


@dataclass(frozen=True, slots=True)
class SnapshotFooter:
    """Last record of every complete snapshot."""

    version: int = 0


@dataclass(frozen=True, slots=True)
class Voter:
    voter_id: int
    voter_directory_id: uuid.UUID | None = None  # v1+ of LeaderChangeMessage


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """Written by a new Raft leader at the start of its epoch."""

    leader_id: int
    voters: tuple[Voter, ...] = ()
    granting_voters: tuple[Voter, ...] = ()
    version: int = LEADER_CHANGE_VERSION


@dataclass(frozen=True, slots=True)
class KRaftVersion:
    """kraft.version feature level (KIP-853), in snapshots and the log when kraft.version ≥ 1."""

    kraft_version: int
    version: int = 0


@dataclass(frozen=True, slots=True)
class Voters:
    """The voter set (KIP-853); kept as Kafka's field dicts (VoterId, VoterDirectoryId, Endpoints, ...)."""

    voters: tuple[dict[str, Any], ...] = ()
    version: int = 0


@dataclass(frozen=True, slots=True)
class UnknownControl:
    """A control record this tool does not interpret (transaction markers, future types)."""

    type: int
    value: bytes = field(repr=False)


ControlMessage = SnapshotHeader | SnapshotFooter | LeaderChange | KRaftVersion | Voters | UnknownControl

_VERSION = struct.Struct(">h")


def _voters_out(voters: tuple[Voter, ...], version: int) -> list[dict[str, Any]]:
    out = []
    for v in voters:
        item: dict[str, Any] = {"VoterId": v.voter_id}
        if version >= 1:
            item["VoterDirectoryId"] = v.voter_directory_id or uuid.UUID(int=0)
        elif v.voter_directory_id is not None:
            raise ValueError("LeaderChangeMessage v0 cannot carry voter directory ids")
        out.append(item)
    return out


def encode_control_record(msg: ControlMessage) -> tuple[int, bytes]:
    """(control type, value) ready for batch_encode.encode_control_batch."""
    if isinstance(msg, SnapshotHeader):
        fields: dict[str, Any] = {
            "Version": msg.version,
            "LastContainedLogTimestamp": msg.last_contained_log_timestamp,
        }
        return ControlType.SNAPSHOT_HEADER, _encode("SnapshotHeaderRecord", msg.version, fields)
    if isinstance(msg, SnapshotFooter):
        return ControlType.SNAPSHOT_FOOTER, _encode(
            "SnapshotFooterRecord", msg.version, {"Version": msg.version}
        )
    if isinstance(msg, LeaderChange):
        fields = {
            "Version": msg.version,
            "LeaderId": msg.leader_id,
            "Voters": _voters_out(msg.voters, msg.version),
            "GrantingVoters": _voters_out(msg.granting_voters, msg.version),
        }
        return ControlType.LEADER_CHANGE, _encode("LeaderChangeMessage", msg.version, fields)
    if isinstance(msg, KRaftVersion):
        fields = {"Version": msg.version, "KRaftVersion": msg.kraft_version}
        return ControlType.KRAFT_VERSION, _encode("KRaftVersionRecord", msg.version, fields)
    if isinstance(msg, Voters):
        fields = {"Version": msg.version, "Voters": list(msg.voters)}
        return ControlType.KRAFT_VOTERS, _encode("VotersRecord", msg.version, fields)
    if isinstance(msg, UnknownControl):
        return msg.type, msg.value
    raise TypeError(f"not a control message: {type(msg).__name__}")


def _encode(name: str, version: int, fields: dict[str, Any]) -> bytes:
    return encode_body(CONTROL_SCHEMAS[name], version, fields)


_BODY_NAMES = {
    ControlType.LEADER_CHANGE: "LeaderChangeMessage",
    ControlType.SNAPSHOT_HEADER: "SnapshotHeaderRecord",
    ControlType.SNAPSHOT_FOOTER: "SnapshotFooterRecord",
    ControlType.KRAFT_VERSION: "KRaftVersionRecord",
    ControlType.KRAFT_VOTERS: "VotersRecord",
}


def decode_control_record(ctype: int, value: bytes, where: str = "") -> ControlMessage:
    """Decode a control record's value by its type; the body's own Version field picks the schema."""
    name = _BODY_NAMES.get(ctype)  # type: ignore[call-overload]
    if name is None:
        return UnknownControl(ctype, bytes(value))
    value = bytes(value)
    if len(value) < 2:
        raise CorruptRecordError(where, f"{name} value is only {len(value)} bytes")
    (version,) = _VERSION.unpack_from(value)
    schema = CONTROL_SCHEMAS[name]
    if not schema.has_version(version):
        raise CorruptRecordError(
            where, f"{name} has version {version}; this tool reads {schema.min_version}-{schema.max_version}"
        )
    f = decode_control_body(name, version, value, where)
    if ctype == ControlType.SNAPSHOT_HEADER:
        return SnapshotHeader(f["LastContainedLogTimestamp"], version)
    if ctype == ControlType.SNAPSHOT_FOOTER:
        return SnapshotFooter(version)
    if ctype == ControlType.LEADER_CHANGE:
        return LeaderChange(
            f["LeaderId"],
            tuple(Voter(v["VoterId"], v.get("VoterDirectoryId")) for v in f["Voters"]),
            tuple(Voter(v["VoterId"], v.get("VoterDirectoryId")) for v in f["GrantingVoters"]),
            version,
        )
    if ctype == ControlType.KRAFT_VERSION:
        return KRaftVersion(f["KRaftVersion"], version)
    return Voters(tuple(f["Voters"]), version)
