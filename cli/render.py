"""Shared rendering for the CLI: the consoles every command prints through, JSON, the copy's progress bar.

Without a terminal rich assumes 80 columns and cuts table cells with an ellipsis; a cut identifier or
a cut fix ("set /controller_e…") in a CI log or a redirected report is worse than a long line, so
output that is not a terminal gets a width no table reaches and lines are never folded.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click
from pydantic import BaseModel
from rich.console import Console
from rich.rule import Rule

__all__ = ["console", "copy_progress", "emit_json", "err_console", "interactive", "out_console"]

#: Wide enough that rich never needs to shrink a column; tables stay as wide as their content.
_NOT_A_TERMINAL_WIDTH = 10_000


#: Width of a rule (section line) when there is no terminal to span.
_RULE_WIDTH = 100


class _PipeConsole(Console):
    """A console into a pipe or file: as wide as the content, but rules stay a readable width."""

    def rule(
        self, title: Any = "", *, characters: str = "─", style: Any = "rule.line", align: Any = "center"
    ) -> None:
        self.print(Rule(title, characters=characters, style=style, align=align), width=_RULE_WIDTH)


def console(*, stderr: bool = False, highlight: bool = False, soft_wrap: bool = False) -> Console:
    """A console on stdout (or stderr) that cuts nothing when the stream is not a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr, highlight=highlight, soft_wrap=soft_wrap)
    return _PipeConsole(stderr=stderr, highlight=highlight, soft_wrap=True, width=_NOT_A_TERMINAL_WIDTH)


def emit_json(result: BaseModel) -> None:
    """A result as one indented JSON object on stdout (`--json`)."""
    click.echo(json.dumps(result.model_dump(mode="json"), indent=2))


def interactive(as_json: bool) -> bool:
    """Rich progress and notes on stderr: only for a person at a terminal, never with --json."""
    return not as_json and sys.stderr.isatty()


def err_console() -> Console:
    return console(stderr=True)


def out_console() -> Console:
    return console(soft_wrap=True)


@contextmanager
def copy_progress(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar for the copy on a terminal; None (quiet) otherwise."""
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("copying records"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console(),
        transient=True,
    ) as bar:
        task = bar.add_task("copy", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update
