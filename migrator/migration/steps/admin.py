"""`admin`: validated changes in DualWriteMetadata, sent to the running controller over Kafka's
protocol, or, with no controller running, applied here.

With a controller listening (`--bootstrap-controller`, the listeners of `--config`, or what the
running follower announced in its log directory) each change is sent as the matching Kafka request
(`controller.client.admin_client`). With nothing listening and the log's writer lock free, the run takes
the log itself: it claims ZooKeeper once and reconciles once (every new writer first repairs drift,
as Kafka's does), then appends and syncs each change before the next, so a stopped controller is
still recoverable. A held lock with an unreachable listener is refused (exit 3), never raced; a held
lock whose holder has not announced its listeners yet (a follower's first sync) is waited for first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

from migrator import stop
from migrator.controller.client.admin_client import AdminClient, Answer
from migrator.controller.client.admin_endpoint import Endpoint, resolve_endpoint
from migrator.controller.client.client import ControllerUnreachable
from migrator.controller.follower import read_follower, writer_lock_held
from migrator.controller.managers.change import AdminChange, AdminReply, refused_state
from migrator.controller.network.listener_config import default_properties
from migrator.controller.security.client_security import ClientSecurity
from migrator.errors import BadInputError, FencedError, FindingsError, UnreachableError, ZkKraftError
from migrator.kraft.lock import LOCK_FILE, read_holder
from migrator.migration import log_binding
from migrator.migration.facts import Facts, log_exists, require_own_log
from migrator.migration.steps.claim import claim, covered, syncer
from migrator.migration.steps.follow import Controller
from migrator.migration.steps.run import DriverOptions, Run, S, connected, open_log, public
from migrator.migration.steps.status import writer_holder
from migrator.results import AdminResult


def admin(
    opts: DriverOptions,
    change: AdminChange,
    *,
    timeout: float = 60.0,
    bootstrap: str | None = None,
    security: ClientSecurity | None = None,
) -> AdminResult:
    """Apply one change in DualWriteMetadata: over the protocol to a running controller, or here."""
    return admin_many(opts, [change], timeout=timeout, bootstrap=bootstrap, security=security)[0]


def admin_many(
    opts: DriverOptions,
    changes: Iterable[AdminChange],
    *,
    timeout: float = 60.0,
    on_result: Callable[[AdminResult], None] | None = None,
    bootstrap: str | None = None,
    security: ClientSecurity | None = None,
) -> list[AdminResult]:
    """Apply changes in order, each durable in the log and ZooKeeper before the next; the first refused
    one raises (the ones before it stay applied). `bootstrap`/`security`: the controller's listener
    and how to log in (default: `--config`'s properties, else the follower's announcement)."""
    results: list[AdminResult] = []

    def done(result: AdminResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    changes = list(changes)

    def over_protocol() -> tuple[Endpoint | None, ControllerUnreachable | None, bool]:
        """(the listener, why it could not be reached, whether the changes went over it)."""
        announced = read_follower(opts.target.log_dir) if opts.target.log_dir else None
        endpoint = resolve_endpoint(
            bootstrap, security, default_properties(), announced.listeners if announced else ()
        )
        if endpoint is None:
            return None, None, False
        try:
            client = AdminClient(endpoint, timeout)
        except ControllerUnreachable as e:
            if not e.refused:  # a timeout, a TLS failure: something is there, never apply beside it
                raise ControllerUnreachable(
                    f"the controller's listener at {endpoint.describe()} ({endpoint.origin}) cannot be "
                    f"reached: {str(e).split(': ', 1)[-1]}; nothing was applied"
                ) from None
            return endpoint, e, False
        with client:
            for change in changes:
                done(protocol_result(change, client.send(change), endpoint))
        return endpoint, None, True

    waited = False
    while True:
        endpoint, unreachable, sent = over_protocol()
        if sent:
            return results
        with connected(opts) as zk:
            run = Run.start(zk, opts)
            log_binding.guard(run.client, run.facts, opts.target.log_dir)
            if run.state is not S.DUAL_WRITE_METADATA:
                raise refused_admin(run.facts, opts)
            require_own_log(run.facts)
            if writer_lock_held(Path(opts.target.log_dir)):
                if endpoint is None and not waited and await_announcement(opts.target.log_dir):
                    waited = True
                    continue  # it announced its listeners (or let the log go) meanwhile: again
                raise held_but_unreachable(opts.target.log_dir, endpoint, unreachable)
            node_id = run.node_id
            log = run.log = open_log(opts.target, run.facts.zk.cluster_id, node_id)
            try:
                facts = run.regather()
                if facts.derived.state is not S.DUAL_WRITE_METADATA:
                    raise refused_state(public(facts.derived.state))
                taken, migration = claim(zk, log, facts, node_id, covered(facts, log))
                s = syncer(run.client, log, taken, migration, facts)
                s.reconcile(run.replay())  # every new writer first repairs drift, as Kafka's does
                ctl = Controller(zk, log, s, taken.kraft_epoch, facts)
                why = (
                    "no controller is running"
                    if endpoint is None
                    else f"nothing listens at {endpoint.describe()}"
                )
                via = f"direct: {why}, so this command took the log lock, appended and synced"
                for change in changes:
                    done(admin_result(change, ctl.apply(change, "admin.appended"), via))
            finally:
                log.close()
            return results


#: How long `admin` waits for the running controller to announce its listeners: `migrate --follow`
#: announces them after its first sync, seconds after DualWriteMetadata (more at hundreds of
#: thousands of partitions); an admin command in that window must not fail for it.
ANNOUNCEMENT_WAIT_S = 30.0


def await_announcement(log_dir: str, timeout_s: float = ANNOUNCEMENT_WAIT_S) -> bool:
    """Whether the holder of the log's writer lock announced its listeners (or let the lock go)
    within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while read_follower(log_dir) is None and writer_lock_held(Path(log_dir)):
        if time.monotonic() >= deadline:
            return False
        stop.wait(0.1, "waiting for the controller to announce its listeners")
    return True


def held_but_unreachable(
    log_dir: str, endpoint: Endpoint | None, unreachable: ControllerUnreachable | None
) -> UnreachableError:
    """The log is taken and its holder cannot be reached: applying here would race it."""
    holder = read_holder(Path(log_dir) / LOCK_FILE)
    who = holder.describe() if holder is not None else "another process"
    if endpoint is None:
        how = (
            "it announces no listener and none was given: run it with --listen, or give "
            "--bootstrap-controller HOST:PORT or --config with its listeners"
        )
    else:
        how = f"its listener at {endpoint.describe()} ({endpoint.origin}) cannot be reached"
        if unreachable is not None:
            how += f": {str(unreachable).split(': ', 1)[-1]}"
    return UnreachableError(f"the log is held by {who} and {how}; nothing was applied")


def protocol_result(change: AdminChange, answer: Answer, endpoint: Endpoint) -> AdminResult:
    return AdminResult(
        change=change.describe(),
        summary=answer.summary,
        via=f"controller {endpoint.describe()} over Kafka's protocol ({answer.request})",
        path="protocol",
        topic_id=answer.topic_id,
    )


def refused_admin(facts: Facts, opts: DriverOptions) -> FindingsError:
    """Admin outside DualWriteMetadata; a controller in soft start (it holds the log before the copy)
    is named, since its brokers may already be talking to it."""
    state = facts.derived.state
    holder = writer_holder(opts.target.log_dir) if log_exists(opts.target.log_dir) else None
    if state in (S.MIGRATION_INELIGIBLE, S.MIGRATING_ZK_DATA) and holder is not None:
        return FindingsError(
            f"the KRaft controller ({holder}) is in soft start: brokers are registering and the copy is not "
            "committed yet, so it accepts no admin changes (KIP-866); make the change in ZooKeeper mode "
            "now, or wait for DualWriteMetadata"
        )
    return refused_state(public(state))


def admin_result(change: AdminChange, reply: AdminReply, via: str) -> AdminResult:
    if not reply.ok:
        error: ZkKraftError
        if reply.exit_code == FencedError.exit_code:
            error = FencedError(reply.message)
        elif reply.exit_code == UnreachableError.exit_code:
            error = UnreachableError(reply.message)
        elif reply.exit_code == FindingsError.exit_code:
            error = FindingsError(reply.message)
        else:
            error = BadInputError(reply.message)
        raise error
    return AdminResult(
        change=change.describe(),
        summary=reply.message,
        via=via,
        records=reply.records,
        first_offset=reply.first_offset,
        last_offset=reply.last_offset,
        migration_offset=reply.migration_offset,
        topic_id=reply.topic_id,
        noop=reply.records == 0,
        path="direct",
    )
