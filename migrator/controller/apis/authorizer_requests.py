"""Per-resource authorization of the admin requests, with Kafka 3.9's rules: ControllerApis for
CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs and IncrementalAlterConfigs; KafkaApis (a
broker's) for DescribeConfigs and Metadata, which Kafka's controller does not serve.

Kafka narrows each request to the items the caller may act on before the controller sees it and then
adds one error result per refused item; this module does the same around the admin handlers (one call
in ``listener_runtime.dispatch``), so a refused topic or config is never handed to the driver and the
handlers themselves know nothing of ACLs. Items named twice in a request are not authorized here: the
handler answers them INVALID_REQUEST, as Kafka does before it authorizes. Refusals:

- CreateTopics: CREATE on CLUSTER grants every topic, else CREATE on each TOPIC; refused ones get
  TOPIC_AUTHORIZATION_FAILED (29) "Authorization failed.".
- DeleteTopics: DELETE on CLUSTER, else DELETE on each TOPIC (29). A named topic that does not exist is
  answered UNKNOWN_TOPIC_OR_PARTITION only to a caller who may DESCRIBE it (otherwise 29, so absence is
  not disclosed); a topic named by id is echoed with its name only when describable.
- CreatePartitions: ALTER on each TOPIC (29).
- AlterConfigs, IncrementalAlterConfigs, DescribeConfigs: ALTER_CONFIGS / DESCRIBE_CONFIGS on the TOPIC
  (29) or, for BROKER (and BROKER_LOGGER, CLIENT_METRICS) configs, on CLUSTER
  (CLUSTER_AUTHORIZATION_FAILED, 31); see ``api_acls.config_resource_error``.
- Metadata: topics the caller may not DESCRIBE are left out of an all-topics answer; named ones are
  answered 29 without saying whether they exist; ones named by id are answered 29 without their name.

An API of these kinds that this module does not know is refused whole with 31: a new per-resource API
must be a decision, not an accident (``listener_security`` lets these kinds through to here).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from migrator.controller.apis.refusal import error_response
from migrator.controller.protocol.kio_apis import schema_module
from migrator.controller.protocol.wire import RequestHeader
from migrator.controller.security.api_acls import (
    CLUSTER_AUTHORIZATION_FAILED,
    REQUIRED,
    TOPIC_AUTHORIZATION_FAILED,
    config_resource_error,
)
from migrator.controller.security.listener_security import (
    Caller,
    authorize_resources,
    current_caller,
    may_on_cluster,
)
from migrator.kraft.records import kafka_to_uuid

__all__ = ["GUARDED", "guard"]

UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_TOPIC_ID = 100
_NO_ID = uuid.UUID(int=0)
_MESSAGES = {
    TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
}

Handle = Callable[[Any, int, int, Any], Any]


def _module(api_key: int, version: int) -> Any:
    return schema_module(api_key, version, "response")


def _build(cls: Any, **kw: Any) -> Any:
    """An entity of any version from the superset of fields (those this version lacks are dropped)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in kw.items() if k in names})


def _with_refused(response: Any, field: str, refused: list[Any]) -> Any:
    """The handler's response with the refused items' results after its own (as Kafka appends them)."""
    if not refused:
        return response
    return dataclasses.replace(response, **{field: (*getattr(response, field), *refused)})


def _count(caller: Caller, code: int, n: int) -> None:
    if n and caller.refused is not None:
        reason = (
            "topic_authorization_failed"
            if code == TOPIC_AUTHORIZATION_FAILED
            else "cluster_authorization_failed"
        )
        caller.refused[reason] += n


# --- CreateTopics, CreatePartitions ------------------------------------------------------------------


def _topics(caller: Caller, api_key: int, version: int, request: Any, handle: Handle, service: Any) -> Any:
    op = REQUIRED[api_key].operation
    assert op is not None
    counts = Counter(t.name for t in request.topics)
    single = [t.name for t in request.topics if counts[t.name] == 1]
    grant = REQUIRED[api_key].cluster_grant
    allowed = (
        set(single)
        if grant and may_on_cluster(caller, grant)
        else authorize_resources(caller, op, "TOPIC", single)
    )
    refused_names = [n for n in single if n not in allowed]
    _count(caller, TOPIC_AUTHORIZATION_FAILED, len(refused_names))
    narrowed = dataclasses.replace(
        request, topics=tuple(t for t in request.topics if counts[t.name] > 1 or t.name in allowed)
    )
    response = handle(service, api_key, version, narrowed)
    m = _module(api_key, version)
    code = ErrorCode(TOPIC_AUTHORIZATION_FAILED)
    if api_key == 19:
        refused = [
            _build(
                m.CreatableTopicResult,
                name=n,
                topic_id=_NO_ID,
                error_code=code,
                error_message="Authorization failed.",
                topic_config_error_code=0,
                num_partitions=-1,
                replication_factor=-1,
                configs=(),
            )
            for n in refused_names
        ]
        return _with_refused(response, "topics", refused)
    refused = [
        _build(m.CreatePartitionsTopicResult, name=n, error_code=code, error_message=None)
        for n in refused_names
    ]
    return _with_refused(response, "results", refused)


# --- DeleteTopics ------------------------------------------------------------------------------------


def _delete_topics(
    caller: Caller, api_key: int, version: int, request: Any, handle: Handle, service: Any
) -> Any:
    by_name = hasattr(request, "topic_names")  # v1-5: names only; v6: (name, id) states
    items: list[tuple[str | None, uuid.UUID | None]] = (
        [(n, None) for n in request.topic_names]
        if by_name
        else [(t.name, t.topic_id if t.topic_id != _NO_ID else None) for t in request.topics]
    )
    counts = Counter(items)
    image = service.image
    names_of = {kafka_to_uuid(t.topic_id): t.name for t in image.topics.values() if t.topic_id}
    # the topic each single item names (None: an unknown id, left to the handler)
    target = {it: (it[0] if it[0] is not None else names_of.get(it[1])) for it in items if counts[it] == 1}
    wanted = {n for n in target.values() if n is not None}
    if may_on_cluster(caller, "DELETE"):
        deletable = describable = wanted
    else:
        deletable = authorize_resources(caller, "DELETE", "TOPIC", wanted)
        describable = authorize_resources(caller, "DESCRIBE", "TOPIC", wanted - deletable) | deletable
    refused: list[tuple[str | None, uuid.UUID | None]] = []
    keep: list[int] = []
    for i, it in enumerate(items):
        name = target.get(it)
        if counts[it] > 1 or name is None or name in deletable:
            keep.append(i)
        elif it[0] is not None and name in describable and name not in image.topics:
            keep.append(i)  # the caller may know it is absent: the handler says UNKNOWN_TOPIC_OR_PARTITION
        elif it[0] is None:
            refused.append((name if name in describable else None, it[1]))
        else:
            refused.append((name, None))
    _count(caller, TOPIC_AUTHORIZATION_FAILED, len(refused))
    if by_name:
        narrowed = dataclasses.replace(request, topic_names=tuple(request.topic_names[i] for i in keep))
    else:
        narrowed = dataclasses.replace(request, topics=tuple(request.topics[i] for i in keep))
    response = handle(service, 20, version, narrowed)
    m = _module(20, version)
    results = [
        _build(
            m.DeletableTopicResult,
            name=n if n is not None or version >= 6 else "",
            topic_id=tid or _NO_ID,
            error_code=ErrorCode(TOPIC_AUTHORIZATION_FAILED),
            error_message=_MESSAGES[TOPIC_AUTHORIZATION_FAILED],
        )
        for n, tid in refused
    ]
    return _with_refused(response, "responses", results)


# --- AlterConfigs, IncrementalAlterConfigs, DescribeConfigs ------------------------------------------


def _configs(caller: Caller, api_key: int, version: int, request: Any, handle: Handle, service: Any) -> Any:
    auth = caller.authorizer
    assert auth is not None
    key = lambda r: (int(r.resource_type), r.resource_name)  # noqa: E731
    # DescribeConfigs answers every resource it is asked; the alters answer a repeated one INVALID_REQUEST
    counts = Counter(key(r) for r in request.resources) if api_key != 32 else Counter()
    keep, refused = [], []
    for r in request.resources:
        kind, name = key(r)
        code = (
            None
            if counts[(kind, name)] > 1
            else config_resource_error(auth, caller.principal, caller.host, api_key, kind, name)
        )
        if code:
            refused.append((r, code))
        else:
            keep.append(r)
    for code in (TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED):
        _count(caller, code, sum(1 for _, c in refused if c == code))
    response = handle(service, api_key, version, dataclasses.replace(request, resources=tuple(keep)))
    m = _module(api_key, version)
    common = [
        dict(
            error_code=ErrorCode(code),
            error_message=_MESSAGES[code],
            resource_type=r.resource_type,
            resource_name=r.resource_name,
        )
        for r, code in refused
    ]
    if api_key == 32:
        return _with_refused(
            response, "results", [_build(m.DescribeConfigsResult, configs=(), **c) for c in common]
        )
    return _with_refused(response, "responses", [_build(m.AlterConfigsResourceResponse, **c) for c in common])


# --- Metadata ----------------------------------------------------------------------------------------


def _metadata(caller: Caller, api_key: int, version: int, request: Any, handle: Handle, service: Any) -> Any:
    response = handle(service, 3, version, request)
    asked = request.topics
    all_topics = asked is None or (version == 0 and not asked)
    names = [t.name for t in response.topics if t.name]
    describable = authorize_resources(caller, "DESCRIBE", "TOPIC", names)
    asked_by_name = set() if all_topics else {t.name for t in asked if t.name}
    out = []
    hidden = 0
    for t in response.topics:
        if t.name is None or t.name in describable or int(t.error_code) == UNKNOWN_TOPIC_ID:
            out.append(t)
        elif all_topics:
            continue  # left out, not refused: Kafka lists only what the caller may see
        else:
            hidden += 1
            by_id = t.name not in asked_by_name
            out.append(
                dataclasses.replace(
                    t,
                    error_code=ErrorCode(TOPIC_AUTHORIZATION_FAILED),
                    name=None if by_id else t.name,
                    topic_id=t.topic_id if by_id else _NO_ID,
                    is_internal=False,
                    partitions=(),
                )
            )
    _count(caller, TOPIC_AUTHORIZATION_FAILED, hidden)
    return dataclasses.replace(response, topics=tuple(out))


# --- the one entry --------------------------------------------------------------------------------


_PER_RESOURCE = ("topics", "configs", "describe_filter")  # api_acls.REQUIRED kinds checked here

#: apiKey -> its check; each takes (caller, api_key, version, request, handle, service)
GUARDED: dict[int, Callable[..., Any]] = {
    3: _metadata,
    19: _topics,
    20: _delete_topics,
    32: _configs,
    33: _configs,
    37: _topics,
    44: _configs,
}


def guard(service: Any, api_key: int, version: int, request: Any, handle: Handle) -> Any:
    """``handle(service, api_key, version, request)`` on the part of the request the caller may act on,
    with the refused items' errors added to its response. Without an authorizer on the listener (or
    outside a listener) the request goes through whole."""
    caller = current_caller()
    req = REQUIRED.get(api_key)
    if caller is None or caller.authorizer is None or req is None or req.kind not in _PER_RESOURCE:
        return handle(service, api_key, version, request)
    check = GUARDED.get(api_key)
    if check is None:
        _count(caller, CLUSTER_AUTHORIZATION_FAILED, 1)
        header = RequestHeader(api_key, version, 0, None)
        return error_response(header, CLUSTER_AUTHORIZATION_FAILED, request)
    return check(caller, api_key, version, request, handle, service)
