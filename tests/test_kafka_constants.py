"""Every numeric constant of migrator/ against its peer's own value, never against itself.

`scan()` reads each module of migrator/ (its AST, not an import) for UPPER_CASE names bound to an
integer (module level and class bodies, enum members included), for code tables (dicts from an
integer to a name) and for feature-range tables (a feature's name to its (min, max) level). Each must
be accounted for here, exactly once:

- `FROM_PEER`: the Kafka (or ZooKeeper) constant it stands for, whose value `KAFKA` / `ZOOKEEPER`
  quote from the peer's source (apache/kafka branch 3.9, ZooKeeper 3.8's jar). A constant named
  like one of Kafka's `Errors` needs no entry: its name is its source.
- `NOT_A_PEER_VALUE`: the project's own tunables and sizes, with why.

So a new constant cannot land without its counterpart: the scan fails on anything unlisted, and an
entry whose constant is gone fails too. `Errors` and `ApiKeys` rows are further checked against kio,
an independent transcription of Kafka's protocol.
"""

from __future__ import annotations

import ast
import importlib
import operator
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

ROOT = Path(__file__).resolve().parent.parent
_NAME = re.compile(r"^_?[A-Z][A-Z0-9_]*$")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.LShift: operator.lshift}

# --- Kafka 3.9's values, as its sources define them (class.CONSTANT = value) --------------------------

KAFKA: dict[str, int] = {
    # clients/.../common/protocol/Errors.java
    "Errors.UNKNOWN_SERVER_ERROR": -1,
    "Errors.NONE": 0,
    "Errors.UNKNOWN_TOPIC_OR_PARTITION": 3,
    "Errors.NOT_LEADER_OR_FOLLOWER": 6,
    "Errors.BROKER_NOT_AVAILABLE": 8,
    "Errors.STALE_CONTROLLER_EPOCH": 11,
    "Errors.INVALID_TOPIC_EXCEPTION": 17,
    "Errors.TOPIC_AUTHORIZATION_FAILED": 29,
    "Errors.CLUSTER_AUTHORIZATION_FAILED": 31,
    "Errors.UNSUPPORTED_SASL_MECHANISM": 33,
    "Errors.ILLEGAL_SASL_STATE": 34,
    "Errors.UNSUPPORTED_VERSION": 35,
    "Errors.TOPIC_ALREADY_EXISTS": 36,
    "Errors.INVALID_PARTITIONS": 37,
    "Errors.INVALID_REPLICATION_FACTOR": 38,
    "Errors.INVALID_REPLICA_ASSIGNMENT": 39,
    "Errors.INVALID_CONFIG": 40,
    "Errors.NOT_CONTROLLER": 41,
    "Errors.INVALID_REQUEST": 42,
    "Errors.OPERATION_NOT_ATTEMPTED": 55,
    "Errors.SASL_AUTHENTICATION_FAILED": 58,
    "Errors.FENCED_LEADER_EPOCH": 74,
    "Errors.UNKNOWN_LEADER_EPOCH": 75,
    "Errors.STALE_BROKER_EPOCH": 77,
    "Errors.PREFERRED_LEADER_NOT_AVAILABLE": 80,
    "Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE": 83,
    "Errors.ELECTION_NOT_NEEDED": 84,
    "Errors.NO_REASSIGNMENT_IN_PROGRESS": 85,
    "Errors.RESOURCE_NOT_FOUND": 91,
    "Errors.DUPLICATE_RESOURCE": 92,
    "Errors.UNACCEPTABLE_CREDENTIAL": 93,
    "Errors.INCONSISTENT_VOTER_SET": 94,
    "Errors.INVALID_VOTER_KEY": 125,
    "Errors.INVALID_UPDATE_VERSION": 95,
    "Errors.PRINCIPAL_DESERIALIZATION_FAILURE": 97,
    "Errors.SNAPSHOT_NOT_FOUND": 98,
    "Errors.POSITION_OUT_OF_RANGE": 99,
    "Errors.UNKNOWN_TOPIC_ID": 100,
    "Errors.DUPLICATE_BROKER_REGISTRATION": 101,
    "Errors.BROKER_ID_NOT_REGISTERED": 102,
    "Errors.INCONSISTENT_CLUSTER_ID": 104,
    "Errors.INELIGIBLE_REPLICA": 107,
    "Errors.NEW_LEADER_ELECTED": 108,
    "Errors.MISMATCHED_ENDPOINT_TYPE": 114,
    "Errors.UNSUPPORTED_ENDPOINT_TYPE": 115,
    # clients/.../common/protocol/ApiKeys.java (the apiKey of each JSON schema)
    "ApiKeys.FETCH": 1,
    "ApiKeys.LEADER_AND_ISR": 4,
    "ApiKeys.STOP_REPLICA": 5,
    "ApiKeys.UPDATE_METADATA": 6,
    "ApiKeys.SASL_HANDSHAKE": 17,
    "ApiKeys.API_VERSIONS": 18,
    "ApiKeys.CREATE_TOPICS": 19,
    "ApiKeys.DELETE_TOPICS": 20,
    "ApiKeys.DESCRIBE_ACLS": 29,
    "ApiKeys.CREATE_ACLS": 30,
    "ApiKeys.DELETE_ACLS": 31,
    "ApiKeys.DESCRIBE_CONFIGS": 32,
    "ApiKeys.SASL_AUTHENTICATE": 36,
    "ApiKeys.ALTER_PARTITION_REASSIGNMENTS": 45,
    "ApiKeys.LIST_PARTITION_REASSIGNMENTS": 46,
    "ApiKeys.VOTE": 52,
    "ApiKeys.BEGIN_QUORUM_EPOCH": 53,
    "ApiKeys.END_QUORUM_EPOCH": 54,
    "ApiKeys.DESCRIBE_QUORUM": 55,
    "ApiKeys.ALTER_PARTITION": 56,
    "ApiKeys.ENVELOPE": 58,
    "ApiKeys.FETCH_SNAPSHOT": 59,
    "ApiKeys.BROKER_REGISTRATION": 62,
    "ApiKeys.BROKER_HEARTBEAT": 63,
    # clients/.../common/requests/AbstractControlRequest.java
    "AbstractControlRequest.Type.INCREMENTAL": 1,
    "AbstractControlRequest.Type.FULL": 2,
    # server-common/.../server/common/MetadataVersion.java (feature levels)
    "MetadataVersion.IBP_3_0_IV1": 1,
    "MetadataVersion.MINIMUM_KRAFT_VERSION": 1,  # = IBP_3_0_IV1
    "MetadataVersion.IBP_3_3_IV0": 4,
    "MetadataVersion.MINIMUM_BOOTSTRAP_VERSION": 4,  # = IBP_3_3_IV0
    "MetadataVersion.IBP_3_3_IV2": 6,  # isBrokerRegistrationChangeRecordSupported
    "MetadataVersion.IBP_3_4_IV0": 8,  # isMigrationSupported
    "MetadataVersion.IBP_3_9_IV0": 21,
    "MetadataVersion.LATEST_PRODUCTION": 21,  # = IBP_3_9_IV0
    # metadata/.../common/metadata/*.json apiKey (MetadataRecordType)
    "MetadataRecordType.ACCESS_CONTROL_ENTRY_RECORD": 18,
    "MetadataRecordType.REMOVE_ACCESS_CONTROL_ENTRY_RECORD": 19,
    "MetadataRecordType.BEGIN_TRANSACTION_RECORD": 23,
    "MetadataRecordType.END_TRANSACTION_RECORD": 24,
    "MetadataRecordType.ABORT_TRANSACTION_RECORD": 25,
    # server-common/.../serialization/AbstractApiMessageSerde.java
    "AbstractApiMessageSerde.DEFAULT_FRAME_VERSION": 1,
    # clients/.../common/record/ControlRecordType.java and ControlRecordUtils.java
    "ControlRecordType.ABORT": 0,
    "ControlRecordType.COMMIT": 1,
    "ControlRecordType.LEADER_CHANGE": 2,
    "ControlRecordType.SNAPSHOT_HEADER": 3,
    "ControlRecordType.SNAPSHOT_FOOTER": 4,
    "ControlRecordType.KRAFT_VERSION": 5,
    "ControlRecordType.KRAFT_VOTERS": 6,
    "ControlRecordUtils.LEADER_CHANGE_CURRENT_VERSION": 0,
    # clients/.../common/record/RecordBatch.java, Records.java, DefaultRecordBatch.java
    "RecordBatch.MAGIC_VALUE_V2": 2,
    "Records.LOG_OVERHEAD": 12,
    "DefaultRecordBatch.RECORD_BATCH_OVERHEAD": 61,
    "DefaultRecordBatch.ATTRIBUTES_OFFSET": 21,  # where the CRC-32C starts
    "DefaultRecordBatch.COMPRESSION_CODEC_MASK": 0x07,
    "DefaultRecordBatch.TIMESTAMP_TYPE_MASK": 0x08,
    "DefaultRecordBatch.TRANSACTIONAL_FLAG_MASK": 0x10,
    "DefaultRecordBatch.CONTROL_FLAG_MASK": 0x20,
    "DefaultRecordBatch.DELETE_HORIZON_FLAG_MASK": 0x40,
    # ACLs and configs: resource/PatternType, requests/DescribeConfigsResponse.ConfigSource,
    # clients/admin/AlterConfigOp.OpType, config/ConfigResource.Type
    "PatternType.ANY": 1,
    "PatternType.MATCH": 2,
    "PatternType.LITERAL": 3,
    "PatternType.PREFIXED": 4,
    "ConfigResource.Type.TOPIC": 2,
    "ConfigResource.Type.BROKER": 4,
    "AlterConfigOp.OpType.SET": 0,
    "AlterConfigOp.OpType.DELETE": 1,
    "AlterConfigOp.OpType.APPEND": 2,
    "AlterConfigOp.OpType.SUBTRACT": 3,
    "DescribeConfigsResponse.ConfigSource.TOPIC_CONFIG": 1,
    "DescribeConfigsResponse.ConfigSource.DYNAMIC_BROKER_CONFIG": 2,
    "DescribeConfigsResponse.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG": 3,
    "DescribeConfigsResponse.ConfigSource.DEFAULT_CONFIG": 5,
    # clients/.../common/ElectionType.java, clients/admin/FeatureUpdate.UpgradeType,
    # requests/DescribeClientQuotasRequest, clients/admin/EndpointType (KIP-919)
    "ElectionType.PREFERRED": 0,
    "ElectionType.UNCLEAN": 1,
    "FeatureUpdate.UpgradeType.UNKNOWN": 0,
    "FeatureUpdate.UpgradeType.UPGRADE": 1,
    "FeatureUpdate.UpgradeType.SAFE_DOWNGRADE": 2,
    "FeatureUpdate.UpgradeType.UNSAFE_DOWNGRADE": 3,
    "DescribeClientQuotasRequest.MATCH_TYPE_EXACT": 0,
    "DescribeClientQuotasRequest.MATCH_TYPE_DEFAULT": 1,
    "DescribeClientQuotasRequest.MATCH_TYPE_SPECIFIED": 2,
    "EndpointType.BROKER": 1,
    "EndpointType.CONTROLLER": 2,
    # leaders and epochs: metadata/LeaderConstants.java, core/kafka/api/LeaderAndIsr.scala
    "LeaderConstants.NO_LEADER": -1,
    "LeaderConstants.NO_LEADER_CHANGE": -2,
    "LeaderAndIsr.LeaderDuringDelete": -2,
    "LeaderAndIsr.EpochDuringDelete": -2,
    # core/kafka/zk/ZkData.scala BrokerInfo.apply: JSON version 5 from IBP_2_7_IV0
    "BrokerInfo.version(IBP_2_7_IV0)": 5,
    # limits and defaults Kafka defines
    "Topic.MAX_NAME_LENGTH": 249,
    "ScramMechanism.minIterations": 4096,  # both SCRAM-SHA-256 and SCRAM-SHA-512
    "ScramControlManager.MAX_ITERATIONS": 16384,
    "ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE": 1000,
    "KRaftConfigs.BROKER_SESSION_TIMEOUT_MS_DEFAULT": 9000,
    "ServerConfigs.RESERVED_BROKER_MAX_ID_DEFAULT": 1000,
    "SocketServerConfigs.SOCKET_REQUEST_MAX_BYTES_DEFAULT": 100 * 1024 * 1024,
    "LogConfig.DEFAULT_SEGMENT_BYTES": 1024 * 1024 * 1024,  # metadata.log.segment.bytes' default
    "ServerLogConfigs.LOG_INDEX_INTERVAL_BYTES_DEFAULT": 4096,
    "KafkaRaftClient.MAX_BATCH_SIZE_BYTES": 8 * 1024 * 1024,
    "KafkaRaftClient.MAX_FETCH_SIZE_BYTES": 8 * 1024 * 1024,  # = MAX_BATCH_SIZE_BYTES
    "KafkaRaftClient.MAX_FETCH_WAIT_MS": 500,
    "KafkaRaftClient.RETRY_BACKOFF_BASE_MS": 50,  # the unit of binaryExponentialElectionBackoffMs (3.9.2)
    # raft/.../LeaderState.java
    "LeaderState.OBSERVER_SESSION_TIMEOUT_MS": 300_000,
    "QuorumController.MAX_RECORDS_PER_BATCH": 10000,
}

#: Kafka 3.9's code tables (code -> Java enum name) that the project keeps as dicts.
KAFKA_ENUMS: dict[str, dict[int, str]] = {
    "ConfigResource.Type": {0: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS"},
    "ResourceType": {
        **{0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER"},
        **{5: "TRANSACTIONAL_ID", 6: "DELEGATION_TOKEN", 7: "USER"},
    },
    "PatternType": {0: "UNKNOWN", 1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"},
    "AclOperation": {
        **{0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER"},
        **{8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS"},
        **{12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS"},
    },
    "AclPermissionType": {0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"},
    "ScramMechanism.mechanismName": {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"},
    "SecurityProtocol": {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"},
    "ZkMigrationState": {0: "NONE", 1: "MIGRATION", 2: "PRE_MIGRATION", 3: "POST_MIGRATION", 4: "ZK"},
    "CompressionType.name": {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"},
    "MetadataVersion.version": {
        **{1: "3.0-IV1", 2: "3.1-IV0", 3: "3.2-IV0", 4: "3.3-IV0", 5: "3.3-IV1", 6: "3.3-IV2"},
        **{7: "3.3-IV3", 8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0"},
        **{13: "3.6-IV1", 14: "3.6-IV2", 15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3"},
        **{19: "3.7-IV4", 20: "3.8-IV0", 21: "3.9-IV0"},
    },
    # the JSON schemas' names, by apiKey
    "ApiMessageType.name": {
        **{19: "CreateTopics", 20: "DeleteTopics", 30: "CreateAcls", 31: "DeleteAcls"},
        **{37: "CreatePartitions", 44: "IncrementalAlterConfigs", 49: "AlterClientQuotas"},
        **{51: "AlterUserScramCredentials"},
    },
}

#: Kafka 3.9's feature ranges (feature -> (min, max) level) the project keeps as dicts.
KAFKA_FEATURE_RANGES: dict[str, dict[str, tuple[int, int]]] = {
    # metadata/.../controller/QuorumFeatures.java: metadata.version from MINIMUM_KRAFT_VERSION (1) to
    # LATEST_PRODUCTION (IBP_3_9_IV0 = 21); of Features.PRODUCTION_FEATURES those whose latestProduction
    # is above 0: kraft.version (KRaftVersion.KRAFT_VERSION_1, bootstrap IBP_3_9_IV0); transaction.version's
    # TV_1 needs IBP_4_0_IV0, so it is left out.
    "QuorumFeatures.defaultFeatureMap(false)": {"metadata.version": (1, 21), "kraft.version": (0, 1)},
}

# --- ZooKeeper's (the other peer), from ZooKeeper 3.8.0's classes (Debian's zookeeper.jar, read with javap) ---

ZOOKEEPER: dict[str, int] = {
    "ZooDefs.OpCode.error": -1,
    "ZooDefs.OpCode.create": 1,
    "ZooDefs.OpCode.delete": 2,
    "ZooDefs.OpCode.getData": 4,
    "ZooDefs.OpCode.setData": 5,
    "ZooDefs.OpCode.setACL": 7,
    "ZooDefs.OpCode.getChildren": 8,
    "ZooDefs.OpCode.check": 13,
    "ZooDefs.OpCode.multi": 14,
    "ZooDefs.OpCode.create2": 15,
    "ZooDefs.OpCode.reconfig": 16,
    "ZooDefs.OpCode.createContainer": 19,
    "ZooDefs.OpCode.deleteContainer": 20,
    "ZooDefs.OpCode.createTTL": 21,
    "ZooDefs.OpCode.multiRead": 22,
    "ZooDefs.OpCode.getAllChildrenNumber": 104,
    "ZooDefs.OpCode.createSession": -10,
    "ZooDefs.OpCode.closeSession": -11,
    "KeeperException.Code.OK": 0,
    "KeeperException.Code.RUNTIMEINCONSISTENCY": -2,
    "CreateMode.PERSISTENT_SEQUENTIAL.toFlag": 2,
    "FileTxnLog.TXNLOG_MAGIC": int.from_bytes(b"ZKLG", "big"),
    "FileTxnLog.VERSION": 2,
    "FileSnap.SNAP_MAGIC": int.from_bytes(b"ZKSN", "big"),
    "FileSnap.VERSION": 2,
    "EphemeralType.CONTAINER_EPHEMERAL_OWNER": -(1 << 63),
    "EphemeralType.EXTENDED_MASK": -(1 << 56),
    "ReferenceCountedACLCache.OPEN_UNSAFE_ACL_ID": -1,
    "jute.maxbuffer default (BinaryInputArchive.maxBuffer, 0xfffff)": 0xFFFFF,
}

# --- Where each constant comes from -----------------------------------------------------------------

#: module:NAME -> its peer constant (a key of KAFKA or ZOOKEEPER, or of KAFKA_ENUMS for a table).
FROM_PEER: dict[str, str] = {
    "controller/apis/admin_acls_api.py:ANY": "PatternType.ANY",
    "controller/apis/admin_acls_api.py:MATCH": "PatternType.MATCH",
    "controller/apis/admin_acls_api.py:LITERAL": "PatternType.LITERAL",
    "controller/apis/admin_acls_api.py:PREFIXED": "PatternType.PREFIXED",
    "controller/apis/admin_alter_api.py:TOPIC": "ConfigResource.Type.TOPIC",
    "controller/apis/admin_alter_api.py:BROKER": "ConfigResource.Type.BROKER",
    "controller/apis/admin_alter_api.py:SET": "AlterConfigOp.OpType.SET",
    "controller/apis/admin_alter_api.py:DELETE": "AlterConfigOp.OpType.DELETE",
    "controller/apis/admin_alter_api.py:APPEND": "AlterConfigOp.OpType.APPEND",
    "controller/apis/admin_alter_api.py:SUBTRACT": "AlterConfigOp.OpType.SUBTRACT",
    "controller/apis/admin_alter_api.py:DYNAMIC_TOPIC_CONFIG": "DescribeConfigsResponse.ConfigSource.TOPIC_CONFIG",
    "controller/apis/admin_alter_api.py:DYNAMIC_BROKER_CONFIG": "DescribeConfigsResponse.ConfigSource.DYNAMIC_BROKER_CONFIG",
    "controller/apis/admin_alter_api.py:DYNAMIC_DEFAULT_BROKER_CONFIG": (
        "DescribeConfigsResponse.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG"
    ),
    "controller/apis/admin_api.py:ENDPOINT_BROKER": "EndpointType.BROKER",
    "controller/apis/admin_api.py:ENDPOINT_CONTROLLER": "EndpointType.CONTROLLER",
    "controller/client/admin_client.py:TOPIC": "ConfigResource.Type.TOPIC",
    "controller/client/admin_client.py:BROKER": "ConfigResource.Type.BROKER",
    "controller/client/admin_client.py:SET": "AlterConfigOp.OpType.SET",
    "controller/client/admin_client.py:DELETE": "AlterConfigOp.OpType.DELETE",
    "controller/client/admin_client.py:API_NAMES": "ApiMessageType.name",
    "controller/managers/admin_config_defaults.py:DYNAMIC_TOPIC_CONFIG": "DescribeConfigsResponse.ConfigSource.TOPIC_CONFIG",
    "controller/managers/admin_config_defaults.py:DYNAMIC_DEFAULT_BROKER_CONFIG": (
        "DescribeConfigsResponse.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG"
    ),
    "controller/managers/admin_config_defaults.py:DEFAULT_CONFIG": "DescribeConfigsResponse.ConfigSource.DEFAULT_CONFIG",
    "controller/apis/admin_elect_api.py:PREFERRED": "ElectionType.PREFERRED",
    "controller/apis/admin_elect_api.py:UNCLEAN": "ElectionType.UNCLEAN",
    "controller/apis/admin_features_api.py:UNKNOWN": "FeatureUpdate.UpgradeType.UNKNOWN",
    "controller/apis/admin_features_api.py:UPGRADE": "FeatureUpdate.UpgradeType.UPGRADE",
    "controller/apis/admin_features_api.py:SAFE_DOWNGRADE": "FeatureUpdate.UpgradeType.SAFE_DOWNGRADE",
    "controller/apis/admin_features_api.py:UNSAFE_DOWNGRADE": "FeatureUpdate.UpgradeType.UNSAFE_DOWNGRADE",
    "controller/apis/admin_features_api.py:SUPPORTED_FEATURES": "QuorumFeatures.defaultFeatureMap(false)",
    "controller/apis/admin_quotas_api.py:EXACT": "DescribeClientQuotasRequest.MATCH_TYPE_EXACT",
    "controller/apis/admin_quotas_api.py:DEFAULT": "DescribeClientQuotasRequest.MATCH_TYPE_DEFAULT",
    "controller/apis/admin_quotas_api.py:SPECIFIED": "DescribeClientQuotasRequest.MATCH_TYPE_SPECIFIED",
    "controller/apis/admin_reassign_api.py:ALTER": "ApiKeys.ALTER_PARTITION_REASSIGNMENTS",
    "controller/apis/admin_reassign_api.py:LIST": "ApiKeys.LIST_PARTITION_REASSIGNMENTS",
    "controller/apis/admin_scram_api.py:MIN_ITERATIONS": "ScramMechanism.minIterations",
    "controller/apis/admin_scram_api.py:MAX_ITERATIONS": "ScramControlManager.MAX_ITERATIONS",
    "controller/security/api_acls.py:_TOPIC_CONFIG_TYPE": "ConfigResource.Type.TOPIC",
    "controller/security/api_acls.py:_CLUSTER_CONFIG_TYPES": "ConfigResource.Type",
    "controller/security/authorizer.py:ACL_RECORD": "MetadataRecordType.ACCESS_CONTROL_ENTRY_RECORD",
    "controller/security/authorizer.py:REMOVE_ACL_RECORD": "MetadataRecordType.REMOVE_ACCESS_CONTROL_ENTRY_RECORD",
    "controller/core.py:_NO_LEADER_CHANGE": "LeaderConstants.NO_LEADER_CHANGE",
    "controller/core.py:MV_BROKER_REGISTRATION_CHANGE": "MetadataVersion.IBP_3_3_IV2",
    "controller/core.py:MV_MIGRATION": "MetadataVersion.IBP_3_4_IV0",
    "controller/core.py:MV_MINIMUM_KRAFT": "MetadataVersion.MINIMUM_KRAFT_VERSION",
    "controller/core_types.py:NO_LEADER": "LeaderConstants.NO_LEADER",
    "controller/core_types.py:DEFAULT_SESSION_TIMEOUT_MS": "KRaftConfigs.BROKER_SESSION_TIMEOUT_MS_DEFAULT",
    "controller/apis/envelope.py:_DESCRIBE_QUORUM": "ApiKeys.DESCRIBE_QUORUM",
    "controller/protocol/kio_admin_v0.py:CREATE_TOPICS": "ApiKeys.CREATE_TOPICS",
    "controller/protocol/kio_admin_v0.py:DELETE_TOPICS": "ApiKeys.DELETE_TOPICS",
    "controller/protocol/kio_admin_v0.py:DESCRIBE_CONFIGS": "ApiKeys.DESCRIBE_CONFIGS",
    "controller/protocol/kio_admin_v0.py:DESCRIBE_ACLS": "ApiKeys.DESCRIBE_ACLS",
    "controller/protocol/kio_admin_v0.py:CREATE_ACLS": "ApiKeys.CREATE_ACLS",
    "controller/protocol/kio_admin_v0.py:DELETE_ACLS": "ApiKeys.DELETE_ACLS",
    "controller/protocol/messages.py:API_VERSIONS": "ApiKeys.API_VERSIONS",
    "controller/protocol/messages.py:ALTER_PARTITION": "ApiKeys.ALTER_PARTITION",
    "controller/protocol/messages.py:BROKER_REGISTRATION": "ApiKeys.BROKER_REGISTRATION",
    "controller/protocol/messages.py:BROKER_HEARTBEAT": "ApiKeys.BROKER_HEARTBEAT",
    "controller/protocol/messages.py:ENVELOPE": "ApiKeys.ENVELOPE",
    "controller/managers/partition_reassignment.py:NO_LEADER": "LeaderConstants.NO_LEADER",
    "controller/raft/raft_leader.py:FETCH": "ApiKeys.FETCH",
    "controller/raft/raft_leader.py:MAX_FETCH_BYTES": "KafkaRaftClient.MAX_FETCH_SIZE_BYTES",
    "controller/raft/raft_leader.py:VOTE": "ApiKeys.VOTE",
    "controller/raft/raft_leader.py:BEGIN_QUORUM_EPOCH": "ApiKeys.BEGIN_QUORUM_EPOCH",
    "controller/raft/raft_leader.py:END_QUORUM_EPOCH": "ApiKeys.END_QUORUM_EPOCH",
    "controller/raft/raft_leader.py:DESCRIBE_QUORUM": "ApiKeys.DESCRIBE_QUORUM",
    "controller/raft/raft_leader.py:FETCH_SNAPSHOT": "ApiKeys.FETCH_SNAPSHOT",
    "controller/security/sasl_session.py:API_VERSIONS": "ApiKeys.API_VERSIONS",
    "controller/security/sasl_session.py:SASL_HANDSHAKE": "ApiKeys.SASL_HANDSHAKE",
    "controller/security/sasl_session.py:SASL_AUTHENTICATE": "ApiKeys.SASL_AUTHENTICATE",
    "controller/protocol/sasl_wire.py:SASL_HANDSHAKE": "ApiKeys.SASL_HANDSHAKE",
    "controller/protocol/sasl_wire.py:SASL_AUTHENTICATE": "ApiKeys.SASL_AUTHENTICATE",
    "controller/security/scram_server.py:MIN_ITERATIONS": "ScramMechanism.minIterations",
    "controller/protocol/wire_versions.py:MAX_FRAME_BYTES": "SocketServerConfigs.SOCKET_REQUEST_MAX_BYTES_DEFAULT",
    "controller/zk_brokers/zk_broker_messages.py:LEADER_AND_ISR": "ApiKeys.LEADER_AND_ISR",
    "controller/zk_brokers/zk_broker_messages.py:STOP_REPLICA": "ApiKeys.STOP_REPLICA",
    "controller/zk_brokers/zk_broker_messages.py:UPDATE_METADATA": "ApiKeys.UPDATE_METADATA",
    "controller/zk_brokers/zk_broker_messages.py:TYPE_INCREMENTAL": "AbstractControlRequest.Type.INCREMENTAL",
    "controller/zk_brokers/zk_broker_messages.py:TYPE_FULL": "AbstractControlRequest.Type.FULL",
    "controller/zk_brokers/zk_broker_requests.py:LEADER_DURING_DELETE": "LeaderAndIsr.LeaderDuringDelete",
    "controller/zk_brokers/zk_propagator.py:EPOCH_DURING_DELETE": "LeaderAndIsr.EpochDuringDelete",
    "controller/zk_brokers/zk_propagator.py:_MV_IBP": "MetadataVersion.version",
    "controller/raft/election.py:RETRY_BACKOFF_BASE_MS": "KafkaRaftClient.RETRY_BACKOFF_BASE_MS",
    "controller/raft/leader_progress.py:OBSERVER_SESSION_TIMEOUT_MS": "LeaderState.OBSERVER_SESSION_TIMEOUT_MS",
    "controller/raft/voter.py:MAX_FETCH_WAIT_MS": "KafkaRaftClient.MAX_FETCH_WAIT_MS",
    "kraft/batch.py:MAGIC": "RecordBatch.MAGIC_VALUE_V2",
    "kraft/batch.py:LOG_OVERHEAD": "Records.LOG_OVERHEAD",
    "kraft/batch.py:BATCH_HEADER_SIZE": "DefaultRecordBatch.RECORD_BATCH_OVERHEAD",
    "kraft/batch.py:CRC_START": "DefaultRecordBatch.ATTRIBUTES_OFFSET",
    "kraft/batch.py:ATTR_COMPRESSION_MASK": "DefaultRecordBatch.COMPRESSION_CODEC_MASK",
    "kraft/batch.py:ATTR_TIMESTAMP_TYPE": "DefaultRecordBatch.TIMESTAMP_TYPE_MASK",
    "kraft/batch.py:ATTR_TRANSACTIONAL": "DefaultRecordBatch.TRANSACTIONAL_FLAG_MASK",
    "kraft/batch.py:ATTR_CONTROL": "DefaultRecordBatch.CONTROL_FLAG_MASK",
    "kraft/batch.py:ATTR_DELETE_HORIZON": "DefaultRecordBatch.DELETE_HORIZON_FLAG_MASK",
    "kraft/batch.py:COMPRESSION_NAMES": "CompressionType.name",
    "kraft/control.py:ControlType.ABORT": "ControlRecordType.ABORT",
    "kraft/control.py:ControlType.COMMIT": "ControlRecordType.COMMIT",
    "kraft/control.py:ControlType.LEADER_CHANGE": "ControlRecordType.LEADER_CHANGE",
    "kraft/control.py:ControlType.SNAPSHOT_HEADER": "ControlRecordType.SNAPSHOT_HEADER",
    "kraft/control.py:ControlType.SNAPSHOT_FOOTER": "ControlRecordType.SNAPSHOT_FOOTER",
    "kraft/control.py:ControlType.KRAFT_VERSION": "ControlRecordType.KRAFT_VERSION",
    "kraft/control.py:ControlType.KRAFT_VOTERS": "ControlRecordType.KRAFT_VOTERS",
    "kraft/control.py:LEADER_CHANGE_VERSION": "ControlRecordUtils.LEADER_CHANGE_CURRENT_VERSION",
    "kraft/image.py:CONFIG_RESOURCE_TYPES": "ConfigResource.Type",
    "kraft/image.py:ACL_RESOURCE_TYPES": "ResourceType",
    "kraft/image.py:PATTERN_TYPES": "PatternType",
    "kraft/image.py:ACL_OPERATIONS": "AclOperation",
    "kraft/image.py:ACL_PERMISSION_TYPES": "AclPermissionType",
    "kraft/image.py:SCRAM_MECHANISMS": "ScramMechanism.mechanismName",
    "kraft/image.py:SECURITY_PROTOCOLS": "SecurityProtocol",
    "kraft/image.py:MIGRATION_STATES": "ZkMigrationState",
    "kraft/image.py:PRODUCER_ID_BLOCK_SIZE": "ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE",
    "kraft/image.py:_NO_LEADER_CHANGE": "LeaderConstants.NO_LEADER_CHANGE",
    "kraft/log.py:DEFAULT_SEGMENT_BYTES": "LogConfig.DEFAULT_SEGMENT_BYTES",
    "kraft/log.py:DEFAULT_MAX_BATCH_RECORDS": "QuorumController.MAX_RECORDS_PER_BATCH",
    "kraft/log.py:MAX_BATCH_BYTES": "KafkaRaftClient.MAX_BATCH_SIZE_BYTES",
    "kraft/segments.py:BATCH_OVERHEAD": "DefaultRecordBatch.RECORD_BATCH_OVERHEAD",
    "kraft/offset_index.py:INDEX_INTERVAL_BYTES": "ServerLogConfigs.LOG_INDEX_INTERVAL_BYTES_DEFAULT",
    "kraft/record_types.py:FRAME_VERSION": "AbstractApiMessageSerde.DEFAULT_FRAME_VERSION",
    "kraft/retention.py:_BEGIN": "MetadataRecordType.BEGIN_TRANSACTION_RECORD",
    "kraft/retention.py:_END": "MetadataRecordType.END_TRANSACTION_RECORD",
    "kraft/retention.py:_ABORT": "MetadataRecordType.ABORT_TRANSACTION_RECORD",
    "kraft/snapshot.py:_RECORDS_PER_BATCH": "QuorumController.MAX_RECORDS_PER_BATCH",
    "kraft/snapshot.py:_BATCH_BYTES": "KafkaRaftClient.MAX_BATCH_SIZE_BYTES",
    "controller/managers/rules.py:MAX_TOPIC_NAME": "Topic.MAX_NAME_LENGTH",
    "controller/managers/scram.py:SCRAM_MIN_ITERATIONS": "ScramMechanism.minIterations",
    "controller/managers/scram.py:SCRAM_MAX_ITERATIONS": "ScramControlManager.MAX_ITERATIONS",
    "migration/broker_config.py:DEFAULT_RESERVED_BROKER_MAX_ID": "ServerConfigs.RESERVED_BROKER_MAX_ID_DEFAULT",
    "migration/check_codes.py:DEFAULT_JUTE_MAXBUFFER": "jute.maxbuffer default (BinaryInputArchive.maxBuffer, 0xfffff)",
    "migration/check_codes.py:MIGRATION_MIN_METADATA_VERSION": "MetadataVersion.IBP_3_4_IV0",
    "migration/check_codes.py:MIN_BROKER_JSON_VERSION": "BrokerInfo.version(IBP_2_7_IV0)",
    "migration/copy.py:BOOTSTRAP_METADATA_VERSION": "MetadataVersion.LATEST_PRODUCTION",
    "migration/unsynced.py:_BEGIN": "MetadataRecordType.BEGIN_TRANSACTION_RECORD",
    "migration/unsynced.py:_END": "MetadataRecordType.END_TRANSACTION_RECORD",
    "migration/unsynced.py:_ABORT": "MetadataRecordType.ABORT_TRANSACTION_RECORD",
    "migration/zk_sync.py:_BEGIN": "MetadataRecordType.BEGIN_TRANSACTION_RECORD",
    "migration/zk_sync.py:_END": "MetadataRecordType.END_TRANSACTION_RECORD",
    "migration/zk_sync.py:_ABORT": "MetadataRecordType.ABORT_TRANSACTION_RECORD",
    "zk/bulk_write.py:JUTE_MAXBUFFER": "jute.maxbuffer default (BinaryInputArchive.maxBuffer, 0xfffff)",
    "zk/fenced_writer.py:OP_CREATE": "ZooDefs.OpCode.create",
    "zk/fenced_writer.py:OP_DELETE": "ZooDefs.OpCode.delete",
    "zk/fenced_writer.py:OP_SET": "ZooDefs.OpCode.setData",
    "zk/fenced_writer.py:OP_CHECK": "ZooDefs.OpCode.check",
    "zk/fenced_writer.py:OP_MULTI": "ZooDefs.OpCode.multi",
    "zk/fenced_writer.py:_ERR_OK": "KeeperException.Code.OK",
    "zk/fenced_writer.py:_ERR_RUNTIME_INCONSISTENCY": "KeeperException.Code.RUNTIMEINCONSISTENCY",
    "zk/fenced_writer.py:_SEQUENTIAL": "CreateMode.PERSISTENT_SEQUENTIAL.toFlag",
    "zk/multiread.py:OP_GET_DATA": "ZooDefs.OpCode.getData",
    "zk/multiread.py:OP_GET_CHILDREN": "ZooDefs.OpCode.getChildren",
    "zk/multiread.py:OP_MULTI_READ": "ZooDefs.OpCode.multiRead",
    "zk/multiread.py:OP_GET_ALL_CHILDREN_NUMBER": "ZooDefs.OpCode.getAllChildrenNumber",
    "zk/multiread.py:OP_ERROR": "ZooDefs.OpCode.error",
    "zk/read_reuse.py:_CHECK": "ZooDefs.OpCode.check",
    "zk/reader.py:JUTE_MAXBUFFER": "jute.maxbuffer default (BinaryInputArchive.maxBuffer, 0xfffff)",
    "zk/snapshot_file.py:SNAP_MAGIC": "FileSnap.SNAP_MAGIC",
    "zk/snapshot_file.py:SNAP_VERSION": "FileSnap.VERSION",
    "zk/snapshot_file.py:JUTE_MAXBUFFER": "jute.maxbuffer default (BinaryInputArchive.maxBuffer, 0xfffff)",
    "zk/snapshot_file.py:CONTAINER_OWNER": "EphemeralType.CONTAINER_EPHEMERAL_OWNER",
    "zk/snapshot_file.py:TTL_OWNER_MASK": "EphemeralType.EXTENDED_MASK",
    "zk/snapshot_file.py:OPEN_ACL_ID": "ReferenceCountedACLCache.OPEN_UNSAFE_ACL_ID",
    "zk/txnlog_file.py:LOG_MAGIC": "FileTxnLog.TXNLOG_MAGIC",
    "zk/txnlog_file.py:LOG_VERSION": "FileTxnLog.VERSION",
    "zk/txnlog_file.py:CREATE": "ZooDefs.OpCode.create",
    "zk/txnlog_file.py:DELETE": "ZooDefs.OpCode.delete",
    "zk/txnlog_file.py:SET_DATA": "ZooDefs.OpCode.setData",
    "zk/txnlog_file.py:SET_ACL": "ZooDefs.OpCode.setACL",
    "zk/txnlog_file.py:CHECK": "ZooDefs.OpCode.check",
    "zk/txnlog_file.py:MULTI": "ZooDefs.OpCode.multi",
    "zk/txnlog_file.py:CREATE2": "ZooDefs.OpCode.create2",
    "zk/txnlog_file.py:RECONFIG": "ZooDefs.OpCode.reconfig",
    "zk/txnlog_file.py:CREATE_CONTAINER": "ZooDefs.OpCode.createContainer",
    "zk/txnlog_file.py:DELETE_CONTAINER": "ZooDefs.OpCode.deleteContainer",
    "zk/txnlog_file.py:CREATE_TTL": "ZooDefs.OpCode.createTTL",
    "zk/txnlog_file.py:CREATE_SESSION": "ZooDefs.OpCode.createSession",
    "zk/txnlog_file.py:CLOSE_SESSION": "ZooDefs.OpCode.closeSession",
    "zk/txnlog_file.py:ERROR": "ZooDefs.OpCode.error",
}

_TUNABLE = "the project's own tunable or limit; no peer defines it"
_SIZE = "a byte count the project derives from a peer's layout (the layout is tested by its codec tests)"
_CACHE = "an in-process cache or table size"

#: module:NAME -> why it is not a peer's value.
NOT_A_PEER_VALUE: dict[str, str] = {
    "errors.py:EXIT_OK": "zk2kraft's exit codes (docs/cli.md)",
    "errors.py:EXIT_FINDINGS": "zk2kraft's exit codes (docs/cli.md)",
    "errors.py:EXIT_BAD_INPUT": "zk2kraft's exit codes (docs/cli.md)",
    "errors.py:EXIT_UNREACHABLE": "zk2kraft's exit codes (docs/cli.md)",
    "errors.py:EXIT_FENCED": "zk2kraft's exit codes (docs/cli.md)",
    "metrics.py:NOT_LOADED": "a gauge's value before the first load",
    "controller/managers/admin_config_defaults.py:_HOURS": "milliseconds in an hour",
    "controller/managers/admin_config_defaults.py:_MINUTES": "milliseconds in a minute",
    "controller/core_types.py:BrokerState.INITIAL": "the controller's own broker-state view (never on the wire)",
    "controller/core_types.py:BrokerState.INACTIVE": "the controller's own broker-state view (never on the wire)",
    "controller/core_types.py:BrokerState.ACTIVE": "the controller's own broker-state view (never on the wire)",
    "controller/core_types.py:BrokerState.STOPPING": "the controller's own broker-state view (never on the wire)",
    "controller/core_types.py:EVENT_OFFLINE": "KIP-589's AlterReplicaState event, a KIP Kafka never merged",
    "controller/protocol/messages.py:EVENT_OFFLINE": "KIP-589's AlterReplicaState event, a KIP Kafka never merged",
    "controller/protocol/messages.py:ALTER_REPLICA_STATE": "KIP-589's AlterReplicaState, outside Kafka's apiKey range",
    "controller/protocol/kafka_errors.py:UNKNOWN_EVENT_TYPE": "KIP-589's error, outside Kafka's error range",
    "controller/raft/raft_leader.py:_CACHED_BODY_BYTES": _CACHE,
    "controller/security/scram_server.py:_State.CLIENT_FIRST": "the SCRAM exchange's own states",
    "controller/security/scram_server.py:_State.CLIENT_FINAL": "the SCRAM exchange's own states",
    "controller/security/scram_server.py:_State.COMPLETE": "the SCRAM exchange's own states",
    "controller/security/scram_server.py:_State.FAILED": "the SCRAM exchange's own states",
    "controller/network/server.py:DEFAULT_MAX_CONNECTIONS_PER_IP": "a bound Kafka leaves unlimited (max.connections.per.ip)",
    "controller/network/server.py:DEFAULT_MAX_CONNECTIONS": "a bound Kafka leaves unlimited (max.connections)",
    "controller/zk_brokers/zk_broker_requests.py:BULK": _TUNABLE,
    "controller/zk_brokers/zk_broker_requests.py:_MERGED_MAX": _CACHE,
    "controller/zk_brokers/zk_broker_requests.py:_STATE_BYTES_MAX": _CACHE,
    "kraft/image.py:ROLLBACK_MAX_PARTITIONS": "the largest image copied at BeginTransactionRecord to roll back to (a tunable)",
    "controller/raft/leader_progress.py:NEVER": "a time no clock reaches: a voter never heard from",
    "controller/raft/raft_fetch.py:SLICE_MIN_BYTES": "the size above which an answer is sent from the file (sendfile)",
    "kraft/batch.py:MAX_DECOMPRESSED": _TUNABLE,
    "kraft/batch.py:MIN_RECORD_SIZE": _SIZE,
    "kraft/batch_encode.py:_MAX_RECORD_FRAMING": _SIZE,
    "kraft/varint.py:ZZ_TABLE_SIZE": _CACHE,
    "kraft/batch_decode.py:_MAX_RUNS": _CACHE,
    "kraft/segments.py:READ_LIMIT": _TUNABLE,
    "kraft/offset_index.py:_HEADER_NEEDED": _SIZE,
    "kraft/offset_index.py:_CHUNK": _TUNABLE,
    "kraft/uuids.py:_UUID_CACHE_MAX": _CACHE,
    "kraft/varint.py:UV_TABLE_SIZE": _CACHE,
    "kraft/record_codegen.py:SMALL_ARRAY": _TUNABLE,
    "kraft/record_codegen.py:MAX_SHAPES": _CACHE,
    "kraft/record_codegen.py:MAX_SHAPE_ARRAY": _CACHE,
    "kraft/retention.py:_CLEAN_EVERY_MS": _TUNABLE,
    "controller/managers/change.py:BIG_CHANGE_RECORDS": _TUNABLE,
    "migration/broker_config.py:LATEST_IV": "a sort key for a release without -IVn",
    "migration/check_codes.py:GET_DATA_OVERHEAD": _SIZE,
    "migration/copy.py:_RECORD_FRAMING": _SIZE,
    "migration/drift.py:_SHOWN": "how many examples a message names",
    "migration/findings.py:EXAMPLES": "how many examples a message names",
    "migration/findings.py:MAX_LISTED": "how many paths a finding carries",
    "target.py:DEFAULT_NODE_ID": "zk2kraft's default controller id (docs)",
    "migration/unsynced.py:_RUN": _TUNABLE,
    "migration/zk_sync.py:DEFAULT_MAX_LAG_RECORDS": _TUNABLE,
    "migration/zk_sync.py:DEFAULT_CHUNK_KEYS": _TUNABLE,
    "migration/zk_sync.py:DEFAULT_CHUNK_RECORDS": _TUNABLE,
    "controller/security/principal.py:_STRING_CHARSETS": "ASN.1 string tags (X.680), not a Kafka or ZooKeeper code",
    "zk/bulk_write.py:DEFAULT_MAX_MULTI_BYTES": _TUNABLE,
    "zk/bulk_write.py:DEFAULT_IN_FLIGHT": _TUNABLE,
    "zk/bulk_write.py:_REQUEST_HEADER": _SIZE,
    "zk/bulk_write.py:_MULTI_HEADER": _SIZE,
    "zk/bulk_write.py:_MULTI_END": _SIZE,
    "zk/bulk_write.py:_MAX_EXISTS_RETRIES": _TUNABLE,
    "zk/jvm_order.py:_M32": "a 32-bit mask",
    "zk/export.py:EXPORT_RETRIES": _TUNABLE,
    "zk/fenced_writer.py:DEFAULT_MAX_MULTI_BYTES": _TUNABLE,
    "zk/fenced_writer.py:DEFAULT_IN_FLIGHT": _TUNABLE,
    "zk/fenced_writer.py:_MAX_REBUILDS": _TUNABLE,
    "zk/fenced_writer.py:_REQUEST_HEADER": _SIZE,
    "zk/multiread.py:_REPLY_HEADER_SIZE": _SIZE,
    "zk/reader.py:DEFAULT_MAX_BATCH_BYTES": _TUNABLE,
    "zk/reader.py:DEFAULT_MAX_OPS": _TUNABLE,
    "zk/reader.py:DEFAULT_IN_FLIGHT": _TUNABLE,
    "zk/reader.py:DEFAULT_RETRIES": _TUNABLE,
    "zk/reader.py:ASYNC_CHUNK": _TUNABLE,
    "zk/reader.py:_CHILDREN2_FIXED": _SIZE,
    "zk/reader.py:_DATA_REPLY_FIXED": _SIZE,
    "zk/reader.py:_UNKNOWN_NAME_GUESS": _TUNABLE,
    "zk/reader.py:_REQUEST_FIXED": _SIZE,
    "zk/reader.py:_REPLY_FIXED": _SIZE,
    "zk/snapshot_file.py:SNAPPY_HEADER_LEN": "xerial snappy-java's stream header, not a ZooKeeper constant",
    "zk/snapshot_file.py:_NODE_TAIL_LEN": _SIZE,
    "zk/txnlog_file.py:_TXN_HEADER_LEN": _SIZE,
}


# --- The scan ---------------------------------------------------------------------------------------


def _int(node: ast.expr) -> int | None:
    """An integer a constant expression evaluates to (literals, unary minus, + - * <<), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _int(node.left), _int(node.right)
        return None if left is None or right is None else _OPS[type(node.op)](left, right)
    return None


def _table(node: ast.expr) -> dict[int, str] | None:
    """A code table: a dict literal from integers to strings."""
    if not isinstance(node, ast.Dict) or not node.keys:
        return None
    keys = [None if k is None else _int(k) for k in node.keys]
    values = [
        v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else None for v in node.values
    ]
    if any(k is None for k in keys) or any(v is None for v in values):
        return None
    return dict(zip(keys, values, strict=True))  # type: ignore[arg-type]


def _ranges(node: ast.expr, strings: dict[str, str]) -> dict[str, tuple[int, int]] | None:
    """A feature-range table: a dict literal from a name (a literal or a module's string constant) to a
    pair of integers."""
    if not isinstance(node, ast.Dict) or not node.keys:
        return None
    out: dict[str, tuple[int, int]] = {}
    for k, v in zip(node.keys, node.values, strict=True):
        if isinstance(k, ast.Constant) and isinstance(k.value, str):
            key = k.value
        elif isinstance(k, ast.Name) and k.id in strings:
            key = strings[k.id]
        else:
            return None
        if not isinstance(v, ast.Tuple) or len(v.elts) != 2:
            return None
        low, high = _int(v.elts[0]), _int(v.elts[1])
        if low is None or high is None:
            return None
        out[key] = (low, high)
    return out


def _bindings(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, ast.expr]]:
    for node in body:
        if isinstance(node, ast.ClassDef):
            yield from _bindings(node.body, f"{prefix}{node.name}.")
            continue
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                yield prefix + target.id, value
            elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                for t, v in zip(target.elts, value.elts, strict=False):
                    if isinstance(t, ast.Name):
                        yield prefix + t.id, v


def scan() -> tuple[dict[str, int], dict[str, dict[int, str]], dict[str, dict[str, tuple[int, int]]]]:
    """Every UPPER_CASE integer constant, code table and feature-range table of migrator/, keyed
    `module:NAME`."""
    ints: dict[str, int] = {}
    tables: dict[str, dict[int, str]] = {}
    ranges: dict[str, dict[str, tuple[int, int]]] = {}
    for path in sorted((ROOT / "migrator").rglob("*.py")):
        module = path.relative_to(ROOT / "migrator").as_posix()
        bindings = list(_bindings(ast.parse(path.read_text()).body, ""))
        strings = {
            n: v.value for n, v in bindings if isinstance(v, ast.Constant) and isinstance(v.value, str)
        }
        for name, value in bindings:
            if not _NAME.match(name.rsplit(".", 1)[-1]):
                continue
            key = f"{module}:{name}"
            number, table, feature_ranges = _int(value), _table(value), _ranges(value, strings)
            if number is not None:
                ints[key] = number
            elif table is not None:
                tables[key] = table
            elif feature_ranges is not None:
                ranges[key] = feature_ranges
    return ints, tables, ranges


def source_of(key: str) -> str | None:
    """The peer constant a scanned constant stands for: listed, or Kafka's error of the same name."""
    if key in FROM_PEER:
        return FROM_PEER[key]
    implicit = "Errors." + key.rsplit(":", 1)[1].rsplit(".", 1)[-1].lstrip("_")
    return implicit if implicit in KAFKA else None


SCANNED_INTS, SCANNED_TABLES, SCANNED_RANGES = scan()


def test_the_scan_finds_the_constants_it_is_meant_to() -> None:
    """A guard on the scanner itself: module level, tuple assignments, enum members, code tables."""
    assert SCANNED_INTS["controller/raft/raft_leader.py:INCONSISTENT_VOTER_SET"] == 94
    assert SCANNED_INTS["controller/raft/raft_leader.py:VOTE"] == 52  # FETCH, VOTE, ... = 1, 52, ...
    assert SCANNED_INTS["kraft/control.py:ControlType.KRAFT_VOTERS"] == 6
    assert SCANNED_INTS["kraft/log.py:MAX_BATCH_BYTES"] == 8 << 20
    assert SCANNED_TABLES["kraft/image.py:ACL_OPERATIONS"][14] == "DESCRIBE_TOKENS"
    assert (
        SCANNED_RANGES["controller/apis/admin_features_api.py:SUPPORTED_FEATURES"]["metadata.version"][0] == 1
    )
    assert len(SCANNED_INTS) > 250


def test_every_constant_is_a_peer_value_or_listed_as_the_projects_own() -> None:
    unaccounted = sorted(
        k
        for k in [*SCANNED_INTS, *SCANNED_TABLES, *SCANNED_RANGES]
        if source_of(k) is None and k not in NOT_A_PEER_VALUE
    )
    assert unaccounted == [], (
        "constants of migrator/ with no peer counterpart here: add each to FROM_PEER with the Kafka or "
        "ZooKeeper constant it stands for (its value quoted in KAFKA/ZOOKEEPER), or to NOT_A_PEER_VALUE "
        f"with why: {unaccounted}"
    )
    both = sorted(k for k in NOT_A_PEER_VALUE if source_of(k) is not None)
    assert both == [], f"listed as the project's own but named like a peer constant: {both}"


def test_no_entry_names_a_constant_that_is_gone() -> None:
    scanned = {*SCANNED_INTS, *SCANNED_TABLES, *SCANNED_RANGES}
    assert sorted(set(FROM_PEER) - scanned) == []
    assert sorted(set(NOT_A_PEER_VALUE) - scanned) == []


@pytest.mark.parametrize("key", sorted(k for k in SCANNED_INTS if source_of(k) is not None))
def test_each_constant_has_its_peers_value(key: str) -> None:
    source = source_of(key)
    assert source is not None
    expected = KAFKA.get(source, ZOOKEEPER.get(source))
    assert expected is not None, f"{key}: {source} is not quoted in KAFKA or ZOOKEEPER"
    assert SCANNED_INTS[key] == expected, f"{key} = {SCANNED_INTS[key]}, but {source} = {expected}"


@pytest.mark.parametrize("key", sorted(k for k in SCANNED_TABLES if source_of(k) is not None))
def test_each_code_table_agrees_with_kafkas_enum(key: str) -> None:
    enum = KAFKA_ENUMS[str(source_of(key))]
    wrong = {code: name for code, name in SCANNED_TABLES[key].items() if enum.get(code) != name}
    assert wrong == {}, f"{key}: codes Kafka 3.9's {source_of(key)} does not define so: {wrong}"


@pytest.mark.parametrize("key", sorted(k for k in SCANNED_RANGES if source_of(k) is not None))
def test_each_feature_range_is_kafkas(key: str) -> None:
    assert SCANNED_RANGES[key] == KAFKA_FEATURE_RANGES[str(source_of(key))], key


def test_the_error_rows_agree_with_kio() -> None:
    """kio transcribes Kafka's Errors independently: both sources give each code."""
    by_name = {e.name.upper(): e.value for e in ErrorCode}
    rows = {k.removeprefix("Errors."): v for k, v in KAFKA.items() if k.startswith("Errors.")}
    assert {n: by_name.get(n) for n in rows} == rows


def test_the_api_key_rows_agree_with_kio() -> None:
    """kio's generated request classes carry each API's key; ZooKeeper-era APIs kio lacks are skipped."""
    checked = 0
    for row, key in KAFKA.items():
        if not row.startswith("ApiKeys."):
            continue
        name = row.removeprefix("ApiKeys.").lower()
        try:
            package = importlib.import_module(f"kio.schema.{name}")
        except ModuleNotFoundError:
            continue
        version = min(m.name for m in pkgutil.iter_modules(package.__path__) if m.name.startswith("v"))
        module = importlib.import_module(f"kio.schema.{name}.{version}.request")
        request = next(
            v for k, v in vars(module).items() if k.endswith("Request") and hasattr(v, "__api_key__")
        )
        assert request.__api_key__ == key, row
        checked += 1
    assert checked >= 20
