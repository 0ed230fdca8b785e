"""docs/cli.md is the generated reference of the current commands, and every command shows an example."""

from __future__ import annotations

from pathlib import Path

import click

from cli.main import _register
from cli.main import main as root
from cli.reference import _commands, render

ROOT = Path(__file__).resolve().parent.parent


def test_cli_reference_is_current():
    _register()
    generated = render(root)
    on_disk = (ROOT / "docs" / "cli.md").read_text()
    assert on_disk == generated, "docs/cli.md is stale: run `.venv/bin/python -m cli.reference > docs/cli.md`"


def test_every_command_help_has_an_example():
    _register()
    missing = []
    for path, cmd in _commands(root, "zk2kraft"):
        if isinstance(cmd, click.Group) and cmd.help is None:
            missing.append(path)
            continue
        if "Example" not in (cmd.help or ""):
            missing.append(path)
    assert not missing, f"--help without an 'Example:' section: {missing}"


def test_every_command_is_in_the_reference():
    _register()
    doc = (ROOT / "docs" / "cli.md").read_text()
    for path, _ in _commands(root, "zk2kraft"):
        assert f"## {path}\n" in doc


def test_reference_shows_types_defaults_and_envvars():
    """An operator reads defaults and choices in the reference, not only in --help."""
    _register()
    doc = render(root)
    assert "| `--zk-timeout` | FLOAT | `10.0` | `ZK2KRAFT_ZK_TIMEOUT` |" in doc
    assert "| `--from-offset` | INTEGER RANGE | `0` |" in doc  # a default of 0 is still a default
    assert "| `--phase` | [copy\\|dual-write\\|finalized] |" in doc
    assert "Sentinel" not in doc and "``" not in doc.replace("```", "")


def test_shell_completion_scripts_and_answers():
    """`eval "$(_ZK2KRAFT_COMPLETE=bash_source zk2kraft)"` (README) gives a script; it completes commands."""
    import os
    import subprocess
    import sys

    base = [sys.executable, "-c", "from cli.main import entry; entry()"]
    env = {**os.environ, "_ZK2KRAFT_COMPLETE": "bash_source"}
    script = subprocess.run(base, env=env, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert script.returncode == 0 and "_ZK2KRAFT_COMPLETE=bash_complete" in script.stdout
    env = {
        **os.environ,
        "_ZK2KRAFT_COMPLETE": "bash_complete",
        "COMP_WORDS": "zk2kraft contr",
        "COMP_CWORD": "1",
    }
    answer = subprocess.run(base, env=env, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert "plain,controller" in answer.stdout.splitlines()
    env["COMP_WORDS"], env["COMP_CWORD"] = "zk2kraft status --wa", "2"
    answer = subprocess.run(base, env=env, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert "plain,--watch" in answer.stdout.splitlines()
