"""Each API needs the ACL Kafka 3.9's ControllerApis/KafkaApis asks for, checked with the authorizer."""

from __future__ import annotations

import pytest

from migrator.controller.protocol import messages as M
from migrator.controller.security.api_acls import (
    CLUSTER_AUTHORIZATION_FAILED,
    REQUIRED,
    TOPIC_AUTHORIZATION_FAILED,
    authorize_cluster,
    authorized_topics,
    config_resource_error,
    metadata_topics,
)
from migrator.controller.security.authorizer import StandardAuthorizer
from migrator.model import Acl

BROKER = "User:broker"
ADMIN = "User:admin"
APP = "User:app"
HOST = "10.0.0.9"

# apiKey → (kind, operation) as read from ControllerApis.scala / AclApis.scala / KafkaApis.scala (3.9)
KAFKA_3_9 = {
    1: ("cluster", "CLUSTER_ACTION"),
    3: ("describe_filter", "DESCRIBE"),
    17: ("none", None),
    18: ("none", None),
    19: ("topics", "CREATE"),
    20: ("topics", "DELETE"),
    29: ("cluster", "DESCRIBE"),
    30: ("cluster", "ALTER"),
    31: ("cluster", "ALTER"),
    32: ("configs", "DESCRIBE_CONFIGS"),
    33: ("configs", "ALTER_CONFIGS"),
    36: ("none", None),
    37: ("topics", "ALTER"),
    43: ("cluster", "ALTER"),
    44: ("configs", "ALTER_CONFIGS"),
    45: ("cluster", "ALTER"),
    46: ("cluster", "DESCRIBE"),
    48: ("cluster", "DESCRIBE_CONFIGS"),
    49: ("cluster", "ALTER_CONFIGS"),
    50: ("cluster", "DESCRIBE"),
    51: ("cluster", "ALTER"),
    52: ("cluster", "CLUSTER_ACTION"),
    53: ("cluster", "CLUSTER_ACTION"),
    54: ("cluster", "CLUSTER_ACTION"),
    55: ("cluster", "DESCRIBE"),
    56: ("cluster", "CLUSTER_ACTION"),
    57: ("cluster", "ALTER"),
    58: ("cluster", "CLUSTER_ACTION"),
    59: ("cluster", "CLUSTER_ACTION"),
    60: ("cluster", "ALTER"),
    62: ("cluster", "CLUSTER_ACTION"),
    63: ("cluster", "CLUSTER_ACTION"),
    64: ("cluster", "ALTER"),
    67: ("cluster", "CLUSTER_ACTION"),
    70: ("cluster", "CLUSTER_ACTION"),
    73: ("cluster", "CLUSTER_ACTION"),
    80: ("cluster", "ALTER"),
    81: ("cluster", "ALTER"),
    82: ("cluster", "CLUSTER_ACTION"),
    M.ALTER_REPLICA_STATE: ("cluster", "CLUSTER_ACTION"),
}


def cluster_acl(principal: str, op: str) -> Acl:
    return Acl(
        resource_type="CLUSTER",
        resource_name="kafka-cluster",
        pattern_type="LITERAL",
        principal=principal,
        host="*",
        operation=op,
        permission_type="ALLOW",
    )


def topic_acl(principal: str, name: str, op: str, pattern: str = "LITERAL") -> Acl:
    return Acl(
        resource_type="TOPIC",
        resource_name=name,
        pattern_type=pattern,
        principal=principal,
        host="*",
        operation=op,
        permission_type="ALLOW",
    )


def test_the_table_is_kafkas() -> None:
    assert {k: (r.kind, r.operation) for k, r in REQUIRED.items()} == KAFKA_3_9


@pytest.mark.parametrize("api_key", [k for k, (kind, _) in KAFKA_3_9.items() if kind == "cluster"])
def test_cluster_apis_need_their_operation_and_nothing_else_suffices(api_key: int) -> None:
    op = KAFKA_3_9[api_key][1]
    others = ["CLUSTER_ACTION", "ALTER", "DESCRIBE", "ALTER_CONFIGS", "DESCRIBE_CONFIGS", "CREATE"]
    wrong = [o for o in others if o != op and not (op == "DESCRIBE" and o == "ALTER")]
    wrong = [o for o in wrong if not (op == "DESCRIBE_CONFIGS" and o == "ALTER_CONFIGS")]
    assert authorize_cluster(StandardAuthorizer([cluster_acl(APP, op)]), APP, HOST, api_key) == 0
    denied = StandardAuthorizer([cluster_acl(APP, o) for o in wrong])
    assert authorize_cluster(denied, APP, HOST, api_key) == CLUSTER_AUTHORIZATION_FAILED


def test_broker_lifecycle_needs_cluster_action() -> None:
    auth = StandardAuthorizer([cluster_acl(BROKER, "CLUSTER_ACTION")], super_users={ADMIN})
    for api in (
        M.BROKER_REGISTRATION,
        M.BROKER_HEARTBEAT,
        M.ALTER_PARTITION,
        1,
        58,
        67,
        M.ALTER_REPLICA_STATE,
    ):
        assert authorize_cluster(auth, BROKER, HOST, api) == 0
        assert authorize_cluster(auth, APP, HOST, api) == CLUSTER_AUTHORIZATION_FAILED
        assert authorize_cluster(auth, ADMIN, HOST, api) == 0
    assert authorize_cluster(auth, BROKER, HOST, 30) == CLUSTER_AUTHORIZATION_FAILED  # CreateAcls: ALTER


def test_apis_without_a_check_pass_and_unknown_apis_are_refused() -> None:
    auth = StandardAuthorizer()
    for api in (17, 18, 36):
        assert authorize_cluster(auth, APP, HOST, api) == 0
    assert authorize_cluster(auth, APP, HOST, 9999) == CLUSTER_AUTHORIZATION_FAILED


def test_create_topics_per_topic_or_all_with_create_on_cluster() -> None:
    auth = StandardAuthorizer([topic_acl(APP, "orders-", "CREATE", "PREFIXED")])
    assert authorized_topics(auth, APP, HOST, 19, ["orders-1", "payments"]) == ({"orders-1"}, {"payments"})
    auth.add(cluster_acl(APP, "CREATE"))
    assert authorized_topics(auth, APP, HOST, 19, ["orders-1", "payments"]) == (
        {"orders-1", "payments"},
        set(),
    )


def test_delete_topics_and_create_partitions() -> None:
    auth = StandardAuthorizer([topic_acl(APP, "a", "DELETE"), topic_acl(APP, "b", "ALTER")])
    assert authorized_topics(auth, APP, HOST, 20, ["a", "b"]) == ({"a"}, {"b"})
    assert authorized_topics(auth, APP, HOST, 37, ["a", "b"]) == ({"b"}, {"a"})
    with pytest.raises(ValueError):
        authorized_topics(auth, APP, HOST, 30, ["a"])


def test_config_resources() -> None:
    auth = StandardAuthorizer([topic_acl(APP, "t", "ALTER_CONFIGS")])
    assert config_resource_error(auth, APP, HOST, 44, 2, "t") == 0
    assert config_resource_error(auth, APP, HOST, 32, 2, "t") == 0  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert config_resource_error(auth, APP, HOST, 44, 2, "u") == TOPIC_AUTHORIZATION_FAILED
    assert config_resource_error(auth, APP, HOST, 44, 4, "1") == CLUSTER_AUTHORIZATION_FAILED
    auth.add(cluster_acl(APP, "ALTER_CONFIGS"))
    assert config_resource_error(auth, APP, HOST, 33, 4, "") == 0
    assert config_resource_error(auth, APP, HOST, 32, 8, "1") == 0  # DescribeConfigs of BROKER_LOGGER
    assert config_resource_error(auth, APP, HOST, 44, 8, "1") is None
    assert config_resource_error(auth, APP, HOST, 44, 99, "x") is None


def test_metadata_leaves_out_what_cannot_be_described() -> None:
    auth = StandardAuthorizer([topic_acl(APP, "pub", "READ", "PREFIXED")])
    existing = ["pub-a", "pub-b", "secret"]
    assert metadata_topics(auth, APP, HOST, existing, None) == (["pub-a", "pub-b"], [])
    assert metadata_topics(auth, APP, HOST, existing, ["pub-a", "secret"]) == (["pub-a"], ["secret"])
