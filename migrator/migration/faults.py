"""Named crash points: `ZK2KRAFT_CRASH_AT=<point>[:<nth>]` makes the process SIGKILL itself there.

The reliability tests kill the driver at each of these points and prove that the next run derives one
state from the durable facts and finishes with ZooKeeper and the log agreeing record for record. In
production the variable is unset and every call is one dictionary lookup; nothing else changes.

`<nth>` counts the times the process reaches the point (default 1), so `copy.batch:3` dies after the
third copy batch is durable. docs/migration.md lists every point and what the next run must do.

`ZK2KRAFT_SIGNAL_AT=<SIGNAL>,<point>[:<nth>]` (e.g. `SIGINT,copy.batch:2`) sends the process that
signal there instead: the signal tests land a real Ctrl-C or SIGTERM at an exact step of a run that
would otherwise be over before a test could time it.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from migrator.errors import BadInputError
from migrator.zk.migration_client import FencedZkWriter

__all__ = ["CRASH_ENV", "POINTS", "SIGNAL_ENV", "CrashPointWriter", "crash_point", "parse_crash_spec"]

CRASH_ENV = "ZK2KRAFT_CRASH_AT"
SIGNAL_ENV = "ZK2KRAFT_SIGNAL_AT"

#: Every crash point, in the order a migration reaches them, with what is durable when it fires.
POINTS: dict[str, str] = {
    # claim
    "stale-migration.removed": "a leftover /migration of an earlier attempt was deleted; nothing else done",
    "log.formatted": "the log directory is formatted (meta.properties) but holds no record",
    "claim.before": "the log is open and locked; the controller claim multi is not sent",
    "claim.after": "the claim multi landed (/controller_epoch bumped, /controller ours); /migration not written",
    "claim.migration-written": "/migration was rewritten under the new claim; the log is unchanged",
    # copy
    "copy.read-reused": "the claim is written and the pre-flight read proved current (only this run's "
    "writes since); the log holds no copy yet",
    "copy.bootstrap-written": "a fresh log holds its bootstrap records (metadata.version, PRE_MIGRATION)",
    "copy.abort-written": "an interrupted copy was closed with AbortTransactionRecord; not redone yet",
    "copy.after-begin": "BeginTransactionRecord is durable; no data record yet",
    "copy.batch": "the nth batch of copied records is durable (the transaction is still open)",
    "copy.before-end": "every copied record is durable; ZkMigrationStateRecord and End are not",
    "copy.after-end": "the copy transaction is committed; /migration does not record it yet",
    "copy.manifest-written": "the copy manifest is written; the first sync has not run",
    # first sync and dual-write
    "sync.after-reconcile": "the full reconciliation of ZooKeeper against the log is done; no sync yet",
    "sync.after-sync": "the first sync is done (/migration covers the log); the command has not returned",
    "sync.before-snapshot": "the first sync is done; the snapshot the copy's commit made due is not "
    "written (the log alone holds the copy)",
    "dualwrite.before-multi": "the nth fenced multi of this process is about to be sent",
    "dualwrite.after-multi": "the nth fenced multi landed in ZooKeeper; the writer has not recorded it",
    "admin.appended": "an admin change is durable in the log; ZooKeeper has not received it",
    "admin.synced": "an admin change is in the log and ZooKeeper; the requester has no reply yet",
    "follow.appended": "the follower appended a handed-over change; it has not synced it",
    "unsynced.truncating": "truncate-unsynced removed the nth newest segment; the log is not cut to /migration yet",
    # finalize and rollback
    "finalize.before-record": "finalize passed its guards; POST_MIGRATION is not written",
    "finalize.after-record": "POST_MIGRATION is durable; the handover to Kafka's controller is not prepared",
    "rollback.drained": "rollback drained the syncer (lag 0); the log is not archived",
    "rollback.archived": "the log directory was renamed away; ZooKeeper is not released yet",
    "rollback.released": "ZooKeeper is released (/controller, /migration gone, epoch bumped)",
}

_counts: dict[str, int] = {}


def parse_crash_spec(spec: str) -> tuple[str, int]:
    """`point[:nth]` → (point, nth); an unknown point is bad input, so a typo never silently passes."""
    point, _, nth = spec.strip().partition(":")
    if point not in POINTS:
        raise BadInputError(f"{CRASH_ENV}={spec!r}: unknown crash point {point!r} (see docs/migration.md)")
    if nth and (not nth.isdigit() or int(nth) < 1):
        raise BadInputError(f"{CRASH_ENV}={spec!r}: the count after ':' must be a positive integer")
    return point, int(nth or 1)


def crash_point(name: str) -> None:
    """SIGKILL this process if `ZK2KRAFT_CRASH_AT` names `name` and this is its nth arrival (or send
    the signal `ZK2KRAFT_SIGNAL_AT` names)."""
    spec = os.environ.get(CRASH_ENV)
    signal_spec = os.environ.get(SIGNAL_ENV)
    if not spec and not signal_spec:
        return
    if name not in POINTS:
        raise AssertionError(f"undeclared crash point {name!r}")
    if signal_spec:
        signame, _, at = signal_spec.partition(",")
        if signame not in ("SIGINT", "SIGTERM"):
            raise BadInputError(f"{SIGNAL_ENV}={signal_spec!r}: expected SIGINT or SIGTERM, then ',<point>'")
        if _arrived(name, at, "signal:"):
            os.kill(os.getpid(), signal.Signals[signame])
    if spec and _arrived(name, spec, ""):
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def _arrived(name: str, spec: str, counter: str) -> bool:
    point, nth = parse_crash_spec(spec)
    if point != name:
        return False
    key = counter + name
    _counts[key] = _counts.get(key, 0) + 1
    return _counts[key] == nth


class CrashPointWriter(FencedZkWriter):
    """The fenced writer with the dual-write crash points around each multi.

    `dualwrite.before-multi` fires before a multi is handed to the session, `dualwrite.after-multi`
    once ZooKeeper answered that it landed but before the writer moves its own /migration view on:
    the point where a crash loses the reply of a write that happened.
    """

    def _send(self, multi: Any, expected: int) -> Any:
        crash_point("dualwrite.before-multi")
        return super()._send(multi, expected)

    def _landed(self, sent: Any) -> None:
        crash_point("dualwrite.after-multi")
        super()._landed(sent)
