"""Handing the metadata log directory to Kafka's own KRaft controller after `finalize`.

Kafka 3.9 opens `__cluster_metadata-0` as an unclean shutdown every time (KafkaMetadataLog passes
`lastShutdownClean = false`, recovery point 0): it re-reads every segment, truncates at the first invalid
batch, rebuilds `.index`/`.timeindex`, drops partial, deleted and below-log-start snapshots, and takes the
log start from the first segment's base offset (zk2kraft's in-memory log start inside a segment is lost).
`quorum-state` (FileQuorumStateStore, data_version 0 with kraft.version 0) makes it resume as the resigned
leader of the stored epoch and elect itself in the next one; `meta.properties` v1 must name its node and
cluster, and gets a directory id written if it has none (KafkaRaftServer, as `kafka-storage format` does).

`prepare` leaves the directory so that nothing of that is needed: the latest snapshot at the log end
and the log start moved to it (the segments below deleted, so the first segment's base, the log start
Kafka derives, is that snapshot: no Kafka loader replays the copy's transaction and later deletions in
one delta, see `prepare`), the indexes Kafka would build, the quorum state of the last epoch with this
node as the only voter, and a directory id. The claim's binding to ZooKeeper's `/migration` offset
is checked against that snapshot from then on. `check` says, file by file, what Kafka would refuse
("refuse") or repair on start ("rebuild").
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from migrator.errors import BadInputError, ZkKraftError
from migrator.kraft import dirfiles
from migrator.kraft.log import MetadataLog
from migrator.kraft.log_verify import verify_log
from migrator.kraft.offset_index import LogIndex, read_index_file, read_time_index_file, write_index_files
from migrator.kraft.retention import purge_aborted, snapshot_now, start_at_snapshot
from migrator.kraft.snapshot import list_snapshots, parse_snapshot_name

__all__ = ["Finding", "HandoverReport", "check", "prepare"]

REFUSE, REBUILD = "refuse", "rebuild"
_ABORT = "AbortTransactionRecord"


@dataclass(frozen=True)
class Finding:
    """What Kafka would do about one file: refuse to start / serve what it must not, or rewrite it."""

    verdict: str  # "refuse" | "rebuild"
    file: str
    message: str


@dataclass
class HandoverReport:
    path: str
    findings: list[Finding] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)

    @property
    def refused(self) -> list[Finding]:
        return [f for f in self.findings if f.verdict == REFUSE]

    @property
    def ok(self) -> bool:
        return not self.findings


def prepare(log: MetadataLog) -> list[str]:
    """Make the (writable, finalized) log directory Kafka's controller's; returns what was done."""
    if not log.writable:
        raise BadInputError(f"{log.log_dir}: the handover needs the log opened for writing")
    meta = log.meta
    if meta is None or meta.cluster_id is None:
        raise BadInputError(f"{log.log_dir}: no meta.properties with a cluster id: not a KRaft log directory")
    done: list[str] = []
    purged = purge_aborted(log)  # the copy's commit already did this; a directory from elsewhere may not have
    if purged is not None:
        done.append(f"aborted transactions put below the log start, now {purged}")
    end = log.end_offset
    if snapshot_now(log) != end:
        raise BadInputError(
            f"{log.partition_dir}: a metadata transaction is open at the log end {end}: no snapshot can be "
            "taken there, so the directory cannot be handed to Kafka yet"
        )
    done.append(f"latest snapshot at the log end offset {end} (epoch {log.latest_epoch})")
    # The snapshot is the log start, Kafka's too (its first segment's base): a Kafka loader fetching
    # from the log start would otherwise replay the copy's transaction and every later change in one
    # delta, and ConfigurationsDelta.replay(RemoveTopicRecord) only deletes configs of its base image,
    # so a topic deleted during dual-write would keep its configs in every Kafka broker's image.
    if log.segments and log.segments[0].base_offset < end:
        start_at_snapshot(log, end)
        done.append(f"log start moved to that snapshot: segments below offset {end} deleted")
    node = meta.node_id
    state = dirfiles.QuorumState(leader_id=node, leader_epoch=log.latest_epoch, voted_id=-1, voters=(node,))
    dirfiles.write_quorum_state(log.partition_dir / dirfiles.QUORUM_STATE, state)
    done.append(f"quorum-state: node {node} leader of epoch {log.latest_epoch}, the only voter")
    dirfiles.write_leader_epochs(log.partition_dir / dirfiles.LEADER_EPOCH_CHECKPOINT, log.leader_epochs)
    index = LogIndex(log)
    for seg in log.segments:
        si = index.segment(seg.base_offset)
        if si is not None:
            write_index_files(si)
    done.append(f".index and .timeindex for {len(log.segments)} segment(s)")
    if not meta.directory_id:
        new = dirfiles.MetaProperties(
            1, node, meta.cluster_id, dirfiles.random_kafka_uuid(), dict(meta.extra)
        )
        dirfiles.write_meta_properties(log.log_dir / dirfiles.META_PROPERTIES, new)
        log.meta = dirfiles.read_meta_properties(log.log_dir / dirfiles.META_PROPERTIES)
        done.append(f"meta.properties: directory.id {log.meta.directory_id} written")
    return done


def _directory_id_problem(text: str) -> str | None:
    """Kafka's Uuid.fromString plus DirectoryId.reserved: 16 bytes of URL-safe base64, not 0..99."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError):
        return "is not base64"
    if len(raw) != 16:
        return f"decodes to {len(raw)} bytes, not 16"
    value = uuid.UUID(bytes=raw).int
    if value >> 64 == 0 and value & ((1 << 64) - 1) < 100:
        return "is one of Kafka's reserved directory ids (UNASSIGNED, LOST, MIGRATING, ...)"
    return None


def check(log_dir: str | os.PathLike[str], node_id: int | None = None) -> HandoverReport:
    """What Kafka 3.9's controller would refuse or rebuild when started on ``log_dir`` (read-only)."""
    root = Path(log_dir)
    part = root / "__cluster_metadata-0" if (root / "__cluster_metadata-0").is_dir() else root
    if part.name != "__cluster_metadata-0":
        raise BadInputError(f"{root}: no __cluster_metadata-0 directory in it")
    meta_dir = part.parent
    report = HandoverReport(str(meta_dir))
    add = report.findings.append

    meta_path = meta_dir / dirfiles.META_PROPERTIES
    report.checked.append(meta_path.name)
    meta: dirfiles.MetaProperties | None = None
    try:
        meta = dirfiles.read_meta_properties(meta_path)
    except ZkKraftError as e:
        add(Finding(REFUSE, meta_path.name, f"Kafka cannot load it: {e}"))
    if meta is not None:
        if meta.version != 1:
            add(
                Finding(REFUSE, meta_path.name, f"version {meta.version}: a KRaft controller needs version 1")
            )
        if meta.cluster_id is None:
            add(Finding(REFUSE, meta_path.name, "no cluster.id"))
        if node_id is not None and meta.node_id != node_id:
            add(
                Finding(
                    REFUSE,
                    meta_path.name,
                    f"node.id {meta.node_id}, the controller is configured as {node_id}",
                )
            )
        if not meta.directory_id:
            add(
                Finding(REBUILD, meta_path.name, "no directory.id: Kafka generates one and rewrites the file")
            )
        elif (why := _directory_id_problem(meta.directory_id)) is not None:
            add(Finding(REFUSE, meta_path.name, f"directory.id {meta.directory_id!r} {why}"))
    node = node_id if node_id is not None else (meta.node_id if meta is not None else None)

    pm = part / dirfiles.PARTITION_METADATA
    report.checked.append(f"{part.name}/{pm.name}")
    try:
        if dirfiles.read_partition_metadata(pm) != dirfiles.METADATA_TOPIC_ID:
            add(Finding(REFUSE, pm.name, "the topic id is not __cluster_metadata's (AAAAAAAAAAAAAAAAAAAAAQ)"))
    except ZkKraftError as e:
        add(Finding(REBUILD, pm.name, f"unreadable or missing ({e}): Kafka writes it again"))

    damage = verify_log(part).damage
    for d in damage:
        add(
            Finding(
                REFUSE,
                Path(d.file).name,
                f"byte {d.position}: {d.reason} — Kafka's recovery truncates here and deletes every later segment",
            )
        )
    report.checked.append("segments and snapshots (CRC, framing)")

    log = MetadataLog.open(part) if not damage else None
    try:
        if log is not None:
            _check_log(log, part, node, report)
    finally:
        if log is not None:
            log.close()
    return report


def _check_log(log: MetadataLog, part: Path, node: int | None, report: HandoverReport) -> None:
    add = report.findings.append
    log.as_kafka_opens()  # Kafka's log start is the first segment's base
    first_base = log.segments[0].base_offset if log.segments else log.end_offset
    snaps = list_snapshots(part)
    latest = snaps[-1] if snaps else None

    for name in sorted(os.listdir(part)):
        if name.endswith((".checkpoint.part", ".checkpoint.deleted")) or (
            name.endswith(".checkpoint")
            and (sid := parse_snapshot_name(name)) is not None
            and sid[0] < first_base
        ):
            add(Finding(REBUILD, name, "a partial, deleted or below-log-start snapshot: Kafka deletes it"))
    if latest is None and first_base > 0:
        add(
            Finding(
                REFUSE, part.name, f"the log starts at {first_base} and no snapshot covers what is below it"
            )
        )
    if latest is not None and latest.end_offset > log.end_offset:
        add(Finding(REBUILD, latest.path.name, "past the log end: Kafka truncates the whole log to it"))
    if latest is not None and first_base < latest.end_offset:
        # Kafka's log start is the first segment's base: a fetcher from there gets records below the snapshot
        aborted = next((o for o, _e, r in log.read(first_base) if getattr(r, "name", "") == _ABORT), None)
        if aborted is not None:
            add(
                Finding(
                    REFUSE,
                    log.segments[0].path.name,
                    f"Kafka's log start is this segment's base {first_base}; an aborted transaction ends at "
                    f"offset {aborted} above it, so a fetcher from the log start would replay an aborted copy",
                )
            )

    if first_base == 0 and latest is not None:
        _check_one_delta(log, report)

    qs = part / dirfiles.QUORUM_STATE
    report.checked.append(f"{part.name}/{qs.name}")
    if not qs.exists():
        add(
            Finding(REBUILD, qs.name, "missing: Kafka starts unattached in the log's epoch and elects itself")
        )
    else:
        first_line = qs.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0]
        try:
            data = json.loads(first_line)
            version = int(data["data_version"])
            epoch = int(data["leaderEpoch"])
        except (ValueError, KeyError, TypeError):
            add(
                Finding(REFUSE, qs.name, "its first line is not a quorum-state JSON object with data_version")
            )
        else:
            if version not in (0, 1):
                add(Finding(REFUSE, qs.name, f"data_version {version}: Kafka 3.9 reads 0 and 1"))
            voters = [v.get("voterId") for v in data.get("currentVoters") or [] if isinstance(v, dict)]
            if node is not None and voters and voters != [node]:
                add(Finding(REFUSE, qs.name, f"voters {voters}, not the single voter {node} of this quorum"))
            if epoch < log.latest_epoch:
                add(
                    Finding(
                        REBUILD,
                        qs.name,
                        f"leaderEpoch {epoch} is below the log's epoch {log.latest_epoch}: Kafka starts "
                        "unattached in the log's epoch instead",
                    )
                )

    lec = part / dirfiles.LEADER_EPOCH_CHECKPOINT
    report.checked.append(f"{part.name}/{lec.name}")
    try:
        entries = dirfiles.read_leader_epochs(lec)
        kept = [e for e in entries if e[1] < log.end_offset]  # LeaderEpochFileCache.truncateFromEnd
        first = log.first_batch_offset()
        if kept and first < kept[0][1]:
            # LogSegment.recover only assigns epochs above the cache's latest: Kafka keeps this cut
            add(
                Finding(
                    REFUSE,
                    lec.name,
                    f"starts at offset {kept[0][1]} (epoch {kept[0][0]}) but the segments hold batches from "
                    f"offset {first}: Kafka's recovery keeps it so, and those batches have no leader epoch in "
                    "Kafka's cache",
                )
            )
        elif kept != log.leader_epochs and entries != log.leader_epochs:
            add(
                Finding(
                    REBUILD, lec.name, "does not match the batches' epochs: Kafka rebuilds it on recovery"
                )
            )
    except ZkKraftError as e:
        add(Finding(REBUILD, lec.name, f"unreadable or missing ({e}): Kafka rebuilds it on recovery"))

    index = LogIndex(log)
    for seg in log.segments:
        si = index.segment(seg.base_offset)
        if si is None:
            continue
        for path, want, reader in (
            (
                seg.path.with_suffix(".index"),
                list(zip(si.offsets, si.positions, strict=True)),
                read_index_file,
            ),
            (seg.path.with_suffix(".timeindex"), None, read_time_index_file),
        ):
            report.checked.append(path.name)
            try:
                got = reader(path, seg.base_offset)
            except (OSError, ValueError) as e:
                add(Finding(REBUILD, path.name, f"{e}: Kafka rebuilds it (it recovers every segment)"))
                continue
            if want is not None and got != want:
                add(Finding(REBUILD, path.name, "not the entries Kafka builds: it rebuilds them on recovery"))


def _check_one_delta(log: MetadataLog, report: HandoverReport) -> None:
    """Kafka's log start is 0: its leader answers a Fetch from 0 with the records from 0 (not the
    snapshot), and a Kafka MetadataLoader replays them as one delta. ConfigurationsDelta.replay(
    RemoveTopicRecord) deletes only configs of the delta's base image, so a topic whose configs and
    deletion both lie in that range keeps its configs in that loader's image."""
    names: dict[object, str] = {}
    configured: dict[str, int] = {}
    for offset, _epoch, rec in log.read(0):
        name = getattr(rec, "name", "")
        fields = getattr(rec, "fields", {})
        if name == "TopicRecord":
            names[fields.get("TopicId")] = fields.get("Name")
        elif name == "ConfigRecord" and fields.get("ResourceType") == 2:
            configured.setdefault(fields.get("ResourceName"), offset)
        elif name == "RemoveTopicRecord":
            topic = names.get(fields.get("TopicId"))
            if topic is not None and topic in configured:
                report.findings.append(
                    Finding(
                        REFUSE,
                        log.segments[0].path.name,
                        f"Kafka's log start is 0 below the snapshot: a Kafka loader fetching from it replays "
                        f"topic {topic!r}'s configs (offset {configured[topic]}) and its deletion (offset "
                        f"{offset}) in one delta and keeps the deleted topic's configs",
                    )
                )
                return


def report_dict(report: HandoverReport) -> dict[str, object]:
    return {
        "path": report.path,
        "refused": len(report.refused),
        "findings": [{"verdict": f.verdict, "file": f.file, "message": f.message} for f in report.findings],
        "checked": report.checked,
    }


def report_lines(report: HandoverReport) -> list[str]:
    lines = [f"{f.verdict}: {f.file}: {f.message}" for f in report.findings]
    if report.ok:
        lines.append(
            f"{report.path}: Kafka's controller starts from it as it is ({len(report.checked)} checks)"
        )
    else:
        n = len(report.refused)
        lines.append(f"{n} finding(s) Kafka would refuse, {len(report.findings) - n} it would rebuild")
    return lines
