"""What every command returns: pydantic models the CLI renders as text or JSON, and tests read.

One room for them so `cli` needs the models, not the code that fills them (issue 12). The parts the
migration fills (findings, health, the copy's manifest and plan, the phase estimate) are defined here
too, below the migration and the controller (issue 28), which import them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from migrator.zk.bulk_write import JUTE_MAXBUFFER

__all__ = [
    "AdminResult",
    "CheckResult",
    "CheckSummary",
    "ClaimInfo",
    "CopyManifest",
    "CopyPlan",
    "Finding",
    "FinalizeResult",
    "LogDamage",
    "LogFileReport",
    "LogHandoverResult",
    "LogImageResult",
    "LogSnapshotResult",
    "LogVerifyResult",
    "MigrationHealth",
    "MigrateResult",
    "PhaseEstimate",
    "PlanResult",
    "RollbackResult",
    "Severity",
    "StatusResult",
    "TransitionInfo",
    "TypeCount",
    "TruncateUnsyncedResult",
    "WriterInfo",
    "ZkExportResult",
]


# --- the parts the migration fills -------------------------------------------------------------


class Severity(StrEnum):
    BLOCKER = "blocker"
    WARNING = "warning"
    INFO = "info"


class Finding(BaseModel):
    code: str
    severity: Severity
    message: str
    hint: str
    paths: list[str] = Field(default_factory=list)
    ids: list[int] = Field(default_factory=list)
    count: int = 1


class WriterInfo(BaseModel):
    """Who writes (or last wrote) the log; `alive` is the kernel's word (the flock is held)."""

    pid: int | None = None
    host: str | None = None
    since: str | None = None
    command: str | None = None
    alive: bool

    def describe(self) -> str:
        who = (
            "an unnamed process" if self.pid is None else f"pid {self.pid} on {self.host} since {self.since}"
        )
        if self.command:
            who += f" ({self.command})"
        return f"{who}, {'alive' if self.alive else 'gone (died without releasing the log)'}"


class MigrationHealth(BaseModel):
    state: str
    kafka_state: str | None = None
    write_behind_lag: int = 0
    writer: WriterInfo | None = None
    zk_registered_brokers: list[int] = Field(default_factory=list)
    kraft_registered_brokers: list[int] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    next_action: str = ""

    @property
    def healthy(self) -> bool:
        return not self.problems


class CopyManifest(BaseModel):
    """What the copy wrote; printed, returned and stored as zk2kraft-copy-manifest.json."""

    cluster_id: str | None
    epoch: int
    first_offset: int  # the BeginTransactionRecord
    last_offset: int  # the EndTransactionRecord
    records: int  # records inside the transaction, markers excluded
    records_by_type: dict[str, int] = Field(default_factory=dict)
    batches: int = 0  # batches appended, the transaction markers' included
    bytes: int = 0  # bytes the copy added to the log's segments
    topics: int = 0
    partitions: int = 0
    skipped_pending_deletions: list[str] = Field(default_factory=list)
    zk_zxid: int = 0
    zk_consistent: bool = False  # the tree was read at one zxid
    read_seconds: float = 0.0
    build_seconds: float = 0.0
    append_seconds: float = 0.0
    duration_seconds: float = 0.0
    started_at: str = ""


class TypeCount(BaseModel):
    records: int = 0
    bytes: int = 0


class CopyPlan(BaseModel):
    """`plan`: the copy as a dry run, nothing written anywhere."""

    cluster_id: str | None
    fresh_log: bool
    records: int
    bytes: int
    batches: int
    by_type: dict[str, TypeCount] = Field(default_factory=dict)
    topics: int = 0
    partitions: int = 0
    skipped_pending_deletions: list[str] = Field(default_factory=list)
    read_seconds: float = 0.0
    build_seconds: float = 0.0
    estimated_seconds: float = 0.0


class PhaseEstimate(BaseModel):
    """Seconds per phase of `migrate` (the broker wait, if any, is the operator's and not included)."""

    preflight_seconds: float
    copy_seconds: float
    first_sync_seconds: float
    total_seconds: float
    read_seconds: float  # one bulk read of ZooKeeper, as measured by this plan
    check_seconds: float
    compare_seconds: float

    def describe(self) -> str:
        return (
            f"estimated {self.total_seconds:.1f}s: pre-flight {self.preflight_seconds:.1f}s, copy "
            f"{self.copy_seconds:.1f}s, first sync {self.first_sync_seconds:.1f}s (one ZooKeeper read "
            f"{self.read_seconds:.2f}s)"
        )


# --- what each command returns -------------------------------------------------------------------


class ClaimInfo(BaseModel):
    kraft_controller_id: int
    kraft_epoch: int
    zk_controller_epoch: int


class MigrateResult(BaseModel):
    state_before: str
    state_after: str
    kafka_code_after: str | None = None
    actions: list[str] = Field(default_factory=list)
    claim: ClaimInfo | None = None
    manifest: CopyManifest | None = None
    aborted_transaction: str | None = None
    removed_stale_migration: dict[str, int] | None = None
    archived_foreign_log: str | None = None
    repairs: list[dict[str, Any]] = Field(default_factory=list)
    sync: dict[str, Any] | None = None
    lag: int = 0
    log_end_offset: int = 0
    migration_offset: int | None = None
    followed_seconds: float | None = None
    changes_applied: int = 0
    timings: dict[str, float] = Field(default_factory=dict)
    anomalies: list[str] = Field(default_factory=list)


class PlanResult(BaseModel):
    state: str
    plan: CopyPlan | None = None
    phases: PhaseEstimate | None = None  # pre-flight, copy and first sync
    message: str = ""


class TransitionInfo(BaseModel):
    kafka_code: int
    kafka_state: str
    offset: int
    timestamp_ms: int | None = None
    time: str | None = None


class KafkaControllerInfo(BaseModel):
    """Kafka's own migrating KRaft controller as `status` reads it (companion mode, read-only)."""

    node_id: int | None = None
    pid: int | None = None  # the process holding its .lock on this host, if any
    holds_zookeeper: bool = False  # /controller names it (its claim)
    migrating_zk_brokers: list[int] = Field(default_factory=list)
    kraft_brokers: list[int] = Field(default_factory=list)  # registered without the migration flag
    waiting_for: list[int] = Field(default_factory=list)  # in /brokers/ids, not registered as migrating


class StatusResult(BaseModel):
    state: str
    state_code: int
    kafka_code: int | None = None
    kafka_state: str | None = None
    reason: str
    next_action: str
    anomalies: list[str] = Field(default_factory=list)
    #: --log-dir does not hold ZooKeeper's claim (log_binding): every writing command refuses it
    log_binding: str | None = None
    cluster_id: str | None = None
    controller_id: int | None = None
    controller_is_kraft: bool = False
    kraft_epoch: int | None = None  # the claim's (from /controller)
    zk_controller_epoch: int | None = None
    migration_znode: dict[str, int] | None = None
    log_dir: str
    log_exists: bool
    log_end_offset: int = 0
    log_last_record_offset: int = -1
    log_epoch: int = -1
    open_transaction: str | None = None
    write_behind_lag: int = 0
    #: the first record after /migration's offset whose ZooKeeper write can never fit (the lag cannot
    #: drain; `zk2kraft log truncate-unsynced --yes` cuts it off)
    stuck_record: str | None = None
    zk_registered_brokers: list[int] = Field(default_factory=list)
    #: brokers registered with the KRaft controller (RegisterBrokerRecord), and those of them that are
    #: migrating ZooKeeper brokers (Kafka's MigratingZkBrokerCount)
    kraft_registered_brokers: list[int] = Field(default_factory=list)
    migrating_zk_brokers: list[int] = Field(default_factory=list)
    last_transition: TransitionInfo | None = None
    writer: str | None = None  # who holds the log's writer lock now
    writer_info: WriterInfo | None = None  # the writer alive, or the last one if it died
    follower_pid: int | None = None
    manifest: CopyManifest | None = None
    #: the running controller's channel to each ZooKeeper-mode broker (connected, queued, errors, the
    #: metadata offset the broker acknowledged), as it last reported them
    zk_broker_channels: list[dict[str, Any]] | None = None
    #: the migration is Kafka's own controller's (its metadata.log.dir, never written by zk2kraft)
    kafka_controller: KafkaControllerInfo | None = None


class FinalizeResult(BaseModel):
    state_before: str
    state_after: str
    offset: int
    epoch: int
    message: str


class RollbackResult(BaseModel):
    state_before: str
    state_after: str
    drained_records: int = 0
    kraft_epoch: int
    zk_controller_epoch: int  # /controller_epoch after the release: above every KRaft epoch
    archived_log: str | None = None
    removed: list[str] = Field(default_factory=list)
    actions: list[str] = Field(default_factory=list)


class AdminResult(BaseModel):
    change: str
    summary: str
    via: str  # the controller's address and the request, or why this command applied it itself
    path: Literal["protocol", "direct"] = "direct"  # over Kafka's protocol, or under the log lock here
    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    migration_offset: int | None = None
    topic_id: str | None = None
    noop: bool = False


class CheckSummary(BaseModel):
    eligible: bool
    verdict: str
    blockers: int
    warnings: int
    infos: int
    zookeeper: str
    reachable: bool
    zxid: int | None = None  # the zxid the view was read at (or the newest seen when not one snapshot)
    consistent: bool = False  # True when the whole view is one zxid's snapshot
    cluster_id: str | None = None
    brokers: int = 0
    topics: int = 0
    partitions: int = 0
    znodes: int = 0
    broker_config_files: int | None = None
    jute_maxbuffer: int = JUTE_MAXBUFFER
    read_seconds: float = 0.0
    check_seconds: float = 0.0


class CheckResult(BaseModel):
    findings: list[Finding] = Field(default_factory=list)
    summary: CheckSummary
    exit_code: int
    #: set once migrating has begun: then the migration's health is reported instead of eligibility
    migration: MigrationHealth | None = None


class ZkExportResult(BaseModel):
    out: str
    rows: int
    zookeeper: str
    zxid: int
    consistent: bool
    znodes: int
    cluster_id: str | None = None
    topics: int = 0
    partitions: int = 0
    read_seconds: float = 0.0
    warnings: list[str] = Field(default_factory=list)


class TruncateUnsyncedResult(BaseModel):
    stuck_record: str
    end_offset_before: int
    end_offset: int
    migration_offset: int
    dropped_offsets: int


# --- log dump | verify | image | snapshot ------------------------------------------------------------


class LogFileReport(BaseModel):
    """One segment or snapshot file as `log verify` found it."""

    file: str
    kind: str
    size: int
    batches: int
    records: int
    first_offset: int | None
    last_offset: int | None
    ok: bool


class LogDamage(BaseModel):
    file: str
    position: int
    reason: str
    kind: str  # "batch", "record", "offset", "torn-tail", "snapshot", "file"


class LogVerifyResult(BaseModel):
    path: str
    ok: bool
    files: list[LogFileReport]
    damage: list[LogDamage]


class LogImageResult(BaseModel):
    """`log image`: the replayed image summarised (counts per kind, migration state, transactions)."""

    cluster_id: str | None
    end_offset: int
    log_start_offset: int | None
    last_applied_offset: int | None
    snapshot: str | None
    snapshot_end_offset: int | None
    torn_tail_bytes: int
    migration_state: dict[str, Any] | None
    open_transaction: dict[str, Any] | None
    committed_transactions: int
    aborted_transactions: int
    feature_levels: dict[str, int]
    counts: dict[str, int]
    next_producer_id: int | None
    records_by_type: dict[str, int]
    unknown_records: int


class LogSnapshotResult(BaseModel):
    path: str
    end_offset: int
    epoch: int
    created: bool


class LogHandoverResult(BaseModel):
    """`log verify --kafka`: the handover check (issue 15); JSON as `kraft.handover.report_dict`."""

    path: str
    refused: int
    findings: list[dict[str, str]] = Field(default_factory=list)
    checked: list[str] = Field(default_factory=list)
    lines: list[str] = Field(default_factory=list, exclude=True)  # the text rendering
