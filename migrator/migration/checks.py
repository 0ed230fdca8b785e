"""Pre-flight eligibility checks: single passes over the ZooKeeper view that find what would stall,
break or silently lose data in a KIP-866 migration, each as a finding with a stable code.

The codes are declared in `check_codes` (and `broker_config`), findings are built by `findings`;
both are re-exported here, so `checks.X` names every part of the checks.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Protocol

from migrator.migration.check_codes import (
    BROKER_CONFIG_NOT_CHECKED,
    BROKER_REGISTRATION_TOO_OLD,
    CHILD_LIST_NEAR_MAXBUFFER,
    CHILD_LIST_TOO_LARGE,
    CLUSTER_ID_MISSING,
    CONTROLLER_EPOCH_MISSING,
    CONTROLLER_HELD_BY_KRAFT,
    DEFAULT_JUTE_MAXBUFFER,
    GET_DATA_OVERHEAD,
    LEFTOVER_MIGRATION_ZNODE,
    LOG_NOT_BOUND,
    LOG_RECORD_NEVER_SYNCED,
    MALFORMED_ZNODE,
    METADATA_VERSION_MISMATCH,
    MIGRATION_MIN_METADATA_VERSION,
    MIGRATION_ZNODE_EMPTY,
    MIGRATION_ZNODE_IN_PROGRESS,
    MIN_BROKER_JSON_VERSION,
    NEAR_LIMIT_FRACTION,
    NO_BROKERS,
    OFFLINE_PARTITIONS,
    PARTITION_STATE_MISSING,
    PENDING_TOPIC_DELETIONS,
    REASSIGNMENT_IN_PROGRESS,
    TOPIC_WITHOUT_ID,
    UNKNOWN_ZNODE_VERSION,
    UNREGISTERED_REPLICA_BROKER,
    ZK_AUTH_FAILED,
    ZK_EPOCH_NOT_ABOVE_KRAFT_EPOCH,
    ZK_UNREACHABLE,
    ZNODE_NEAR_MAXBUFFER,
    ZNODE_OVER_MAXBUFFER,
    docs_markdown,
)
from migrator.migration.findings import (
    EXAMPLES,
    MAX_LISTED,
    SEVERITY_ORDER,
    CodeInfo,
    define,
    examples,
    finding,
    plural,
    redact,
    registry,
    sort_findings,
)
from migrator.model import ClusterImage, ZkControlState
from migrator.results import Finding, Severity
from migrator.zk.migration_client import ZkTree

__all__ = [
    "BROKER_CONFIG_NOT_CHECKED",
    "BROKER_REGISTRATION_TOO_OLD",
    "CHILD_LIST_NEAR_MAXBUFFER",
    "CHILD_LIST_TOO_LARGE",
    "CLUSTER_ID_MISSING",
    "CONTROLLER_EPOCH_MISSING",
    "CONTROLLER_HELD_BY_KRAFT",
    "CodeInfo",
    "DEFAULT_JUTE_MAXBUFFER",
    "EXAMPLES",
    "Finding",
    "GET_DATA_OVERHEAD",
    "LEFTOVER_MIGRATION_ZNODE",
    "LOG_NOT_BOUND",
    "LOG_RECORD_NEVER_SYNCED",
    "MALFORMED_ZNODE",
    "MAX_LISTED",
    "METADATA_VERSION_MISMATCH",
    "MIGRATION_MIN_METADATA_VERSION",
    "MIGRATION_ZNODE_EMPTY",
    "MIGRATION_ZNODE_IN_PROGRESS",
    "MIN_BROKER_JSON_VERSION",
    "NEAR_LIMIT_FRACTION",
    "NO_BROKERS",
    "OFFLINE_PARTITIONS",
    "PARTITION_STATE_MISSING",
    "PENDING_TOPIC_DELETIONS",
    "Problem",
    "REASSIGNMENT_IN_PROGRESS",
    "SEVERITY_ORDER",
    "Severity",
    "TOPIC_WITHOUT_ID",
    "UNKNOWN_ZNODE_VERSION",
    "UNREGISTERED_REPLICA_BROKER",
    "ZK_AUTH_FAILED",
    "ZK_EPOCH_NOT_ABOVE_KRAFT_EPOCH",
    "ZK_UNREACHABLE",
    "ZNODE_NEAR_MAXBUFFER",
    "ZNODE_OVER_MAXBUFFER",
    "check_assignments",
    "check_brokers",
    "check_control",
    "check_problems",
    "check_sizes",
    "check_topics",
    "check_zk_view",
    "define",
    "docs_markdown",
    "examples",
    "finding",
    "plural",
    "redact",
    "registered_broker_ids",
    "registry",
    "sort_findings",
]


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
        elif mv is None:
            # Kafka's ZooKeeper-mode brokers (2.7 to 3.9) register `"features":{}` (KafkaServer's
            # BrokerFeatures.createEmpty()): their IBP is checked when they register with the controller.
            continue
        elif mv.max_version < MIGRATION_MIN_METADATA_VERSION:
            too_old.append(f"broker {bid} advertises metadata.version up to {mv.max_version} (Kafka < 3.4)")
            old_ids.append(bid)
        else:
            levels[mv.max_version].append(bid)
    if too_old:
        out.append(
            finding(
                BROKER_REGISTRATION_TOO_OLD,
                f"{plural(len(old_ids), 'broker')} cannot migrate: {examples(too_old)}",
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
            f"broker {b} ({plural(missing_counts[b], 'partition')}, e.g. {', '.join(missing[b])})"
            for b in order
        ]
        total = sum(missing_counts.values())
        out.append(
            finding(
                UNREGISTERED_REPLICA_BROKER,
                f"{plural(len(order), 'broker id')} in replica assignments {'has' if len(order) == 1 else 'have'} "
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
                f"{plural(offline_count, 'partition')} offline (leader -1 or empty ISR): {examples(offline, offline_count)}",
                paths=[_state_path(tp) for tp in offline],
                count=offline_count,
            )
        )
    if no_state_count:
        out.append(
            finding(
                PARTITION_STATE_MISSING,
                f"{plural(no_state_count, 'partition')} without a state znode: {examples(no_state, no_state_count)}",
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
                f"/admin/reassign_partitions lists {plural(len(tps), 'partition')} ({examples(tps)})"
            )
        if moving_count:
            parts.append(
                f"{plural(moving_count, 'partition')} with adding/removing replicas ({examples(moving, moving_count)})"
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
                f"{plural(len(no_id), 'topic')} without topic_id: {examples(no_id)}",
                paths=[f"/brokers/topics/{n}" for n in no_id],
                count=len(no_id),
            )
        )
    if pending:
        names = sorted(pending)
        out.append(
            finding(
                PENDING_TOPIC_DELETIONS,
                f"{plural(len(names), 'topic')} pending deletion: the migration completes the deletion "
                f"(not copied, removed from ZooKeeper by the first sync): {examples(names)}",
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
                f"{plural(stale_count, 'partition state')} carry controller_epoch up to {max_state_epoch} "
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


if __name__ == "__main__":
    # Run as a script this file is `__main__`; the registry the check modules fill is the imported one.
    from migrator.migration import checks as _registered

    print(_registered.docs_markdown(), end="")
