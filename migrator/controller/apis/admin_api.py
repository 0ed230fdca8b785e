"""Metadata, CreateTopics and DeleteTopics on the controller listener, in kio's own entities.

A change is not decided here: each topic becomes the same `AdminChange` that `zk2kraft admin` sends,
and one request's changes are handed together to `service.admin` (installed by the driver while it
follows in DualWriteMetadata), which validates each with `plan_change`, appends the records of the
valid ones as one batch (Kafka's ControllerResult.atomic), replays and syncs ZooKeeper before it
returns; the invalid ones get their own errors. So an answer means durable in the log and carried
to ZooKeeper. Without that hook (soft start, or not following) every change answers NOT_CONTROLLER
and Metadata lists no topics (KIP-866).

Authorization happens before `handle`: `controller.apis.authorizer_requests`, called once from
`listener_runtime.dispatch`, takes out of each request the topics and configs the caller may not act
on and answers them 29/31 afterwards, so a handler only ever sees what it may change.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from migrator.controller.managers import admin_manual_assignment
from migrator.controller.managers.change import AdminChange, AdminReply
from migrator.controller.protocol import kafka_errors as E
from migrator.controller.protocol.kio_apis import schema_module
from migrator.controller.security.listener_security import current_caller
from migrator.errors import BadInputError, FencedError, ZkKraftError
from migrator.kraft.records import kafka_to_uuid

__all__ = ["handle", "refuse_all"]

UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
INVALID_REQUEST = 42
UNKNOWN_TOPIC_ID = 100
MISMATCHED_ENDPOINT_TYPE = 114
UNSUPPORTED_ENDPOINT_TYPE = 115
#: KIP-919's DescribeCluster endpoint types (Kafka's `EndpointType`): a controller serves CONTROLLER only.
ENDPOINT_BROKER = 1
ENDPOINT_CONTROLLER = 2
_ENDPOINT_NAMES = {ENDPOINT_BROKER: "BROKER", ENDPOINT_CONTROLLER: "CONTROLLER"}
ZERO = datetime.timedelta(0)
_NO_ID = uuid.UUID(int=0)

#: Kafka's ApiError for `plan_change`'s refusals, told apart by what they name.
_REFUSALS: list[tuple[str, int]] = [
    ("already exists", TOPIC_ALREADY_EXISTS),
    ("collides with", INVALID_TOPIC_EXCEPTION),
    ("topic name", INVALID_TOPIC_EXCEPTION),
    ("does not exist", UNKNOWN_TOPIC_OR_PARTITION),
    ("replication factor", INVALID_REPLICATION_FACTOR),
    ("rack", INVALID_REPLICATION_FACTOR),
    ("no broker is registered", INVALID_REPLICATION_FACTOR),
    ("partitions", INVALID_PARTITIONS),
    ("config", INVALID_CONFIG),
]


def code_of(e: BadInputError) -> int:
    code = getattr(e, "kafka_code", None)
    if isinstance(code, int):
        return code
    text = str(e)
    return next((code for part, code in _REFUSALS if part in text), INVALID_REQUEST)


Ran = tuple[int, str | None, AdminReply | None]  # error code, message, the reply when applied


def run_changes(apply: Callable[..., Any], changes: Sequence[AdminChange], validate_only: bool) -> list[Ran]:
    """Kafka's (error code, message) for each change of one request, handed together to the
    driver's admin path: the valid ones are appended as one batch, the others answered alone; a
    failure of the whole batch (fenced, ZooKeeper out of reach) answers every change."""
    if not changes:
        return []
    try:
        outcomes = apply(list(changes), validate_only)
    except FencedError as e:
        return [(E.NOT_CONTROLLER, str(e), None)] * len(changes)
    except BadInputError as e:
        return [(code_of(e), str(e), None)] * len(changes)
    except ZkKraftError as e:
        return [(E.UNKNOWN_SERVER_ERROR, str(e), None)] * len(changes)
    return [
        (code_of(o), str(o), None) if isinstance(o, BadInputError) else (E.NONE, None, o) for o in outcomes
    ]


def kio_module(api_key: int, version: int, kind: str) -> Any:
    return schema_module(api_key, version, kind)


def build(cls: Any, **kw: Any) -> Any:
    """An entity of any version from the superset of fields: the ones this version lacks are dropped."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in kw.items() if k in names})


def error(code: int) -> ErrorCode:
    return ErrorCode(code)


def handle(service: Any, api_key: int, version: int, request: Any) -> Any:
    if api_key == 3:
        return _metadata(service, version, request)
    if api_key == 19:
        return _create_topics(service, version, request)
    if api_key == 20:
        return _delete_topics(service, version, request)
    if api_key == 60:
        return _describe_cluster(service, version, request)
    module = _handler_module(api_key)
    if module is not None:
        return module.handle(service, api_key, version, request)
    raise ValueError(f"apiKey {api_key} is not an admin API")


#: The admin APIs answered by a module of their own (imported on first use), for `handle` and `refuse_all`
_HANDLER_MODULES = {
    **dict.fromkeys((32, 33, 37, 44), "admin_alter_api"),
    **dict.fromkeys((29, 30, 31), "admin_acls_api"),
    43: "admin_elect_api",
    **dict.fromkeys((45, 46), "admin_reassign_api"),
    **dict.fromkeys((48, 49), "admin_quotas_api"),
    **dict.fromkeys((50, 51), "admin_scram_api"),
    57: "admin_features_api",
    67: "admin_producer_ids_api",
    73: "admin_assign_dirs_api",
}


def _handler_module(api_key: int) -> Any:
    name = _HANDLER_MODULES.get(api_key)
    return None if name is None else importlib.import_module(f"migrator.controller.apis.{name}")


def refuse_all(api_key: int, version: int, request: Any, code: int) -> Any:
    """The whole request refused with `code`, each item echoed (Kafka's getErrorResponse)."""
    if api_key == 3:
        return _metadata_response(version, None, [], [])
    module = _handler_module(api_key)
    if module is not None:
        return module.refuse_all(api_key, version, request, code)
    if api_key == 60:
        m = kio_module(60, version, "response")
        return build(
            m.DescribeClusterResponse, throttle_time=ZERO, error_code=error(code), cluster_id="", brokers=()
        )
    if api_key == 19:
        names = [t.name for t in getattr(request, "topics", ())]
        return _create_response(version, [(n, code, None, None) for n in names])
    items = _delete_items(request) if request is not None else []
    return _delete_response(version, [(n, i, code, None) for n, i in items])


# --- Metadata --------------------------------------------------------------------------------------


def endpoint(service: Any) -> tuple[str, int]:
    """The endpoint this controller names itself by: the one of the listener the request arrived on
    (Kafka names the node's endpoint for the request's listener), else the service's first listener."""
    caller = current_caller()
    if caller is not None and caller.endpoint is not None:
        return caller.endpoint
    return getattr(service, "advertised", None) or ("", -1)


def _metadata(service: Any, version: int, request: Any) -> Any:
    host, port = endpoint(service)
    node = (service.core.config.node_id, host, port)
    if service.soft_start or getattr(service, "admin", None) is None:
        return _metadata_response(version, node, [], [], service.core.config.cluster_id)
    image = service.image
    asked = request.topics
    if asked is None or (version == 0 and not asked):
        names: list[str | None] = sorted(image.topics)
        wanted: list[tuple[str | None, uuid.UUID | None]] = [(n, None) for n in names]
    else:
        wanted = [(t.name, getattr(t, "topic_id", None)) for t in asked]
    by_id = {kafka_to_uuid(t.topic_id): t for t in image.topics.values() if t.topic_id}
    found, missing = [], []
    for name, tid in wanted:
        topic = image.topics.get(name) if name else by_id.get(tid) if tid and tid != _NO_ID else None
        if topic is None:
            missing.append((name, tid))
        else:
            found.append(topic)
    return _metadata_response(version, node, found, missing, service.core.config.cluster_id)


def _metadata_response(
    version: int,
    node: tuple[int, str, int] | None,
    found: list[Any],
    missing: list[tuple[str | None, uuid.UUID | None]],
    cluster_id: str | None = None,
) -> Any:
    m = kio_module(3, version, "response")
    brokers = (
        ()
        if node is None
        else (build(m.MetadataResponseBroker, node_id=node[0], host=node[1], port=node[2]),)
    )
    topics = []
    for t in found:
        parts = tuple(
            build(
                m.MetadataResponsePartition,
                error_code=error(E.NONE),
                partition_index=p.partition,
                leader_id=p.leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=tuple(p.replicas),
                isr_nodes=tuple(p.isr),
                offline_replicas=(),
            )
            for _, p in sorted(t.partitions.items())
        )
        topics.append(
            build(
                m.MetadataResponseTopic,
                error_code=error(E.NONE),
                name=t.name,
                topic_id=kafka_to_uuid(t.topic_id) if t.topic_id else _NO_ID,
                is_internal=t.name == "__consumer_offsets",
                partitions=parts,
            )
        )
    for name, tid in missing:
        code = UNKNOWN_TOPIC_OR_PARTITION if name else UNKNOWN_TOPIC_ID
        topics.append(
            build(
                m.MetadataResponseTopic,
                error_code=error(code),
                name=name if name is not None or version >= 10 else "",
                topic_id=tid or _NO_ID,
                partitions=(),
            )
        )
    return build(
        m.MetadataResponse,
        throttle_time=ZERO,
        brokers=brokers,
        cluster_id=cluster_id,
        controller_id=node[0] if node is not None else -1,
        topics=tuple(topics),
    )


# --- DescribeCluster (KIP-919: a controller lists the controllers, itself) ---------------------------


def _describe_cluster(service: Any, version: int, request: Any) -> Any:
    m = kio_module(60, version, "response")
    if admin_hook(service) is None:
        return refuse_all(60, version, request, E.NOT_CONTROLLER)
    refused = _endpoint_refusal(version, int(getattr(request, "endpoint_type", ENDPOINT_BROKER)))
    if refused is not None:
        code, message = refused
        return build(
            m.DescribeClusterResponse,
            throttle_time=ZERO,
            error_code=error(code),
            error_message=message,
            cluster_id="",  # Kafka sets only the error on a refusal: the rest keeps its schema default
            brokers=(),
        )
    host, port = endpoint(service)
    node_id = service.core.config.node_id
    return build(
        m.DescribeClusterResponse,
        throttle_time=ZERO,
        error_code=error(E.NONE),
        endpoint_type=ENDPOINT_CONTROLLER,
        cluster_id=service.core.config.cluster_id,
        controller_id=node_id,
        brokers=(build(m.DescribeClusterBroker, broker_id=node_id, host=host, port=port),),
    )


def _endpoint_refusal(version: int, asked: int) -> tuple[int, str] | None:
    """Kafka 3.9's answer (`AuthHelper.computeDescribeClusterResponse`) to a DescribeCluster asking
    a controller for another endpoint type: INVALID_REQUEST at v0 (which has no endpoint type, so it
    always asks for BROKER), MISMATCHED_ENDPOINT_TYPE or UNSUPPORTED_ENDPOINT_TYPE from v1."""
    if asked == ENDPOINT_CONTROLLER:
        return None
    if asked not in _ENDPOINT_NAMES:
        code = E.INVALID_REQUEST if version == 0 else UNSUPPORTED_ENDPOINT_TYPE
        return code, f"Unsupported endpoint type {asked}"
    code = E.INVALID_REQUEST if version == 0 else MISMATCHED_ENDPOINT_TYPE
    return code, (
        "The request was sent to an endpoint of type CONTROLLER, "
        f"but we wanted an endpoint of type {_ENDPOINT_NAMES[asked]}"
    )


# --- CreateTopics -----------------------------------------------------------------------------------

_Created = tuple[str, int, str | None, Any]  # name, error, message, (topic id, partitions, rf) or None


def admin_hook(service: Any) -> Callable[..., Any] | None:
    hook = getattr(service, "admin", None)
    return None if service.soft_start or service.fenced else hook


def _create_topics(service: Any, version: int, request: Any) -> Any:
    apply = admin_hook(service)
    if apply is None:
        return refuse_all(19, version, request, E.NOT_CONTROLLER)
    counts = Counter(t.name for t in request.topics)
    validate_only = bool(getattr(request, "validate_only", False))
    out: list[_Created | None] = []
    changes: list[tuple[int, str, AdminChange]] = []  # (index in out, name, change)
    for t in request.topics:
        if counts[t.name] > 1:
            out.append((t.name, INVALID_REQUEST, "Duplicate topic name.", None))
            continue
        checked = _create_change(service, t)
        if isinstance(checked, AdminChange):
            changes.append((len(out), t.name, checked))
            out.append(None)
        else:
            out.append(checked)
    ran = run_changes(apply, [c for _, _, c in changes], validate_only)
    for (i, name, _change), (code, message, reply) in zip(changes, ran, strict=True):
        made = None
        if reply is not None:
            tid = kafka_to_uuid(reply.topic_id) if reply.topic_id and not validate_only else _NO_ID
            made = (tid, reply.partitions or -1, reply.replication_factor or -1)
        out[i] = (name, code, message, made)
    return _create_response(version, [o for o in out if o is not None])


def _create_change(service: Any, t: Any) -> AdminChange | _Created:
    """The change one CreatableTopic asks for, or its refusal found before placement."""
    assignment = None
    if t.assignments:
        assignment, refused = admin_manual_assignment.check(service.image, t)
        if refused is not None:
            return (t.name, refused[0], refused[1], None)
    configs = {c.name: c.value for c in t.configs}
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        return (
            t.name,
            INVALID_CONFIG,
            f"Null value not supported for topic configs: {', '.join(nulls)}",
            None,
        )
    return AdminChange(
        kind="create-topic",
        topic=t.name,
        partitions=None if t.num_partitions == -1 else int(t.num_partitions),
        replication_factor=None if t.replication_factor == -1 else int(t.replication_factor),
        configs={k: v for k, v in configs.items() if v is not None},
        assignment=assignment,
    )


def _create_response(version: int, results: list[_Created]) -> Any:
    m = kio_module(19, version, "response")
    topics = []
    for name, code, message, made in results:
        tid, parts, rf = made if made is not None else (_NO_ID, -1, -1)
        topics.append(
            build(
                m.CreatableTopicResult,
                name=name,
                topic_id=tid,
                error_code=error(code),
                error_message=message,
                topic_config_error_code=0,
                num_partitions=parts,
                replication_factor=rf,
                configs=(),
            )
        )
    return build(m.CreateTopicsResponse, throttle_time=ZERO, topics=tuple(topics))


# --- DeleteTopics -----------------------------------------------------------------------------------


def _delete_items(request: Any) -> list[tuple[str | None, uuid.UUID | None]]:
    if hasattr(request, "topic_names"):
        return [(n, None) for n in request.topic_names]
    return [(t.name, t.topic_id if t.topic_id != _NO_ID else None) for t in request.topics]


def _delete_topics(service: Any, version: int, request: Any) -> Any:
    items = _delete_items(request)
    apply = admin_hook(service)
    if apply is None:
        return refuse_all(20, version, request, E.NOT_CONTROLLER)
    counts = Counter(items)
    out: list[tuple[str | None, uuid.UUID | None, int, str | None]] = []
    changes: list[tuple[int, AdminChange]] = []
    image = service.image
    for name, tid in items:
        if counts[(name, tid)] > 1:
            out.append((name, tid, INVALID_REQUEST, "Duplicate topic name."))
            continue
        if name is None:
            topic = next(
                (x for x in image.topics.values() if x.topic_id and kafka_to_uuid(x.topic_id) == tid), None
            )
            if topic is None:
                out.append((None, tid, UNKNOWN_TOPIC_ID, None))
                continue
            name = topic.name
        elif name not in image.topics:
            out.append((name, tid, UNKNOWN_TOPIC_OR_PARTITION, None))
            continue
        topic_id = image.topics[name].topic_id
        changes.append((len(out), AdminChange(kind="delete-topic", topic=name)))
        out.append((name, kafka_to_uuid(topic_id) if topic_id else tid, E.NONE, None))
    ran = run_changes(apply, [c for _, c in changes], False)
    for (i, _change), (code, message, _reply) in zip(changes, ran, strict=True):
        name, tid, _, _ = out[i]
        out[i] = (name, tid if code == E.NONE else items[i][1], code, message)
    return _delete_response(version, out)


def _delete_response(
    version: int, results: list[tuple[str | None, uuid.UUID | None, int, str | None]]
) -> Any:
    m = kio_module(20, version, "response")
    return build(
        m.DeleteTopicsResponse,
        throttle_time=ZERO,
        responses=tuple(
            build(
                m.DeletableTopicResult,
                name=name if name is not None or version >= 6 else "",
                topic_id=tid or _NO_ID,
                error_code=error(code),
                error_message=message,
            )
            for name, tid, code, message in results
        ),
    )
