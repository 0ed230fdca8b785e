"""Skips in CI: each must be on one allow-list, printed at the end of every run.

CI (`CI=true`, set by .ci/run) installs everything the suite needs (`make deps`: ZooKeeper, a JDK,
kcat, the C packer, every Python dependency), so a skip there means a check silently did not run.
A skip in CI fails the run unless the test is listed in `CI_SKIP_ALLOWLIST` with why. Its hooks are
installed by tests/conftest.py; tests/test_ci_skips.py runs them in a pytest of their own.
"""

from __future__ import annotations

import os

import pytest

#: test node id (or its file, or the id without parameters) -> why it may be skipped in CI
CI_SKIP_ALLOWLIST: dict[str, str] = {
    "tests/test_speedups.py::test_the_packer_is_built": (
        "skipped only when ZK2KRAFT_PURE_PYTHON chooses the Python codec on purpose"
    ),
}

_skips: list[tuple[str, str]] = []


def _allowed(nodeid: str) -> bool:
    candidates = {nodeid, nodeid.split("[", 1)[0], nodeid.split("::", 1)[0]}
    return any(c in CI_SKIP_ALLOWLIST for c in candidates)


def _skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.skipped:
        _skips.append((report.nodeid, _skip_reason(report)))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _skips.append((report.nodeid, _skip_reason(report)))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _in_ci() and any(not _allowed(nodeid) for nodeid, _ in _skips) and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    tr = terminalreporter
    tr.section("skips allowed in CI (tests/ci_skips.py CI_SKIP_ALLOWLIST)")
    for nodeid, why in CI_SKIP_ALLOWLIST.items():
        tr.write_line(f"{nodeid}: {why}")
    refused = [(n, why) for n, why in _skips if not _allowed(n)]
    if refused and _in_ci():
        tr.section("skipped in CI but not allowed: the run fails", red=True)
        for nodeid, why in refused:
            tr.write_line(f"{nodeid}: {why}", red=True)
