"""Declarations of Kafka's KRaft metadata records (Kafka 3.9 JSON schemas), one entry per record.

These declarations are the single source of truth for the record codec in `records.py`, which compiles
specialised encoders and decoders from them. Field names are Kafka's own CamelCase names so a record's
fields read exactly like Kafka's schema files and `kafka-dump-log` output.

Every metadata record is flexible in all its versions (compact strings and arrays, tagged fields).
Control-record bodies (LeaderChangeMessage, SnapshotHeader/Footer, KRaftVersion, Voters) are declared
here too, without an apiKey, because the same engine encodes them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CONTROL_SCHEMAS",
    "PRIMITIVE_TYPES",
    "SCHEMAS",
    "Field",
    "RecordSchema",
    "Versions",
    "schema_by_name",
]

ZERO_UUID = uuid.UUID(int=0)

#: Fixed-size and variable-size primitive types of Kafka's message schemas used by metadata records.
PRIMITIVE_TYPES = frozenset(
    {"int8", "int16", "int32", "int64", "uint16", "float64", "bool", "string", "bytes", "uuid"}
)


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range as Kafka writes it ("0+", "1-2", "3"); ``high`` None means open."""

    low: int
    high: int | None = None

    @classmethod
    def parse(cls, text: str) -> Versions:
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]))
        if "-" in text:
            low, high = text.split("-", 1)
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        return (
            isinstance(version, int) and self.low <= version and (self.high is None or version <= self.high)
        )


NONE_VERSIONS = Versions(1 << 30, -1)


@dataclass(frozen=True, slots=True)
class Field:
    """One field: Kafka's name and type, the versions it exists in, its tag, default and nullability.

    ``type`` is a primitive name, ``[]<primitive>``, ``[]<StructName>`` (array of structs, with
    ``fields``) or ``<StructName>`` (a single struct, with ``fields``).
    """

    name: str
    type: str
    versions: Versions
    tag: int | None = None
    tagged_versions: Versions = NONE_VERSIONS
    nullable_versions: Versions = NONE_VERSIONS
    default_text: str | None = None
    fields: tuple[Field, ...] = ()

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        """The element type of an array, or the type itself."""
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return bool(self.fields)

    def exists_in(self, version: int) -> bool:
        return version in self.versions

    def is_tagged_in(self, version: int) -> bool:
        return self.tag is not None and version in self.tagged_versions

    def is_nullable_in(self, version: int) -> bool:
        return version in self.nullable_versions

    def default(self) -> Any:
        """A fresh copy of the field's default value, following Kafka's generator rules."""
        text = self.default_text
        if text == "null":
            return None
        if self.is_array:
            return []
        if self.is_struct:
            return {f.name: f.default() for f in self.fields}
        t = self.type
        if t in ("int8", "int16", "int32", "int64", "uint16"):
            return int(text, 0) if text else 0
        if t == "float64":
            return float(text) if text else 0.0
        if t == "bool":
            return text == "true"
        if t == "string":
            return text or ""
        if t == "bytes":
            return b""
        if t == "uuid":
            return ZERO_UUID
        raise ValueError(f"field {self.name} has unknown type {t}")


@dataclass(frozen=True, slots=True)
class RecordSchema:
    """A record (or control-record body) type with every version's fields."""

    api_key: int | None
    name: str
    max_version: int
    fields: tuple[Field, ...]
    min_version: int = 0
    field_names: frozenset[str] = field(default=frozenset(), compare=False)

    def fields_in(self, version: int) -> tuple[Field, ...]:
        """The top-level fields that exist in ``version``, in declaration (wire) order."""
        return tuple(f for f in self.fields if f.exists_in(version))

    def has_version(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


def _f(
    name: str,
    type_: str,
    versions: str = "0+",
    *,
    tag: int | None = None,
    tagged: str | None = None,
    nullable: str | None = None,
    default: str | None = None,
    fields: tuple[Field, ...] = (),
) -> Field:
    if tag is not None and tagged is None:
        tagged = versions
    return Field(
        name=name,
        type=type_,
        versions=Versions.parse(versions),
        tag=tag,
        tagged_versions=Versions.parse(tagged) if tagged is not None else NONE_VERSIONS,
        nullable_versions=Versions.parse(nullable) if nullable is not None else NONE_VERSIONS,
        default_text=default,
        fields=fields,
    )


def _schema(api_key: int | None, name: str, valid: str, *fields: Field) -> RecordSchema:
    versions = Versions.parse(valid)
    assert versions.high is not None
    return RecordSchema(
        api_key=api_key,
        name=name,
        max_version=versions.high,
        min_version=versions.low,
        fields=tuple(fields),
        field_names=frozenset(f.name for f in fields),
    )


_ENDPOINT_FIELDS = (
    _f("Name", "string"),
    _f("Host", "string"),
    _f("Port", "uint16"),
    _f("SecurityProtocol", "int16"),
)
_FEATURE_FIELDS = (
    _f("Name", "string"),
    _f("MinSupportedVersion", "int16"),
    _f("MaxSupportedVersion", "int16"),
)

_RECORDS: tuple[RecordSchema, ...] = (
    _schema(
        0,
        "RegisterBrokerRecord",
        "0-3",
        _f("BrokerId", "int32"),
        _f("IsMigratingZkBroker", "bool", "2+", default="false"),
        _f("IncarnationId", "uuid"),
        _f("BrokerEpoch", "int64"),
        _f("EndPoints", "[]BrokerEndpoint", fields=_ENDPOINT_FIELDS),
        _f("Features", "[]BrokerFeature", fields=_FEATURE_FIELDS),
        _f("Rack", "string", nullable="0+"),
        _f("Fenced", "bool", default="true"),
        _f("InControlledShutdown", "bool", "1+", default="false"),
        _f("LogDirs", "[]uuid", "3+", tag=0),
    ),
    _schema(
        1,
        "UnregisterBrokerRecord",
        "0",
        _f("BrokerId", "int32"),
        _f("BrokerEpoch", "int64"),
    ),
    _schema(
        2,
        "TopicRecord",
        "0",
        _f("Name", "string"),
        _f("TopicId", "uuid"),
    ),
    _schema(
        3,
        "PartitionRecord",
        "0-2",
        _f("PartitionId", "int32", default="-1"),
        _f("TopicId", "uuid"),
        _f("Replicas", "[]int32"),
        _f("Isr", "[]int32"),
        _f("RemovingReplicas", "[]int32"),
        _f("AddingReplicas", "[]int32"),
        _f("Leader", "int32", default="-1"),
        _f("LeaderRecoveryState", "int8", tag=0, default="0"),
        _f("LeaderEpoch", "int32", default="-1"),
        _f("PartitionEpoch", "int32", default="-1"),
        _f("Directories", "[]uuid", "1+"),
        _f("EligibleLeaderReplicas", "[]int32", "2+", tag=1, nullable="2+", default="null"),
        _f("LastKnownElr", "[]int32", "2+", tag=2, nullable="2+", default="null"),
    ),
    _schema(
        4,
        "ConfigRecord",
        "0",
        _f("ResourceType", "int8"),
        _f("ResourceName", "string"),
        _f("Name", "string"),
        _f("Value", "string", nullable="0+"),
    ),
    _schema(
        5,
        "PartitionChangeRecord",
        "0-2",
        _f("PartitionId", "int32", default="-1"),
        _f("TopicId", "uuid"),
        _f("Isr", "[]int32", tag=0, nullable="0+", default="null"),
        _f("Leader", "int32", tag=1, default="-2"),
        _f("Replicas", "[]int32", tag=2, nullable="0+", default="null"),
        _f("RemovingReplicas", "[]int32", tag=3, nullable="0+", default="null"),
        _f("AddingReplicas", "[]int32", tag=4, nullable="0+", default="null"),
        _f("LeaderRecoveryState", "int8", tag=5, default="-1"),
        _f("Directories", "[]uuid", "1+", tag=8, nullable="1+", default="null"),
        _f("EligibleLeaderReplicas", "[]int32", "2+", tag=6, nullable="2+", default="null"),
        _f("LastKnownElr", "[]int32", "2+", tag=7, nullable="2+", default="null"),
    ),
    _schema(
        7,
        "FenceBrokerRecord",
        "0",
        _f("Id", "int32"),
        _f("Epoch", "int64"),
    ),
    _schema(
        8,
        "UnfenceBrokerRecord",
        "0",
        _f("Id", "int32"),
        _f("Epoch", "int64"),
    ),
    _schema(
        9,
        "RemoveTopicRecord",
        "0",
        _f("TopicId", "uuid"),
    ),
    _schema(
        10,
        "DelegationTokenRecord",
        "0",
        _f("Owner", "string"),
        _f("Requester", "string"),
        _f("Renewers", "[]string"),
        _f("IssueTimestamp", "int64"),
        _f("MaxTimestamp", "int64"),
        _f("ExpirationTimestamp", "int64"),
        _f("TokenId", "string"),
    ),
    _schema(
        11,
        "UserScramCredentialRecord",
        "0",
        _f("Name", "string"),
        _f("Mechanism", "int8"),
        _f("Salt", "bytes"),
        _f("StoredKey", "bytes"),
        _f("ServerKey", "bytes"),
        _f("Iterations", "int32"),
    ),
    _schema(
        12,
        "FeatureLevelRecord",
        "0",
        _f("Name", "string"),
        _f("FeatureLevel", "int16"),
    ),
    _schema(
        14,
        "ClientQuotaRecord",
        "0",
        _f(
            "Entity",
            "[]EntityData",
            fields=(
                _f("EntityType", "string"),
                _f("EntityName", "string", nullable="0+"),
            ),
        ),
        _f("Key", "string"),
        _f("Value", "float64"),
        _f("Remove", "bool"),
    ),
    _schema(
        15,
        "ProducerIdsRecord",
        "0",
        _f("BrokerId", "int32"),
        _f("BrokerEpoch", "int64", default="-1"),
        _f("NextProducerId", "int64"),
    ),
    _schema(
        17,
        "BrokerRegistrationChangeRecord",
        "0-2",
        _f("BrokerId", "int32"),
        _f("BrokerEpoch", "int64"),
        _f("Fenced", "int8", tag=0),
        _f("InControlledShutdown", "int8", "1+", tag=1),
        _f("LogDirs", "[]uuid", "2+", tag=2),
    ),
    _schema(
        18,
        "AccessControlEntryRecord",
        "0",
        _f("Id", "uuid"),
        _f("ResourceType", "int8"),
        _f("ResourceName", "string"),
        _f("PatternType", "int8"),
        _f("Principal", "string"),
        _f("Host", "string"),
        _f("Operation", "int8"),
        _f("PermissionType", "int8"),
    ),
    _schema(
        19,
        "RemoveAccessControlEntryRecord",
        "0",
        _f("Id", "uuid"),
    ),
    _schema(20, "NoOpRecord", "0"),
    _schema(
        21,
        "ZkMigrationStateRecord",
        "0",
        _f("ZkMigrationState", "int8"),
    ),
    _schema(
        22,
        "RemoveUserScramCredentialRecord",
        "0",
        _f("Name", "string"),
        _f("Mechanism", "int8"),
    ),
    _schema(
        23,
        "BeginTransactionRecord",
        "0",
        _f("Name", "string", tag=0, nullable="0+", default="null"),
    ),
    _schema(24, "EndTransactionRecord", "0"),
    _schema(
        25,
        "AbortTransactionRecord",
        "0",
        _f("Reason", "string", tag=0, nullable="0+", default="null"),
    ),
    _schema(
        26,
        "RemoveDelegationTokenRecord",
        "0",
        _f("TokenId", "string"),
    ),
    _schema(
        27,
        "RegisterControllerRecord",
        "0",
        _f("ControllerId", "int32"),
        _f("IncarnationId", "uuid"),
        _f("ZkMigrationReady", "bool"),
        _f("EndPoints", "[]ControllerEndpoint", fields=_ENDPOINT_FIELDS),
        _f("Features", "[]ControllerFeature", fields=_FEATURE_FIELDS),
    ),
)

#: Metadata record schemas by apiKey.
SCHEMAS: dict[int, RecordSchema] = {s.api_key: s for s in _RECORDS if s.api_key is not None}

_VOTER_FIELDS = (
    _f("VoterId", "int32"),
    _f("VoterDirectoryId", "uuid", "1+"),
)

#: Control-record value bodies by Kafka's message name (no frame; first field is their own Version).
CONTROL_SCHEMAS: dict[str, RecordSchema] = {
    s.name: s
    for s in (
        _schema(
            None,
            "LeaderChangeMessage",
            "0-1",
            _f("Version", "int16"),
            _f("LeaderId", "int32"),
            _f("Voters", "[]Voter", fields=_VOTER_FIELDS),
            _f("GrantingVoters", "[]Voter", fields=_VOTER_FIELDS),
        ),
        _schema(
            None,
            "SnapshotHeaderRecord",
            "0",
            _f("Version", "int16"),
            _f("LastContainedLogTimestamp", "int64"),
        ),
        _schema(None, "SnapshotFooterRecord", "0", _f("Version", "int16")),
        _schema(
            None,
            "KRaftVersionRecord",
            "0",
            _f("Version", "int16"),
            _f("KRaftVersion", "int16"),
        ),
        _schema(
            None,
            "VotersRecord",
            "0",
            _f("Version", "int16"),
            _f(
                "Voters",
                "[]Voter",
                fields=(
                    _f("VoterId", "int32"),
                    _f("VoterDirectoryId", "uuid"),
                    _f(
                        "Endpoints",
                        "[]Endpoint",
                        fields=(_f("Name", "string"), _f("Host", "string"), _f("Port", "uint16")),
                    ),
                    _f(
                        "KRaftVersionFeature",
                        "KRaftVersionFeature",
                        fields=(
                            _f("MinSupportedVersion", "int16"),
                            _f("MaxSupportedVersion", "int16"),
                        ),
                    ),
                ),
            ),
        ),
    )
}

_BY_NAME: dict[str, RecordSchema] = {s.name: s for s in _RECORDS}


def schema_by_name(name: str) -> RecordSchema:
    """The metadata record schema called ``name`` (Kafka's name, e.g. ``PartitionRecord``)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown metadata record type {name!r}") from None
