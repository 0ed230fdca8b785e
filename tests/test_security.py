"""Security against a real ZooKeeper started with SASL (DIGEST-MD5, JAAS) and a TLS client port.

The migration runs as the operator would run it (the CLI in its own process) with --zk-set-acl; a
client without credentials then can neither read the SCRAM credentials or delegation tokens nor
change anything zk2kraft or the fixture loader created.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, Id
from migrate_helpers import run_cli

from migrator.zk.connection import ZkSecurity, close, connect, is_sensitive
from zk_fixtures.brokers import BrokerSessions
from zk_fixtures.generator import ClusterSpec, generate
from zk_fixtures.server import TlsFiles, ZkServer, make_test_certs

pytestmark = [pytest.mark.zk, pytest.mark.slow]

USER, PASSWORD = "kafka", "kafka-zk-secret"
SPEC = ["--brokers", "3", "--topics", "4", "--partitions", "2", "--scram-users", "3", "--tokens", "2",
        "--acls", "4", "--reassignments", "0", "--offline-partitions", "0", "--legacy-topics", "0",
        "--pending-deletions", "0"]  # fmt: skip


class Secure:
    def __init__(self, server: ZkServer, tls: TlsFiles, jaas: Path) -> None:
        self.server = server
        self.tls = tls
        self.jaas = jaas

    def tls_args(self, cert: bool = True) -> list[str]:
        args = ["--zk-tls-ca", self.tls.ca]
        return args + (
            ["--zk-tls-cert", self.tls.client_cert, "--zk-tls-key", self.tls.client_key] if cert else []
        )


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secure]:
    base = tmp_path_factory.mktemp("secure-zk")
    tls = make_test_certs(base / "certs")
    jaas = base / "client-jaas.conf"
    # The file Kafka's brokers pass as -Djava.security.auth.login.config, Client section.
    jaas.write_text(
        "Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        f'  username="{USER}"\n  password="{PASSWORD}";\n}};\n'
    )
    server = ZkServer(base / "zk", sasl_users={USER: PASSWORD, "other": "other-pw"}, tls=tls).start()
    try:
        yield Secure(server, tls, jaas)
    finally:
        server.stop()


def _chroot(server: ZkServer) -> str:
    chroot = f"/sec-{uuid.uuid4().hex[:10]}"
    root = connect(server.connect_string)
    try:
        root.create(chroot)
    finally:
        close(root)
    return chroot


def _anonymous(connect_string: str) -> KazooClient:
    return connect(connect_string, security=ZkSecurity())


def _one_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


def test_tls_client_port(secure: Secure) -> None:
    """kazoo's SSL with CA, certificate and key; mutual TLS gives an x509 identity that owns the znodes."""
    chroot = _chroot(secure.server)
    tls_zk = secure.server.secure_connect_string + chroot
    r = run_cli(["fixtures", "load", "-z", tls_zk, *secure.tls_args(), "--zk-set-acl", "--json", *SPEC])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["scram_credentials"] > 0

    # Created over TLS with only the client certificate as identity: ZooKeeper's x509 provider.
    anon = _anonymous(secure.server.connect_string + chroot)
    try:
        acls, _ = anon.get_acls("/brokers/topics")
        owners = {(a.id.scheme, a.id.id) for a in acls if a.perms == 31}
        assert owners and all(scheme == "x509" and "CN=zk2kraft-client" in who for scheme, who in owners)
        with pytest.raises(NoAuthError):
            anon.get_children("/config/users")
    finally:
        close(anon)

    # The same data through the TLS port with the environment variables instead of options.
    r = run_cli(
        ["zk", "export", "-z", tls_zk, "--out", str(Path(secure.tls.ca).parent / "exp.parquet"), "--json"],
        env={
            "ZK2KRAFT_ZK_TLS_CA": secure.tls.ca,
            "ZK2KRAFT_ZK_TLS_CERT": secure.tls.client_cert,
            "ZK2KRAFT_ZK_TLS_KEY": secure.tls.client_key,
        },  # fmt: skip
    )
    assert r.returncode == 0, r.stderr

    # Plain text to the TLS port, TLS without the client certificate the server requires, TLS to the
    # plain port, a CA that does not exist: each one line and its exit code.
    out = ["--out", str(Path(secure.tls.ca).parent / "never.parquet")]
    r = run_cli(["zk", "export", "-z", tls_zk, "--zk-timeout", "3", *out])
    assert r.returncode == 3 and "cannot reach ZooKeeper" in _one_line(r.stderr)
    assert "it speaks TLS: pass --zk-tls-ca" in r.stderr, r.stderr  # told apart from a silent port (issue 31)
    r = run_cli(["zk", "export", "-z", tls_zk, "--zk-timeout", "3", *secure.tls_args(cert=False), *out])
    assert r.returncode == 3, r.stderr
    _one_line(r.stderr)
    plain = secure.server.connect_string + chroot
    r = run_cli(["zk", "export", "-z", plain, "--zk-timeout", "3", *secure.tls_args(), *out])
    assert r.returncode == 3, r.stderr
    _one_line(r.stderr)
    r = run_cli(["zk", "export", "-z", tls_zk, "--zk-tls-ca", "/nonexistent/ca.pem", *out])
    assert (
        r.returncode == 2
        and "'/nonexistent/ca.pem' does not exist" in r.stderr
        and "Traceback" not in r.stderr
    )


def test_sasl_set_acl_keeps_secrets_and_znodes_from_anonymous_clients(secure: Secure, tmp_path: Path) -> None:
    chroot = _chroot(secure.server)
    zk = secure.server.connect_string + chroot
    sasl = ["--zk-jaas-config", str(secure.jaas), "--zk-set-acl"]
    r = run_cli(["fixtures", "load", "-z", zk, *sasl, "--json", *SPEC])
    assert r.returncode == 0, r.stderr

    # A wrong SASL password is refused in one line (exit 3), and so is --zk-set-acl without identity.
    r = run_cli(
        ["zk", "export", "-z", zk, "--zk-auth", f"sasl:{USER}:wrong", "--out", str(tmp_path / "e.parquet")],
        env={"ZK2KRAFT_ZK_TIMEOUT": "60"},  # the refusal comes at once; a loaded machine's handshake may not
    )
    assert r.returncode == 3, r.stderr
    assert "refused" in _one_line(r.stderr) and "wrong" not in r.stderr
    r = run_cli(["status", "-z", zk, "-l", str(tmp_path / "x"), "--zk-set-acl"])
    assert r.returncode == 2 and "authenticated identity" in _one_line(r.stderr)

    # Migrate to dual-write as the SASL identity, the brokers registered as Kafka's would be.
    generated = generate(_spec_from_args(SPEC))
    sessions = BrokerSessions(
        zk, generated.image, generated.control, auth=[f"sasl:{USER}:{PASSWORD}"]
    ).start()
    log_dir = tmp_path / "kraft"
    try:
        r = run_cli(["migrate", "-z", zk, "-l", str(log_dir), *sasl, "--brokers-from-zk", "--yes", "--json"])
        assert r.returncode == 0, r.stderr + r.stdout
        # A SCRAM user and a topic made during dual-write reach ZooKeeper through the fenced writer.
        pw = tmp_path / "pw"
        pw.write_text("alice-password\n")
        common = ["-z", zk, "-l", str(log_dir), *sasl, "--json"]
        r = run_cli(["admin", "upsert-scram", "alice", "--password-file", str(pw), *common])
        assert r.returncode == 0, r.stderr
        r = run_cli(
            ["admin", "create-topic", "made-in-dual-write", "-p", "2", "--replication-factor", "1", *common]
        )
        assert r.returncode == 0, r.stderr
    finally:
        sessions.close()

    owner = ACL(31, Id("sasl", USER))
    world_read = ACL(1, Id("world", "anyone"))
    admin = connect(zk, auth=[f"sasl:{USER}:{PASSWORD}"], security=ZkSecurity())
    anon = _anonymous(zk)
    other = connect(zk, auth=["sasl:other:other-pw"], security=ZkSecurity())
    try:
        paths = _all_paths(admin)
        users = admin.get_children("/config/users")
        tokens = admin.get_children("/delegation_token/tokens")
        assert "alice" in users and len(tokens) == 2
        assert "/migration" in paths and "/brokers/topics/made-in-dual-write" in paths
        for path in paths:
            if path.startswith("/brokers/ids/") or path == "/controller":
                continue  # the brokers' and ZK controller's own ephemeral registrations
            acls, _ = admin.get_acls(path)
            expected = [owner] if is_sensitive(path) else [owner, world_read]
            assert sorted(acls, key=str) == sorted(expected, key=str), path
        # Nobody else can read a credential, a token, or the list of users.
        for client in (anon, other):
            for path in ["/config/users", "/config/users/alice", f"/config/users/{users[0]}",
                         f"/delegation_token/tokens/{tokens[0]}", "/config/brokers"]:  # fmt: skip
                with pytest.raises(NoAuthError):
                    client.get(path)
            # ... nor change anything zk2kraft or the loader created; reading the rest is allowed.
            assert client.get("/brokers/topics/made-in-dual-write")[0]
            for write in (
                lambda c: c.set("/migration", b"{}"),
                lambda c: c.set("/brokers/topics/made-in-dual-write", b"{}"),
                lambda c: c.create("/config/topics/evil", b"{}"),
                lambda c: c.delete("/brokers/topics/made-in-dual-write", recursive=False),
                lambda c: c.set_acls("/config/topics", [ACL(31, Id("world", "anyone"))]),
                lambda c: c.create("/admin/delete_topics/made-in-dual-write"),
            ):
                with pytest.raises(NoAuthError):
                    write(client)
    finally:
        for c in (admin, anon, other):
            close(c)


def test_kafka_properties_map_onto_security_options(secure: Secure, tmp_path: Path) -> None:
    """--config with Kafka's zookeeper.ssl.* and zookeeper.set.acl: PEM stores work, JKS is one line."""
    chroot = _chroot(secure.server)
    both = tmp_path / "client.pem"
    both.write_text(Path(secure.tls.client_key).read_text() + Path(secure.tls.client_cert).read_text())
    props = tmp_path / "controller.properties"
    props.write_text(
        f"zookeeper.connect={secure.server.secure_connect_string}{chroot}\n"
        "zookeeper.ssl.client.enable=true\n"
        f"zookeeper.ssl.truststore.location={secure.tls.ca}\nzookeeper.ssl.truststore.type=PEM\n"
        f"zookeeper.ssl.keystore.location={both}\nzookeeper.ssl.keystore.type=PEM\n"
        "zookeeper.set.acl=true\n"
    )
    r = run_cli(["--config", str(props), "fixtures", "load", "--json", *SPEC])
    assert r.returncode == 0, r.stderr
    anon = _anonymous(secure.server.connect_string + chroot)
    try:
        with pytest.raises(NoAuthError):
            anon.get_children("/config/users")
    finally:
        close(anon)
    props.write_text(props.read_text().replace("truststore.type=PEM", "truststore.type=JKS"))
    r = run_cli(["--config", str(props), "zk", "export", "--out", str(tmp_path / "e.parquet")])
    assert r.returncode == 2 and "PEM" in _one_line(r.stderr)


def _spec_from_args(args: list[str]) -> ClusterSpec:
    values = {args[i][2:].replace("-", "_"): int(args[i + 1]) for i in range(0, len(args), 2)}
    return ClusterSpec.checked(**values)


def _all_paths(client: KazooClient) -> list[str]:
    out: list[str] = []
    stack = ["/"]
    while stack:
        path = stack.pop()
        for child in client.get_children(path):
            full = f"{path.rstrip('/')}/{child}"
            if full == "/zookeeper":
                continue
            out.append(full)
            stack.append(full)
    return out
