"""A standalone ZooKeeper server on a free loopback port, for tests, the demo and benchmarks.

It runs the real server, never a fake, so everything zk2kraft does is exercised against the same code
production clusters run: Debian's `zookeeper` package (or `ZK_HOME`) by default, or, with `version=`,
ZooKeeper's own release jars of that version from Maven Central (`zk_fixtures.kafka_dist`, cached in
~/.cache/zk2kraft), so the core tests run against every line operators run behind Kafka (3.5 to 3.9).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from migrator.errors import UnreachableError, ZkKraftError
from zk_fixtures.kafka_dist import classpath as libs_classpath
from zk_fixtures.kafka_dist import zookeeper_libs

DEBIAN_JARS = "/usr/share/java"
_DEBIAN_NEEDED = [
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-simple.jar",
    "netty-common.jar",
    "netty-buffer.jar",
    "netty-codec.jar",
    "netty-handler.jar",
    "netty-resolver.jar",
    "netty-transport.jar",
    "netty-transport-native-unix-common.jar",
    "netty-transport-classes-epoll.jar",
    "netty-transport-native-epoll.jar",
    "commons-cli.jar",
    "metrics-core.jar",
    "snappy-java.jar",
    "jackson-databind.jar",
    "jackson-core.jar",
    "jackson-annotations.jar",
    "commons-io.jar",
    "audience-annotations.jar",
]


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for a TLS test set-up: one CA, a server key+certificate, a client key+certificate."""

    ca: str
    server_pem: str  # private key followed by its certificate (ZooKeeper's PEM keystore format)
    client_cert: str
    client_key: str


def make_test_certs(
    directory: str | os.PathLike[str], hostnames: tuple[str, ...] = ("localhost",)
) -> TlsFiles:
    """A throw-away CA and server/client certificates made with `openssl`, valid for 127.0.0.1.

    Test material only: keys are unencrypted and the CA signs whatever this function asks.
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ZooKeeperNotInstalled(
            "openssl not found: install it (apt-get install openssl) to make test certificates"
        )

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=d, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=zk2kraft test CA")  # fmt: skip
    san = ",".join(["IP:127.0.0.1", *(f"DNS:{h}" for h in hostnames)])
    for name in ("server", "client"):
        (d / f"{name}.ext").write_text(f"subjectAltName={san}\nextendedKeyUsage=serverAuth,clientAuth\n")
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN=zk2kraft-{name}")  # fmt: skip
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext")  # fmt: skip
    # ZooKeeper's PEM keystore wants a PKCS#8 key and the certificate in one file.
    run("pkcs8", "-topk8", "-nocrypt", "-in", "server.key", "-out", "server.p8")
    (d / "server.pem").write_text((d / "server.p8").read_text() + (d / "server.crt").read_text())
    return TlsFiles(
        ca=str(d / "ca.pem"),
        server_pem=str(d / "server.pem"),
        client_cert=str(d / "client.crt"),
        client_key=str(d / "client.key"),
    )


class ZooKeeperNotInstalled(ZkKraftError):
    """Neither ZK_HOME nor Debian's package provides ZooKeeper's jars."""


def find_classpath(version: str | None = None) -> str:
    """Classpath of a ZooKeeper installation: release `version` fetched from Maven Central (on first
    use), else `ZK_HOME` (a binary release), else Debian's jars."""
    if version is not None:
        return libs_classpath(zookeeper_libs(version))
    zk_home = os.environ.get("ZK_HOME")
    if zk_home:
        jars = sorted(glob.glob(os.path.join(zk_home, "lib", "*.jar")))
        jars += sorted(glob.glob(os.path.join(zk_home, "*.jar")))
        if not any("zookeeper" in Path(j).name for j in jars):
            raise ZooKeeperNotInstalled(f"ZK_HOME={zk_home} holds no zookeeper jar under lib/")
        return ":".join(jars)
    if not os.path.exists(os.path.join(DEBIAN_JARS, "zookeeper.jar")):
        raise ZooKeeperNotInstalled(
            "ZooKeeper not found: install Debian's package (apt-get install zookeeper) or set ZK_HOME"
        )
    jars = [os.path.join(DEBIAN_JARS, j) for j in _DEBIAN_NEEDED]
    return ":".join(j for j in jars if os.path.exists(j))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def four_letter(host: str, port: int, word: str, timeout: float = 2.0) -> str:
    """Send a four-letter word (`ruok`, `srvr`, `mntr`) and return the reply, '' on failure."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


@dataclass
class ZkServerInfo:
    host: str
    port: int
    pid: int
    data_dir: str

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"


class ZkServer:
    """One standalone server with its own data dir; `stop()` leaves no process behind."""

    STATE_FILE = "zk2kraft-server.json"

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        port: int | None = None,
        host: str = "127.0.0.1",
        snap_count: int | None = None,
        extra_config: dict[str, str] | None = None,
        jvm_opts: list[str] | None = None,
        sasl_users: dict[str, str] | None = None,
        tls: TlsFiles | None = None,
        tls_client_auth: str = "need",
        version: str | None = None,
    ) -> None:
        """`version` (e.g. "3.5.10") runs that ZooKeeper release from Maven Central instead of the
        installed one; `sasl_users` (user → password) turns on SASL DIGEST-MD5 through a JAAS `Server` section;
        `tls` adds a secure client port (Netty, PEM key and trust stores) next to the plain one, which
        stays for four-letter words and tests that compare both.
        """
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self.port = port
        self.snap_count = snap_count
        self.extra_config = dict(extra_config or {})
        self.jvm_opts = list(jvm_opts or [])
        self.sasl_users = dict(sasl_users or {})
        self.tls = tls
        self.tls_client_auth = tls_client_auth
        self.version = version
        self.secure_port: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def secure_connect_string(self) -> str:
        if self.secure_port is None:
            raise ValueError("this server has no TLS port (start it with tls=...)")
        return f"{self.host}:{self.secure_port}"

    def _security_config(self) -> dict[str, str]:
        cfg: dict[str, str] = {}
        if self.sasl_users:
            cfg["authProvider.1"] = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
        if self.tls is not None:
            if self.secure_port is None:
                self.secure_port = free_port()
            cfg.update(
                {
                    "secureClientPort": str(self.secure_port),
                    "secureClientPortAddress": self.host,
                    "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
                    "ssl.keyStore.location": self.tls.server_pem,
                    "ssl.keyStore.type": "PEM",
                    "ssl.trustStore.location": self.tls.ca,
                    "ssl.trustStore.type": "PEM",
                    "ssl.clientAuth": self.tls_client_auth,
                    # ZooKeeper's x509 provider makes the client certificate an identity (auth ACLs).
                    "authProvider.2": "org.apache.zookeeper.server.auth.X509AuthenticationProvider",
                }
            )
        return cfg

    def _security_jvm_opts(self) -> list[str]:
        if not self.sasl_users:
            return []
        users = "".join(f'\n  user_{u}="{p}"' for u, p in self.sasl_users.items())
        jaas = self.data_dir / "jaas.conf"
        jaas.write_text(
            f"Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required{users};\n}};\n"
        )
        return [f"-Djava.security.auth.login.config={jaas}"]

    def _write_config(self) -> Path:
        cfg = {
            "tickTime": "2000",
            "initLimit": "10",
            "syncLimit": "5",
            "dataDir": str(self.data_dir / "data"),
            "clientPort": str(self.port),
            "clientPortAddress": self.host,
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "*",
            "maxClientCnxns": "0",
            "autopurge.purgeInterval": "0",
        }
        if self.snap_count:
            cfg["snapCount"] = str(self.snap_count)
        cfg.update(self._security_config())
        cfg.update(self.extra_config)
        path = self.data_dir / "zoo.cfg"
        path.write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
        return path

    def start(self, timeout: float = 30.0) -> ZkServer:
        """Start and wait until it answers `ruok` and serves; on failure show the server's own last log lines."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "data").mkdir(exist_ok=True)
        java = shutil.which("java")
        if java is None:
            raise ZooKeeperNotInstalled(
                "java not found: install a JRE (apt-get install default-jre-headless)"
            )
        if self.port is None:
            self.port = free_port()
        cfg = self._write_config()
        log_path = self.data_dir / "zookeeper.log"
        cmd = [
            java,
            "-Xmx512m",
            "-Dzookeeper.4lw.commands.whitelist=*",
            "-Dzookeeper.admin.enableServer=false",
            *self._security_jvm_opts(),
            *self.jvm_opts,
            "-cp",
            find_classpath(self.version),
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(cfg),
        ]
        log = open(log_path, "ab")  # noqa: SIM115 - the child owns it for its lifetime
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            # `ruok` answers before the server serves requests; `srvr` tells when it does.
            if four_letter(self.host, self.port, "ruok", timeout=1.0) == "imok" and "Mode:" in four_letter(
                self.host, self.port, "srvr", timeout=1.0
            ):
                self._save_state()
                return self
            time.sleep(0.1)
        tail = log_path.read_text(errors="replace").splitlines()[-15:]
        self.stop()
        raise UnreachableError(
            f"ZooKeeper did not start on {self.connect_string} within {timeout:.0f}s; "
            f"last log lines: {' | '.join(tail)}"
        )

    def _save_state(self) -> None:
        assert self.proc is not None and self.port is not None
        info = {"host": self.host, "port": self.port, "pid": self.proc.pid, "data_dir": str(self.data_dir)}
        (self.data_dir / self.STATE_FILE).write_text(json.dumps(info))

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `timeout`; reaps the process."""
        if self.proc is not None:
            _terminate(self.proc.pid, timeout, self.proc)
            self.proc = None
        with contextlib.suppress(FileNotFoundError):
            (self.data_dir / self.STATE_FILE).unlink()

    def kill(self) -> None:
        """SIGKILL without a clean shutdown, for crash tests."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart(self, timeout: float = 30.0) -> ZkServer:
        """Stop and start again on the same port and data, as an operator's restart would."""
        self.stop()
        return self.start(timeout)

    def __enter__(self) -> ZkServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _terminate(pid: int, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None:
            if proc.poll() is not None:
                return
        elif not _alive(pid):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if proc is not None:
        proc.wait()


def read_state(data_dir: str | os.PathLike[str]) -> ZkServerInfo | None:
    """The server a previous `zk2kraft zk start` left running in `data_dir`, if it is still alive."""
    path = Path(data_dir) / ZkServer.STATE_FILE
    try:
        info = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    if not _alive(int(info["pid"])):
        return None
    return ZkServerInfo(
        host=info["host"], port=int(info["port"]), pid=int(info["pid"]), data_dir=info["data_dir"]
    )


def start_detached(data_dir: str | os.PathLike[str], port: int | None = None) -> ZkServerInfo:
    """Start a server that outlives this process (for `zk2kraft zk start`)."""
    existing = read_state(data_dir)
    if existing is not None:
        return existing
    server = ZkServer(data_dir, port=port).start()
    assert server.proc is not None and server.port is not None
    return ZkServerInfo(server.host, server.port, server.proc.pid, str(server.data_dir))


def stop_detached(data_dir: str | os.PathLike[str], timeout: float = 10.0) -> bool:
    """Stop the server `zk2kraft zk start` left in `data_dir`; False if none was running."""
    info = read_state(data_dir)
    if info is None:
        return False
    _terminate(info.pid, timeout)
    with contextlib.suppress(FileNotFoundError):
        (Path(data_dir) / ZkServer.STATE_FILE).unlink()
    return True
