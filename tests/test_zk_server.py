"""The launcher starts a real server, answers ruok, and leaves no process behind."""

from __future__ import annotations

import os

import pytest

from migrator.errors import BadInputError, UnreachableError
from migrator.zk.connection import ConnectSpec, close, connect
from zk_fixtures.server import ZkServer, four_letter, read_state, start_detached, stop_detached


def test_start_stop_leaves_no_process(tmp_path):
    server = ZkServer(tmp_path / "zk").start()
    pid = server.proc.pid
    try:
        assert four_letter(server.host, server.port, "ruok") == "imok"
        assert "Mode: standalone" in four_letter(server.host, server.port, "srvr")
    finally:
        server.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert four_letter(server.host, server.port, "ruok") == ""


def test_detached_server_state(tmp_path):
    info = start_detached(tmp_path / "zk")
    try:
        assert read_state(tmp_path / "zk").pid == info.pid
        assert start_detached(tmp_path / "zk").pid == info.pid  # idempotent
    finally:
        assert stop_detached(tmp_path / "zk")
    assert read_state(tmp_path / "zk") is None
    assert not stop_detached(tmp_path / "zk")


@pytest.mark.zk
def test_chroot_is_honoured(zk_server, zk):
    zk.create("/brokers/ids", makepath=True)
    assert zk.get_children("/brokers") == ["ids"]
    root = connect(zk_server)
    try:
        assert not root.exists("/brokers/ids") or root.get_children("/") != ["brokers"]
    finally:
        close(root)


@pytest.mark.zk
def test_missing_chroot_is_one_clear_error(zk_server):
    with pytest.raises(BadInputError, match="chroot /no-such-chroot does not exist"):
        connect(zk_server + "/no-such-chroot")


def test_unreachable_is_exit_3():
    from zk_fixtures.server import free_port

    with pytest.raises(UnreachableError) as e:
        connect(f"127.0.0.1:{free_port()}", timeout=1.0)
    assert e.value.exit_code == 3


@pytest.mark.parametrize("bad", ["", "localhost", "host:notaport", "host:99999", "h:1//x"])
def test_bad_connect_strings(bad):
    with pytest.raises(BadInputError):
        ConnectSpec.parse(bad)


def test_connect_spec_parses_chroot():
    spec = ConnectSpec.parse("a:2181,b:2181/kafka/prod/")
    assert spec.hosts == "a:2181,b:2181" and spec.chroot == "/kafka/prod"


@pytest.mark.zk
def test_digest_auth_is_added_and_refusal_is_one_line(zk_server, zk_connect):
    from kazoo.security import make_digest_acl

    from migrator.errors import PermissionDeniedError

    owner = connect(zk_connect, auth=["digest:alice:secret"])
    try:
        owner.create("/private", b"x", acl=[make_digest_acl("alice", "secret", all=True)])
    finally:
        close(owner)
    client = connect(zk_connect, auth=["digest:alice:secret"])
    try:
        assert client.get("/private")[0] == b"x"
        client.delete("/private")  # the fixture's cleanup cannot list a node only alice may read
    finally:
        close(client)
    with pytest.raises(PermissionDeniedError, match="refused the --zk-auth credentials"):
        connect(zk_connect, auth=["nosuchscheme:whatever"])
