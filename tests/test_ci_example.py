"""The example CI workflow for users (.github/workflows/rehearse-migration.yml) stays runnable.

It is parsed, every zk2kraft command line in it must name a real command with real options, and its
steps are run (bash, as GitHub runs them) against this suite's real ZooKeeper: the rehearsal must
pass there as it would in the user's pipeline.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from kazoo.client import KazooClient

from cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "rehearse-migration.yml"


def _workflow() -> dict[Any, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def _job() -> dict[str, Any]:
    return _workflow()["jobs"]["rehearse"]


def _expand(text: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: env.get(m.group(1), m.group(0)), text)


def _command_lines(script: str, env: dict[str, str]) -> list[list[str]]:
    """zk2kraft invocations of a step's script, variables from the workflow's env expanded."""
    out = []
    for line in script.replace("\\\n", " ").splitlines():
        for part in re.split(r"&&|\|\||;|\|", line):
            words = shlex.split(_expand(part, env), comments=True)
            words = [w for w in words if w not in ("nohup", "exec")]
            if words and words[0] == "zk2kraft":
                out.append(words[1:])
    return out


def _resolve(words: list[str]) -> tuple[list[click.Command], list[str]]:
    """The chain of click commands the words name (root first) and the remaining words."""
    cli_main._register()
    chain: list[click.Command] = [cli_main.main]
    rest = list(words)
    while isinstance(chain[-1], click.Group):
        names = [w for w in rest if not w.startswith("-")]
        if not names:
            break
        sub = chain[-1].commands.get(names[0])
        assert sub is not None, f"zk2kraft has no command {names[0]!r} (in {words})"
        rest.remove(names[0])
        chain.append(sub)
    return chain, rest


def test_workflow_shape() -> None:
    wf = _workflow()
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "workflow_dispatch" in triggers
    job = _job()
    zk = job["services"]["zookeeper"]
    assert zk["image"].startswith("zookeeper:3.") and "2181:2181" in zk["ports"]
    assert "--health-cmd" in zk["options"]
    assert job["env"]["ZK2KRAFT_ZOOKEEPER"].endswith(":2181")
    # The rehearsal's order: migrate → audit → rollback → audit, audits failing the job on differences.
    order = [cmd[0] for step in job["steps"] for cmd in _command_lines(step.get("run", ""), job["env"])]
    story = [c for c in order if c in ("migrate", "audit", "rollback")]
    assert story == ["migrate", "audit", "rollback", "audit"], order
    for step in job["steps"]:
        assert "continue-on-error" not in step, step["name"]
        assert "|| true" not in step.get("run", "") or step.get("if") == "always()", step["name"]


def test_every_zk2kraft_command_line_exists_with_its_options() -> None:
    job = _job()
    seen = 0
    for step in job["steps"]:
        for words in _command_lines(step.get("run", ""), job["env"]):
            seen += 1
            chain, rest = _resolve(words)
            options: set[str] = set()
            for command in chain:
                for param in command.params:
                    if isinstance(param, click.Option):
                        options.update(param.opts + param.secondary_opts)
            for word in rest:
                if word.startswith("-"):
                    assert word.split("=")[0] in options, (
                        f"{' '.join(chain[-1].name or '')}: unknown {word} in {words}"
                    )
    assert seen >= 10


@pytest.mark.zk
@pytest.mark.spark
@pytest.mark.slow
def test_the_rehearsal_runs(zk: KazooClient, zk_connect: str, tmp_path: Path) -> None:
    """The workflow's steps in bash -e, as the runner runs them, on a small cluster."""
    job = _job()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZK2KRAFT_")}
    env.update({k: str(v) for k, v in job["env"].items()})
    env.update(
        ZK2KRAFT_ZOOKEEPER=zk_connect,
        WORK=str(tmp_path / "work"),
        ZK2KRAFT_LOG_DIR=str(tmp_path / "work" / "metadata"),
        FIXTURE=job["env"]["FIXTURE"]
        .replace("--topics 500", "--topics 20")
        .replace("--acls 50", "--acls 10"),
        PATH=f"{Path(sys.executable).parent}:{env['PATH']}",
        PYTHONPATH=str(ROOT),
    )
    ran = []
    stop = next(s for s in job["steps"] if s.get("name") == "Stop the brokers")
    try:
        for step in job["steps"]:
            if "run" not in step or step["name"].startswith("Install") or step is stop:
                continue
            r = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, cwd=ROOT, capture_output=True,
                               text=True, timeout=600)  # fmt: skip
            assert r.returncode == 0, (
                f"step {step['name']!r} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
            )
            ran.append(step["name"])
    finally:
        subprocess.run(["bash", "-c", stop["run"]], env=env, cwd=ROOT, timeout=60)
    assert any("rollback" in n.lower() for n in ran) and ran[-1].startswith("Audit after")
    assert (tmp_path / "work" / "audit-after-rollback.html").exists()
