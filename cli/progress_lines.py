"""Progress without a terminal: one timestamped stderr line per phase, then one every few seconds.

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
# Not a phase that ends: a following controller is not "still" anything every ten seconds.
_STEADY = ("following as the controller",)


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
        self._copy: tuple[int, int] | None = None

    def say(self, text: str) -> None:
        with self._lock:
            # Once following, a note is an event ("unfenced broker 3", "ZK broker 2: cannot connect"),
            # not a phase: repeating it as "still …" every ten seconds for hours said a broker that had
            # long recovered was still unreachable (seen with real Kafka brokers, issue 25).
            if self._phase is None or not self._phase.startswith(_STEADY):
                self._phase, self._since = text, time.monotonic()
                self._last = self._since
        if self.announce:
            self.echo(text)

    def copy(self, done: int, total: int) -> None:
        with self._lock:
            self._copy = (done, total)

    def tick(self) -> None:
        with self._lock:
            now = time.monotonic()
            if self._phase is None or self._phase.startswith(_STEADY) or now - self._last < self.interval:
                return
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
