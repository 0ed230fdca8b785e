"""A yes/no question on the terminal that a SIGINT or SIGTERM ends at once, whichever thread it lands on.

The kernel delivers a process-directed signal to any thread that does not block it. When it lands on
one of kazoo's threads (or the progress ticker), the main thread's blocking `read()` of the terminal is
not interrupted, so Python never runs the handler and `click.confirm` waits until a line is typed: a
Ctrl-C that did nothing, seen under load about one time in three. So the terminal is polled in short
slices and the stop request (migrator.stop) is checked between them.
"""

from __future__ import annotations

import select
import sys

import click

from migrator import stop as stopping

SLICE_SECONDS = 0.2
_YES = ("y", "yes")
_NO = ("n", "no")


def confirm(question: str, *, default: bool = False) -> bool:
    """click.confirm's question and answers ("[y/N]", y/yes/n/no, empty = default, Ctrl-D = no)."""
    suffix = "[Y/n]" if default else "[y/N]"
    while True:
        click.echo(f"{question} {suffix}: ", nl=False, err=True)
        line = _read_line()
        if line is None:  # end of input: nobody agreed
            click.echo("", err=True)
            return False
        answer = line.strip().lower()
        if not answer:
            return default
        if answer in _YES:
            return True
        if answer in _NO:
            return False
        click.echo("Error: invalid input", err=True)


def _read_line() -> str | None:
    """One line from stdin, raising Stopped as soon as a stop is requested; None at end of input."""
    stream = sys.stdin
    while True:
        stopping.check()
        try:
            ready, _, _ = select.select([stream], [], [], SLICE_SECONDS)
        except (OSError, ValueError):  # not a selectable stream: read it plainly
            ready = [stream]
        if ready:
            line = stream.readline()
            return line if line else None
