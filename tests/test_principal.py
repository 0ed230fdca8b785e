"""TLS principals as Kafka names them: Kafka's SslPrincipalMapperTest cases, and subject DNs rendered
as Java's X500Principal.getName() renders them (expected strings recorded from a JDK 17 run over the
same openssl subjects)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from migrator.controller.security.principal import (
    ANONYMOUS,
    NoMatchingRule,
    SslPrincipalMapper,
    java_host_address,
    rfc2253_subject,
    ssl_principal,
)
from migrator.errors import BadInputError

VALID = [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
]

INVALID = [
    "default",
    "DEFAUL",
    "DEFAULT/L",
    "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
]

SPLITTING = [
    ("[]", ""),
    ("[DEFAULT]", "DEFAULT"),
    ("[RULE:/]", "RULE://"),
    ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"),
    ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    (
        "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
        "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
    ),
    ("[]", ",   , , ,      , , ,   "),
    ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
    ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
    (
        "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
        "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
    ),
]


@pytest.mark.parametrize("rules", VALID)
def test_kafkas_valid_rules(rules: str) -> None:
    SslPrincipalMapper(rules)


@pytest.mark.parametrize("rules", INVALID)
def test_kafkas_invalid_rules(rules: str) -> None:
    with pytest.raises(BadInputError, match="invalid rule"):
        SslPrincipalMapper(rules)


@pytest.mark.parametrize(("expected", "rules"), SPLITTING)
def test_kafkas_rule_splitting(expected: str, rules: str) -> None:
    assert str(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_kafkas_mapping_cases() -> None:
    mapper = SslPrincipalMapper(
        ", ".join(
            [
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            ]
        )
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


def test_kafkas_comma_with_whitespace() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_back_references_beyond_the_groups_are_literal_and_no_match_is_refused() -> None:
    assert SslPrincipalMapper("RULE:^CN=(.*)$/$1@$4/").name("CN=x") == "x@$4"
    assert SslPrincipalMapper("RULE:^CN=(.*)$/$12/").name("CN=x") == "x2"
    with pytest.raises(NoMatchingRule, match="No rules apply to OU=x"):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/").name("OU=x")
    assert SslPrincipalMapper(None).name("CN=a") == "CN=a"


# -- subject DNs from real certificates -----------------------------------------------------

JAVA_RENDERED = [
    ("/C=US/ST=MD/L=Fulton/O=mycp/OU=SME/CN=Duke", [], "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US"),
    (
        "/CN=broker-1/emailAddress=ops@example.com/O=Acme, Inc.",
        [],
        "O=Acme\\, Inc.,1.2.840.113549.1.9.1=#160f6f7073406578616d706c652e636f6d,CN=broker-1",
    ),
    ('/OU=x,y/CN= a#b=c\\+d;<e>"f"\\\\g ', [], 'CN=\\ a\\#b\\=c\\+d\\;\\<e\\>\\"f\\"\\\\g\\ ,OU=x\\,y'),
    (
        "/DC=com/DC=example/O=Org/OU=Eng+UID=jdoe/CN=John Doe",
        ["-multivalue-rdn"],
        "CN=John Doe,OU=Eng+UID=jdoe,O=Org,DC=example,DC=com",
    ),
    ("/CN=Jürgen Müller/O=Straße", ["-utf8"], "O=Straße,CN=Jürgen Müller"),
]


def _cert(tmp_path: Path, subject: str, extra: list[str]) -> bytes:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl not installed")
    out = tmp_path / "c.der"
    key = tmp_path / "k.pem"
    args = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    args += ["-keyout", str(key), "-days", "1", "-subj", subject, *extra, "-outform", "DER", "-out", str(out)]
    subprocess.run([openssl, *args], check=True, capture_output=True)
    return out.read_bytes()


@pytest.mark.parametrize(("subject", "extra", "java"), JAVA_RENDERED, ids=[j for _, _, j in JAVA_RENDERED])
def test_subject_rendered_as_java_renders_it(
    tmp_path: Path, subject: str, extra: list[str], java: str
) -> None:
    assert rfc2253_subject(_cert(tmp_path, subject, extra)) == java


def test_principal_of_a_certificate_and_of_none(tmp_path: Path) -> None:
    der = _cert(tmp_path, "/C=US/ST=MD/L=Fulton/O=mycp/OU=SME/CN=Duke", [])
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/L,DEFAULT")
    assert ssl_principal(der, mapper) == "User:duke@sme"
    assert ssl_principal(None, mapper) == ANONYMOUS


def test_truncated_or_foreign_der_is_bad_input() -> None:
    for der in (b"\x30\x82\x01", b"\x30\x03\x02\x01\x05", b""):
        with pytest.raises(BadInputError, match="DER"):
            rfc2253_subject(der)


def test_large_first_arcs_and_unknown_attributes_render_as_java_does() -> None:
    # a subject with one AVA whose type is OID 2.999.3 (first subidentifier 1079 = 2*40+999)
    oid = bytes([0x06, 0x03, 0x88, 0x37, 0x03])
    value = bytes([0x0C, 0x02]) + b"hi"
    ava = bytes([0x30, len(oid) + len(value)]) + oid + value
    rdn = bytes([0x31, len(ava)]) + ava
    name = bytes([0x30, len(rdn)]) + rdn
    empty_seq = b"\x30\x00"
    tbs_body = b"\x02\x01\x01" + empty_seq + empty_seq + empty_seq + name
    tbs = bytes([0x30, len(tbs_body)]) + tbs_body
    cert = bytes([0x30, len(tbs)]) + tbs
    assert rfc2253_subject(cert) == "2.999.3=#0c026869"


@pytest.mark.parametrize(
    ("address", "java"),
    [
        ("10.1.2.3", "10.1.2.3"),
        ("::1", "0:0:0:0:0:0:0:1"),
        ("fe80::1%eth0", "fe80:0:0:0:0:0:0:1%eth0"),
        ("2001:db8::abcd:12", "2001:db8:0:0:0:0:abcd:12"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
    ],
)
def test_java_host_address(address: str, java: str) -> None:
    assert java_host_address(address) == java
