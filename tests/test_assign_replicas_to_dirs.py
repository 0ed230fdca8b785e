"""AssignReplicasToDirs (apiKey 73, KIP-858) through the listener, as Kafka 3.9's KRaft brokers send it.

Found by tests/test_real_kafka_migration.py (phase 3): every KRaft broker's AssignmentsManager sent it
for each replica it hosts and, answered UNSUPPORTED_VERSION, logged ERROR and retried for ever. Answered
as `ReplicationControlManager.handleAssignReplicasToDirs`: the directory lands in a
`PartitionChangeRecord`'s Directories (once; repeating it changes nothing), per-partition errors for an
unknown topic id, partition or a broker that is no replica, STALE_BROKER_EPOCH for a wrong epoch.
"""

from __future__ import annotations

import importlib
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import SPEC, cluster, log_replay
from test_admin_protocol import _register_all

from migrator import commands
from migrator.controller.apis.admin_assign_dirs_api import MIGRATING
from migrator.controller.client.client import ControllerClient
from migrator.controller.protocol import kafka_errors as E
from migrator.kraft.records import kafka_to_uuid

pytestmark = pytest.mark.zk


def _req(broker_id: int, epoch: int, directory: uuid.UUID, parts: dict[uuid.UUID, list[int]]):
    m = importlib.import_module("kio.schema.assign_replicas_to_dirs.v0.request")
    topics = tuple(
        m.TopicData(topic_id=tid, partitions=tuple(m.PartitionData(partition_index=p) for p in ps))
        for tid, ps in parts.items()
    )
    return m.AssignReplicasToDirsRequest(
        broker_id=broker_id, broker_epoch=epoch, directories=(m.DirectoryData(id_=directory, topics=topics),)
    )


def _errors(resp) -> dict[tuple[uuid.UUID, int], int]:
    return {
        (t.topic_id, p.partition_index): int(p.error_code)
        for d in resp.directories
        for t in d.topics
        for p in t.partitions
    }


def test_a_kraft_brokers_directory_assignment_is_recorded_as_kafka_does(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect, SPEC.model_copy(update={"pending_deletions": 0, "topics": 4})):
        ids = sorted(int(b) for b in zk.get_children("/brokers/ids"))
        running = commands.start_controller(
            zk_connect, str(log_dir), yes=True, broker_wait_timeout=60, session_timeout_ms=60_000
        )
        try:
            service = running.service
            _register_all(service, ids)
            assert running.wait_until(lambda r: service.admin is not None, 60), running.error
            image = service.image
            topic = next(t for t in image.topics.values() if t.partitions and t.topic_id)
            part = topic.partitions[0]
            broker = image.brokers[part.replicas[-1]]
            outsider = next(b for b in image.brokers.values() if b.id not in part.replicas) if len(
                image.brokers) > len(part.replicas) else None  # fmt: skip
            tid = kafka_to_uuid(topic.topic_id)
            directory = uuid.uuid4()
            with ControllerClient(*running.address, timeout_s=30) as c:
                got = c.call(73, 0, _req(broker.id, broker.broker_epoch, directory, {tid: [0, 999],
                                                                                     uuid.uuid4(): [0]}))  # fmt: skip
                assert int(got.error_code) == E.NONE
                errs = _errors(got)
                assert errs[(tid, 0)] == E.NONE
                assert errs[(tid, 999)] == E.UNKNOWN_TOPIC_OR_PARTITION
                assert [v for (t, _p), v in errs.items() if t != tid] == [E.UNKNOWN_TOPIC_ID]
                dirs = service.image.partition_directories[(topic.name, 0)]
                slot = part.replicas.index(broker.id)
                assert dirs[slot] == directory and all(
                    d == MIGRATING for i, d in enumerate(dirs) if i != slot
                )
                end = service.next_offset()
                again = c.call(73, 0, _req(broker.id, broker.broker_epoch, directory, {tid: [0]}))
                assert _errors(again) == {(tid, 0): E.NONE} and service.next_offset() == end  # nothing new
                stale = c.call(73, 0, _req(broker.id, broker.broker_epoch + 5, directory, {tid: [0]}))
                assert int(stale.error_code) == E.STALE_BROKER_EPOCH
                if outsider is not None:
                    other = c.call(73, 0, _req(outsider.id, outsider.broker_epoch, directory, {tid: [0]}))
                    assert _errors(other) == {(tid, 0): E.NOT_LEADER_OR_FOLLOWER}
            assert service.flush(30)
        finally:
            running.stop()
    replay, _end = log_replay(log_dir)  # the record replays to the same directories
    assert replay.image.partition_directories[(topic.name, 0)][slot] == directory
