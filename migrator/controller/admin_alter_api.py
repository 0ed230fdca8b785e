"""CreatePartitions and IncrementalAlterConfigs on the controller listener: each topic or config
resource becomes one `AdminChange` for the driver's admin path (see `admin_api`), so each is applied
whole or not at all, durable and carried to ZooKeeper before the answer."""

from __future__ import annotations

from collections import Counter
from typing import Any

from migrator.controller import kafka_errors as E
from migrator.controller.admin_api import (
    INVALID_CONFIG,
    INVALID_REQUEST,
    ZERO,
    admin_hook,
    build,
    error,
    kio_module,
    run_change,
)
from migrator.migration.admin import AdminChange

__all__ = ["handle", "refuse_all"]

TOPIC, BROKER = 2, 4  # ConfigResource.Type
SET, DELETE = 0, 1  # AlterConfigOp.OpType (APPEND 2 and SUBTRACT 3 are refused)


def handle(service: Any, api_key: int, version: int, request: Any) -> Any:
    apply = admin_hook(service)
    if apply is None:
        return refuse_all(api_key, version, request, E.NOT_CONTROLLER)
    validate_only = bool(getattr(request, "validate_only", False))
    if api_key == 37:
        return _create_partitions(apply, version, request, validate_only)
    return _alter_configs(apply, version, request, validate_only)


def refuse_all(api_key: int, version: int, request: Any, code: int) -> Any:
    if api_key == 37:
        return _partitions_response(version, [(t.name, code, None) for t in getattr(request, "topics", ())])
    items = [(r.resource_type, r.resource_name, code, None) for r in getattr(request, "resources", ())]
    return _configs_response(version, items)


# --- CreatePartitions -------------------------------------------------------------------------------


def _create_partitions(apply: Any, version: int, request: Any, validate_only: bool) -> Any:
    counts = Counter(t.name for t in request.topics)
    out: list[tuple[str, int, str | None]] = []
    for t in request.topics:
        if counts[t.name] > 1:
            out.append((t.name, INVALID_REQUEST, "Duplicate topic name."))
        elif t.assignments:
            out.append((t.name, INVALID_REQUEST, "manual replica assignments are not taken by zk2kraft yet"))
        else:
            change = AdminChange(kind="add-partitions", topic=t.name, partitions=int(t.count))
            out.append((t.name, *run_change(apply, change, validate_only)))
    return _partitions_response(version, out)


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


def _alter_configs(apply: Any, version: int, request: Any, validate_only: bool) -> Any:
    counts = Counter((int(r.resource_type), r.resource_name) for r in request.resources)
    out: list[tuple[int, str, int, str | None]] = []
    for r in request.resources:
        kind, name = int(r.resource_type), r.resource_name
        if counts[(kind, name)] > 1:
            out.append((kind, name, INVALID_REQUEST, "Duplicate resource."))
            continue
        out.append((kind, name, *_alter_one(apply, kind, name, r.configs, validate_only)))
    return _configs_response(version, out)


def _alter_one(apply: Any, kind: int, name: str, configs: Any, validate_only: bool) -> tuple[int, str | None]:
    sets: dict[str, str] = {}
    deletes: list[str] = []
    for c in configs:
        op = int(c.config_operation)
        if op == SET and c.value is not None:
            sets[c.name] = c.value
        elif op == DELETE or op == SET:
            deletes.append(c.name)
        else:
            return INVALID_CONFIG, f"config {c.name}: APPEND and SUBTRACT are not taken by zk2kraft yet"
    if kind == TOPIC:
        change = AdminChange(kind="alter-topic-config", topic=name, configs=sets, delete_configs=deletes)
    elif kind == BROKER:
        change = AdminChange(kind="alter-broker-config", broker=name, configs=sets, delete_configs=deletes)
    else:
        return INVALID_REQUEST, f"Unexpected resource type {kind}"
    return run_change(apply, change, validate_only)


def _configs_response(version: int, results: list[tuple[int, str, int, str | None]]) -> Any:
    m = kio_module(44, version, "response")
    return build(
        m.IncrementalAlterConfigsResponse,
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
