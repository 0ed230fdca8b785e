"""zk2kraft beside Kafka's own migrating KRaft controller: reading its migration, and its manual rollback.

Kafka 3.9's controller (zookeeper.metadata.migration.enable) can run the whole migration itself; an
operator still wants zk2kraft's check, status, audit and a guarded rollback around it. Everything here
reads Kafka's directory read-only and never takes its `.lock` (F_GETLK only asks who holds it): Kafka
owns the directory, zk2kraft only looks.

A metadata log directory is Kafka's when it is formatted (meta.properties and `__cluster_metadata-0`)
and zk2kraft never wrote it (no `zk2kraft.lock`: every zk2kraft writer leaves one).

The rollback is the one Kafka's docs give as hand steps ("Reverting to ZooKeeper mode During the
Migration"): deprovision the KRaft controllers, then delete `/controller` and `/migration` so a
ZooKeeper-mode broker is elected controller, then roll the brokers without the migration settings.
zk2kraft does the ZooKeeper step in one fenced multi (leadership.release_controller: it also lifts
`/controller_epoch` above every epoch Kafka's dual-write put into the partition state znodes,
KAFKA-20488) and refuses whenever the docs say rollback is no longer possible or not yet safe.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from pathlib import Path

from migrator.errors import BadInputError, FencedError, FindingsError
from migrator.kraft.lock import LOCK_FILE, kafka_lock_holder
from migrator.migration.facts import Facts, gather, log_exists
from migrator.migration.steps.run import DriverOptions, S, connected, public
from migrator.results import KafkaControllerInfo, RollbackResult, StatusResult
from migrator.zk import paths as P
from migrator.zk.migration_client import read_migration
from state_machine import KafkaMigrationCode as ZkMigrationState

#: Kafka's ZkMigrationState codes as the public states (DESIGN.md's mapping)
_PUBLIC = {
    ZkMigrationState.PRE_MIGRATION: S.MIGRATING_ZK_DATA,
    ZkMigrationState.MIGRATION: S.DUAL_WRITE_METADATA,
    ZkMigrationState.POST_MIGRATION: S.MIGRATION_FINALIZED,
}
#: the broker settings Kafka's docs have the operator remove when rolling back (and node.id → broker.id)
BROKER_SETTINGS = "zookeeper.metadata.migration.enable, controller.listener.names, controller.quorum.voters"
#: seconds /migration must stay unchanged before the rollback believes no controller writes it: a
#: dual-writing Kafka controller rewrites it at least every metadata.max.idle.interval.ms (500 ms,
#: its NoOpRecord) and a ZooKeeper session of a stopped one outlives it by nothing
DEFAULT_QUIET_SECONDS = 3.0


def is_kafka_log(log_dir: str | Path) -> bool:
    """A formatted metadata log directory zk2kraft never wrote (its own writers leave zk2kraft.lock)."""
    return log_exists(log_dir) and not (Path(log_dir) / LOCK_FILE).exists()


def require_kafka_migration(facts: Facts, log_dir: str | Path) -> None:
    """Refuse (one line, exit 2) a Kafka directory and a ZooKeeper that are not one migration: ZooKeeper
    without a Kafka cluster, a log of another cluster id, a log Kafka created in KRaft mode."""
    if facts.zk.cluster_id is None:
        raise BadInputError(
            "ZooKeeper holds no Kafka cluster (no /cluster/id): check --zookeeper and its chroot, it is "
            f"not the ZooKeeper of the migration in {log_dir}"
        )
    if facts.log.foreign_cluster is not None:
        raise BadInputError(
            f"{log_dir} belongs to cluster {facts.log.foreign_cluster}, but ZooKeeper holds cluster "
            f"{facts.zk.cluster_id}: not this cluster's migration"
        )
    if facts.log.migration_code in (None, ZkMigrationState.NONE):
        raise BadInputError(
            f"{log_dir} holds no ZooKeeper migration (Kafka's controller created it in KRaft mode, or "
            "without zookeeper.metadata.migration.enable): nothing of ZooKeeper is migrated there"
        )


def controller_info(facts: Facts, log_dir: str | Path) -> KafkaControllerInfo:
    """Kafka's controller as its directory and ZooKeeper show it (read-only)."""
    lf = facts.log
    image = lf.replay.image if lf.replay is not None else None
    zk_ids = facts.zk.registered_brokers
    migrating = sorted(b.id for b in image.brokers.values() if b.is_migrating_zk_broker) if image else []
    kraft_mode = sorted(b.id for b in image.brokers.values() if not b.is_migrating_zk_broker) if image else []
    c = facts.zk.controller
    return KafkaControllerInfo(
        node_id=lf.node_id,
        pid=kafka_lock_holder(Path(log_dir)),
        holds_zookeeper=bool(c is not None and facts.zk.kraft_holds_controller and c.broker_id == lf.node_id),
        migrating_zk_brokers=migrating,
        kraft_brokers=kraft_mode,
        waiting_for=sorted(set(zk_ids) - set(migrating)),
    )


def companion_status(result: StatusResult, facts: Facts, log_dir: str | Path) -> StatusResult:
    """`status` of a migration Kafka's controller runs: its state, what it waits for, Kafka's next step.

    zk2kraft's own advice (`zk2kraft migrate`, `finalize`, a stale /migration) does not apply: Kafka's
    controller created /migration and drives every step."""
    require_kafka_migration(facts, log_dir)
    info = controller_info(facts, log_dir)
    code = facts.log.migration_code
    who = f"Kafka's KRaft controller {info.node_id}" + (f" (pid {info.pid})" if info.pid else "")
    notes: list[str] = []
    if info.pid is None:
        notes.append(
            f"no process on this host holds {Path(log_dir) / '.lock'}: Kafka's controller is stopped here "
            "(or runs on another host)"
        )
    if code == ZkMigrationState.PRE_MIGRATION:
        missing = ", ".join(map(str, info.waiting_for)) or "none"
        reason = f"{who} waits for every ZooKeeper broker to register as migrating (missing: {missing})"
        action = (
            f"restart the brokers still missing ({missing}) with zookeeper.metadata.migration.enable=true, "
            "controller.quorum.voters and controller.listener.names; Kafka's controller copies once all "
            "have registered"
        )
    elif code == ZkMigrationState.MIGRATION:
        reason = f"{who} committed the copy and writes ZooKeeper behind its log (dual-write)"
        action = (
            "roll the brokers to KRaft mode, then restart Kafka's controllers without "
            "zookeeper.metadata.migration.enable to finalize; to go back instead, stop Kafka's "
            "controllers and run `zk2kraft rollback --kafka-controller`"
        )
        if info.kraft_brokers:
            notes.append(
                "brokers in KRaft mode: "
                + ", ".join(map(str, info.kraft_brokers))
                + " (a rollback first needs them back in migration mode)"
            )
    else:  # POST_MIGRATION (require_kafka_migration refused NONE)
        reason = f"{who} finalized the migration: ZooKeeper is no longer written"
        action = "nothing left to migrate: decommission ZooKeeper once every broker runs in KRaft mode"
    state = _PUBLIC[ZkMigrationState(code)]
    kept = [result.log_binding] if result.log_binding else []
    return result.model_copy(
        update={
            "state": public(state),
            "state_code": int(state),
            "reason": reason,
            "next_action": action,
            "anomalies": kept + notes,
            "writer": who if info.pid else None,
            "kafka_controller": info,
        }
    )


# --- rollback ------------------------------------------------------------------------------------


def parse_quorum(text: str) -> list[tuple[str, int]]:
    """`controller.quorum.voters` (`id@host:port,...`) or `host:port,...` as addresses."""
    out = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        address = item.split("@", 1)[-1]
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise BadInputError(f"--quorum: {item!r} is not HOST:PORT or ID@HOST:PORT")
        out.append((host.strip("[]"), int(port)))
    return out


def _answers(address: tuple[str, int], timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection(address, timeout=timeout):
            return True
    except OSError:
        return False


def _migration_moves(opts: DriverOptions, quiet_s: float) -> bool:
    """Whether /migration changes within `quiet_s` seconds: a controller still dual-writing."""
    with connected(opts) as zk:
        first = read_migration(zk.zk)
        deadline = time.monotonic() + quiet_s
        while time.monotonic() < deadline:
            time.sleep(min(0.25, quiet_s))
            now = read_migration(zk.zk)
            if (first and first.zk_version) != (now and now.zk_version):
                return True
    return False


def kafka_rollback(
    opts: DriverOptions,
    *,
    yes: bool = False,
    quorum: Sequence[tuple[str, int]] = (),
    quiet_s: float = DEFAULT_QUIET_SECONDS,
) -> RollbackResult:
    """Kafka's documented rollback of a migration its own controller ran, with guards, step by step.

    Refuses (each in one line): a directory that is not Kafka's metadata log of this cluster (2); a
    Kafka controller still alive: its `.lock` held here, a `quorum` voter answering, or /migration
    still moving (4); Kafka's finalization (POST_MIGRATION) or brokers already in KRaft mode (1);
    no `yes` (1). Never writes Kafka's directory.
    """
    log_dir = Path(opts.target.log_dir)
    if not log_exists(log_dir):
        raise BadInputError(
            f"{log_dir} is not a KRaft metadata log directory (no meta.properties and "
            "__cluster_metadata-0): --log-dir must name Kafka's controller's metadata.log.dir"
        )
    if (log_dir / LOCK_FILE).exists():
        raise BadInputError(
            f"{log_dir} was written by zk2kraft, not by Kafka's controller: run `zk2kraft rollback` "
            "without --kafka-controller"
        )
    with connected(opts) as zk:
        facts = gather(zk.zk, log_dir)
    require_kafka_migration(facts, log_dir)
    code = facts.log.migration_code
    if code == ZkMigrationState.POST_MIGRATION:
        raise FindingsError(
            f"Kafka's controller finalized the migration at offset {facts.log.migration_offset} "
            "(POST_MIGRATION): ZooKeeper has not been written since, so there is nothing to roll back to"
        )
    info = controller_info(facts, log_dir)
    if info.pid is not None:
        raise FencedError(
            f"Kafka's controller {info.node_id} still runs here (pid {info.pid} holds {log_dir / '.lock'}): "
            "stop every KRaft controller first (the docs' first step: deprovision the quorum)"
        )
    alive = [f"{h}:{p}" for h, p in quorum if _answers((h, p))]
    if alive:
        raise FencedError(
            f"a KRaft controller still answers at {', '.join(alive)}: stop every controller of the quorum first"
        )
    if info.kraft_brokers:
        raise FindingsError(
            "brokers "
            + ", ".join(map(str, info.kraft_brokers))
            + " registered in KRaft mode: roll them back to ZooKeeper migration mode first (Kafka's docs)"
        )
    if _migration_moves(opts, quiet_s):
        raise FencedError(
            f"{P.MIGRATION} changed within {quiet_s:g}s: a KRaft controller is still dual-writing "
            "(one on another host?); stop every controller of the quorum first"
        )
    if not yes:
        raise FindingsError("rollback needs --yes (it deletes /controller and /migration)")
    result = RollbackResult(
        state_before=public(_PUBLIC.get(code, S.MIGRATION_INELIGIBLE)),
        state_after=public(S.MIGRATION_INELIGIBLE),
        kraft_epoch=-1,
        zk_controller_epoch=-1,
    )
    say = result.actions.append
    say(
        f"checked: no Kafka controller holds {log_dir / '.lock'}"
        + (f", none of {len(quorum)} quorum voters answers" if quorum else "")
        + f", {P.MIGRATION} unchanged for {quiet_s:g}s, state {ZkMigrationState(code).name}, "
        f"no broker in KRaft mode"
    )
    with connected(opts) as zk:
        m = read_migration(zk.zk)
        if m is not None:
            say(
                f"{P.MIGRATION} was: offset {m.kraft_metadata_offset} (epoch {m.kraft_metadata_epoch}), "
                f"controller {m.kraft_controller_id} epoch {m.kraft_controller_epoch}, version {m.zk_version}"
            )
        claim = zk.read_claim()
        if claim is not None:
            result.kraft_epoch = claim.kraft_epoch
            result.zk_controller_epoch = zk.release(claim, bump_above=-1)
            say(
                f"deleted {P.CONTROLLER} (KRaft controller {claim.kraft_controller_id}, epoch "
                f"{claim.kraft_epoch}) and {P.MIGRATION}, {P.CONTROLLER_EPOCH} lifted to "
                f"{result.zk_controller_epoch} in one multi: a ZooKeeper-mode broker is elected controller"
            )
        elif m is not None:
            zk.delete_migration(m.zk_version)
            say(
                f"deleted {P.MIGRATION}; {P.CONTROLLER} was never claimed by Kafka's controller "
                "(the ZooKeeper-mode controller stays)"
            )
    say(
        f"next, on each broker: remove {BROKER_SETTINGS} (node.id becomes broker.id again) and roll "
        f"them; then deprovision the KRaft controllers (their directory {log_dir} is left as it was)"
    )
    return result
