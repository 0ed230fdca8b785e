"""The process-wide stop request: SIGTERM/SIGINT set it, every wait and retry loop checks it.

A signal handler may not raise into whatever the main thread is doing (half an append, half a
multi), so the handler only sets one event. The loops that can run for long — waiting for brokers,
the copy's batches, ZooKeeper retries, the follow loop, reading ZooKeeper — call `check()` at their
safe points (places a SIGKILL would also leave recoverable: the copy transaction open, a multi sent
or not), and sleep with `wait()`, which returns as soon as a stop is requested. `check()` raises
`Stopped`, which the CLI renders as one line: where it stopped and what the next run does. The exit
code is 0 for SIGTERM (a supervisor's ordinary stop) and 130 for SIGINT (Ctrl-C), as shells expect.

ZooKeeper writes are not cut short while ZooKeeper answers (a multi in flight, the last sync of a
stopping controller): only waiting for a ZooKeeper that does not answer — backoff between retries, a
reply overdue by half a second — ends at a stop. Records the log holds beyond `/migration` are then
carried to ZooKeeper by the next writer, as after a crash.

`phase()` names what the process is doing, so the line says "during the copy" rather than where in
the code the check happened, and what the next `migrate`/`controller` will do about it.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

from migrator.errors import ZkKraftError

__all__ = [
    "EVENT",
    "Stopped",
    "check",
    "handle_signals",
    "interruptible",
    "phase",
    "request",
    "requested",
    "reset",
    "signal_name",
    "signal_number",
    "stopped",
    "wait",
]

EVENT = threading.Event()
_SLICE_SECONDS = 0.25
_signal: list[int] = []  # the first signal that asked for the stop


@dataclass(frozen=True)
class _Phase:
    doing: str  # "during the copy", "while following as the controller"
    then: str  # what the next run does about it


_DEFAULT = _Phase("before changing anything", "nothing was written; run the command again")
_phases: list[_Phase] = []
_blocking: list[bool] = []  # inside `interruptible()`: the handler raises at once


def signal_number() -> int | None:
    """The signal that requested the stop; None while no stop is requested."""
    return _signal[0] if _signal and EVENT.is_set() else None


def signal_name(signum: int | None = None) -> str:
    signum = signal_number() if signum is None else signum
    return signal.Signals(signum).name if signum is not None else "request"


class Stopped(ZkKraftError):
    """Raised at a safe point after SIGTERM/SIGINT. Exit 0 for SIGTERM, 130 for SIGINT."""

    def __init__(self, message: str, signum: int | None) -> None:
        super().__init__(message)
        self.signum = signum

    @property  # type: ignore[override]
    def exit_code(self) -> int:
        return 130 if self.signum == signal.SIGINT else 0


def request(signum: int = signal.SIGTERM) -> None:
    """Ask every loop of this process to stop at its next safe point (the signal handler's body)."""
    if not _signal:
        _signal.append(signum)
    EVENT.set()


def requested() -> bool:
    return EVENT.is_set()


def reset() -> None:
    """Forget a stop request (in-process callers that run several commands, tests)."""
    _signal.clear()
    EVENT.clear()


def stopped(detail: str = "") -> Stopped:
    """The Stopped error for the current phase (`detail` adds where in it, e.g. a batch number)."""
    p = _phases[-1] if _phases else _DEFAULT
    where = f"{p.doing} ({detail})" if detail else p.doing
    return Stopped(f"stopped by {signal_name()} {where}; {p.then}", signal_number())


def check(detail: str = "") -> None:
    """A safe point: raise Stopped if a stop was requested."""
    if EVENT.is_set():
        raise stopped(detail)


def wait(seconds: float, detail: str = "") -> None:
    """Sleep up to `seconds`, raising Stopped as soon as a stop is requested (instead of time.sleep).

    In slices: a signal the kernel hands to another thread does not wake the main thread's wait, and
    Python runs the handler (which sets EVENT) only once the main thread runs again."""
    end = time.monotonic() + max(0.0, seconds)
    while True:
        left = end - time.monotonic()
        if EVENT.wait(max(0.0, min(left, _SLICE_SECONDS))):
            raise stopped(detail)
        if left <= _SLICE_SECONDS:
            return


@contextmanager
def phase(doing: str, then: str) -> Iterator[None]:
    """Name the current phase for the stop line; phases nest (the innermost one is reported)."""
    _phases.append(_Phase(doing, then))
    try:
        yield
    finally:
        _phases.pop()


@contextmanager
def interruptible() -> Iterator[None]:
    """A wait no loop can check (a prompt reading the terminal): the handler raises Stopped there
    itself. Only around code that changes nothing."""
    _blocking.append(True)
    try:
        yield
    finally:
        _blocking.pop()


@contextmanager
def handle_signals() -> Iterator[threading.Event]:
    """SIGTERM and SIGINT request a stop instead of killing the process (main thread only).

    The request lives as long as the command: cleared on entry and exit, so in-process callers
    (tests, several commands in one interpreter) start each command without one."""

    def handler(signum: int, frame: FrameType | None) -> None:
        request(signum)
        if _blocking:
            raise stopped()

    reset()
    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield EVENT
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        reset()
