"""Responses between the version-independent classes in `messages` and kio's per-version entities.

Split out of `wire`, which frames and heads them. The AlterPartition answer (one per ISR change, tens
of partitions each) is written straight from `messages` by a `fast_writer` generated from kio's
classes of its version: the same bytes as building kio's entities and writing them with kio's writer
(which was ~12 µs a partition of a request's handling), without either.
"""

from __future__ import annotations

import datetime
import importlib
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

from migrator.controller.protocol import kafka_errors as E
from migrator.controller.protocol import kio_ext
from migrator.controller.protocol import messages as M
from migrator.controller.protocol.fast_writer import writer_from
from migrator.controller.protocol.wire_requests import _u
from migrator.controller.protocol.wire_versions import PASSTHROUGH, WireError

# --- responses -------------------------------------------------------------------------------------


def _error(code: int) -> ErrorCode:
    """kio's ErrorCode for a Kafka code; a code kio does not know is sent as UNKNOWN_SERVER_ERROR."""
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode(E.UNKNOWN_SERVER_ERROR)


def _ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


_KNOWN_CODES = frozenset(int(c) for c in ErrorCode)


def _code(code: int) -> int:
    """`_error`'s code as an int: a code kio does not know is sent as UNKNOWN_SERVER_ERROR."""
    return code if code in _KNOWN_CODES else E.UNKNOWN_SERVER_ERROR


@cache
def _alter_partition_writer(cls: Any) -> Callable[..., None]:
    """The writer of an `M.AlterPartitionResponse` as `cls` (one served version) lays it out: the
    fields `_response_to_kio` maps, read from the message (v0-1's codes as given, v2+'s through
    `_code`, as kio's ErrorCode would have them)."""
    own = cls.__module__ == kio_ext.__name__
    mod = importlib.import_module(cls.__module__)
    part_cls = cls.PartitionData if own else mod.PartitionData
    topic_cls = cls.TopicData if own else mod.TopicData
    code = "o.error_code" if own else "_code(o.error_code)"
    names = (("_code", _code),)
    part_fields = {f for f in part_cls.__dataclass_fields__}
    part_exprs = {n: f"o.{n}" for n in part_fields} | {"error_code": code}
    part = writer_from(part_cls, tuple(sorted(part_exprs.items())), "", names=names)
    topic_exprs = {"partitions": "o.partitions"}
    topic_exprs |= {"topic_name": 'o.topic_name or ""'} if own else {"topic_id": "o.topic_id"}
    topic = writer_from(topic_cls, tuple(sorted(topic_exprs.items())), "", (("partitions", part),))
    top_exprs = (("error_code", code), ("throttle_time", "o.throttle_time_ms"), ("topics", "o.topics"))
    return writer_from(cls, top_exprs, "", (("topics", topic),), names)


def alter_partition_bytes(cls: Any, resp: M.AlterPartitionResponse) -> bytes:
    """An AlterPartition response's body in `cls`'s version: kio's bytes for `_response_to_kio`'s entity."""
    out = bytearray()
    _alter_partition_writer(cls)(resp, out)
    return bytes(out)


def _response_to_kio(api_key: int, version: int, cls: Any, resp: Any) -> Any:
    if api_key in PASSTHROUGH:
        return resp
    mod = importlib.import_module(cls.__module__)
    if api_key == M.API_VERSIONS:
        keys = tuple(
            mod.ApiVersion(api_key=a.api_key, min_version=a.min_version, max_version=a.max_version)
            for a in resp.api_keys
        )
        kw: dict[str, Any] = dict(error_code=_error(resp.error_code), api_keys=keys)
        if version >= 1:
            kw["throttle_time"] = _ms(resp.throttle_time_ms)
        if version >= 3:
            kw["supported_features"] = tuple(
                mod.SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                for n, lo, hi in resp.supported_features
            )
            kw["finalized_features"] = tuple(
                mod.FinalizedFeatureKey(name=n, max_version_level=v, min_version_level=v)
                for n, v in resp.finalized_features
            )
            kw["finalized_features_epoch"] = resp.finalized_features_epoch
            kw["zk_migration_ready"] = resp.zk_migration_ready
        return cls(**kw)
    if api_key == M.BROKER_REGISTRATION:
        return cls(
            throttle_time=_ms(resp.throttle_time_ms),
            error_code=_error(resp.error_code),
            broker_epoch=resp.broker_epoch,
        )
    if api_key == M.BROKER_HEARTBEAT:
        return cls(
            throttle_time=_ms(resp.throttle_time_ms),
            error_code=_error(resp.error_code),
            is_caught_up=resp.is_caught_up,
            is_fenced=resp.is_fenced,
            should_shut_down=resp.should_shut_down,
        )
    if api_key == M.ALTER_PARTITION:
        own = version <= 1
        part_cls = cls.PartitionData if own else mod.PartitionData
        topic_cls = cls.TopicData if own else mod.TopicData
        topics = []
        for t in resp.topics:
            parts = []
            for p in t.partitions:
                pk: dict[str, Any] = dict(
                    partition_index=p.partition_index,
                    error_code=p.error_code if own else _error(p.error_code),
                    leader_id=p.leader_id,
                    leader_epoch=p.leader_epoch,
                    isr=tuple(p.isr),
                    partition_epoch=p.partition_epoch,
                )
                if version >= 1:
                    pk["leader_recovery_state"] = p.leader_recovery_state
                parts.append(part_cls(**pk))
            if own:
                topics.append(topic_cls(topic_name=t.topic_name or "", partitions=tuple(parts)))
            else:
                topics.append(topic_cls(topic_id=_u(t.topic_id), partitions=tuple(parts)))
        return cls(
            throttle_time=_ms(resp.throttle_time_ms),
            error_code=resp.error_code if own else _error(resp.error_code),
            topics=tuple(topics),
        )
    if api_key == M.ALTER_REPLICA_STATE:
        return cls(
            throttle_time=_ms(resp.throttle_time_ms),
            error_code=resp.error_code,
            topics=tuple(
                kio_ext.ReplicaStateTopicResult(
                    name=t.name,
                    partitions=tuple(
                        kio_ext.ReplicaStatePartitionResult(
                            partition_index=p.partition_index, error_code=p.error_code
                        )
                        for p in t.partitions
                    ),
                )
                for t in resp.topics
            ),
        )
    raise WireError(f"unknown apiKey {api_key}")


def _throttle(body: Any) -> int:
    t = getattr(body, "throttle_time", None)
    return int(t.total_seconds() * 1000) if t is not None else 0


def _response_from_kio(api_key: int, version: int, body: Any) -> Any:
    if api_key in PASSTHROUGH:
        return body
    if api_key == M.API_VERSIONS:
        return M.ApiVersionsResponse(
            int(body.error_code),
            [
                M.ApiVersionRange(int(a.api_key), int(a.min_version), int(a.max_version))
                for a in body.api_keys
            ],
            _throttle(body),
        )
    if api_key == M.BROKER_REGISTRATION:
        return M.BrokerRegistrationResponse(int(body.error_code), int(body.broker_epoch), _throttle(body))
    if api_key == M.BROKER_HEARTBEAT:
        return M.BrokerHeartbeatResponse(
            int(body.error_code),
            bool(body.is_caught_up),
            bool(body.is_fenced),
            bool(body.should_shut_down),
            _throttle(body),
        )
    if api_key == M.ALTER_PARTITION:
        topics = []
        for t in body.topics:
            parts = [
                M.AlterPartitionPartitionResponse(
                    partition_index=int(p.partition_index),
                    error_code=int(p.error_code),
                    leader_id=int(p.leader_id),
                    leader_epoch=int(p.leader_epoch),
                    isr=[int(b) for b in p.isr],
                    leader_recovery_state=int(getattr(p, "leader_recovery_state", 0)),
                    partition_epoch=int(p.partition_epoch),
                )
                for p in t.partitions
            ]
            if version <= 1:
                topics.append(M.AlterPartitionTopicResponse(t.topic_name, None, parts))
            else:
                topics.append(M.AlterPartitionTopicResponse(None, _u(t.topic_id), parts))
        return M.AlterPartitionResponse(int(body.error_code), topics, _throttle(body))
    if api_key == M.ALTER_REPLICA_STATE:
        return M.AlterReplicaStateResponse(
            int(body.error_code),
            [
                M.AlterReplicaStateTopicResponse(
                    t.name,
                    [
                        M.AlterReplicaStatePartitionResponse(int(p.partition_index), int(p.error_code))
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ],
            _throttle(body),
        )
    raise WireError(f"unknown apiKey {api_key}")
