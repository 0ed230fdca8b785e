"""Which ACL each API needs, as Kafka 3.9's ControllerApis (and, for APIs only brokers serve, KafkaApis)
checks it, and the checks themselves over an authorizer.

Four shapes of check, each with Kafka's error:

- ``cluster``: the whole request needs an operation on the CLUSTER resource (``kafka-cluster``);
  without it the response carries CLUSTER_AUTHORIZATION_FAILED (31) and nothing is done.
- ``topics``: each topic needs the operation on its TOPIC; a topic without it gets
  TOPIC_AUTHORIZATION_FAILED (29) and the rest proceed. CreateTopics and DeleteTopics first ask for
  the same operation on CLUSTER, which grants every topic at once.
- ``configs``: each config resource: BROKER (and BROKER_LOGGER, CLIENT_METRICS) needs the operation on
  CLUSTER (else 31), TOPIC on the topic (else 29).
- ``describe_filter``: Metadata: topics the principal may not DESCRIBE are left out of an all-topics
  listing and answered with 29 when named (the controller never auto-creates topics).

Envelope needs CLUSTER_ACTION of the forwarding broker; the request inside is then checked with this
same table under the forwarded client principal. ApiVersions and the SASL exchanges need nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from migrator.controller.protocol import messages as M
from migrator.controller.security.authorizer import StandardAuthorizer

__all__ = [
    "CLUSTER_AUTHORIZATION_FAILED",
    "CLUSTER_NAME",
    "REQUIRED",
    "TOPIC_AUTHORIZATION_FAILED",
    "Required",
    "authorize_cluster",
    "authorized_topics",
    "config_resource_error",
    "metadata_topics",
]

CLUSTER_NAME = "kafka-cluster"
TOPIC_AUTHORIZATION_FAILED = 29
CLUSTER_AUTHORIZATION_FAILED = 31

#: ConfigResource.Type ids whose configs are guarded on the CLUSTER resource
_CLUSTER_CONFIG_TYPES = {4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS"}
_TOPIC_CONFIG_TYPE = 2


@dataclass(frozen=True)
class Required:
    """What one API needs. ``cluster_grant``: the operation on CLUSTER that stands for every topic."""

    name: str
    kind: str  # "none" | "cluster" | "topics" | "configs" | "describe_filter"
    operation: str | None = None
    cluster_grant: str | None = None


def _c(name: str, op: str) -> Required:
    return Required(name, "cluster", op)


REQUIRED: dict[int, Required] = {
    1: _c("Fetch", "CLUSTER_ACTION"),  # of __cluster_metadata, by brokers and voters
    3: Required("Metadata", "describe_filter", "DESCRIBE"),
    17: Required("SaslHandshake", "none"),
    18: Required("ApiVersions", "none"),
    19: Required("CreateTopics", "topics", "CREATE", cluster_grant="CREATE"),
    20: Required("DeleteTopics", "topics", "DELETE", cluster_grant="DELETE"),
    29: _c("DescribeAcls", "DESCRIBE"),
    30: _c("CreateAcls", "ALTER"),
    31: _c("DeleteAcls", "ALTER"),
    32: Required("DescribeConfigs", "configs", "DESCRIBE_CONFIGS"),
    33: Required("AlterConfigs", "configs", "ALTER_CONFIGS"),
    36: Required("SaslAuthenticate", "none"),
    37: Required("CreatePartitions", "topics", "ALTER"),
    43: _c("ElectLeaders", "ALTER"),
    44: Required("IncrementalAlterConfigs", "configs", "ALTER_CONFIGS"),
    45: _c("AlterPartitionReassignments", "ALTER"),
    46: _c("ListPartitionReassignments", "DESCRIBE"),
    48: _c("DescribeClientQuotas", "DESCRIBE_CONFIGS"),
    49: _c("AlterClientQuotas", "ALTER_CONFIGS"),
    50: _c("DescribeUserScramCredentials", "DESCRIBE"),
    51: _c("AlterUserScramCredentials", "ALTER"),
    52: _c("Vote", "CLUSTER_ACTION"),
    53: _c("BeginQuorumEpoch", "CLUSTER_ACTION"),
    54: _c("EndQuorumEpoch", "CLUSTER_ACTION"),
    55: _c("DescribeQuorum", "DESCRIBE"),
    M.ALTER_PARTITION: _c("AlterPartition", "CLUSTER_ACTION"),
    57: _c("UpdateFeatures", "ALTER"),
    58: _c("Envelope", "CLUSTER_ACTION"),
    59: _c("FetchSnapshot", "CLUSTER_ACTION"),
    # The controller asks ALTER here, unlike a broker (which asks nothing): it lists the controllers.
    60: _c("DescribeCluster", "ALTER"),
    M.BROKER_REGISTRATION: _c("BrokerRegistration", "CLUSTER_ACTION"),
    M.BROKER_HEARTBEAT: _c("BrokerHeartbeat", "CLUSTER_ACTION"),
    64: _c("UnregisterBroker", "ALTER"),
    67: _c("AllocateProducerIds", "CLUSTER_ACTION"),
    70: _c("ControllerRegistration", "CLUSTER_ACTION"),
    73: _c("AssignReplicasToDirs", "CLUSTER_ACTION"),
    80: _c("AddRaftVoter", "ALTER"),
    81: _c("RemoveRaftVoter", "ALTER"),
    82: _c("UpdateRaftVoter", "CLUSTER_ACTION"),
    # Not a Kafka 3.9 API (KIP-589's AlterReplicaState, served by zk2kraft): a broker-to-controller
    # report like AlterPartition, so the same CLUSTER_ACTION.
    M.ALTER_REPLICA_STATE: _c("AlterReplicaState", "CLUSTER_ACTION"),
}


def authorize_cluster(auth: StandardAuthorizer, principal: str, host: str, api_key: int) -> int:
    """0, or CLUSTER_AUTHORIZATION_FAILED for a ``cluster`` API the principal may not call.

    An API missing from the table is refused: an unguarded new API must be a decision, not an accident.
    """
    req = REQUIRED.get(api_key)
    if req is None:
        return CLUSTER_AUTHORIZATION_FAILED
    if req.kind != "cluster":
        return 0
    assert req.operation is not None
    return (
        0
        if auth.allowed(principal, host, "CLUSTER", CLUSTER_NAME, req.operation)
        else CLUSTER_AUTHORIZATION_FAILED
    )


def authorized_topics(
    auth: StandardAuthorizer, principal: str, host: str, api_key: int, topics: Iterable[str]
) -> tuple[set[str], set[str]]:
    """(allowed, denied) topics of a ``topics`` API; denied ones are answered with 29."""
    req = REQUIRED[api_key]
    if req.kind != "topics" or req.operation is None:
        raise ValueError(f"{req.name} is not checked per topic")
    names = set(topics)
    if req.cluster_grant and auth.allowed(principal, host, "CLUSTER", CLUSTER_NAME, req.cluster_grant):
        allowed = names
    else:
        allowed = {t for t in names if auth.allowed(principal, host, "TOPIC", t, req.operation)}
    return allowed, names - allowed


def config_resource_error(
    auth: StandardAuthorizer, principal: str, host: str, api_key: int, resource_type: int, name: str
) -> int | None:
    """0 or Kafka's authorization error for one config resource; None for a type the API does not
    guard (the caller answers INVALID_REQUEST, as Kafka's controller does)."""
    req = REQUIRED[api_key]
    if req.kind != "configs" or req.operation is None:
        raise ValueError(f"{req.name} is not checked per config resource")
    if resource_type == _TOPIC_CONFIG_TYPE:
        return (
            0 if auth.allowed(principal, host, "TOPIC", name, req.operation) else TOPIC_AUTHORIZATION_FAILED
        )
    if resource_type in _CLUSTER_CONFIG_TYPES:
        if resource_type == 8 and api_key != 32:
            return None  # altering BROKER_LOGGER is a runtime logger change, not a config record
        ok = auth.allowed(principal, host, "CLUSTER", CLUSTER_NAME, req.operation)
        return 0 if ok else CLUSTER_AUTHORIZATION_FAILED
    return None


def metadata_topics(
    auth: StandardAuthorizer,
    principal: str,
    host: str,
    existing: Iterable[str],
    requested: Iterable[str] | None,
) -> tuple[list[str], list[str]]:
    """(topics to describe, topics to answer with 29) for a Metadata request; ``requested`` None means
    all topics, where the ones the principal may not DESCRIBE are left out rather than refused."""
    if requested is None:
        return [t for t in existing if auth.allowed(principal, host, "TOPIC", t, "DESCRIBE")], []
    visible, refused = [], []
    for t in requested:
        (visible if auth.allowed(principal, host, "TOPIC", t, "DESCRIBE") else refused).append(t)
    return visible, refused
