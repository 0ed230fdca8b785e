"""ElectLeaders (v0-2) on the controller listener: preferred and unclean elections.

Decided as Kafka 3.9's `ReplicationControlManager.electLeaders` decides them, against the image under
the service's lock, and appended like AlterPartition's changes (`ControllerService._decide`: one
batch, answered once durable in the log; the dual-write syncer carries the new partition states to
ZooKeeper behind it, and the propagator to the ZooKeeper-mode brokers).

- both go through the port of Kafka's PartitionChangeBuilder (`partition_reassignment.build_change`)
  with the election type, as `ReplicationControlManager.electLeader` does: a reassignment whose
  target replicas are all in the ISR completes in the same record.
- preferred: only when the first replica does not lead (else `ELECTION_NOT_NEEDED`): the first target
  replica if it is in the ISR and usable (registered, unfenced, not shutting down, its log directory
  online), else the current leader if it still is, else the next usable ISR replica; no change at all
  (a fenced preferred replica under a usable leader) is `PREFERRED_LEADER_NOT_AVAILABLE`.
- unclean: only for a partition without a leader (else `ELECTION_NOT_NEEDED`): a usable ISR member,
  else the first usable replica with the ISR reduced to it and the leader RECOVERING; none
  `ELIGIBLE_LEADERS_NOT_AVAILABLE`.
- no partitions named: every partition is tried and those that needed nothing are left out.
"""

from __future__ import annotations

from typing import Any

from migrator.controller import core
from migrator.controller.apis.admin_api import ZERO, admin_hook, build, error, kio_module
from migrator.controller.core import NO_LEADER
from migrator.controller.managers.partition_reassignment import build_change
from migrator.controller.protocol import kafka_errors as E
from migrator.kraft.records import MetadataRecord, kafka_to_uuid
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

    # Kafka's ReplicationControlManager.electLeader: the PartitionChangeBuilder with the election
    # type, so a reassignment whose targets are all in the ISR completes in the same record (the
    # replicas shrink to the targets, adding/removing cleared) instead of staying open.
    change = build_change(
        p, kafka_to_uuid(topic.topic_id), usable, preferred=kind == PREFERRED, unclean=kind == UNCLEAN
    )
    if change is None:
        missing = PREFERRED_LEADER_NOT_AVAILABLE if kind == PREFERRED else ELIGIBLE_LEADERS_NOT_AVAILABLE
        return index, missing, None
    records.append(change)
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
