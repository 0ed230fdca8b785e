"""ElectLeaders (v0-2) on the controller listener: preferred and unclean elections.

Decided as Kafka 3.9's `ReplicationControlManager.electLeaders` decides them, against the image under
the service's lock, and appended like AlterPartition's changes (`ControllerService._decide`: one
batch, answered once durable in the log; the dual-write syncer carries the new partition states to
ZooKeeper behind it, and the propagator to the ZooKeeper-mode brokers).

- preferred: the first replica becomes leader if it is in the ISR and usable (registered, unfenced,
  not shutting down, its log directory online); already leader `ELECTION_NOT_NEEDED`; otherwise
  `PREFERRED_LEADER_NOT_AVAILABLE`.
- unclean: only for a partition without a leader (else `ELECTION_NOT_NEEDED`): a usable ISR member,
  else the first usable replica with the ISR reduced to it and the leader RECOVERING; none
  `ELIGIBLE_LEADERS_NOT_AVAILABLE`.
- no partitions named: every partition is tried and those that needed nothing are left out.
"""

from __future__ import annotations

from typing import Any

from migrator.controller import core
from migrator.controller import kafka_errors as E
from migrator.controller.admin_api import ZERO, admin_hook, build, error, kio_module
from migrator.controller.core import NO_LEADER
from migrator.kraft.records import MetadataRecord, kafka_to_uuid, record
from migrator.model import ClusterImage

__all__ = ["handle", "refuse_all"]

PREFERRED, UNCLEAN = 0, 1
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
ELECTION_NOT_NEEDED = 84

Result = tuple[int, int, str | None]  # partition, error code, message


def handle(service: Any, api_key: int, version: int, request: Any) -> Any:
    if admin_hook(service) is None:
        return refuse_all(api_key, version, request, E.NOT_CONTROLLER)
    kind = int(getattr(request, "election_type", PREFERRED))

    def decide() -> core.Decision:
        records: list[MetadataRecord] = []
        results = _elect(service, service.image, request.topic_partitions, kind, records)
        return core.Decision(records, results)

    refused = [
        (t.topic, [(p, E.NOT_CONTROLLER, None) for p in t.partitions]) for t in request.topic_partitions or ()
    ]
    results = service._decide("ElectLeaders", decide, refused)  # noqa: SLF001 - the service's one append path
    return _response(version, results, E.NONE)


def refuse_all(api_key: int, version: int, request: Any, code: int) -> Any:
    parts = getattr(request, "topic_partitions", None) or ()
    return _response(version, [(t.topic, [(p, code, None) for p in t.partitions]) for t in parts], code)


def _elect(
    service: Any, image: ClusterImage, wanted: Any, kind: int, records: list[MetadataRecord]
) -> list[tuple[str, list[Result]]]:
    out: list[tuple[str, list[Result]]] = []
    if wanted is None:
        for name, topic in image.topics.items():
            results = [_one(service, image, name, p, kind, records) for p in topic.partitions]
            out.append((name, [r for r in results if r[1] != ELECTION_NOT_NEEDED]))
        return out
    for t in wanted:
        out.append((t.topic, [_one(service, image, t.topic, int(p), kind, records) for p in t.partitions]))
    return out


def _one(
    service: Any, image: ClusterImage, name: str, index: int, kind: int, records: list[MetadataRecord]
) -> Result:
    topic = image.topics.get(name)
    if topic is None:
        return index, E.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}"
    p = topic.partitions.get(index)
    if p is None or topic.topic_id is None:
        return index, E.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {name}-{index}"
    if (kind == PREFERRED and p.replicas and p.leader == p.replicas[0]) or (
        kind == UNCLEAN and p.leader != NO_LEADER
    ):
        return index, ELECTION_NOT_NEEDED, None

    def usable(r: int) -> bool:
        return service.core._acceptable(image, r, name, index)  # noqa: SLF001 - the core's own rule

    fields: dict[str, object] = {}
    if kind == PREFERRED:
        preferred = p.replicas[0] if p.replicas else NO_LEADER
        if preferred not in p.isr or not usable(preferred):
            return index, PREFERRED_LEADER_NOT_AVAILABLE, None
        fields["Leader"] = preferred
    else:
        clean = next((r for r in p.isr if usable(r)), None)
        if clean is not None:
            fields["Leader"] = clean
        else:
            unclean = next((r for r in p.replicas if usable(r)), None)
            if unclean is None:
                return index, ELIGIBLE_LEADERS_NOT_AVAILABLE, None
            fields.update(Leader=unclean, Isr=[unclean], LeaderRecoveryState=1)
    records.append(
        record("PartitionChangeRecord", 0, PartitionId=index, TopicId=kafka_to_uuid(topic.topic_id), **fields)
    )
    return index, E.NONE, None


def _response(version: int, results: list[tuple[str, list[Result]]], code: int) -> Any:
    m = kio_module(43, version, "response")
    return build(
        m.ElectLeadersResponse,
        throttle_time=ZERO,
        error_code=error(code),
        replica_election_results=tuple(
            build(
                m.ReplicaElectionResult,
                topic=name,
                partition_result=tuple(
                    build(m.PartitionResult, partition_id=p, error_code=error(c), error_message=msg)
                    for p, c, msg in parts
                ),
            )
            for name, parts in results
        ),
    )
