"""The API: one plain function per operator command, each taking a `Target` first and returning a
pydantic result from `migrator.results`.

The CLI only parses options, builds the Target, calls one of these and renders the result, so every
command is as usable from Python (tests, notebooks, automation) as from a shell:
`from migrator import commands; commands.status(commands.Target(zookeeper=zk, log_dir=d))`, or with
the shorthand `commands.status(zk, d)` (`commands.target_arg`).

One module per group: `check`, `lifecycle` (migrate, plan, status, finalize, rollback, admin,
truncate-unsynced), `controller` (a controller on a thread), `audit` (Spark audit, ZooKeeper export),
`log` (dump, verify, image, snapshot), `config` (properties files), `fixtures` (the `demo` and
`fixtures` commands' ZooKeeper work). The names the CLI needs as input (admin changes, defaults) are
re-exported here so `cli` imports nothing else of `migrator` but results, errors and stop.
"""

from migrator.commands.audit import audit, audit_kind_titles, zk_export
from migrator.commands.check import check
from migrator.commands.companion import rollback_kafka_controller
from migrator.commands.config import load_broker_configs, load_config
from migrator.commands.controller import RunningController, start_controller
from migrator.commands.fixtures import (
    ClientSecurity,
    client_security_from_file,
    controller_heartbeat,
    controller_login,
    fixtures_load,
    kafka_error_name,
    read_zookeeper,
    serve_listeners_with,
    znode_exists,
)
from migrator.commands.lifecycle import (
    admin,
    admin_many,
    driver_options,
    finalize,
    migrate,
    plan,
    rollback,
    status,
    truncate_unsynced,
)
from migrator.commands.log import (
    MASK,
    is_secret_config,
    log_dump,
    log_image,
    log_snapshot,
    log_verify,
    log_verify_kafka,
)
from migrator.controller.core import DEFAULT_SESSION_TIMEOUT_MS
from migrator.controller.managers.change import AclSpec, AdminChange
from migrator.controller.managers.scram import ScramSpec, scram_credential
from migrator.controller.zk_brokers.zk_propagator import EXAMPLE_DOMAIN
from migrator.migration.checks import DEFAULT_JUTE_MAXBUFFER
from migrator.migration.driver import DEFAULT_BROKER_WAIT_SECONDS, DEFAULT_NODE_ID, MigrateOptions
from migrator.target import Target, option_defaults
from migrator.zk.bulk_write import ZnodeExistsError

__all__ = [
    "EXAMPLE_DOMAIN",
    "MigrateOptions",
    "ZnodeExistsError",
    "rollback_kafka_controller",
    "DEFAULT_BROKER_WAIT_SECONDS",
    "DEFAULT_JUTE_MAXBUFFER",
    "DEFAULT_NODE_ID",
    "DEFAULT_SESSION_TIMEOUT_MS",
    "MASK",
    "AclSpec",
    "AdminChange",
    "ClientSecurity",
    "RunningController",
    "ScramSpec",
    "Target",
    "admin",
    "admin_many",
    "audit",
    "audit_kind_titles",
    "check",
    "client_security_from_file",
    "controller_heartbeat",
    "controller_login",
    "driver_options",
    "finalize",
    "fixtures_load",
    "is_secret_config",
    "kafka_error_name",
    "load_broker_configs",
    "load_config",
    "log_dump",
    "log_image",
    "log_snapshot",
    "log_verify",
    "log_verify_kafka",
    "migrate",
    "option_defaults",
    "plan",
    "read_zookeeper",
    "rollback",
    "scram_credential",
    "serve_listeners_with",
    "start_controller",
    "status",
    "truncate_unsynced",
    "zk_export",
    "znode_exists",
]
