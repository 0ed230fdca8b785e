"""Metadata changes during dual-write: validated as Kafka validates them, turned into log records.

One room per job: `change` (the change and its records), `rules` (Kafka's validation), `striped`
(replica placement as Kafka's KRaft controller places), `topic_defaults` (`num.partitions`,
`default.replication.factor`), `scram` (SCRAM derivation), `follower` (where a running controller
announces its listeners for `zk2kraft admin`). Everything callers used from the former single
module is importable from here.
"""

from __future__ import annotations

from migrator.migration.admin.change import (
    BIG_CHANGE_RECORDS,
    AclSpec,
    AdminChange,
    AdminReply,
    Kind,
    Pending,
    Placing,
    Planned,
    Refusal,
    plan_change,
    refused_state,
)
from migrator.migration.admin.follower import FOLLOWER_FILE, follower_pid, read_follower, writer_lock_held
from migrator.migration.admin.rules import (
    CLUSTER_RESOURCE_NAME,
    MAX_TOPIC_NAME,
    validate_broker_configs,
    validate_topic_configs,
    validate_topic_name,
)
from migrator.migration.admin.scram import (
    SCRAM_MAX_ITERATIONS,
    SCRAM_MIN_ITERATIONS,
    ScramSpec,
    scram_credential,
)
from migrator.migration.admin.striped import PlacementError, UsableBroker
from migrator.migration.admin.topic_defaults import TopicDefaults

__all__ = [
    "BIG_CHANGE_RECORDS",
    "CLUSTER_RESOURCE_NAME",
    "FOLLOWER_FILE",
    "MAX_TOPIC_NAME",
    "SCRAM_MAX_ITERATIONS",
    "SCRAM_MIN_ITERATIONS",
    "AclSpec",
    "AdminChange",
    "AdminReply",
    "Kind",
    "Pending",
    "PlacementError",
    "Placing",
    "Planned",
    "Refusal",
    "ScramSpec",
    "TopicDefaults",
    "UsableBroker",
    "plan_change",
    "refused_state",
    "follower_pid",
    "read_follower",
    "scram_credential",
    "validate_broker_configs",
    "validate_topic_configs",
    "validate_topic_name",
    "writer_lock_held",
]
