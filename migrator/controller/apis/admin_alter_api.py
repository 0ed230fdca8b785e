"""CreatePartitions and IncrementalAlterConfigs on the controller listener: each topic or config
resource becomes one `AdminChange`, and one request's changes go together to the driver's admin path
(see `admin_api`): the valid ones appended as one batch, durable and carried to ZooKeeper before the
answer, the invalid ones answered with their own errors; the legacy AlterConfigs
replaces a resource's dynamic configs. DescribeConfigs reads the image: every topic config Kafka
knows, resolved from the topic's value, the cluster-wide broker default and Kafka's default
(`admin_config_defaults`), and a broker's dynamic configs (the controller knows no broker's static
file)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from migrator.controller.apis.admin_api import (
    INVALID_CONFIG,
    INVALID_REQUEST,
    UNKNOWN_TOPIC_OR_PARTITION,
    ZERO,
    admin_hook,
    build,
    error,
    kio_module,
    run_changes,
)
from migrator.controller.managers import admin_manual_assignment
from migrator.controller.managers.admin_config_defaults import (
    CONFIG_TYPES,
    DEFAULT_CONFIG,
    TOPIC_CONFIGS,
    resolve_topic_config,
)
from migrator.controller.managers.change import AdminChange
from migrator.controller.protocol import kafka_errors as E
from migrator.secrets import is_secret_config

__all__ = ["handle", "refuse_all"]

TOPIC, BROKER = 2, 4  # ConfigResource.Type
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # AlterConfigOp.OpType


def handle(service: Any, api_key: int, version: int, request: Any) -> Any:
    apply = admin_hook(service)
    if apply is None:
        return refuse_all(api_key, version, request, E.NOT_CONTROLLER)
    validate_only = bool(getattr(request, "validate_only", False))
    if api_key == 37:
        return _create_partitions(service, apply, version, request, validate_only)
    if api_key == 32:
        return _describe_configs(service, version, request)
    if api_key == 33:
        return _legacy_alter_configs(service, apply, version, request, validate_only)
    return _alter_configs(service, apply, version, request, validate_only)


def refuse_all(api_key: int, version: int, request: Any, code: int) -> Any:
    if api_key == 32:
        m = kio_module(32, version, "response")
        results = tuple(
            build(
                m.DescribeConfigsResult,
                error_code=error(code),
                error_message=None,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=(),
            )
            for r in getattr(request, "resources", ())
        )
        return build(m.DescribeConfigsResponse, throttle_time=ZERO, results=results)
    if api_key == 37:
        return _partitions_response(version, [(t.name, code, None) for t in getattr(request, "topics", ())])
    items = [(r.resource_type, r.resource_name, code, None) for r in getattr(request, "resources", ())]
    return _configs_response(version, items, api_key)


# --- CreatePartitions -------------------------------------------------------------------------------


def _create_partitions(service: Any, apply: Any, version: int, request: Any, validate_only: bool) -> Any:
    counts = Counter(t.name for t in request.topics)
    out: list[tuple[str, int, str | None]] = []
    changes: list[tuple[int, AdminChange]] = []
    for t in request.topics:
        if counts[t.name] > 1:
            out.append((t.name, INVALID_REQUEST, "Duplicate topic name."))
            continue
        assignment = None
        if t.assignments:
            assignment, refused = admin_manual_assignment.check_added(service.image, t)
            if refused is not None:
                out.append((t.name, *refused))
                continue
        change = AdminChange(
            kind="add-partitions", topic=t.name, partitions=int(t.count), assignment=assignment
        )
        changes.append((len(out), change))
        out.append((t.name, E.NONE, None))
    _fill(out, changes, run_changes(apply, [c for _, c in changes], validate_only))
    return _partitions_response(version, out)


def _fill(out: list[Any], changes: list[tuple[int, AdminChange]], ran: list[Any]) -> None:
    """Each handed-over change's (code, message) into its place in `out` (the item's first fields kept)."""
    for (i, _change), (code, message, _reply) in zip(changes, ran, strict=True):
        out[i] = (*out[i][:-2], code, message)


def _partitions_response(version: int, results: list[tuple[str, int, str | None]]) -> Any:
    m = kio_module(37, version, "response")
    return build(
        m.CreatePartitionsResponse,
        throttle_time=ZERO,
        results=tuple(
            build(m.CreatePartitionsTopicResult, name=n, error_code=error(c), error_message=msg)
            for n, c, msg in results
        ),
    )


# --- IncrementalAlterConfigs ------------------------------------------------------------------------


def _alter_configs(service: Any, apply: Any, version: int, request: Any, validate_only: bool) -> Any:
    counts = Counter((int(r.resource_type), r.resource_name) for r in request.resources)
    out: list[tuple[int, str, int, str | None]] = []
    changes: list[tuple[int, AdminChange]] = []
    for r in request.resources:
        kind, name = int(r.resource_type), r.resource_name
        if counts[(kind, name)] > 1:
            out.append((kind, name, INVALID_REQUEST, "Duplicate resource."))
            continue
        current = _current(service, kind, name)
        try:
            sets, deletes = _incremental(kind, current, r.configs)
        except ValueError as e:
            out.append((kind, name, INVALID_CONFIG, str(e)))
            continue
        _alter_one(service, out, changes, kind, name, sets, deletes)
    _fill(out, changes, run_changes(apply, [c for _, c in changes], validate_only))
    return _configs_response(version, out, 44)


def _legacy_alter_configs(service: Any, apply: Any, version: int, request: Any, validate_only: bool) -> Any:
    """AlterConfigs (33): the resource's dynamic configs become exactly the request's; the rest are removed."""
    counts = Counter((int(r.resource_type), r.resource_name) for r in request.resources)
    out: list[tuple[int, str, int, str | None]] = []
    changes: list[tuple[int, AdminChange]] = []
    for r in request.resources:
        kind, name = int(r.resource_type), r.resource_name
        if counts[(kind, name)] > 1:
            out.append((kind, name, INVALID_REQUEST, "Duplicate resource."))
            continue
        sets = {c.name: c.value for c in r.configs if c.value is not None}
        deletes = [k for k in _current(service, kind, name) if k not in sets]
        _alter_one(service, out, changes, kind, name, sets, deletes)
    _fill(out, changes, run_changes(apply, [c for _, c in changes], validate_only))
    return _configs_response(version, out, 33)


#: Kafka's LIST-typed configs APPEND and SUBTRACT work on, with their defaults (the value they start from).
_LISTS = {
    "cleanup.policy": "delete",
    "log.cleanup.policy": "delete",
    "follower.replication.throttled.replicas": "",
    "leader.replication.throttled.replicas": "",
}


def _current(service: Any, kind: int, name: str) -> dict[str, str]:
    own = service.image.configs.get(("TOPIC" if kind == TOPIC else "BROKER", name))
    return dict(own.configs) if own else {}


def _incremental(kind: int, current: dict[str, str], configs: Any) -> tuple[dict[str, str], list[str]]:
    """Kafka's ConfigurationControlManager: SET/DELETE as given; APPEND/SUBTRACT only on LIST configs,
    on the dynamic value (or the default), items kept in order and not repeated."""
    sets: dict[str, str] = {}
    deletes: list[str] = []
    for c in configs:
        op = int(c.config_operation)
        if op == SET and c.value is not None:
            sets[c.name] = c.value
        elif op in (SET, DELETE):
            deletes.append(c.name)
        elif op in (APPEND, SUBTRACT):
            verb = "APPEND" if op == APPEND else "SUBTRACT"
            if c.name not in _LISTS:
                raise ValueError(f"Can't {verb} to key {c.name} because its type is not LIST.")
            old = sets.get(c.name, current.get(c.name, _LISTS[c.name]))
            items = [x for x in old.split(",") if x]
            for value in (c.value or "").split(","):
                if op == APPEND and value not in items:
                    items.append(value)
                elif op == SUBTRACT and value in items:
                    items.remove(value)
            sets[c.name] = ",".join(items)
        else:
            raise ValueError(f"Unknown operation {op} for config {c.name}")
    return sets, deletes


def _alter_one(
    service: Any,
    out: list[tuple[int, str, int, str | None]],
    changes: list[tuple[int, AdminChange]],
    kind: int,
    name: str,
    sets: dict[str, str],
    deletes: list[str],
) -> None:
    """One resource's answer into `out`, and its change (if it has one) into `changes`."""
    if kind == TOPIC:
        change = AdminChange(kind="alter-topic-config", topic=name, configs=sets, delete_configs=deletes)
    elif kind == BROKER:
        change = AdminChange(kind="alter-broker-config", broker=name, configs=sets, delete_configs=deletes)
    else:
        out.append((kind, name, INVALID_REQUEST, f"Unexpected resource type {kind}"))
        return
    if not sets and not deletes and (kind != TOPIC or name in service.image.topics):
        out.append((kind, name, E.NONE, None))  # nothing to change (Kafka appends no record either)
        return
    changes.append((len(out), change))
    out.append((kind, name, E.NONE, None))


def _configs_response(version: int, results: list[tuple[int, str, int, str | None]], api_key: int) -> Any:
    m = kio_module(api_key, version, "response")
    return build(
        m.IncrementalAlterConfigsResponse if api_key == 44 else m.AlterConfigsResponse,
        throttle_time=ZERO,
        responses=tuple(
            build(
                m.AlterConfigsResourceResponse,
                error_code=error(c),
                error_message=msg,
                resource_type=kind,
                resource_name=name,
            )
            for kind, name, c, msg in results
        ),
    )


# --- DescribeConfigs --------------------------------------------------------------------------------

DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3  # ConfigSource
_sensitive = is_secret_config  # Kafka masks PASSWORD-typed configs: the one rule, migrator.secrets


def _describe_configs(service: Any, version: int, request: Any) -> Any:
    m = kio_module(32, version, "response")
    image = service.image
    synonyms = bool(getattr(request, "include_synonyms", False))
    results = []
    for r in request.resources:
        kind, name, keys = int(r.resource_type), r.resource_name, r.configuration_keys
        code, message = E.NONE, None
        entries: list[tuple[str, str, int, list[tuple[str, str, int]]]] = []
        if kind == TOPIC:
            if name not in image.topics:
                code, message = UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist"
            else:
                own = image.configs.get(("TOPIC", name))
                topic = own.configs if own else {}
                default = image.configs.get(("BROKER", ""))
                cluster = default.configs if default else {}
                # Every topic config Kafka knows, resolved; configs Kafka does not know, as set.
                for k in sorted(set(TOPIC_CONFIGS) | set(topic)):
                    if k in TOPIC_CONFIGS:
                        entries.append((k, *resolve_topic_config(k, topic, cluster)))
                    else:
                        entries.append(
                            (k, topic[k], DYNAMIC_TOPIC_CONFIG, [(k, topic[k], DYNAMIC_TOPIC_CONFIG)])
                        )
        elif kind == BROKER and (name == "" or name.isdigit()):
            own = image.configs.get(("BROKER", name))
            default = image.configs.get(("BROKER", "")) if name else None
            mine = own.configs if own else {}
            base = default.configs if default else {}
            src = DYNAMIC_BROKER_CONFIG if name else DYNAMIC_DEFAULT_BROKER_CONFIG
            for k in sorted(set(mine) | set(base)):
                chain = [(k, mine[k], src)] if k in mine else []
                chain += [(k, base[k], DYNAMIC_DEFAULT_BROKER_CONFIG)] if k in base else []
                entries.append((k, chain[0][1], chain[0][2], chain))
        else:
            code, message = INVALID_REQUEST, f"Unexpected resource type {kind} or name {name!r}"
        configs = tuple(
            build(
                m.DescribeConfigsResourceResult,
                name=k,
                value=None if _sensitive(k) else v,
                read_only=False,
                config_source=source,
                is_default=source == DEFAULT_CONFIG,  # v0 says only this (no ConfigSource)
                is_sensitive=_sensitive(k),
                synonyms=tuple(
                    build(m.DescribeConfigsSynonym, name=sn, value=None if _sensitive(sn) else sv, source=ss)
                    for sn, sv, ss in (chain if synonyms else [])
                ),
                config_type=CONFIG_TYPES.get(TOPIC_CONFIGS[k][0], 0)
                if kind == TOPIC and k in TOPIC_CONFIGS
                else 0,
                documentation=None,
            )
            for k, v, source, chain in entries
            if keys is None or k in keys
        )
        results.append(
            build(
                m.DescribeConfigsResult,
                error_code=error(code),
                error_message=message,
                resource_type=kind,
                resource_name=name,
                configs=configs,
            )
        )
    return build(m.DescribeConfigsResponse, throttle_time=ZERO, results=tuple(results))
