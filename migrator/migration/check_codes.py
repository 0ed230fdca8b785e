"""The ZooKeeper-side finding codes of `zk2kraft check`, and docs/checks.md generated from the registry.

Every code is declared once here (severity, meaning, why it matters, fix hint); docs/checks.md is
compared with the registry by a test, so the documentation cannot drift from the code.
"""

from __future__ import annotations

from migrator.migration.findings import define, registry
from migrator.results import Severity

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
    "The migration completes their deletion, as Kafka's own does: they are not copied, the first KRaft-to-ZooKeeper sync removes them from ZooKeeper and brokers keep their logs as strays.",
    "Nothing is required; to have the brokers delete those logs themselves, let the deletions finish (all replicas' brokers online) before migrating.",
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
    "A broker registration shows IBP < 2.7 (JSON version < 5) or advertises a metadata.version below 8 "
    "(Kafka's own ZooKeeper-mode brokers register empty features; their IBP is checked at BrokerRegistration).",
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


_DOC_HEADER = """# `zk2kraft check`: finding codes

<!-- Generated from migrator/migration/check_codes.py and broker_config.py by
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
