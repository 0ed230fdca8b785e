"""Options shared by every command, so names, env vars and help read the same everywhere."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


_SECURITY_PARAMS = (
    "zk_tls",
    "zk_tls_ca",
    "zk_tls_cert",
    "zk_tls_key",
    "zk_tls_key_password",
    "zk_tls_verify_hostname",
    "zk_jaas_config",
    "zk_set_acl",
)


def _with_zk_security(f: F) -> F:
    """Turn the --zk-tls-*/--zk-jaas-config/--zk-set-acl options into the process-wide connection
    security for the command's duration, so every session it opens (driver, syncer, controller,
    audit) gets them without each command passing them on."""
    from migrator.zk.connection import TlsOptions, ZkSecurity, configure, sasl_from_jaas

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        v = {name: kwargs.pop(name, None) for name in _SECURITY_PARAMS}
        tls = None
        if v["zk_tls"] or v["zk_tls_ca"] or v["zk_tls_cert"] or v["zk_tls_key"]:
            tls = TlsOptions(
                ca=v["zk_tls_ca"],
                certfile=v["zk_tls_cert"],
                keyfile=v["zk_tls_key"] or v["zk_tls_cert"],  # a PEM keystore holds both
                keyfile_password=v["zk_tls_key_password"],
                check_hostname=bool(v["zk_tls_verify_hostname"]),
            )
        sasl = sasl_from_jaas(v["zk_jaas_config"]) if v["zk_jaas_config"] else None
        previous = configure(ZkSecurity(tls=tls, sasl=sasl, set_acl=bool(v["zk_set_acl"])))
        try:
            return f(*args, **kwargs)
        finally:
            configure(previous)

    return wrapper  # type: ignore[return-value]


def zk_security_options(f: F) -> F:
    """TLS, SASL (JAAS) and ACL options, as Kafka's zookeeper.ssl.*, JAAS Client and zookeeper.set.acl."""
    f = _with_zk_security(f)
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
    """`--zookeeper HOST:PORT[/chroot]` plus digest/SASL auth, TLS and ACLs, all with environment variables."""
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
