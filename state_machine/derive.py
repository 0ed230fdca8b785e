"""The one function that derives the migration state from durable facts.

There is no state file: the log's last ZkMigrationStateRecord and open transaction, `/migration` and
`/controller` are the facts, so a crash at any instant still leaves exactly one answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from state_machine.states import KafkaMigrationCode, MigrationState

S = MigrationState
K = KafkaMigrationCode


@dataclass(frozen=True)
class DurableFacts:
    log_exists: bool = False
    last_migration_code: int | None = None  # last committed ZkMigrationStateRecord, None if none
    open_transaction: str | None = None  # name of a Begin without End/Abort at the log's end
    migration_znode_offset: int | None = None  # kraft_metadata_offset of /migration; None if absent
    controller_kraft_epoch: int | None = None  # kraftControllerEpoch of /controller if a KRaft one holds it


@dataclass(frozen=True)
class DerivedState:
    state: MigrationState
    kafka_code: KafkaMigrationCode | None
    reason: str
    next_action: str
    anomalies: tuple[str, ...] = field(default_factory=tuple)


def derive_state(f: DurableFacts) -> DerivedState:
    """Exactly one state for any combination of facts; odd combinations are named as anomalies."""
    code = K(f.last_migration_code) if f.last_migration_code is not None else None
    anomalies: list[str] = []
    kraft_holds = f.controller_kraft_epoch is not None
    if code is K.POST_MIGRATION:
        if kraft_holds or f.migration_znode_offset is not None:
            anomalies.append(
                "ZooKeeper still carries /controller or /migration after finalize (harmless; "
                "ZooKeeper is no longer written)"
            )
        return DerivedState(
            S.MIGRATION_FINALIZED,
            code,
            "the log records POST_MIGRATION",
            "decommission ZooKeeper once every broker runs in KRaft mode",
            tuple(anomalies),
        )
    if code is K.NONE:
        return DerivedState(S.NONE, code, "the log was created in KRaft mode", "nothing to migrate")
    if code is K.MIGRATION:
        if f.open_transaction is not None:
            anomalies.append(
                f"a transaction {f.open_transaction!r} is open after the copy committed; "
                "it will be aborted on the next start"
            )
        if not kraft_holds:
            anomalies.append("/controller is not held by a KRaft controller: zk2kraft re-claims it on start")
        if f.migration_znode_offset is None or f.migration_znode_offset <= 0:
            anomalies.append(
                "/migration does not record the copy: the next start reconciles ZooKeeper in full"
            )
        return DerivedState(
            S.DUAL_WRITE_METADATA,
            code,
            "the copy is committed (ZkMigrationStateRecord MIGRATION)",
            "roll brokers to KRaft, then `zk2kraft finalize`; `zk2kraft rollback` is still possible",
            tuple(anomalies),
        )
    if f.open_transaction is not None:
        return DerivedState(
            S.MIGRATING_ZK_DATA,
            code or K.PRE_MIGRATION,
            f"the copy transaction {f.open_transaction!r} was interrupted",
            "run `zk2kraft migrate` again: the open copy is aborted and redone",
        )
    if kraft_holds:
        return DerivedState(
            S.MIGRATING_ZK_DATA,
            code or K.PRE_MIGRATION,
            "a KRaft controller holds /controller but no copy is committed",
            "run `zk2kraft migrate` to copy, or `zk2kraft rollback` to release ZooKeeper",
        )
    if f.migration_znode_offset is not None:
        anomalies.append(
            "a /migration znode is left from an earlier attempt; `zk2kraft migrate` removes it "
            "and copies afresh (it never resumes from a stale log)"
        )
    return DerivedState(
        S.MIGRATION_INELIGIBLE,
        code,
        "ZooKeeper is the source of truth; no migration is under way",
        "run `zk2kraft check`, then `zk2kraft migrate`",
        tuple(anomalies),
    )
