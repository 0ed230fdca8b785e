"""Connecting to ZooKeeper the way Kafka's `zookeeper.connect` does: hosts, optional chroot, auth, TLS.

Every command goes through `connect`, so connection failures always become one clear line with exit
code 3 instead of a kazoo traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError, KazooException, NoAuthError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import ACL, make_digest_acl

from migrator.errors import BadInputError, PermissionDeniedError, UnreachableError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConnectSpec:
    """A parsed `host:port[,host:port…][/chroot]`."""

    hosts: str
    chroot: str  # "" when none

    @classmethod
    def parse(cls, connect: str) -> ConnectSpec:
        connect = connect.strip()
        if not connect:
            raise BadInputError("empty ZooKeeper connect string (use --zookeeper HOST:PORT[/chroot])")
        hosts, slash, chroot = connect.partition("/")
        chroot = (slash + chroot).rstrip("/") if slash else ""
        for hp in hosts.split(","):
            host, colon, port = hp.strip().rpartition(":")
            if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise BadInputError(
                    f"bad ZooKeeper address {hp.strip()!r} in {connect!r}: expected HOST:PORT"
                )
        if "//" in chroot or chroot.endswith("/."):
            raise BadInputError(f"bad chroot {chroot!r} in {connect!r}")
        return cls(hosts=hosts, chroot=chroot)

    def __str__(self) -> str:
        return self.hosts + self.chroot


@dataclass(frozen=True)
class TlsOptions:
    """kazoo's SSL options: the counterpart of Kafka's `zookeeper.ssl.*` settings."""

    ca: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    keyfile_password: str | None = None
    verify_certs: bool = True


def parse_auth(auth: Sequence[str]) -> list[tuple[str, str]]:
    """`digest:user:password` → kazoo auth_data; other schemes pass through as `scheme:credential`."""
    out = []
    for item in auth:
        scheme, sep, cred = item.partition(":")
        if not sep or not scheme or not cred:
            raise BadInputError(
                f"bad --zk-auth value: expected SCHEME:CREDENTIAL (e.g. digest:user:password), got {scheme}:…"
            )
        out.append((scheme, cred))
    return out


def acls_for(set_acl: Sequence[str]) -> list[ACL] | None:
    """ACLs for znodes zk2kraft creates, from `digest:user:password` entries (Kafka's zookeeper.set.acl)."""
    acls = []
    for scheme, cred in parse_auth(set_acl):
        if scheme != "digest":
            raise BadInputError(f"--zk-set-acl supports digest credentials, got scheme {scheme!r}")
        user, _, password = cred.partition(":")
        acls.append(make_digest_acl(user, password, all=True))
    return acls or None


def connect(
    connect_string: str,
    auth: Sequence[str] = (),
    timeout: float = 10.0,
    tls: TlsOptions | None = None,
    sasl: dict[str, str] | None = None,
    default_acl: Sequence[str] = (),
    read_only: bool = False,
    require_chroot: bool = True,
    connection_tries: int = 3,
) -> KazooClient:
    """A started kazoo client; raises UnreachableError (exit 3) or BadInputError (exit 2).

    `connection_tries` bounds kazoo's reconnection attempts after a lost connection; -1 keeps
    reconnecting (a long-running controller outlives a ZooKeeper restart that way).
    """
    spec = ConnectSpec.parse(connect_string)
    credentials = parse_auth(auth)
    # kazoo turns `sasl:user:password` into a SASL login only at construction. Other schemes are added
    # after the session starts, one synchronous addAuth each: connect-time auth is sent without waiting,
    # and a refusal then surfaces as a session that vanishes mid-command instead of a clear error.
    sasl_auth = [c for c in credentials if c[0] == "sasl"]
    later_auth = [c for c in credentials if c[0] != "sasl"]
    kwargs: dict[str, object] = {
        "hosts": str(spec),
        "timeout": timeout,
        "auth_data": sasl_auth or None,
        "default_acl": acls_for(default_acl),
        "read_only": read_only,
        "connection_retry": {"max_tries": connection_tries, "delay": 0.2, "backoff": 2, "max_delay": 2},
        "command_retry": {"max_tries": 3, "delay": 0.2, "backoff": 2, "max_delay": 2},
        "logger": logging.getLogger("kazoo"),
    }
    if sasl:
        kwargs["sasl_options"] = sasl
    if tls is not None:
        kwargs.update(
            use_ssl=True,
            ca=tls.ca,
            certfile=tls.certfile,
            keyfile=tls.keyfile,
            keyfile_password=tls.keyfile_password,
            verify_certs=tls.verify_certs,
        )
    client = KazooClient(**kwargs)  # type: ignore[arg-type]
    try:
        client.start(timeout=timeout)
        for scheme, credential in later_auth:
            client.add_auth(scheme, credential)
        if spec.chroot and require_chroot:
            try:
                exists = client.exists("/")
            except NoAuthError:
                exists = True
            if exists is None:
                raise BadInputError(f"chroot {spec.chroot} does not exist on ZooKeeper {spec.hosts}")
    except BadInputError:
        close(client)
        raise
    except AuthFailedError:
        close(client)
        schemes = ", ".join(sorted({c[0] for c in credentials})) or "none"
        raise PermissionDeniedError(
            f"ZooKeeper at {spec.hosts} refused the --zk-auth credentials (scheme {schemes})"
        ) from None
    except KazooTimeoutError:
        close(client)
        raise UnreachableError(f"cannot reach ZooKeeper at {spec.hosts} within {timeout:g}s") from None
    except KazooException as e:
        close(client)
        raise UnreachableError(
            f"cannot connect to ZooKeeper at {spec.hosts}: {type(e).__name__} {e}"
        ) from None
    except OSError as e:
        close(client)
        raise UnreachableError(f"cannot connect to ZooKeeper at {spec.hosts}: {e}") from None
    return client


def close(client: KazooClient) -> None:
    """Stop, then close: kazoo refuses to close a client that was not stopped."""
    try:
        client.stop()
    finally:
        client.close()


def permission_denied(path: str) -> PermissionDeniedError:
    return PermissionDeniedError(
        f"ZooKeeper denied access to {path}: check --zk-auth credentials and the znode's ACL"
    )
