"""The admin API versions kio lacks (`controller.protocol.kio_admin_v0`), checked byte for byte against Kafka 3.9's schemas.

The independent encoder is kafka-python's JSON-schema message codec (kafka.protocol.api_message), fed
the field lists of Kafka 3.9's CreateTopics, DeleteTopics, DescribeConfigs, CreateAcls, DeleteAcls and
DescribeAcls request/response JSON, written out below in the JSON's own shape (names, types,
versions, nullableVersions; the `about` texts left out). Kafka 4.0 changed only `validVersions` in
these files (KIP-896 dropped the oldest versions, the field ranges stayed), so the fields are those
of both. zk2kraft's declarations must produce the same bytes for the same values, and read them back.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from kafka_schema_codec import F, kafka_python_classes, kio_value, kp_value
from kio.serial import entity_reader, entity_writer

from migrator.controller.protocol import kio_admin_v0
from migrator.controller.protocol.kio_apis import schema_module

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


ACL_FILTER = [
    F("ResourceTypeFilter", "int8", "0+"),
    F("ResourceNameFilter", "string", "0+", nullableVersions="0+"),
    F("PatternTypeFilter", "int8", "1+", default="3"),
    F("PrincipalFilter", "string", "0+", nullableVersions="0+"),
    F("HostFilter", "string", "0+", nullableVersions="0+"),
    F("Operation", "int8", "0+"),
    F("PermissionType", "int8", "0+"),
]

SCHEMAS: dict[str, dict[str, Any]] = {
    "CreateTopicsRequest": {
        "apiKey": 19,
        "type": "request",
        "validVersions": "0-7",
        "flexibleVersions": "5+",
        "fields": [
            F(
                "Topics",
                "[]CreatableTopic",
                "0+",
                fields=[
                    F("Name", "string", "0+"),
                    F("NumPartitions", "int32", "0+"),
                    F("ReplicationFactor", "int16", "0+"),
                    F(
                        "Assignments",
                        "[]CreatableReplicaAssignment",
                        "0+",
                        fields=[F("PartitionIndex", "int32", "0+"), F("BrokerIds", "[]int32", "0+")],
                    ),
                    F(
                        "Configs",
                        "[]CreatableTopicConfig",
                        "0+",
                        fields=[F("Name", "string", "0+"), F("Value", "string", "0+", nullableVersions="0+")],
                    ),
                ],
            ),
            F("timeoutMs", "int32", "0+", default="60000"),
            F("validateOnly", "bool", "1+", default="false"),
        ],
    },
    "CreateTopicsResponse": {
        "apiKey": 19,
        "type": "response",
        "validVersions": "0-7",
        "flexibleVersions": "5+",
        "fields": [
            F("ThrottleTimeMs", "int32", "2+"),
            F(
                "Topics",
                "[]CreatableTopicResult",
                "0+",
                fields=[
                    F("Name", "string", "0+"),
                    F("TopicId", "uuid", "7+"),
                    F("ErrorCode", "int16", "0+"),
                    F("ErrorMessage", "string", "1+", nullableVersions="0+"),
                    F("NumPartitions", "int32", "5+", default="-1"),
                    F("ReplicationFactor", "int16", "5+", default="-1"),
                ],
            ),
        ],
    },
    "DeleteTopicsRequest": {
        "apiKey": 20,
        "type": "request",
        "validVersions": "0-6",
        "flexibleVersions": "4+",
        "fields": [
            F(
                "Topics",
                "[]DeleteTopicState",
                "6+",
                fields=[F("Name", "string", "6+", nullableVersions="6+"), F("TopicId", "uuid", "6+")],
            ),
            F("TopicNames", "[]string", "0-5"),
            F("TimeoutMs", "int32", "0+"),
        ],
    },
    "DeleteTopicsResponse": {
        "apiKey": 20,
        "type": "response",
        "validVersions": "0-6",
        "flexibleVersions": "4+",
        "fields": [
            F("ThrottleTimeMs", "int32", "1+"),
            F(
                "Responses",
                "[]DeletableTopicResult",
                "0+",
                fields=[
                    F("Name", "string", "0+", nullableVersions="6+"),
                    F("TopicId", "uuid", "6+"),
                    F("ErrorCode", "int16", "0+"),
                    F("ErrorMessage", "string", "5+", nullableVersions="5+"),
                ],
            ),
        ],
    },
    "DescribeConfigsRequest": {
        "apiKey": 32,
        "type": "request",
        "validVersions": "0-4",
        "flexibleVersions": "4+",
        "fields": [
            F(
                "Resources",
                "[]DescribeConfigsResource",
                "0+",
                fields=[
                    F("ResourceType", "int8", "0+"),
                    F("ResourceName", "string", "0+"),
                    F("ConfigurationKeys", "[]string", "0+", nullableVersions="0+"),
                ],
            ),
            F("IncludeSynonyms", "bool", "1+", default="false"),
            F("IncludeDocumentation", "bool", "3+", default="false"),
        ],
    },
    "DescribeConfigsResponse": {
        "apiKey": 32,
        "type": "response",
        "validVersions": "0-4",
        "flexibleVersions": "4+",
        "fields": [
            F("ThrottleTimeMs", "int32", "0+"),
            F(
                "Results",
                "[]DescribeConfigsResult",
                "0+",
                fields=[
                    F("ErrorCode", "int16", "0+"),
                    F("ErrorMessage", "string", "0+", nullableVersions="0+"),
                    F("ResourceType", "int8", "0+"),
                    F("ResourceName", "string", "0+"),
                    F(
                        "Configs",
                        "[]DescribeConfigsResourceResult",
                        "0+",
                        fields=[
                            F("Name", "string", "0+"),
                            F("Value", "string", "0+", nullableVersions="0+"),
                            F("ReadOnly", "bool", "0+"),
                            F("IsDefault", "bool", "0"),
                            F("ConfigSource", "int8", "1+", default="-1"),
                            F("IsSensitive", "bool", "0+"),
                            F(
                                "Synonyms",
                                "[]DescribeConfigsSynonym",
                                "1+",
                                fields=[
                                    F("Name", "string", "1+"),
                                    F("Value", "string", "1+", nullableVersions="0+"),
                                    F("Source", "int8", "1+"),
                                ],
                            ),
                            F("ConfigType", "int8", "3+", default="0"),
                            F("Documentation", "string", "3+", nullableVersions="0+"),
                        ],
                    ),
                ],
            ),
        ],
    },
    "CreateAclsRequest": {
        "apiKey": 30,
        "type": "request",
        "validVersions": "0-3",
        "flexibleVersions": "2+",
        "fields": [
            F(
                "Creations",
                "[]AclCreation",
                "0+",
                fields=[
                    F("ResourceType", "int8", "0+"),
                    F("ResourceName", "string", "0+"),
                    F("ResourcePatternType", "int8", "1+", default="3"),
                    F("Principal", "string", "0+"),
                    F("Host", "string", "0+"),
                    F("Operation", "int8", "0+"),
                    F("PermissionType", "int8", "0+"),
                ],
            )
        ],
    },
    "CreateAclsResponse": {
        "apiKey": 30,
        "type": "response",
        "validVersions": "0-3",
        "flexibleVersions": "2+",
        "fields": [
            F("ThrottleTimeMs", "int32", "0+"),
            F(
                "Results",
                "[]AclCreationResult",
                "0+",
                fields=[
                    F("ErrorCode", "int16", "0+"),
                    F("ErrorMessage", "string", "0+", nullableVersions="0+"),
                ],
            ),
        ],
    },
    "DeleteAclsRequest": {
        "apiKey": 31,
        "type": "request",
        "validVersions": "0-3",
        "flexibleVersions": "2+",
        "fields": [F("Filters", "[]DeleteAclsFilter", "0+", fields=ACL_FILTER)],
    },
    "DeleteAclsResponse": {
        "apiKey": 31,
        "type": "response",
        "validVersions": "0-3",
        "flexibleVersions": "2+",
        "fields": [
            F("ThrottleTimeMs", "int32", "0+"),
            F(
                "FilterResults",
                "[]DeleteAclsFilterResult",
                "0+",
                fields=[
                    F("ErrorCode", "int16", "0+"),
                    F("ErrorMessage", "string", "0+", nullableVersions="0+"),
                    F(
                        "MatchingAcls",
                        "[]DeleteAclsMatchingAcl",
                        "0+",
                        fields=[
                            F("ErrorCode", "int16", "0+"),
                            F("ErrorMessage", "string", "0+", nullableVersions="0+"),
                            F("ResourceType", "int8", "0+"),
                            F("ResourceName", "string", "0+"),
                            F("PatternType", "int8", "1+", default="3"),
                            F("Principal", "string", "0+"),
                            F("Host", "string", "0+"),
                            F("Operation", "int8", "0+"),
                            F("PermissionType", "int8", "0+"),
                        ],
                    ),
                ],
            ),
        ],
    },
    "DescribeAclsRequest": {
        "apiKey": 29,
        "type": "request",
        "validVersions": "0-3",
        "flexibleVersions": "2+",
        "fields": ACL_FILTER,
    },
    "DescribeAclsResponse": {
        "apiKey": 29,
        "type": "response",
        "validVersions": "0-3",
        "flexibleVersions": "2+",
        "fields": [
            F("ThrottleTimeMs", "int32", "0+"),
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "0+", nullableVersions="0+"),
            F(
                "Resources",
                "[]DescribeAclsResource",
                "0+",
                fields=[
                    F("ResourceType", "int8", "0+"),
                    F("ResourceName", "string", "0+"),
                    F("PatternType", "int8", "1+", default="3"),
                    F(
                        "Acls",
                        "[]AclDescription",
                        "0+",
                        fields=[
                            F("Principal", "string", "0+"),
                            F("Host", "string", "0+"),
                            F("Operation", "int8", "0+"),
                            F("PermissionType", "int8", "0+"),
                        ],
                    ),
                ],
            ),
        ],
    },
}

#: kio's names for the JSON's millisecond fields (kio reads them as timedeltas).
_KIO_NAMES = {"timeout_ms": "timeout", "throttle_time_ms": "throttle_time"}

_ACL_FILTER = {
    "resource_type_filter": 2,
    "resource_name_filter": "orders",
    "principal_filter": "User:alice",
    "host_filter": None,
    "operation": 3,
    "permission_type": 3,
}
_ACL = {
    "resource_type": 2,
    "resource_name": "orders",
    "principal": "User:alice",
    "host": "*",
    "operation": 3,
    "permission_type": 3,
}


def sample(name: str) -> dict[str, Any]:
    """One value per message, every field of every version set (kafka-python's snake_case names)."""
    return {
        "CreateTopicsRequest": {
            "topics": [
                {
                    "name": "orders",
                    "num_partitions": -1,
                    "replication_factor": -1,
                    "assignments": [{"partition_index": 0, "broker_ids": [1, 2]}],
                    "configs": [{"name": "cleanup.policy", "value": "compact"}, {"name": "x", "value": None}],
                },
                {"name": "b", "num_partitions": 3, "replication_factor": 2, "assignments": [], "configs": []},
            ],
            "timeout_ms": 30000,
            "validate_only": True,
        },
        "CreateTopicsResponse": {
            "throttle_time_ms": 0,
            "topics": [
                {"name": "orders", "error_code": 0, "error_message": None},
                {"name": "b", "error_code": 36, "error_message": "Topic 'b' already exists."},
            ],
        },
        "DeleteTopicsRequest": {"topic_names": ["orders", "b"], "timeout_ms": 15000},
        "DeleteTopicsResponse": {
            "throttle_time_ms": 0,
            "responses": [{"name": "orders", "error_code": 0}, {"name": "b", "error_code": 3}],
        },
        "DescribeConfigsRequest": {
            "resources": [
                {"resource_type": 2, "resource_name": "orders", "configuration_keys": ["retention.ms"]},
                {"resource_type": 4, "resource_name": "", "configuration_keys": None},
            ],
        },
        "DescribeConfigsResponse": {
            "throttle_time_ms": 7,
            "results": [
                {
                    "error_code": 0,
                    "error_message": None,
                    "resource_type": 2,
                    "resource_name": "orders",
                    "configs": [
                        {
                            "name": "retention.ms",
                            "value": "1000",
                            "read_only": False,
                            "is_default": False,
                            "is_sensitive": False,
                        },
                        {
                            "name": "p",
                            "value": None,
                            "read_only": True,
                            "is_default": True,
                            "is_sensitive": True,
                        },
                    ],
                }
            ],
        },
        "CreateAclsRequest": {"creations": [_ACL, {**_ACL, "resource_name": "*", "operation": 4}]},
        "CreateAclsResponse": {
            "throttle_time_ms": 0,
            "results": [{"error_code": 0, "error_message": None}, {"error_code": 42, "error_message": "no"}],
        },
        "DeleteAclsRequest": {"filters": [_ACL_FILTER, {**_ACL_FILTER, "resource_name_filter": None}]},
        "DeleteAclsResponse": {
            "throttle_time_ms": 0,
            "filter_results": [
                {
                    "error_code": 0,
                    "error_message": None,
                    "matching_acls": [{"error_code": 0, "error_message": None, **_ACL}],
                }
            ],
        },
        "DescribeAclsRequest": _ACL_FILTER,
        "DescribeAclsResponse": {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "orders",
                    "acls": [{k: _ACL[k] for k in ("principal", "host", "operation", "permission_type")}],
                }
            ],
        },
    }[name]


@pytest.fixture(scope="module")
def kp_classes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return kafka_python_classes(tmp_path_factory.mktemp("schemas"), "zk2kraft_k39_admin_schemas", SCHEMAS)


CASES = [
    (f"{stem}{kind.capitalize()}", api_key, v, kind)
    for (api_key, v) in sorted(kio_admin_v0.DECLARED)
    for stem in [{19: "CreateTopics", 20: "DeleteTopics", 32: "DescribeConfigs"}.get(api_key, "")]
    + [{29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls"}.get(api_key, "")]
    if stem
    for kind in ("request", "response")
]


@pytest.mark.parametrize(
    ("name", "api_key", "version", "kind"), CASES, ids=[f"{n}-v{v}" for n, _, v, _ in CASES]
)
def test_declared_bytes_match_kafka_39_schema(
    kp_classes: dict[str, Any], name: str, api_key: int, version: int, kind: str
) -> None:
    value = sample(name)
    kp_cls = kp_classes[name]
    expected = bytes(kp_value(kp_cls, kp_cls, value).encode(version=version))

    cls = getattr(schema_module(api_key, version, kind), name)
    assert cls.__version__ == version and cls.__api_key__ == api_key and not cls.__flexible__
    entity = kio_value(cls, value, _KIO_NAMES)
    buf = io.BytesIO()
    entity_writer(cls)(buf, entity)
    assert buf.getvalue() == expected

    decoded, size = entity_reader(cls)(expected, 0)
    assert size == len(expected)
    assert decoded == entity


def test_every_declared_version_is_served_and_the_next_comes_from_kio() -> None:
    """The declarations fill exactly the gap below kio's first version of each API."""
    from migrator.controller.protocol.wire_versions import SUPPORTED

    for api_key, version in kio_admin_v0.DECLARED:
        assert SUPPORTED[api_key][0] == 0
        nxt = schema_module(api_key, version + 1, "request")
        if (api_key, version + 1) not in kio_admin_v0.DECLARED:
            assert nxt.__name__.startswith("kio.schema."), nxt
