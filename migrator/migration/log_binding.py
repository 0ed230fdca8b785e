"""The log directory bound to ZooKeeper's claim: a mistyped --log-dir or a second controller never acts.

Node ids say nothing (every controller defaults to 3000), so each claim records *which log* holds it,
in two zk2kraft-owned znodes beside Kafka's (Kafka's `/migration` stays byte-for-byte Kafka's):

- `/zk2kraft/log` (persistent): the bound log's identity — cluster id, node id, the `meta.properties`
  directory id, where it lives (host, path) — the claim's KRaft epoch and the copy's commit
  (offset, epoch of the ZkMigrationStateRecord(MIGRATION)).
- `/zk2kraft/writer` (ephemeral): the live writer holding the claim (pid, host, since, command name;
  never its arguments). ZooKeeper deletes it when the writer's session ends, so "another live writer
  holds the claim" is a fact rather than a guess.

Both are written in one multi fenced by the claim's `/controller_epoch` version.

A log *holds* the claim when it is the bound directory (same directory id, host and path) and holds the (offset, epoch) `/migration`
covers; or, for another directory, when it holds exactly what `/migration` covers and nothing after
it (records after it were written by a writer that is not bound: never acknowledged, never carried).
Every writing command checks this before it touches anything (`require_bound`).
"""

from __future__ import annotations

import json
import os
import socket
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.security import OPEN_ACL_UNSAFE

from migrator.errors import BadInputError, FencedError, ZkKraftError
from migrator.kraft import dirfiles
from migrator.kraft.lock import name_only
from migrator.kraft.log import MetadataLog
from migrator.kraft.snapshot import list_snapshots
from migrator.migration.facts import Facts, read_znode
from migrator.zk import paths as P
from migrator.zk.migration_client import Claim, retry_transient

__all__ = [
    "BINDING",
    "ROOT",
    "WRITER",
    "BindingProblem",
    "LogIdentity",
    "WriterInfo",
    "forget",
    "guard",
    "problem",
    "record_claim",
    "require_bound",
]

ROOT = "/zk2kraft"
BINDING = f"{ROOT}/log"
WRITER = f"{ROOT}/writer"
TAKEOVER_HINT = (
    "check --log-dir; to take over from a lost log directory use `zk2kraft migrate --recopy` or "
    "`zk2kraft rollback --force-orphaned` (see docs/migration.md)"
)


@dataclass(frozen=True)
class LogIdentity:
    """What identifies a log directory, as recorded with the claim."""

    cluster_id: str | None
    node_id: int | None
    directory_id: str | None
    host: str
    path: str
    kraft_epoch: int = -1
    copy_offset: int = -1
    copy_epoch: int = -1

    @property
    def key(self) -> tuple[str | None, str, str]:
        return (self.directory_id, self.host, self.path)

    def describe(self) -> str:
        return (
            f"log directory {self.path} on {self.host} (directory id {self.directory_id}, "
            f"node {self.node_id})"
        )


@dataclass(frozen=True)
class WriterInfo:
    """The live writer: who it is and which log it writes; never a command line's arguments."""

    pid: int
    host: str
    since: str
    command: str
    directory_id: str | None
    path: str
    kraft_epoch: int

    @property
    def key(self) -> tuple[str | None, str, str]:
        return (self.directory_id, self.host, self.path)

    def describe(self) -> str:
        return (
            f"pid {self.pid} on {self.host} since {self.since} ({self.command}) writing {self.path} "
            f"(directory id {self.directory_id})"
        )


@dataclass(frozen=True)
class BindingProblem:
    """The given log directory does not hold ZooKeeper's claim; `live` when another writer holds it."""

    message: str
    live: bool

    def error(self) -> ZkKraftError:
        return FencedError(self.message) if self.live else BadInputError(self.message)


def _meta(log_dir: str | os.PathLike[str]) -> dirfiles.MetaProperties | None:
    try:
        return dirfiles.read_meta_properties(Path(log_dir) / dirfiles.META_PROPERTIES)
    except ZkKraftError:
        return None


def identity_of(
    log: MetadataLog, facts: Facts, kraft_epoch: int, previous: LogIdentity | None = None
) -> LogIdentity:
    """This log's identity for a claim. `previous`: the binding recorded so far; when retention has
    moved the log start past the copy's commit, the epoch it recorded for that commit is kept (the
    log itself only knows it from a snapshot ending right there)."""
    meta = log.meta
    copy = facts.log.migration_offset if facts.log.migration_code is not None else None
    copy_offset = -1
    if copy is not None and facts.log.migration_code == 1:  # MIGRATION: the copy's commit record
        copy_offset = copy
    path = str(Path(log.log_dir).resolve())
    directory_id = meta.directory_id if meta else None
    copy_epoch = log.epoch_for_offset(copy_offset) if copy_offset >= 0 else -1
    if (
        0 <= copy_offset < log.log_start_offset
        and previous is not None
        and previous.copy_offset == copy_offset
        and previous.key == (directory_id, socket.gethostname(), path)
    ):
        copy_epoch = previous.copy_epoch
    return LogIdentity(
        cluster_id=meta.cluster_id if meta else facts.zk.cluster_id,
        node_id=meta.node_id if meta else None,
        directory_id=directory_id,
        host=socket.gethostname(),
        path=path,
        kraft_epoch=kraft_epoch,
        copy_offset=copy_offset,
        copy_epoch=copy_epoch,
    )


def _load(client: KazooClient, path: str, cls: type) -> object | None:
    node = read_znode(client, path)
    if node is None:
        return None
    try:
        return cls(**json.loads(node[0]))
    except (ValueError, TypeError):
        return None  # not ours or from another version: treated as absent, the node-id guard applies


def read_binding(client: KazooClient) -> LogIdentity | None:
    value = _load(client, BINDING, LogIdentity)
    return value if isinstance(value, LogIdentity) else None


def read_writer(client: KazooClient) -> WriterInfo | None:
    value = _load(client, WRITER, WriterInfo)
    return value if isinstance(value, WriterInfo) else None


def _zk_side(facts: Facts, bound: LogIdentity | None) -> str:
    m = facts.zk.migration
    parts = []
    c = facts.zk.controller
    if facts.zk.kraft_holds_controller and c is not None:
        parts.append(f"{P.CONTROLLER} epoch {c.kraft_controller_epoch}")
    if m is not None:
        parts.append(f"{P.MIGRATION} offset {m.kraft_metadata_offset} epoch {m.kraft_metadata_epoch}")
    owner = bound.describe() if bound is not None else "an unrecorded log"
    return f"ZooKeeper's claim ({', '.join(parts)}) belongs to {owner}"


def problem(
    client: KazooClient,
    facts: Facts,
    log_dir: str,
    *,
    archived_ok: bool = False,
    log: MetadataLog | None = None,
) -> BindingProblem | None:
    """Why `log_dir` may not act on ZooKeeper's claim, or None when it holds it (or nothing is claimed).

    `archived_ok`: a rollback interrupted after archiving the log finds it under `<dir>.rolled-back-*`.
    `log`: the caller's open (writable) log of `log_dir`.
    """
    zk = facts.zk
    m = zk.migration
    covered = m is not None and m.kraft_metadata_offset >= 0
    if not (covered or zk.kraft_holds_controller):
        return None
    bound = read_binding(client)
    writer = read_writer(client)
    if bound is None and writer is None:
        return None  # a claim from before the binding (or Kafka's own): the node-id guard applies
    meta = _meta(log_dir) if facts.log.exists else None
    # A directory is its directory id where it lives: a copy (rsync, cp -a) keeps the id but is
    # another log, whose records after what ZooKeeper covers no claim ever acknowledged.
    ours = (meta.directory_id, socket.gethostname(), str(Path(log_dir).resolve())) if meta else None
    if ours is None and archived_ok and bound is not None:
        path = Path(log_dir)
        for archived in sorted(path.parent.glob(f"{path.name}.rolled-back-*")):
            am = _meta(archived)
            if am is not None and am.directory_id == bound.directory_id:
                return None
    same_dir = ours is not None and bound is not None and ours == bound.key
    why = _holds(log_dir, facts, bound if same_dir else None, log)
    live_other = writer is not None and writer.key != ours
    if why is None and not (live_other and same_dir):
        return None  # the bound log, or another log holding exactly what ZooKeeper covers
    given = f"-l {log_dir} " + (why or f"is not that directory (directory id {ours and ours[0]})")
    if live_other:
        assert writer is not None
        return BindingProblem(
            f"another live writer holds ZooKeeper's claim: {writer.describe()}; {given}: stop that "
            f"writer first, or point --log-dir at its log",
            live=True,
        )
    return BindingProblem(f"{_zk_side(facts, bound)}, but {given}: {TAKEOVER_HINT}", live=False)


def _holds(log_dir: str, facts: Facts, bound: LogIdentity | None, open_log: MetadataLog | None) -> str | None:
    """None when the log holds what ZooKeeper records; else why not. `bound`: it is the bound directory."""
    lf = facts.log
    if lf.foreign_cluster is not None:
        return f"belongs to cluster {lf.foreign_cluster}"
    if not lf.exists:
        return "holds no log (no meta.properties)"
    m = facts.zk.migration
    points: list[tuple[str, int, int]] = []
    if m is not None and m.kraft_metadata_offset >= 0:
        points.append((P.MIGRATION, m.kraft_metadata_offset, m.kraft_metadata_epoch))
    elif bound is None:
        return "is not the log that claimed ZooKeeper (nothing is covered yet to compare)"
    if bound is not None and bound.copy_offset >= 0:
        points.append(("the copy's commit", bound.copy_offset, bound.copy_epoch))
    with nullcontext(open_log) if open_log is not None else MetadataLog.open(log_dir) as log:
        for what, offset, epoch in points:
            if offset > log.end_offset - 1:
                return f"ends at offset {log.end_offset - 1}, before {what} at offset {offset}"
            if offset < log.log_start_offset:
                why = _snapshot_holds(log, what, offset, epoch)
                if why is not None:
                    return why
                continue
            have = log.epoch_for_offset(offset)
            if have != epoch:
                return f"has epoch {have} at offset {offset} where {what} records epoch {epoch}"
    if bound is None and m is not None and lf.last_record_offset > m.kraft_metadata_offset:
        return (
            f"has {lf.last_record_offset - m.kraft_metadata_offset} records after offset "
            f"{m.kraft_metadata_offset} that ZooKeeper never acknowledged (written by a writer that "
            "no longer holds the claim)"
        )
    return None


def _snapshot_holds(log: MetadataLog, what: str, offset: int, epoch: int) -> str | None:
    """Retention moved the log start past `offset`: the snapshots stand for it. One ending right after
    it carries its epoch exactly; otherwise the oldest one past it can only have been written in that
    epoch or a later one (epochs never go back)."""
    covering = [s for s in list_snapshots(log.partition_dir) if s.end_offset > offset]
    if not covering:
        return f"starts at offset {log.log_start_offset} with no snapshot past {what} at offset {offset}"
    exact = next((s for s in covering if s.end_offset == offset + 1), None)
    if exact is not None and exact.epoch != epoch:
        return f"has a snapshot ending at offset {offset} in epoch {exact.epoch} where {what} records epoch {epoch}"
    if covering[0].epoch < epoch:
        return (
            f"has a snapshot past offset {offset} in epoch {covering[0].epoch}, before the epoch {epoch} "
            f"{what} records"
        )
    return None


def require_bound(client: KazooClient, facts: Facts, log_dir: str, *, archived_ok: bool = False) -> None:
    """Refuse (exit 2, or 4 with another live writer) before anything is written anywhere."""
    found = problem(client, facts, log_dir, archived_ok=archived_ok)
    if found is not None:
        raise found.error()


def takeover_problem(client: KazooClient, facts: Facts, log_dir: str, option: str) -> BindingProblem | None:
    """For `--recopy` / `--force-orphaned`: a live writer still refuses; the given directory must hold
    no log (the lost disk's replacement), so no unacknowledged record of it is ever carried."""
    found = problem(client, facts, log_dir)
    if found is not None and found.live:
        return found
    if facts.log.exists:
        return BindingProblem(
            f"{option} takes over into a directory without a log, but -l {log_dir} holds one: move it "
            "aside (it is never written to ZooKeeper this way)",
            live=False,
        )
    return None


def takeover_note(client: KazooClient, facts: Facts, what: str) -> str:
    """What a takeover overwrites, said before it does."""
    bound = read_binding(client)
    m = facts.zk.migration
    lost = bound.describe() if bound is not None else "the log that claimed ZooKeeper"
    covered = (
        f"ZooKeeper's data (covering offset {m.kraft_metadata_offset} of it)"
        if m is not None and m.kraft_metadata_offset >= 0
        else "ZooKeeper's data"
    )
    return (
        f"taking over from {lost}: its claim and {P.MIGRATION} are replaced, {what}; {covered} is kept "
        "and records of the lost log after that offset are abandoned"
    )


def _writer_info(identity: LogIdentity) -> WriterInfo:
    try:
        import click

        ctx = click.get_current_context(silent=True)
        command = ctx.command_path if ctx is not None else "zk2kraft"
    except ImportError:  # pragma: no cover - click is a dependency
        command = "zk2kraft"
    return WriterInfo(
        pid=os.getpid(),
        host=identity.host,
        since=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        command=name_only(command) or "zk2kraft",
        directory_id=identity.directory_id,
        path=identity.path,
        kraft_epoch=identity.kraft_epoch,
    )


def record_claim(client: KazooClient, claim: Claim, identity: LogIdentity, writer: bool = True) -> None:
    """Bind the claim to `identity` (and, with `writer`, register this process as its live writer) in
    one multi fenced by the claim's /controller_epoch version."""
    acl = client.default_acl or OPEN_ACL_UNSAFE
    try:
        retry_transient(lambda: client.create(ROOT, b"", acl=acl), f"creating {ROOT}", client=client)
    except NodeExistsError:
        pass
    binding = json.dumps(asdict(identity), sort_keys=True).encode()
    for _ in range(5):
        txn = client.transaction()
        txn.check(P.CONTROLLER_EPOCH, claim.controller_epoch_zk_version)
        if read_znode(client, BINDING) is None:
            txn.create(BINDING, binding, acl=acl)
        else:
            txn.set_data(BINDING, binding, -1)
        if writer:
            held = client.exists(WRITER)
            if held is not None and held.ephemeralOwner != client.client_id[0]:
                txn.delete(WRITER, held.version)
            if held is None or held.ephemeralOwner != client.client_id[0]:
                body = json.dumps(asdict(_writer_info(identity)), sort_keys=True).encode()
                txn.create(WRITER, body, acl=acl, ephemeral=True)
        results = retry_transient(lambda t=txn: t.commit(), f"writing {BINDING}", client=client)
        failed = [r for r in results if isinstance(r, Exception)]
        if not failed:
            return
        if isinstance(results[0], Exception):
            raise FencedError(
                f"fenced by a newer controller: {P.CONTROLLER_EPOCH} is no longer at version "
                f"{claim.controller_epoch_zk_version}; {BINDING} was not written"
            )
        # the binding or writer znode changed between our read and the multi: read again
    raise FencedError(f"{BINDING} and {WRITER} keep changing under this claim: another writer? run again")


def forget(client: KazooClient) -> None:
    """After a rollback released ZooKeeper: nothing is claimed, so nothing is bound."""
    for path in (WRITER, BINDING, ROOT):
        try:
            retry_transient(lambda p=path: client.delete(p), f"deleting {path}", client=client)
        except NoNodeError:
            pass
        except Exception:  # noqa: BLE001 - a leftover binding is ignored without a claim
            return


def guard(
    client: KazooClient,
    facts: Facts,
    log_dir: str,
    *,
    takeover: tuple[str, str] | None = None,
    archived_ok: bool = False,
) -> str | None:
    """The check at the start of every writing command. `takeover` is (option, what it overwrites)
    when the operator asked for one: then the note saying what is overwritten is returned."""
    found = problem(client, facts, log_dir, archived_ok=archived_ok)
    if found is None:
        return None
    if takeover is None:
        raise found.error()
    option, what = takeover
    refusal = takeover_problem(client, facts, log_dir, option)
    if refusal is not None:
        raise refusal.error()
    return takeover_note(client, facts, what)
