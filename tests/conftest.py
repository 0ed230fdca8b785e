"""Session fixtures: one real ZooKeeper server for the whole run, a fresh chroot per test.

`ZK2KRAFT_ZOOKEEPER` points the suite at an existing ensemble instead of starting one.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from ci_skips import (  # noqa: F401  (pytest's hooks, found by name in this module)
    pytest_collectreport,
    pytest_runtest_logreport,
    pytest_sessionfinish,
    pytest_terminal_summary,
)
from kazoo.client import KazooClient

from migrator.zk.connection import close, connect
from zk_fixtures.server import ZkServer


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Connect string (no chroot) of the session's ZooKeeper."""
    external = os.environ.get("ZK2KRAFT_ZOOKEEPER")
    if external:
        yield external
        return
    server = ZkServer(tmp_path_factory.mktemp("zk-server")).start()
    try:
        yield server.connect_string
    finally:
        server.stop()


@pytest.fixture
def zk_connect(zk_server: str) -> Iterator[str]:
    """Connect string confined to a fresh chroot, removed after the test."""
    chroot = f"/zk2kraft-test-{uuid.uuid4().hex[:12]}"
    root = connect(zk_server)
    root.create(chroot)
    try:
        yield zk_server + chroot
    finally:
        root.delete(chroot, recursive=True)
        close(root)


@pytest.fixture
def zk(zk_connect: str) -> Iterator[KazooClient]:
    client = connect(zk_connect)
    try:
        yield client
    finally:
        close(client)
