"""Progress without a terminal: one timestamped stderr line per phase, then one every few seconds.

A one-shot `migrate` does not announce its phases (a refusal stays one line on stderr), but a phase
that lasts more than FIRST_LINE seconds is named then.

A long `migrate` into a CI log or `| tee` showed nothing for 40 s. The phases are the driver's own notes
(`DriverOptions.say`); a ticker repeats the current one with its elapsed time, and the copy's record
count when it is copying, every `interval` seconds (ZK2KRAFT_PROGRESS_INTERVAL, default 10), so a
short run prints no periodic line at all.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

DEFAULT_INTERVAL = 10.0
#: a phase not announced as it starts is named once it has lasted this long (or the interval)
FIRST_LINE = 5.0
# Not a phase that ends: a following controller is not "still" anything every ten seconds; its own
# heartbeat line ("serving N brokers, write-behind lag L, …") says what it does instead.
_STEADY = ("following as the controller",)
# Not phases either: the controller's broker lifecycle events (migrator/controller/core.py's notes),
# said as they happen during any phase. As phases they became "still unfenced broker 3 (72s)" while
# the copy ran, and hid the phase that was really lasting.
_EVENTS = ("registered broker ", "unfenced broker ", "fenced broker ")


def stamp_line(text: str) -> None:
    """One line on stderr now (click.echo flushes), timestamped for a log read later."""
    click.echo(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} zk2kraft: {text}", err=True)


def interval_from_env() -> float:
    try:
        value = float(os.environ.get("ZK2KRAFT_PROGRESS_INTERVAL", DEFAULT_INTERVAL))
    except ValueError:
        return DEFAULT_INTERVAL
    return value if value > 0 else DEFAULT_INTERVAL


class PhaseLines:
    """The current phase, its start, and the copy's count; `tick` says "still …" when due."""

    def __init__(
        self, interval: float, echo: Callable[[str], None] = stamp_line, announce: bool = True
    ) -> None:
        self.interval = interval
        self.echo = echo
        self.announce = announce  # print each phase as it starts (the long-running commands do)
        self._lock = threading.Lock()
        self._phase: str | None = None
        self._since = time.monotonic()
        self._last = self._since
        self._shown = False  # the current phase's own line is out (announced, or said once it lasted)
        self._copy: tuple[int, int] | None = None

    def say(self, text: str) -> None:
        with self._lock:
            # Once following, a note is an event (an admin change, a broker), not a phase: it is
            # printed once and never repeated as "still …"; the follower says what it does itself.
            if text.startswith(_EVENTS) and self._phase is not None:
                pass  # an event: the phase goes on (and is still named once it lasts)
            elif self._phase is None or not self._phase.startswith(_STEADY):
                self._phase, self._since = text, time.monotonic()
                self._last = self._since
                self._shown = self.announce
        if self.announce:
            self.echo(text)

    def copy(self, done: int, total: int) -> None:
        with self._lock:
            self._copy = (done, total)

    def tick(self) -> None:
        with self._lock:
            now = time.monotonic()
            if self._phase is None or self._phase.startswith(_STEADY):
                return
            if not self._shown:
                # Not announced (a one-shot run, whose refusal stays one line): a phase that lasts
                # is named within FIRST_LINE seconds, not after a silent interval
                if now - self._since < min(FIRST_LINE, self.interval):
                    return
                self._shown, self._last = True, now
                text = self._phase
            elif now - self._last < self.interval:
                return
            else:
                self._last = now
                text = f"still {self._phase} ({now - self._since:.0f}s)"
            if self._copy is not None and self._copy[1] > 0 and self._copy[0] < self._copy[1]:
                done, total = self._copy
                text += f": {done:,} of {total:,} records copied ({100 * done / total:.0f}%)"
        self.echo(text)


@contextmanager
def ticking(lines: PhaseLines) -> Iterator[PhaseLines]:
    """Run `lines.tick` on a daemon thread until the block ends."""
    done = threading.Event()

    def run() -> None:
        while not done.wait(min(lines.interval, 1.0) / 2):
            lines.tick()

    thread = threading.Thread(target=run, name="zk2kraft-progress-lines", daemon=True)
    thread.start()
    try:
        yield lines
    finally:
        done.set()
        thread.join(5)
