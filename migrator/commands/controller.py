"""A controller (`migrate --follow --listen`) on a thread of this process, for tests and the simulator."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from migrator.commands.lifecycle import migrate
from migrator.commands.target_arg import takes_target
from migrator.controller.service import ControllerService
from migrator.errors import UnreachableError
from migrator.results import MigrateResult
from migrator.target import Target


class RunningController:
    """A controller (`migrate --follow --listen`) running on a thread of this process: for tests and
    the broker simulator. `address` is where it listens; `stop()` ends it and re-raises its error."""

    def __init__(self, thread: threading.Thread, stop: threading.Event) -> None:
        self.thread = thread
        self._stop = stop
        self.address: tuple[str, int] = ("", 0)
        self.service: ControllerService | None = None
        self.result: MigrateResult | None = None
        self.error: BaseException | None = None
        self.listening = threading.Event()

    @property
    def connect(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    def wait_until(self, predicate: Callable[[RunningController], bool], timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if not self.thread.is_alive() or time.monotonic() > deadline:
                return predicate(self)
            time.sleep(0.02)
        return True

    def stop(self, timeout: float = 30.0) -> MigrateResult | None:
        self._stop.set()
        self.thread.join(timeout)
        if self.error is not None:
            raise self.error
        return self.result


@takes_target(log_dir_positional=True)
def start_controller(target: Target, *, timeout: float = 60.0, **kwargs: Any) -> RunningController:
    """Start `migrate(follow=True)` listening at the Target's `listen` (default 127.0.0.1:0) on a thread
    and return once it listens (soft start included). Errors before it listens are raised here; later
    ones by `RunningController.stop`."""
    if target.listen is None:
        target = target.replace(listen="127.0.0.1:0")
    stop = threading.Event()
    holder: list[RunningController] = []

    def on_listen(service: ControllerService, address: tuple[str, int]) -> None:
        running = holder[0]
        running.service, running.address = service, address
        running.listening.set()

    def run() -> None:
        running = holder[0]
        try:
            running.result = migrate(target, follow=True, stop=stop, on_listen=on_listen, **kwargs)
        except BaseException as e:  # handed to the caller by stop() / start_controller
            running.error = e
        finally:
            running.listening.set()

    thread = threading.Thread(target=run, name="zk2kraft-controller", daemon=True)
    holder.append(RunningController(thread, stop))
    thread.start()
    running = holder[0]
    if not running.listening.wait(timeout):
        stop.set()
        raise UnreachableError(
            f"the controller did not start listening on {target.listen} within {timeout:g}s"
        )
    if running.error is not None and running.service is None:
        thread.join(5)
        raise running.error
    return running
