"""The hand-over of admin changes to a running `migrate --follow`, through files in the log dir.

The log has one writer. While `migrate --follow` holds it, a change is handed over through an inbox
directory in the log dir: the requester writes one JSON file per change (written aside, then renamed
into place, so the follower never reads half a request), the follower validates, appends, syncs and
answers with a reply file, which the requester waits for.

No password is ever written anywhere: a SCRAM credential travels as its salted keys only, in a file
only the owner can read, deleted once answered.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from pathlib import Path

from pydantic import BaseModel

from migrator.errors import FindingsError, UnreachableError, ZkKraftError
from migrator.kraft import dirfiles
from migrator.kraft.lock import LOCK_FILE
from migrator.migration.admin.change import AdminChange

__all__ = [
    "FOLLOWER_FILE",
    "INBOX_DIR",
    "AdminReply",
    "Inbox",
    "refused_state",
    "reply_of",
    "writer_lock_held",
]

INBOX_DIR = "zk2kraft-inbox"
FOLLOWER_FILE = "zk2kraft-follower.json"
_REQUEST = ".request.json"
_REPLY = ".reply.json"
#: A request temporary older than this is a crashed requester's, not one being written.
_STALE_SUBMIT_S = 60.0


class AdminReply(BaseModel):
    """The follower's answer: what it appended and synced, or the refusal and its exit code."""

    ok: bool
    exit_code: int = 0
    message: str = ""
    first_offset: int | None = None
    last_offset: int | None = None
    records: int = 0
    migration_offset: int | None = None  # what /migration covers after the sync
    topic_id: str | None = None
    follower_pid: int | None = None


class Inbox:
    """`<log-dir>/zk2kraft-inbox`: one request file per change, one reply file per answer."""

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        self.log_dir = Path(log_dir)
        self.path = self.log_dir / INBOX_DIR

    # -- the follower's side ---------------------------------------------------------------------

    def announce(self) -> None:
        """Say that a follower serves this inbox (its pid); requesters check that it holds the lock."""
        self.path.mkdir(exist_ok=True)
        # A follower killed while answering leaves `<id>.reply.json.tmp`; a requester killed while
        # submitting leaves `.<id>.tmp`. Neither is anyone's any more once a new follower starts (a
        # requester writing right now is spared by the age limit).
        for path in self.path.glob(f"*{_REPLY}{dirfiles.TMP_SUFFIX}"):
            path.unlink(missing_ok=True)
        dirfiles.remove_stale_temporaries(self.path, older_than=_STALE_SUBMIT_S)
        body = {"pid": os.getpid(), "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        dirfiles.atomic_write(self.log_dir / FOLLOWER_FILE, json.dumps(body).encode())

    def retire(self) -> None:
        (self.log_dir / FOLLOWER_FILE).unlink(missing_ok=True)

    def pending(self) -> list[Path]:
        try:
            names = os.listdir(self.path)
        except FileNotFoundError:
            return []
        if any(n.endswith(dirfiles.TMP_SUFFIX) for n in names):
            dirfiles.remove_stale_temporaries(self.path, older_than=_STALE_SUBMIT_S)
        return sorted(self.path / n for n in names if n.endswith(_REQUEST))

    def take(self, path: Path) -> tuple[str, AdminChange | None, str]:
        """Read and remove one request: (id, change or None, error when unreadable)."""
        rid = path.name.removesuffix(_REQUEST)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return rid, None, "withdrawn"
        path.unlink(missing_ok=True)
        try:
            return rid, AdminChange.model_validate_json(raw), ""
        except ValueError as e:
            return rid, None, f"unreadable request {path.name}: {str(e).splitlines()[0]}"

    def answer(self, rid: str, reply: AdminReply) -> None:
        dirfiles.atomic_write(self.path / f"{rid}{_REPLY}", reply.model_dump_json().encode())

    # -- the requester's side --------------------------------------------------------------------

    def follower_pid(self) -> int | None:
        try:
            return int(json.loads((self.log_dir / FOLLOWER_FILE).read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def submit(self, change: AdminChange) -> str:
        """Place a request atomically (written aside, renamed in); returns its id."""
        self.path.mkdir(exist_ok=True)
        rid = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
        tmp = self.path / f".{rid}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, change.model_dump_json().encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path / f"{rid}{_REQUEST}")
        return rid

    def wait(self, rid: str, pid: int, timeout: float) -> AdminReply:
        """The follower's reply; a dead follower or a timeout withdraws the request if it still can."""
        reply = self.path / f"{rid}{_REPLY}"
        request = self.path / f"{rid}{_REQUEST}"
        deadline = time.monotonic() + timeout
        delay = 0.01
        while True:
            if reply.exists():
                data = reply.read_bytes()
                reply.unlink(missing_ok=True)
                return AdminReply.model_validate_json(data)
            alive = _alive(pid) and writer_lock_held(self.log_dir)
            if not alive or time.monotonic() > deadline:
                try:
                    request.unlink()
                    withdrawn = True
                except FileNotFoundError:
                    withdrawn = False
                if reply.exists():
                    continue
                what = "stopped" if not alive else f"did not answer within {timeout:g}s"
                if withdrawn:
                    raise UnreachableError(
                        f"the follower (pid {pid}) {what}; the change was withdrawn, nothing was applied"
                    )
                raise UnreachableError(
                    f"the follower (pid {pid}) {what} after taking the change; whether it was applied "
                    "shows in `zk2kraft status` and the log"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


def writer_lock_held(log_dir: Path) -> bool:
    """Whether some process holds the log's writer lock (a shared-lock probe; takes nothing).

    The kernel drops the lock when its holder dies, so this tells a dead follower even while its
    pid still exists (a zombie not yet reaped by its parent)."""
    try:
        fd = os.open(log_dir / LOCK_FILE, os.O_RDONLY)
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reply_of(error: ZkKraftError) -> AdminReply:
    return AdminReply(ok=False, exit_code=error.exit_code, message=str(error), follower_pid=os.getpid())


def refused_state(state_name: str) -> FindingsError:
    return FindingsError(
        f"admin changes go through the log only in DualWriteMetadata; the migration is in {state_name}"
    )
