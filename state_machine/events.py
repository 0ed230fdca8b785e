"""What an operator or the driver can ask the migration to do."""

from __future__ import annotations

from enum import Enum


class MigrationEvent(Enum):
    START = "start"  # eligibility passed: claim ZooKeeper and begin the copy
    ABORT_COPY = "abort-copy"  # an interrupted copy is closed with AbortTransactionRecord, to be redone
    COMMIT_COPY = "commit-copy"  # the copy transaction ended with ZkMigrationStateRecord(MIGRATION)
    FINALIZE = "finalize"  # POST_MIGRATION: ZooKeeper is no longer written
    ROLLBACK = "rollback"  # back to ZooKeeper mode
