"""Kafka 3.9's own KRaft controller migrating a ZooKeeper cluster (KIP-866), as the docs' runbook sets it up.

`migration_controller()` writes the controller's properties (process.roles=controller, the migration
flag, zookeeper.connect, a single-voter quorum), formats its directory with `kafka-storage format
--cluster-id` of ZooKeeper's cluster, and returns the `KafkaNode` unstarted. zk2kraft's simulated
brokers (zk_fixtures.broker_sim) then register with it as migrating ZooKeeper brokers, exactly as
they register with zk2kraft's controller; Kafka's driver waits for every broker of `/brokers/ids`
and of the topics' assignments, claims `/controller`, copies, and dual-writes from then on.

Kafka's own log lines mark the phases (KRaftMigrationDriver, Kafka 3.9): `COMPLETED` once the copy
is committed (ZkMigrationState MIGRATION), `DUAL_WRITE` once it writes ZooKeeper behind the log.
"""

from __future__ import annotations

from pathlib import Path

from zk_fixtures.kafka import KafkaNode, free_ports, kafka_tool, render_properties

#: KRaftMigrationDriver's line once the copy's transaction is committed (state MIGRATION)
COMPLETED = r"Completed migration of metadata from ZooKeeper to KRaft"
#: its state change once ZooKeeper is written behind the log
DUAL_WRITE = r"transitioning from KRAFT_CONTROLLER_TO_BROKER_COMM to DUAL_WRITE state"
#: its state while the controller waits for the ZooKeeper brokers to register as migrating
WAIT_FOR_BROKERS = r"transitioning from WAIT_FOR_CONTROLLER_QUORUM to WAIT_FOR_BROKERS state"
#: the claim of /controller (KafkaZkClient.tryRegisterKRaftControllerAsActiveController)
CLAIMED = r"Successfully registered KRaft controller \d+ with ZK epoch \d+"
#: the metadata partition Kafka keeps under its metadata.log.dir
METADATA_PARTITION = "__cluster_metadata-0"
#: a ZooKeeper-mode broker decrypts delegation tokens with it; a migrating KRaft controller publishes
#: the migrated tokens through the same DelegationTokenManager, which fails ("Invalid key to HMAC
#: computation") without it
TOKEN_SECRET = "zk2kraft-fixture-token-secret"


def migration_properties(
    directory: Path, zk_connect: str, node_id: int = 3000, port: int | None = None, **extra: object
) -> dict[str, object]:
    """A migrating KRaft controller's server.properties (the docs' "Provisioning the KRaft controller
    quorum": the migration flag, zookeeper.connect, the quorum and its listener)."""
    if port is None:
        (port,) = free_ports(1)
    props: dict[str, object] = {
        "process.roles": "controller",
        "node.id": node_id,
        "controller.quorum.voters": f"{node_id}@127.0.0.1:{port}",
        "listeners": f"CONTROLLER://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "zookeeper.metadata.migration.enable": True,
        "zookeeper.connect": zk_connect,
        "log.dirs": str(Path(directory) / "data"),
        "delegation.token.secret.key": TOKEN_SECRET,
    }
    props.update(extra)
    return props


def format_storage(node: KafkaNode, cluster_id: str) -> None:
    """`kafka-storage format --cluster-id ID --config server.properties`: meta.properties and the
    bootstrap checkpoint (metadata.version 3.9-IV0), what the runbook runs before the first start."""
    node.directory.mkdir(parents=True, exist_ok=True)
    config = node.directory / "format.properties"
    config.write_text(render_properties(node.props))
    kafka_tool("kafka-storage", "format", "--cluster-id", cluster_id, "--config", str(config))


def migration_controller(
    directory: Path,
    zk_connect: str,
    cluster_id: str,
    node_id: int = 3000,
    heap: str = "384m",
    **extra: object,
) -> KafkaNode:
    """Kafka's migrating KRaft controller in `directory`, formatted for `cluster_id`, not started."""
    node = KafkaNode(
        Path(directory), migration_properties(Path(directory), zk_connect, node_id, **extra), heap
    )
    format_storage(node, cluster_id)
    return node


def metadata_log_dir(node: KafkaNode) -> Path:
    """The controller's metadata.log.dir (what zk2kraft's --log-dir names)."""
    return Path(str(node.props.get("metadata.log.dir", node.props["log.dirs"])))


def controller_address(node: KafkaNode) -> tuple[str, int]:
    return ("127.0.0.1", node.listener_port("CONTROLLER"))


def finalize_properties(node: KafkaNode) -> dict[str, object]:
    """The docs' "Migrating brokers to KRaft" last step for the controllers: the same properties
    without the migration flag and zookeeper.connect (a restart with them finalizes: POST_MIGRATION)."""
    return {
        k: v
        for k, v in node.props.items()
        if k not in ("zookeeper.metadata.migration.enable", "zookeeper.connect")
    }
