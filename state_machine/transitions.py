"""The transition table and its guards. Pure: callers pass the facts, nothing here does I/O.

A refused transition names the current state, the event and the unmet guard, so an operator knows
exactly what to fix instead of reading a stack trace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from state_machine.events import MigrationEvent
from state_machine.states import MigrationState

S = MigrationState
E = MigrationEvent


@dataclass(frozen=True)
class GuardFacts:
    """The facts the guards decide on, gathered by the driver before it asks for a transition."""

    blockers: tuple[str, ...] = ()  # codes of `check` blockers still present
    confirmed: bool = False  # the operator answered yes (or passed --yes)
    write_behind_lag: int = 0  # committed records not yet in ZooKeeper
    zk_registered_brokers: tuple[int, ...] = ()  # brokers still registered in ZooKeeper mode
    copy_transaction_open: bool = False
    copy_committed: bool = False


@dataclass(frozen=True)
class Guard:
    name: str
    holds: Callable[[GuardFacts], bool]
    explain: Callable[[GuardFacts], str]


def _g(name: str, holds: Callable[[GuardFacts], bool], explain: Callable[[GuardFacts], str]) -> Guard:
    return Guard(name, holds, explain)


NO_BLOCKERS = _g(
    "no-blockers",
    lambda f: not f.blockers,
    lambda f: f"pre-flight blockers remain: {', '.join(f.blockers)} (run `zk2kraft check`)",
)
CONFIRMED = _g(
    "confirmed", lambda f: f.confirmed, lambda f: "not confirmed (answer the prompt or pass --yes)"
)
NO_LAG = _g(
    "no-write-behind-lag",
    lambda f: f.write_behind_lag == 0,
    lambda f: f"{f.write_behind_lag} committed records are not yet in ZooKeeper (let the syncer drain)",
)
NO_ZK_BROKERS = _g(
    "no-zk-mode-brokers",
    lambda f: not f.zk_registered_brokers,
    lambda f: (
        "brokers still registered in ZooKeeper mode: "
        + ", ".join(map(str, f.zk_registered_brokers))
        + " (roll them to KRaft first)"
    ),
)
COPY_OPEN = _g(
    "copy-transaction-open",
    lambda f: f.copy_transaction_open,
    lambda f: "no copy transaction is open in the log",
)
COPY_COMMITTED = _g(
    "copy-committed",
    lambda f: f.copy_committed,
    lambda f: "the copy transaction has not ended with ZkMigrationStateRecord(MIGRATION)",
)
NEVER_AFTER_FINALIZE = _g(
    "not-finalized",
    lambda f: False,
    lambda f: (
        "the migration is finalized: ZooKeeper no longer receives writes, so going back would lose "
        "metadata; only an offline restore from a ZooKeeper backup remains"
    ),
)
NOT_KRAFT_BORN = _g(
    "cluster-was-zookeeper",
    lambda f: False,
    lambda f: "this log was created in KRaft mode (ZkMigrationState NONE); there is nothing to migrate",
)


@dataclass(frozen=True)
class Transition:
    source: MigrationState
    event: MigrationEvent
    target: MigrationState
    guards: tuple[Guard, ...] = field(default_factory=tuple)


TABLE: tuple[Transition, ...] = (
    Transition(S.MIGRATION_INELIGIBLE, E.START, S.MIGRATING_ZK_DATA, (NO_BLOCKERS, CONFIRMED)),
    Transition(S.MIGRATING_ZK_DATA, E.ABORT_COPY, S.MIGRATING_ZK_DATA, (COPY_OPEN,)),
    Transition(S.MIGRATING_ZK_DATA, E.COMMIT_COPY, S.DUAL_WRITE_METADATA, (COPY_COMMITTED,)),
    Transition(S.MIGRATING_ZK_DATA, E.ROLLBACK, S.MIGRATION_INELIGIBLE, (CONFIRMED,)),
    Transition(S.DUAL_WRITE_METADATA, E.ROLLBACK, S.MIGRATION_INELIGIBLE, (NO_LAG, CONFIRMED)),
    Transition(S.DUAL_WRITE_METADATA, E.FINALIZE, S.MIGRATION_FINALIZED, (NO_LAG, NO_ZK_BROKERS, CONFIRMED)),
    # Listed so that the refusal explains itself instead of saying "no such transition".
    Transition(S.MIGRATION_FINALIZED, E.ROLLBACK, S.MIGRATION_FINALIZED, (NEVER_AFTER_FINALIZE,)),
    *(Transition(S.NONE, ev, S.NONE, (NOT_KRAFT_BORN,)) for ev in MigrationEvent),
)

_BY_KEY: Mapping[tuple[MigrationState, MigrationEvent], Transition] = {(t.source, t.event): t for t in TABLE}


class TransitionRefused(Exception):
    """A transition the table does not allow, or whose guard does not hold."""

    exit_code = 1

    def __init__(self, state: MigrationState, event: MigrationEvent, guard: str, reason: str) -> None:
        self.state, self.event, self.guard, self.reason = state, event, guard, reason
        super().__init__(f"cannot {event.value} in state {state.public_name}: {reason} [guard {guard}]")


def allowed_events(state: MigrationState) -> list[MigrationEvent]:
    return [t.event for t in TABLE if t.source == state and all(g.name not in _NEVER for g in t.guards)]


_NEVER = {NEVER_AFTER_FINALIZE.name, NOT_KRAFT_BORN.name}


def transition(state: MigrationState, event: MigrationEvent, facts: GuardFacts) -> MigrationState:
    """The next state, or TransitionRefused naming the first unmet guard."""
    t = _BY_KEY.get((state, event))
    if t is None:
        allowed = ", ".join(e.value for e in allowed_events(state)) or "none"
        raise TransitionRefused(
            state, event, "table", f"not a transition from this state (allowed: {allowed})"
        )
    for guard in t.guards:
        if not guard.holds(facts):
            raise TransitionRefused(state, event, guard.name, guard.explain(facts))
    return t.target
