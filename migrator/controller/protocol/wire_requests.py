"""Requests between kio's per-version entities and the version-independent classes in `messages`.

Split out of `wire`, which frames and heads them; `_u` is shared with `wire_responses`.
"""

from __future__ import annotations

import importlib
import uuid
from typing import Any

from migrator.controller.protocol import kio_ext
from migrator.controller.protocol import messages as M
from migrator.controller.protocol.wire_versions import PASSTHROUGH, WireError


def _u(value: uuid.UUID | None) -> uuid.UUID:
    return value if value is not None else uuid.UUID(int=0)


def _request_to_kio(api_key: int, version: int, cls: Any, req: Any) -> Any:
    if api_key in PASSTHROUGH:
        return req
    if api_key == M.API_VERSIONS:
        if version >= 3:
            return cls(
                client_software_name=req.client_software_name,
                client_software_version=req.client_software_version,
            )
        return cls()
    if api_key == M.BROKER_REGISTRATION:
        mod = importlib.import_module(cls.__module__)
        kw: dict[str, Any] = dict(
            broker_id=req.broker_id,
            cluster_id=req.cluster_id,
            incarnation_id=req.incarnation_id,
            listeners=tuple(
                mod.Listener(name=x.name, host=x.host, port=x.port, security_protocol=x.security_protocol)
                for x in req.listeners
            ),
            features=tuple(
                mod.Feature(
                    name=f.name,
                    min_supported_version=f.min_supported_version,
                    max_supported_version=f.max_supported_version,
                )
                for f in req.features
            ),
            rack=req.rack,
        )
        if version >= 1:
            kw["is_migrating_zk_broker"] = req.is_migrating_zk_broker
        if version >= 2:
            kw["log_dirs"] = tuple(req.log_dirs)
        if version >= 3:
            kw["previous_broker_epoch"] = req.previous_broker_epoch
        return cls(**kw)
    if api_key == M.BROKER_HEARTBEAT:
        kw = dict(
            broker_id=req.broker_id,
            broker_epoch=req.broker_epoch,
            current_metadata_offset=req.current_metadata_offset,
            want_fence=req.want_fence,
            want_shut_down=req.want_shut_down,
        )
        if version >= 1:
            kw["offline_log_dirs"] = tuple(req.offline_log_dirs)
        return cls(**kw)
    if api_key == M.ALTER_PARTITION:
        if version <= 1:
            topics = []
            for t in req.topics:
                if t.topic_name is None:
                    raise WireError(f"AlterPartition v{version} names topics: topic_name is missing")
                parts = []
                for p in t.partitions:
                    pk: dict[str, Any] = dict(
                        partition_index=p.partition_index,
                        leader_epoch=p.leader_epoch,
                        new_isr=tuple(p.new_isr),
                        partition_epoch=p.partition_epoch,
                    )
                    if version == 1:
                        pk["leader_recovery_state"] = p.leader_recovery_state
                    parts.append(cls.PartitionData(**pk))
                topics.append(cls.TopicData(topic_name=t.topic_name, partitions=tuple(parts)))
            return cls(broker_id=req.broker_id, broker_epoch=req.broker_epoch, topics=tuple(topics))
        mod = importlib.import_module(cls.__module__)
        topics = []
        for t in req.topics:
            if t.topic_id is None:
                raise WireError(f"AlterPartition v{version} names topics by id: topic_id is missing")
            parts = []
            for p in t.partitions:
                pk = dict(
                    partition_index=p.partition_index,
                    leader_epoch=p.leader_epoch,
                    leader_recovery_state=p.leader_recovery_state,
                    partition_epoch=p.partition_epoch,
                )
                if version == 2:
                    pk["new_isr"] = tuple(p.new_isr)
                else:
                    pk["new_isr_with_epochs"] = tuple(
                        mod.BrokerState(broker_id=b.broker_id, broker_epoch=b.broker_epoch)
                        for b in p.new_isr_with_epochs
                    )
                parts.append(mod.PartitionData(**pk))
            topics.append(mod.TopicData(topic_id=t.topic_id, partitions=tuple(parts)))
        return cls(broker_id=req.broker_id, broker_epoch=req.broker_epoch, topics=tuple(topics))
    if api_key == M.ALTER_REPLICA_STATE:
        return cls(
            broker_id=req.broker_id,
            broker_epoch=req.broker_epoch,
            event_type=req.event_type,
            event_reason=req.event_reason,
            topics=tuple(
                kio_ext.ReplicaStateTopic(name=t.name, partitions=tuple(t.partitions)) for t in req.topics
            ),
        )
    raise WireError(f"unknown apiKey {api_key}")


def _request_from_kio(api_key: int, version: int, body: Any) -> Any:
    if api_key in PASSTHROUGH:
        return body
    if api_key == M.API_VERSIONS:
        if version >= 3:
            return M.ApiVersionsRequest(body.client_software_name, body.client_software_version)
        return M.ApiVersionsRequest()
    if api_key == M.BROKER_REGISTRATION:
        return M.BrokerRegistrationRequest(
            broker_id=int(body.broker_id),
            cluster_id=body.cluster_id,
            incarnation_id=_u(body.incarnation_id),
            listeners=[
                M.Listener(x.name, x.host, int(x.port), int(x.security_protocol)) for x in body.listeners
            ],
            features=[
                M.Feature(f.name, int(f.min_supported_version), int(f.max_supported_version))
                for f in body.features
            ],
            rack=body.rack,
            is_migrating_zk_broker=bool(getattr(body, "is_migrating_zk_broker", False)),
            log_dirs=[_u(d) for d in getattr(body, "log_dirs", ())],
            previous_broker_epoch=int(getattr(body, "previous_broker_epoch", -1)),
        )
    if api_key == M.BROKER_HEARTBEAT:
        return M.BrokerHeartbeatRequest(
            broker_id=int(body.broker_id),
            broker_epoch=int(body.broker_epoch),
            current_metadata_offset=int(body.current_metadata_offset),
            want_fence=bool(body.want_fence),
            want_shut_down=bool(body.want_shut_down),
            offline_log_dirs=[_u(d) for d in getattr(body, "offline_log_dirs", ())],
        )
    if api_key == M.ALTER_PARTITION:
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                if version >= 3:
                    isr = [
                        M.BrokerState(int(b.broker_id), int(b.broker_epoch)) for b in p.new_isr_with_epochs
                    ]
                else:
                    isr = [M.BrokerState(int(b)) for b in p.new_isr]
                parts.append(
                    M.AlterPartitionPartition(
                        partition_index=int(p.partition_index),
                        leader_epoch=int(p.leader_epoch),
                        new_isr_with_epochs=isr,
                        partition_epoch=int(p.partition_epoch),
                        leader_recovery_state=int(getattr(p, "leader_recovery_state", 0)),
                    )
                )
            if version <= 1:
                topics.append(M.AlterPartitionTopic(t.topic_name, None, parts))
            else:
                topics.append(M.AlterPartitionTopic(None, _u(t.topic_id), parts))
        return M.AlterPartitionRequest(int(body.broker_id), int(body.broker_epoch), topics)
    if api_key == M.ALTER_REPLICA_STATE:
        return M.AlterReplicaStateRequest(
            broker_id=int(body.broker_id),
            broker_epoch=int(body.broker_epoch),
            event_type=int(body.event_type),
            event_reason=body.event_reason,
            topics=[M.AlterReplicaStateTopic(t.name, [int(p) for p in t.partitions]) for t in body.topics],
        )
    raise WireError(f"unknown apiKey {api_key}")
