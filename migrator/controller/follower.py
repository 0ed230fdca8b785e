"""Who follows a log as its controller, and where it listens: `<log-dir>/zk2kraft-follower.json`.

A running `migrate --follow` (or `controller`) writes its pid and listener addresses here, so that
`zk2kraft admin` on the same machine finds the controller's listener without being told, and
`status` names the follower. It is a pointer only: changes travel over Kafka's protocol, never
through files. The kernel's writer lock, not this file, says whether a writer is alive.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from migrator.kraft import dirfiles
from migrator.kraft.lock import LOCK_FILE

__all__ = [
    "FOLLOWER_FILE",
    "Follower",
    "announce",
    "follower_pid",
    "read_follower",
    "retire",
    "writer_lock_held",
]

FOLLOWER_FILE = "zk2kraft-follower.json"


@dataclass(frozen=True)
class Follower:
    pid: int
    #: (listener name, security protocol, host, port) of each listener it serves; empty without --listen
    listeners: tuple[tuple[str, str, str, int], ...] = ()


def announce(log_dir: str | os.PathLike[str], listeners: list[tuple[str, str, str, int]]) -> None:
    body = {
        "pid": os.getpid(),
        "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "listeners": [{"name": n, "protocol": p, "host": h, "port": port} for n, p, h, port in listeners],
    }
    dirfiles.atomic_write(Path(log_dir) / FOLLOWER_FILE, json.dumps(body).encode())


def retire(log_dir: str | os.PathLike[str]) -> None:
    (Path(log_dir) / FOLLOWER_FILE).unlink(missing_ok=True)


def read_follower(log_dir: str | os.PathLike[str]) -> Follower | None:
    """What the last follower announced (it may have died since: check `writer_lock_held`)."""
    try:
        data = json.loads((Path(log_dir) / FOLLOWER_FILE).read_text())
        listeners = tuple(
            (str(x["name"]), str(x["protocol"]), str(x["host"]), int(x["port"]))
            for x in data.get("listeners", ())
        )
        return Follower(int(data["pid"]), listeners)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def follower_pid(log_dir: str | os.PathLike[str]) -> int | None:
    found = read_follower(log_dir)
    return None if found is None else found.pid


def writer_lock_held(log_dir: str | os.PathLike[str]) -> bool:
    """Whether some process holds the log's writer lock (a shared-lock probe; takes nothing).

    The kernel drops the lock when its holder dies, so this tells a dead follower even while its
    pid still exists (a zombie not yet reaped by its parent)."""
    try:
        fd = os.open(Path(log_dir) / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
