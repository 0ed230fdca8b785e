"""The migration's pure state machine: states, events, transition table, guards, and derivation.

No I/O and no imports from the rest of the project; the driver gathers facts and asks.
"""

from state_machine.derive import DerivedState, DurableFacts, derive_state
from state_machine.events import MigrationEvent
from state_machine.states import KAFKA_CODE_OF, KafkaMigrationCode, MigrationState
from state_machine.transitions import TABLE, GuardFacts, TransitionRefused, allowed_events, transition

__all__ = [
    "KAFKA_CODE_OF",
    "TABLE",
    "DerivedState",
    "DurableFacts",
    "GuardFacts",
    "KafkaMigrationCode",
    "MigrationEvent",
    "MigrationState",
    "TransitionRefused",
    "allowed_events",
    "derive_state",
    "transition",
]
