"""Connecting to ZooKeeper the way Kafka's `zookeeper.connect` does: hosts, optional chroot, auth, TLS.

Every command goes through `connect`, so connection failures always become one clear line with exit
code 3 instead of a kazoo traceback.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import ssl
import struct
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError, KazooException, NoAuthError
from kazoo.handlers.threading import AsyncResult, KazooTimeoutError, SequentialThreadingHandler
from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from migrator import lock_rule, stop
from migrator.errors import BadInputError, PermissionDeniedError, UnreachableError

log = logging.getLogger(__name__)


class _RedactKazooPayloads(logging.Filter):
    """kazoo's debug log prints whole requests and replies: znode data (SCRAM keys, password configs),
    addAuth credentials, session passwords. With -v zk2kraft keeps the line, but only the types."""

    _PAYLOAD_LINES = ("Sending request", "Received response", "Read response", "Received error")

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.msg
        if isinstance(msg, str) and (msg.startswith(self._PAYLOAD_LINES) or "session_passwd" in msg):
            args = record.args if isinstance(record.args, tuple) else (record.args,)
            record.args = tuple(a if isinstance(a, int) else f"<{type(a).__name__}>" for a in args)
            record.msg = msg.replace("%r", "%s")
        return True


KAZOO_LOG = logging.getLogger("kazoo")
KAZOO_LOG.addFilter(_RedactKazooPayloads())


class _StoppableResult(AsyncResult):  # type: ignore[misc]
    """kazoo's result of one request, whose untimed `get()` — behind every synchronous call
    (`client.get`, `exists`, ...) — waits in slices and ends at a stop request (SIGTERM/SIGINT).

    A request made while the connection is down is queued for a reconnect that, with ZooKeeper
    stopped and reconnection unbounded (a long-running writer), never comes: without this a
    stopped controller hung there for ever (issue 20).
    """

    def get(self, block: bool = True, timeout: float | None = None) -> object:
        if block and not self.ready():
            lock_rule.check_zookeeper_wait("waiting for ZooKeeper to answer")
        if not block or timeout is not None:
            return super().get(block, timeout)
        while not self.wait(0.25):
            stop.check("waiting for ZooKeeper to answer")
        return super().get(False)


class _StoppableHandler(SequentialThreadingHandler):  # type: ignore[misc]
    def async_result(self) -> AsyncResult:
        return _StoppableResult(self)


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
    """kazoo's SSL options: the counterpart of Kafka's `zookeeper.ssl.*` settings (PEM files only)."""

    ca: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    keyfile_password: str | None = field(default=None, repr=False)
    verify_certs: bool = True
    check_hostname: bool = False

    def validate(self) -> None:
        for what, path in (("CA", self.ca), ("certificate", self.certfile), ("key", self.keyfile)):
            if path is not None and not os.path.isfile(path):
                raise BadInputError(f"TLS {what} file {path} does not exist or is not a file")
        if self.keyfile and not self.certfile:
            raise BadInputError("--zk-tls-key needs --zk-tls-cert (the certificate of that key)")
        if self.check_hostname and not self.verify_certs:
            raise BadInputError("TLS hostname verification needs certificate verification")


@dataclass(frozen=True)
class ZkSecurity:
    """How a connection authenticates, encrypts and protects what it creates.

    Built once per command from --zk-tls-*, --zk-jaas-config, --zk-set-acl and their Kafka properties
    into the command's `migrator.target.Target`, which hands it to every session it opens.
    """

    tls: TlsOptions | None = None
    sasl: dict[str, str] | None = field(default=None, repr=False)  # kazoo sasl_options
    set_acl: bool = False  # Kafka's zookeeper.set.acl


# Kafka's ZkData.SensitiveRootPaths: SCRAM credentials, broker configs (password configs) and
# delegation tokens are never world-readable when zookeeper.set.acl is on. A string prefix, as Kafka's.
SENSITIVE_ROOTS = ("/config/users", "/config/brokers", "/delegation_token/tokens")
SECURE_ACL: list[ACL] = [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE]  # creator-all + world-read
SENSITIVE_ACL: list[ACL] = list(CREATOR_ALL_ACL)


def is_sensitive(path: str) -> bool:
    return path.startswith(SENSITIVE_ROOTS)


def sensitive_acl(client: KazooClient) -> list[ACL] | None:
    """The ACL for sensitive paths when this client was opened with --zk-set-acl, else None."""
    return getattr(client, "zk2kraft_sensitive_acl", None)


def acl_for(client: KazooClient, path: str) -> list[ACL]:
    """Kafka's ZkData.defaultAcls for a znode this client creates."""
    sensitive = sensitive_acl(client)
    if sensitive is not None and is_sensitive(path):
        return sensitive
    return list(client.default_acl or OPEN_ACL_UNSAFE)


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


_JAAS_SECTION = re.compile(r"(?s)\b(\w+)\s*\{(.*?)\}\s*;")
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def sasl_from_jaas(path: str, section: str = "Client") -> dict[str, str]:
    """kazoo sasl_options from the JAAS file Kafka's brokers use for ZooKeeper (its `Client` section).

    Only DigestLoginModule (DIGEST-MD5) maps onto kazoo without Kerberos libraries.
    """
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        raise BadInputError(f"cannot read JAAS file {path}: {e.strerror}") from None
    for name, body in _JAAS_SECTION.findall(text):
        if name != section:
            continue
        if "DigestLoginModule" not in body:
            raise BadInputError(
                f"JAAS file {path}: section {section} uses no DigestLoginModule; zk2kraft supports "
                "SASL DIGEST-MD5 to ZooKeeper"
            )
        opts = {k: v.replace('\\"', '"') for k, v in _JAAS_OPTION.findall(body)}
        if "username" not in opts or "password" not in opts:
            raise BadInputError(f"JAAS file {path}: section {section} needs username and password")
        return {"mechanism": "DIGEST-MD5", "username": opts["username"], "password": opts["password"]}
    raise BadInputError(f"JAAS file {path} has no {section} section")


def connect(
    connect_string: str,
    auth: Sequence[str] = (),
    timeout: float = 10.0,
    security: ZkSecurity | None = None,
    read_only: bool = False,
    require_chroot: bool = True,
    connection_tries: int = 3,
) -> KazooClient:
    """A started kazoo client; raises UnreachableError (exit 3) or BadInputError (exit 2).

    `security` (TLS, SASL, the ACL flag) defaults to none: plain, anonymous unless `auth` says otherwise. `connection_tries` bounds kazoo's
    reconnection attempts after a lost connection; -1 keeps reconnecting (a long-running controller
    outlives a ZooKeeper restart that way).
    """
    spec = ConnectSpec.parse(connect_string)
    sec = ZkSecurity() if security is None else security
    credentials = parse_auth(auth)
    # `sasl:user:password` is a SASL DIGEST-MD5 login, given to kazoo at construction (sasl_options).
    # Other schemes are added after the session starts, one synchronous addAuth each: connect-time auth
    # is sent without waiting, and a refusal then surfaces as a session that vanishes mid-command.
    sasl = dict(sec.sasl) if sec.sasl else None
    for scheme, cred in credentials:
        if scheme == "sasl":
            user, colon, password = cred.partition(":")
            if not colon or not user:
                raise BadInputError("bad --zk-auth sasl value: expected sasl:USER:PASSWORD")
            if sasl is not None and sasl.get("username") != user:
                raise BadInputError("two SASL logins given (--zk-auth sasl:… and a JAAS file): keep one")
            sasl = {"mechanism": "DIGEST-MD5", "username": user, "password": password}
    later_auth = [c for c in credentials if c[0] != "sasl"]
    tls = sec.tls
    if sec.set_acl and not (sasl or later_auth or (tls is not None and tls.certfile)):
        raise BadInputError(
            "--zk-set-acl needs an authenticated identity to own the znodes: --zk-auth digest:USER:PW, "
            "a SASL login (--zk-auth sasl:USER:PW or --zk-jaas-config) or a TLS client certificate"
        )
    kwargs: dict[str, object] = {
        "hosts": str(spec),
        "timeout": timeout,
        "default_acl": SECURE_ACL if sec.set_acl else None,
        "read_only": read_only,
        "connection_retry": {"max_tries": connection_tries, "delay": 0.2, "backoff": 2, "max_delay": 2},
        "command_retry": {"max_tries": 3, "delay": 0.2, "backoff": 2, "max_delay": 2},
        "logger": KAZOO_LOG,
        "handler": _StoppableHandler(),
    }
    if sasl:
        kwargs["sasl_options"] = {"service": "zookeeper", **sasl}
    if tls is not None:
        tls.validate()
        kwargs.update(
            use_ssl=True,
            ca=tls.ca,
            certfile=tls.certfile,
            keyfile=tls.keyfile,
            keyfile_password=tls.keyfile_password,
            verify_certs=tls.verify_certs,
            check_hostname=tls.check_hostname,
        )
    reachable = _probe(spec.hosts, timeout)
    client = KazooClient(**kwargs)  # type: ignore[arg-type]
    if sec.set_acl:
        client.zk2kraft_sensitive_acl = SENSITIVE_ACL  # type: ignore[attr-defined]
    try:
        with warnings.catch_warnings():
            # kazoo warns "No chroot path exists" (with its site-packages path); we say it in one line below
            warnings.filterwarnings("ignore", message="No chroot path exists")
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
        schemes = ", ".join(sorted({c[0] for c in credentials} | ({"sasl"} if sasl else set()))) or "none"
        raise PermissionDeniedError(
            f"ZooKeeper at {spec.hosts} refused the {'SASL login or ' if sasl else ''}--zk-auth credentials "
            f"(scheme {schemes})"
        ) from None
    except KazooTimeoutError:
        close(client)
        hint = ""
        if reachable and tls is not None:
            hint = " (is TLS enabled on that port?)"
        elif reachable:  # a port that accepts TCP but never completes ZooKeeper's handshake: ask it
            hint = _silent_port_hint(spec.hosts, min(timeout, 3.0))
        raise UnreachableError(f"cannot reach ZooKeeper at {spec.hosts} within {timeout:g}s{hint}") from None
    except ssl.SSLError as e:
        close(client)
        raise UnreachableError(
            f"TLS handshake with ZooKeeper at {spec.hosts} failed: {e.reason or e.__class__.__name__}"
        ) from None
    except KazooException as e:
        close(client)
        raise UnreachableError(
            f"cannot connect to ZooKeeper at {spec.hosts}: {type(e).__name__} {e}"
        ) from None
    except OSError as e:
        close(client)
        raise UnreachableError(f"cannot connect to ZooKeeper at {spec.hosts}: {e}") from None
    return client


def _probe(hosts: str, timeout: float) -> bool:
    """Fail at once, naming the cause, when no host of the connect string can be reached at all.

    kazoo retries a refused connection and an unknown host alike until its timeout and then says only
    "timed out"; an operator needs "nothing listens there" or "no such host" instead, without the wait.
    Returns whether some host accepted a TCP connection (only then can a timeout mean a TLS port).
    """
    causes: list[str] = []
    per_host = min(max(timeout, 0.1), 2.0)
    for entry in hosts.split(","):
        host, _, port_text = entry.strip().rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        if not port_text.isdigit():
            host, port_text = entry.strip().strip("[]"), "2181"
        port = int(port_text)
        try:
            addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as e:
            causes.append(f"{host}: cannot resolve the name ({e.strerror})")
            continue
        for family, kind, proto, _, address in addresses:
            try:
                with socket.socket(family, kind, proto) as sock:
                    sock.settimeout(per_host)
                    sock.connect(address)
                return True
            except ConnectionRefusedError:
                causes.append(f"{host}:{port}: connection refused (nothing listens there)")
            except OSError as e:
                causes.append(f"{host}:{port}: {e.strerror or type(e).__name__}")
    if causes and all("refused" in c or "resolve" in c for c in causes):
        unique = list(dict.fromkeys(causes))
        if "," not in hosts:  # one host: its name is already in the sentence
            unique = [c.split(": ", 1)[1] for c in unique]
        raise UnreachableError(f"cannot reach ZooKeeper at {hosts}: " + "; ".join(unique))
    return False  # timeouts or other errors: let kazoo try for its full timeout


def _silent_port_hint(hosts: str, timeout: float) -> str:
    """Why a port took the TCP connection but not ZooKeeper's plaintext handshake, by asking it: a
    TLS handshake, then ZooKeeper's ConnectRequest inside it. Only a ZooKeeper answer over TLS (or a
    TLS alert, a server wanting a client certificate) makes it a TLS port; anything else (an HTTP
    server, a proxy or firewall that accepts and never answers) is not ZooKeeper at all."""
    for entry in hosts.split(","):
        host, _, port_text = entry.strip().rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        if not port_text.isdigit():
            host, port_text = entry.strip().strip("[]"), "2181"
        if _zookeeper_over_tls(host, int(port_text), timeout):
            return " (it speaks TLS: pass --zk-tls-ca, and --zk-tls-cert/--zk-tls-key if it wants a client certificate)"
    return (
        " (something accepted the connection but did not answer as ZooKeeper, with or without TLS: "
        "check the host and port)"
    )


#: ZooKeeper's ConnectRequest (jute): protocolVersion 0, lastZxidSeen 0, timeOut, sessionId 0, an
#: empty 16-byte password, readOnly false; framed by its int32 length
_CONNECT_REQUEST = struct.pack(">iqiqi16sB", 0, 0, 4000, 0, 16, b"\0" * 16, 0)


def _zookeeper_over_tls(host: str, port: int, timeout: float) -> bool:
    """Whether `host:port` completes a TLS handshake and answers ZooKeeper's ConnectRequest in it."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # a diagnosis only: nothing is sent but the empty request
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            with context.wrap_socket(raw, server_hostname=host) as sock:
                sock.sendall(struct.pack(">i", len(_CONNECT_REQUEST)) + _CONNECT_REQUEST)
                head = sock.recv(8)
    except ssl.SSLError as e:  # an alert is TLS spoken (e.g. a client certificate required)
        return "ALERT" in str(e.reason or "").upper()
    except OSError:
        return False
    # ConnectResponse: int32 length (>= 36), protocolVersion 0
    if len(head) < 8:
        return False
    length, version = struct.unpack(">ii", head)
    return length >= 36 and version == 0


def ensure_chroot(
    connect_string: str, auth: Sequence[str] = (), timeout: float = 10.0, security: ZkSecurity | None = None
) -> None:
    """Create the connect string's chroot path if it is missing (kazoo cannot from inside it)."""
    spec = ConnectSpec.parse(connect_string)
    if not spec.chroot:
        return
    client = connect(spec.hosts, auth=auth, timeout=timeout, security=security)
    try:
        client.ensure_path(spec.chroot)
    finally:
        close(client)


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
