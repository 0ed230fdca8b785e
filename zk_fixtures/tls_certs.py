"""Certificates for TLS tests and `demo --secure`, made with the openssl command line for each run: a CA, a server
certificate for 127.0.0.1/localhost, client certificates signed by the CA, and one signed by nobody
the server trusts; on request (`make_expired`), a client and a server certificate that the same CA signed
but whose validity ended in 2020."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Certs", "ExpiredCerts", "make_certs", "make_expired"]


@dataclass(frozen=True)
class Certs:
    ca: Path  # CA certificate (the truststore of both sides)
    server: Path  # server key + certificate chain, one PEM file (ssl.keystore.location)
    server_encrypted: Path  # the same with the key encrypted under `key_password`
    key_password: str
    client_cert: Path
    client_key: Path
    client_dn: str  # as Java renders it (RFC 2253)
    rogue_cert: Path  # self-signed: not trusted by the server
    rogue_key: Path


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _key_and_csr(d: Path, name: str, subject: str) -> None:
    """`name`.key (RSA 2048, unencrypted) and `name`.csr for `subject`, in `d`."""
    _run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-subj",
        subject,
        "-out",
        f"{name}.csr",
        cwd=d,
    )


def _leaf(d: Path, name: str, subject: str, ca: bool = True, san: str | None = None) -> None:
    _key_and_csr(d, name, subject)
    ext = d / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\n" if san else "basicConstraints=CA:FALSE\n")
    if ca:
        _run(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-sha256",
            "-extfile",
            ext.name,
            "-out",
            f"{name}.crt",
            cwd=d,
        )
    else:
        _run(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-signkey",
            f"{name}.key",
            "-days",
            "2",
            "-sha256",
            "-extfile",
            ext.name,
            "-out",
            f"{name}.crt",
            cwd=d,
        )


def make_certs(d: Path) -> Certs:
    d.mkdir(parents=True, exist_ok=True)
    _run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-subj",
        "/CN=zk2kraft test CA",
        "-days",
        "2",
        "-out",
        "ca.crt",
        cwd=d,
    )
    _leaf(d, "server", "/CN=localhost", san="IP:127.0.0.1,DNS:localhost")
    _leaf(d, "client", "/O=example/OU=kafka/CN=broker-1")
    _leaf(d, "rogue", "/CN=broker-1", ca=False)
    server = d / "server.pem"
    server.write_text((d / "server.key").read_text() + (d / "server.crt").read_text())
    password = "keystore-secret-7f3a"
    _run(
        "pkey",
        "-in",
        "server.key",
        "-aes256",
        "-passout",
        f"pass:{password}",
        "-out",
        "server-enc.key",
        cwd=d,
    )
    encrypted = d / "server-enc.pem"
    encrypted.write_text((d / "server-enc.key").read_text() + (d / "server.crt").read_text())
    return Certs(
        ca=d / "ca.crt",
        server=server,
        server_encrypted=encrypted,
        key_password=password,
        client_cert=d / "client.crt",
        client_key=d / "client.key",
        client_dn="CN=broker-1,OU=kafka,O=example",
        rogue_cert=d / "rogue.crt",
        rogue_key=d / "rogue.key",
    )


@dataclass(frozen=True)
class ExpiredCerts:
    """Signed by `Certs.ca`, valid only in January 2020: wrong in nothing but their dates."""

    client_cert: Path  # the DN of `Certs.client_dn`, so only the expiry can be why it is refused
    client_key: Path
    server: Path  # key + certificate, one PEM file, for 127.0.0.1/localhost


_CA_CONFIG = """\
[ca]
default_ca = expired
[expired]
database = index.txt
new_certs_dir = .
certificate = ca.crt
private_key = ca.key
default_md = sha256
policy = any
rand_serial = yes
unique_subject = no
[any]
commonName = supplied
organizationName = optional
organizationalUnitName = optional
[client]
basicConstraints = CA:FALSE
[server]
subjectAltName = IP:127.0.0.1,DNS:localhost
"""


def _expired_leaf(d: Path, name: str, subject: str, extensions: str) -> None:
    """`openssl ca` because OpenSSL 3.0's `x509`/`req` cannot set a start date in the past."""
    _key_and_csr(d, name, subject)
    _run(
        "ca",
        "-batch",
        "-config",
        "expired-ca.cnf",
        "-preserveDN",
        "-notext",
        "-startdate",
        "20200101000000Z",
        "-enddate",
        "20200131000000Z",
        "-extensions",
        extensions,
        "-in",
        f"{name}.csr",
        "-out",
        f"{name}.crt",
        cwd=d,
    )


def make_expired(certs: Certs) -> ExpiredCerts:
    """Expired certificates in the directory of `certs`, signed by its CA."""
    d = certs.ca.parent
    (d / "expired-ca.cnf").write_text(_CA_CONFIG)
    (d / "index.txt").write_text("")
    _expired_leaf(d, "expired-client", "/O=example/OU=kafka/CN=broker-1", "client")
    _expired_leaf(d, "expired-server", "/CN=localhost", "server")
    server = d / "expired-server.pem"
    server.write_text((d / "expired-server.key").read_text() + (d / "expired-server.crt").read_text())
    return ExpiredCerts(
        client_cert=d / "expired-client.crt", client_key=d / "expired-client.key", server=server
    )
