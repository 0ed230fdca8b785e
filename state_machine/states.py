"""The public migration states (KIP-866's names) and how they map onto Kafka's persisted codes."""

from __future__ import annotations

from enum import IntEnum


class MigrationState(IntEnum):
    """KIP-866's public states; the value is the seed's metric enum."""

    NONE = 0
    MIGRATION_INELIGIBLE = 1
    MIGRATING_ZK_DATA = 2
    DUAL_WRITE_METADATA = 3
    MIGRATION_FINALIZED = 4

    @property
    def public_name(self) -> str:
        return _PUBLIC_NAMES[self]


_PUBLIC_NAMES = {
    MigrationState.NONE: "None",
    MigrationState.MIGRATION_INELIGIBLE: "MigrationIneligible",
    MigrationState.MIGRATING_ZK_DATA: "MigratingZkData",
    MigrationState.DUAL_WRITE_METADATA: "DualWriteMetadata",
    MigrationState.MIGRATION_FINALIZED: "MigrationFinalized",
}


class KafkaMigrationCode(IntEnum):
    """Kafka 3.5+'s `ZkMigrationStateRecord` codes (1 and 2 are swapped against declaration order)."""

    NONE = 0
    MIGRATION = 1
    PRE_MIGRATION = 2
    POST_MIGRATION = 3


# The Kafka code a log carries while the cluster is in each public state.
KAFKA_CODE_OF = {
    MigrationState.NONE: KafkaMigrationCode.NONE,
    MigrationState.MIGRATION_INELIGIBLE: KafkaMigrationCode.PRE_MIGRATION,
    MigrationState.MIGRATING_ZK_DATA: KafkaMigrationCode.PRE_MIGRATION,
    MigrationState.DUAL_WRITE_METADATA: KafkaMigrationCode.MIGRATION,
    MigrationState.MIGRATION_FINALIZED: KafkaMigrationCode.POST_MIGRATION,
}
