"""Metadata changes during dual-write: validated as Kafka validates them, turned into log records.

One room per job: `change` (the change and its records), `rules` (Kafka's validation), `placement`
(replica placement), `scram` (SCRAM derivation), `inbox` (the file hand-over to a running
follower). Everything callers used from the former single module is importable from here.
"""

from __future__ import annotations

from migrator.migration.admin.change import (
    BIG_CHANGE_RECORDS,
    AclSpec,
    AdminChange,
    Kind,
    Planned,
    plan_change,
)
from migrator.migration.admin.inbox import (
    FOLLOWER_FILE,
    INBOX_DIR,
    AdminReply,
    Inbox,
    refused_state,
    reply_of,
    writer_lock_held,
)
from migrator.migration.admin.placement import assign_replicas
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

__all__ = [
    "BIG_CHANGE_RECORDS",
    "CLUSTER_RESOURCE_NAME",
    "FOLLOWER_FILE",
    "INBOX_DIR",
    "MAX_TOPIC_NAME",
    "SCRAM_MAX_ITERATIONS",
    "SCRAM_MIN_ITERATIONS",
    "AclSpec",
    "AdminChange",
    "AdminReply",
    "Inbox",
    "Kind",
    "Planned",
    "ScramSpec",
    "assign_replicas",
    "plan_change",
    "refused_state",
    "reply_of",
    "scram_credential",
    "validate_broker_configs",
    "validate_topic_configs",
    "validate_topic_name",
    "writer_lock_held",
]
