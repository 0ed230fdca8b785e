"""The Target: one object carries where and how a command reaches ZooKeeper and the log (issue 12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator import commands
from migrator.commands.target_arg import takes_target
from migrator.errors import BadInputError
from migrator.target import Target


def test_security_options_become_the_targets_security(tmp_path: Path) -> None:
    pem = tmp_path / "client.pem"
    pem.write_text("not parsed here")
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(
        'Client { org.apache.zookeeper.server.auth.DigestLoginModule required username="u" password="s3cret-Pw"; };'
    )
    t = Target.from_options(
        zookeeper="zk:2181/kafka",
        log_dir="/l",
        zk_auth=("digest:a:b",),
        zk_tls_cert=str(pem),
        zk_jaas_config=str(jaas),
        zk_set_acl=True,
        node_id=7,
        metrics_listen="127.0.0.1:0",
    )
    assert t.security.tls is not None and t.security.tls.keyfile == str(pem)  # a PEM keystore holds both
    assert t.security.sasl == {"mechanism": "DIGEST-MD5", "username": "u", "password": "s3cret-Pw"}
    assert t.security.set_acl and t.zk_auth == ("digest:a:b",) and t.node_id == 7
    assert "s3cret-Pw" not in repr(t)  # the SASL password stays out of reprs
    plain = Target.from_options(zookeeper="zk:2181")
    assert plain.security.tls is None and plain.security.sasl is None and not plain.security.set_acl
    assert plain.node_id == commands.DEFAULT_NODE_ID and plain.listen is None


def test_a_missing_tls_file_is_bad_input() -> None:
    with pytest.raises(BadInputError, match="does not exist"):
        Target.from_options(zookeeper="zk:2181", zk_tls_ca="/nonexistent/ca.pem")


def test_open_log_without_a_log_dir_is_bad_input() -> None:
    with pytest.raises(BadInputError, match="--log-dir"):
        Target(zookeeper="zk:2181").open_log()


def test_a_connect_string_is_the_targets_shorthand() -> None:
    seen: list[tuple[Target, tuple, dict]] = []

    @takes_target(log_dir_positional=True)
    def command(target: Target, *args: object, **kwargs: object) -> None:
        seen.append((target, args, kwargs))

    command("zk:2181/k", "/logs", "extra", zk_auth=["digest:a:b"], zk_timeout=3.0, node_id=9, yes=True)
    full = Target(zookeeper="zk:2181/k", log_dir="/logs", zk_auth=("digest:a:b",), zk_timeout=3.0, node_id=9)
    command(full, "extra", yes=True)
    assert seen[0] == seen[1] == (full, ("extra",), {"yes": True})
