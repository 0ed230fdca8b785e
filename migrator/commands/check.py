"""`check`: the read-only pre-flight, or a started migration's health.

Eligibility findings (`migration.checks`, brokers' `server.properties`) from one bulk read of
ZooKeeper; once migrating has begun, the migration's health instead.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from kazoo.exceptions import AuthFailedError, KazooException
from kazoo.handlers.threading import KazooTimeoutError

from migrator.commands.target_arg import takes_target
from migrator.errors import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_UNREACHABLE,
    PermissionDeniedError,
    UnreachableError,
)
from migrator.migration import checks, log_binding, unsynced
from migrator.migration.advice import migration_health, not_this_log, wrong_log_health
from migrator.migration.broker_config import BrokerConfigFile, check_broker_configs
from migrator.migration.facts import LogFacts, derive, gather, gather_zk, log_exists
from migrator.migration.health import migration_started
from migrator.model import MigrationZnode
from migrator.results import CheckResult, CheckSummary, Finding, MigrationHealth, Severity
from migrator.target import Target
from migrator.zk.connection import ConnectSpec, close, parse_auth
from migrator.zk.layout import image_from_tree
from migrator.zk.reader import read_tree
from migrator.zk.tree import ZkTree


@takes_target(log_dir_positional=False)
def check(
    target: Target,
    broker_configs: Sequence[BrokerConfigFile] | None = None,
    jute_maxbuffer: int = checks.DEFAULT_JUTE_MAXBUFFER,
    preflight: bool = False,
) -> CheckResult:
    """Read-only pre-flight: exit code 0 eligible, 1 blockers, 3 ZooKeeper unreachable or refused.

    Once migrating has begun (the log holds a migration state, or a KRaft controller claims
    ZooKeeper) the migration's health is reported instead: 0 healthy, 1 not. `preflight` forces the
    eligibility findings anyway (a claim left by a lost controller).

    With the target's `log_dir` during dual-write, a record after /migration's offset that can never reach
    ZooKeeper is a blocker (LOG_RECORD_NEVER_SYNCED).

    Bad input (a malformed connect string, a missing chroot) raises BadInputError (exit 2).
    """
    spec = ConnectSpec.parse(target.zookeeper)
    log_dir = target.log_dir or None
    findings: list[Finding] = []
    summary = CheckSummary(
        eligible=False,
        verdict="",
        blockers=0,
        warnings=0,
        infos=0,
        zookeeper=str(spec),
        reachable=False,
        jute_maxbuffer=jute_maxbuffer,
        broker_config_files=None if broker_configs is None else len(broker_configs),
    )
    unreachable = False
    registered: list[int] | None = None
    unbound: list[Finding] = []  # shown first: nothing else said about this log matters then
    t0 = time.perf_counter()
    try:
        tree = _read_view(target)
    except PermissionDeniedError as e:
        unreachable = True
        findings.append(checks.finding(checks.ZK_AUTH_FAILED, str(e), paths=_paths_in(str(e))))
    except UnreachableError as e:
        unreachable = True
        info = checks.ZK_AUTH_FAILED if "AuthFailed" in str(e) else checks.ZK_UNREACHABLE
        findings.append(checks.finding(info, str(e)))
    else:
        summary.read_seconds = round(time.perf_counter() - t0, 3)
        t1 = time.perf_counter()
        layout = image_from_tree(tree, strict=False)
        image, control = layout.image, layout.control
        findings += checks.check_zk_view(image, control, tree, layout.problems, jute_maxbuffer)
        registered = sorted(checks.registered_broker_ids(image, tree))
        summary.reachable = True
        summary.zxid = tree.read_zxid if tree.consistent else (control.zxid or tree.max_zxid)
        summary.consistent = tree.consistent
        summary.cluster_id = image.cluster_id
        summary.brokers = len(registered)
        summary.topics = len(image.topics)
        summary.partitions = image.partition_count()
        summary.znodes = len(tree)
        summary.check_seconds = round(time.perf_counter() - t1, 3)
        if log_dir is not None:
            unbound, wrong_log = _binding_findings(target)
            if unbound and wrong_log is not None and not preflight:
                # A mistyped --log-dir during a migration: what ZooKeeper alone proves and where the
                # right log is, never the eligibility blockers (their fixes would fence the controller)
                return _health_result(summary, wrong_log, unbound)
        stuck: list[Finding] = []
        if log_dir is not None and control.migration is not None and log_exists(log_dir) and not unbound:
            stuck = _stuck_findings(target, control.migration)
        findings += stuck
        c = control.controller
        claimed = c is not None and (c.kraft_controller_epoch > 0 or not c.ephemeral)
        if not unbound and not preflight and (claimed or (log_dir is not None and log_exists(log_dir))):
            in_progress = _migration_health(target)
            if in_progress is not None:
                return _health_result(summary, in_progress, stuck)
    if broker_configs is None:
        findings.append(
            checks.finding(
                checks.BROKER_CONFIG_NOT_CHECKED, "broker server.properties not checked (no --broker-config)"
            )
        )
    else:
        findings += check_broker_configs(broker_configs, registered)
    findings = unbound + checks.sort_findings(findings)
    counts = {s: sum(1 for f in findings if f.severity == s) for s in Severity}
    summary.blockers = counts[Severity.BLOCKER]
    summary.warnings = counts[Severity.WARNING]
    summary.infos = counts[Severity.INFO]
    summary.eligible = not unreachable and summary.blockers == 0
    if unreachable:
        exit_code = EXIT_UNREACHABLE
        summary.verdict = f"cannot read ZooKeeper at {summary.zookeeper}: eligibility unknown"
    elif summary.blockers:
        exit_code = EXIT_FINDINGS
        summary.verdict = f"NOT eligible for migration: {_n(summary.blockers, 'blocker')}, {_n(summary.warnings, 'warning')}"
    else:
        exit_code = EXIT_OK
        summary.verdict = "eligible for migration" + (
            f" ({_n(summary.warnings, 'warning')} to review)" if summary.warnings else ""
        )
    return CheckResult(findings=findings, summary=summary, exit_code=exit_code)


def _migration_health(target: Target) -> MigrationHealth | None:
    """The migration's health when it has begun (None before): the eligibility checks no longer apply."""
    log_dir = target.log_dir or None
    client = target.connect()
    try:
        facts = (
            gather(client, log_dir)
            if log_dir is not None
            else derive(LogFacts(log_dir=""), gather_zk(client))
        )
    finally:
        close(client)
    if not migration_started(facts):
        return None
    return migration_health(facts, log_dir)


def _health_result(summary: CheckSummary, h: MigrationHealth, stuck: list[Finding]) -> CheckResult:
    """`check` during a migration: exit 0 when healthy, 1 with the problems otherwise."""
    h.problems += [f.message for f in stuck]
    summary.eligible = False
    summary.blockers = summary.warnings = summary.infos = 0
    if h.healthy:
        summary.verdict = f"migration in progress ({h.state}) and healthy; next: {h.next_action}"
    else:
        summary.verdict = (
            f"migration in progress ({h.state}) and NOT healthy: {_n(len(h.problems), 'problem')}"
        )
    return CheckResult(
        findings=stuck, summary=summary, exit_code=EXIT_OK if h.healthy else EXIT_FINDINGS, migration=h
    )


def _read_view(target: Target) -> ZkTree:
    """Kafka's znodes in one bulk read.

    Credentials are added after the session starts, one synchronous addAuth each, so a refused
    credential is an AuthFailedError here rather than a connection that vanishes mid-read (kazoo
    sends connect-time auth without waiting, and ZooKeeper closes the session on refusal).
    """
    # kazoo turns `sasl:user:password` into a SASL handshake only when given at construction.
    sasl = tuple(a for a in target.zk_auth if a.partition(":")[0] == "sasl")
    credentials = [(scheme, cred) for scheme, cred in parse_auth(target.zk_auth) if scheme != "sasl"]
    client = target.replace(zk_auth=sasl).connect()
    try:
        for scheme, credential in credentials:
            try:
                client.add_auth(scheme, credential)
            except AuthFailedError:
                raise PermissionDeniedError(
                    f"ZooKeeper at {ConnectSpec.parse(target.zookeeper)} refused the --zk-auth credential "
                    f"of scheme {scheme!r}"
                ) from None
            except (KazooException, KazooTimeoutError) as e:
                raise UnreachableError(
                    f"lost ZooKeeper at {ConnectSpec.parse(target.zookeeper)} while authenticating: {type(e).__name__}"
                ) from None
        return read_tree(client)
    finally:
        close(client)


def _n(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _paths_in(message: str) -> list[str]:
    """The znode path an access error names (`... access to /brokers/ids: ...`)."""
    words = [w.rstrip(":,.;") for w in message.split()]
    return [w for w in words if w.startswith("/")][:1]


def _binding_findings(target: Target) -> tuple[list[Finding], MigrationHealth | None]:
    """--log-dir is not the log ZooKeeper's claim is bound to (log_binding): the finding, and the
    migration's health as ZooKeeper alone shows it when a migration has begun."""
    client = target.connect()
    try:
        facts = gather(client, target.log_dir)
        found = log_binding.problem(client, facts, target.log_dir)
        wrong = None if found is None else not_this_log(client, facts, target.log_dir, found)
    finally:
        close(client)
    if wrong is None:
        return [], None
    finding = checks.finding(checks.LOG_NOT_BOUND, f"{wrong[0]}: {wrong[1]}")
    return [finding], wrong_log_health(facts, wrong)


def _stuck_findings(target: Target, migration: MigrationZnode) -> list[Finding]:
    client = target.connect()
    try:
        with target.open_log() as log:
            stuck = unsynced.find_stuck(client, log, migration)
    finally:
        close(client)
    if stuck is None:
        return []
    return [checks.finding(checks.LOG_RECORD_NEVER_SYNCED, str(stuck), paths=_paths_in(stuck.reason))]
