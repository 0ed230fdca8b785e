"""The CI skip gate (tests/ci_skips.py) in a pytest run of its own: an unlisted skip fails a CI run,
a listed one does not, outside CI nothing changes, and the allow-list is printed every time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ci_skips import CI_SKIP_ALLOWLIST

HERE = Path(__file__).resolve().parent

SKIPPING = """
import pytest

def test_the_packer_is_built():
    pytest.skip("listed")

def test_other():
    pytest.skip("not listed")

def test_runs():
    assert True
"""


def _run(
    tmp_path: Path, *, ci: str | None, select: str, only: str = "tests"
) -> subprocess.CompletedProcess[str]:
    """pytest over tests/test_speedups.py of a scratch tree: the first test's id is on the allow-list."""
    (tmp_path / "tests").mkdir(exist_ok=True)
    (tmp_path / "tests" / "test_speedups.py").write_text(SKIPPING)
    (tmp_path / "tests" / "test_needs_a_module.py").write_text(
        "import pytest\n\npytest.importorskip('no_such_module_zk2kraft')\n\ndef test_x():\n    pass\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "ci_skips",
            "-p",
            "no:cacheprovider",
            "-q",
            "-k",
            select,
            only,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_unlisted_skip_fails_a_ci_run_and_is_named(tmp_path: Path) -> None:
    run = _run(tmp_path, ci="true", select="other or runs")
    assert run.returncode == 1, run.stdout
    assert "skipped in CI but not allowed" in run.stdout
    assert "tests/test_speedups.py::test_other: not listed" in run.stdout
    assert "tests/test_needs_a_module.py: could not import 'no_such_module_zk2kraft'" in run.stdout


def test_a_listed_skip_passes_a_ci_run(tmp_path: Path) -> None:
    run = _run(tmp_path, ci="true", select="packer or runs", only="tests/test_speedups.py")
    assert run.returncode == 0, run.stdout
    assert "not allowed" not in run.stdout


def test_outside_ci_a_skip_is_only_a_skip(tmp_path: Path) -> None:
    run = _run(tmp_path, ci=None, select="other or runs")
    assert run.returncode == 0, run.stdout


def test_the_allow_list_is_printed_with_its_reasons(tmp_path: Path) -> None:
    run = _run(tmp_path, ci="true", select="runs", only="tests/test_speedups.py")
    assert run.returncode == 0, run.stdout
    assert "skips allowed in CI" in run.stdout
    for nodeid, why in CI_SKIP_ALLOWLIST.items():
        assert f"{nodeid}: {why}" in run.stdout
