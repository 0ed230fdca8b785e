"""Every `zk2kraft ...` line in the runbook and the README names a real command and real options."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from cli.main import _register
from cli.main import main as root

ROOT = Path(__file__).resolve().parent.parent
DOCS = ["docs/runbook.md", "README.md", "docs/ci.md", "docs/controller-protocol.md"]


def command_lines(text: str) -> list[str]:
    lines = []
    # every fenced block, whatever its language (a ```properties block must not shift the pairing)
    for lang, block in re.findall(r"```(\w*)\n(.*?)```", text, flags=re.S):
        if lang not in ("", "sh", "bash"):
            continue
        for line in block.splitlines():
            line = line.split(" #")[0].strip().rstrip("&").strip()
            if line.startswith("zk2kraft "):
                lines.append(line)
    return lines


def options_of(cmd: click.Command) -> set[str]:
    names = {"--help", "-h"}
    for p in cmd.params:
        if isinstance(p, click.Option):
            names.update(p.opts)
            names.update(p.secondary_opts)
    return names


def choices_of(cmd: click.Command, name: str) -> list[str]:
    for p in cmd.params:
        if isinstance(p, click.Option) and name in p.opts and isinstance(p.type, click.Choice):
            return [str(c) for c in p.type.choices]
    return []


def envvars_of(cmd: click.Command) -> set[str]:
    names: set[str] = set()
    for p in cmd.params:
        if isinstance(p, click.Option) and p.envvar:
            names.update([p.envvar] if isinstance(p.envvar, str) else p.envvar)
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            names |= envvars_of(sub)
    return names


def resolve(args: list[str]) -> tuple[click.Command, list[str], str]:
    cmd: click.Command = root
    path = "zk2kraft"
    rest = list(args)
    while isinstance(cmd, click.Group) and rest and not rest[0].startswith("-"):
        sub = cmd.get_command(click.Context(cmd), rest[0])
        assert sub is not None, f"`{path} {rest[0]}` is not a command"
        path += f" {rest.pop(0)}"
        cmd = sub
    return cmd, rest, path


@pytest.mark.parametrize("doc", DOCS)
def test_documented_command_lines_exist(doc):
    _register()
    lines = command_lines((ROOT / doc).read_text())
    if doc == "docs/runbook.md":
        assert len(lines) >= 15
    for line in lines:
        tokens = shlex.split(line.replace("$SPEC", "--brokers 6"))[1:]
        cmd, rest, path = resolve(tokens)
        known = options_of(cmd) | options_of(root)
        for i, tok in enumerate(rest):
            if tok.startswith("-") and tok != "-":
                name = tok.split("=", 1)[0]
                assert name in known, f"{doc}: `{line}`: {path} has no option {name}"
                choices = choices_of(cmd, name)
                if choices and i + 1 < len(rest):
                    assert rest[i + 1] in choices, f"{doc}: `{line}`: {name} takes one of {choices}"


def test_a_wrong_option_is_caught():
    _register()
    cmd, rest, _ = resolve(["status", "--no-such-option"])
    assert "--no-such-option" not in options_of(cmd)


def test_runbook_covers_every_phase_command():
    """The runbook shows a command line for each step an operator takes, not only prose about them."""
    _register()
    lines = command_lines((ROOT / "docs/runbook.md").read_text())
    used = {resolve(shlex.split(line)[1:])[2].split()[1] for line in lines}
    wanted = {"check", "plan", "controller", "migrate", "status", "admin", "audit", "finalize", "rollback"}
    assert wanted <= used, f"docs/runbook.md shows no command line for: {sorted(wanted - used)}"


def test_runbook_exit_codes_match_errors_module():
    from migrator import errors

    text = (ROOT / "docs/runbook.md").read_text()
    documented = {int(n) for n in re.findall(r"\*\*(\d)\*\* ", text.split("## Phase 0")[0])}
    codes = {v for k, v in vars(errors).items() if k.startswith("EXIT_")}
    assert documented == codes


@pytest.mark.parametrize("doc", ["docs/runbook.md", "README.md"])
def test_documented_environment_variables_exist(doc):
    """An exported ZK2KRAFT_* name that no option (nor the code, for a switch like ZK2KRAFT_PURE_PYTHON)
    reads would silently do nothing."""
    _register()
    known = envvars_of(root)
    sources = [
        src for pkg in ("cli", "migrator", "spark_audit", "zk_fixtures") for src in (ROOT / pkg).rglob("*.py")
    ]
    sources.append(ROOT / "tests/conftest.py")  # the test suite's own switches (ZK2KRAFT_ZK_MATRIX, …)
    for src in sources:
        known |= set(re.findall(r"os\.environ(?:\.get\(|\[)\s*\"(ZK2KRAFT_[A-Z_]+)\"", src.read_text()))
    # `make test`'s own switches (ZK2KRAFT_TEST_WORKERS), read by the shell as $${NAME-default}
    known |= set(re.findall(r"\$\$\{(ZK2KRAFT_[A-Z_]+)-", (ROOT / "Makefile").read_text()))
    named = set(re.findall(r"\bZK2KRAFT_[A-Z_]+\b", (ROOT / doc).read_text()))
    assert named <= known, f"{doc} names environment variables no option reads: {sorted(named - known)}"


def test_a_wrong_choice_is_caught():
    _register()
    audit, _, _ = resolve(["audit"])
    assert "dual-write" in choices_of(audit, "--phase")
    assert "finalised" not in choices_of(audit, "--phase")
