"""The Kafka error codes the controller's decisions use (Kafka's `Errors` enum, same numbers).

Kept apart from the wire layer so the decisions (`core`) stay free of I/O and of message classes.
"""

from __future__ import annotations

NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
BROKER_NOT_AVAILABLE = 8
UNSUPPORTED_VERSION = 35
NOT_CONTROLLER = 41
INVALID_REQUEST = 42
OPERATION_NOT_ATTEMPTED = 55
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
STALE_BROKER_EPOCH = 77
INVALID_UPDATE_VERSION = 95
UNKNOWN_TOPIC_ID = 100
DUPLICATE_BROKER_REGISTRATION = 101
BROKER_ID_NOT_REGISTERED = 102
INCONSISTENT_CLUSTER_ID = 104
INELIGIBLE_REPLICA = 107
NEW_LEADER_ELECTED = 108
INVALID_VOTER_KEY = 125
#: KIP-589's new error: AlterReplicaState never shipped in Kafka, so it has no number there; this one is
#: outside Kafka's range (as the AlterReplicaState apiKey is), see docs/controller-protocol.md.
UNKNOWN_EVENT_TYPE = 10_001

NAMES = {
    value: name
    for name, value in globals().items()
    if name.isupper() and isinstance(value, int) and not name.startswith("_")
}


def name_of(code: int) -> str:
    return NAMES.get(code, f"ERROR_{code}")


#: Kafka's default message of the codes a whole request is refused with (`Errors`' descriptions):
#: what `ApiError.fromThrowable` gives when the exception carries no message of its own.
MESSAGES = {
    NOT_CONTROLLER: "This is not the correct controller for this cluster.",
    31: "Cluster authorization failed.",
}
