"""The pure state machine: table, guards, refusals, and derivation from durable facts."""

from __future__ import annotations

import ast
import pathlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from state_machine import (
    DurableFacts,
    GuardFacts,
    KafkaMigrationCode,
    MigrationEvent,
    MigrationState,
    TransitionRefused,
    derive_state,
    transition,
)

S, E, K = MigrationState, MigrationEvent, KafkaMigrationCode
OK = GuardFacts(confirmed=True, copy_transaction_open=True, copy_committed=True)


def test_public_names_and_values_are_the_seeds():
    assert [(s.public_name, int(s)) for s in S] == [
        ("None", 0),
        ("MigrationIneligible", 1),
        ("MigratingZkData", 2),
        ("DualWriteMetadata", 3),
        ("MigrationFinalized", 4),
    ]
    assert [(k.name, int(k)) for k in K] == [
        ("NONE", 0),
        ("MIGRATION", 1),
        ("PRE_MIGRATION", 2),
        ("POST_MIGRATION", 3),
    ]


@pytest.mark.parametrize(
    ("state", "event", "target"),
    [
        (S.MIGRATION_INELIGIBLE, E.START, S.MIGRATING_ZK_DATA),
        (S.MIGRATING_ZK_DATA, E.ABORT_COPY, S.MIGRATING_ZK_DATA),
        (S.MIGRATING_ZK_DATA, E.COMMIT_COPY, S.DUAL_WRITE_METADATA),
        (S.MIGRATING_ZK_DATA, E.ROLLBACK, S.MIGRATION_INELIGIBLE),
        (S.DUAL_WRITE_METADATA, E.ROLLBACK, S.MIGRATION_INELIGIBLE),
        (S.DUAL_WRITE_METADATA, E.FINALIZE, S.MIGRATION_FINALIZED),
    ],
)
def test_allowed_transitions(state, event, target):
    assert transition(state, event, OK) is target


def test_unlisted_transition_names_state_event_and_allowed():
    with pytest.raises(TransitionRefused) as e:
        transition(S.MIGRATION_INELIGIBLE, E.FINALIZE, OK)
    assert "cannot finalize in state MigrationIneligible" in str(e.value)
    assert "allowed: start" in str(e.value)
    assert e.value.guard == "table"


@pytest.mark.parametrize(
    ("state", "event", "facts", "guard"),
    [
        (
            S.MIGRATION_INELIGIBLE,
            E.START,
            GuardFacts(blockers=("NO_BROKERS",), confirmed=True),
            "no-blockers",
        ),
        (S.MIGRATION_INELIGIBLE, E.START, GuardFacts(), "confirmed"),
        (
            S.DUAL_WRITE_METADATA,
            E.FINALIZE,
            GuardFacts(confirmed=True, write_behind_lag=7),
            "no-write-behind-lag",
        ),
        (
            S.DUAL_WRITE_METADATA,
            E.FINALIZE,
            GuardFacts(confirmed=True, zk_registered_brokers=(1, 3)),
            "no-zk-mode-brokers",
        ),
        (S.DUAL_WRITE_METADATA, E.FINALIZE, GuardFacts(), "confirmed"),
        (
            S.DUAL_WRITE_METADATA,
            E.ROLLBACK,
            GuardFacts(confirmed=True, write_behind_lag=1),
            "no-write-behind-lag",
        ),
        (S.MIGRATING_ZK_DATA, E.COMMIT_COPY, GuardFacts(), "copy-committed"),
        (S.MIGRATING_ZK_DATA, E.ABORT_COPY, GuardFacts(), "copy-transaction-open"),
        (S.MIGRATION_FINALIZED, E.ROLLBACK, OK, "not-finalized"),
        (S.NONE, E.START, OK, "cluster-was-zookeeper"),
    ],
)
def test_guards_refuse_and_name_themselves(state, event, facts, guard):
    with pytest.raises(TransitionRefused) as e:
        transition(state, event, facts)
    assert e.value.guard == guard
    assert state.public_name in str(e.value) and event.value in str(e.value)


def test_refusal_explains_the_details():
    with pytest.raises(TransitionRefused, match="1, 3"):
        transition(
            S.DUAL_WRITE_METADATA, E.FINALIZE, GuardFacts(confirmed=True, zk_registered_brokers=(1, 3))
        )
    with pytest.raises(TransitionRefused, match="finalized"):
        transition(S.MIGRATION_FINALIZED, E.ROLLBACK, OK)


def test_every_state_event_pair_either_moves_or_refuses():
    for state in S:
        for event in E:
            try:
                assert isinstance(transition(state, event, OK), S)
            except TransitionRefused as e:
                assert e.state is state and e.event is event


@pytest.mark.parametrize(
    ("facts", "state"),
    [
        (DurableFacts(), S.MIGRATION_INELIGIBLE),
        (DurableFacts(log_exists=True, last_migration_code=2), S.MIGRATION_INELIGIBLE),
        (
            DurableFacts(log_exists=True, last_migration_code=2, open_transaction="ZK Migration"),
            S.MIGRATING_ZK_DATA,
        ),
        (
            DurableFacts(log_exists=True, controller_kraft_epoch=5, migration_znode_offset=-1),
            S.MIGRATING_ZK_DATA,
        ),
        (
            DurableFacts(
                log_exists=True, last_migration_code=1, controller_kraft_epoch=5, migration_znode_offset=99
            ),
            S.DUAL_WRITE_METADATA,
        ),
        (DurableFacts(log_exists=True, last_migration_code=3), S.MIGRATION_FINALIZED),
        (DurableFacts(log_exists=True, last_migration_code=0), S.NONE),
    ],
)
def test_derivation(facts, state):
    assert derive_state(facts).state is state


def test_clean_dual_write_has_no_anomalies_but_a_crash_window_is_named():
    clean = DurableFacts(
        log_exists=True, last_migration_code=1, controller_kraft_epoch=5, migration_znode_offset=99
    )
    assert derive_state(clean).anomalies == ()
    # committed in the log, but the crash came before /migration recorded it
    torn = DurableFacts(
        log_exists=True, last_migration_code=1, controller_kraft_epoch=5, migration_znode_offset=-1
    )
    derived = derive_state(torn)
    assert derived.state is S.DUAL_WRITE_METADATA
    assert any("/migration" in a for a in derived.anomalies)


def test_leftover_migration_znode_is_named_and_never_resumed():
    derived = derive_state(DurableFacts(migration_znode_offset=52341))
    assert derived.state is S.MIGRATION_INELIGIBLE
    assert any("earlier attempt" in a for a in derived.anomalies)


@given(
    st.booleans(),
    st.one_of(st.none(), st.sampled_from([0, 1, 2, 3])),
    st.one_of(st.none(), st.text(max_size=5)),
    st.one_of(st.none(), st.integers(-1, 10**6)),
    st.one_of(st.none(), st.integers(0, 100)),
)
def test_derivation_is_total(log_exists, code, txn, offset, epoch):
    derived = derive_state(DurableFacts(log_exists, code, txn, offset, epoch))
    assert isinstance(derived.state, S) and derived.next_action


def test_state_machine_imports_nothing_of_the_project():
    for path in (pathlib.Path(__file__).resolve().parent.parent / "state_machine").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[0] not in {"migrator", "cli", "spark_audit", "zk_fixtures"}, (
                    path
                )
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] not in {
                        "migrator",
                        "cli",
                        "spark_audit",
                        "zk_fixtures",
                    }, path
