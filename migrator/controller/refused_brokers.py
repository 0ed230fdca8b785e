"""Registrations the running controller refused, left in the log directory for `zk2kraft status`.

A real broker with bad input (another cluster's id, an inter.broker.protocol.version whose
metadata.version this controller does not run, an id a KRaft broker holds) is answered with Kafka's
error and keeps retrying; the operator sees it only in that broker's log unless the controller says so.
The service records the last refusal per broker id (cleared when that id registers) in
`zk2kraft-refused-brokers.json` with its pid, and `status` names each one as an anomaly. Observability
only: never read to derive a state.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

__all__ = ["FILE", "RefusedBrokers", "read_refused"]

FILE = "zk2kraft-refused-brokers.json"


class RefusedBrokers:
    """The last refused registration per broker id, written through to `directory/FILE`."""

    def __init__(self, directory: str | Path | None) -> None:
        self.directory = None if directory is None else Path(directory)
        self.refused: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def refuse(self, broker_id: int, error: str, message: str) -> None:
        entry = {"broker_id": broker_id, "error": error, "message": message}
        with self._lock:
            if self.refused.get(broker_id) == entry:
                return  # a fetcher retries every few ms: written once
            self.refused[broker_id] = entry
            self._write()

    def registered(self, broker_id: int) -> None:
        with self._lock:
            if self.refused.pop(broker_id, None) is not None:
                self._write()

    def _write(self) -> None:
        if self.directory is None:
            return
        path = self.directory / FILE
        tmp = path.with_name(path.name + ".tmp")
        rows = [self.refused[b] for b in sorted(self.refused)]
        try:
            tmp.write_text(json.dumps({"pid": os.getpid(), "refused": rows}, sort_keys=True))
            os.replace(tmp, path)
        except OSError:
            pass  # best effort: the broker's own log and the controller's line say it too


def read_refused(log_dir: str | Path, pid: int | None) -> list[dict[str, Any]]:
    """The refusals the running controller (process `pid`) reported; none from an older process."""
    try:
        data = json.loads((Path(log_dir) / FILE).read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict) or data.get("pid") != pid or not isinstance(data.get("refused"), list):
        return []
    return [r for r in data["refused"] if isinstance(r, dict)]
