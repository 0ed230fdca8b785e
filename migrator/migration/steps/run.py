"""What one command's run carries from step to step, and the one way its state moves.

A `Run` holds the ZooKeeper door, the command's `Target` (whole: its session and its log come from
`Target.connect` and `Target.open_log`), `migrate`'s options, the facts last gathered, the open log, the
result being filled and the timings; steps read and update it instead of passing six positional arguments
along. `Run.advance` is the only place the run's state changes: it asks `state_machine.transition`
with guards built from the gathered facts (and the operator's answer), never from constants.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

from kazoo.client import KazooClient
from pydantic import BaseModel

from migrator.controller.core import DEFAULT_SESSION_TIMEOUT_MS
from migrator.errors import FindingsError
from migrator.kraft.image import MIGRATION_STATES, ReplayResult
from migrator.kraft.log import MetadataLog
from migrator.metrics import MigrationMetrics
from migrator.migration.facts import Facts, gather
from migrator.migration.zk_diff import ZkPicture
from migrator.model import MigrationZnode
from migrator.target import Target
from migrator.zk.migration_client import (
    Claim,
    LayoutResult,
    MigrationClient,
    OwnWrites,
    ZkTree,
)
from state_machine import (
    GuardFacts,
    KafkaMigrationCode,
    MigrationEvent,
    MigrationState,
    TransitionRefused,
    transition,
)

if TYPE_CHECKING:
    from migrator.controller.service import ControllerService
    from migrator.migration.steps.claim import GuardedSyncer
    from migrator.migration.steps.soft_start import Listener

S = MigrationState
E = MigrationEvent
DEFAULT_BROKER_WAIT_SECONDS = 300.0

Confirm = Callable[[str], bool]
Progress = Callable[[int, int], None]
Say = Callable[[str], None]


class RefusedError(FindingsError):
    """The state machine refused a transition (exit 1): the message names the state and guard."""


def refused(e: TransitionRefused) -> RefusedError:
    return RefusedError(str(e))


def ask(state: MigrationState, event: MigrationEvent, guards: GuardFacts) -> MigrationState:
    """The state machine's answer, its refusal as the user's one-line RefusedError."""
    try:
        return transition(state, event, guards)
    except TransitionRefused as e:
        raise refused(e) from None


@dataclasses.dataclass
class DriverOptions:
    """The command's Target, passed whole, and how this invocation reports: the same for every command."""

    target: Target
    say: Say | None = None  # one-line progress notes (the CLI prints them on a terminal)
    metrics: MigrationMetrics | None = None  # the controller's Prometheus gauges (--metrics-listen)

    def note(self, text: str) -> None:
        if self.say is not None:
            self.say(text)


@dataclasses.dataclass
class MigrateOptions:
    """What `migrate` alone is asked, defined here once: the CLI builds it, `commands.migrate` and the
    driver pass it on whole. Where to listen is the Target's (`listen`), not an option of its own."""

    yes: bool = False
    confirm: Confirm | None = None
    brokers_from_zk: bool = False
    follow: bool = False
    stop: threading.Event | None = None
    progress: Progress | None = None
    poll_interval: float = 0.05
    broker_wait_timeout: float = DEFAULT_BROKER_WAIT_SECONDS
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    on_listen: Callable[[ControllerService, tuple[str, int]], None] | None = None
    recopy: bool = False
    reconcile: bool = False  # --reconcile: a full reconcile from a fresh read once synced
    heartbeat: float = 0.0  # seconds between the follower's "serving N brokers" lines (0: none)


@contextmanager
def connected(opts: DriverOptions) -> Iterator[MigrationClient]:
    """The door over the Target's own session (its credentials, TLS, SASL and ACL flag), reconnecting
    without a bound: a writer rides out a ZooKeeper restart (each operation still gives up after
    retry_transient's deadline)."""
    with MigrationClient.over(opts.target.connect(connection_tries=-1)) as zk:
        yield zk


@dataclasses.dataclass
class Run:
    """One command's run: its door to ZooKeeper, its log and facts, what it found and did."""

    zk: MigrationClient
    opts: DriverOptions
    facts: Facts
    result: Any = None
    migrate: MigrateOptions = dataclasses.field(default_factory=MigrateOptions)
    log: MetadataLog | None = None
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    # the state machine's answers: set by `advance`, starting from the derived state
    state: MigrationState = S.NONE
    started_in: MigrationState = S.NONE
    blockers: tuple[str, ...] = ()  # pre-flight blockers found (the START guard)
    confirmed: bool = False  # the operator's answer (the START guard)
    # what the steps leave for the ones after them
    claim: Claim | None = None
    migration: MigrationZnode | None = None
    tree: ZkPicture | None = None  # the copy's consistent read (its picture), reused by the first sync
    # the pre-flight's read and this session's writes since: the copy reuses it if nothing else changed
    preflight_tree: ZkTree | None = None
    preflight_layout: LayoutResult | None = None  # its decode, reused when only control znodes changed
    own_writes: OwnWrites | None = None
    copied: bool = False
    synced: bool = False
    dark_started: float | None = None
    syncer: GuardedSyncer | None = None
    runtime: Listener | None = None
    bound_early: bool = False  # the soft start bound before the pre-flight (preflight.bind_early)
    held: ExitStack = dataclasses.field(default_factory=ExitStack)

    def __post_init__(self) -> None:
        self.state = self.started_in = self.facts.derived.state

    @classmethod
    def start(cls, zk: MigrationClient, opts: DriverOptions, **kw: Any) -> Run:
        return cls(zk, opts, gather(zk.zk, opts.target.log_dir), **kw)

    @property
    def target(self) -> Target:
        """Where and how: the command's Target, whole."""
        return self.opts.target

    @property
    def client(self) -> KazooClient:
        """The kazoo session, for the migration modules that read and write ZooKeeper themselves."""
        return self.zk.zk

    def note(self, text: str) -> None:
        self.opts.note(text)

    def regather(self, replay: ReplayResult | None = None) -> Facts:
        self.facts = gather(self.zk.zk, self.target.log_dir, self.log, replay)
        return self.facts

    def guards(self, *, confirmed: bool | None = None) -> GuardFacts:
        """The guards' inputs, all from the facts last gathered (and the operator's answer)."""
        f = self.facts
        return GuardFacts(
            blockers=self.blockers,
            confirmed=self.confirmed if confirmed is None else confirmed,
            write_behind_lag=f.lag,
            zk_registered_brokers=tuple(f.zk.registered_brokers),
            copy_transaction_open=f.log.open_transaction is not None,
            copy_committed=f.log.migration_code == int(KafkaMigrationCode.MIGRATION),
        )

    def advance(self, event: MigrationEvent, *, confirmed: bool | None = None) -> MigrationState:
        self.state = ask(self.state, event, self.guards(confirmed=confirmed))
        return self.state

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        yield
        self.timings[name] = round(time.perf_counter() - t0, 3)

    def replay(self) -> ReplayResult:
        return replay_of(self.facts)

    @property
    def node_id(self) -> int:
        """The log's own node id once it has one, else the option's."""
        return self.facts.log.node_id if self.facts.log.node_id is not None else self.target.node_id


def replay_of(facts: Facts) -> ReplayResult:
    assert facts.log.replay is not None
    return facts.log.replay


def public(state: MigrationState) -> str:
    return state.public_name


def kafka_name(code: int | None) -> str | None:
    return None if code is None else MIGRATION_STATES.get(code, f"UNKNOWN_{code}")


def open_log(target: Target, cluster_id: str | None, node_id: int) -> MetadataLog:
    """The Target's log, writable: takes the writer lock (a second writer gets FencedError naming the
    holder)."""
    return target.open_log(writable=True, cluster_id=cluster_id, node_id=node_id)


def jsonable(obj: Any) -> Any:
    """A syncer report or repair as JSON-ready data, whatever its class (pydantic, dataclass, ...)."""
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set):
        return [jsonable(v) for v in obj]
    if isinstance(obj, str | int | float | bool) or obj is None:
        return obj
    return str(obj)
