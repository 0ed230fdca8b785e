"""The oldest admin API versions, which kio does not ship, declared as kio entities.

Kafka 4.0 removed CreateTopics v0-1, DeleteTopics v0, DescribeConfigs v0 and v0 of CreateAcls,
DeleteAcls and DescribeAcls (KIP-896), so kio 0.6, generated from 4.0's schemas, starts one or two
versions later. Kafka 3.9 still serves them, and old clients still send them. They are declared here
from Kafka 3.9's `CreateTopicsRequest/Response.json`, `DeleteTopicsRequest/Response.json`,
`DescribeConfigsRequest/Response.json`, `CreateAclsRequest/Response.json`,
`DeleteAclsRequest/Response.json` and `DescribeAclsRequest/Response.json`, field by field along the
JSON's `versions` ranges, as `kio_ext` declares AlterPartition v0/v1. Each version is a namespace with
the class names of kio's generated modules, so the handlers build their answers with the same names
whatever the version. None of them is flexible: request header v1, response header v0.
tests/test_kio_admin_v0.py checks every declaration's bytes against the JSON's layout.

No `from __future__ import annotations` here: kio reads these annotations at runtime.
"""

import datetime
from dataclasses import dataclass, field
from types import SimpleNamespace

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader
from kio.schema.types import BrokerId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i32Timedelta

from migrator.controller.protocol.kio_fields import BOOL as _BOOL
from migrator.controller.protocol.kio_fields import ERROR_CODE as _ERROR
from migrator.controller.protocol.kio_fields import INT8 as _INT8
from migrator.controller.protocol.kio_fields import INT16 as _INT16
from migrator.controller.protocol.kio_fields import INT32 as _INT32
from migrator.controller.protocol.kio_fields import STRING as _STRING
from migrator.controller.protocol.kio_fields import TIMEDELTA_I32 as _MS

__all__ = ["DECLARED", "declared"]

CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS = 19, 20, 32
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31


def _entities(api_key: int, version: int, request: bool, *classes: type) -> None:
    """Sets the ClassVars kio reads on each class; the last one is the message, the rest are nested."""
    header = RequestHeader if request else ResponseHeader
    for i, cls in enumerate(classes):
        last = i == len(classes) - 1
        cls.__type__ = (  # type: ignore[attr-defined]
            (EntityType.request if request else EntityType.response) if last else EntityType.nested
        )
        cls.__version__ = i16(version)  # type: ignore[attr-defined]
        cls.__flexible__ = False  # type: ignore[attr-defined]
        cls.__api_key__ = i16(api_key)  # type: ignore[attr-defined]
        cls.__header_schema__ = header  # type: ignore[attr-defined]


def _ns(*classes: type) -> SimpleNamespace:
    return SimpleNamespace(**{c.__name__: c for c in classes})


# --- CreateTopics v0-1 (apiKey 19): v1 adds validateOnly and the per-topic error message -------------


def _create_topics(v: int) -> tuple[SimpleNamespace, SimpleNamespace]:
    @dataclass(frozen=True, slots=True, kw_only=True)
    class CreatableReplicaAssignment:
        partition_index: i32 = field(metadata=_INT32)
        broker_ids: tuple[BrokerId, ...] = field(metadata=_INT32, default=())

    @dataclass(frozen=True, slots=True, kw_only=True)
    class CreatableTopicConfig:
        name: str = field(metadata=_STRING)
        value: str | None = field(metadata=_STRING)

    @dataclass(frozen=True, slots=True, kw_only=True)
    class CreatableTopic:
        name: TopicName = field(metadata=_STRING)
        num_partitions: i32 = field(metadata=_INT32)
        replication_factor: i16 = field(metadata=_INT16)
        assignments: tuple[CreatableReplicaAssignment, ...]
        configs: tuple[CreatableTopicConfig, ...]

    @dataclass(frozen=True, slots=True, kw_only=True)
    class CreateTopicsRequest:
        topics: tuple[CreatableTopic, ...]
        timeout: i32Timedelta = field(
            metadata=_MS, default=i32Timedelta.parse(datetime.timedelta(milliseconds=60000))
        )
        if v >= 1:
            validate_only: bool = field(metadata=_BOOL, default=False)

    @dataclass(frozen=True, slots=True, kw_only=True)
    class CreatableTopicResult:
        name: TopicName = field(metadata=_STRING)
        error_code: ErrorCode = field(metadata=_ERROR)
        if v >= 1:
            error_message: str | None = field(metadata=_STRING)

    @dataclass(frozen=True, slots=True, kw_only=True)
    class CreateTopicsResponse:
        topics: tuple[CreatableTopicResult, ...]

    req = (CreatableReplicaAssignment, CreatableTopicConfig, CreatableTopic, CreateTopicsRequest)
    resp = (CreatableTopicResult, CreateTopicsResponse)
    _entities(CREATE_TOPICS, v, True, *req)
    _entities(CREATE_TOPICS, v, False, *resp)
    return _ns(*req), _ns(*resp)


# --- DeleteTopics v0 (apiKey 20): v1 only adds the response's throttle time ---------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicsRequest:
    topic_names: tuple[TopicName, ...] = field(metadata=_STRING, default=())
    timeout: i32Timedelta = field(metadata=_MS)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletableTopicResult:
    name: TopicName = field(metadata=_STRING)
    error_code: ErrorCode = field(metadata=_ERROR)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicsResponse:
    responses: tuple[DeletableTopicResult, ...]


_entities(DELETE_TOPICS, 0, True, DeleteTopicsRequest)
_entities(DELETE_TOPICS, 0, False, DeletableTopicResult, DeleteTopicsResponse)


# --- DescribeConfigs v0 (apiKey 32): no IncludeSynonyms, no ConfigSource nor synonyms; IsDefault -------


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResource:
    resource_type: i8 = field(metadata=_INT8)
    resource_name: str = field(metadata=_STRING)
    configuration_keys: tuple[str, ...] | None = field(metadata=_STRING, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsRequest:
    resources: tuple[DescribeConfigsResource, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResourceResult:
    name: str = field(metadata=_STRING)
    value: str | None = field(metadata=_STRING)
    read_only: bool = field(metadata=_BOOL)
    is_default: bool = field(metadata=_BOOL)
    is_sensitive: bool = field(metadata=_BOOL)


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResult:
    error_code: ErrorCode = field(metadata=_ERROR)
    error_message: str | None = field(metadata=_STRING)
    resource_type: i8 = field(metadata=_INT8)
    resource_name: str = field(metadata=_STRING)
    configs: tuple[DescribeConfigsResourceResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResponse:
    throttle_time: i32Timedelta = field(metadata=_MS)
    results: tuple[DescribeConfigsResult, ...]


_entities(DESCRIBE_CONFIGS, 0, True, DescribeConfigsResource, DescribeConfigsRequest)
_entities(
    DESCRIBE_CONFIGS,
    0,
    False,
    DescribeConfigsResourceResult,
    DescribeConfigsResult,
    DescribeConfigsResponse,
)


# --- CreateAcls v0 (apiKey 30): no ResourcePatternType (LITERAL) ---------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AclCreation:
    resource_type: i8 = field(metadata=_INT8)
    resource_name: str = field(metadata=_STRING)
    principal: str = field(metadata=_STRING)
    host: str = field(metadata=_STRING)
    operation: i8 = field(metadata=_INT8)
    permission_type: i8 = field(metadata=_INT8)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateAclsRequest:
    creations: tuple[AclCreation, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AclCreationResult:
    error_code: ErrorCode = field(metadata=_ERROR)
    error_message: str | None = field(metadata=_STRING)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateAclsResponse:
    throttle_time: i32Timedelta = field(metadata=_MS)
    results: tuple[AclCreationResult, ...]


_entities(CREATE_ACLS, 0, True, AclCreation, CreateAclsRequest)
_entities(CREATE_ACLS, 0, False, AclCreationResult, CreateAclsResponse)


# --- DeleteAcls v0 (apiKey 31): no PatternTypeFilter / PatternType -------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsFilter:
    resource_type_filter: i8 = field(metadata=_INT8)
    resource_name_filter: str | None = field(metadata=_STRING)
    principal_filter: str | None = field(metadata=_STRING)
    host_filter: str | None = field(metadata=_STRING)
    operation: i8 = field(metadata=_INT8)
    permission_type: i8 = field(metadata=_INT8)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsRequest:
    filters: tuple[DeleteAclsFilter, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsMatchingAcl:
    error_code: ErrorCode = field(metadata=_ERROR)
    error_message: str | None = field(metadata=_STRING)
    resource_type: i8 = field(metadata=_INT8)
    resource_name: str = field(metadata=_STRING)
    principal: str = field(metadata=_STRING)
    host: str = field(metadata=_STRING)
    operation: i8 = field(metadata=_INT8)
    permission_type: i8 = field(metadata=_INT8)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsFilterResult:
    error_code: ErrorCode = field(metadata=_ERROR)
    error_message: str | None = field(metadata=_STRING)
    matching_acls: tuple[DeleteAclsMatchingAcl, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsResponse:
    throttle_time: i32Timedelta = field(metadata=_MS)
    filter_results: tuple[DeleteAclsFilterResult, ...]


_entities(DELETE_ACLS, 0, True, DeleteAclsFilter, DeleteAclsRequest)
_entities(DELETE_ACLS, 0, False, DeleteAclsMatchingAcl, DeleteAclsFilterResult, DeleteAclsResponse)


# --- DescribeAcls v0 (apiKey 29): no PatternTypeFilter / PatternType -----------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeAclsRequest:
    resource_type_filter: i8 = field(metadata=_INT8)
    resource_name_filter: str | None = field(metadata=_STRING)
    principal_filter: str | None = field(metadata=_STRING)
    host_filter: str | None = field(metadata=_STRING)
    operation: i8 = field(metadata=_INT8)
    permission_type: i8 = field(metadata=_INT8)


@dataclass(frozen=True, slots=True, kw_only=True)
class AclDescription:
    principal: str = field(metadata=_STRING)
    host: str = field(metadata=_STRING)
    operation: i8 = field(metadata=_INT8)
    permission_type: i8 = field(metadata=_INT8)


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeAclsResource:
    resource_type: i8 = field(metadata=_INT8)
    resource_name: str = field(metadata=_STRING)
    acls: tuple[AclDescription, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeAclsResponse:
    throttle_time: i32Timedelta = field(metadata=_MS)
    error_code: ErrorCode = field(metadata=_ERROR)
    error_message: str | None = field(metadata=_STRING)
    resources: tuple[DescribeAclsResource, ...]


_entities(DESCRIBE_ACLS, 0, True, DescribeAclsRequest)
_entities(DESCRIBE_ACLS, 0, False, AclDescription, DescribeAclsResource, DescribeAclsResponse)


#: (apiKey, version) -> (request namespace, response namespace), named as kio's generated modules.
DECLARED: dict[tuple[int, int], tuple[SimpleNamespace, SimpleNamespace]] = {
    (CREATE_TOPICS, 0): _create_topics(0),
    (CREATE_TOPICS, 1): _create_topics(1),
    (DELETE_TOPICS, 0): (_ns(DeleteTopicsRequest), _ns(DeletableTopicResult, DeleteTopicsResponse)),
    (DESCRIBE_CONFIGS, 0): (
        _ns(DescribeConfigsResource, DescribeConfigsRequest),
        _ns(DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsResponse),
    ),
    (CREATE_ACLS, 0): (_ns(AclCreation, CreateAclsRequest), _ns(AclCreationResult, CreateAclsResponse)),
    (DELETE_ACLS, 0): (
        _ns(DeleteAclsFilter, DeleteAclsRequest),
        _ns(DeleteAclsMatchingAcl, DeleteAclsFilterResult, DeleteAclsResponse),
    ),
    (DESCRIBE_ACLS, 0): (
        _ns(DescribeAclsRequest),
        _ns(AclDescription, DescribeAclsResource, DescribeAclsResponse),
    ),
}


def declared(api_key: int, version: int, kind: str) -> SimpleNamespace | None:
    """The declared request or response namespace of one version, None where kio ships it."""
    pair = DECLARED.get((api_key, version))
    if pair is None:
        return None
    return pair[0] if kind == "request" else pair[1]
