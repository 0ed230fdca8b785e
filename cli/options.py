"""Options shared by every command, so names, env vars and help read the same everywhere."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from migrator import commands

F = TypeVar("F", bound=Callable[..., Any])

_NODE_ID_HELP = "KRaft node id of this controller, as Kafka's node.id (env ZK2KRAFT_NODE_ID)."


#: The options a `Target` is built from; a command gets `target` instead of each of them.
_TARGET_PARAMS = (
    "zookeeper",
    "log_dir",
    "zk_auth",
    "zk_timeout",
    "node_id",
    "listen",
    "metrics_listen",
    "zk_tls",
    "zk_tls_ca",
    "zk_tls_cert",
    "zk_tls_key",
    "zk_tls_key_password",
    "zk_tls_verify_hostname",
    "zk_jaas_config",
    "zk_set_acl",
)


def _with_target(f: F) -> F:
    """Build the command's `Target` once from its resolved options (environment and `--config` already
    applied by click) and hand it over as `target`: ZooKeeper, credentials, TLS/SASL/ACL, log dir,
    node id and listeners then travel together to every session and log the command opens."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = {name: kwargs.pop(name) for name in _TARGET_PARAMS if name in kwargs}
        return f(*args, target=commands.Target.from_options(**given), **kwargs)

    return wrapper  # type: ignore[return-value]


def zk_security_options(f: F) -> F:
    """TLS, SASL (JAAS) and ACL options, as Kafka's zookeeper.ssl.*, JAAS Client and zookeeper.set.acl;
    the command gets `target` instead of them (`_with_target`)."""
    f = _with_target(f)
    file = click.Path(exists=True, dir_okay=False)
    for decl, kw in reversed(
        [
            ("--zk-tls", dict(is_flag=True, envvar="ZK2KRAFT_ZK_TLS",
                              help="TLS to ZooKeeper (implied by --zk-tls-ca/--zk-tls-cert; env ZK2KRAFT_ZK_TLS).")),
            ("--zk-tls-ca", dict(type=file, envvar="ZK2KRAFT_ZK_TLS_CA", metavar="PEM",
                                 help="CA certificates (PEM) to verify ZooKeeper's certificate; default: the system's.")),
            ("--zk-tls-cert", dict(type=file, envvar="ZK2KRAFT_ZK_TLS_CERT", metavar="PEM",
                                   help="Client certificate (PEM; may also hold the key) for mutual TLS.")),
            ("--zk-tls-key", dict(type=file, envvar="ZK2KRAFT_ZK_TLS_KEY", metavar="PEM",
                                  help="Private key (PEM) of --zk-tls-cert.")),
            ("--zk-tls-key-password", dict(envvar="ZK2KRAFT_ZK_TLS_KEY_PASSWORD", metavar="PW", show_default=False,
                                           help="Password of an encrypted --zk-tls-key (env ZK2KRAFT_ZK_TLS_KEY_PASSWORD).")),
            ("--zk-tls-verify-hostname", dict(is_flag=True, envvar="ZK2KRAFT_ZK_TLS_VERIFY_HOSTNAME",
                                              help="Check ZooKeeper's certificate names its host (Kafka's HTTPS endpoint identification).")),
            ("--zk-jaas-config", dict(type=file, envvar="ZK2KRAFT_ZK_JAAS_CONFIG", metavar="FILE",
                                      help="JAAS file whose Client section (DigestLoginModule) is the SASL login.")),
            ("--zk-set-acl", dict(is_flag=True, envvar="ZK2KRAFT_ZK_SET_ACL",
                                  help="Znodes zk2kraft creates get Kafka's secure ACLs (zookeeper.set.acl).")),
        ]
    ):  # fmt: skip
        f = click.option(decl, **kw)(f)  # type: ignore[arg-type]
    return f


def zookeeper_options(f: F) -> F:
    """`--zookeeper HOST:PORT[/chroot]` plus digest/SASL auth, TLS and ACLs, all with environment variables;
    the command gets them (and its --log-dir, --node-id, --listen, --metrics-listen) as one `target`."""
    f = zk_security_options(f)
    f = click.option(
        "--zk-auth",
        "zk_auth",
        multiple=True,
        envvar="ZK2KRAFT_ZK_AUTH",
        metavar="SCHEME:CRED",
        help="ZooKeeper auth: digest:USER:PW or sasl:USER:PW (DIGEST-MD5) (repeatable; env ZK2KRAFT_ZK_AUTH).",
    )(f)
    f = click.option(
        "--zk-timeout",
        type=float,
        default=10.0,
        show_default=True,
        envvar="ZK2KRAFT_ZK_TIMEOUT",
        help="Seconds to wait for a ZooKeeper session.",
    )(f)
    f = click.option(
        "--zookeeper",
        "-z",
        envvar="ZK2KRAFT_ZOOKEEPER",
        required=True,
        metavar="HOST:PORT[/chroot]",
        help="ZooKeeper connect string, as Kafka's zookeeper.connect (env ZK2KRAFT_ZOOKEEPER).",
    )(f)
    return f


def log_dir_option(required: bool = True) -> Callable[[F], F]:
    def deco(f: F) -> F:
        return click.option(
            "--log-dir",
            "-l",
            envvar="ZK2KRAFT_LOG_DIR",
            required=required,
            type=click.Path(readable=False),  # an unreadable directory: the log reports it (exit 3)
            metavar="DIR",
            help="Metadata log directory, as Kafka's metadata.log.dir (env ZK2KRAFT_LOG_DIR).",
        )(f)

    return deco


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")(f)


def node_id_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--node-id",
        type=click.IntRange(min=0),
        default=commands.DEFAULT_NODE_ID,
        show_default=True,
        envvar="ZK2KRAFT_NODE_ID",
        help=_NODE_ID_HELP,
    )(f)


#: `ctx.meta` key: the `listeners` of a --config file, which `migrate --follow` serves without --listen
#: (a click default cannot depend on --follow; `controller` gets it as its --listen default)
CONFIG_LISTENERS = "zk2kraft.config_listeners"


def listen_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--listen, --broker-wait-timeout, --session-timeout-ms: the controller protocol listener;
    --metrics-listen: its Prometheus endpoint. All but the timeouts go into the command's Target."""
    f = click.option(
        "--metrics-listen",
        metavar="HOST:PORT",
        envvar="ZK2KRAFT_METRICS_LISTEN",
        help="Serve Prometheus metrics (Kafka's ZkMigrationState, ZkWriteBehindLag, ...) on "
        "http://HOST:PORT/metrics while this runs, e.g. 127.0.0.1:9404.",
    )(f)
    f = click.option(
        "--session-timeout-ms",
        type=click.IntRange(min=100),
        default=commands.DEFAULT_SESSION_TIMEOUT_MS,
        show_default=True,
        envvar="ZK2KRAFT_SESSION_TIMEOUT_MS",
        help="A broker silent this long is fenced (Kafka's broker.session.timeout.ms).",
    )(f)
    f = click.option(
        "--broker-wait-timeout",
        type=click.FloatRange(min=0),
        default=commands.DEFAULT_BROKER_WAIT_SECONDS,
        show_default=True,
        envvar="ZK2KRAFT_BROKER_WAIT_TIMEOUT",
        help="Seconds the copy waits for every ZooKeeper broker to register; then it names the missing "
        "ones and exits 1.",
    )(f)
    return click.option(
        "--listen",
        metavar="HOST:PORT",
        envvar="ZK2KRAFT_LISTEN",
        help="Serve the KRaft controller protocol here (the address in the brokers' controller.quorum.voters), "
        "plain TCP; or a Kafka `listeners` value (NAME://HOST:PORT,...) served with the TLS/SASL/ACL settings "
        "of --config (`controller` and `migrate --follow` with --config use the file's own `listeners`).",
    )(f)
