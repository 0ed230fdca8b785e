"""Pre-flight eligibility checks: single passes over the ZooKeeper view that find what would stall,
break or silently lose data in a KIP-866 migration, each as a finding with a stable code.

Every code is declared once in the registry below (severity, meaning, why it matters, fix hint);
docs/checks.md is compared with it by a test, so the documentation cannot drift from the code.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, Field

from migrator.model import ClusterImage, ZkControlState
from migrator.secrets import redact_text
from migrator.zk.tree import ZkTree

# ZooKeeper's default jute.maxbuffer (0xfffff): a Java client rejects a reply longer than this with
# "Packet len N is out of range!" (ClientCnxnSocket.readLength, ZooKeeper 3.5-3.9).
DEFAULT_JUTE_MAXBUFFER = 1_048_575
NEAR_LIMIT_FRACTION = 0.75
# Bytes a getData reply adds around the data: reply header (xid, zxid, err) + buffer length + Stat.
GET_DATA_OVERHEAD = 16 + 4 + 68
# metadata.version 3.4-IV0: the first level that can migrate; ZK-mode brokers of Kafka >= 3.3
# advertise the metadata.version range their software supports in /brokers/ids/<id>.
MIGRATION_MIN_METADATA_VERSION = 8
# /brokers/ids JSON version 5 is written from IBP 2.7 on; older registrations mean IBP < 2.7.
MIN_BROKER_JSON_VERSION = 5
EXAMPLES = 5  # examples named in a message
MAX_LISTED = 50  # paths / ids carried in a finding (the count carries the total)


class Severity(StrEnum):
    BLOCKER = "blocker"
    WARNING = "warning"
    INFO = "info"


SEVERITY_ORDER = {Severity.BLOCKER: 0, Severity.WARNING: 1, Severity.INFO: 2}


@dataclass(frozen=True)
class CodeInfo:
    """One finding code, as docs/checks.md documents it."""

    code: str
    severity: Severity
    meaning: str
    why: str
    hint: str
    group: str = "zookeeper"


_REGISTRY: dict[str, CodeInfo] = {}


def define(
    code: str, severity: Severity, meaning: str, why: str, hint: str, group: str = "zookeeper"
) -> CodeInfo:
    if code in _REGISTRY:
        raise ValueError(f"finding code {code} defined twice")
    info = CodeInfo(code, severity, meaning, why, hint, group)
    _REGISTRY[code] = info
    return info


def registry() -> dict[str, CodeInfo]:
    """Every code of every check module, in definition order."""
    from migrator.migration import broker_config  # noqa: F401 - registers the broker-config codes

    return dict(_REGISTRY)


class Finding(BaseModel):
    code: str
    severity: Severity
    message: str
    hint: str
    paths: list[str] = Field(default_factory=list)
    ids: list[int] = Field(default_factory=list)
    count: int = 1


def finding(
    info: CodeInfo,
    message: str,
    *,
    paths: Iterable[str] = (),
    ids: Iterable[int] = (),
    count: int | None = None,
    hint: str | None = None,
) -> Finding:
    path_list = list(paths)
    id_list = sorted(set(ids))
    return Finding(
        code=info.code,
        severity=info.severity,
        message=redact(message),
        hint=hint or info.hint,
        paths=path_list[:MAX_LISTED],
        ids=id_list[:MAX_LISTED],
        count=count if count is not None else max(1, len(path_list), len(id_list)),
    )


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (SEVERITY_ORDER[f.severity], f.code))


# invariant 6: a message never shows a secret (the one rule: migrator.secrets)
redact = redact_text


def examples(items: Sequence[str], total: int | None = None, limit: int = EXAMPLES) -> str:
    """`a, b, c and 12 more` for messages that name a few of many."""
    total = len(items) if total is None else total
    shown = ", ".join(items[:limit])
    return shown if total <= limit else f"{shown} and {total - limit} more"


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


# --- the registry: ZooKeeper-side codes ----------------------------------------------------------

ZK_UNREACHABLE = define(
    "ZK_UNREACHABLE",
    Severity.BLOCKER,
    "ZooKeeper could not be reached (no server answered, or the session could not be established).",
    "Nothing can be checked or migrated without reading ZooKeeper; the KRaft controllers will not reach it either.",
    "Check --zookeeper (HOST:PORT[,HOST:PORT][/chroot], as the brokers' zookeeper.connect), network and TLS settings.",
)
ZK_AUTH_FAILED = define(
    "ZK_AUTH_FAILED",
    Severity.BLOCKER,
    "ZooKeeper refused the session's credentials or denied reading a znode.",
    "The migration reads every Kafka znode; the KRaft driver treats NoAuth/AuthFailed as fatal "
    "(MigrationClientAuthException), so the controllers need the same access.",
    "Pass the credentials the brokers use (--zk-auth digest:user:password, or SASL via JAAS) and check the ACL of the named znode.",
)
NO_BROKERS = define(
    "NO_BROKERS",
    Severity.BLOCKER,
    "No broker is registered under /brokers/ids.",
    "Kafka's driver waits in WAIT_FOR_BROKERS until /brokers/ids is non-empty and every broker registered "
    "with KRaft; with no brokers the migration never starts.",
    "Start the brokers (in migration mode) before the migration; check that --zookeeper names the cluster's chroot.",
)
UNREGISTERED_REPLICA_BROKER = define(
    "UNREGISTERED_REPLICA_BROKER",
    Severity.BLOCKER,
    "A broker id appears in a replica assignment but has no live registration in /brokers/ids.",
    "Kafka's driver waits until every broker id found in any topic's assignment registers with KRaft "
    "(areZkBrokersReadyForMigration); a dead or decommissioned broker keeps it in WAIT_FOR_BROKERS forever.",
    "Start the named brokers, or reassign their replicas to live brokers (kafka-reassign-partitions) before migrating.",
)
OFFLINE_PARTITIONS = define(
    "OFFLINE_PARTITIONS",
    Severity.WARNING,
    "Partitions without a leader (leader -1) or with an empty ISR.",
    "They are migrated as they are and stay offline under KRaft; usually a symptom of dead brokers or unclean state.",
    "Bring the replicas' brokers back or repair the partitions (preferred/unclean leader election) before migrating.",
)
PARTITION_STATE_MISSING = define(
    "PARTITION_STATE_MISSING",
    Severity.WARNING,
    "A partition in a topic's assignment has no .../partitions/<p>/state znode.",
    "Kafka's migration then invents a state (ISR = replicas, leader = first replica, epochs 0) that may not match the brokers' logs.",
    "Let the ZooKeeper controller elect a leader for the partition (restart the controller broker) so it writes the state.",
)
TOPIC_WITHOUT_ID = define(
    "TOPIC_WITHOUT_ID",
    Severity.BLOCKER,
    "A topic znode has no topic_id (created before Kafka 2.8 and never upgraded).",
    "Kafka's migration fails on it (topicIdOpt.get in ZkTopicMigrationClient); KRaft identifies topics only by id.",
    "Run the ZooKeeper controller on IBP >= 2.8 (restart the controller broker after the IBP upgrade) so it assigns topic ids.",
)
PENDING_TOPIC_DELETIONS = define(
    "PENDING_TOPIC_DELETIONS",
    Severity.WARNING,
    "Topics are queued for deletion in /admin/delete_topics.",
    "They are not migrated; the first KRaft-to-ZooKeeper sync removes them from ZooKeeper and brokers keep their logs as strays.",
    "Let the deletions finish (all replicas' brokers online) or remove the entries before migrating.",
)
REASSIGNMENT_IN_PROGRESS = define(
    "REASSIGNMENT_IN_PROGRESS",
    Severity.WARNING,
    "Partition reassignments are in flight (/admin/reassign_partitions or adding/removing replicas).",
    "/admin/reassign_partitions is not migrated; only adding/removing replicas on topic znodes carry over, and reassignment "
    "across the controller switch is a known source of stray partitions (KAFKA-16120).",
    "Wait for reassignments to complete (kafka-reassign-partitions --verify) or cancel them before migrating.",
)
LEFTOVER_MIGRATION_ZNODE = define(
    "LEFTOVER_MIGRATION_ZNODE",
    Severity.BLOCKER,
    "/migration records an earlier migration (kraft_metadata_offset > 0).",
    "Kafka treats offset > 0 as 'initial copy done': a new attempt skips the ZooKeeper-to-KRaft copy and overwrites "
    "ZooKeeper from a stale or empty log (Strimzi #11262, KAFKA-17146).",
    "If an earlier attempt was rolled back, stop its KRaft controllers and delete /migration (and a KRaft-held /controller); "
    "if a migration is running, use `zk2kraft status` instead.",
)
MIGRATION_ZNODE_EMPTY = define(
    "MIGRATION_ZNODE_EMPTY",
    Severity.WARNING,
    "/migration exists but records no migrated offset (a migration-enabled controller started before).",
    "Harmless for the copy, but it shows KRaft controllers from an earlier attempt touched this cluster; they must be gone.",
    "Make sure no KRaft controller of an earlier attempt is running; delete /migration once they are deprovisioned.",
)
MIGRATION_ZNODE_IN_PROGRESS = define(
    "MIGRATION_ZNODE_IN_PROGRESS",
    Severity.INFO,
    "/migration and a KRaft-held /controller show a migration under way.",
    "check is a pre-flight for a fresh migration; the cluster is already past it.",
    "Use `zk2kraft status` to follow the running migration.",
)
CONTROLLER_HELD_BY_KRAFT = define(
    "CONTROLLER_HELD_BY_KRAFT",
    Severity.BLOCKER,
    "/controller is held by a KRaft controller (kraftControllerEpoch > 0 or a persistent znode).",
    "ZooKeeper-mode brokers cannot elect a controller while it exists, and a new KRaft quorum whose epoch is not above "
    "the recorded one is refused the claim (ControllerMovedException).",
    "If no migration is running (rolled back), stop the KRaft controllers and delete /controller; otherwise use `zk2kraft status`.",
)
ZK_EPOCH_NOT_ABOVE_KRAFT_EPOCH = define(
    "ZK_EPOCH_NOT_ABOVE_KRAFT_EPOCH",
    Severity.BLOCKER,
    "A KRaft controller epoch (in /controller or in partition states) is not below the ZooKeeper /controller_epoch.",
    "A ZooKeeper controller aborts leader elections for partition states written with a higher epoch, leaving them "
    "offline after a rollback (KAFKA-20488).",
    "Before ZooKeeper-mode controllers take over, set /controller_epoch above the KRaft epoch, as Kafka's 3.9 revert docs describe.",
)
CONTROLLER_EPOCH_MISSING = define(
    "CONTROLLER_EPOCH_MISSING",
    Severity.BLOCKER,
    "/controller_epoch is missing or not an integer.",
    "The KRaft controller claims ZooKeeper by bumping /controller_epoch; Kafka throws IllegalStateException without it.",
    "Start the ZooKeeper-mode brokers so a controller is elected and writes /controller_epoch.",
)
CLUSTER_ID_MISSING = define(
    "CLUSTER_ID_MISSING",
    Severity.WARNING,
    "/cluster/id is missing or unreadable.",
    "The KRaft controllers must be formatted with the ZooKeeper cluster's id; without it there is nothing to match.",
    "Start a broker once so it writes /cluster/id, or read the id from a broker's meta.properties.",
)
ZNODE_NEAR_MAXBUFFER = define(
    "ZNODE_NEAR_MAXBUFFER",
    Severity.WARNING,
    "A znode's data is above 75% of jute.maxbuffer.",
    "Growth (more partitions, configs, ACLs) soon makes it unreadable for Java ZooKeeper clients with the default limit.",
    "Split the data (fewer partitions per topic, fewer ACLs per resource) or raise -Djute.maxbuffer on ZooKeeper, brokers and controllers.",
)
ZNODE_OVER_MAXBUFFER = define(
    "ZNODE_OVER_MAXBUFFER",
    Severity.BLOCKER,
    "A znode's getData reply exceeds jute.maxbuffer.",
    "Kafka's brokers and KRaft controllers fail reading it with 'Packet len ... is out of range' unless their jute.maxbuffer is raised.",
    "Set -Djute.maxbuffer (KAFKA_OPTS) on every controller and broker above the size shown, and pass it as --jute-maxbuffer.",
)
CHILD_LIST_NEAR_MAXBUFFER = define(
    "CHILD_LIST_NEAR_MAXBUFFER",
    Severity.WARNING,
    "A znode's getChildren reply is above 75% of jute.maxbuffer.",
    "More children (topics, notifications) soon make the list unreadable for Java ZooKeeper clients with the default limit.",
    "Clean up stale children (notification znodes, deleted topics) or plan a higher -Djute.maxbuffer.",
)
CHILD_LIST_TOO_LARGE = define(
    "CHILD_LIST_TOO_LARGE",
    Severity.BLOCKER,
    "A znode's getChildren reply exceeds jute.maxbuffer.",
    "kazoo reads it, but Kafka's controllers and brokers (Java client) fail with 'Packet len ... is out of range' "
    "unless jute.maxbuffer is raised in their JVMs.",
    "Set -Djute.maxbuffer (KAFKA_OPTS) on every controller and broker above the size shown, and pass it as --jute-maxbuffer; "
    "or remove stale children.",
)
BROKER_REGISTRATION_TOO_OLD = define(
    "BROKER_REGISTRATION_TOO_OLD",
    Severity.BLOCKER,
    "A broker registration shows IBP < 2.7 (JSON version < 5) or software older than Kafka 3.4 "
    "(no metadata.version >= 8 in its features).",
    "The migration needs every broker on Kafka >= 3.4 with inter.broker.protocol.version >= 3.4.",
    "Upgrade the broker software and IBP (rolling restarts) before migrating; keep IBP fixed during the migration.",
)
METADATA_VERSION_MISMATCH = define(
    "METADATA_VERSION_MISMATCH",
    Severity.INFO,
    "Brokers advertise different highest metadata.version levels (mixed software versions).",
    "The controllers' metadata.version must be supported by every broker; it is capped by the oldest broker.",
    "Finish the software upgrade on every broker, then format the controllers with a metadata.version all brokers support.",
)
MALFORMED_ZNODE = define(
    "MALFORMED_ZNODE",
    Severity.BLOCKER,
    "A Kafka znode could not be decoded (bad JSON, wrong types, missing fields).",
    "What cannot be read cannot be migrated; Kafka's own driver fails or skips it.",
    "Fix or remove the named znode (zookeeper-shell get/set); compare with a healthy one of the same kind.",
)
UNKNOWN_ZNODE_VERSION = define(
    "UNKNOWN_ZNODE_VERSION",
    Severity.BLOCKER,
    "A znode carries a JSON version no Kafka 2.x-3.9 release wrote.",
    "zk2kraft cannot be sure it reads it correctly, so it refuses to guess.",
    "Check which tool wrote the znode; migrate from a cluster written by Kafka 2.x-3.9 only.",
)
LOG_RECORD_NEVER_SYNCED = define(
    "LOG_RECORD_NEVER_SYNCED",
    Severity.BLOCKER,
    "A record after /migration's offset in the metadata log (--log-dir) can never be written to ZooKeeper: a znode it changes does not fit one request.",
    "The write-behind lag can never drain: every controller, migrate, rollback and admin run stops on it, and finalize refuses on lag.",
    "Run `zk2kraft log truncate-unsynced --yes` (no controller running) to cut the log back to what ZooKeeper covers; then re-apply the change in smaller parts.",
)
LOG_NOT_BOUND = define(
    "LOG_NOT_BOUND",
    Severity.BLOCKER,
    "ZooKeeper's claim or committed copy belongs to another log directory than --log-dir (or another live writer holds it).",
    "Every writing command refuses this directory: acting on it would fence the real controller, copy the cluster again or lose acknowledged changes.",
    "Check --log-dir against the path named; a lost disk is taken over with `zk2kraft migrate --recopy` or `zk2kraft rollback --force-orphaned`.",
)
BROKER_CONFIG_NOT_CHECKED = define(
    "BROKER_CONFIG_NOT_CHECKED",
    Severity.INFO,
    "Broker configuration was not checked (no --broker-config).",
    "IBP >= 3.4, the migration flag and the controller quorum settings live only in the brokers' server.properties.",
    "Pass --broker-config DIR with one server.properties per broker.",
    group="broker-config",
)


class Problem(Protocol):
    path: str
    message: str


def check_zk_view(
    image: ClusterImage,
    control: ZkControlState,
    tree: ZkTree,
    problems: Iterable[Problem] = (),
    jute_maxbuffer: int = DEFAULT_JUTE_MAXBUFFER,
) -> list[Finding]:
    """Every ZooKeeper-side check; each a single pass, so 200k partitions cost a few hundred ms."""
    problems = list(problems)
    bad = {p.path for p in problems}
    registered = registered_broker_ids(image, tree)
    out: list[Finding] = []
    out += check_problems(problems)
    out += check_brokers(image, registered)
    out += check_assignments(image, registered, bad)
    out += check_topics(image)
    out += check_control(control, image, bad)
    out += check_sizes(tree, jute_maxbuffer)
    if image.cluster_id is None and "/cluster/id" not in bad:
        out.append(finding(CLUSTER_ID_MISSING, "/cluster/id is missing", paths=["/cluster/id"]))
    return out


def registered_broker_ids(image: ClusterImage, tree: ZkTree) -> set[int]:
    """Ids with a registration under /brokers/ids, readable or not: a malformed registration is its
    own finding (MALFORMED_ZNODE), not a missing broker."""
    ids = set(image.brokers)
    for name in tree.child_names("/brokers/ids"):
        try:
            ids.add(int(name))
        except ValueError:
            continue
    return ids


def check_problems(problems: Iterable[Problem]) -> list[Finding]:
    """One finding per malformed znode, naming its path: the operator fixes them one by one."""
    out = []
    for p in problems:
        info = UNKNOWN_ZNODE_VERSION if _is_version_problem(p.message) else MALFORMED_ZNODE
        out.append(finding(info, f"{p.path}: {p.message}", paths=[p.path]))
    return out


_VERSION_RE = re.compile(
    r"\b(unknown|unsupported|future)\b.*\bversion\b|\bversion\b.*\b(unknown|unsupported)\b", re.I
)


def _is_version_problem(message: str) -> bool:
    return bool(_VERSION_RE.search(message))


def check_brokers(image: ClusterImage, registered: set[int] | None = None) -> list[Finding]:
    out = []
    if not image.brokers and not registered:
        out.append(
            finding(NO_BROKERS, "no broker is registered under /brokers/ids", paths=["/brokers/ids"], count=0)
        )
        return out
    too_old: list[str] = []
    old_ids: list[int] = []
    levels: dict[int, list[int]] = defaultdict(list)
    for bid in sorted(image.brokers):
        b = image.brokers[bid]
        mv = b.features.get("metadata.version")
        if b.json_version < MIN_BROKER_JSON_VERSION:
            too_old.append(f"broker {bid} registers JSON v{b.json_version} (IBP < 2.7)")
            old_ids.append(bid)
        elif mv is None or mv.max_version < MIGRATION_MIN_METADATA_VERSION:
            what = "no metadata.version feature" if mv is None else f"metadata.version up to {mv.max_version}"
            too_old.append(f"broker {bid} advertises {what} (Kafka < 3.4)")
            old_ids.append(bid)
        else:
            levels[mv.max_version].append(bid)
    if too_old:
        out.append(
            finding(
                BROKER_REGISTRATION_TOO_OLD,
                f"{_plural(len(old_ids), 'broker')} cannot migrate: {examples(too_old)}",
                ids=old_ids,
                paths=[f"/brokers/ids/{i}" for i in old_ids],
            )
        )
    if len(levels) > 1:
        parts = [f"{lvl} on brokers {', '.join(map(str, ids))}" for lvl, ids in sorted(levels.items())]
        out.append(
            finding(
                METADATA_VERSION_MISMATCH,
                f"highest metadata.version differs between brokers: {'; '.join(parts)}; "
                f"format the controllers at metadata.version <= {min(levels)}",
                ids=[i for ids in levels.values() for i in ids],
            )
        )
    return out


def check_assignments(
    image: ClusterImage,
    registered: set[int] | None = None,
    bad_paths: set[str] | frozenset[str] = frozenset(),
) -> list[Finding]:
    """Replicas on unregistered brokers, offline partitions, missing states, in-flight reassignments."""
    live = set(image.brokers) if registered is None else registered
    missing: dict[int, list[str]] = defaultdict(list)
    missing_counts: dict[int, int] = defaultdict(int)
    offline: list[str] = []
    offline_count = 0
    no_state: list[str] = []
    no_state_count = 0
    moving: list[str] = []
    moving_count = 0
    for name, topic in image.topics.items():
        for pid, p in topic.partitions.items():
            tp = f"{name}-{pid}"
            for r in p.replicas:
                if r not in live:
                    missing_counts[r] += 1
                    if len(missing[r]) < 3:
                        missing[r].append(tp)
            if not p.has_state:
                spath = f"/brokers/topics/{name}/partitions/{pid}/state"
                if spath not in bad_paths:  # a malformed state is reported as such
                    no_state_count += 1
                    if len(no_state) < MAX_LISTED:
                        no_state.append(spath)
            elif p.leader < 0 or not p.isr:
                offline_count += 1
                if len(offline) < MAX_LISTED:
                    offline.append(tp)
            if p.adding_replicas or p.removing_replicas:
                moving_count += 1
                if len(moving) < MAX_LISTED:
                    moving.append(tp)
    out = []
    if missing:
        # Brokers with no registration at all, most affected first: the operator's to-do list.
        order = sorted(missing, key=lambda b: (-missing_counts[b], b))
        parts = [
            f"broker {b} ({_plural(missing_counts[b], 'partition')}, e.g. {', '.join(missing[b])})"
            for b in order
        ]
        total = sum(missing_counts.values())
        out.append(
            finding(
                UNREGISTERED_REPLICA_BROKER,
                f"{_plural(len(order), 'broker id')} in replica assignments {'has' if len(order) == 1 else 'have'} "
                f"no registration in /brokers/ids: {examples(parts, limit=10)}; Kafka's driver would wait in "
                f"WAIT_FOR_BROKERS forever",
                ids=order,
                paths=list(
                    dict.fromkeys(
                        f"/brokers/topics/{tp.rsplit('-', 1)[0]}" for b in order for tp in missing[b]
                    )
                ),
                count=total,
            )
        )
    if offline_count:
        out.append(
            finding(
                OFFLINE_PARTITIONS,
                f"{_plural(offline_count, 'partition')} offline (leader -1 or empty ISR): {examples(offline, offline_count)}",
                paths=[_state_path(tp) for tp in offline],
                count=offline_count,
            )
        )
    if no_state_count:
        out.append(
            finding(
                PARTITION_STATE_MISSING,
                f"{_plural(no_state_count, 'partition')} without a state znode: {examples(no_state, no_state_count)}",
                paths=no_state,
                count=no_state_count,
            )
        )
    reassign = image.reassignments
    if moving_count or reassign:
        parts = []
        if reassign:
            tps = [f"{r.topic}-{r.partition}" for r in reassign]
            parts.append(
                f"/admin/reassign_partitions lists {_plural(len(tps), 'partition')} ({examples(tps)})"
            )
        if moving_count:
            parts.append(
                f"{_plural(moving_count, 'partition')} with adding/removing replicas ({examples(moving, moving_count)})"
            )
        paths = (["/admin/reassign_partitions"] if reassign else []) + [
            f"/brokers/topics/{tp.rsplit('-', 1)[0]}" for tp in moving
        ]
        out.append(
            finding(
                REASSIGNMENT_IN_PROGRESS,
                "reassignments in flight: " + "; ".join(parts),
                paths=list(dict.fromkeys(paths)),
                count=max(moving_count, len(reassign)),
            )
        )
    return out


def _state_path(tp: str) -> str:
    name, _, pid = tp.rpartition("-")
    return f"/brokers/topics/{name}/partitions/{pid}/state"


def check_topics(image: ClusterImage) -> list[Finding]:
    out = []
    pending = set(image.pending_deletions)
    no_id = sorted(n for n, t in image.topics.items() if t.topic_id is None and n not in pending)
    if no_id:
        out.append(
            finding(
                TOPIC_WITHOUT_ID,
                f"{_plural(len(no_id), 'topic')} without topic_id: {examples(no_id)}",
                paths=[f"/brokers/topics/{n}" for n in no_id],
                count=len(no_id),
            )
        )
    if pending:
        names = sorted(pending)
        out.append(
            finding(
                PENDING_TOPIC_DELETIONS,
                f"{_plural(len(names), 'topic')} pending deletion will not be migrated: {examples(names)}",
                paths=[f"/admin/delete_topics/{n}" for n in names],
                count=len(names),
            )
        )
    return out


def check_control(
    control: ZkControlState, image: ClusterImage, bad_paths: set[str] | frozenset[str] = frozenset()
) -> list[Finding]:
    """/migration, /controller and /controller_epoch: the facts a new attempt would trip over."""
    out = []
    ctrl = control.controller
    kraft_held = ctrl is not None and (ctrl.kraft_controller_epoch > 0 or not ctrl.ephemeral)
    mig = control.migration
    if mig is not None:
        state = (
            f"kraft_controller_id {mig.kraft_controller_id}, kraft_controller_epoch {mig.kraft_controller_epoch}, "
            f"kraft_metadata_offset {mig.kraft_metadata_offset}, kraft_metadata_epoch {mig.kraft_metadata_epoch}"
        )
        if mig.kraft_metadata_offset > 0:
            out.append(
                finding(
                    LEFTOVER_MIGRATION_ZNODE,
                    f"/migration records an earlier migration ({state}); a new attempt would skip the copy "
                    f"and overwrite ZooKeeper from that log",
                    paths=["/migration"],
                )
            )
            if kraft_held:
                out.append(
                    finding(
                        MIGRATION_ZNODE_IN_PROGRESS,
                        f"a KRaft controller holds /controller and /migration is at offset {mig.kraft_metadata_offset}",
                        paths=["/migration", "/controller"],
                    )
                )
        else:
            out.append(
                finding(
                    MIGRATION_ZNODE_EMPTY,
                    f"/migration exists with no migrated offset ({state})",
                    paths=["/migration"],
                )
            )
    if kraft_held and ctrl is not None:
        how = "persistent" if not ctrl.ephemeral else "ephemeral"
        out.append(
            finding(
                CONTROLLER_HELD_BY_KRAFT,
                f"/controller names KRaft controller {ctrl.broker_id} with kraftControllerEpoch "
                f"{ctrl.kraft_controller_epoch} ({how} znode)",
                paths=["/controller"],
                ids=[ctrl.broker_id],
            )
        )
    zk_epoch = control.controller_epoch
    if zk_epoch is None:
        if (image.brokers or ctrl is not None) and "/controller_epoch" not in bad_paths:
            out.append(
                finding(
                    CONTROLLER_EPOCH_MISSING,
                    "/controller_epoch is missing or not an integer",
                    paths=["/controller_epoch"],
                )
            )
        return out
    # KAFKA-20488: partition states written by a KRaft controller carry its epoch; a ZooKeeper controller
    # whose epoch is not above it aborts leader elections for them.
    kraft_epoch = ctrl.kraft_controller_epoch if ctrl is not None and ctrl.kraft_controller_epoch > 0 else -1
    stale: list[str] = []
    stale_count = 0
    max_state_epoch = -1
    for name, topic in image.topics.items():
        for pid, p in topic.partitions.items():
            ce = p.controller_epoch
            if ce is not None and ce > zk_epoch:
                stale_count += 1
                max_state_epoch = max(max_state_epoch, ce)
                if len(stale) < MAX_LISTED:
                    stale.append(f"{name}-{pid}")
    if (kraft_epoch >= 0 and kraft_epoch >= zk_epoch) or stale_count:
        parts = []
        if kraft_epoch >= zk_epoch:
            parts.append(f"/controller records kraftControllerEpoch {kraft_epoch}")
        if stale_count:
            parts.append(
                f"{_plural(stale_count, 'partition state')} carry controller_epoch up to {max_state_epoch} "
                f"({examples(stale, stale_count)})"
            )
        top = max(kraft_epoch, max_state_epoch)
        out.append(
            finding(
                ZK_EPOCH_NOT_ABOVE_KRAFT_EPOCH,
                f"/controller_epoch is {zk_epoch} but {' and '.join(parts)}; a ZooKeeper controller would leave "
                f"those partitions offline",
                paths=["/controller_epoch"]
                + (["/controller"] if kraft_epoch >= zk_epoch else [])
                + [_state_path(tp) for tp in stale],
                count=max(1, stale_count),
                hint=f"Before ZooKeeper-mode controllers take over, set /controller_epoch to at least {top + 1} "
                f"(zookeeper-shell: set /controller_epoch {top + 1}) while no controller is active (KAFKA-20488).",
            )
        )
    return out


def check_sizes(tree: ZkTree, jute_maxbuffer: int = DEFAULT_JUTE_MAXBUFFER) -> list[Finding]:
    """Replies a Java ZooKeeper client (Kafka) could not read with the given jute.maxbuffer."""
    near_at = NEAR_LIMIT_FRACTION * jute_maxbuffer
    big: list[tuple[int, str]] = []
    near: list[tuple[int, str]] = []
    for path, node in tree.nodes.items():
        size = node.data_length
        if size + GET_DATA_OVERHEAD > jute_maxbuffer:
            big.append((size, path))
        elif size > near_at:
            near.append((size, path))
    lists_big: list[tuple[int, str]] = []
    lists_near: list[tuple[int, str]] = []
    for path, size in tree.children_reply_bytes.items():
        if size > jute_maxbuffer:
            lists_big.append((size, path))
        elif size > near_at:
            lists_near.append((size, path))
    out = []
    limit = f"jute.maxbuffer {jute_maxbuffer:,} bytes"
    for info, items, what in (
        (ZNODE_OVER_MAXBUFFER, big, "data of {p} is {s:,} bytes; its getData reply exceeds " + limit),
        (ZNODE_NEAR_MAXBUFFER, near, "data of {p} is {s:,} bytes, {pct}% of " + limit),
        (
            CHILD_LIST_TOO_LARGE,
            lists_big,
            "getChildren({p}) reply is {s:,} bytes ({n:,} children), over " + limit,
        ),
        (
            CHILD_LIST_NEAR_MAXBUFFER,
            lists_near,
            "getChildren({p}) reply is {s:,} bytes ({n:,} children), {pct}% of " + limit,
        ),
    ):
        for size, path in sorted(items, reverse=True):
            n = len(tree.children.get(path, ()))
            pct = int(100 * size / jute_maxbuffer)
            out.append(finding(info, what.format(p=path, s=size, n=n, pct=pct), paths=[path]))
    return out


_DOC_HEADER = """# `zk2kraft check`: finding codes

<!-- Generated from migrator/migration/checks.py and broker_config.py by
     `.venv/bin/python -m migrator.migration.checks > docs/checks.md`; tests/test_check.py fails when it is stale. -->

`zk2kraft check` reads ZooKeeper once (read-only) and reports findings. Each has a stable code, a severity,
a message with the affected paths or ids, and a fix hint.

- **blocker**: the migration would fail, stall or lose data; `check` exits 1.
- **warning**: the migration can run, but review it first; `check` still exits 0.
- **info**: context for the operator; never changes the exit code.

Exit codes: 0 eligible (no blockers), 1 blockers, 2 bad input (a malformed `--zookeeper`, a missing chroot,
an unreadable `--broker-config`), 3 ZooKeeper unreachable or access refused (also reported as a finding in
`--json`). `--json` prints `{"findings": [...], "summary": {...}, "exit_code": N}`; the summary carries the
zxid the view was read at. Secrets (SCRAM keys, token HMACs, password configs) never appear in any output.

Once a migration has begun (the `--log-dir` log holds PRE_MIGRATION or later, or a KRaft controller
claims `/controller`), `check` reports the migration's health instead of these findings: state,
write-behind lag, the log's writer (alive, or gone without releasing the log) and the brokers, with
the next action; it exits 0 when healthy and 1 when not (`"migration"` in `--json`). It never suggests
an action against the running controller. `--preflight` shows the findings anyway, for a claim left by
a lost controller: their fixes (`set /controller_epoch`) fence a running one.
"""

_GROUP_TITLES = {
    "zookeeper": "## ZooKeeper view",
    "broker-config": "## Broker configuration (`--broker-config DIR`)",
}


def docs_markdown() -> str:
    """docs/checks.md, generated from the registry so the documentation is the code's."""
    lines = [_DOC_HEADER]
    reg = registry()
    for group, title in _GROUP_TITLES.items():
        lines.append(title + "\n")
        lines.append("| code | severity | meaning | why it matters | fix |")
        lines.append("|---|---|---|---|---|")
        for info in reg.values():
            if info.group == group:
                cells = [f"`{info.code}`", info.severity.value, info.meaning, info.why, info.hint]
                lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    # Run as a script this file is `__main__`; the registry the check modules fill is the imported one.
    from migrator.migration import checks as _registered

    print(_registered.docs_markdown(), end="")
