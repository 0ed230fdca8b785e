"""Session fixtures: one real ZooKeeper server for the whole run, a fresh chroot per test.

`ZK2KRAFT_ZOOKEEPER` points the suite at an existing ensemble instead of starting one;
`ZK2KRAFT_ZK_VERSION=3.5.10` makes the session's server that ZooKeeper release (Maven Central's jars,
`zk_fixtures.kafka_dist.ZOOKEEPER_VERSIONS`) instead of the installed one.

The ZooKeeper-version matrix: tests marked `zk_matrix` (the core migration tests: copy, dual-write,
rollback, audit) also run once against each release `--zk-matrix` / `ZK2KRAFT_ZK_MATRIX` names
(`all` = every line from 3.5 to 3.9, or a comma-separated list); `make test` sets it to `all`. They get
the version through the `zk_version` fixture, which `zk_server` follows, so a matrix test needs nothing
but the usual `zk` / `zk_connect` / `zk_server` fixtures. A release that cannot be fetched fails the
tests that need it with one line (`KafkaFetchError`); nothing is skipped.
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
from zk_fixtures.kafka_dist import ZOOKEEPER_VERSIONS
from zk_fixtures.server import ZkServer

MATRIX_MARK = "zk_matrix"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--zk-matrix",
        default=os.environ.get("ZK2KRAFT_ZK_MATRIX", ""),
        help="run the tests marked zk_matrix also against these ZooKeeper releases: 'all' "
        f"({', '.join(ZOOKEEPER_VERSIONS)}) or a comma-separated list (env ZK2KRAFT_ZK_MATRIX)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MATRIX_MARK}: a core migration test run against every ZooKeeper release of --zk-matrix",
    )


def default_zk_version() -> str | None:
    """The release the session's own server runs: `ZK2KRAFT_ZK_VERSION`, else None (the installed one)."""
    return os.environ.get("ZK2KRAFT_ZK_VERSION") or None


def matrix_versions(config: pytest.Config) -> list[str]:
    """The releases `--zk-matrix` names, in order, without the session server's own release."""
    value = str(config.getoption("--zk-matrix")).strip()
    if value in ("", "off", "none"):
        return []
    versions = (
        list(ZOOKEEPER_VERSIONS) if value == "all" else [v.strip() for v in value.split(",") if v.strip()]
    )
    unknown = [v for v in versions if v.count(".") != 2 or not v.replace(".", "").isdigit()]
    if unknown:
        raise pytest.UsageError(f"--zk-matrix: {', '.join(unknown)} is no ZooKeeper release (e.g. 3.5.10)")
    return [v for v in dict.fromkeys(versions) if v != default_zk_version()]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A zk_matrix test runs once on the session's server and once per --zk-matrix release."""
    if metafunc.definition.get_closest_marker(MATRIX_MARK) is None:
        return
    if "zk_version" not in metafunc.fixturenames:
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid} is marked {MATRIX_MARK} but uses no ZooKeeper fixture "
            "(zk, zk_connect, zk_server or zk_version)"
        )
    versions = matrix_versions(metafunc.config)
    if versions:
        default = default_zk_version()
        metafunc.parametrize(
            "zk_version",
            [default, *versions],
            ids=[f"zk-{default or 'installed'}", *(f"zk-{v}" for v in versions)],
            scope="session",
            # Through the zk_version fixture itself, not a pseudo-fixture beside it: a change of release
            # then finishes zk_version's cached value and with it zk_server's, which an earlier test
            # computed for the installed server (directly parametrized, zk_server kept that server).
            indirect=True,
        )


class SessionServers:
    """The session's ZooKeeper servers: the default one for the whole run and, started on demand, one
    of each matrix release; pytest groups a release's tests together, so at most one of those runs at
    a time (the previous one stops when the next is asked for)."""

    def __init__(self, base: pytest.TempPathFactory) -> None:
        self.base = base
        self.default: ZkServer | None = None
        self.release: ZkServer | None = None

    def connect_string(self, version: str | None) -> str:
        if version == default_zk_version():
            external = os.environ.get("ZK2KRAFT_ZOOKEEPER")
            if external:
                return external
            if self.default is None:
                self.default = ZkServer(self.base.mktemp("zk-server"), version=version).start()
            return self.default.connect_string
        if self.release is None or self.release.version != version:
            if self.release is not None:
                self.release.stop()
                self.release = None
            self.release = ZkServer(self.base.mktemp(f"zk-{version}"), version=version).start()
        return self.release.connect_string

    def stop(self) -> None:
        for server in (self.release, self.default):
            if server is not None:
                server.stop()


@pytest.fixture(scope="session")
def zk_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionServers]:
    servers = SessionServers(tmp_path_factory)
    try:
        yield servers
    finally:
        servers.stop()


@pytest.fixture(scope="session")
def zk_version(request: pytest.FixtureRequest) -> str | None:
    """The ZooKeeper release a test runs against (None: the installed server); the matrix parametrizes it
    (index 0 is the default release, so a matrix test's first run shares the other tests' server)."""
    return getattr(request, "param", default_zk_version())


@pytest.fixture(scope="session")
def zk_server(zk_servers: SessionServers, zk_version: str | None) -> str:
    """Connect string (no chroot) of the session's ZooKeeper (of `zk_version`'s release)."""
    return zk_servers.connect_string(zk_version)


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
