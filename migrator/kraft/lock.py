"""One writer per log directory: an flock'd lock file that names its holder.

The holder (pid, host, command name, since when) is written into the lock file after the lock is taken,
so a refused second writer can tell the operator exactly who is in the way. Only the command's name is
kept, never its arguments: a command line can carry `--zk-auth digest:user:password` or a key password,
and the lock file outlives the process. The file is 0600. The kernel drops the flock
when the holder dies, so a stale file left by a killed process never blocks anyone.

Kafka itself locks `<log-dir>/.lock` with a POSIX record lock (Java's FileChannel.tryLock). The writer
takes that lock too, so zk2kraft also refuses to write into the directory of a running Kafka node.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from migrator.errors import FencedError, UnreachableError

LOCK_FILE = "zk2kraft.lock"
KAFKA_LOCK_FILE = ".lock"


@dataclass(frozen=True)
class LockHolder:
    pid: int
    host: str
    command: str
    since: str

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host} since {self.since} ({self.command})"


def _command_name() -> str:
    """`zk2kraft migrate`: the program and its subcommands, without any option or argument."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        return ctx.command_path
    return name_only(" ".join(sys.argv)) or "python"


def name_only(command: str) -> str:
    """The leading words of a command line up to its first option, as base names (an older lock file
    may hold a whole command line: what it shows is cut down the same way)."""
    words = []
    for word in command.split():
        if word.startswith("-") or "=" in word or ":" in word or len(words) == 3:
            break
        words.append(os.path.basename(word))
    return " ".join(words)


def read_holder(path: Path) -> LockHolder | None:
    """Who wrote the lock file last, or None when it is empty or unreadable."""
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        command = name_only(str(data["command"]))
        return LockHolder(int(data["pid"]), str(data["host"]), command, str(data["since"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


class WriterLock:
    """The exclusive writer lock of one log directory; release it with `release()` or `with`."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.path = log_dir / LOCK_FILE
        self._fd: int | None = None
        self._kafka_fd: int | None = None

    def acquire(self) -> WriterLock:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            os.fchmod(fd, 0o600)  # a file an older version created 0644
        except OSError as e:
            raise UnreachableError(f"cannot open lock file {self.path}: {e.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = self._wait_for_holder()
            who = holder.describe() if holder else "a process that has not written its name yet"
            raise FencedError(
                f"log directory {self.log_dir} is locked by another writer: {who}; lock file {self.path}"
            ) from None
        self._fd = fd
        try:
            self._lock_kafka()
            holder = LockHolder(
                pid=os.getpid(),
                host=socket.gethostname(),
                command=_command_name(),
                since=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            )
            body = json.dumps(holder.__dict__).encode("utf-8") + b"\n"
            os.ftruncate(fd, 0)
            os.pwrite(fd, body, 0)
            os.fsync(fd)
        except BaseException:
            self.release()
            raise
        return self

    def _wait_for_holder(self) -> LockHolder | None:
        # The holder writes its name right after taking the lock; give it a moment to do so.
        for _ in range(20):
            holder = read_holder(self.path)
            if holder is not None:
                return holder
            time.sleep(0.025)
        return None

    def _lock_kafka(self) -> None:
        kafka_lock = self.log_dir / KAFKA_LOCK_FILE
        try:
            kfd = os.open(kafka_lock, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            raise UnreachableError(f"cannot open {kafka_lock}: {e.strerror}") from None
        try:
            fcntl.lockf(kfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(kfd)
            if e.errno in (errno.EACCES, errno.EAGAIN):
                raise FencedError(
                    f"log directory {self.log_dir} is in use by a running Kafka node ({kafka_lock} is locked)"
                ) from None
            raise UnreachableError(f"cannot lock {kafka_lock}: {e.strerror}") from None
        self._kafka_fd = kfd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Drop both locks. The lock file stays (removing it would race a new holder's open) but is
        emptied while still locked: a named holder without the lock is then one that died."""
        for attr in ("_kafka_fd", "_fd"):
            fd = getattr(self, attr)
            if fd is not None:
                setattr(self, attr, None)
                if attr == "_fd":
                    try:
                        os.ftruncate(fd, 0)
                    except OSError:
                        pass  # the holder is named a little longer: status then calls it gone
                os.close(fd)

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def kafka_lock_holder(log_dir: Path) -> int | None:
    """The pid holding Kafka's `<log-dir>/.lock` (a running Kafka node), found without taking the lock.

    F_GETLK asks the kernel which process would block a write lock and takes nothing: a reader of a
    directory Kafka's own controller runs in must never hold its lock, even for an instant. None when
    no process holds it (or there is no lock file); a holder on another host (NFS) is not seen.
    """
    try:
        fd = os.open(Path(log_dir) / KAFKA_LOCK_FILE, os.O_RDONLY)
    except OSError:
        return None
    try:
        # struct flock on Linux x86-64: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
        query = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        try:
            answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
        except OSError:
            return None
        l_type, _whence, _start, _len, pid = struct.unpack("hhqqi4x", answer)
        return pid if l_type != fcntl.F_UNLCK else None
    finally:
        os.close(fd)
