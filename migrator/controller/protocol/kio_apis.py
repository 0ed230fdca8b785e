"""The admin APIs whose kio entities travel through the listener unchanged (no `messages` twin):
apiKey -> kio module, class stem, versions served, first flexible version.

Kafka 3.9's versions are served. Those kio does not ship (Kafka 4.0 removed CreateTopics v0-1, DeleteTopics
v0, DescribeConfigs v0 and v0 of the ACL APIs) are declared in `kio_admin_v0`; `schema_module` finds
either.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from migrator.controller.protocol.kio_admin_v0 import declared

__all__ = ["NATIVE", "NativeApi", "schema_module"]


@dataclass(frozen=True)
class NativeApi:
    module: str
    name: str
    min_version: int
    max_version: int
    flexible_from: int


NATIVE: dict[int, NativeApi] = {
    3: NativeApi("metadata", "Metadata", 0, 12, 9),
    19: NativeApi("create_topics", "CreateTopics", 0, 7, 5),
    20: NativeApi("delete_topics", "DeleteTopics", 0, 6, 4),
    29: NativeApi("describe_acls", "DescribeAcls", 0, 3, 2),
    30: NativeApi("create_acls", "CreateAcls", 0, 3, 2),
    31: NativeApi("delete_acls", "DeleteAcls", 0, 3, 2),
    60: NativeApi("describe_cluster", "DescribeCluster", 0, 1, 0),
    32: NativeApi("describe_configs", "DescribeConfigs", 0, 4, 4),
    33: NativeApi("alter_configs", "AlterConfigs", 0, 2, 2),
    37: NativeApi("create_partitions", "CreatePartitions", 0, 3, 2),
    43: NativeApi("elect_leaders", "ElectLeaders", 0, 2, 2),
    44: NativeApi("incremental_alter_configs", "IncrementalAlterConfigs", 0, 1, 1),
    45: NativeApi("alter_partition_reassignments", "AlterPartitionReassignments", 0, 0, 0),
    46: NativeApi("list_partition_reassignments", "ListPartitionReassignments", 0, 0, 0),
    48: NativeApi("describe_client_quotas", "DescribeClientQuotas", 0, 1, 1),
    49: NativeApi("alter_client_quotas", "AlterClientQuotas", 0, 1, 1),
    50: NativeApi("describe_user_scram_credentials", "DescribeUserScramCredentials", 0, 0, 0),
    51: NativeApi("alter_user_scram_credentials", "AlterUserScramCredentials", 0, 0, 0),
    57: NativeApi("update_features", "UpdateFeatures", 0, 1, 0),
    67: NativeApi("allocate_producer_ids", "AllocateProducerIds", 0, 0, 0),
    73: NativeApi("assign_replicas_to_dirs", "AssignReplicasToDirs", 0, 0, 0),
}


def schema_module(api_key: int, version: int, kind: str) -> Any:
    """The entity classes of one version's request or response ("request" / "response"): kio's
    generated module, or the namespace `kio_admin_v0` declares for a version kio lacks."""
    ns = declared(api_key, version, kind)
    if ns is not None:
        return ns
    return importlib.import_module(f"kio.schema.{NATIVE[api_key].module}.v{version}.{kind}")
